//! Window limiters: "at most `limit` cells per `window` ticks", four ways.
//!
//! | limiter | state | exactness | memory |
//! |---|---|---|---|
//! | [`FixedWindow`] | one `u64`: (window index, count) | exact for aligned windows `[k·W, (k+1)·W)`; up to `2·limit` across an edge | 8 bytes |
//! | [`SlidingWindow`] | one `u64`: (window index, previous count, current count) | approximation of a sliding window (see [`SlidingWindowQuota`]) | 8 bytes |
//! | [`BucketedWindow`] | one `u64`: (bucket index, suffix sums of `N` bucket counts) | exact per bucket of `W/N` ticks: at most `limit` in any `N` buckets, at most one bucket's count over in any `W` ticks (see [`BucketedWindowQuota`]) | 8 bytes |
//! | [`WideBucketedWindow`] | a ring of `N` bucket counts, its head, the bucket index, the sum | as [`BucketedWindow`], for any limit | `8·N + 80` bytes (`8·N + 72` without `std`) |
//! | [`SlidingLog`] | the expiry ticks of the last `limit` admitted cells, a ring position and a tick | exact: at most `limit` cells in any `W` consecutive ticks | `8·N + 40` bytes |
//!
//! The parameters of the counters ([`FixedWindowQuota`],
//! [`SlidingWindowQuota`], [`BucketedWindowQuota`]) are small `Copy` values
//! that implement [`Algorithm`](crate::Algorithm): pure steps on one state
//! word, refunds included. The shared limiters are the one generic container
//! [`Limiter`](crate::Limiter) over those parameters (one state word updated
//! by compare-and-swap, as [`Gcra`](crate::Gcra)'s quota and TAT are), and a
//! keyed table holds them per key.
//!
//! # Windows and tags
//!
//! Window `k` is the ticks `[k·W, (k+1)·W)`; `now` lies in window
//! `k = ⌊now / W⌋` at elapsed time `e = now − k·W`, both computed without a
//! division instruction (`src/divisor.rs`). A counter stores the low bits of
//! `k`, its *tag*, beside the counts: the counts take the bits `limit`
//! needs, the tag the rest, at least 16 bits ([`FixedWindowQuota::tag_bits`]).
//! A stored tag equal to `now`'s is the current window; one behind (sliding
//! window) the previous one; one *ahead* (another thread read a later
//! clock) is judged as it stands, at that window's start, which can deny
//! more, never admit more; any other reads as zero.
//!
//! # What the caller relies on
//!
//! * A client silent for exactly a multiple of `2^tag_bits` windows (give
//!   or take two) aliases: its old counts read as current for at most two
//!   windows, which only denies more. With 16 tag bits and a 1 s window
//!   that needs a silence of exactly 18 h 12 min; with 40, 34 000 years.
//!   [`WideBucketedWindow`] (what a configured
//!   [`AnyLimiter`](crate::compose::AnyLimiter) runs) and Redis keep the
//!   whole index and never alias.
//! * The counters rely on a monotonic clock more than [`Gcra`](crate::Gcra)
//!   does: a clock that steps back by two windows or more finds the counts
//!   too old and starts from zero.
//! * Windows are aligned to multiples of `W` on the caller's clock (with
//!   Unix time, calendar-aligned): any origin that is a multiple of `W`
//!   gives the same answers. [`SlidingLog`] is origin-free.
//! * Where the tick counter wraps past `2⁶⁴`, window 0 follows the last
//!   window `⌊(2⁶⁴ − 1)/W⌋`, short unless `W` divides `2⁶⁴`. Every window
//!   still admits at most `limit`; the sliding window counts the short one
//!   as window 0's previous; `retry_after` and `reset_after` there are at
//!   most `W − (2⁶⁴ mod W)` ticks longer than needed.
//!
//! How each counter reads a tag across the wrap, and the proofs of the
//! bounds, are in docs/design/windows.md in the repository.

/// The [`Algorithm`](crate::Algorithm) items every tagged window quota
/// (fixed, sliding, bucketed) shares: its prepared and shortfall types, the
/// phase before the state is read (the window of `now` and the cost, which
/// must not exceed the limit: `step` relies on it), the mark (the tag the
/// cells were counted under) and the refund (the type's `revoke`).
macro_rules! tagged_steps {
    ($prepared:ident, $shortfall:ident) => {
        type Prepared = $prepared;
        type Shortfall = $shortfall;

        #[inline(always)]
        fn prepare(&self, now: u64, cost: u64) -> Result<$prepared, Denied> {
            crate::algorithm::within_limit(cost, self.limit)?;
            Ok($prepared {
                at: self.at(now),
                cost,
            })
        }

        #[inline(always)]
        fn mark(&self, stored: u64, _now: u64) -> u64 {
            self.tag_of(stored)
        }

        #[inline]
        fn mark_at(&self, now: u64) -> u64 {
            self.tag_at(now)
        }

        #[inline]
        fn refund(&self, state: u64, mark: u64, cost: u64) -> u64 {
            self.revoke(state, mark, cost)
        }
    };
}

/// The value of a `try_new`, or a panic with the error's text (a compile
/// error in `const` context): what every window limiter's `new` does.
macro_rules! or_panic {
    ($made:expr) => {
        match $made {
            Ok(value) => value,
            Err(e) => panic!("{}", e.as_str()),
        }
    };
}

/// `new` and `try_new` of the shared limiter over a window quota: the
/// quota's constructors, wrapped. Extra attributes (a doc example) go on
/// `try_new`.
macro_rules! window_limiter {
    ($quota:ident ($($arg:ident: $ty:ty),*) $(#[$try_attr:meta])*) => {
        impl Limiter<$quota> {
            crate::sync::loom_const_fn! {
                #[doc = concat!("The limiter of [`", stringify!($quota), "::new`], starting full.")]
                ///
                /// # Panics
                #[doc = concat!("As [`", stringify!($quota), "::new`]; see [`try_new`](Self::try_new).")]
                pub fn new($($arg: $ty),*) -> Self {
                    Self::with_quota($quota::new($($arg),*))
                }
            }

            #[doc = concat!("The limiter of [`", stringify!($quota), "::try_new`], or what is wrong with the parameters.")]
            $(#[$try_attr])*
            pub fn try_new($($arg: $ty),*) -> Result<Self, WindowError> {
                Ok(Self::with_quota($quota::try_new($($arg),*)?))
            }
        }
    };
}

/// `Debug` and `defmt::Format` for a window quota as `limit` and `window`.
macro_rules! window_quota_fmt {
    ($ty:ident) => {
        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("limit", &self.limit)
                    .field("window", &self.window())
                    .finish()
            }
        }

        #[cfg(feature = "defmt")]
        impl defmt::Format for $ty {
            fn format(&self, f: defmt::Formatter) {
                defmt::write!(
                    f,
                    "{=str} {{ limit: {=u64}, window: {=u64} }}",
                    stringify!($ty),
                    self.limit,
                    self.window()
                )
            }
        }
    };
}

/// What [`SlidingLog`] and [`WideBucketedWindow`] share: in their impl
/// block (no arguments) `new` (their `try_new`, or a panic), `limit` and
/// `check_n` (their `admit_at` without the mark); outside it, the
/// [`RateLimiter`](crate::RateLimiter) impl, and `Debug` and
/// `defmt::Format` showing `N` (named `$n`), `limit` and `window`.
macro_rules! ring_limiter {
    () => {
        crate::sync::loom_const_fn! {
            /// [`try_new`](Self::try_new), panicking on an error (a
            /// compile error in `const` context).
            pub fn new(limit: u64, window: u64) -> Self {
                or_panic!(Self::try_new(limit, window))
            }
        }

        /// The most cells in any window.
        pub const fn limit(&self) -> u64 {
            self.limit
        }

        /// Admits `cost` cells at `now`, or denies and writes nothing.
        #[inline]
        pub fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
            self.admit_at(now, cost).map(|(d, _)| d)
        }
    };
    ($ty:ident, $n:literal) => {
        impl<const N: usize> crate::RateLimiter for $ty<N> {
            #[inline]
            fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
                $ty::check_n(self, now, cost)
            }
            fn peek(&self, now: u64) -> Snapshot {
                $ty::peek(self, now)
            }
        }

        impl<const N: usize> core::fmt::Debug for $ty<N> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field($n, &N)
                    .field("limit", &self.limit)
                    .field("window", &self.window())
                    .finish()
            }
        }

        #[cfg(feature = "defmt")]
        impl<const N: usize> defmt::Format for $ty<N> {
            fn format(&self, f: defmt::Formatter) {
                defmt::write!(
                    f,
                    "{=str} {{ {=str}: {=usize}, limit: {=u64}, window: {=u64} }}",
                    stringify!($ty),
                    $n,
                    N,
                    self.limit,
                    self.window()
                )
            }
        }
    };
}

mod bucketed;
mod fixed;
mod log;
mod sliding;
mod wide_bucketed;

pub use self::bucketed::{BucketedWindow, BucketedWindowQuota};
pub use self::fixed::{FixedWindow, FixedWindowQuota};
pub use self::log::SlidingLog;
pub use self::sliding::{SlidingWindow, SlidingWindowQuota};
pub use self::wide_bucketed::WideBucketedWindow;

use core::fmt;

/// Why a window limiter cannot be built.
///
/// ```
/// use cellrate::window::{FixedWindowQuota, WindowError};
/// assert_eq!(FixedWindowQuota::try_new(0, 1_000), Err(WindowError::ZeroLimit));
/// assert_eq!(FixedWindowQuota::try_new(10, 0), Err(WindowError::ZeroWindow));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WindowError {
    /// The limit is zero: nothing could ever be admitted.
    ZeroLimit,
    /// The window is zero ticks long.
    ZeroWindow,
    /// The limit does not fit the state word (or the log's capacity).
    LimitTooLarge {
        /// The largest limit this limiter accepts.
        max: u64,
    },
    /// `limit × window` does not fit in 64 bits (sliding window only): use a
    /// coarser tick or a shorter window.
    Overflow,
    /// The window is longer than this limiter can compare in serial time
    /// (sliding log only: 2⁶¹ ticks).
    WindowTooLong {
        /// The longest window this limiter accepts.
        max: u64,
    },
    /// A bucketed window with zero buckets.
    ZeroBuckets,
    /// The window is not a whole number of buckets (bucketed windows:
    /// `buckets` must divide `window`).
    UnevenBuckets,
    /// More buckets than the bucketed window can count.
    TooManyBuckets {
        /// The most buckets it accepts.
        max: u32,
    },
}

impl WindowError {
    /// A one-line explanation, usable in a `const` panic.
    pub const fn as_str(&self) -> &'static str {
        match self {
            WindowError::ZeroLimit => "window: the limit is zero",
            WindowError::ZeroWindow => "window: the window is zero ticks long",
            WindowError::LimitTooLarge { .. } => "window: the limit is too large for this limiter",
            WindowError::Overflow => "window: limit times window overflows 64 bits",
            WindowError::WindowTooLong { .. } => "window: the window is too long for this limiter",
            WindowError::ZeroBuckets => "window: zero buckets",
            WindowError::UnevenBuckets => "window: the buckets do not divide the window",
            WindowError::TooManyBuckets { .. } => "window: too many buckets for this limiter",
        }
    }
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowError::LimitTooLarge { max } => {
                write!(f, "window: the limit is too large (at most {max})")
            }
            WindowError::WindowTooLong { max } => {
                write!(f, "window: the window is too long (at most {max} ticks)")
            }
            WindowError::TooManyBuckets { max } => {
                write!(f, "window: too many buckets (at most {max})")
            }
            other => f.write_str(other.as_str()),
        }
    }
}

impl core::error::Error for WindowError {}

/// The checks every window limiter makes of its parameters: a non-zero
/// limit of at most `max`, and a non-zero window.
pub(crate) const fn check_params(limit: u64, window: u64, max: u64) -> Result<(), WindowError> {
    if limit == 0 {
        Err(WindowError::ZeroLimit)
    } else if window == 0 {
        Err(WindowError::ZeroWindow)
    } else if limit > max {
        Err(WindowError::LimitTooLarge { max })
    } else {
        Ok(())
    }
}

/// `ceil(log2(limit + 1))`: the bits that hold every count in `0..=limit`.
pub(crate) const fn count_bits(limit: u64) -> u32 {
    64 - limit.leading_zeros()
}

/// The low `bits` bits set.
pub(crate) const fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The index of the last window of the tick counter, `⌊(2⁶⁴ − 1) / W⌋`:
/// after it the counter wraps and window 0 comes next. Off the admit path
/// (only a state from another window asks).
#[inline]
pub(crate) fn last_index(window: &crate::divisor::Divisor) -> u64 {
    window.div_rem(u64::MAX).0
}

/// The fewest bits left for a window tag.
pub(crate) const MIN_TAG_BITS: u32 = 16;

/// The loom models' reference: the admissions (one flag per check) of
/// every serial order of three checks `(now, cost)` on one state word.
#[cfg(all(test, feature = "loom"))]
pub(crate) mod loom_reference {
    extern crate std;
    use crate::{Algorithm, Limiter};
    use loom::sync::Arc;
    use loom::thread;
    use std::{vec, vec::Vec};

    /// Three threads run `checks` on one shared limiter of `quota`: in
    /// every interleaving the admissions must be those of some serial order
    /// of the same checks, so the limiter never admits more than its rule.
    pub(crate) fn race_is_some_serial_order<A>(quota: A, checks: [(u64, u64); 3])
    where
        A: Algorithm + Copy + Send + Sync + 'static,
    {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(move || {
            let limiter = Arc::new(Limiter::with_quota(quota));
            let handles: Vec<_> = checks
                .iter()
                .map(|&(now, cost)| {
                    let l = Arc::clone(&limiter);
                    thread::spawn(move || l.check_n(now, cost).is_ok())
                })
                .collect();
            let admitted: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(
                serial_outcomes(&quota, checks).contains(&admitted),
                "{admitted:?}"
            );
        });
    }

    pub(crate) fn serial_outcomes<A: Algorithm>(
        quota: &A,
        checks: [(u64, u64); 3],
    ) -> Vec<Vec<bool>> {
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
                let mut state = A::NEW;
                let mut admitted = vec![false; 3];
                for &i in order {
                    if let Ok((next, _)) = quota.check(state, checks[i].0, checks[i].1) {
                        state = next;
                        admitted[i] = true;
                    }
                }
                admitted
            })
            .collect()
    }
}
