//! The bucketed sliding window with a `u64` count per bucket.
//!
//! * The state is a ring of `N` counts (newest at `head < N`), the newest
//!   bucket's index and `total`, the sum of the ring, at most `limit` after
//!   every admission; `total = 0` reads as a new client whatever the index.
//! * Moving on `d` buckets zeroes the `d` oldest and moves `head`; a denial
//!   finds its wait by dropping the oldest buckets one by one. Under the
//!   lock a check reads and writes at most `N + 3` words; no division.

use super::bucketed::check_buckets;
use super::{check_params, WindowError};
use crate::divisor::Divisor;
use crate::sync::{guarded_zeros, loom_const_fn, Guarded, GuardedU64};
use crate::{Decision, Denied, Limited, Snapshot};

/// The most buckets a [`WideBucketedWindow`] accepts.
pub const MAX_BUCKETS: u32 = 4_096;

/// The ring, the newest bucket's index and the window's sum.
struct Ring<const N: usize> {
    /// The index `⌊now / b⌋` of the newest bucket written.
    index: GuardedU64,
    /// Where that bucket is in `counts` (below `N`).
    head: GuardedU64,
    /// The sum of `counts`.
    total: GuardedU64,
    counts: [GuardedU64; N],
}

/// How many buckets of the ring are in use: all `N` (a constant, so the
/// loops are unrolled for it) or the first `n` (chosen at run time). Each
/// check is compiled once for each.
trait Used: Copy {
    fn get(self) -> usize;
}

/// All `N` buckets.
#[derive(Clone, Copy)]
struct All<const N: usize>;

impl<const N: usize> Used for All<N> {
    #[inline(always)]
    fn get(self) -> usize {
        N
    }
}

/// The first `n < N` buckets.
#[derive(Clone, Copy)]
struct First(usize);

impl Used for First {
    #[inline(always)]
    fn get(self) -> usize {
        self.0
    }
}

/// What a check reads: the judged bucket and its window.
#[derive(Clone, Copy)]
struct View {
    /// The judged bucket's index.
    index: u64,
    /// Buckets the stored ring is behind the judged bucket (`≥ N`: all
    /// expired).
    behind: usize,
    /// The window's count at the judged bucket.
    total: u64,
    /// Ticks from now to the start of the bucket after the judged one.
    until_next: u64,
}

/// The [`BucketedWindow`](super::BucketedWindow)'s rule, bounds and exact
/// answers (at most `limit` cells in any `N` consecutive buckets of
/// `window / N` ticks) for any limit up to `u64::MAX` and up to 4 096
/// buckets: a ring of `N` `u64` counts, its head, the bucket index and
/// their sum (`8·N + 80` bytes). On the same traffic both forms give the
/// same answers, except that this one keeps the whole bucket index (it
/// never aliases).
///
/// **Not lock-free**: the ring sits behind the [`SlidingLog`](super::SlidingLog)'s
/// guard (a sequence lock with `std`, a critical section without). Prefer
/// [`BucketedWindow`](super::BucketedWindow) (one word, lock-free) where
/// the counts fit it. `const`-constructible for `static`s.
///
/// ```
/// use cellrate::{RateLimiter, window::WideBucketedWindow};
/// // 10⁹ bytes per second (µs ticks) in 10 buckets of 100 ms.
/// static LINK: WideBucketedWindow<10> = WideBucketedWindow::new(1_000_000_000, 1_000_000);
/// assert!(LINK.check_n(0, 600_000_000).is_ok());
/// assert!(LINK.check_n(150_000, 400_000_000).is_ok());
/// let denied = LINK.check_n(999_999, 1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(1)); // bucket 0 leaves at 1 000 000
/// assert_eq!(LINK.peek(1_000_000).remaining(), 600_000_000);
/// ```
pub struct WideBucketedWindow<const N: usize> {
    limit: u64,
    bucket: Divisor,
    /// The buckets in use: the first `n ≤ N` of the ring.
    n: usize,
    /// The last bucket index, `⌊(2⁶⁴ − 1)/b⌋`.
    last: u64,
    ring: Guarded<Ring<N>>,
}

impl<const N: usize> WideBucketedWindow<N> {
    ring_limiter!();

    loom_const_fn! {
        /// At most `limit` cells per `window` ticks in `N` buckets, or what
        /// is wrong with them.
        ///
        /// ```
        /// use cellrate::window::{WideBucketedWindow, WindowError};
        /// assert_eq!(WideBucketedWindow::<3>::try_new(10, 100).err(), Some(WindowError::UnevenBuckets));
        /// assert_eq!(WideBucketedWindow::<0>::try_new(10, 100).err(), Some(WindowError::ZeroBuckets));
        /// ```
        pub fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
            let buckets = if N > MAX_BUCKETS as usize {
                MAX_BUCKETS + 1
            } else {
                N as u32
            };
            Self::try_with_buckets(limit, window, buckets)
        }
    }

    loom_const_fn! {
        /// At most `limit` cells per `window` ticks in `buckets ≤ N`
        /// buckets (the first `buckets` of the ring), or what is wrong with
        /// them: a ring sized at compile time for a count chosen at run
        /// time (as [`AnyLimiter`](crate::compose::AnyLimiter) builds it).
        ///
        /// ```
        /// use cellrate::window::{WideBucketedWindow, WindowError};
        /// let w = WideBucketedWindow::<8>::try_with_buckets(6, 600, 6).unwrap();
        /// assert_eq!((w.buckets(), w.bucket_ticks()), (6, 100));
        /// assert_eq!(WideBucketedWindow::<8>::try_with_buckets(6, 900, 9).err(),
        ///            Some(WindowError::TooManyBuckets { max: 8 }));
        /// ```
        pub fn try_with_buckets(limit: u64, window: u64, buckets: u32) -> Result<Self, WindowError> {
            match Self::validate(limit, window, buckets) {
                Ok(b) => Ok(WideBucketedWindow {
                    limit,
                    bucket: Divisor::new(b),
                    n: buckets as usize,
                    last: u64::MAX / b,
                    ring: Guarded::new(Ring {
                        index: GuardedU64::new(0),
                        head: GuardedU64::new(0),
                        total: GuardedU64::new(0),
                        counts: guarded_zeros(),
                    }),
                }),
                Err(e) => Err(e),
            }
        }
    }

    /// The checks of [`try_with_buckets`](Self::try_with_buckets): the
    /// bucket's length in ticks, or what is wrong (a `const fn` under loom
    /// too).
    const fn validate(limit: u64, window: u64, buckets: u32) -> Result<u64, WindowError> {
        if let Err(e) = check_params(limit, window, u64::MAX) {
            return Err(e);
        }
        let max = if N > MAX_BUCKETS as usize {
            MAX_BUCKETS
        } else {
            N as u32
        };
        if let Err(e) = check_buckets(window, buckets, max) {
            return Err(e);
        }
        Ok(window / buckets as u64)
    }

    /// The number of buckets in use.
    pub const fn buckets(&self) -> u32 {
        self.n as u32
    }

    /// The window length in ticks.
    pub const fn window(&self) -> u64 {
        self.bucket.get() * self.n as u64
    }

    /// The length of one bucket in ticks.
    pub const fn bucket_ticks(&self) -> u64 {
        self.bucket.get()
    }

    /// Ring position `at + k` (`at < N`, `k ≤ N`), wrapped by comparison.
    #[inline(always)]
    fn pos(&self, at: usize, k: usize, u: impl Used) -> usize {
        let n = u.get();
        let i = at + k;
        if i >= n {
            i - n
        } else {
            i
        }
    }

    /// How `diff = now's index − stored` reads: `d ∈ 0..N` behind, `−a`
    /// for `a ∈ 1..N` ahead, `N` for too old (as the one-word form).
    #[inline]
    fn lag(&self, diff: u64, u: impl Used) -> i64 {
        let n = u.get() as u64;
        if diff < n {
            diff as i64
        } else if diff.wrapping_neg() < n {
            -(diff.wrapping_neg() as i64)
        } else {
            n as i64
        }
    }

    /// The ring read at `now`.
    #[inline]
    fn view(&self, ring: &Ring<N>, now: u64, u: impl Used) -> View {
        let n = u.get();
        let (index, elapsed) = self.bucket.div_rem(now);
        let until_next = self.bucket.get() - elapsed;
        let total = ring.total.get();
        let fresh = View {
            index,
            behind: n,
            total: 0,
            until_next,
        };
        if total == 0 {
            return fresh;
        }
        let stored = ring.index.get();
        let mut lag = self.lag(index.wrapping_sub(stored), u);
        // Bucket 0 follows the last bucket, `last + 1` indices on.
        let cycle = self.last.wrapping_add(1);
        if cycle != 0 {
            let n64 = n as u64;
            if index < n64 {
                lag = lag.min(self.lag(index.wrapping_add(cycle).wrapping_sub(stored), u));
            }
            if index > self.last - n64 {
                lag = lag.min(self.lag(index.wrapping_sub(cycle).wrapping_sub(stored), u));
            }
        }
        if lag < 0 {
            let a = lag.unsigned_abs();
            return View {
                index: stored,
                behind: 0,
                total,
                until_next: until_next + a * self.bucket.get(),
            };
        }
        let behind = lag as usize;
        if behind >= n {
            return fresh;
        }
        let head = self.head(ring, u);
        let expired = (1..=behind).fold(0u64, |sum, k| {
            sum.saturating_add(ring.counts[self.pos(head, k, u)].get())
        });
        View {
            index,
            behind,
            total: total.saturating_sub(expired),
            until_next,
        }
    }

    /// Ticks until the first bucket `d ≥ 1` after the judged one whose
    /// window leaves `room ≤ limit` cells free. The judged window's stored
    /// buckets are the `N − behind` ring positions from `behind + 1` after
    /// head, oldest first; moving on `d` buckets drops the `d` oldest.
    fn wait(&self, ring: &Ring<N>, v: &View, room: u64, u: impl Used) -> u64 {
        let n = u.get();
        let head = self.head(ring, u);
        let stored = n - v.behind.min(n);
        let mut total = v.total;
        let mut d = 1;
        while d < n {
            if d <= stored {
                let oldest = ring.counts[self.pos(head, v.behind + d, u)].get();
                total = total.saturating_sub(oldest);
            }
            if total.saturating_add(room) <= self.limit {
                break;
            }
            d += 1;
        }
        v.until_next + (d as u64 - 1) * self.bucket.get()
    }

    /// The ring's head, below `N` also in a torn read (thrown away).
    #[inline(always)]
    fn head(&self, ring: &Ring<N>, u: impl Used) -> usize {
        let n = u.get();
        let head = ring.head.get() as usize;
        if head < n {
            head
        } else {
            0
        }
    }

    /// Ticks until the window is empty (0 if it is).
    fn reset_after(&self, ring: &Ring<N>, v: &View, u: impl Used) -> u64 {
        if v.total == 0 {
            0
        } else {
            self.wait(ring, v, self.limit, u)
        }
    }

    /// Admits `cost` cells at `now` and returns the index of the bucket
    /// they were counted in, or denies and writes nothing.
    pub(crate) fn admit_at(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        // Two copies: with every bucket of the ring in use, `N` is a
        // constant the loops are unrolled for.
        if self.n == N {
            self.admit_in(now, cost, All::<N>)
        } else {
            self.admit_in(now, cost, First(self.n))
        }
    }

    #[inline]
    fn admit_in(&self, now: u64, cost: u64, u: impl Used) -> Result<(Decision, u64), Denied> {
        let n = u.get();
        crate::algorithm::within_limit(cost, self.limit)?;
        self.ring.update(
            |ring| {
                let v = self.view(ring, now, u);
                if cost == 0 {
                    let reset = self.reset_after(ring, &v, u);
                    return Err(Ok((
                        Decision::new(self.limit, self.limit - v.total, reset),
                        v.index,
                    )));
                }
                if v.total > self.limit - cost {
                    return Err(Err(Denied::Limited(Limited::with_remaining(
                        self.limit,
                        self.limit.saturating_sub(v.total),
                        self.wait(ring, &v, cost, u),
                        self.reset_after(ring, &v, u),
                    ))));
                }
                Ok(v)
            },
            |ring, v| {
                let head = self.head(ring, u);
                let head = if v.behind >= n {
                    for c in &ring.counts {
                        c.set(0);
                    }
                    head
                } else {
                    for k in 1..=v.behind {
                        ring.counts[self.pos(head, k, u)].set(0);
                    }
                    self.pos(head, v.behind, u)
                };
                let newest = &ring.counts[head];
                newest.set(newest.get() + cost);
                ring.head.set(head as u64);
                ring.index.set(v.index);
                let total = v.total + cost;
                ring.total.set(total);
                let reset = v.until_next + (n as u64 - 1) * self.bucket.get();
                Ok((
                    Decision::new(self.limit, self.limit - total, reset),
                    v.index,
                ))
            },
        )
    }

    /// Gives back `cost` cells counted in bucket `index`, at most what it
    /// holds, while it is in the stored window (near the wrap of the tick
    /// counter, where an index could mean two buckets, nothing).
    pub(crate) fn revoke_at(&self, index: u64, cost: u64) {
        self.ring.write(|ring| {
            let stored = ring.index.get();
            let n = self.n as u64;
            let mut d = stored.wrapping_sub(index);
            let cycle = self.last.wrapping_add(1);
            if cycle != 0 {
                let across = stored.wrapping_add(cycle).wrapping_sub(index);
                if across < n && d < n && across != d {
                    return;
                }
                if d >= n {
                    d = across;
                }
            }
            if d >= n {
                return;
            }
            let head = self.head(ring, First(self.n));
            let at = self.pos(head, self.n - d as usize, First(self.n));
            let slot = &ring.counts[at];
            let given = cost.min(slot.get());
            slot.set(slot.get() - given);
            ring.total.set(ring.total.get() - given);
        })
    }

    /// Gives back `cost` cells admitted in the bucket of `now` (for example
    /// for a request admitted but never served); never more than that
    /// bucket holds. Returns the state after the refund.
    ///
    /// ```
    /// use cellrate::window::WideBucketedWindow;
    /// let w = WideBucketedWindow::<4>::new(10, 1_000);
    /// w.check_n(0, 4).unwrap();
    /// w.check_n(300, 6).unwrap();
    /// assert_eq!(w.refund_n(300, 2).remaining(), 2);
    /// assert_eq!(w.refund_n(300, 100).remaining(), 6);
    /// ```
    pub fn refund_n(&self, now: u64, cost: u64) -> Snapshot {
        if cost > 0 {
            self.revoke_at(self.bucket.div_rem(now).0, cost);
        }
        self.peek(now)
    }

    /// The state at `now`, writing nothing.
    pub fn peek(&self, now: u64) -> Snapshot {
        if self.n == N {
            self.peek_in(now, All::<N>)
        } else {
            self.peek_in(now, First(self.n))
        }
    }

    #[inline]
    fn peek_in(&self, now: u64, u: impl Used) -> Snapshot {
        self.ring.read(|ring| {
            let v = self.view(ring, now, u);
            let retry = if v.total < self.limit {
                0
            } else {
                self.wait(ring, &v, 1, u)
            };
            Snapshot::new(
                self.limit,
                self.limit.saturating_sub(v.total),
                self.reset_after(ring, &v, u),
                retry,
            )
        })
    }

    /// Makes the limiter full, as new.
    pub fn reset(&self) {
        self.ring.write(|ring| {
            for c in &ring.counts {
                c.set(0);
            }
            ring.total.set(0);
            ring.head.set(0);
            ring.index.set(0);
        })
    }
}

ring_limiter!(WideBucketedWindow, "buckets");

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    extern crate std;
    use super::WideBucketedWindow;
    use crate::window::BucketedWindowQuota;
    use crate::Algorithm;
    use loom::sync::Arc;
    use loom::thread;
    use std::{vec, vec::Vec};

    // 2 per 30 ticks in 3 buckets of 10: one thread in bucket 1, one in
    // bucket 0 (one behind: if it runs second it finds the state ahead and
    // is judged there). Either fits alone, not both. Two threads, as the
    // log's model: the ring is six guarded words, and a third thread
    // multiplies the interleavings past what stage 30 can afford.
    const NOWS: [u64; 2] = [15, 5];
    const COSTS: [u64; 2] = [1, 2];
    /// Where the model reads the final state.
    const LATER: u64 = 25;

    /// Two threads race on the ring; the admissions, what each was told
    /// remains, and the state left are those of some serial order (judged
    /// by the one-word form, which decides the same).
    #[test]
    fn concurrent_checks_are_some_serial_order() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let limiter = Arc::new(WideBucketedWindow::<3>::new(2, 30));
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let l = Arc::clone(&limiter);
                    thread::spawn(move || l.check_n(NOWS[i], COSTS[i]).map(|d| d.remaining()).ok())
                })
                .collect();
            let outcome: Vec<Option<u64>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            let end = limiter.peek(LATER);
            let end = (end.remaining(), end.reset_after(), end.retry_after());
            assert!(
                serial_outcomes().contains(&(outcome.clone(), end)),
                "{outcome:?} {end:?}"
            );
        });
    }

    /// A peek racing an admission sees the ring before or after it, never
    /// torn: its remaining is one of the two.
    #[test]
    fn peek_is_never_torn() {
        loom::model(|| {
            let limiter = Arc::new(WideBucketedWindow::<3>::new(4, 30));
            limiter.check_n(5, 1).unwrap();
            let writer = {
                let l = Arc::clone(&limiter);
                thread::spawn(move || l.check_n(25, 2).unwrap())
            };
            let seen = limiter.peek(25).remaining();
            writer.join().unwrap();
            assert!(seen == 3 || seen == 1, "{seen}");
        });
    }

    /// Each check's remaining (`None`: denied), and the state at [`LATER`]
    /// (remaining, reset after, retry after).
    type Outcome = (Vec<Option<u64>>, (u64, u64, u64));

    /// The outcome of each serial order.
    fn serial_outcomes() -> Vec<Outcome> {
        let quota = BucketedWindowQuota::new(2, 30, 3);
        [[0, 1], [1, 0]]
            .iter()
            .map(|order| {
                let mut state = BucketedWindowQuota::NEW;
                let mut outcome = vec![None; 2];
                for &i in order {
                    if let Ok((next, d)) = quota.check(state, NOWS[i], COSTS[i]) {
                        state = next;
                        outcome[i] = Some(d.remaining());
                    }
                }
                let end = quota.peek(state, LATER);
                (
                    outcome,
                    (end.remaining(), end.reset_after(), end.retry_after()),
                )
            })
            .collect()
    }
}
