//! Packet-path metering: the three-colour markers of RFC 2697 ([`SrTcm`]),
//! RFC 2698 ([`TrTcm`]) and RFC 4115 ([`TrTcm4115`]), with bytes as cost.
//!
//! Each bucket of `S` bytes refilled at `R` bytes per second is a GCRA (see
//! [`Gcra`](crate::Gcra)) with `T = 1/R` per byte and a theoretical arrival
//! time `TAT`: it holds `B` bytes iff `max(TAT, now) + B·T − now ≤ S·T`, and
//! taking them sets `TAT ← max(TAT, now) + B·T`. The rates are converted
//! once through [`Quota`](crate::Quota): no division and no floating point
//! per packet; between two packets a bucket gains exactly `R · Δt` bytes.
//!
//! A packet larger than a bucket is never taken from it, as the RFCs say; a
//! packet of 0 bytes keeps its colour. `now` must not go backwards for a
//! flow; if it does, the buckets look emptier (fewer greens, never more).
//!
//! A flow is 16 bytes for every meter: [`Flow`] (shared through `&self`,
//! each word changed by compare-and-swap) or [`LocalFlow`] (single owner).
//! Each bucket on its own is a linearizable GCRA, so under any interleaving
//! over packet times `[t₁, t₂]` (`t = t₂ − t₁`; loom-checked):
//!
//! | meter | green bytes ≤ | green + yellow bytes ≤ | yellow bytes ≤ |
//! |---|---|---|---|
//! | srTCM | `CBS + CIR·t` | `CBS + EBS + CIR·t` | |
//! | trTCM | `CBS + CIR·t` | `PBS + PIR·t` | |
//! | RFC 4115 | `CBS + CIR·t` | | `EBS + EIR·t` |
//!
//! Packets that do not overlap in time get exactly the RFC's colours; under
//! contention a shared srTCM may withhold yellow allowance, never grant
//! more. `mark_batch*` colour a burst at one `now` exactly as one `mark*`
//! per packet would, storing each changed word once. The design is in
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

/// Marking packets of a flow with a profile ([`SrTcm`], [`TrTcm`],
/// [`TrTcm4115`]).
///
/// `now` is in ticks of the clock the profile was built for; `bytes` is the
/// packet's size. The `_aware` methods take the colour the packet arrived
/// with, the others are colour-blind; the `_local` methods work on a
/// [`LocalFlow`], the others on a shared [`Flow`].
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
    /// The colour of a `bytes`-byte packet at `now`, its bytes taken from
    /// the buckets the colour says.
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

    /// [`mark`](Self::mark) for a packet that arrived coloured `color` (it
    /// never leaves greener than it came).
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

    /// [`mark`](Self::mark) on a single-owner flow.
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

    /// [`mark_aware`](Self::mark_aware) on a single-owner flow.
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

    /// A burst of packets sharing `now`: the colour of `sizes[i]` into
    /// `out[i]`, as one [`mark`](Self::mark) per packet in order.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    /// let mut out = [Color::Green; 4];
    /// meter.mark_batch(&Flow::new(), 0, &[600, 600, 600, 600], &mut out).unwrap();
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
        let pre = arrivals(sizes, None, out)?;
        self.batch_shared(flow, self.times(now), sizes, pre, out);
        Ok(())
    }

    /// [`mark_batch`](Self::mark_batch) for packets that arrived coloured
    /// `pre[i]`.
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, TrTcm4115};
    /// let meter = TrTcm4115::new(1_000, 1_000, 1_000, 1_000, 1_000).unwrap();
    /// let mut out = [Color::Green; 3];
    /// let pre = [Color::Yellow, Color::Green, Color::Red];
    /// meter.mark_batch_aware(&Flow::new(), 0, &[600, 600, 1], &pre, &mut out).unwrap();
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
        let pre = arrivals(sizes, Some(pre), out)?;
        self.batch_shared(flow, self.times(now), sizes, pre, out);
        Ok(())
    }

    /// [`mark_batch`](Self::mark_batch) on a single-owner flow: one load
    /// and one store of the state for the whole burst.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 1_000, 1_000).unwrap();
    /// let mut out = [Color::Green; 3];
    /// meter.mark_batch_local(&mut LocalFlow::new(), 0, &[900, 900, 900], &mut out).unwrap();
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
        let pre = arrivals(sizes, None, out)?;
        self.batch_local(&mut flow.words, self.times(now), sizes, pre, out);
        Ok(())
    }

    /// [`mark_batch_aware`](Self::mark_batch_aware) on a single-owner flow.
    ///
    /// ```
    /// use cellrate::meter::{Color, LocalFlow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 2_000, 2_000, 1_000).unwrap();
    /// let (pre, mut out) = ([Color::Yellow, Color::Green], [Color::Red; 2]);
    /// meter.mark_batch_aware_local(&mut LocalFlow::new(), 0, &[600, 600], &pre, &mut out).unwrap();
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
        let pre = arrivals(sizes, Some(pre), out)?;
        self.batch_local(&mut flow.words, self.times(now), sizes, pre, out);
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

/// A batch's arrival colours, once its slices are checked to have one length.
#[inline(always)]
fn arrivals<'a>(
    sizes: &[u64],
    pre: Option<&'a [Color]>,
    out: &[Color],
) -> Result<Arrivals<'a>, BatchLenMismatch> {
    if sizes.len() != out.len() || pre.is_some_and(|p| p.len() != sizes.len()) {
        return Err(BatchLenMismatch);
    }
    Ok(pre.map_or(Arrivals::BLIND, Arrivals::of))
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
