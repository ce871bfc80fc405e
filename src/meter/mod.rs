//! Packet-path metering: the three-colour markers of RFC 2697 (srTCM),
//! RFC 2698 (trTCM) and RFC 4115, with bytes as cost.
//!
//! # The math: every token bucket is a GCRA
//!
//! Each RFC describes its meter with token buckets: a bucket of size `S`
//! bytes, refilled at `R` bytes per second, holding `tokens ≤ S`. A bucket is
//! the GCRA of the [`gcra`](crate::gcra) module seen from the other side
//! (see "Token bucket and leaky bucket" there): with the emission interval
//! `T = 1/R` (per byte) and a theoretical arrival time `TAT`,
//!
//! ```text
//! tokens(now) = S − max(TAT − now, 0) / T
//! tokens(now) ≥ B   ⇔   max(TAT, now) + B·T − now ≤ S·T          (S·T: the span)
//! take B bytes:         TAT ← max(TAT, now) + B·T
//! ```
//!
//! The rates are converted **once** into a profile ([`SrTcm`], [`TrTcm`],
//! [`TrTcm4115`]) through [`Quota`](crate::Quota): `T` becomes an integer
//! number of sub-ticks (`now · scale`, see [`quota`](crate::quota)), so the
//! per-packet path is one multiply of `now` per rate, one multiply `B·T`
//! per bucket touched, adds and compares: no division, no floating point.
//! The refill is the fluid (continuous) form of the RFCs' "incremented CIR
//! times per second": between two packets a bucket gains exactly
//! `R · Δt` bytes, fractions included, capped at `S`.
//!
//! * **srTCM** (RFC 2697). One rate `CIR` fills the committed bucket (`CBS`)
//!   and spills into the excess bucket (`EBS`) only when the committed one is
//!   full. That coupling is kept exact with two TATs on one `T = 1/CIR`:
//!   `C` for the committed bucket (span `CBS·T`) and `A` for both buckets
//!   together (span `(CBS + EBS)·T`). The total deficit `A − now` drains at
//!   `CIR` like the committed one, and the excess bucket's deficit is what the
//!   total has beyond the committed one, `max(A, now) − max(C, now)`, which
//!   starts draining only once `C` is full — the RFC's spill rule. Green takes
//!   `B` from both, yellow only from `A`, under
//!   `max(A, now) + B·T − max(C, now) ≤ EBS·T`. `A ≥ C` always holds (in
//!   serial order, as every comparison of TATs).
//! * **trTCM** (RFC 2698). Two independent buckets: peak (`PIR`, `PBS`) and
//!   committed (`CIR`, `CBS`), each its own TAT at its own sub-tick scale.
//! * **RFC 4115.** Two independent buckets: committed (`CIR`, `CBS`) and
//!   excess (`EIR`, `EBS`); green takes from the committed bucket only,
//!   yellow from the excess bucket only.
//!
//! Colour-blind marking is colour-aware marking of a packet pre-coloured
//! green, in all three RFCs; the `mark` methods are the blind ones and the
//! `mark_aware` methods take the packet's colour.
//!
//! A packet larger than a bucket can never be taken from it (`tokens − B < 0`
//! for every `tokens ≤ S`), exactly as the RFCs' tests say: with srTCM a
//! 9 000-byte jumbo frame against `CBS = 1 500` is yellow at best, and red if
//! it also exceeds `EBS`. A packet of 0 bytes keeps its colour (its take
//! can only move a TAT lying in the past up to `now`: the same bucket
//! level). Bucket sizes of 0 are allowed where the RFC allows them (e.g.
//! srTCM with `EBS = 0` is a two-colour policer). `now` must not go
//! backwards for a flow; if it does, the buckets look emptier than they
//! are (fewer greens, never more).
//!
//! # State per flow
//!
//! A flow's state is two `u64`s, 16 bytes, for every meter: [`Flow`]
//! (shared through `&self`, two [`StateWord`](crate::sync)s) and
//! [`LocalFlow`] (single owner, `&mut`). DPDK's `rte_meter` keeps 24 bytes
//! for srTCM (`time`, `tc`, `te`) and 32 bytes for trTCM (`time_tc`,
//! `time_tp`, `tc`, `tp`) (DPDK `lib/meter/rte_meter.h`): a TAT carries the
//! time and the bucket level in one number, so the last-update timestamps
//! disappear. Both TATs need the full 64 bits (each is a serial sub-tick
//! time, `2·TAT + 1` modulo 2⁶⁴, see [`gcra`](crate::gcra#serial-time)), so
//! two buckets cannot share one word without losing exactness. Being
//! serial, they work with any clock (Unix time, a counter that wraps).
//!
//! # Concurrency: what a shared [`Flow`] guarantees
//!
//! Each bucket's word is changed only by a compare-and-swap that re-checks
//! that bucket's inequality on the value it replaces, so **each bucket on
//! its own is a linearizable GCRA**: under any interleaving of any number of
//! packets, with any `now`s, the bytes taken from a bucket over any interval
//! `[t₁, t₂]` of packet times never exceed `S + R·(t₂ − t₁)`. Hence:
//!
//! | meter | green bytes ≤ | green + yellow bytes ≤ | yellow bytes ≤ |
//! |---|---|---|---|
//! | srTCM | `CBS + CIR·t` | `CBS + EBS + CIR·t` | |
//! | trTCM | `CBS + CIR·t` | `PBS + PIR·t` | |
//! | RFC 4115 | `CBS + CIR·t` | | `EBS + EIR·t` |
//!
//! These bounds are the RFCs' own, and the loom models in this module check
//! them in every interleaving. At one instant (all packets with the same
//! `now`) each bucket also never gives more than its size: green ≤ `CBS`,
//! and yellow ≤ `EBS` (srTCM, RFC 4115) or green + yellow ≤ `PBS` (trTCM).
//! When packets of one flow do not overlap in time (one core per flow, or a
//! shared flow that is rarely contended) the colours are exactly the RFC's,
//! because each packet runs the sequential algorithm. Under contention:
//!
//! * **trTCM, RFC 4115** decide bucket by bucket in the RFC's order (trTCM:
//!   peak, then committed; RFC 4115: committed, then excess). Each packet's
//!   colour is the RFC's colour for the bucket levels it saw at its
//!   compare-and-swaps, and each bucket's content is exactly what its
//!   takes left (no byte is lost or invented).
//! * **srTCM**'s buckets are coupled. A packet that finds green possible
//!   first reserves `B` in `A` (checked against `(CBS + EBS)·T`), then takes
//!   `B` from `C`. If a concurrent packet emptied `C` in between, the packet
//!   is yellow if the excess bucket holds it, and otherwise red: its
//!   reservation in `A` is then given back if nobody has touched `A` since,
//!   and otherwise kept, which only makes later packets of that flow *less*
//!   likely to pass. Contention can cost a flow yellow allowance; it never
//!   grants more than the bounds above.
//!
//! # Batches
//!
//! `mark_batch*` colour a burst of packets of one flow that share one
//! `now`, writing colour `i` for packet `i` into the caller's slice: exactly
//! the colours, and exactly the state, that the same packets get one after
//! another through `mark*` at that `now` (for a shared flow: when nothing
//! else touches it meanwhile). `tests/meter.rs` checks this against
//! per-packet calls and against the reference models, for bursts of up to
//! 70 packets that cross the buckets' edges, colour-blind and colour-aware.
//! At one `now` nothing refills, so a batch decides the whole burst on each
//! bucket's room in whole bytes, with compares and subtractions only, and
//! writes each changed TAT once.
//!
//! State updates: a [`LocalFlow`] is read once and written once. A shared
//! [`Flow`] is read once (two loads), the burst is decided on those values,
//! and each word that changes is written by one compare-and-swap against the
//! value read, in the RFC's order; if the first fails, nothing has been
//! stored and the whole batch is decided again from fresh loads. If the
//! second fails after the first succeeded:
//!
//! * **trTCM**: the peak bucket is taken; green or yellow among the packets
//!   that passed it is decided again, one take each, on the committed TAT
//!   there is now (what those packets' own second steps would do);
//! * **RFC 4115**: the greens are taken; yellow or red among the others is
//!   decided again on the excess TAT there is now;
//! * **srTCM**: A (which holds the burst's green and yellow bytes) is taken
//!   first and C (its green bytes) second. If C moved, the reservation in A
//!   is undone when A is as the batch left it and the batch starts again;
//!   otherwise the reservation stays, the batch's greens take from the C
//!   there is now one by one, and those that no longer fit are yellow if the
//!   excess bucket (seen through a fresh A and the new C) holds them all,
//!   and red otherwise: the single packet's rule, tokens withheld, never
//!   granted.
//!
//! Every compare-and-swap re-checks its bucket's inequality on the value it
//! replaces (the batch was decided on exactly that value), so each bucket
//! stays a linearizable GCRA and the bounds above hold for batches too; the
//! loom models run batches against single packets.
//!
//! # Where the code is
//!
//! A red packet changes no state (the shared srTCM's kept reservation
//! aside, see above). Each file states the math and the invariants of its
//! part:
//!
//! * `bucket.rs`: one token bucket, the crate's GCRA step with the bucket's
//!   own span `S·T`, and its slack and room at one `now`;
//! * `flow.rs`: the state of a flow ([`Flow`], [`LocalFlow`]) and the leases
//!   of bytes taken from one of its buckets;
//! * `steps.rs`: the sealed per-profile steps every [`Meter`] is built from
//!   (`now` in sub-ticks, one packet, the pieces of a batch) and the steps
//!   shared by the profiles of two independent buckets;
//! * `batch.rs`: a burst at one `now` decided on the buckets' rooms, and the
//!   compare-and-swaps that store it;
//! * `srtcm.rs`, `trtcm.rs`, `rfc4115.rs`: the three profiles;
//! * `loom_tests.rs`: the loom models of the bounds above.

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
