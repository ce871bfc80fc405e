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
//! That is the crate's one GCRA step in its `max` form
//! (`crate::gcra::step::admit_max`), with the increment `B·T` and the span
//! `S·T`. The span is the bucket's own: which is not always the quota's
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
    /// at sub-tick time `now`, or `None` if the bucket holds fewer (always
    /// when `bytes > S`).
    #[inline(always)]
    pub(super) fn take(&self, tat: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        self.admit(tat, now, bytes * self.quota.emission_interval())
    }

    /// The crate's GCRA step in its `max` form ([`step::fits_max`], the
    /// admission of [`step::admit_max`]) on this bucket's span `S·T`, for
    /// an `increment ≤ S·T`: the new TAT `max(TAT, now) + increment`, or
    /// `None` if it would be more than `S·T` after `now`. A packet needs no
    /// shortfall, so none is built.
    #[inline(always)]
    pub(super) fn admit(&self, tat: u64, now: u64, increment: u64) -> Option<u64> {
        step::fits_max(tat, now, increment, self.span)
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
