//! Window limiters: "at most `limit` cells per `window` ticks", four ways.
//!
//! | limiter | state | exactness | memory |
//! |---|---|---|---|
//! | [`FixedWindow`] | one `u64`: (window index, count) | exact for aligned windows `[k·W, (k+1)·W)`; up to `2·limit` across an edge | 8 bytes |
//! | [`SlidingWindow`] | one `u64`: (window index, previous count, current count) | approximation of a sliding window (see [`sliding`]) | 8 bytes |
//! | [`BucketedWindow`] | one `u64`: (bucket index, suffix sums of `N` bucket counts) | exact per bucket of `W/N` ticks: at most `limit` in any `N` buckets, at most one bucket's count over in any `W` ticks (see [`bucketed`]) | 8 bytes |
//! | [`WideBucketedWindow`] | a ring of `N` bucket counts, its head, the bucket index, the sum | as [`BucketedWindow`], for any limit | `8·N + 72` bytes (`8·N + 64` without `std`) |
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
//! # Time to windows, without a division
//!
//! Window `k` is the ticks `[k·W, (k+1)·W)`; `now` lies in window
//! `k = ⌊now / W⌋` at elapsed time `e = now − k·W`. Neither takes a division
//! instruction: `W` is turned once (in the `const` constructor) into the
//! crate's divisor by an invariant integer (`src/divisor.rs`, which states
//! the Granlund–Montgomery construction, its proof reference and its
//! tests), one multiply, a subtraction, an addition and two shifts.
//!
//! # Window indices in a few bits
//!
//! A counter stores the low bits of its window index (its *tag*) beside the
//! counts. The counts get just the bits `limit` needs and the tag all the
//! rest, at least 16 bits: a limit of 100 leaves a 57-bit tag (fixed window,
//! 7 count bits) or a 50-bit tag (sliding: 2 × 7 count bits), a limit of 10⁶ a 44-bit or
//! 24-bit tag. Tags compare modulo `2^bits`:
//!
//! * equal tag: the stored window is the current one;
//! * tag one behind (sliding window only): the stored window is the previous one;
//! * tag one *ahead*: another thread read a slightly later clock and already
//!   moved to the next window; this check is judged conservatively against
//!   that newer window as if at its start (it can deny more, never admit more);
//! * anything else: the stored counts are too old to matter and read as zero.
//!
//! A client silent for exactly a multiple of `2^bits` windows (minus one or
//! two) aliases: its old counts are read as current for at most two windows,
//! which can only deny, never admit more. With 16 tag bits and a 1 s window
//! that needs a silence of exactly 18 h 12 min (± 2 s); with a 40-bit tag it
//! needs 34 000 years. A clock that steps back by two or more windows, or a
//! thread stalled that long between reading the clock and checking, finds the
//! counts "too old" and starts from zero: the windows rely on the clock being
//! monotonic more than [`Gcra`](crate::Gcra) does.
//!
//! # Any clock
//!
//! Windows are aligned to multiples of `W` on the caller's clock: that is
//! their definition (with Unix time, calendar-aligned windows). Shifting
//! every `now` by a multiple of `W` shifts every window index by the same
//! amount, so the counters give identical answers for any such origin
//! (Unix-epoch nanoseconds, microseconds or milliseconds rounded to `W`,
//! origins near `2⁶⁴` included); a new client's state reads empty in every
//! window. [`SlidingLog`] keeps expiry times in serial time and is
//! origin-free for every origin (see [`log`]).
//!
//! Where the tick counter wraps past `2⁶⁴`, window 0 follows the last
//! window `K = ⌊(2⁶⁴ − 1)/W⌋`, which is short unless `W` divides `2⁶⁴`
//! (`2⁶⁴ mod W` ticks). There:
//!
//! * [`FixedWindow`] counts each window apart, the short one included:
//!   every window admits at most `limit`;
//! * [`SlidingWindow`] counts the short window as window 0's previous one
//!   (conservatively, as if it had lasted `W`), never as "too old";
//! * a thread whose `now` lags from window 0 back into window `K` is judged
//!   against window 0's counts, as for a lag of one window anywhere else.
//!
//! `retry_after` and `reset_after` in window `K` count a full window, so
//! there they are at most `W − (2⁶⁴ mod W)` ticks longer than needed.

/// The [`Algorithm`](crate::Algorithm) mark and refund of a window whose
/// state word is tagged (fixed, sliding, bucketed): the mark is the tag of
/// the window or bucket the cells were counted in (a thread whose clock
/// lags may have counted them in the one after `now`'s), the refund the
/// type's `revoke`. Used inside each `impl Algorithm`.
macro_rules! tagged_marks {
    () => {
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
    /// (sliding log only: [`log::MAX_WINDOW`]).
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
