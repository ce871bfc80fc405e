//! The sliding log: exact "at most `limit` cells in any `W` ticks".
//!
//! # The math
//!
//! The log keeps the times of the last `limit` admitted cells, oldest first,
//! in a ring of `N ≥ limit` slots. A cell recorded at `r` counts in every
//! window `(t − W, t]` with `r` in it, i.e. until `t ≥ r + W`. A request of
//! `cost` cells at `now` fits iff at least `cost` of the `limit` recorded
//! cells have expired, and since the ring is sorted that is one comparison:
//!
//! ```text
//! admit ⇔ ring[cost − 1] + W ≤ now          (ring[0] the oldest; empty slots are −∞)
//! ```
//!
//! then the `cost` oldest slots are overwritten with `max(now, newest)`
//! (the `max` keeps the ring sorted if a caller's clock steps back; it only
//! records cells later than they were, which can deny more, never admit
//! more). Hence at most `limit` cells lie in any `W` consecutive ticks,
//! exactly, and:
//!
//! ```text
//! remaining   = number of expired slots
//! retry_after = ring[cost − 1] + W − now      (exact)
//! reset_after = newest + W − now              (0 if all expired)
//! ```
//!
//! # Concurrency: a critical section, bounded
//!
//! The log is not one word, so it is **not lock-free**: every operation runs
//! inside one [`critical_section::with`] (with the `std` feature: while
//! holding a `std::sync::Mutex` private to this log). What runs inside is
//! bounded: a
//! check reads one slot and writes `cost ≤ limit ≤ N` slots; a peek binary
//! searches the ring (`⌈log₂ N⌉ + 1` reads); a revocation shifts at most `N`
//! slots. No allocation, no call into user code, no division (the ring
//! index wraps by comparison). On bare metal the critical section masks
//! interrupts for that long. On a host, enable cellrate's `std` feature
//! (one mutex per log); without it the binary must provide a
//! `critical-section` implementation (its `std` one is a single lock for
//! the whole process). Either way, prefer
//! [`SlidingWindow`](super::SlidingWindow) or [`Gcra`](crate::Gcra) for
//! heavily shared state on servers.
//!
//! # Invariants
//!
//! * The first `limit` slots (from `head`, modulo `limit`) hold the last
//!   `limit` recorded times, sorted, `0` meaning empty; slots beyond `limit`
//!   are unused.
//! * A denial and a peek write nothing.

use core::cell::Cell;
use core::fmt;

use super::WindowError;
use crate::{Decision, Denied, Limited, RateLimiter, Snapshot};

/// The lock around the ring: a critical section, or with the `std` feature
/// a `std` mutex (no `critical-section` implementation needed on hosts).
#[cfg(not(feature = "std"))]
type Lock<T> = critical_section::Mutex<T>;
#[cfg(feature = "std")]
type Lock<T> = std::sync::Mutex<T>;

struct Ring<const N: usize> {
    /// Logical slot 0 (the oldest).
    head: Cell<usize>,
    /// Recorded times plus one; 0 is an empty slot.
    slots: [Cell<u64>; N],
}

/// An exact sliding window over the last `limit ≤ N` admission times; see
/// the [module docs](self). `const`-constructible for `static`s.
///
/// ```
/// use cellrate::{RateLimiter, window::SlidingLog};
/// static LOG: SlidingLog<4> = SlidingLog::new(3, 1_000); // 3 per any 1 000 ticks
/// assert!(LOG.check(0).is_ok() && LOG.check(400).is_ok() && LOG.check(999).is_ok());
/// let denied = LOG.check(999).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(1)); // the cell at 0 expires at 1 000
/// assert!(LOG.check(1_000).is_ok());
/// assert!(LOG.check(1_000).is_err()); // next expiry: 400 + 1 000
/// ```
pub struct SlidingLog<const N: usize> {
    limit: u64,
    window: u64,
    ring: Lock<Ring<N>>,
}

impl<const N: usize> SlidingLog<N> {
    /// A log admitting at most `limit` cells in any `window` ticks.
    ///
    /// # Panics
    /// On a zero limit or window or a limit above `N`: a compile error in
    /// `const` context. See [`try_new`](Self::try_new).
    pub const fn new(limit: u64, window: u64) -> Self {
        match Self::try_new(limit, window) {
            Ok(log) => log,
            Err(e) => panic!("{}", e.as_str()),
        }
    }

    /// A log admitting at most `limit` cells in any `window` ticks, or what
    /// is wrong with them.
    ///
    /// ```
    /// use cellrate::window::{SlidingLog, WindowError};
    /// assert_eq!(SlidingLog::<8>::try_new(9, 10).err(), Some(WindowError::LimitTooLarge { max: 8 }));
    /// ```
    pub const fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
        if let Err(e) = Self::validate(limit, window) {
            return Err(e);
        }
        Ok(SlidingLog {
            limit,
            window,
            ring: Lock::new(Ring {
                head: Cell::new(0),
                slots: [const { Cell::new(0) }; N],
            }),
        })
    }

    const fn validate(limit: u64, window: u64) -> Result<(), WindowError> {
        super::check_params(limit, window, N as u64)
    }

    /// Runs `f` on the ring, under the lock.
    #[inline(always)]
    fn with_ring<R>(&self, f: impl FnOnce(&Ring<N>) -> R) -> R {
        #[cfg(feature = "std")]
        {
            // `f` never panics, so the lock is never poisoned; if it were,
            // the ring is still consistent (every write keeps it sorted).
            let guard = self
                .ring
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&guard)
        }
        #[cfg(not(feature = "std"))]
        {
            critical_section::with(|cs| f(self.ring.borrow(cs)))
        }
    }

    /// The most cells in any window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in ticks.
    pub const fn window(&self) -> u64 {
        self.window
    }

    #[inline(always)]
    fn index(&self, head: usize, logical: usize) -> usize {
        let limit = self.limit as usize;
        let i = head + logical;
        if i >= limit {
            i - limit
        } else {
            i
        }
    }

    /// Whether a slot value has expired at `now`.
    #[inline(always)]
    fn expired(&self, slot: u64, now: u64) -> bool {
        match (slot.wrapping_sub(1)).checked_add(self.window) {
            _ if slot == 0 => true,
            Some(expiry) => expiry <= now,
            // Past the end of time: never expires (fails closed).
            None => false,
        }
    }

    /// Ticks from `now` until a slot value expires.
    #[inline(always)]
    fn until_expiry(&self, slot: u64, now: u64) -> u64 {
        if slot == 0 {
            0
        } else {
            (slot - 1).saturating_add(self.window).saturating_sub(now)
        }
    }

    /// (expired slots, ticks until the newest expires) at `now`.
    fn count(&self, ring: &Ring<N>, now: u64) -> (u64, u64) {
        self.count_below(ring, now, self.limit as usize)
    }

    /// [`count`](Self::count) when at most `bound` slots can have expired
    /// (a denial of `cost` knows slot `cost − 1` has not: `bound = cost − 1`,
    /// so denying one cell searches nothing).
    fn count_below(&self, ring: &Ring<N>, now: u64, bound: usize) -> (u64, u64) {
        let head = ring.head.get();
        let limit = self.limit as usize;
        let slot = |i: usize| ring.slots[self.index(head, i)].get();
        // Expired slots are a prefix: binary search its length.
        let (mut lo, mut hi) = (0usize, bound);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.expired(slot(mid), now) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo as u64, self.until_expiry(slot(limit - 1), now))
    }

    /// Admits `cost` cells at `now` and returns the time they were recorded
    /// at, or denies and writes nothing.
    pub(crate) fn admit_at(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        if cost > self.limit {
            return Err(Denied::CostTooLarge {
                cost,
                limit: self.limit,
            });
        }
        self.with_ring(|ring| {
            let head = ring.head.get();
            let limit = self.limit as usize;
            let newest = ring.slots[self.index(head, limit - 1)].get();
            if cost == 0 {
                let (free, reset) = self.count(ring, now);
                let recorded = newest.saturating_sub(1).max(now);
                return Ok((Decision::new(self.limit, free, reset), recorded));
            }
            let cost = cost as usize;
            let boundary = ring.slots[self.index(head, cost - 1)].get();
            if !self.expired(boundary, now) {
                let (free, reset) = self.count_below(ring, now, cost - 1);
                return Err(Denied::Limited(Limited::with_remaining(
                    self.limit,
                    free,
                    self.until_expiry(boundary, now),
                    reset,
                )));
            }
            // Record max(now, newest) so the ring stays sorted.
            let recorded = if newest == 0 {
                now
            } else {
                (newest - 1).max(now)
            };
            let value = recorded.saturating_add(1);
            for i in 0..cost {
                ring.slots[self.index(head, i)].set(value);
            }
            ring.head.set(self.index(head, cost % limit));
            let (free, _) = self.count(ring, now);
            let reset = self.until_expiry(value, now);
            Ok((Decision::new(self.limit, free, reset), recorded))
        })
    }

    /// Admits `cost` cells at `now`, or denies and writes nothing.
    pub fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit_at(now, cost).map(|(d, _)| d)
    }

    /// Removes `cost` cells recorded at `recorded` (the newest such), as if
    /// never admitted; the ring stays sorted (older cells move up, empty
    /// slots enter at the old end).
    pub(crate) fn revoke_at(&self, recorded: u64, cost: u64) {
        let value = recorded.saturating_add(1);
        self.with_ring(|ring| {
            let head = ring.head.get();
            let limit = self.limit as usize;
            let at = |i: usize| &ring.slots[self.index(head, i)];
            // The newest run of `value`: find its last index.
            let Some(last) = (0..limit).rev().find(|&i| at(i).get() == value) else {
                return;
            };
            let mut first = last;
            while first > 0 && last + 1 - first < cost as usize && at(first - 1).get() == value {
                first -= 1;
            }
            let removed = last + 1 - first;
            // Shift [0, first) up by `removed`, fill [0, removed) with empty.
            for i in (0..first).rev() {
                at(i + removed).set(at(i).get());
            }
            for i in 0..removed {
                at(i).set(0);
            }
        })
    }

    /// The state at `now`, writing nothing.
    pub fn peek(&self, now: u64) -> Snapshot {
        self.with_ring(|ring| {
            let (free, reset) = self.count(ring, now);
            let oldest = ring.slots[ring.head.get()].get();
            Snapshot::new(self.limit, free, reset, self.until_expiry(oldest, now))
        })
    }

    /// Makes the log empty, as new.
    pub fn reset(&self) {
        self.with_ring(|ring| {
            ring.head.set(0);
            for s in &ring.slots {
                s.set(0);
            }
        })
    }

    /// Replaces the limit and window. The recorded times are kept (they mean
    /// the same under any window): the newest `min(limit, new_limit)` stay.
    ///
    /// ```
    /// use cellrate::{RateLimiter, window::SlidingLog};
    /// let mut log = SlidingLog::<8>::new(4, 1_000);
    /// log.check_n(0, 3).unwrap();
    /// log.set_limit(6, 2_000).unwrap();
    /// assert_eq!(log.peek(1_500).remaining(), 3); // still in the longer window
    /// ```
    pub fn set_limit(&mut self, limit: u64, window: u64) -> Result<(), WindowError> {
        Self::validate(limit, window)?;
        #[cfg(feature = "std")]
        let ring = self
            .ring
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        #[cfg(not(feature = "std"))]
        let ring = self.ring.get_mut();
        let old = self.limit as usize;
        let head = ring.head.get();
        let mut sorted = [0u64; N];
        for (i, s) in sorted.iter_mut().enumerate().take(old) {
            let j = if head + i >= old {
                head + i - old
            } else {
                head + i
            };
            *s = ring.slots[j].get();
        }
        let new = limit as usize;
        // Newest `new` entries, right-aligned; empty slots first.
        for i in 0..new {
            let v = if new - i <= old {
                sorted[old - (new - i)]
            } else {
                0
            };
            ring.slots[i].set(v);
        }
        for s in &ring.slots[new..] {
            s.set(0);
        }
        ring.head.set(0);
        self.limit = limit;
        self.window = window;
        Ok(())
    }
}

impl<const N: usize> RateLimiter for SlidingLog<N> {
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        SlidingLog::check_n(self, now, cost)
    }
    fn peek(&self, now: u64) -> Snapshot {
        SlidingLog::peek(self, now)
    }
}

impl<const N: usize> fmt::Debug for SlidingLog<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlidingLog")
            .field("capacity", &N)
            .field("limit", &self.limit)
            .field("window", &self.window)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for SlidingLog<N> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "SlidingLog {{ capacity: {=usize}, limit: {=u64}, window: {=u64} }}",
            N,
            self.limit,
            self.window
        )
    }
}
