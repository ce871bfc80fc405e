//! The sliding window counter.
//!
//! * The state word is `tag << 2·cb | p << cb | c`, `cb = ⌈log₂(limit + 1)⌉`
//!   bits per count, the tag at least 16 bits; `0` is a new client.
//! * `p, c ≤ limit`, and `estimate ≤ limit` after every admission.
//! * No division on the admit path; while the state is `now`'s window and
//!   `p + c + cost ≤ limit`, no multiplication either (`state + cost` is
//!   stored). A denial's `retry_after` divides once, when it is read.

use super::{check_params, count_bits, low_mask, WindowError, MIN_TAG_BITS};
use crate::algorithm::Limiter;
use crate::decision::Usage;
use crate::divisor::Divisor;
use crate::{Algorithm, Decision, Denied, Limited, Snapshot};

/// A sliding window counter: at most `limit` cells in any window of
/// `window` ticks, estimated from two counts. `Copy`; implements [`Algorithm`].
///
/// It keeps the counts `p` of the previous aligned window and `c` of the
/// current one (elapsed `e`), and assumes `p`'s cells were spread evenly:
///
/// ```text
/// admit cost ⇔ c + cost ≤ limit and p·(W − e) ≤ (limit − c − cost)·W
/// remaining   = ⌊limit − c − p·(W − e)/W⌋
/// reset_after = 2W − e if c > 0;  W − e if only p > 0;  0 otherwise
/// ```
///
/// and then `c ← c + cost`; at a rollover `c` becomes `p` (Cloudflare's
/// "sliding window counter"). `retry_after` is exact for the estimate. On
/// uneven traffic the estimate errs: under 5 % of requests wrongly
/// admitted, the admitted rate within 3 % of an exact [`SlidingLog`](super::SlidingLog)
/// (`tests/sliding_error.rs`). State: one `u64`, (window tag, `p`, `c`);
/// `limit < 2²⁴` and `limit · window < 2⁶⁴`.
///
/// ```
/// use cellrate::Algorithm;
/// use cellrate::window::SlidingWindowQuota;
/// let q = SlidingWindowQuota::new(10, 1_000);
/// let (s, _) = q.check(SlidingWindowQuota::NEW, 900, 10).unwrap();
/// // At 1 500 the previous window still weighs (1 000 − 500)/1 000 · 10 = 5.
/// assert_eq!(q.peek(s, 1_500).remaining(), 5);
/// assert_eq!(q.check(s, 1_500, 6).unwrap_err().retry_after(), Some(100));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingWindowQuota {
    limit: u64,
    window: Divisor,
    count_bits: u32,
    /// `limit · W`, which fits.
    capacity: u64,
    /// `low_mask(count_bits)`, precomputed: the hot path only masks.
    count_mask: u64,
    /// `low_mask(64 − 2·count_bits)`.
    tag_mask: u64,
}

/// What depends on `now` alone, computed before the state word is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct At {
    /// `⌊now / W⌋`, the window index (its tag is the low bits).
    index: u64,
    /// `tag << 2·count_bits`: the state of this window with both counts 0.
    base: u64,
    elapsed: u64,
}

/// What a state word means at some `now`.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    /// The judged window's state with both counts 0 (its tag, shifted).
    base: u64,
    prev: u64,
    cur: u64,
    /// Elapsed ticks of the judged window.
    elapsed: u64,
    /// Ticks from now until the judged instant (non-zero only when the state
    /// is a window ahead of `now`: judged at the start of that window).
    lead: u64,
}

impl SlidingWindowQuota {
    /// The largest limit (2²⁴ − 1: two counts leave 16 bits of tag).
    pub const MAX_LIMIT: u64 = (1 << ((64 - MIN_TAG_BITS) / 2)) - 1;

    /// [`try_new`](Self::try_new), panicking on an error (a compile error
    /// in `const` context).
    pub const fn new(limit: u64, window: u64) -> Self {
        or_panic!(Self::try_new(limit, window))
    }

    /// `limit` cells in any `window` ticks, or what is wrong with them.
    ///
    /// ```
    /// use cellrate::window::{SlidingWindowQuota, WindowError};
    /// assert_eq!(SlidingWindowQuota::try_new(1 << 24, 10), Err(WindowError::LimitTooLarge { max: (1 << 24) - 1 }));
    /// assert_eq!(SlidingWindowQuota::try_new(1 << 20, 1 << 50), Err(WindowError::Overflow));
    /// ```
    pub const fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
        if let Err(e) = check_params(limit, window, Self::MAX_LIMIT) {
            return Err(e);
        }
        let Some(capacity) = limit.checked_mul(window) else {
            return Err(WindowError::Overflow);
        };
        Ok(SlidingWindowQuota {
            limit,
            window: Divisor::new(window),
            count_bits: count_bits(limit),
            capacity,
            count_mask: low_mask(count_bits(limit)),
            tag_mask: low_mask(64 - 2 * count_bits(limit)),
        })
    }

    /// The most cells in any window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in ticks.
    pub const fn window(&self) -> u64 {
        self.window.get()
    }

    /// Bits of the window tag in the state word (`64 − 2·⌈log₂(limit + 1)⌉`).
    ///
    /// ```
    /// use cellrate::window::SlidingWindowQuota;
    /// assert_eq!(SlidingWindowQuota::new(100, 1_000).tag_bits(), 50);
    /// ```
    pub const fn tag_bits(&self) -> u32 {
        64 - 2 * self.count_bits
    }

    #[inline(always)]
    const fn pack(&self, tag: u64, prev: u64, cur: u64) -> u64 {
        (((tag << self.count_bits) | prev) << self.count_bits) | cur
    }

    /// The window of `now`: its tag, its empty state, the ticks elapsed in it.
    #[inline(always)]
    pub(crate) fn at(&self, now: u64) -> At {
        let (index, elapsed) = self.window.div_rem(now);
        let tag = index & self.tag_mask;
        At {
            index,
            base: tag << (2 * self.count_bits),
            elapsed,
        }
    }

    #[inline(always)]
    pub(crate) fn view(&self, state: u64, at: &At) -> View {
        // The common case first: `now`'s own window, `state − base` the counts.
        let counts = state.wrapping_sub(at.base);
        if counts >> (2 * self.count_bits) == 0 {
            // Counts above the limit come only from a word this quota did
            // not write (see `view_other`): judged full.
            return View {
                base: at.base,
                prev: (counts >> self.count_bits).min(self.limit),
                cur: (counts & self.count_mask).min(self.limit),
                elapsed: at.elapsed,
                lead: 0,
            };
        }
        self.view_other(state, at)
    }

    /// [`view`](Self::view) for a state written in another window, out of
    /// line (once per window per client).
    #[cold]
    #[inline(never)]
    fn view_other(&self, state: u64, at: &At) -> View {
        let (tag_now, elapsed) = (at.index & self.tag_mask, at.elapsed);
        let tag = state >> (2 * self.count_bits);
        // A word this quota did not write (saved under another limit without
        // `translate`) may count more than the limit: it is judged full.
        let prev = ((state >> self.count_bits) & self.count_mask).min(self.limit);
        let cur = (state & self.count_mask).min(self.limit);
        // Across the wrap: in window 0 the last window is the previous one,
        // and in the last window a state of window 0 is one ahead.
        let behind = if at.index == 0 && tag == super::last_index(&self.window) & self.tag_mask {
            1
        } else if tag == 0 && at.index == super::last_index(&self.window) {
            self.tag_mask
        } else {
            tag_now.wrapping_sub(tag) & self.tag_mask
        };
        let current = |prev, cur| View {
            base: at.base,
            prev,
            cur,
            elapsed,
            lead: 0,
        };
        if behind == 0 {
            current(prev, cur)
        } else if behind == 1 {
            current(cur, 0)
        } else if behind == self.tag_mask && (prev | cur) != 0 {
            // One window ahead of this `now`: judge at that window's start.
            View {
                base: tag << (2 * self.count_bits),
                prev,
                cur,
                elapsed: 0,
                lead: self.window.get() - elapsed,
            }
        } else {
            current(0, 0)
        }
    }

    /// `p · (W − e)`: the previous window's weight times `W`.
    #[inline(always)]
    const fn weighted_prev(&self, v: &View) -> u64 {
        // p ≤ limit and W − e ≤ W, so this is at most limit·W = capacity.
        v.prev * (self.window.get() - v.elapsed)
    }

    /// Ticks until the estimate is 0 with no more admissions.
    #[inline(always)]
    const fn reset_after(&self, v: &View, cur: u64) -> u64 {
        let w = self.window.get();
        let rest = if cur > 0 {
            (w - v.elapsed).saturating_add(w)
        } else if v.prev > 0 {
            w - v.elapsed
        } else {
            return 0;
        };
        rest.saturating_add(v.lead)
    }

    #[inline(always)]
    fn usage(&self, v: &View, cur: u64) -> Usage {
        // (limit − cur)·W − p·(W − e): room left, times W; saturating (never
        // negative: the estimate never exceeds the limit).
        let room = (self.limit - cur) * self.window.get();
        Usage {
            limit: self.limit,
            slack: room.saturating_sub(self.weighted_prev(v)),
            interval: self.window.get(),
            until_full: self.reset_after(v, cur),
            scale: 1,
        }
    }

    /// Whether `cost` fits now in the view.
    #[inline(always)]
    fn fits(&self, v: &View, cost: u64) -> bool {
        v.cur + cost <= self.limit
            && self.weighted_prev(v) <= (self.limit - v.cur - cost) * self.window.get()
    }

    /// The first tick (from now) at which `cost` fits, with no more traffic.
    /// `cost ≤ limit` and it does not fit now.
    #[inline(always)]
    fn wait_for(&self, v: &View, cost: u64) -> u64 {
        let w = self.window.get();
        let wait = if v.cur + cost <= self.limit {
            // In this window: need p·(W − e′) ≤ (limit − c − cost)·W, p > 0.
            let room = (self.limit - v.cur - cost) * w;
            let x = (room / v.prev.max(1)).min(w);
            (w - x).saturating_sub(v.elapsed)
        } else {
            // In the next: c·(W − e″) ≤ (limit − cost)·W, c > 0.
            let room = (self.limit - cost) * w;
            let y = (room / v.cur.max(1)).min(w);
            (w - v.elapsed).saturating_add(w - y)
        };
        wait.saturating_add(v.lead)
    }

    /// The tag of `now`'s window.
    #[inline]
    pub(crate) fn tag_at(&self, now: u64) -> u64 {
        self.at(now).index & self.tag_mask
    }

    /// The tag of the window a state word was written in.
    #[inline(always)]
    pub(crate) const fn tag_of(&self, state: u64) -> u64 {
        state >> (2 * self.count_bits)
    }

    /// [`step`](Algorithm::step) when the counts do not all fit beside the
    /// cost: another window's state, or a multiplication needed.
    #[inline(always)]
    fn step_other(
        &self,
        state: u64,
        p: &SlidingWindowPrepared,
    ) -> Result<(u64, Decision), SlidingWindowShortfall> {
        let at = p.at; // only the window goes to the out-of-line decoder
        let v = self.view(state, &at);
        if self.fits(&v, p.cost) {
            let cur = v.cur + p.cost;
            Ok((
                v.base | (v.prev << self.count_bits) | cur,
                Decision::from_usage(self.usage(&v, cur)),
            ))
        } else {
            Err(SlidingWindowShortfall(v))
        }
    }

    /// The state after giving back `cost` cells counted under `tag`.
    pub(crate) fn revoke(&self, state: u64, tag: u64, cost: u64) -> u64 {
        let stored = state >> (2 * self.count_bits);
        let prev = (state >> self.count_bits) & self.count_mask;
        let cur = state & self.count_mask;
        // (The window after the last one, across the wrap, is window 0; a
        // tag is ambiguous there, and giving back from the newer window
        // only ever gives back less.)
        let next = if tag == super::last_index(&self.window) & self.tag_mask {
            0
        } else {
            (tag + 1) & self.tag_mask
        };
        if stored == tag {
            self.pack(stored, prev, cur.saturating_sub(cost))
        } else if stored == next {
            self.pack(stored, prev.saturating_sub(cost), cur)
        } else {
            state
        }
    }
}

/// `now`'s window and the cost, computed before the state is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct SlidingWindowPrepared {
    at: At,
    cost: u64,
}

/// The counts a denial judged; the wait is computed from them only when
/// read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct SlidingWindowShortfall(View);

impl Algorithm for SlidingWindowQuota {
    tagged_steps!(SlidingWindowPrepared, SlidingWindowShortfall);

    /// The common case: the state is this window's and `p + c + cost ≤
    /// limit` (which implies the weighted test, as `W − e ≤ W`): store
    /// `state + cost`. A state from another window leaves tag bits in
    /// `counts >> count_bits`, which then exceeds any limit (the sum cannot
    /// overflow: it is below `2^(64 − count_bits) + 2^(count_bits + 1)`).
    #[inline(always)]
    fn step(
        &self,
        state: u64,
        p: &SlidingWindowPrepared,
    ) -> Result<(u64, Decision), SlidingWindowShortfall> {
        let counts = state.wrapping_sub(p.at.base);
        let (prev, cur) = (counts >> self.count_bits, counts & self.count_mask);
        if prev + cur + p.cost <= self.limit {
            let v = View {
                base: p.at.base,
                prev,
                cur,
                elapsed: p.at.elapsed,
                lead: 0,
            };
            let usage = self.usage(&v, cur + p.cost);
            return Ok((state + p.cost, Decision::from_usage(usage)));
        }
        self.step_other(state, p)
    }

    /// `remaining` stays lazy (divided only when read); the wait is
    /// computed here, after the loop.
    #[inline(always)]
    fn denial(&self, p: &SlidingWindowPrepared, s: SlidingWindowShortfall) -> Denied {
        let v = s.0;
        Denied::Limited(Limited::from_usage(
            self.usage(&v, v.cur),
            self.wait_for(&v, p.cost),
        ))
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        let v = self.view(state, &self.at(now));
        let retry = if self.fits(&v, 1) {
            0
        } else {
            self.wait_for(&v, 1)
        };
        Snapshot::from_usage(self.usage(&v, v.cur), retry)
    }

    fn is_idle(&self, state: u64, now: u64) -> bool {
        let v = self.view(state, &self.at(now));
        v.prev == 0 && v.cur == 0
    }

    /// The cells used kept, at most the new limit. On the same grid (the
    /// same window) both counts are kept, re-packed for the new limit.
    /// Across grids the weights of the previous window differ, so the
    /// estimate `u = c + p·(W − e)/W` is kept instead, rounded up, as the
    /// count of the new grid's current window: at that instant the new
    /// limit admits exactly `max(0, a + limit′ − limit)` where the old
    /// admitted `a` (docs/design/reconfigure.md).
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        let v = self.view(state, &self.at(now));
        if v.prev == 0 && v.cur == 0 {
            return SlidingWindowQuota::NEW;
        }
        let (index, _) = new.window.div_rem(now);
        let (prev, cur) = if new.window.get() == self.window.get() {
            (v.prev, v.cur)
        } else {
            // ⌈p·(W − e)/W⌉ ≤ p ≤ limit: no overflow (p·W ≤ capacity).
            let faded = self.weighted_prev(&v).div_ceil(self.window.get());
            (0, v.cur + faded)
        };
        new.pack(
            index & new.tag_mask,
            prev.min(new.limit),
            cur.min(new.limit),
        )
    }
}

window_quota_fmt!(SlidingWindowQuota);

/// A shared [`SlidingWindowQuota`]: one state word changed by
/// compare-and-swap. `const`-constructible for `static`s.
///
/// ```
/// use cellrate::{RateLimiter, window::SlidingWindow};
/// static API: SlidingWindow = SlidingWindow::new(4, 1_000);
/// assert!(API.check_n(999, 4).is_ok());
/// // One tick later the previous window still weighs 999/1000 · 4 > 3.
/// assert!(API.check(1_000).is_err());
/// assert_eq!(API.peek(1_000).retry_after(), 250); // weight 3/4 at 1 250
/// ```
pub type SlidingWindow = Limiter<SlidingWindowQuota>;

window_limiter!(SlidingWindowQuota(limit: u64, window: u64)
    /// ```
    /// use cellrate::window::SlidingWindow;
    /// assert!(SlidingWindow::try_new(10, 0).is_err());
    /// ```
);

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::SlidingWindowQuota;
    use crate::window::loom_reference::race_is_some_serial_order;

    /// Three threads (one in the previous window) race; the admissions must
    /// be those of some serial order of the same checks: the counter never
    /// admits more than its estimate allows.
    #[test]
    fn concurrent_checks_are_some_serial_order() {
        race_is_some_serial_order(
            SlidingWindowQuota::new(2, 100),
            [(150, 1), (99, 2), (150, 1)],
        );
    }
}
