//! What a check answers: [`Decision`] when admitted, [`Denied`] when not,
//! [`Snapshot`] for a peek.
//!
//! # Lazy units
//!
//! A limiter decides in its own units (GCRA: sub-ticks, see
//! [`quota`](crate::quota)). Converting to cells and whole ticks needs a
//! division, and the admit/deny path has none; so results keep the raw
//! quantities and convert when asked:
//!
//! ```text
//! remaining   = slack / interval               (cells, rounded down)
//! reset_after = ⌈until_full / scale⌉           (ticks, rounded up)
//! retry_after = ⌈wait / scale⌉                 (ticks, rounded up)
//! ```
//!
//! where `slack = span − (TAT − now)` is the room left, `until_full = TAT − now`
//! the debt, and `wait` how far `now` must advance before the same cost fits.
//!
//! # Invariants
//!
//! `remaining() ≤ limit()` and is never negative (unsigned, and `slack` is
//! computed saturating). `retry_after()` is exact for GCRA: checking the same
//! cost alone at `now + retry_after` admits, one tick earlier denies.
//! A cost larger than the limit is [`Denied::CostTooLarge`], which has no
//! retry time at all.

use core::fmt;

use crate::quota::Quota;

/// Raw quantities behind every result; see the [module docs](self).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Usage {
    pub(crate) limit: u64,
    pub(crate) slack: u64,
    pub(crate) interval: u64,
    pub(crate) until_full: u64,
    pub(crate) scale: u64,
}

impl Usage {
    /// Usage already expressed in cells and ticks (no conversion needed).
    pub(crate) const fn counted(limit: u64, remaining: u64, reset_after: u64) -> Self {
        Usage {
            limit,
            slack: remaining,
            interval: 1,
            until_full: reset_after,
            scale: 1,
        }
    }
    /// Usage of a GCRA quota whose TAT is `until_full` sub-ticks ahead of now.
    #[inline(always)]
    pub(crate) const fn gcra(quota: &Quota, until_full: u64) -> Self {
        Usage {
            limit: quota.burst(),
            slack: quota.span().saturating_sub(until_full),
            interval: quota.emission_interval(),
            until_full,
            scale: quota.scale(),
        }
    }
    pub(crate) const fn remaining(&self) -> u64 {
        let r = self.slack / self.interval;
        if r > self.limit {
            self.limit
        } else {
            r
        }
    }
    pub(crate) const fn reset_after(&self) -> u64 {
        Quota::ticks_ceil(self.until_full, self.scale)
    }
}

/// The accessors, `Debug` and `defmt::Format` shared by every result type
/// that holds a [`Usage`] (and, for waits, a `wait` in sub-ticks).
macro_rules! usage_accessors {
    ($ty:ident $(, $wait:ident: $wait_doc:literal)?) => {
        impl $ty {
            /// The limit: the burst, the most cells admitted at once.
            pub const fn limit(&self) -> u64 {
                self.usage.limit
            }
            /// Cells of cost 1 that would be admitted at the same `now`, after
            /// what this result reports. Never negative.
            pub const fn remaining(&self) -> u64 {
                self.usage.remaining()
            }
            /// Ticks from `now` until the limiter is full again
            /// (`remaining == limit`) if nothing more is admitted.
            pub const fn reset_after(&self) -> u64 {
                self.usage.reset_after()
            }
            $(
                #[doc = $wait_doc]
                pub const fn $wait(&self) -> u64 {
                    $crate::quota::Quota::ticks_ceil(self.wait, self.usage.scale)
                }
            )?
        }

        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let mut d = f.debug_struct(stringify!($ty));
                d.field("limit", &self.limit())
                    .field("remaining", &self.remaining())
                    .field("reset_after", &self.reset_after());
                $(d.field(stringify!($wait), &self.$wait());)?
                d.finish()
            }
        }

        #[cfg(feature = "defmt")]
        impl defmt::Format for $ty {
            fn format(&self, f: defmt::Formatter) {
                defmt::write!(
                    f,
                    "{=str} {{ limit: {=u64}, remaining: {=u64}, reset_after: {=u64}",
                    stringify!($ty),
                    self.limit(),
                    self.remaining(),
                    self.reset_after()
                );
                $(defmt::write!(f, ", {=str}: {=u64}", stringify!($wait), self.$wait());)?
                defmt::write!(f, " }}");
            }
        }
    };
}
pub(crate) use usage_accessors;

/// An admitted request: the quota's limit, what remains, and when it is full.
///
/// ```
/// use cellrate::{Gcra, Quota, RateLimiter};
/// let gcra = Gcra::new(Quota::per_second(10).at_hz(1_000));
/// let d = gcra.check_n(0, 4).unwrap();
/// assert_eq!((d.limit(), d.remaining(), d.reset_after()), (10, 6, 400));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    usage: Usage,
}

impl Decision {
    /// A decision in plain cells and ticks, for limiters outside this crate.
    ///
    /// ```
    /// use cellrate::Decision;
    /// let d = Decision::new(100, 42, 7);
    /// assert_eq!((d.limit(), d.remaining(), d.reset_after()), (100, 42, 7));
    /// ```
    pub const fn new(limit: u64, remaining: u64, reset_after: u64) -> Self {
        Decision {
            usage: Usage::counted(limit, remaining, reset_after),
        }
    }
    #[inline(always)]
    pub(crate) const fn from_usage(usage: Usage) -> Self {
        Decision { usage }
    }
}

usage_accessors!(Decision);

/// The state of a limiter seen by `peek`: a [`Decision`]'s numbers plus when a
/// single cell would next be admitted.
///
/// ```
/// use cellrate::{Gcra, Quota, RateLimiter};
/// let gcra = Gcra::new(Quota::per_second(2).at_hz(1_000));
/// gcra.check_n(0, 2).unwrap();
/// let s = gcra.peek(0);
/// assert_eq!((s.remaining(), s.retry_after(), s.reset_after()), (0, 500, 1_000));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Snapshot {
    usage: Usage,
    wait: u64,
}

impl Snapshot {
    /// A snapshot in plain cells and ticks, for limiters outside this crate.
    pub const fn new(limit: u64, remaining: u64, reset_after: u64, retry_after: u64) -> Self {
        Snapshot {
            usage: Usage::counted(limit, remaining, reset_after),
            wait: retry_after,
        }
    }
    pub(crate) const fn from_usage(usage: Usage, wait: u64) -> Self {
        Snapshot { usage, wait }
    }
    /// The same numbers as a [`Decision`] (what a cost-0 check returns).
    pub const fn to_decision(&self) -> Decision {
        Decision::from_usage(self.usage)
    }
}

usage_accessors!(Snapshot, retry_after: "Ticks until one cell would be admitted (0 if it would be now).");

/// A request over the limit now, that will fit later.
///
/// ```
/// use cellrate::{Denied, Gcra, Quota, RateLimiter};
/// let gcra = Gcra::new(Quota::per_second(1).at_hz(1_000));
/// gcra.check(0).unwrap();
/// let Err(Denied::Limited(l)) = gcra.check(10) else { unreachable!() };
/// assert_eq!((l.limit(), l.retry_after(), l.reset_after()), (1, 990, 990));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limited {
    usage: Usage,
    wait: u64,
}

impl Limited {
    /// A denial in plain cells and ticks, for limiters outside this crate.
    pub const fn new(limit: u64, retry_after: u64, reset_after: u64) -> Self {
        Limited {
            usage: Usage::counted(limit, 0, reset_after),
            wait: retry_after,
        }
    }
    /// Like [`new`](Self::new), saying how many cells of cost 1 would still fit.
    pub const fn with_remaining(
        limit: u64,
        remaining: u64,
        retry_after: u64,
        reset_after: u64,
    ) -> Self {
        Limited {
            usage: Usage::counted(limit, remaining, reset_after),
            wait: retry_after,
        }
    }
    #[inline(always)]
    pub(crate) const fn from_usage(usage: Usage, wait: u64) -> Self {
        Limited { usage, wait }
    }
}

usage_accessors!(Limited, retry_after: "Ticks after which the same cost, checked alone, is admitted.");

/// Why a check did not admit.
///
/// A denial could be one struct (limit, retry after, reset after). It is an
/// enum instead so that a cost that can never fit carries no
/// retry time at all: the type makes a caller handle "never" apart from
/// "later" (say, HTTP 413 rather than 429). [`Limited`] carries the struct's
/// fields, and [`Denied::retry_after`] returns `None` only for
/// [`CostTooLarge`](Denied::CostTooLarge).
///
/// ```
/// use cellrate::{Denied, Gcra, Quota, RateLimiter};
/// let gcra = Gcra::new(Quota::per_second(10).at_hz(1_000));
/// // 11 cells can never fit a burst of 10: no retry time is offered.
/// assert_eq!(gcra.check_n(0, 11), Err(Denied::CostTooLarge { cost: 11, limit: 10 }));
/// assert_eq!(gcra.check_n(0, 11).unwrap_err().retry_after(), None);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Denied {
    /// Over the limit now; see [`Limited::retry_after`].
    Limited(Limited),
    /// The cost exceeds the limit (burst): it can never be admitted.
    CostTooLarge {
        /// The cost asked for.
        cost: u64,
        /// The limit it exceeds.
        limit: u64,
    },
}

impl Denied {
    /// The limit of the limiter that denied.
    pub const fn limit(&self) -> u64 {
        match self {
            Denied::Limited(l) => l.limit(),
            Denied::CostTooLarge { limit, .. } => *limit,
        }
    }
    /// Ticks until the same cost alone would be admitted; `None` if never.
    pub const fn retry_after(&self) -> Option<u64> {
        match self {
            Denied::Limited(l) => Some(l.retry_after()),
            Denied::CostTooLarge { .. } => None,
        }
    }
    /// Ticks until the limiter is full; `None` for a cost that can never fit.
    pub const fn reset_after(&self) -> Option<u64> {
        match self {
            Denied::Limited(l) => Some(l.reset_after()),
            Denied::CostTooLarge { .. } => None,
        }
    }
    /// The [`Limited`] details, if the request can fit later.
    pub const fn limited(&self) -> Option<&Limited> {
        match self {
            Denied::Limited(l) => Some(l),
            Denied::CostTooLarge { .. } => None,
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::Limited(l) => write!(f, "rate limited: retry after {} ticks", l.retry_after()),
            Denied::CostTooLarge { cost, limit } => {
                write!(
                    f,
                    "cost {cost} exceeds the limit of {limit} and can never be admitted"
                )
            }
        }
    }
}

impl core::error::Error for Denied {}
