//! One token bucket of a meter profile: the GCRA of its rate, and its size.
//!
//! A bucket of `S` bytes refilled at `R` bytes per second is the crate's one
//! GCRA step (`crate::gcra::step`) with the emission interval `T = 1/R`
//! (sub-ticks per byte, through [`Quota`]), the increment `B·T` and the span
//! `S·T`, in serial time (see [`gcra`](crate::gcra#serial-time)):
//!
//! ```text
//! take B:  conforms iff B ≤ S and max(TAT, now) + B·T − now ≤ S·T,
//!          then TAT ← max(TAT, now) + B·T
//! ```
//!
//! The span is the bucket's own, not always the quota's `burst·T` (a bucket
//! of size 0 keeps a quota of burst 1 for its time base; srTCM's committed
//! bucket runs on the quota of both buckets together). At one `now` a
//! bucket is its *slack* `S·T − (max(TAT, now) − now)`, and its *room* in
//! whole bytes `⌊slack / T⌋`, by a [`Divisor`] kept in the bucket.
//!
//! # Invariants
//!
//! * Every take checks `B ≤ S` first, so `B·T ≤ S·T ≤` [`MAX_SPAN`]: every
//!   state a take or a batch writes is at most `S·T` ahead of its `now`,
//!   within the reach of a state word.
//! * A take that does not conform stores nothing.
//!
//! [`MAX_SPAN`]: crate::quota::MAX_SPAN

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
    /// The buckets of `(rate, size)` `first` and `second` at `hz` (as
    /// [`new`](Self::new)), in that order: a profile of two independent
    /// buckets.
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

    /// The GCRA step with the increment `B·T`: the TAT after taking `bytes`
    /// at `now` (a state word of this bucket's sub-ticks), or `None` if the
    /// bucket holds fewer (always when `bytes > S`).
    #[inline(always)]
    pub(super) fn take(&self, tat: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        self.admit(tat, now, bytes * self.quota.emission_interval())
    }

    /// The crate's GCRA step ([`step::fits`], the admission of
    /// [`step::admit`]) on this bucket's span `S·T`, for an
    /// `increment ≤ S·T`: the new TAT `max(TAT, now) + increment`, or
    /// `None` if it would be more than `S·T` after `now`. A packet needs no
    /// shortfall, so none is built.
    #[inline(always)]
    pub(super) fn admit(&self, tat: u64, now: u64, increment: u64) -> Option<u64> {
        step::fits(tat, now, increment, self.span)
    }

    /// The charge `B·T` of `bytes` and the room `S·T − B·T` it leaves, for
    /// [`take_charged`](Self::take_charged), computed before a shared word
    /// is read; `None` when the bucket can never hold them (`bytes > S`).
    #[inline(always)]
    pub(super) fn charge(&self, bytes: u64) -> Option<step::Charge> {
        if bytes > self.size {
            return None;
        }
        // bytes ≤ size, so bytes·T ≤ span fits.
        let increment = bytes * self.quota.emission_interval();
        Some(step::Charge::new(self.span, increment))
    }

    /// [`take`](Self::take) in the room form ([`step::admit`]), on a charge
    /// from [`charge`](Self::charge), the room computed before the load:
    /// what the shared flows run inside their compare-and-swap loops (why
    /// not the debt form there: docs/design/meters.md).
    #[inline(always)]
    pub(super) fn take_charged(&self, tat: u64, now: u64, charge: step::Charge) -> Option<u64> {
        match step::admit(tat, now, &charge) {
            Ok((next, _)) => Some(next),
            Err(_) => None,
        }
    }

    /// One packet's take of `bytes` from a shared word at `now`: the charge
    /// computed before the load, then a compare-and-swap loop of
    /// [`take_charged`](Self::take_charged). Whether the bytes were taken.
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

    /// One bucket's pass over a burst at `now` (a word), one
    /// [`take`](Self::take) per candidate in order: each packet `i` with
    /// `candidate(i, out[i])` gets `pass` if the bucket (after the earlier
    /// passing candidates) holds it and `fail` if not; others are left alone. Returns the TAT
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

    /// `max(TAT, now)` (serial, as a word) and the bucket's slack at `now`
    /// (a word), `S·T − (max(TAT, now) − now)`: `take(B)` succeeds iff
    /// `B·T ≤ slack`, i.e. iff `B ≤ ⌊slack / T⌋`, and then leaves
    /// `slack − B·T`. `None` when the state is past its span (nothing fits,
    /// not even 0 bytes: a clock that stepped back); batches then go packet
    /// by packet.
    #[inline(always)]
    pub(super) fn slack(&self, tat: u64, now: u64) -> Option<(u64, u64)> {
        let deficit = step::debt(tat, now);
        if deficit > self.span {
            return None;
        }
        Some((step::later(now, deficit), self.span - deficit))
    }

    /// The TAT after a batch spent `spent ≤ slack` sub-ticks from
    /// `base = max(TAT, now)` (`base + spent ≤ now + S·T`), or the TAT as it
    /// was if no packet passed (not even one of 0 bytes).
    #[inline(always)]
    pub(super) fn after(tat: u64, base: u64, spent: u64, touched: bool) -> u64 {
        if touched {
            step::later(base, spent)
        } else {
            tat
        }
    }

    /// Whole bytes in the bucket at `now` (a word; rounded down), for
    /// inspection.
    pub(super) fn tokens(&self, tat: u64, now: u64) -> u64 {
        let deficit = step::debt(tat, now);
        self.whole_bytes(self.span.saturating_sub(deficit))
    }
}
