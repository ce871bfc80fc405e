//! The sliding log.
//!
//! * The first `limit` slots (from `head`) hold the expiry words of the last
//!   `limit` recorded cells, sorted (serial order), `0` meaning empty; an
//!   admission overwrites the `cost` oldest with `max(now + W, newest)`.
//! * `known < limit`, and the first `known` slots have expired by `since`;
//!   `next_in` is 0 or the ticks from `since` until slot `known` expires;
//!   `newest_in` the ticks from `since` until the newest slot expires, read
//!   only while `next_in` is not 0 (docs/design/windows.md).
//! * A denial and a peek write nothing; under the lock a check reads at
//!   most `2⌈log₂ N⌉ + 4` slots and writes `cost ≤ N`; no division.

use super::WindowError;
use crate::gcra::step;
use crate::sync::{guarded_zeros, loom_const_fn, Guarded, GuardedU64};
use crate::{Decision, Denied, Limited, Snapshot};

/// The longest window a [`SlidingLog`] accepts: 2⁶¹ ticks (73 years at
/// 1 GHz), so that every expiry it records is within reach of serial time.
pub const MAX_WINDOW: u64 = step::REACH;

/// What a check reads of the ring at its `now`: the expired slots (a
/// prefix), and the ticks until the first that has not expired expires
/// and until the newest does (0 for one that has).
#[derive(Clone, Copy)]
struct Expired {
    free: usize,
    next: u64,
    newest: u64,
}

/// The ring, and a header that lets a check decide without reading a slot
/// whose place depends on another read.
struct Ring<const N: usize> {
    /// Where the ring starts and what is known expired, one word:
    /// `head | known << 32` (both at most the limit, `< 2³²`). `head` is
    /// the physical index of logical slot 0 (the oldest); `known` the length
    /// of a prefix of slots that have expired by `since` (the expired prefix
    /// left by the last admission; 0 is always true).
    pos: GuardedU64,
    /// The tick `known` holds at (the last admission's `now`).
    since: GuardedU64,
    /// Ticks from `since` until logical slot `known`, the first not known
    /// to have expired, expires; 0: not known (the header answers nothing).
    next_in: GuardedU64,
    /// Ticks from `since` until logical slot `limit − 1`, the newest,
    /// expires (0 if it had by `since`); valid while `next_in` is not 0.
    newest_in: GuardedU64,
    /// Expiry words `2·e + 1`, oldest first from `head`; 0 is an empty slot.
    slots: [GuardedU64; N],
}

impl<const N: usize> Ring<N> {
    /// `(head, known)`, read together.
    #[inline(always)]
    fn pos(&self) -> (usize, usize) {
        let pos = self.pos.get();
        // Both below 2³² (the limit is).
        ((pos & 0xffff_ffff) as usize, (pos >> 32) as usize)
    }

    #[inline(always)]
    fn set_pos(&self, head: usize, known: usize) {
        self.pos.set(head as u64 | (known as u64) << 32);
    }
}

/// An exact sliding window: at most `limit ≤ N` cells in any `window`
/// consecutive ticks, from the expiry ticks of the last `limit` admitted
/// cells in a ring of `N` slots (`8·N + 40` bytes).
///
/// `cost` cells are admitted iff the `cost`-th oldest slot has expired at
/// `now`; `retry_after` is exact. Expiries are in serial time (as
/// [`Gcra`](crate::Gcra#serial-time) keeps TATs): `now` may wrap past `2⁶⁴`,
/// and answers are exact while two checks are at most 2⁶² ticks apart (past
/// that the log denies more until it drains, never admits more).
///
/// **Not lock-free**: with `std` the ring sits behind a sequence lock (a
/// denial, a peek and a `cost == 0` check take no lock); without `std` every
/// operation runs in one [`critical_section::with`], so interrupt handlers
/// can share a log. Prefer [`SlidingWindow`](super::SlidingWindow) or
/// [`Gcra`](crate::Gcra) for heavily shared state.
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
    ring: Guarded<Ring<N>>,
}

impl<const N: usize> SlidingLog<N> {
    ring_limiter!();

    loom_const_fn! {
        /// A log of at most `limit` cells in any `window` ticks, or what is
        /// wrong with them.
        ///
        /// ```
        /// use cellrate::window::{SlidingLog, WindowError};
        /// assert_eq!(SlidingLog::<8>::try_new(9, 10).err(), Some(WindowError::LimitTooLarge { max: 8 }));
        /// let max = 1 << 61;
        /// assert_eq!(SlidingLog::<4>::try_new(4, max + 1).err(), Some(WindowError::WindowTooLong { max }));
        /// ```
        pub fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
            match Self::validate(limit, window) {
                Ok(()) => Ok(SlidingLog {
                    limit,
                    window,
                    ring: Guarded::new(Ring {
                        pos: GuardedU64::new(0),
                        since: GuardedU64::new(0),
                        next_in: GuardedU64::new(0),
                        newest_in: GuardedU64::new(0),
                        slots: guarded_zeros(),
                    }),
                }),
                Err(e) => Err(e),
            }
        }
    }

    /// The largest limit: the capacity `N`, and below 2³² (the ring's
    /// start and known-expired count share one word).
    const MAX_LIMIT: u64 = if N as u64 > u32::MAX as u64 {
        u32::MAX as u64
    } else {
        N as u64
    };

    const fn validate(limit: u64, window: u64) -> Result<(), WindowError> {
        if window > MAX_WINDOW {
            return Err(WindowError::WindowTooLong { max: MAX_WINDOW });
        }
        super::check_params(limit, window, Self::MAX_LIMIT)
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

    /// Whether a slot (an expiry word, 0 if empty) has expired at `now`
    /// (ticks): its expiry is not ahead of `now` in serial order.
    #[inline(always)]
    fn expired(slot: u64, now: u64) -> bool {
        step::is_idle(slot, step::word(now))
    }

    /// Ticks from `now` until a slot expires (0 if it has).
    #[inline(always)]
    fn until_expiry(slot: u64, now: u64) -> u64 {
        step::debt(slot, step::word(now))
    }

    /// The expiry tick at logical slot `i` (0 the oldest).
    #[inline(always)]
    fn slot(&self, ring: &Ring<N>, head: usize, i: usize) -> u64 {
        ring.slots[self.index(head, i)].get()
    }

    /// How many slots have expired at `now` (a prefix: the ring is sorted),
    /// and the ticks until the first that has not expires and until the
    /// newest does. The header answers when `now` lies in `[since, since +
    /// next_in)`; otherwise [`search`](Self::search) from the known prefix.
    #[inline(always)]
    fn expired_prefix(&self, ring: &Ring<N>, (head, known): (usize, usize), now: u64) -> Expired {
        let elapsed = now.wrapping_sub(ring.since.get());
        let next_in = ring.next_in.get();
        // (`known < limit` always: an admission leaves `free − cost` with
        // `cost ≥ 1`, everything else 0. And next_in < 2⁶³: `elapsed` below
        // it is a time after `since`, never one before.)
        if elapsed < next_in {
            Expired {
                free: known,
                next: next_in - elapsed,
                newest: ring.newest_in.get().saturating_sub(elapsed),
            }
        } else {
            // From the slots themselves (two words back, in registers).
            let (free, next) = self.search_next(ring, head, now, known);
            let newest = self.slot(ring, head, self.limit as usize - 1);
            Expired {
                free,
                next,
                newest: Self::until_expiry(newest, now),
            }
        }
    }

    /// [`search`](Self::search) over the whole ring, and the ticks until
    /// the first slot that has not expired expires (0 if all have).
    #[cold]
    #[inline(never)]
    fn search_next(&self, ring: &Ring<N>, head: usize, now: u64, guess: usize) -> (usize, u64) {
        let limit = self.limit as usize;
        let free = self.search(ring, head, now, guess);
        let next = if free < limit {
            Self::until_expiry(self.slot(ring, head, free), now)
        } else {
            0
        };
        (free, next)
    }

    /// Rewrites the header for the ring as it is under `limit`, claiming no
    /// expired prefix (after a change that moves slots): checks read the
    /// slots until the next admission.
    fn rehead(ring: &Ring<N>, head: usize) {
        ring.set_pos(head, 0);
        ring.next_in.set(0);
        ring.newest_in.set(0);
    }

    /// The expired prefix's length, searched from `guess ≤ limit`:
    /// galloping away from it (steps 1, 2, 4, …), then halving, so
    /// `O(log d)` reads for an answer `d` slots from the guess.
    fn search(&self, ring: &Ring<N>, head: usize, now: u64, guess: usize) -> usize {
        let bound = self.limit as usize;
        let expired = |i: usize| Self::expired(self.slot(ring, head, i), now);
        // Invariant from here: slots before `lo` expired, slot `hi` did not
        // (or `hi == bound`); the answer is in [lo, hi].
        let (mut lo, mut hi) = (guess, guess);
        if guess < bound && expired(guess) {
            (lo, hi) = (guess + 1, bound);
            let mut step = 1;
            while step <= hi - lo {
                let probe = lo + step - 1;
                if !expired(probe) {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                step *= 2;
            }
        } else if guess > 0 && !expired(guess - 1) {
            (lo, hi) = (0, guess - 1);
            let mut step = 1;
            while step <= hi {
                let probe = hi - step;
                if expired(probe) {
                    lo = probe + 1;
                    break;
                }
                hi = probe;
                step *= 2;
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if expired(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Admits `cost` cells at `now` and returns the time they were recorded
    /// at (their expiry minus `W`), or denies and writes nothing.
    #[inline]
    pub(crate) fn admit_at(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        crate::algorithm::within_limit(cost, self.limit)?;
        let limit = self.limit as usize;
        let cost = cost as usize;
        self.ring.update(
            // Reads only (on a host, a view that may be torn and is then
            // thrown away; every index stays below the limit either way).
            |ring| {
                let pos = ring.pos();
                let head = pos.0;
                let seen = self.expired_prefix(ring, pos, now);
                if seen.free < cost || cost == 0 {
                    // Slot `cost − 1` has not expired; for one cell more
                    // than have, it is the first that has not.
                    let boundary = match cost {
                        0 => 0,
                        _ if cost - 1 == seen.free => seen.next,
                        _ => Self::until_expiry(self.slot(ring, head, cost - 1), now),
                    };
                    return Err(self.without_admitting(boundary, &seen, now, cost));
                }
                Ok((head, seen))
            },
            // The single writer, on the state just read.
            |ring, (head, seen)| {
                let until = self.new_expiry(&seen);
                let value = step::word(now.wrapping_add(until));
                for i in 0..cost {
                    ring.slots[self.index(head, i)].set(value);
                }
                // cost ≤ limit: the new head is `cost` on, wrapped once (no `%`).
                let step = if cost == limit { 0 } else { cost };
                let head = self.index(head, step);
                // The `cost` oldest expired slots became the newest, which
                // have not (`value` is after `now`): `free − cost` remain.
                // The first slot not expired stays where it was (cost ≤
                // free), or is the first written if all had expired.
                let next = if seen.free == limit { until } else { seen.next };
                let free = seen.free - cost;
                ring.set_pos(head, free);
                ring.since.set(now);
                ring.next_in.set(next);
                ring.newest_in.set(until);
                let recorded = now.wrapping_add(until - self.window);
                Ok((Decision::new(self.limit, free as u64, until), recorded))
            },
        )
    }

    /// The ticks from `now` until cells admitted at `now` expire: `W`, or
    /// until the newest does if later (a clock that stepped back), so the
    /// ring stays sorted.
    #[inline(always)]
    fn new_expiry(&self, seen: &Expired) -> u64 {
        if seen.newest > self.window {
            seen.newest
        } else {
            self.window
        }
    }

    /// The answer to a check that writes nothing: `cost == 0` (admitted,
    /// recorded at `max(now, newest − W)`) or slot `cost − 1` not expired
    /// (denied for `boundary` ticks, until it does).
    #[inline(always)]
    fn without_admitting(
        &self,
        boundary: u64,
        seen: &Expired,
        now: u64,
        cost: usize,
    ) -> Result<(Decision, u64), Denied> {
        if cost == 0 {
            let recorded = now.wrapping_add(self.new_expiry(seen) - self.window);
            return Ok((
                Decision::new(self.limit, seen.free as u64, seen.newest),
                recorded,
            ));
        }
        Err(Denied::Limited(Limited::with_remaining(
            self.limit,
            seen.free as u64,
            boundary,
            seen.newest,
        )))
    }

    /// Gives back `cost` cells admitted at `now` (the newest such; for
    /// example for a request admitted but never served), as if never
    /// admitted. Returns the state after the refund.
    ///
    /// ```
    /// use cellrate::window::SlidingLog;
    /// let log = SlidingLog::<8>::new(4, 1_000);
    /// log.check_n(0, 4).unwrap();
    /// assert_eq!(log.refund_n(0, 3).remaining(), 3);
    /// assert_eq!(log.refund_n(0, 100).remaining(), 4);
    /// ```
    pub fn refund_n(&self, now: u64, cost: u64) -> Snapshot {
        if cost > 0 {
            self.revoke_at(now, cost);
        }
        self.peek(now)
    }

    /// Removes `cost` cells recorded at `recorded` (the newest such), as if
    /// never admitted; the ring stays sorted (older cells move up, empty
    /// slots enter at the old end).
    pub(crate) fn revoke_at(&self, recorded: u64, cost: u64) {
        let value = step::word(recorded.wrapping_add(self.window));
        self.ring.write(|ring| {
            let (head, _) = ring.pos();
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
            // Cells moved: claim no expired prefix (always true).
            Self::rehead(ring, head);
        })
    }

    /// The state at `now`, writing nothing.
    pub fn peek(&self, now: u64) -> Snapshot {
        self.ring.read(|ring| {
            let pos = ring.pos();
            let head = pos.0;
            let seen = self.expired_prefix(ring, pos, now);
            let oldest = self.slot(ring, head, 0);
            Snapshot::new(
                self.limit,
                seen.free as u64,
                seen.newest,
                Self::until_expiry(oldest, now),
            )
        })
    }

    /// Makes the log empty, as new.
    pub fn reset(&self) {
        self.ring.write(|ring| {
            for s in &ring.slots {
                s.set(0);
            }
            ring.since.set(0);
            Self::rehead(ring, 0);
        })
    }

    /// Replaces the limit and window at `now`. Only the recorded times the
    /// old window still counts at `now` are kept, the newest
    /// `min(limit, new_limit)` of them, each counted until the later of its
    /// expiries under the old and the new window; so at `now` the new rules
    /// admit exactly `max(0, a + new_limit − limit)` where the old admitted
    /// `a`.
    ///
    /// ```
    /// use cellrate::{RateLimiter, window::SlidingLog};
    /// let mut log = SlidingLog::<8>::new(4, 1_000);
    /// log.check_n(0, 3).unwrap();
    /// log.set_limit(0, 6, 2_000).unwrap();
    /// assert_eq!(log.peek(1_500).remaining(), 3); // still in the longer window
    /// ```
    pub fn set_limit(&mut self, now: u64, limit: u64, window: u64) -> Result<(), WindowError> {
        Self::validate(limit, window)?;
        let ring = self.ring.get_mut();
        let (old, new) = (self.limit as usize, limit as usize);
        let (head, _) = ring.pos();
        let slots = &mut ring.slots[..];
        // Oldest first from slot 0.
        slots[..old].rotate_left(head);
        // Each kept time expires at the later of its expiries under the two
        // windows (`e − W + W'` if the window grows, else `e`, serial);
        // empty slots stay empty, and so do times the old window no longer
        // counts at `now` (the oldest, right after the empty slots: the
        // layout below holds).
        for slot in &slots[..old] {
            let e = slot.get();
            if Self::expired(e, now) {
                slot.set(0);
            } else if window > self.window {
                slot.set(step::later(e, window - self.window));
            }
        }
        // The newest `new` right-aligned in [0, new), empty slots first
        // (slots from `old` on are empty).
        if new <= old {
            slots[..old].rotate_left(old - new);
        } else {
            slots[..new].rotate_right(new - old);
        }
        for slot in &slots[new..] {
            slot.set(0);
        }
        Self::rehead(ring, 0);
        self.limit = limit;
        self.window = window;
        Ok(())
    }
}

ring_limiter!(SlidingLog, "capacity");

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    extern crate std;
    use super::SlidingLog;
    use loom::sync::Arc;
    use loom::thread;
    use std::{vec, vec::Vec};

    /// Each thread's check (`now`, `cost`), after one cell at 0 (expiring
    /// at 100) in a log of 2 per 100 ticks: either fits alone, not both
    /// (whichever runs first leaves the other too little).
    const CHECKS: [(u64, u64); 2] = [(120, 2), (50, 1)];
    /// Where the models read the final state.
    const LATER: u64 = 150;

    fn log() -> SlidingLog<3> {
        let log = SlidingLog::new(2, 100);
        log.check_n(0, 1).unwrap();
        log
    }

    /// Two threads race on the sequence-locked ring: which check was
    /// admitted, what each was told remains, and the state left must be
    /// those of one of the two serial orders (no lost or torn update, no
    /// over-admission).
    #[test]
    fn concurrent_checks_are_some_serial_order() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let shared = Arc::new(log());
            let handles: Vec<_> = CHECKS
                .iter()
                .map(|&(now, cost)| {
                    let l = Arc::clone(&shared);
                    thread::spawn(move || l.check_n(now, cost).map(|d| d.remaining()).ok())
                })
                .collect();
            let outcome: Vec<Option<u64>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            let end = shared.peek(LATER);
            let end = (end.remaining(), end.reset_after(), end.retry_after());
            assert!(
                serial().contains(&(outcome.clone(), end)),
                "{outcome:?} {end:?}"
            );
        });
    }

    /// A peek racing a writer sees a state some serial order passes
    /// through: before or after the admission, never a mix.
    #[test]
    fn peek_is_never_torn() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let shared = Arc::new(log());
            let writer = {
                let l = Arc::clone(&shared);
                thread::spawn(move || l.check_n(120, 2).is_ok())
            };
            let reader = {
                let l = Arc::clone(&shared);
                thread::spawn(move || l.peek(130))
            };
            let seen = reader.join().unwrap();
            assert!(writer.join().unwrap());
            let seen = (seen.remaining(), seen.reset_after());
            // Before: the cell at 0 expired at 100, two free; after: two
            // cells expiring at 220.
            assert!(seen == (2, 0) || seen == (0, 90), "{seen:?}");
        });
    }

    /// What each check was told remains (`None`: denied), and the final
    /// (remaining, reset_after, retry_after).
    type Outcome = (Vec<Option<u64>>, (u64, u64, u64));

    /// Both orders of the two checks, run on one thread.
    fn serial() -> Vec<Outcome> {
        [[0, 1], [1, 0]]
            .iter()
            .map(|order| {
                let log = log();
                let mut outcome = vec![None; 2];
                for &i in order {
                    let (now, cost) = CHECKS[i];
                    outcome[i] = log.check_n(now, cost).map(|d| d.remaining()).ok();
                }
                let end = log.peek(LATER);
                (
                    outcome,
                    (end.remaining(), end.reset_after(), end.retry_after()),
                )
            })
            .collect()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    extern crate std;
    use super::SlidingLog;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// The expired slots counted one by one over the whole ring (no header,
    /// no search).
    fn count_expired(log: &SlidingLog<16>, now: u64) -> usize {
        log.ring.read(|ring| {
            let (head, _) = ring.pos();
            (0..log.limit as usize)
                .filter(|&i| SlidingLog::<16>::expired(log.slot(ring, head, i), now))
                .count()
        })
    }

    /// The header is rewritten by `reset`, `set_limit` and revocations.
    #[test]
    fn header_follows_reset_set_limit_and_revoke() {
        let mut log = SlidingLog::<16>::new(4, 100);
        log.check_n(0, 3).unwrap();
        let (_, at) = log.admit_at(10, 1).unwrap();
        log.revoke_at(at, 1);
        assert_eq!(log.peek(10).remaining(), 1);
        assert_eq!(count_expired(&log, 10), 1);
        // A shorter window: the times at 0 still count until 100.
        log.set_limit(10, 8, 50).unwrap();
        assert_eq!(log.peek(10).remaining(), 5);
        assert_eq!(log.peek(49).retry_after(), 0);
        assert!(log.check_n(49, 5).is_ok());
        assert_eq!(log.check_n(49, 1).unwrap_err().retry_after(), Some(51));
        log.reset();
        assert_eq!(log.peek(0).remaining(), 8);
        assert!(log.check_n(0, 8).is_ok());
    }

    proptest! {
        /// Checks at times that jump forward and back: every `remaining`
        /// (after a check, and from a peek at another time) is the expired
        /// count of the ring itself, and the search finds it from every
        /// starting guess.
        #[test]
        fn remaining_is_the_expired_count(
            limit in 1u64..=16,
            window in 1u64..50,
            ops in prop::collection::vec((0u64..200, 0u64..4, 0u64..200), 1..80),
        ) {
            let log = SlidingLog::<16>::new(limit, window);
            for (now, cost, probe) in ops {
                let told = match log.check_n(now, cost) {
                    Ok(d) => Some(d.remaining()),
                    Err(denied) => denied.limited().map(|l| l.remaining()),
                };
                if let Some(told) = told {
                    prop_assert_eq!(told as usize, count_expired(&log, now));
                }
                // The header's copies match the slots they copy.
                log.ring.read(|ring| {
                    let (head, known) = ring.pos();
                    let limit = log.limit as usize;
                    let since = ring.since.get();
                    assert!(known < limit);
                    let next_in = ring.next_in.get();
                    if next_in > 0 {
                        let until = |i| SlidingLog::<16>::until_expiry(log.slot(ring, head, i), since);
                        assert_eq!(next_in, until(known));
                        assert_eq!(ring.newest_in.get(), until(limit - 1));
                    }
                });
                let expect = count_expired(&log, probe);
                prop_assert_eq!(log.peek(probe).remaining() as usize, expect);
                let found: Vec<usize> = log.ring.read(|ring| {
                    let (head, _) = ring.pos();
                    (0..=limit as usize)
                        .map(|guess| log.search(ring, head, probe, guess))
                        .collect()
                });
                prop_assert!(found.iter().all(|&f| f == expect), "{:?} vs {}", found, expect);
            }
        }
    }
}
