//! The fixed window counter.
//!
//! # The math
//!
//! Window `k` covers the ticks `[k·W, (k+1)·W)`. The state is the count `c`
//! of cells admitted in the window the state was last written in. A request
//! of `cost` cells at `now` (in window `k`, elapsed `e`) is admitted iff
//!
//! ```text
//! c_k + cost ≤ limit          (c_k = c if the state is for window k, else 0)
//! ```
//!
//! and then `c_k ← c_k + cost`. The numbers reported:
//!
//! ```text
//! remaining   = limit − c_k
//! reset_after = W − e        (0 when c_k = 0: already full)
//! retry_after = W − e        (exact: the next window starts empty, and cost ≤ limit)
//! ```
//!
//! # The boundary burst
//!
//! Windows are aligned, not sliding: `limit` cells in the last tick of window
//! `k` and `limit` more in the first tick of window `k + 1` are all admitted,
//! `2·limit` cells within two ticks. That is the price of one word of state
//! and no arithmetic beyond an add; [`SlidingWindow`](super::SlidingWindow),
//! [`SlidingLog`](super::SlidingLog) and [`Gcra`](crate::Gcra) do not allow
//! it (the scenario tests show all four side by side).
//!
//! # Packing
//!
//! ```text
//!  63            count_bits  count_bits−1     0
//! ┌─────────────────────────┬──────────────────┐
//! │ window tag (k mod 2^tb) │ count (0..=limit)│
//! └─────────────────────────┴──────────────────┘
//! ```
//!
//! `count_bits = ⌈log₂(limit + 1)⌉`, `tb = 64 − count_bits ≥ 16`, so the
//! largest limit is 2⁴⁸ − 1. State `0` (tag 0, count 0) is a new client: a
//! zero count reads as full whatever the tag. See the
//! [module docs](super) for how tags compare and wrap.
//!
//! # Invariants
//!
//! * The stored count never exceeds `limit` (checked before every store).
//! * One compare-and-swap per admission; a denial, a peek and a cost of 0
//!   store nothing.
//! * No division on any path: the window index comes from a precomputed
//!   multiplier (see the [module docs](super)).
//! * The common case is one subtract and compare: while the state is
//!   `now`'s own window, `state − (tag << count_bits)` is the count, and an
//!   admission stores `state + cost`. The window index of `now` is computed
//!   before the state is read; a state from another window is decoded out
//!   of line.

use super::{check_params, count_bits, low_mask, WindowError, MIN_TAG_BITS};
use crate::algorithm::Limiter;
use crate::divisor::Divisor;
use crate::sync::loom_const_fn;
use crate::{Algorithm, Decision, Denied, Limited, Snapshot};

/// The parameters of a fixed window: `limit` cells per window of `window`
/// ticks. `Copy`, shareable by many state words; implements [`Algorithm`].
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

/// What depends on `now` alone, computed before the state word is read (so
/// the compare-and-swap loop runs only the few operations that need it).
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

    /// `limit` cells per `window` ticks.
    ///
    /// # Panics
    /// On a zero limit or window, or a limit above [`MAX_LIMIT`](Self::MAX_LIMIT):
    /// a compile error in `const` context. See [`try_new`](Self::try_new).
    pub const fn new(limit: u64, window: u64) -> Self {
        match Self::try_new(limit, window) {
            Ok(q) => q,
            Err(e) => panic!("{}", e.as_str()),
        }
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
        // The common case first: the state is for `now`'s own window, i.e.
        // `state − base` is the count (at most `limit`).
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

    /// [`view`](Self::view) for a state written in another window: once
    /// per window per client, so kept out of line (the hot path stays small
    /// enough to inline into any caller).
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
        // Across the wrap of the tick counter window 0 follows the last
        // window (see the module docs of `window`), whose tag need not be
        // one before 0's: in the last window a state of window 0 is ahead.
        // (Matched by tag alone: in a window that only shares the last
        // one's tag, such a state is an alias of an old window, and judging
        // against it only denies more; the state it leaves is tagged with a
        // window that the next one reads as old or as itself, both safe for
        // counts that are each window's own.)
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
        // A copy of the window alone: only it goes to memory for the
        // out-of-line decoder, not the whole prepared value.
        let at = p.at;
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

/// What [`FixedWindowQuota`]'s [`prepare`](Algorithm::prepare) computes
/// before the state is read: the window of `now` (its tag, its empty state,
/// the ticks to its end) and the cost.
///
/// ```
/// use cellrate::Algorithm;
/// use cellrate::window::FixedWindowQuota;
/// let q = FixedWindowQuota::new(3, 1_000);
/// let p = q.prepare(10, 2).unwrap();
/// let (s, d) = q.step(FixedWindowQuota::NEW, &p).unwrap();
/// assert_eq!(d.remaining(), 1);
/// let shortfall = q.step(s, &p).unwrap_err();
/// assert_eq!(q.denial(&p, shortfall).retry_after(), Some(990));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct FixedWindowPrepared {
    at: At,
    cost: u64,
}

/// What a denying [`FixedWindowQuota`] step leaves: the cells left in the
/// judged window and the ticks until it ends. See [`FixedWindowPrepared`]
/// for an example.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowShortfall {
    room: u64,
    until_end: u64,
}

impl Algorithm for FixedWindowQuota {
    type Prepared = FixedWindowPrepared;
    type Shortfall = FixedWindowShortfall;

    /// The window of `now`; refuses a cost above the limit ([`step`]
    /// relies on it).
    ///
    /// [`step`]: Algorithm::step
    #[inline(always)]
    fn prepare(&self, now: u64, cost: u64) -> Result<FixedWindowPrepared, Denied> {
        crate::algorithm::within_limit(cost, self.limit)?;
        Ok(FixedWindowPrepared {
            at: self.at(now),
            cost,
        })
    }

    /// The common case is one subtract and compare: the state is this
    /// window's and has room. Its count is `state − base`, and adding
    /// `cost` to the word adds it to the count (which stays ≤ limit, so
    /// nothing carries into the tag).
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

    tagged_marks!();

    /// A state word of this quota re-expressed for `new` at `now`: the count
    /// of the window holding `now` is kept (at most the new limit) and
    /// re-tagged in the new grid. Containers that swap the parameters of
    /// existing words must pass each word through this: the packing depends
    /// on the limit.
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

/// A shared fixed window limiter: a [`FixedWindowQuota`] and one state word
/// changed by compare-and-swap (a critical section on targets without 64-bit
/// CAS, see [`sync`](crate::sync)). `const`-constructible for `static`s.
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

impl Limiter<FixedWindowQuota> {
    loom_const_fn! {
        /// `limit` cells per `window` ticks, starting full.
        ///
        /// # Panics
        /// As [`FixedWindowQuota::new`]; see [`try_new`](Self::try_new).
        pub fn new(limit: u64, window: u64) -> Self {
            Self::with_quota(FixedWindowQuota::new(limit, window))
        }
    }

    /// `limit` cells per `window` ticks, or what is wrong with them.
    ///
    /// ```
    /// use cellrate::window::FixedWindow;
    /// assert!(FixedWindow::try_new(0, 10).is_err());
    /// ```
    pub fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
        Ok(Self::with_quota(FixedWindowQuota::try_new(limit, window)?))
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    extern crate std;
    use super::{FixedWindow, FixedWindowQuota};
    use crate::Algorithm;
    use loom::sync::Arc;
    use loom::thread;
    use std::{vec, vec::Vec};

    /// Three threads check at their own `now` (one lags into the previous
    /// window). Every interleaving must give the admissions of some serial
    /// order of the same checks, and never more than `limit` per window.
    #[test]
    fn concurrent_checks_are_some_serial_order() {
        const NOWS: [u64; 3] = [99, 100, 99];
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
        let quota = FixedWindowQuota::new(2, 100);
        let orders = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        orders
            .iter()
            .map(|order| {
                let mut state = FixedWindowQuota::NEW;
                let mut admitted = vec![false; 3];
                for &i in order {
                    let now = [99, 100, 99][i];
                    if let Ok((next, _)) = quota.check(state, now, 1) {
                        state = next;
                        admitted[i] = true;
                    }
                }
                admitted
            })
            .collect()
    }
}
