//! The fixed window counter.
//!
//! * The state word is `tag << count_bits | count`, `count_bits =
//!   ⌈log₂(limit + 1)⌉`, the tag at least 16 bits; `0` is a new client and
//!   the stored count never exceeds `limit`.
//! * While the state is `now`'s window a check is a subtract and a compare
//!   and an admission stores `state + cost`; another window's state is
//!   decoded out of line. No division on any path.

use super::{check_params, count_bits, low_mask, WindowError, MIN_TAG_BITS};
use crate::algorithm::Limiter;
use crate::divisor::Divisor;
use crate::{Algorithm, Decision, Denied, Limited, Snapshot};

/// A fixed window: at most `limit` cells in each aligned window
/// `[k·W, (k+1)·W)` of `window` ticks. `Copy`; implements [`Algorithm`].
///
/// With `c` the cells counted in `now`'s window and `e` the ticks elapsed
/// in it, `cost` is admitted iff `c + cost ≤ limit`; `remaining = limit −
/// c`, and `retry_after = reset_after = W − e` (exact: the next window
/// starts empty). Up to `2·limit` pass across an edge (the last tick of one
/// window and the first of the next), which [`SlidingWindow`](super::SlidingWindow),
/// [`SlidingLog`](super::SlidingLog) and [`Gcra`](crate::Gcra) do not allow.
/// State: one `u64`, (window tag, count).
///
/// ```
/// use cellrate::Algorithm;
/// use cellrate::window::FixedWindowQuota;
/// let q = FixedWindowQuota::new(3, 1_000);
/// let (s, d) = q.check(FixedWindowQuota::NEW, 10, 2).unwrap();
/// assert_eq!((d.remaining(), d.reset_after()), (1, 990));
/// assert!(q.check(s, 999, 2).is_err());
/// assert!(q.check(s, 1_000, 3).is_ok()); // a new window
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindowQuota {
    limit: u64,
    window: Divisor,
    count_bits: u32,
    /// `low_mask(count_bits)`, precomputed: the hot path only masks.
    count_mask: u64,
    /// `low_mask(64 − count_bits)`.
    tag_mask: u64,
}

/// What depends on `now` alone, computed before the state word is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
struct At {
    tag: u64,
    /// `tag << count_bits`: the state of this window with a count of 0.
    base: u64,
    until_end: u64,
}

/// What a state word means at some `now`.
#[derive(Clone, Copy)]
struct View {
    /// The tag to store back.
    tag: u64,
    /// Cells counted in the window being judged.
    count: u64,
    /// Ticks from now until that window ends.
    until_end: u64,
}

impl FixedWindowQuota {
    /// The largest limit (2⁴⁸ − 1: the count leaves 16 bits of window tag).
    pub const MAX_LIMIT: u64 = (1 << (64 - MIN_TAG_BITS)) - 1;

    /// [`try_new`](Self::try_new), panicking on an error (a compile error
    /// in `const` context).
    pub const fn new(limit: u64, window: u64) -> Self {
        or_panic!(Self::try_new(limit, window))
    }

    /// `limit` cells per `window` ticks, or what is wrong with them.
    ///
    /// ```
    /// use cellrate::window::{FixedWindowQuota, WindowError};
    /// assert!(FixedWindowQuota::try_new(1 << 48, 10).is_err());
    /// assert_eq!(FixedWindowQuota::try_new(100, 60_000).unwrap().limit(), 100);
    /// ```
    pub const fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
        if let Err(e) = check_params(limit, window, Self::MAX_LIMIT) {
            return Err(e);
        }
        Ok(FixedWindowQuota {
            limit,
            window: Divisor::new(window),
            count_bits: count_bits(limit),
            count_mask: low_mask(count_bits(limit)),
            tag_mask: low_mask(64 - count_bits(limit)),
        })
    }

    /// The most cells admitted per window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in ticks.
    pub const fn window(&self) -> u64 {
        self.window.get()
    }

    /// Bits of the window tag in the state word (`64 − ⌈log₂(limit + 1)⌉`).
    ///
    /// ```
    /// use cellrate::window::FixedWindowQuota;
    /// assert_eq!(FixedWindowQuota::new(100, 1_000).tag_bits(), 57);
    /// ```
    pub const fn tag_bits(&self) -> u32 {
        64 - self.count_bits
    }

    #[inline(always)]
    const fn pack(&self, tag: u64, count: u64) -> u64 {
        (tag << self.count_bits) | count
    }

    /// The window of `now`: its tag, its empty state, the ticks to its end.
    #[inline(always)]
    fn at(&self, now: u64) -> At {
        let (index, elapsed) = self.window.div_rem(now);
        let tag = index & self.tag_mask;
        At {
            tag,
            base: tag << self.count_bits,
            until_end: self.window.get() - elapsed,
        }
    }

    /// The count of cells in the window that judges `now`, and that window's tag.
    #[inline(always)]
    fn view(&self, state: u64, at: &At) -> View {
        // The common case first: `now`'s own window, `state − base` the count.
        let count = state.wrapping_sub(at.base);
        if count <= self.limit {
            return View {
                tag: at.tag,
                count,
                until_end: at.until_end,
            };
        }
        self.view_other(state, at)
    }

    /// [`view`](Self::view) for a state written in another window, out of
    /// line (once per window per client).
    #[cold]
    #[inline(never)]
    fn view_other(&self, state: u64, at: &At) -> View {
        let stored_tag = state >> self.count_bits;
        // A word this quota did not write (saved under another limit without
        // `translate`) may count more than the limit: it is judged full.
        let count = (state & self.count_mask).min(self.limit);
        let tag = at.tag;
        let behind = tag.wrapping_sub(stored_tag) & self.tag_mask;
        if behind == 0 {
            return View {
                tag,
                count,
                until_end: at.until_end,
            };
        }
        // In the last window before the wrap a state of window 0 is ahead
        // (docs/design/windows.md: matched by tag alone, which only denies more).
        let ahead = behind == self.tag_mask
            || (stored_tag == 0 && tag == super::last_index(&self.window) & self.tag_mask);
        if ahead && count > 0 {
            // The state is one window ahead of this `now`: judge against it.
            View {
                tag: stored_tag,
                count,
                until_end: at.until_end.saturating_add(self.window.get()),
            }
        } else {
            View {
                tag,
                count: 0,
                until_end: at.until_end,
            }
        }
    }

    #[inline(always)]
    fn decision(&self, count: u64, until_end: u64) -> Decision {
        let reset = if count == 0 { 0 } else { until_end };
        Decision::new(self.limit, self.limit - count, reset)
    }

    /// The tag of `now`'s window.
    #[inline]
    pub(crate) fn tag_at(&self, now: u64) -> u64 {
        self.at(now).tag
    }

    /// The tag of the window a state word was written in.
    #[inline(always)]
    pub(crate) const fn tag_of(&self, state: u64) -> u64 {
        state >> self.count_bits
    }

    /// [`step`](Algorithm::step) when the state is not this window's with
    /// room: another window's, or full.
    #[inline(always)]
    fn step_other(
        &self,
        state: u64,
        p: &FixedWindowPrepared,
    ) -> Result<(u64, Decision), FixedWindowShortfall> {
        let at = p.at; // only the window goes to the out-of-line decoder

        let v = self.view(state, &at);
        let room = self.limit - v.count;
        if p.cost <= room {
            let count = v.count + p.cost;
            Ok((self.pack(v.tag, count), self.decision(count, v.until_end)))
        } else {
            Err(FixedWindowShortfall {
                room,
                until_end: v.until_end,
            })
        }
    }

    /// The state after giving back `cost` cells admitted under `tag`: only
    /// if that window is still the stored one (otherwise they expired anyway).
    pub(crate) fn revoke(&self, state: u64, tag: u64, cost: u64) -> u64 {
        if state >> self.count_bits != tag {
            return state;
        }
        let count = state & self.count_mask;
        self.pack(tag, count.saturating_sub(cost))
    }
}

/// `now`'s window and the cost, computed before the state is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct FixedWindowPrepared {
    at: At,
    cost: u64,
}

/// A denial's room in the judged window and the ticks until it ends.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowShortfall {
    room: u64,
    until_end: u64,
}

impl Algorithm for FixedWindowQuota {
    tagged_steps!(FixedWindowPrepared, FixedWindowShortfall);

    /// The common case: the state is this window's and has room; its count
    /// is `state − base`, and `state + cost` adds to the count (nothing
    /// carries into the tag: the count stays ≤ limit).
    #[inline(always)]
    fn step(
        &self,
        state: u64,
        p: &FixedWindowPrepared,
    ) -> Result<(u64, Decision), FixedWindowShortfall> {
        let count = state.wrapping_sub(p.at.base);
        if count <= self.limit - p.cost {
            return Ok((
                state + p.cost,
                self.decision(count + p.cost, p.at.until_end),
            ));
        }
        self.step_other(state, p)
    }

    #[inline(always)]
    fn denial(&self, _: &FixedWindowPrepared, s: FixedWindowShortfall) -> Denied {
        Denied::Limited(Limited::with_remaining(
            self.limit,
            s.room,
            s.until_end,
            s.until_end,
        ))
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        let v = self.view(state, &self.at(now));
        let retry = if v.count < self.limit { 0 } else { v.until_end };
        let reset = if v.count == 0 { 0 } else { v.until_end };
        Snapshot::new(self.limit, self.limit - v.count, reset, retry)
    }

    fn is_idle(&self, state: u64, now: u64) -> bool {
        self.view(state, &self.at(now)).count == 0
    }

    /// The count of `now`'s window kept (at most the new limit), re-tagged
    /// in the new grid (the packing depends on the limit).
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        let v = self.view(state, &self.at(now));
        if v.count == 0 {
            return FixedWindowQuota::NEW;
        }
        let (index, _) = new.window.div_rem(now);
        new.pack(index & new.tag_mask, v.count.min(new.limit))
    }
}

window_quota_fmt!(FixedWindowQuota);

/// A shared [`FixedWindowQuota`]: one state word changed by
/// compare-and-swap (a critical section on targets without 64-bit CAS, see
/// [`sync`](crate::sync)). `const`-constructible for `static`s.
///
/// ```
/// use cellrate::{RateLimiter, window::FixedWindow};
/// static API: FixedWindow = FixedWindow::new(2, 1_000); // 2 per 1 000 ticks
/// assert!(API.check(0).is_ok() && API.check(1).is_ok());
/// let denied = API.check(2).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(998)); // the next window
/// assert_eq!(API.check(1_000).unwrap().remaining(), 1);
/// ```
pub type FixedWindow = Limiter<FixedWindowQuota>;

window_limiter!(FixedWindowQuota(limit: u64, window: u64)
    /// ```
    /// use cellrate::window::FixedWindow;
    /// assert!(FixedWindow::try_new(0, 10).is_err());
    /// ```
);

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    extern crate std;
    use super::{FixedWindow, FixedWindowQuota};
    use loom::sync::Arc;
    use loom::thread;
    use std::vec::Vec;

    /// Three threads check at their own `now` (one lags into the previous
    /// window). Every interleaving must give the admissions of some serial
    /// order of the same checks, and never more than `limit` per window.
    const NOWS: [u64; 3] = [99, 100, 99];

    #[test]
    fn concurrent_checks_are_some_serial_order() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let limiter = Arc::new(FixedWindow::new(2, 100));
            let handles: Vec<_> = NOWS
                .iter()
                .map(|&now| {
                    let l = Arc::clone(&limiter);
                    thread::spawn(move || l.admit_marked(now, 1).ok().map(|(_, tag)| tag))
                })
                .collect();
            let outcome: Vec<Option<u64>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            for tag in [0, 1] {
                assert!(outcome.iter().filter(|t| **t == Some(tag)).count() <= 2);
            }
            let admitted: Vec<bool> = outcome.iter().map(Option::is_some).collect();
            assert!(serial_outcomes().contains(&admitted), "{admitted:?}");
        });
    }

    fn serial_outcomes() -> Vec<Vec<bool>> {
        let checks = NOWS.map(|now| (now, 1));
        crate::window::loom_reference::serial_outcomes(&FixedWindowQuota::new(2, 100), checks)
    }
}
