//! One token bucket of a meter profile: the GCRA of its rate, and its size.
//!
//! # The math
//!
//! A bucket of `S` bytes refilled at `R` bytes per second is the GCRA with
//! the emission interval `T = 1/R` (sub-ticks per byte, through
//! [`Quota`]) and the span `S·T`:
//!
//! ```text
//! tokens(now) = S − max(TAT − now, 0) / T
//! take B:  conforms iff B ≤ S and max(TAT, now) + B·T − now ≤ S·T,
//!          then TAT ← max(TAT, now) + B·T
//! ```
//!
//! That is the crate's one GCRA step (`crate::gcra::step`), with the
//! increment `B·T` and the span `S·T`: its room form `admit` within the
//! horizon, its `max` form past it. The span is the bucket's own: which is not always the quota's
//! `burst·T` (a bucket of size 0 keeps a quota of burst 1 for its time
//! base, and srTCM's committed bucket runs on the quota of both buckets
//! together).
//!
//! At one `now` nothing refills, and a bucket is its *slack*
//! `S·T − (max(TAT, now) − now)`: a take of `B` bytes conforms iff
//! `B·T ≤ slack` and leaves `slack − B·T`. Its *room* in whole bytes is
//! `⌊slack / T⌋`, by a [`Divisor`] of `T` kept in the bucket (a multiply
//! and shifts: no division instruction on the packet path).
//!
//! # Invariants
//!
//! * Every take checks `B ≤ S` first, so `B·T ≤ S·T` fits a `u64` (the
//!   constructor checked that `S·T` does); a TAT that would overflow does
//!   not conform (fail closed).
//! * A take that does not conform stores nothing.
//! * The slack is formed only when `now + S·T` fits, so a batch's
//!   `max(TAT, now) + spent` for `spent ≤ slack` fits too.

use super::{Color, MeterError};
use crate::divisor::Divisor;
use crate::gcra::step;
use crate::quota::Quota;

/// One token bucket of a profile: the GCRA of its rate, and its size.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bucket {
    /// `T = 1/rate` in sub-ticks per byte, and the scale of those sub-ticks.
    pub(super) quota: Quota,
    /// `S`, bytes.
    pub(super) size: u64,
    /// `S·T`, sub-ticks.
    pub(super) span: u64,
    /// Division by `T` without a division instruction (exact for every
    /// 64-bit numerator), so a batch's rooms cost a multiply each.
    per_byte: Divisor,
}

impl Bucket {
    /// The bucket of `rate` bytes per second and `size` bytes at `hz`; a
    /// bucket with rate and size 0 is disabled (passes only 0-byte packets).
    pub(super) const fn new(rate: u64, size: u64, hz: u64) -> Result<Bucket, MeterError> {
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
    pub(super) const fn with_size(quota: Quota, size: u64) -> Result<Bucket, MeterError> {
        match size.checked_mul(quota.emission_interval()) {
            Some(span) => Ok(Bucket {
                quota,
                size,
                span,
                per_byte: Divisor::new(quota.emission_interval()),
            }),
            None => Err(MeterError::Overflow),
        }
    }

    /// `now` (ticks) in this bucket's sub-ticks, saturating at the horizon.
    #[inline(always)]
    pub(super) fn now(&self, now: u64) -> u64 {
        self.quota.sub_ticks(now)
    }

    /// The GCRA step with the increment `B·T`: the TAT after taking `bytes`
    /// at sub-tick time `now`, or `None` if the bucket holds fewer.
    #[inline(always)]
    pub(super) fn take(&self, tat: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        self.admit(tat, now, bytes * self.quota.emission_interval())
    }

    /// The crate's GCRA step in its `max` form on this bucket's span `S·T`,
    /// for an `increment ≤ S·T`: the new TAT `max(TAT, now) + increment`,
    /// or `None` if it would be more than `S·T` after `now`. That is
    /// [`step::admit_max`] without its shortfall, which the bucket does not
    /// use (its out-of-line wait would leave a call on the packet path): the
    /// room form's owing case [`step::owing`] on `max(TAT, now)`, which owes
    /// by construction, so only the test `max(TAT, now) − now ≤ S·T −
    /// increment` remains, as the `max` form has it.
    ///
    /// The room form needs `now + S·T` to fit. It always does but past the
    /// horizon: a quota's sub-tick `now` is at most `2⁶³ − 1` and a bucket's
    /// span at most the quota's, `2⁶³`, so only the saturated `now =
    /// u64::MAX` fails. There time has stopped and only a take of nothing
    /// fits, leaving the TAT at `now` (what [`step::admit_max`] answers
    /// there). The tests below hold this to [`step::admit_max`].
    #[inline(always)]
    pub(super) fn admit(&self, tat: u64, now: u64, increment: u64) -> Option<u64> {
        if step::within_horizon(now, self.span) {
            let base = if tat > now { tat } else { now };
            step::owing(base, now, increment, step::room(self.span, increment))
        } else if increment == 0 {
            Some(now)
        } else {
            None
        }
    }

    /// One bucket's pass over a burst at sub-tick `now`, one [`take`](Self::take)
    /// per candidate in order: each packet `i` with `candidate(i, out[i])`
    /// gets `pass` if the bucket (after the earlier passing candidates)
    /// holds it and `fail` if not; others are left alone. Returns the TAT
    /// after the pass. Only the shared flows' contention path uses it (to
    /// redo one bucket's decisions on a fresh TAT), so it is the plain loop.
    pub(super) fn pass(
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

    /// `⌊sub_ticks / T⌋`: whole bytes in `sub_ticks`, by the [`Divisor`].
    #[inline(always)]
    pub(super) fn whole_bytes(&self, sub_ticks: u64) -> u64 {
        self.per_byte.quotient(sub_ticks)
    }

    /// `max(TAT, now)` and the bucket's slack at sub-tick `now`,
    /// `S·T − (max(TAT, now) − now)`: `take(B)` succeeds iff `B·T ≤ slack`,
    /// i.e. iff `B ≤ ⌊slack / T⌋`, and then leaves `slack − B·T`. `None` when
    /// the state is past its span (nothing fits, not even 0 bytes: a clock
    /// that stepped back) or `now + S·T` would overflow (the horizon);
    /// batches then go packet by packet.
    #[inline(always)]
    pub(super) fn slack(&self, tat: u64, now: u64) -> Option<(u64, u64)> {
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
    pub(super) fn after(tat: u64, base: u64, spent: u64, touched: bool) -> u64 {
        if touched {
            base + spent
        } else {
            tat
        }
    }

    /// Whole bytes in the bucket at sub-tick `now` (rounded down), for
    /// inspection.
    pub(super) fn tokens(&self, tat: u64, now: u64) -> u64 {
        let deficit = tat.saturating_sub(now);
        self.whole_bytes(self.span.saturating_sub(deficit))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::Bucket;
    use crate::gcra::step;
    use proptest::prelude::*;

    /// A bucket of span `span` (its rate and size do not matter to `admit`).
    fn with_span(span: u64) -> Bucket {
        Bucket {
            span,
            ..Bucket::new(1_000, 1, 1_000).unwrap()
        }
    }

    /// The sub-tick times a quota gives: up to `2⁶³ − 1`, or saturated.
    fn times() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => 0u64..1 << 63,
            1 => Just((1u64 << 63) - 1),
            1 => Just(u64::MAX),
        ]
    }

    #[test]
    fn admit_is_the_max_form_at_the_edges() {
        let spans = [0, 1, 1_000, 1 << 62, 1 << 63];
        let nows = [0, 1, 999, 1_000, (1 << 63) - 1, u64::MAX];
        let tats = [0, 1, 500, 1_000, 2_000, 1 << 63, u64::MAX - 1, u64::MAX];
        for span in spans {
            let bucket = with_span(span);
            for now in nows {
                for tat in tats {
                    for increment in [0, 1.min(span), span / 2, span] {
                        assert_eq!(
                            bucket.admit(tat, now, increment),
                            step::admit_max(tat, now, increment, span).ok(),
                            "tat {tat} now {now} increment {increment} span {span}"
                        );
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn admit_is_the_max_form(tat: u64, now in times(), span in 0u64..=1 << 63, share in 0u64..=1_000) {
            let increment = (span as u128 * share as u128 / 1_000) as u64;
            prop_assert_eq!(
                with_span(span).admit(tat, now, increment),
                step::admit_max(tat, now, increment, span).ok()
            );
        }
    }
}
