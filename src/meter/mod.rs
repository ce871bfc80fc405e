//! Packet-path metering: the three-colour markers of RFC 2697 (srTCM),
//! RFC 2698 (trTCM) and RFC 4115, with bytes as cost.
//!
//! Each RFC describes its meter with token buckets of `S` bytes refilled at
//! `R` bytes per second. A bucket is the GCRA of the [`gcra`](crate::gcra)
//! module seen from the other side: with `T = 1/R` (per byte) and a
//! theoretical arrival time `TAT`,
//!
//! ```text
//! tokens(now) = S − max(TAT − now, 0) / T
//! tokens(now) ≥ B   ⇔   max(TAT, now) + B·T − now ≤ S·T
//! take B bytes:         TAT ← max(TAT, now) + B·T
//! ```
//!
//! The rates are converted once into a profile ([`SrTcm`], [`TrTcm`],
//! [`TrTcm4115`]) through [`Quota`](crate::Quota): no division and no
//! floating point per packet. Between two packets a bucket gains exactly
//! `R · Δt` bytes, fractions included, capped at `S`.
//!
//! * **srTCM** (RFC 2697): one rate `CIR` fills the committed bucket (`CBS`)
//!   and spills into the excess bucket (`EBS`) only when the committed one
//!   is full, kept exact by two TATs on one `T`: `C` (committed) and `A`
//!   (both buckets together).
//! * **trTCM** (RFC 2698): two independent buckets, peak (`PIR`, `PBS`) and
//!   committed (`CIR`, `CBS`).
//! * **RFC 4115**: two independent buckets, committed (`CIR`, `CBS`) and
//!   excess (`EIR`, `EBS`); green takes from the committed one only, yellow
//!   from the excess one only.
//!
//! The `mark` methods are colour-blind, the `mark_aware` ones take the
//! packet's colour. A packet larger than a bucket can never be taken from
//! it, as the RFCs say (srTCM: a 9 000-byte frame against `CBS = 1 500` is
//! yellow at best). A packet of 0 bytes keeps its colour. Bucket sizes of 0
//! are allowed where the RFC allows them (srTCM with `EBS = 0` is a
//! two-colour policer). `now` must not go backwards for a flow; if it does,
//! the buckets look emptier than they are (fewer greens, never more).
//!
//! # State and concurrency
//!
//! A flow is two `u64`s, 16 bytes, for every meter: [`Flow`] (shared through
//! `&self`, each word changed by compare-and-swap) and [`LocalFlow`] (single
//! owner). Each TAT is in serial time, so any clock works. Each bucket on its
//! own is a linearizable GCRA: under any interleaving, the bytes taken from
//! a bucket over packet times `[t₁, t₂]` never exceed `S + R·(t₂ − t₁)`:
//!
//! | meter | green bytes ≤ | green + yellow bytes ≤ | yellow bytes ≤ |
//! |---|---|---|---|
//! | srTCM | `CBS + CIR·t` | `CBS + EBS + CIR·t` | |
//! | trTCM | `CBS + CIR·t` | `PBS + PIR·t` | |
//! | RFC 4115 | `CBS + CIR·t` | | `EBS + EIR·t` |
//!
//! The loom models check these bounds in every interleaving. Packets of a
//! flow that do not overlap in time get exactly the RFC's colours; under
//! contention a shared srTCM may withhold yellow allowance, never grant
//! more.
//!
//! `mark_batch*` colour a burst of packets that share one `now`: exactly the
//! colours and the state that one `mark*` per packet gives at that `now`
//! (for a shared flow: when nothing else touches it meanwhile), decided on
//! the buckets' rooms in whole bytes, each changed word written once.
//!
//! How contention is resolved and how batches store their state is in
//! docs/design/meters.md in the repository.

use core::fmt;

use crate::quota::QuotaError;

mod batch;
mod bucket;
mod flow;
mod rfc4115;
mod srtcm;
mod steps;
mod trtcm;

use batch::Arrivals;
use steps::Steps;

pub use flow::{Flow, LocalFlow};
pub use rfc4115::TrTcm4115;
pub use srtcm::SrTcm;
pub use trtcm::TrTcm;

pub(crate) use bucket::Bucket;

// Every profile is a `Meter`.
impl<M: Steps> Meter for M {}

/// The colour of a packet: conforming (green), exceeding the committed
/// profile (yellow), or violating it (red).
///
/// ```
/// use cellrate::meter::Color;
/// assert!(Color::Green < Color::Yellow && Color::Yellow < Color::Red);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum Color {
    /// Within the committed profile.
    #[default]
    Green = 0,
    /// Beyond the committed profile, within the excess or peak one.
    Yellow = 1,
    /// Beyond every profile.
    Red = 2,
}

/// Why a meter profile cannot be built.
///
/// ```
/// use cellrate::meter::{MeterError, TrTcm};
/// // RFC 2698: the peak rate must be at least the committed rate.
/// assert_eq!(TrTcm::new(2_000, 1_500, 1_000, 3_000, 1_000_000).unwrap_err(), MeterError::PeakBelowCommitted);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MeterError {
    /// A rate (with its tick frequency and bucket size) is not a valid quota.
    Quota(QuotaError),
    /// A bucket has a size but a rate of zero: it would never refill.
    ZeroRate,
    /// Every bucket has size zero: nothing could ever pass.
    NoBucket,
    /// trTCM: the peak rate is below the committed rate (RFC 2698 requires
    /// `PIR ≥ CIR`).
    PeakBelowCommitted,
    /// trTCM: a burst size is zero (RFC 2698 requires both above zero).
    ZeroBurst,
    /// A bucket size times the emission interval overflows 64 bits.
    Overflow,
}

impl MeterError {
    /// A one-line explanation.
    ///
    /// ```
    /// use cellrate::meter::MeterError;
    /// assert_eq!(MeterError::NoBucket.as_str(), "meter: every bucket has size zero");
    /// ```
    pub const fn as_str(&self) -> &'static str {
        match self {
            MeterError::Quota(e) => e.as_str(),
            MeterError::ZeroRate => "meter: a bucket with a size has a rate of zero",
            MeterError::NoBucket => "meter: every bucket has size zero",
            MeterError::PeakBelowCommitted => "meter: the peak rate is below the committed rate",
            MeterError::ZeroBurst => "meter: trTCM burst sizes must be above zero",
            MeterError::Overflow => "meter: a bucket size times its interval overflows 64 bits",
        }
    }
}

impl fmt::Display for MeterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for MeterError {}

impl From<QuotaError> for MeterError {
    fn from(e: QuotaError) -> Self {
        MeterError::Quota(e)
    }
}

/// A batch's slices differ in length; nothing was marked.
///
/// ```
/// use cellrate::meter::{BatchLenMismatch, Color, LocalFlow, Meter, SrTcm};
/// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
/// let mut out = [Color::Red; 2];
/// assert_eq!(meter.mark_batch_local(&mut LocalFlow::new(), 0, &[64, 64, 64], &mut out), Err(BatchLenMismatch));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchLenMismatch;

impl fmt::Display for BatchLenMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("meter batch: sizes, colours and results differ in length")
    }
}

/// Marking packets of a flow with a three-colour marker profile
/// ([`SrTcm`], [`TrTcm`], [`TrTcm4115`]).
///
/// `now` is in ticks of the clock whose frequency the profile was built
/// with; `bytes` is the packet's size (any `u64`; sizes above a bucket are
/// handled as the RFCs say, see the [module docs](self)). The `_aware`
/// methods take the colour the packet arrived with (colour-aware mode); the
/// others are colour-blind. The `_local` methods work on a single-owner
/// [`LocalFlow`]; the others on a shared [`Flow`].
///
/// ```
/// use cellrate::meter::{Color, Flow, Meter, SrTcm};
/// // 1 000 B/s, CBS 1 500 B, EBS 1 500 B, on a millisecond clock.
/// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
/// let flow = Flow::new();
/// assert_eq!(meter.mark(&flow, 0, 1_500), Color::Green);
/// assert_eq!(meter.mark(&flow, 0, 1_500), Color::Yellow);
/// assert_eq!(meter.mark(&flow, 0, 64), Color::Red);
/// assert_eq!(meter.mark(&flow, 64, 64), Color::Green); // 64 ms refill 64 bytes
/// ```
pub trait Meter: Steps {
    /// Colour-blind: the colour of a `bytes`-byte packet at `now`, taking
    /// its bytes from the buckets the colour says.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm4115};
    /// let meter = TrTcm4115::new(1_000, 1_500, 1_000, 1_500, 1_000).unwrap();
    /// let flow = Flow::new();
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Green);
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Yellow);
    /// ```
    #[inline]
    fn mark(&self, flow: &Flow, now: u64, bytes: u64) -> Color {
        self.step_shared(flow, self.times(now), bytes, Color::Green)
    }

    /// Colour-aware: as [`mark`](Self::mark) for a packet that arrived
    /// coloured `color` (a packet never leaves greener than it came).
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap();
    /// let flow = Flow::new();
    /// assert_eq!(meter.mark_aware(&flow, 0, 100, Color::Yellow), Color::Yellow);
    /// assert_eq!(meter.mark_aware(&flow, 0, 100, Color::Red), Color::Red);
    /// assert_eq!(meter.mark_aware(&flow, 0, 100, Color::Green), Color::Green);
    /// ```
    #[inline]
    fn mark_aware(&self, flow: &Flow, now: u64, bytes: u64, color: Color) -> Color {
        self.step_shared(flow, self.times(now), bytes, color)
    }

    /// Colour-blind marking of a single-owner flow.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_500, 0, 1_000).unwrap(); // EBS 0: two colours
    /// let mut flow = LocalFlow::new();
    /// assert_eq!(meter.mark_local(&mut flow, 0, 1_500), Color::Green);
    /// assert_eq!(meter.mark_local(&mut flow, 0, 1), Color::Red);
    /// ```
    #[inline]
    fn mark_local(&self, flow: &mut LocalFlow, now: u64, bytes: u64) -> Color {
        self.step(&mut flow.words, self.times(now), bytes, Color::Green)
    }

    /// Colour-aware marking of a single-owner flow.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// // A yellow packet may only use the excess bucket.
    /// assert_eq!(meter.mark_aware_local(&mut flow, 0, 1_500, Color::Yellow), Color::Yellow);
    /// assert_eq!(meter.mark_aware_local(&mut flow, 0, 1, Color::Yellow), Color::Red);
    /// assert_eq!(meter.mark_aware_local(&mut flow, 0, 1, Color::Green), Color::Green);
    /// ```
    #[inline]
    fn mark_aware_local(&self, flow: &mut LocalFlow, now: u64, bytes: u64, color: Color) -> Color {
        self.step(&mut flow.words, self.times(now), bytes, color)
    }

    /// Colour-blind marking of a burst of packets sharing `now`: colour `i`
    /// of `sizes[i]` into `out[i]`, the same colours as one [`mark`](Self::mark)
    /// per packet in order; see the [module docs](self) for how many state
    /// updates that takes.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    /// let flow = Flow::new();
    /// let mut out = [Color::Green; 4];
    /// meter.mark_batch(&flow, 0, &[600, 600, 600, 600], &mut out).unwrap();
    /// assert_eq!(out, [Color::Green, Color::Yellow, Color::Yellow, Color::Red]);
    /// ```
    #[inline]
    fn mark_batch(
        &self,
        flow: &Flow,
        now: u64,
        sizes: &[u64],
        out: &mut [Color],
    ) -> Result<(), BatchLenMismatch> {
        check_lens(sizes.len(), None, out.len())?;
        self.batch_shared(flow, self.times(now), sizes, Arrivals::BLIND, out);
        Ok(())
    }

    /// Colour-aware [`mark_batch`](Self::mark_batch): packet `i` arrived
    /// coloured `pre[i]`.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm4115};
    /// let meter = TrTcm4115::new(1_000, 1_000, 1_000, 1_000, 1_000).unwrap();
    /// let flow = Flow::new();
    /// let mut out = [Color::Green; 3];
    /// let pre = [Color::Yellow, Color::Green, Color::Red];
    /// meter.mark_batch_aware(&flow, 0, &[600, 600, 1], &pre, &mut out).unwrap();
    /// assert_eq!(out, [Color::Yellow, Color::Green, Color::Red]);
    /// ```
    #[inline]
    fn mark_batch_aware(
        &self,
        flow: &Flow,
        now: u64,
        sizes: &[u64],
        pre: &[Color],
        out: &mut [Color],
    ) -> Result<(), BatchLenMismatch> {
        check_lens(sizes.len(), Some(pre.len()), out.len())?;
        self.batch_shared(flow, self.times(now), sizes, Arrivals::of(pre), out);
        Ok(())
    }

    /// Colour-blind burst on a single-owner flow: one load and one store of
    /// the state for the whole burst.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 1_000, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// let mut out = [Color::Green; 3];
    /// meter.mark_batch_local(&mut flow, 0, &[900, 900, 900], &mut out).unwrap();
    /// assert_eq!(out, [Color::Green, Color::Yellow, Color::Red]);
    /// ```
    #[inline]
    fn mark_batch_local(
        &self,
        flow: &mut LocalFlow,
        now: u64,
        sizes: &[u64],
        out: &mut [Color],
    ) -> Result<(), BatchLenMismatch> {
        check_lens(sizes.len(), None, out.len())?;
        self.batch_local(
            &mut flow.words,
            self.times(now),
            sizes,
            Arrivals::BLIND,
            out,
        );
        Ok(())
    }

    /// Colour-aware burst on a single-owner flow.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// let mut out = [Color::Green; 2];
    /// meter.mark_batch_aware_local(&mut flow, 0, &[600, 600], &[Color::Yellow, Color::Green], &mut out).unwrap();
    /// assert_eq!(out, [Color::Yellow, Color::Green]);
    /// ```
    #[inline]
    fn mark_batch_aware_local(
        &self,
        flow: &mut LocalFlow,
        now: u64,
        sizes: &[u64],
        pre: &[Color],
        out: &mut [Color],
    ) -> Result<(), BatchLenMismatch> {
        check_lens(sizes.len(), Some(pre.len()), out.len())?;
        self.batch_local(
            &mut flow.words,
            self.times(now),
            sizes,
            Arrivals::of(pre),
            out,
        );
        Ok(())
    }

    /// Whole bytes in the profile's two buckets at `now` for the state
    /// `words` ([`Flow::words`] or [`LocalFlow::words`]), in the order the
    /// profile documents. For inspection.
    ///
    /// ```
    /// use cellrate::meter::{LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// meter.mark_local(&mut flow, 0, 1_000);
    /// assert_eq!(meter.tokens(flow.words(), 0), [500, 1_500]);
    /// assert_eq!(meter.tokens(flow.words(), 2_000), [1_500, 1_500]);
    /// ```
    fn tokens(&self, words: [u64; 2], now: u64) -> [u64; 2] {
        self.tokens_at(words, self.times(now))
    }
}

/// Checks that a batch's slices have one length.
#[inline(always)]
fn check_lens(sizes: usize, pre: Option<usize>, out: usize) -> Result<(), BatchLenMismatch> {
    if sizes != out || pre.is_some_and(|p| p != sizes) {
        Err(BatchLenMismatch)
    } else {
        Ok(())
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
