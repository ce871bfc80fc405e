//! What a check answers: [`Decision`], [`Denied`]/[`Limited`], [`Snapshot`],
//! all over one [`Usage`] of raw quantities, converted when read (see
//! [`Decision`]).

use core::fmt;

use crate::quota::Quota;

/// Raw quantities behind every result; see [`Decision`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Usage {
    pub(crate) limit: u64,
    pub(crate) slack: u64,
    pub(crate) interval: u64,
    pub(crate) until_full: u64,
    pub(crate) scale: u64,
}

impl Usage {
    pub(crate) const fn counted(limit: u64, remaining: u64, reset_after: u64) -> Self {
        Usage {
            limit,
            slack: remaining,
            interval: 1,
            until_full: reset_after,
            scale: 1,
        }
    }
    /// A GCRA quota's, whose TAT is `until_full` sub-ticks ahead of now.
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

/// The accessors, `Debug` and `defmt::Format` of a result holding a
/// [`Usage`] (and, for waits, a `wait` in sub-ticks).
macro_rules! usage_accessors {
    ($ty:ident $(, $wait:ident: $wait_doc:literal)?) => {
        impl $ty {
            /// The limit: the burst, the most cells admitted at once.
            pub const fn limit(&self) -> u64 {
                self.usage.limit
            }
            /// Cells of cost 1 that would still be admitted at the same `now`.
            pub const fn remaining(&self) -> u64 {
                self.usage.remaining()
            }
            /// Ticks until the limiter is full again if nothing more is admitted.
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
/// A limiter decides in its own units (GCRA: sub-ticks, see [`Quota`]), and
/// the admit/deny path has no division; so results keep the raw quantities
/// and convert when an accessor is called:
///
/// ```text
/// remaining   = slack / interval               (cells, rounded down)
/// reset_after = ⌈until_full / scale⌉           (ticks, rounded up)
/// retry_after = ⌈wait / scale⌉                 (ticks, rounded up)
/// ```
///
/// where `slack = span − (TAT − now)` is the room left, `until_full = TAT −
/// now` the debt, and `wait` how far `now` must advance before the same cost
/// fits. `remaining() ≤ limit()`, never negative. `retry_after()` is exact
/// for GCRA: checking the same cost alone at `now + retry_after` admits, one
/// tick earlier denies.
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
    /// What a [`Gcra`](crate::Gcra) of `quota` reports when its TAT lies
    /// `ahead` sub-ticks past `now` after the request, for a GCRA step
    /// evaluated elsewhere (a Redis script).
    ///
    /// ```
    /// use cellrate::{Decision, Gcra, Quota, RateLimiter};
    /// let quota = Quota::per_second(10).with_burst(5).at_hz(1_000);
    /// let gcra = Gcra::new(quota);
    /// let seen = gcra.check_n(0, 2).unwrap();
    /// let ahead = 2 * quota.emission_interval(); // two cells owed
    /// assert_eq!(Decision::from_gcra(&quota, ahead), seen);
    /// ```
    pub const fn from_gcra(quota: &Quota, ahead: u64) -> Self {
        Decision::from_usage(Usage::gcra(quota, ahead))
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
#[derive(Clone, Copy)]
pub struct Limited(Seen);

/// What a [`Limited`] holds: raw quantities, or what a denying GCRA step
/// saw, evaluated only when an accessor asks.
#[derive(Clone, Copy)]
enum Seen {
    /// The raw quantities and the wait in sub-ticks.
    Usage { usage: Usage, wait: u64 },
    /// A denied GCRA step: the distance `d = 2·debt` and the room
    /// `2·(span − cost·T)` it exceeded, with the quota's numbers.
    Gcra {
        limit: u64,
        span: u64,
        interval: u64,
        scale: u64,
        distance: u64,
        room: u64,
    },
}

impl Limited {
    /// A denial in plain cells and ticks, for limiters outside this crate.
    pub const fn new(limit: u64, retry_after: u64, reset_after: u64) -> Self {
        Limited(Seen::Usage {
            usage: Usage::counted(limit, 0, reset_after),
            wait: retry_after,
        })
    }
    /// Like [`new`](Self::new), saying how many cells of cost 1 would still fit.
    pub const fn with_remaining(
        limit: u64,
        remaining: u64,
        retry_after: u64,
        reset_after: u64,
    ) -> Self {
        Limited(Seen::Usage {
            usage: Usage::counted(limit, remaining, reset_after),
            wait: retry_after,
        })
    }
    /// What a [`Gcra`](crate::Gcra) of `quota` reports when its TAT lies
    /// `ahead` sub-ticks past `now` and the request fits after `wait`
    /// sub-ticks, for a GCRA step evaluated elsewhere (a Redis script).
    ///
    /// ```
    /// use cellrate::{Denied, Gcra, Limited, Quota, RateLimiter};
    /// let quota = Quota::per_second(10).with_burst(2).at_hz(1_000);
    /// let gcra = Gcra::new(quota);
    /// gcra.check_n(0, 2).unwrap();
    /// let Err(Denied::Limited(seen)) = gcra.check(0) else { panic!() };
    /// let t = quota.emission_interval();
    /// // Two cells owed; one more fits after one emission interval.
    /// assert_eq!(Limited::from_gcra(&quota, 2 * t, t), seen);
    /// ```
    pub const fn from_gcra(quota: &Quota, ahead: u64, wait: u64) -> Self {
        Limited::from_usage(Usage::gcra(quota, ahead), wait)
    }
    #[inline(always)]
    pub(crate) const fn from_usage(usage: Usage, wait: u64) -> Self {
        Limited(Seen::Usage { usage, wait })
    }
    /// A denied GCRA step, kept as seen (`distance > room`, word units).
    #[inline(always)]
    pub(crate) const fn from_gcra_step(quota: &Quota, distance: u64, room: u64) -> Self {
        Limited(Seen::Gcra {
            limit: quota.burst(),
            span: quota.span(),
            interval: quota.emission_interval(),
            scale: quota.scale(),
            distance,
            room,
        })
    }
    #[inline]
    const fn evaluated(&self) -> (Usage, u64) {
        match self.0 {
            Seen::Usage { usage, wait } => (usage, wait),
            Seen::Gcra {
                limit,
                span,
                interval,
                scale,
                distance,
                room,
            } => {
                let (debt, wait) = shortfall(distance, room);
                (
                    Usage {
                        limit,
                        slack: span.saturating_sub(debt),
                        interval,
                        until_full: debt,
                        scale,
                    },
                    wait,
                )
            }
        }
    }
}

/// [`usage_accessors`]' shape over a [`Limited`]'s evaluated quantities.
struct LimitedView {
    usage: Usage,
    wait: u64,
}

usage_accessors!(LimitedView, retry_after: "Ticks after which the same cost, checked alone, is admitted.");

impl Limited {
    #[inline]
    const fn view(&self) -> LimitedView {
        let (usage, wait) = self.evaluated();
        LimitedView { usage, wait }
    }
    /// The limit: the burst, the most cells admitted at once.
    pub const fn limit(&self) -> u64 {
        self.view().limit()
    }
    /// Cells of cost 1 that would still be admitted at the same `now`.
    pub const fn remaining(&self) -> u64 {
        self.view().remaining()
    }
    /// Ticks until the limiter is full again if nothing more is admitted.
    pub const fn reset_after(&self) -> u64 {
        self.view().reset_after()
    }
    /// Ticks after which the same cost, checked alone, is admitted.
    pub const fn retry_after(&self) -> u64 {
        self.view().retry_after()
    }
}

impl fmt::Debug for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limited")
            .field("limit", &self.limit())
            .field("remaining", &self.remaining())
            .field("reset_after", &self.reset_after())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Limited {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Limited {{ limit: {=u64}, remaining: {=u64}, reset_after: {=u64}, retry_after: {=u64} }}",
            self.limit(),
            self.remaining(),
            self.reset_after(),
            self.retry_after()
        )
    }
}

/// Two denials are equal when they report the same quantities, however
/// they are held.
impl PartialEq for Limited {
    fn eq(&self, other: &Self) -> bool {
        self.evaluated() == other.evaluated()
    }
}

impl Eq for Limited {}

impl core::hash::Hash for Limited {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.evaluated().hash(state)
    }
}

/// Why a check did not admit: [`Limited`] (later) or
/// [`CostTooLarge`](Denied::CostTooLarge) (never, with no retry time), so a
/// caller handles "never" apart from "later" (say, HTTP 413 rather than 429).
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

/// The debt `e` and the wait `e − (span − increment)` of a denied GCRA step
/// from its distance `d = 2·e` and room `2·(span − increment)`.
#[inline(always)]
pub(crate) const fn shortfall(d: u64, room: u64) -> (u64, u64) {
    (d >> 1, (d - room) >> 1)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn a_denial_stays_as_small_as_a_limited_of_raw_quantities() {
        // The GCRA form and the raw form share one tag; `Denied` uses its
        // spare values: seven words, as before the lazy denial.
        assert!(core::mem::size_of::<Limited>() <= 7 * 8);
        assert!(core::mem::size_of::<Denied>() <= 7 * 8);
    }

    #[test]
    fn a_kept_gcra_step_equals_and_hashes_as_its_evaluated_quantities() {
        use core::hash::{Hash, Hasher};
        struct Sum(u64);
        impl Hasher for Sum {
            fn finish(&self) -> u64 {
                self.0
            }
            fn write(&mut self, bytes: &[u8]) {
                for b in bytes {
                    self.0 = self.0.wrapping_mul(31).wrapping_add(u64::from(*b));
                }
            }
        }
        let quota = Quota::per_second(1).with_burst(3).at_hz(1_000);
        // Debt 2 500 sub-ticks against a room of 2 000 (cost 1): wait 500.
        let kept = Limited::from_gcra_step(&quota, 5_000, 4_000);
        let debt = 2_500;
        let raw = Limited::from_usage(Usage::gcra(&quota, debt), 500);
        assert_eq!(kept, raw);
        assert_ne!(kept, Limited::from_usage(Usage::gcra(&quota, debt), 501));
        let hash = |l: &Limited| {
            let mut h = Sum(0);
            l.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&kept), hash(&raw));
        assert_eq!(
            (
                kept.limit(),
                kept.remaining(),
                kept.retry_after(),
                kept.reset_after()
            ),
            (3, 0, 500, 2_500)
        );
        assert_eq!(std::format!("{kept:?}"), std::format!("{raw:?}"));
    }
}
