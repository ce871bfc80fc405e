//! One token bucket of a profile: the crate's GCRA step
//! (`crate::gcra::step`) with `T = 1/R` sub-ticks per byte, the increment
//! `B·T` and the span `S·T` (its own, not always the quota's `burst·T`).
//!
//! * Every take checks `B ≤ S` first, so `B·T ≤ S·T ≤` `MAX_SPAN`: every
//!   state written is at most `S·T` ahead of its `now`, within reach.
//! * A take that does not conform stores nothing.

use super::{Color, MeterError};
use crate::divisor::Divisor;
use crate::gcra::step;
use crate::quota::Quota;
use crate::sync::StateWord;

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
    /// The buckets of two `(rate, size)` at `hz`, in that order.
    pub(super) const fn pair(
        (rate0, size0): (u64, u64),
        (rate1, size1): (u64, u64),
        hz: u64,
    ) -> Result<[Bucket; 2], MeterError> {
        match (Bucket::new(rate0, size0, hz), Bucket::new(rate1, size1, hz)) {
            (Ok(first), Ok(second)) => Ok([first, second]),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

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

    /// A bucket on `quota`'s rate and time base with `size` bytes, its span
    /// `S·T` at most [`MAX_SPAN`](crate::quota::MAX_SPAN).
    pub(super) const fn with_size(quota: Quota, size: u64) -> Result<Bucket, MeterError> {
        match size.checked_mul(quota.emission_interval()) {
            Some(span) if span <= crate::quota::MAX_SPAN => Ok(Bucket {
                quota,
                size,
                span,
                per_byte: Divisor::new(quota.emission_interval()),
            }),
            _ => Err(MeterError::Overflow),
        }
    }

    /// `now` (ticks) as a state word of this bucket's sub-ticks.
    #[inline(always)]
    pub(super) fn now(&self, now: u64) -> u64 {
        self.quota.now_word(now)
    }

    /// The TAT after taking `bytes` at `now` (a word), or `None` if the
    /// bucket holds fewer (always when `bytes > S`).
    #[inline(always)]
    pub(super) fn take(&self, tat: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        self.admit(tat, now, bytes * self.quota.emission_interval())
    }

    /// [`step::fits`] on the span `S·T`, for an `increment ≤ S·T`.
    #[inline(always)]
    pub(super) fn admit(&self, tat: u64, now: u64, increment: u64) -> Option<u64> {
        step::fits(tat, now, increment, self.span)
    }

    /// The charge `B·T` of `bytes`, computed before a shared word is read;
    /// `None` when the bucket can never hold them (`bytes > S`).
    #[inline(always)]
    pub(super) fn charge(&self, bytes: u64) -> Option<step::Charge> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        let increment = bytes * self.quota.emission_interval();
        Some(step::Charge::new(self.span, increment))
    }

    /// [`take`](Self::take) in the room form ([`step::admit`]) on a
    /// precomputed charge (why: docs/design/meters.md).
    #[inline(always)]
    pub(super) fn take_charged(&self, tat: u64, now: u64, charge: step::Charge) -> Option<u64> {
        match step::admit(tat, now, &charge) {
            Ok((next, _)) => Some(next),
            Err(_) => None,
        }
    }

    /// One packet's take from a shared word: whether the bytes were taken.
    #[inline(always)]
    pub(super) fn take_shared(&self, word: &StateWord, now: u64, bytes: u64) -> bool {
        let Some(charge) = self.charge(bytes) else {
            return false;
        };
        word.update(|tat| match self.take_charged(tat, now, charge) {
            Some(next) => Ok((next, ())),
            None => Err(()),
        })
        .is_ok()
    }

    /// One bucket's pass over a burst: each packet `i` with `candidate(i,
    /// out[i])` gets `pass` if the bucket (after the earlier passes) holds
    /// it, else `fail`. Returns the TAT after the pass.
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

    /// `max(TAT, now)` and the slack `S·T − (max(TAT, now) − now)`, or
    /// `None` past the span (a clock that stepped back).
    #[inline(always)]
    pub(super) fn slack(&self, tat: u64, now: u64) -> Option<(u64, u64)> {
        let deficit = step::debt(tat, now);
        if deficit > self.span {
            return None;
        }
        Some((step::later(now, deficit), self.span - deficit))
    }

    /// The TAT after a batch spent `spent ≤ slack` from `base`, or as it
    /// was if no packet passed.
    #[inline(always)]
    pub(super) fn after(tat: u64, base: u64, spent: u64, touched: bool) -> u64 {
        if touched {
            step::later(base, spent)
        } else {
            tat
        }
    }

    /// Whole bytes in the bucket at `now`, rounded down.
    pub(super) fn tokens(&self, tat: u64, now: u64) -> u64 {
        let deficit = step::debt(tat, now);
        self.whole_bytes(self.span.saturating_sub(deficit))
    }
}
