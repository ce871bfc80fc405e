//! The bucketed sliding window counter.
//!
//! * The state word holds the tag of the last bucket `s` written, its count
//!   `c_s` and the sums `F_i = c_(s−1) + … + c_(s−i)`, `N` fields of `cb =
//!   ⌈log₂(limit + 1)⌉` bits within 48 (layout: docs/design/windows.md).
//!   `0` is a new client; the window's count is `c_s + F_(N−1)`.
//! * `F_1 ≤ … ≤ F_(N−1)` and `c_s + F_(N−1) ≤ limit` in every word this
//!   quota writes; a word it did not write is first raised to satisfy them.
//! * No division on any path; the common case (same bucket, the cost fits)
//!   is a subtract, a shift, a mask, an add, a compare and `state + cost`.

use core::fmt;

use super::{check_params, count_bits, low_mask, WindowError};
use crate::divisor::Divisor;
use crate::{Algorithm, Decision, Denied, Limited, Limiter, Snapshot};

/// Bits the counts of a [`BucketedWindowQuota`] may take together (the
/// tag keeps the other 16 or more).
pub const COUNT_BITS: u32 = 48;

/// The longest bucket, in ticks: 2⁴⁸ (three days at 1 GHz).
pub const MAX_BUCKET: u64 = 1 << 48;

/// A bucketed sliding window: `window` ticks split into `buckets` buckets
/// of `b = window / buckets` ticks, at most `limit` cells in any `buckets`
/// consecutive buckets. `Copy`; implements [`Algorithm`].
///
/// A request of `cost` cells in bucket `j` is admitted iff `c_(j−N+1) + … +
/// c_j + cost ≤ limit`. So any `W − b + 1` consecutive ticks hold at most
/// `limit` cells, and any `W` ticks at most `limit + c_f` (`c_f` the count
/// of the first bucket they touch, so never `2·limit`); with `N = 1` it is
/// the [`FixedWindow`](super::FixedWindow). `remaining`, `retry_after` and
/// `reset_after` are exact. State: one `u64`, (bucket tag, suffix sums of
/// the `N` counts), so `N` buckets allow a limit up to `2^(48/N) − 1` (6
/// buckets: 255); larger counts take [`WideBucketedWindow`](super::WideBucketedWindow).
///
/// ```
/// use cellrate::Algorithm;
/// use cellrate::window::BucketedWindowQuota;
/// // 6 per 60 ticks, in 6 buckets of 10 ticks.
/// let q = BucketedWindowQuota::new(6, 60, 6);
/// let (s, _) = q.check(BucketedWindowQuota::NEW, 5, 4).unwrap(); // bucket 0
/// let (s, _) = q.check(s, 25, 2).unwrap(); // bucket 2
/// assert!(q.check(s, 59, 1).is_err());
/// // Bucket 0 leaves the window when bucket 6 starts, at tick 60.
/// assert_eq!(q.check(s, 59, 1).unwrap_err().retry_after(), Some(1));
/// assert_eq!(q.peek(s, 60).remaining(), 4);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketedWindowQuota {
    limit: u64,
    buckets: u32,
    bucket: Divisor,
    count_bits: u32,
    /// `low_mask(count_bits)`: one field.
    count_mask: u64,
    /// `N · count_bits`: where the tag starts.
    counts_bits: u32,
    /// `low_mask(N · count_bits)`: all the fields.
    counts_mask: u64,
    /// `low_mask(64 − N · count_bits)`.
    tag_mask: u64,
    /// `(N − 1) · count_bits`: where the top field `F_(N−1)` starts.
    top_shift: u32,
    /// `count_mask` if `N ≥ 2`, else 0: `T = (counts >> top_shift) +
    /// (counts & low_field)` for every `N`.
    low_field: u64,
    /// A 1 in each of the `N` fields.
    ones: u64,
    /// `(N − 1) · b`: the reset after an admission, less the ticks to the
    /// next bucket.
    rest: u64,
    /// The last bucket index, `⌊(2⁶⁴ − 1)/b⌋`.
    last: u64,
    /// `(last + 1) mod 2^tb`: what the tags skip at the wrap (0 if nothing).
    wrap_tag: u64,
}

/// What depends on `now` alone, computed before the state is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
struct At {
    index: u64,
    tag: u64,
    /// `tag << N·cb`: this bucket's state with every count 0.
    base: u64,
    /// Ticks from `now` to the start of the next bucket (`1..=b`).
    until_next: u64,
}

/// What a state word means at some `now`: the judged bucket and its counts.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
struct View {
    /// The judged bucket's state with every count 0 (its tag, shifted).
    base: u64,
    /// The fields `c, F_1, …, F_(N−1)` as of the judged bucket.
    counts: u64,
    /// Ticks from `now` to the start of the bucket after the judged one.
    until_next: u64,
}

impl BucketedWindowQuota {
    /// The most buckets (one count bit each).
    pub const MAX_BUCKETS: u32 = COUNT_BITS;

    /// [`try_new`](Self::try_new), panicking on an error (a compile error
    /// in `const` context).
    pub const fn new(limit: u64, window: u64, buckets: u32) -> Self {
        or_panic!(Self::try_new(limit, window, buckets))
    }

    /// `limit` cells per `window` ticks in `buckets` buckets, or what is
    /// wrong with them.
    ///
    /// ```
    /// use cellrate::window::{BucketedWindowQuota, WindowError};
    /// assert_eq!(BucketedWindowQuota::try_new(10, 100, 0), Err(WindowError::ZeroBuckets));
    /// assert_eq!(BucketedWindowQuota::try_new(10, 100, 3), Err(WindowError::UnevenBuckets));
    /// assert_eq!(BucketedWindowQuota::try_new(1, 98, 49), Err(WindowError::TooManyBuckets { max: 48 }));
    /// assert_eq!(BucketedWindowQuota::try_new(256, 60, 6), Err(WindowError::LimitTooLarge { max: 255 }));
    /// assert_eq!(
    ///     BucketedWindowQuota::try_new(10, 4 << 49, 4),
    ///     Err(WindowError::WindowTooLong { max: 4 << 48 })
    /// );
    /// ```
    pub const fn try_new(limit: u64, window: u64, buckets: u32) -> Result<Self, WindowError> {
        if let Err(e) = check_params(limit, window, u64::MAX) {
            return Err(e);
        }
        if let Err(e) = check_buckets(window, buckets, Self::MAX_BUCKETS) {
            return Err(e);
        }
        let n = buckets;
        let max_limit = low_mask(COUNT_BITS / n);
        if limit > max_limit {
            return Err(WindowError::LimitTooLarge { max: max_limit });
        }
        let cb = count_bits(limit);
        let b = window / n as u64;
        let counts_bits = n * cb;
        let tag_mask = low_mask(64 - counts_bits);
        let mut ones = 0u64;
        let mut i = 0;
        while i < n {
            ones |= 1 << (i * cb);
            i += 1;
        }
        let last = u64::MAX / b;
        Ok(BucketedWindowQuota {
            limit,
            buckets: n,
            bucket: Divisor::new(b),
            count_bits: cb,
            count_mask: low_mask(cb),
            counts_bits,
            counts_mask: low_mask(counts_bits),
            tag_mask,
            top_shift: (n - 1) * cb,
            low_field: if n >= 2 { low_mask(cb) } else { 0 },
            ones,
            rest: (n as u64 - 1) * b,
            last,
            wrap_tag: last.wrapping_add(1) & tag_mask,
        })
    }

    /// The most cells in any `buckets` consecutive buckets.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in ticks (`buckets × bucket_ticks`).
    pub const fn window(&self) -> u64 {
        self.bucket.get() * self.buckets as u64
    }

    /// The number of buckets `N` in a window.
    pub const fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The length of one bucket in ticks (`window / buckets`).
    pub const fn bucket_ticks(&self) -> u64 {
        self.bucket.get()
    }

    /// Bits of the bucket tag in the state word (`64 − N·⌈log₂(limit + 1)⌉`).
    ///
    /// ```
    /// use cellrate::window::BucketedWindowQuota;
    /// assert_eq!(BucketedWindowQuota::new(100, 60, 6).tag_bits(), 22);
    /// ```
    pub const fn tag_bits(&self) -> u32 {
        64 - self.counts_bits
    }

    /// The bucket of `now`.
    #[inline(always)]
    fn at(&self, now: u64) -> At {
        let (index, elapsed) = self.bucket.div_rem(now);
        let tag = index & self.tag_mask;
        At {
            index,
            tag,
            base: tag << self.counts_bits,
            until_next: self.bucket.get() - elapsed,
        }
    }

    /// The window's count `c + F_(N−1)` of a counts word.
    #[inline(always)]
    const fn total(&self, counts: u64) -> u64 {
        (counts >> self.top_shift) + (counts & self.low_field)
    }

    /// The counts word `d` buckets later, with no admissions between.
    #[inline(always)]
    const fn shift(&self, counts: u64, d: u64) -> u64 {
        if d == 0 {
            return counts;
        }
        if d >= self.buckets as u64 {
            return 0;
        }
        let up = d as u32 * self.count_bits;
        let cur = counts & self.count_mask;
        let older = counts & !self.count_mask;
        ((older << up) & self.counts_mask) + cur * (self.ones & !low_mask(up))
    }

    /// A counts word made to satisfy the invariants, counting no fewer
    /// cells (a word this quota wrote is unchanged).
    fn normalize(&self, counts: u64) -> u64 {
        let cb = self.count_bits;
        let mut cur = counts & self.count_mask;
        let mut out = 0;
        let mut running = 0;
        let mut i = 1;
        while i < self.buckets {
            let f = (counts >> (i * cb)) & self.count_mask;
            running = f.max(running).min(self.limit);
            out |= running << (i * cb);
            i += 1;
        }
        cur = cur.min(self.limit - running);
        out | cur
    }

    /// How a tag `diff = now's − stored` (mod `2^tb`) reads: `d ∈ 0..N`
    /// buckets behind, `−a` for `a ∈ 1..N` ahead, `N` for too old.
    #[inline]
    fn lag(&self, diff: u64) -> i64 {
        let n = self.buckets as u64;
        if diff < n {
            diff as i64
        } else if self.tag_mask - diff < n - 1 {
            // diff = 2^tb − a with 1 ≤ a < N
            -((self.tag_mask - diff + 1) as i64)
        } else {
            n as i64
        }
    }

    #[inline(always)]
    fn view(&self, state: u64, at: &At) -> View {
        let counts = state.wrapping_sub(at.base);
        if counts <= self.counts_mask {
            return self.judge(at.base, counts, at.until_next);
        }
        self.view_other(state, at)
    }

    /// A view of counts for the bucket `base`, made safe (see
    /// [`normalize`](Self::normalize)) unless they already are.
    #[inline(always)]
    fn judge(&self, base: u64, counts: u64, until_next: u64) -> View {
        let counts = if self.total(counts) <= self.limit {
            counts
        } else {
            self.normalize(counts)
        };
        View {
            base,
            counts,
            until_next,
        }
    }

    /// [`view`](Self::view) for a state written in another bucket: kept
    /// out of line.
    #[cold]
    #[inline(never)]
    fn view_other(&self, state: u64, at: &At) -> View {
        let stored = state >> self.counts_bits;
        let counts = self.normalize(state & self.counts_mask);
        let fresh = View {
            base: at.base,
            counts: 0,
            until_next: at.until_next,
        };
        if counts == 0 {
            return fresh;
        }
        let mut lag = self.lag(at.tag.wrapping_sub(stored) & self.tag_mask);
        if self.wrap_tag != 0 {
            // Within N buckets of the wrap a tag also reads across it;
            // the reading that counts more (the smaller lag) is taken.
            let n = self.buckets as u64;
            if at.index < n {
                let across = at.tag.wrapping_add(self.wrap_tag).wrapping_sub(stored);
                lag = lag.min(self.lag(across & self.tag_mask));
            }
            if at.index > self.last - n {
                let across = at.tag.wrapping_sub(self.wrap_tag).wrapping_sub(stored);
                lag = lag.min(self.lag(across & self.tag_mask));
            }
        }
        if lag >= 0 {
            View {
                base: at.base,
                counts: self.shift(counts, lag as u64),
                until_next: at.until_next,
            }
        } else {
            // Ahead by a: judged at that bucket, its times from there.
            let a = lag.unsigned_abs();
            View {
                base: stored << self.counts_bits,
                counts,
                until_next: at.until_next + a * self.bucket.get(),
            }
        }
    }

    /// Ticks from now until the first bucket `d ≥ 1` after the judged one
    /// whose window leaves `room ≤ limit` cells free (`d ≤ N`: from `N` on
    /// the window is empty).
    #[inline(always)]
    fn wait(&self, v: &View, room: u64) -> u64 {
        let mut d = 1;
        while d < self.buckets as u64 && self.total(self.shift(v.counts, d)) + room > self.limit {
            d += 1;
        }
        v.until_next + (d - 1) * self.bucket.get()
    }

    /// Ticks until the window is empty (0 if it is).
    #[inline(always)]
    fn reset_after(&self, v: &View) -> u64 {
        if v.counts == 0 {
            0
        } else {
            self.wait(v, self.limit)
        }
    }

    /// The tag of `now`'s bucket.
    #[inline]
    pub(crate) fn tag_at(&self, now: u64) -> u64 {
        self.at(now).tag
    }

    /// The tag of the bucket a state word was written in.
    #[inline(always)]
    pub(crate) const fn tag_of(&self, state: u64) -> u64 {
        state >> self.counts_bits
    }

    /// [`step`](Algorithm::step) off the common case.
    #[inline(always)]
    fn step_other(
        &self,
        state: u64,
        p: &BucketedWindowPrepared,
    ) -> Result<(u64, Decision), BucketedWindowShortfall> {
        let at = p.at;
        let v = self.view(state, &at);
        let total = self.total(v.counts);
        if total + p.cost <= self.limit {
            let remaining = self.limit - total - p.cost;
            let decision = Decision::new(self.limit, remaining, v.until_next + self.rest);
            Ok((v.base | (v.counts + p.cost), decision))
        } else {
            Err(BucketedWindowShortfall(v))
        }
    }

    /// The state after giving back `cost` cells admitted in the bucket
    /// tagged `tag`: taken from that bucket's count while it is in the
    /// window of the stored state (at most its count), else nothing (the
    /// cells have left the window anyway). Near the wrap of the tick
    /// counter, where a tag could mean two buckets, nothing is given back.
    ///
    /// ```
    /// use cellrate::Algorithm;
    /// use cellrate::window::BucketedWindowQuota;
    /// let q = BucketedWindowQuota::new(10, 40, 4);
    /// let (s, _) = q.check(BucketedWindowQuota::NEW, 5, 3).unwrap(); // bucket 0
    /// let (s, _) = q.check(s, 25, 4).unwrap(); // bucket 2
    /// let s = q.revoke(s, 0, 5); // bucket 0 held 3
    /// assert_eq!(q.peek(s, 25).remaining(), 6);
    /// ```
    pub fn revoke(&self, state: u64, tag: u64, cost: u64) -> u64 {
        let stored = state >> self.counts_bits;
        let n = self.buckets as u64;
        let mut d = stored.wrapping_sub(tag) & self.tag_mask;
        if self.wrap_tag != 0 {
            let across = stored.wrapping_add(self.wrap_tag).wrapping_sub(tag) & self.tag_mask;
            if across < n && d < n && across != d {
                return state;
            }
            if d >= n {
                d = across;
            }
        }
        if d >= n {
            return state;
        }
        let counts = self.normalize(state & self.counts_mask);
        let field = |i: u64| {
            if i == 0 {
                0
            } else {
                (counts >> (i as u32 * self.count_bits)) & self.count_mask
            }
        };
        // Bucket `stored − d` is `c` for d = 0 (in field 0 alone), else
        // `F_d − F_(d−1)` (in every field from d on).
        let (held, fields) = if d == 0 {
            (counts & self.count_mask, 1)
        } else {
            (
                field(d) - field(d - 1),
                self.ones & !low_mask(d as u32 * self.count_bits),
            )
        };
        (stored << self.counts_bits) | (counts - cost.min(held) * fields)
    }
}

/// The bucket-count checks both bucketed forms make: `1 ≤ buckets ≤ max`,
/// dividing `window` (non-zero), into buckets of at most [`MAX_BUCKET`].
pub(crate) const fn check_buckets(window: u64, buckets: u32, max: u32) -> Result<(), WindowError> {
    if buckets == 0 {
        return Err(WindowError::ZeroBuckets);
    }
    if buckets > max {
        return Err(WindowError::TooManyBuckets { max });
    }
    if window % buckets as u64 != 0 {
        return Err(WindowError::UnevenBuckets);
    }
    if window / buckets as u64 > MAX_BUCKET {
        return Err(WindowError::WindowTooLong {
            max: MAX_BUCKET * buckets as u64,
        });
    }
    Ok(())
}

/// `now`'s bucket and the cost, computed before the state is read.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct BucketedWindowPrepared {
    at: At,
    cost: u64,
}

/// The counts a denial judged, from which the wait is found.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug)]
pub struct BucketedWindowShortfall(View);

impl Algorithm for BucketedWindowQuota {
    tagged_steps!(BucketedWindowPrepared, BucketedWindowShortfall);

    /// The common case: the state is this bucket's (`state − base` has no
    /// tag bits, so its top field plus its low field is the window's count,
    /// and any tag bits make that sum exceed every limit), and the cost
    /// fits: store `state + cost` (adding to the current bucket's count,
    /// which stays ≤ limit, so nothing carries).
    #[inline(always)]
    fn step(
        &self,
        state: u64,
        p: &BucketedWindowPrepared,
    ) -> Result<(u64, Decision), BucketedWindowShortfall> {
        let counts = state.wrapping_sub(p.at.base);
        // No overflow: for N ≥ 2 the shifted part is below 2⁶³.
        let total = (counts >> self.top_shift) + (counts & self.low_field);
        if total <= self.limit - p.cost {
            let remaining = self.limit - p.cost - total;
            let decision = Decision::new(self.limit, remaining, p.at.until_next + self.rest);
            return Ok((state + p.cost, decision));
        }
        self.step_other(state, p)
    }

    #[inline(always)]
    fn denial(&self, p: &BucketedWindowPrepared, s: BucketedWindowShortfall) -> Denied {
        let v = s.0;
        Denied::Limited(Limited::with_remaining(
            self.limit,
            self.limit - self.total(v.counts),
            self.wait(&v, p.cost),
            self.reset_after(&v),
        ))
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        let v = self.view(state, &self.at(now));
        let total = self.total(v.counts);
        let retry = if total < self.limit {
            0
        } else {
            self.wait(&v, 1)
        };
        Snapshot::new(self.limit, self.limit - total, self.reset_after(&v), retry)
    }

    fn is_idle(&self, state: u64, now: u64) -> bool {
        self.view(state, &self.at(now)).counts == 0
    }

    /// The cells in `now`'s window, at most the new limit, all counted in
    /// `now`'s bucket of the new grid (which can deny more than the old
    /// parameters would, never admit more cells than were counted).
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        let total = self.total(self.view(state, &self.at(now)).counts);
        if total == 0 {
            return BucketedWindowQuota::NEW;
        }
        new.at(now).base | total.min(new.limit)
    }
}

impl fmt::Debug for BucketedWindowQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketedWindowQuota")
            .field("limit", &self.limit)
            .field("window", &self.window())
            .field("buckets", &self.buckets)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for BucketedWindowQuota {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "BucketedWindowQuota {{ limit: {=u64}, window: {=u64}, buckets: {=u32} }}",
            self.limit,
            self.window(),
            self.buckets
        )
    }
}

/// A shared [`BucketedWindowQuota`]: one state word changed by
/// compare-and-swap. `const`-constructible for `static`s.
///
/// ```
/// use cellrate::{RateLimiter, window::BucketedWindow};
/// // 60 per minute (ms ticks) in 6 buckets of 10 s.
/// static API: BucketedWindow = BucketedWindow::new(60, 60_000, 6);
/// assert!(API.check_n(9_999, 60).is_ok());
/// assert!(API.check(59_999).is_err());
/// // The first bucket leaves the window at 60 000.
/// assert_eq!(API.peek(59_999).retry_after(), 1);
/// assert!(API.check(60_000).is_ok());
/// ```
pub type BucketedWindow = Limiter<BucketedWindowQuota>;

window_limiter!(BucketedWindowQuota(limit: u64, window: u64, buckets: u32)
    /// ```
    /// use cellrate::window::{BucketedWindow, WindowError};
    /// assert_eq!(BucketedWindow::try_new(10, 100, 3).err(), Some(WindowError::UnevenBuckets));
    /// ```
);

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::{BucketedWindow, BucketedWindowQuota};
    use crate::window::loom_reference::race_is_some_serial_order;
    use loom::sync::Arc;
    use loom::thread;

    fn quota() -> BucketedWindowQuota {
        BucketedWindowQuota::new(2, 30, 3)
    }

    /// Three threads race; the admissions must be those of some serial
    /// order of the same checks: never more than the rule allows. 2 per 30
    /// ticks in 3 buckets of 10: the threads are in buckets 1, 0 (one
    /// behind, so it finds a state ahead) and 3 (bucket 0 has left).
    #[test]
    fn concurrent_checks_are_some_serial_order() {
        race_is_some_serial_order(quota(), [(15, 1), (5, 2), (31, 1)]);
    }

    /// A revocation racing an admission gives back exactly its own cells:
    /// afterwards the window holds what the other admission left.
    #[test]
    fn revoke_races_admission() {
        loom::model(|| {
            let limiter = Arc::new(BucketedWindow::with_quota(quota()));
            let (_, mark) = limiter.admit_marked(5, 1).unwrap();
            let other = {
                let l = Arc::clone(&limiter);
                thread::spawn(move || l.check_n(15, 1).is_ok())
            };
            limiter.refund_marked(mark, 1);
            assert!(other.join().unwrap());
            assert_eq!(limiter.peek(15).remaining(), 1);
        });
    }
}
