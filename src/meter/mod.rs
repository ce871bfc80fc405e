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
//! [`TrTcm4115`]) through [`Quota`]: `T` becomes an integer
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
//!   `max(A, now) + B·T − max(C, now) ≤ EBS·T`. `A ≥ C` always holds.
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
//! disappear. Both TATs need the full 64 bits (they are absolute sub-tick
//! times), so two buckets cannot share one word without losing exactness.
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
//!
//! At one `now` nothing refills, so once `now` is in sub-ticks (one multiply
//! per rate) each bucket's state reduces to its slack
//! `S·T − (max(TAT, now) − now)`, and to its room in whole bytes
//! `room = ⌊slack / T⌋` (two multiplies by a reciprocal of `T` kept in the
//! profile, exact for every 64-bit slack; no division). A take of `B` bytes
//! is then exactly `B ≤ room`, leaving `room − B` (`B·T ≤ slack` iff
//! `B ≤ ⌊slack / T⌋`, and `⌊(slack − B·T) / T⌋ = ⌊slack / T⌋ − B`), and the
//! RFC rules at one `now` become, for the two buckets of each profile:
//!
//! | profile | first bucket | second bucket |
//! |---|---|---|
//! | srTCM | committed: green if it holds a green-coloured packet | excess (slack `EBS·T − (max(A, now) − max(C, now))`): yellow if it holds a packet that is neither green nor red-coloured |
//! | RFC 4115 | committed: as srTCM | excess: as srTCM |
//! | trTCM | peak: red unless it holds a packet not red-coloured | committed: green if it holds a green-coloured peak passer, else yellow |
//!
//! (srTCM's two slacks add up to A's, so A's own test is implied, and a
//! green leaves the excess slack as it is.) Within a burst each bucket's
//! asks form prefix sums that only grow, so a run of packets whose asks a
//! bucket holds in total all pass: the burst goes in blocks of eight with
//! one compare per bucket each, the first block that does not fit is
//! scanned for the run's end, and the packets after it are decided one at
//! a time with compares and subtractions. The state is written once: each
//! bucket's TAT becomes `max(TAT, now) + taken·T` (one multiply) if any
//! packet took from it, and stays as it was if none did. Sizes above
//! `u32::MAX` (whose sums could wrap), and states a batch cannot reduce to
//! slacks (a clock that stepped back, the horizon), go packet by packet.
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
//! # Invariants the code keeps
//!
//! * Every take checks `B ≤ S` first, so `B·T ≤ S·T` fits a `u64`
//!   ([`Quota`]'s span invariant); a TAT that would overflow
//!   does not conform (fail closed).
//! * Denied takes store nothing; a red packet changes no state (the shared
//!   srTCM's kept reservation aside, see above).
//! * In a batch, each bucket's room is `⌊slack / T⌋ ≤ S` and only ever
//!   decreases by bytes it holds, so `taken ≤ room` and
//!   `max(TAT, now) + taken·T ≤ now + S·T` fits (the slack is only formed
//!   when `now + S·T` does).
//! * srTCM: `A ≥ C` after every step, and `A − now ≤ (CBS + EBS)·T`,
//!   `C − now ≤ CBS·T` at the `now` of the last take.

use core::fmt;

use crate::quota::{Quota, QuotaError};
use crate::sync::{loom_const_fn, StateWord};
use sealed::{Arrivals, Slack};

/// The batch steps of [`sealed::Steps`] for a profile of two independent
/// buckets with a `pair()` method, written once for trTCM and RFC 4115.
/// `$lost` is the profile's fix-up for a lost swap on its second bucket.
macro_rules! pair_steps {
    ($lost:ident) => {
        #[inline(always)]
        fn intervals(&self) -> [u64; 2] {
            self.pair().intervals()
        }
        #[inline(always)]
        fn rooms(&self, slack: [u64; 2]) -> [u64; 2] {
            self.pair().rooms(slack)
        }
        #[inline(always)]
        fn slack(&self, words: [u64; 2], t: [u64; 2]) -> Option<Slack> {
            self.pair().slack(words, t)
        }
        #[inline(always)]
        fn commit(
            &self,
            words: [u64; 2],
            slack: &Slack,
            spent: [u64; 2],
            touched: [bool; 2],
        ) -> [u64; 2] {
            Pair::commit(words, slack, spent, touched)
        }
        #[inline]
        fn batch_shared(
            &self,
            flow: &Flow,
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) {
            batch_shared_pair(self, flow, t, sizes, pre, out, |out| {
                self.$lost(flow, t[1], sizes, pre, out)
            });
        }
        fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
            self.pair().tokens(words, t)
        }
    };
}

mod rfc4115;
mod srtcm;
mod trtcm;

pub use rfc4115::TrTcm4115;
pub use srtcm::SrTcm;
pub use trtcm::TrTcm;

// Every profile is a `Meter`.
impl<M: sealed::Steps> Meter for M {}

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

impl core::error::Error for BatchLenMismatch {}

/// One token bucket of a profile: the GCRA of its rate, and its size.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bucket {
    /// `T = 1/rate` in sub-ticks per byte, and the scale of those sub-ticks.
    quota: Quota,
    /// `S`, bytes.
    size: u64,
    /// `S·T`, sub-ticks.
    span: u64,
    /// `⌈2¹²⁸ / T⌉` (0 when `T = 1`): `⌊n / T⌋` is the top 64 bits of the
    /// 192-bit `n · reciprocal` for every 64-bit `n` (Lemire, Kaser and
    /// Kurz, "Faster remainder by direct computation", 2019, theorem 1:
    /// 128 fraction bits ≥ 64 + log₂ T), so a batch's rooms cost two
    /// multiplies instead of a division.
    reciprocal: u128,
}

impl Bucket {
    /// The bucket of `rate` bytes per second and `size` bytes at `hz`; a
    /// bucket with rate and size 0 is disabled (passes only 0-byte packets).
    const fn new(rate: u64, size: u64, hz: u64) -> Result<Bucket, MeterError> {
        if rate == 0 && size != 0 {
            return Err(MeterError::ZeroRate);
        }
        // A disabled bucket still needs a valid time base; any rate will do.
        let rate = if rate == 0 { 1 } else { rate };
        let burst = if size == 0 { 1 } else { size };
        let quota = match Quota::per_second(rate).with_burst(burst).try_at_hz(hz) {
            Ok(q) => q,
            Err(e) => return Err(MeterError::Quota(e)),
        };
        Self::with_size(quota, size)
    }

    /// A bucket on `quota`'s rate and time base with `size` bytes.
    const fn with_size(quota: Quota, size: u64) -> Result<Bucket, MeterError> {
        match size.checked_mul(quota.emission_interval()) {
            Some(span) => Ok(Bucket {
                quota,
                size,
                span,
                reciprocal: reciprocal(quota.emission_interval()),
            }),
            None => Err(MeterError::Overflow),
        }
    }

    /// `now` (ticks) in this bucket's sub-ticks, saturating at the horizon.
    #[inline(always)]
    fn now(&self, now: u64) -> u64 {
        self.quota.sub_ticks(now)
    }

    /// The GCRA test and step of [`gcra`](crate::gcra): the TAT after taking
    /// `bytes` at sub-tick time `now`, or `None` if the bucket holds fewer.
    #[inline(always)]
    fn take(&self, tat: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.size {
            return None;
        }
        let base = if tat > now { tat } else { now };
        // bytes ≤ size, so bytes·T ≤ span fits.
        match base.checked_add(bytes * self.quota.emission_interval()) {
            Some(next) if next - now <= self.span => Some(next),
            _ => None,
        }
    }

    /// One bucket's pass over a burst at sub-tick `now`, one [`take`](Self::take)
    /// per candidate in order: each packet `i` with `candidate(i, out[i])`
    /// gets `pass` if the bucket (after the earlier passing candidates)
    /// holds it and `fail` if not; others are left alone. Returns the TAT
    /// after the pass. Only the shared flows' contention path uses it (to
    /// redo one bucket's decisions on a fresh TAT), so it is the plain loop.
    fn pass(
        &self,
        tat: u64,
        now: u64,
        sizes: &[u64],
        out: &mut [Color],
        candidate: impl Fn(usize, Color) -> bool,
        (pass, fail): (Color, Color),
    ) -> u64 {
        let mut tat = tat;
        for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
            if candidate(i, *color) {
                *color = match self.take(tat, now, bytes) {
                    Some(next) => {
                        tat = next;
                        pass
                    }
                    None => fail,
                };
            }
        }
        tat
    }

    /// `⌊sub_ticks / T⌋`: whole bytes in `sub_ticks`, by the reciprocal.
    #[inline(always)]
    fn whole_bytes(&self, sub_ticks: u64) -> u64 {
        divide(sub_ticks, self.reciprocal)
    }

    /// `max(TAT, now)` and the bucket's slack at sub-tick `now`,
    /// `S·T − (max(TAT, now) − now)`: `take(B)` succeeds iff `B·T ≤ slack`,
    /// i.e. iff `B ≤ ⌊slack / T⌋`, and then leaves `slack − B·T`. `None` when
    /// the state is past its span (nothing fits, not even 0 bytes: a clock
    /// that stepped back) or `now + S·T` would overflow (the horizon);
    /// batches then go packet by packet.
    #[inline(always)]
    fn slack(&self, tat: u64, now: u64) -> Option<(u64, u64)> {
        let base = if tat > now { tat } else { now };
        let deficit = base - now;
        if deficit > self.span || now.checked_add(self.span).is_none() {
            return None;
        }
        Some((base, self.span - deficit))
    }

    /// The TAT after a batch spent `spent ≤ slack` sub-ticks from
    /// `base = max(TAT, now)` (`base + spent ≤ now + S·T` fits), or the TAT
    /// as it was if no packet passed (not even one of 0 bytes).
    #[inline(always)]
    fn after(tat: u64, base: u64, spent: u64, touched: bool) -> u64 {
        if touched {
            base + spent
        } else {
            tat
        }
    }

    /// Whole bytes in the bucket at sub-tick `now` (rounded down). Divides:
    /// for inspection, not for the packet path.
    fn tokens(&self, tat: u64, now: u64) -> u64 {
        let deficit = tat.saturating_sub(now);
        self.span.saturating_sub(deficit) / self.quota.emission_interval()
    }
}

/// The batch steps of a profile made of two independent buckets, in its
/// rules' order (trTCM: peak, committed; RFC 4115: committed, excess):
/// each bucket's slack, room and state are its own. srTCM's buckets are not
/// independent (the excess bucket fills from the committed one's overflow)
/// and has its own.
#[derive(Clone, Copy)]
pub(crate) struct Pair<'a>(pub(crate) [&'a Bucket; 2]);

impl Pair<'_> {
    #[inline(always)]
    pub(crate) fn intervals(self) -> [u64; 2] {
        self.0.map(|b| b.quota.emission_interval())
    }

    #[inline(always)]
    pub(crate) fn rooms(self, slack: [u64; 2]) -> [u64; 2] {
        [
            self.0[0].whole_bytes(slack[0]),
            self.0[1].whole_bytes(slack[1]),
        ]
    }

    #[inline(always)]
    pub(crate) fn slack(self, [w0, w1]: [u64; 2], t: [u64; 2]) -> Option<Slack> {
        let (base0, slack0) = self.0[0].slack(w0, t[0])?;
        let (base1, slack1) = self.0[1].slack(w1, t[1])?;
        Some(Slack {
            base: [base0, base1],
            slack: [slack0, slack1],
        })
    }

    #[inline(always)]
    pub(crate) fn commit(
        [w0, w1]: [u64; 2],
        slack: &Slack,
        spent: [u64; 2],
        touched: [bool; 2],
    ) -> [u64; 2] {
        [
            Bucket::after(w0, slack.base[0], spent[0], touched[0]),
            Bucket::after(w1, slack.base[1], spent[1], touched[1]),
        ]
    }

    pub(crate) fn tokens(self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
        [
            self.0[0].tokens(words[0], t[0]),
            self.0[1].tokens(words[1], t[1]),
        ]
    }
}

/// A shared batch for a profile of two independent buckets: decided on
/// both words, then one compare-and-swap per changed word in the rules'
/// order. If the first swap fails nothing was stored and the batch starts
/// again; if the second fails, `lost_second` redoes the second bucket's
/// decisions on the value it holds now.
#[inline(always)]
pub(crate) fn batch_shared_pair<S: sealed::Steps>(
    profile: &S,
    flow: &Flow,
    t: [u64; 2],
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
    lost_second: impl FnOnce(&mut [Color]),
) {
    let [first, second] = &flow.words;
    loop {
        let [w0, w1] = [first.load(), second.load()];
        let Some([next0, next1]) = profile.decide_batch([w0, w1], t, sizes, pre, out) else {
            return profile.batch_shared_slow(flow, t, sizes, pre, out);
        };
        if next0 != w0 && !swap(first, w0, next0) {
            continue; // nothing stored: start again
        }
        if next1 != w1 && !swap(second, w1, next1) {
            lost_second(out);
        }
        return;
    }
}

/// Packets per block in [`decide`]'s search for the leading run.
const BLOCK: usize = 8;

/// What a packet that keeps its arrival colour asks of each bucket, in
/// bytes, under the rules `both` selects.
#[inline(always)]
fn ask(both: bool, bytes: u64, arrived: Color) -> [u64; 2] {
    let green = bytes & ((arrived == Color::Green) as u64).wrapping_neg();
    let yellow = bytes & ((arrived == Color::Yellow) as u64).wrapping_neg();
    if both {
        // trTCM: green and yellow take from the peak bucket, green also from
        // the committed one.
        [green | yellow, green]
    } else {
        // srTCM, RFC 4115: green from the first bucket, yellow from the
        // second.
        [green, yellow]
    }
}

/// The colours of a burst at one `now` (into `out`) given the whole bytes
/// each bucket holds, `room = ⌊slack / T⌋`, under the rules `both` selects
/// (see [`Steps::BOTH`](sealed::Steps::BOTH)); returns the bytes taken from
/// each bucket and whether each was taken from at all (a 0-byte packet
/// counts: its take moves a TAT in the past up to `now`). At one `now`
/// nothing refills, so a bucket's take of `B` bytes is exactly the test
/// `B ≤ room` and the step `room ← room − B` (`B·T ≤ slack` iff
/// `B ≤ ⌊slack / T⌋`, and `⌊(slack − B·T) / T⌋ = ⌊slack / T⌋ − B`): the
/// sequential per-packet rules with no clock, TAT or multiply. Two stages:
///
/// 1. the leading run of packets that keep their arrival colours. Each
///    bucket's asks form prefix sums that only grow, so packet `i` is in
///    the run iff the sums up to `i` fit the rooms: whole blocks of
///    [`BLOCK`] are tested with one compare per bucket, then the first
///    block that does not fit packet by packet;
/// 2. from the first packet that does not keep its colour on, the rules a
///    packet at a time on what the rooms have left.
///
/// Sizes above `u32::MAX` skip stage 1 (its sums could wrap); stage 2
/// takes any size.
#[inline(always)]
fn decide(
    both: bool,
    room: [u64; 2],
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
) -> ([u64; 2], [bool; 2]) {
    let n = sizes.len().min(out.len());
    let (sizes, out) = (&sizes[..n], &mut out[..n]);
    let fits = |asked: [u64; 2]| (asked[0] <= room[0]) & (asked[1] <= room[1]);
    let bits = sizes.iter().fold(0, |bits, &bytes| bits | bytes);
    let (mut start, mut asked) = (0, [0u64; 2]);
    if bits <= u32::MAX as u64 && n <= u32::MAX as usize {
        // n · (2³² − 1) < 2⁶⁴: the sums do not wrap.
        let blocks = sizes.chunks(BLOCK).zip(out.chunks_mut(BLOCK));
        for (block, colors) in blocks {
            let mut total = asked;
            for (k, &bytes) in block.iter().enumerate() {
                let [ask0, ask1] = ask(both, bytes, pre.at(start + k));
                total = [total[0] + ask0, total[1] + ask1];
            }
            if fits(total) {
                pre.copy_block(start, colors);
                asked = total;
                start += block.len();
                continue;
            }
            for (&bytes, color) in block.iter().zip(colors.iter_mut()) {
                let arrived = pre.at(start);
                let [ask0, ask1] = ask(both, bytes, arrived);
                let total = [asked[0] + ask0, asked[1] + ask1];
                if !fits(total) {
                    break;
                }
                *color = arrived;
                asked = total;
                start += 1;
            }
            break;
        }
    }
    let mut touched = pre.any_ask(both, start);
    let mut left = [room[0] - asked[0], room[1] - asked[1]];
    let rest = sizes[start..].iter().zip(&mut out[start..]);
    for (k, (&bytes, color)) in rest.enumerate() {
        *color = take(both, &mut left, &mut touched, bytes, pre.at(start + k));
    }
    ([room[0] - left[0], room[1] - left[1]], touched)
}

/// One packet of stage 2 of [`decide`]: its colour under the rules `both`
/// selects, given the whole bytes `left` in each bucket, which it takes
/// from (marking the bucket `touched`). Plain branches and an early return
/// per colour, as the per-packet step has: the stage's cost is the few
/// packets after the run's end, and in this form they ran faster than as
/// masked subtractions and a colour table (`benches/meter.rs`, RFC 4115
/// over-rate local batches: 2.56× → 3.3× the per-packet calls).
#[inline(always)]
fn take(
    both: bool,
    left: &mut [u64; 2],
    touched: &mut [bool; 2],
    bytes: u64,
    arrived: Color,
) -> Color {
    if both {
        // trTCM: the peak bucket, then the committed one for green.
        if arrived == Color::Red || bytes > left[0] {
            return Color::Red;
        }
        left[0] -= bytes;
        touched[0] = true;
        if arrived == Color::Green && bytes <= left[1] {
            left[1] -= bytes;
            touched[1] = true;
            return Color::Green;
        }
        Color::Yellow
    } else {
        // srTCM, RFC 4115: green from the first bucket, else yellow from
        // the second.
        if arrived == Color::Green && bytes <= left[0] {
            left[0] -= bytes;
            touched[0] = true;
            return Color::Green;
        }
        if arrived != Color::Red && bytes <= left[1] {
            left[1] -= bytes;
            touched[1] = true;
            return Color::Yellow;
        }
        Color::Red
    }
}

/// Compare-and-swap through [`StateWord::update`]: `word` becomes `new` if
/// it holds `current`.
#[inline(always)]
fn swap(word: &StateWord, current: u64, new: u64) -> bool {
    word.update(|v| if v == current { Ok((new, ())) } else { Err(()) })
        .is_ok()
}

/// `⌈2¹²⁸ / d⌉` for a divisor `d ≥ 2`, and 0 for `d ≤ 1` (see
/// [`divide`]).
const fn reciprocal(d: u64) -> u128 {
    if d <= 1 {
        0
    } else {
        // ⌊(2¹²⁸ − 1) / d⌋ + 1 = ⌈2¹²⁸ / d⌉ for every d ≥ 2.
        u128::MAX / d as u128 + 1
    }
}

/// `⌊n / d⌋` given `reciprocal(d)`: the top 64 bits of the 192-bit
/// `n · ⌈2¹²⁸ / d⌉`, exact for every 64-bit `n` and `d` (Lemire, Kaser and
/// Kurz, theorem 1, with 128 ≥ 64 + log₂ d fraction bits); `n` itself when
/// `d = 1`.
#[inline(always)]
fn divide(n: u64, reciprocal: u128) -> u64 {
    if reciprocal == 0 {
        return n;
    }
    let n = n as u128;
    let low = (reciprocal as u64) as u128 * n;
    let high = (reciprocal >> 64) * n;
    // high ≤ (2⁶⁴ − 1)², so adding the top half of low cannot overflow.
    ((high + (low >> 64)) >> 64) as u64
}

loom_const_fn! {
    #[inline(always)]
    fn state_word(value: u64) -> StateWord {
        StateWord::new(value)
    }
}

/// The state of one flow, shared by `&self`: two words (16 bytes where the
/// target has 64-bit atomics), both buckets full when new. Lock-free where the
/// target has a 64-bit compare-and-swap, a short critical section per word
/// where it has not (see [`sync`](crate::sync)). The meaning of the words
/// depends on the profile that marks with it: use one profile per flow.
///
/// ```
/// use cellrate::meter::{Color, Flow, Meter, TrTcm};
/// static FLOW: Flow = Flow::new();
/// let meter = TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap();
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Green);
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Yellow);
/// assert_eq!(meter.mark(&FLOW, 0, 1_500), Color::Red);
/// ```
pub struct Flow {
    words: [StateWord; 2],
}

impl Flow {
    loom_const_fn! {
        /// A flow with full buckets (`const`, so it can live in a `static`).
        ///
        /// ```
        /// use cellrate::meter::Flow;
        /// static FLOW: Flow = Flow::new();
        /// assert_eq!(FLOW.words(), [0, 0]);
        /// ```
        pub fn new() -> Self {
            Flow { words: [state_word(0), state_word(0)] }
        }
    }

    /// Makes both buckets full, as new. Not atomic with respect to packets
    /// being marked at the same time (each word is reset on its own).
    ///
    /// ```
    /// use cellrate::meter::{Color, Flow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 0, 1_000).unwrap();
    /// let flow = Flow::new();
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Green);
    /// flow.reset();
    /// assert_eq!(meter.mark(&flow, 0, 1_000), Color::Green);
    /// ```
    pub fn reset(&self) {
        self.words[0].store(0);
        self.words[1].store(0);
    }

    /// The two state words (TATs in sub-ticks), for inspection and tests.
    ///
    /// ```
    /// use cellrate::meter::{Flow, Meter, TrTcm};
    /// let meter = TrTcm::new(1_000, 1_000, 1_000, 1_000, 1_000).unwrap();
    /// let flow = Flow::new();
    /// meter.mark(&flow, 0, 10);
    /// assert_eq!(flow.words(), [10, 10]); // 10 bytes of debt, 1 ms each
    /// ```
    pub fn words(&self) -> [u64; 2] {
        [self.words[0].load(), self.words[1].load()]
    }
}

/// Leases of bytes ([`lease::LeasedMeter`](crate::lease::LeasedMeter)):
/// one bucket of a flow as a source of bytes, taken and given back in one
/// compare-and-swap each.
impl Flow {
    /// Takes `g` bytes from the bucket `bucket` (word `which`) at `now`
    /// (ticks): the largest `g ≤ most` with `g ≤ max(least, ⌊room / share⌋)`,
    /// `room` being the whole bytes the bucket holds. When `room < least`
    /// nothing is taken and the answer is the ticks until it holds `least`
    /// (`u64::MAX`: never). One division, once per lease.
    pub(crate) fn take_bytes(
        &self,
        bucket: &Bucket,
        which: usize,
        now: u64,
        (least, most, share): (u64, u64, u64),
    ) -> Result<u64, u64> {
        let now = bucket.now(now);
        let t = bucket.quota.emission_interval();
        let scale = bucket.quota.scale();
        self.words[which & 1].update(|tat| {
            let base = if tat > now { tat } else { now };
            let debt = base - now;
            let Some(want) = least.checked_mul(t).filter(|&w| w <= bucket.span) else {
                return Err(u64::MAX);
            };
            if debt > bucket.span - want {
                let short = debt - (bucket.span - want);
                return Err(Quota::ticks_ceil(short, scale));
            }
            let room = (bucket.span - debt) / t;
            let taken = (room / share.max(1)).max(least).min(most.max(least));
            // taken ≤ room: the new TAT is at most now + S·T.
            let next = base.checked_add(taken * t).ok_or(u64::MAX)?;
            Ok((next, taken))
        })
    }

    /// Gives `bytes` back to the bucket `bucket` (word `which`) at `now`
    /// (ticks), as [`Gcra::refund_n`](crate::Gcra::refund_n) does: the TAT
    /// moves back by `bytes·T`, never before `now`.
    pub(crate) fn give_back_bytes(&self, bucket: &Bucket, which: usize, now: u64, bytes: u64) {
        let now = bucket.now(now);
        let _ = self.words[which & 1].update(|tat| -> Result<(u64, ()), ()> {
            Ok((crate::gcra::refund(&bucket.quota, tat, now, bytes), ()))
        });
    }
}

impl Default for Flow {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow")
            .field("words", &self.words())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Flow {
    fn format(&self, f: defmt::Formatter) {
        let [a, b] = self.words();
        defmt::write!(f, "Flow {{ words: [{=u64}, {=u64}] }}", a, b)
    }
}

/// The state of one flow for a single owner (`&mut`, no atomics): two `u64`,
/// 16 bytes, both buckets full when new. For per-core flow tables.
///
/// ```
/// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
/// let meter = SrTcm::new(1_000, 1_500, 1_500, 1_000).unwrap();
/// let mut flow = LocalFlow::new();
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Green);
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Yellow);
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_000), Color::Red);
/// assert_eq!(core::mem::size_of::<LocalFlow>(), 16);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LocalFlow {
    words: [u64; 2],
}

impl LocalFlow {
    /// A flow with full buckets.
    ///
    /// ```
    /// use cellrate::meter::LocalFlow;
    /// let table = [LocalFlow::new(); 1_024]; // 16 KiB of per-core flow state
    /// assert_eq!(core::mem::size_of_val(&table), 16 * 1_024);
    /// ```
    pub const fn new() -> Self {
        LocalFlow { words: [0, 0] }
    }

    /// Makes both buckets full.
    ///
    /// ```
    /// use cellrate::meter::{LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 0, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// meter.mark_local(&mut flow, 0, 500);
    /// flow.reset();
    /// assert_eq!(flow, LocalFlow::new());
    /// ```
    pub fn reset(&mut self) {
        self.words = [0, 0];
    }

    /// The two state words (TATs in sub-ticks), for inspection and tests.
    ///
    /// ```
    /// use cellrate::meter::{LocalFlow, Meter, SrTcm};
    /// let meter = SrTcm::new(1_000, 1_000, 1_000, 1_000).unwrap();
    /// let mut flow = LocalFlow::new();
    /// meter.mark_local(&mut flow, 0, 10);
    /// assert_eq!(flow.words(), [10, 10]); // [C, A]: a green takes from both
    /// ```
    pub const fn words(&self) -> [u64; 2] {
        self.words
    }
}

pub(crate) mod sealed {
    use super::{Color, Flow};

    /// A flow's two buckets seen by a batch at one `now`: `max(TAT, now)` and
    /// the slack in sub-ticks of each, in the order of [`Steps::BOTH`]'s rules
    /// (srTCM: committed, excess; trTCM: peak, committed; RFC 4115:
    /// committed, excess).
    pub struct Slack {
        pub(crate) base: [u64; 2],
        pub(crate) slack: [u64; 2],
    }

    /// The colours a batch's packets arrived with: all green (colour-blind
    /// marking) or one per packet, at least as many as there are packets.
    #[derive(Clone, Copy)]
    pub struct Arrivals<'a>(Option<&'a [Color]>);

    impl<'a> Arrivals<'a> {
        /// Colour-blind: every packet arrived green.
        pub(crate) const BLIND: Arrivals<'static> = Arrivals(None);

        /// Colour-aware: packet `i` arrived coloured `colors[i]`.
        #[inline(always)]
        pub(crate) fn of(colors: &'a [Color]) -> Self {
            Arrivals(Some(colors))
        }

        /// The colour packet `i` arrived with.
        #[inline(always)]
        pub(crate) fn at(self, i: usize) -> Color {
            match self.0 {
                None => Color::Green,
                Some(colors) => colors[i],
            }
        }

        /// Whether any of the first `n` packets arrived coloured for each
        /// bucket of `both`'s rules (see [`Steps::BOTH`]).
        #[inline(always)]
        pub(crate) fn any_ask(self, both: bool, n: usize) -> [bool; 2] {
            let Some(colors) = self.0 else {
                return [n > 0, both & (n > 0)];
            };
            let (mut green, mut yellow) = (false, false);
            for &color in &colors[..n] {
                green |= color == Color::Green;
                yellow |= color == Color::Yellow;
            }
            if both {
                [green | yellow, green]
            } else {
                [green, yellow]
            }
        }

        /// The arrival colours of packets `start..start + out.len()` into
        /// `out`: one store of a whole block.
        #[inline(always)]
        pub(crate) fn copy_block(self, start: usize, out: &mut [Color]) {
            if let Ok(block) = <&mut [Color; super::BLOCK]>::try_from(&mut *out) {
                *block = match self.0 {
                    None => [Color::Green; super::BLOCK],
                    Some(colors) => match colors[start..].first_chunk() {
                        Some(&arrived) => arrived,
                        None => return,
                    },
                };
            } else {
                for (k, color) in out.iter_mut().enumerate() {
                    *color = self.at(start + k);
                }
            }
        }
    }

    /// The per-profile steps [`Meter`](super::Meter) is built from. Sealed:
    /// only this crate's profiles implement it.
    pub trait Steps {
        /// The batch rules of the profile's two buckets at one `now`:
        /// `false` for srTCM and RFC 4115 (green from the first bucket if
        /// green-coloured and it holds the packet, else yellow from the
        /// second if not red-coloured and it holds it, else red); `true`
        /// for trTCM (red unless not red-coloured and the first, peak,
        /// bucket holds it; then green if green-coloured and the second,
        /// committed, bucket holds it too, else yellow).
        const BOTH: bool;

        /// `now` in the sub-ticks of each of the profile's two words.
        fn times(&self, now: u64) -> [u64; 2];
        /// One packet on plain words (the sequential RFC algorithm).
        fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color;
        /// One packet on a shared flow.
        fn step_shared(&self, flow: &Flow, t: [u64; 2], bytes: u64, pre: Color) -> Color;

        /// The two buckets' emission intervals `T` (sub-ticks per byte),
        /// in [`BOTH`](Self::BOTH)'s order.
        fn intervals(&self) -> [u64; 2];
        /// The whole bytes in each bucket's slack, `⌊slack / T⌋`.
        fn rooms(&self, slack: [u64; 2]) -> [u64; 2];
        /// The two buckets' bases and slacks for the state `words` at
        /// `t`, or `None` for a state that batches step through packet by
        /// packet (past a span, at the horizon).
        fn slack(&self, words: [u64; 2], t: [u64; 2]) -> Option<Slack>;
        /// The state words after a batch spent `spent ≤ slack` sub-ticks
        /// of each bucket's slack (`touched`: whether each was taken from at all).
        fn commit(
            &self,
            words: [u64; 2],
            slack: &Slack,
            spent: [u64; 2],
            touched: [bool; 2],
        ) -> [u64; 2];

        /// A burst at one `now` decided on the state `words` (nothing
        /// stored): its colours into `out` and the state after it, exactly
        /// what one [`step`](Self::step) per packet gives; `None` (and
        /// `out` untouched) for a state that needs the packet-by-packet
        /// path.
        #[inline(always)]
        fn decide_batch(
            &self,
            words: [u64; 2],
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) -> Option<[u64; 2]> {
            let slack = self.slack(words, t)?;
            let [t0, t1] = self.intervals();
            let room = self.rooms(slack.slack);
            let (taken, touched) = super::decide(Self::BOTH, room, sizes, pre, out);
            // taken ≤ room, so taken·T ≤ slack fits.
            let spent = [taken[0] * t0, taken[1] * t1];
            Some(self.commit(words, &slack, spent, touched))
        }

        /// A burst at one `now` on plain words; slices have equal lengths.
        /// Exactly the colours and state of one [`step`](Self::step) per
        /// packet: one read and one write of the words.
        #[inline(always)]
        fn batch_local(
            &self,
            words: &mut [u64; 2],
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) {
            match self.decide_batch(*words, t, sizes, pre, out) {
                Some(next) => *words = next,
                None => self.batch_local_slow(words, t, sizes, pre, out),
            }
        }

        /// The packet-by-packet path of a local batch.
        #[inline(never)]
        #[cold]
        fn batch_local_slow(
            &self,
            words: &mut [u64; 2],
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) {
            for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
                *color = self.step(words, t, bytes, pre.at(i));
            }
        }

        /// A burst at one `now` on a shared flow; slices have equal lengths.
        fn batch_shared(
            &self,
            flow: &Flow,
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        );

        /// The packet-by-packet path of a shared batch.
        #[inline(never)]
        #[cold]
        fn batch_shared_slow(
            &self,
            flow: &Flow,
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) {
            for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
                *color = self.step_shared(flow, t, bytes, pre.at(i));
            }
        }

        /// Whole bytes in each bucket.
        fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2];
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
pub trait Meter: sealed::Steps {
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
    /// profile documents. For inspection: this divides.
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

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::{divide, reciprocal};
    use proptest::prelude::*;

    #[test]
    fn divide_at_the_edges() {
        let ds = [
            1,
            2,
            3,
            4,
            5,
            7,
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let ns = [
            0,
            1,
            2,
            3,
            4,
            u32::MAX as u64,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in ds {
            for n in ns
                .into_iter()
                .chain([d - 1, d, d.wrapping_add(1), d.wrapping_mul(3)])
            {
                assert_eq!(divide(n, reciprocal(d)), n / d, "{n} / {d}");
            }
        }
    }

    proptest! {
        #[test]
        fn divide_is_division(n: u64, d in 1u64.., small in 1u64..100_000) {
            prop_assert_eq!(divide(n, reciprocal(d)), n / d);
            prop_assert_eq!(divide(n, reciprocal(small)), n / small);
            let multiple = (n / small).wrapping_mul(small);
            prop_assert_eq!(divide(multiple, reciprocal(small)), multiple / small);
        }
    }
}
