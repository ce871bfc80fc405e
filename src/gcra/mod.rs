//! The generic cell rate algorithm: [`Gcra`] (its docs state the math and
//! the contract), [`FixedGcra`], [`LocalGcra`], and the GCRA steps the
//! containers share. The proofs are in docs/design/gcra.md.
//!
//! Reconfiguration keeps the debt as cells used: `d` sub-ticks owed at `now`
//! are `d/T` cells, owing `min(⌈d·T′/T⌉, span′)` under the new quota. At
//! that instant the new quota admits exactly `max(0, a + burst′ − burst)`
//! where the old admitted `a` (docs/design/reconfigure.md).

use core::fmt;

use crate::algorithm::Limiter;
use crate::decision::{usage_accessors, Decision, Denied, Limited, Snapshot, Usage};
use crate::quota::{Quota, QuotaError};
use crate::sync::{loom_const_fn, QuotaCell};
use crate::RateLimiter;

mod algorithm;
mod fixed;
mod local;
pub(crate) mod step;

pub use self::fixed::FixedGcra;
pub use self::local::LocalGcra;

/// The charge `cost·T` in sub-ticks, or the refusal of a cost above the burst.
#[inline(always)]
pub(crate) fn charge(quota: &Quota, cost: u64) -> Result<u64, Denied> {
    crate::algorithm::within_limit(cost, quota.burst())?;
    Ok(cost * quota.emission_interval())
}

/// A denial owing `debt` sub-ticks, fitting after `wait` sub-ticks.
#[inline(always)]
fn limited(quota: &Quota, debt: u64, wait: u64) -> Denied {
    Denied::Limited(Limited::from_usage(Usage::gcra(quota, debt), wait))
}

#[inline(always)]
fn short(quota: &Quota, shortfall: step::Shortfall) -> Denied {
    limited(quota, shortfall.debt, shortfall.wait)
}

/// A lease's step: take the largest `g ≤ most` with `g ≤ max(least,
/// ⌊room / share⌋)` cells at `now` (a word), `room = ⌊(span − debt) / T⌋`;
/// denied when `room < least`. Returns the state, the cells taken and the
/// room left. Divides once per lease, not per cell.
#[inline]
pub(crate) fn take_up_to(
    quota: &Quota,
    state: u64,
    now: u64,
    (least, most, share): (u64, u64, u64),
) -> Result<(u64, (u64, u64)), Denied> {
    let increment = charge(quota, least)?;
    let debt = step::debt(state, now);
    let room_for_least = quota.span() - increment;
    if debt > room_for_least {
        return Err(limited(quota, debt, debt - room_for_least));
    }
    let room = (quota.span() - debt) / quota.emission_interval();
    let taken = (room / share.max(1)).max(least).min(most.max(least));
    let new_state = step::later(now, debt + taken * quota.emission_interval());
    Ok((new_state, (taken, room - taken)))
}

/// The state seen at `now` (a state word), with the wait for one cell.
#[inline]
pub(crate) fn snapshot(quota: &Quota, state: u64, now: u64) -> Snapshot {
    let debt = step::debt(state, now);
    let wait = step::wait_for_one(debt, quota.emission_interval(), quota.span());
    Snapshot::from_usage(Usage::gcra(quota, debt), wait)
}

/// Shaping: the state after sending `cost` cells at the earliest
/// conforming whole tick, if that is at most `max_wait` sub-ticks after
/// `now` (a word) and leaves the TAT within [`MAX_SPAN`](crate::MAX_SPAN);
/// the state advances as a policer downstream sees it,
/// `TAT ← max(TAT, send) + cost·T`.
#[inline]
pub(crate) fn reserve(
    quota: &Quota,
    state: u64,
    now: u64,
    cost: u64,
    max_wait: u64,
) -> Result<(u64, Reservation), Denied> {
    let increment = charge(quota, cost)?;
    match step::reserve(state, now, increment, quota.span(), quota.scale(), max_wait) {
        Ok(r) => Ok((
            r.state,
            Reservation {
                usage: Usage::gcra(quota, r.until_full),
                wait: r.wait,
            },
        )),
        Err(shortfall) => Err(short(quota, shortfall)),
    }
}

/// The state after giving back `cost` cells at `now` (a word): the debt
/// less `cost·T`, never below 0.
#[inline]
pub(crate) fn refund(quota: &Quota, state: u64, now: u64, cost: u64) -> u64 {
    step::refund(state, now, cost.saturating_mul(quota.emission_interval()))
}

/// A shaped send: when it may go, and the limiter's state after it.
///
/// ```
/// use cellrate::{LeakyBucket, Quota};
/// // A leaky bucket as a queue: one cell every 100 ticks, up to 1 000 ticks of queueing.
/// let shaper = LeakyBucket::new(Quota::per_ticks(1, 100).with_burst(1).at_hz(1_000));
/// let departures: Vec<u64> = (0..4).map(|_| shaper.reserve_n(0, 1, 1_000).unwrap().send_after()).collect();
/// assert_eq!(departures, [0, 100, 200, 300]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reservation {
    usage: Usage,
    wait: u64,
}

usage_accessors!(Reservation, send_after: "Ticks after `now` at which the cells may be sent (0: immediately).");

/// Why [`Gcra::set_quota`] (or a keyed table's `set_quota`) changed nothing.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SetQuotaError {
    /// Another `set_quota` on the same limiter was in progress (say, in the
    /// thread an interrupt handler preempted): retry later, never spin.
    Busy,
    /// The quota cannot be expressed at this limiter's scale and frequency.
    Quota(QuotaError),
    /// The key has no override in this table
    /// ([`KeyedTable::set_override_quota`](crate::keyed::KeyedTable::set_override_quota)).
    NoOverride,
}

impl fmt::Display for SetQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetQuotaError::Busy => {
                f.write_str("another reconfiguration of this limiter is in progress")
            }
            SetQuotaError::Quota(e) => e.fmt(f),
            SetQuotaError::NoOverride => f.write_str("this key has no override in this table"),
        }
    }
}

impl core::error::Error for SetQuotaError {}

/// A GCRA limiter shared through `&self`: lock-free where the target has
/// 64-bit compare-and-swap, a short critical section where it has not (see
/// [`sync`](crate::sync)). `const`-constructible, so it can live in a `static`
/// shared by thread mode and interrupt handlers.
///
/// # The math
///
/// The state is the theoretical arrival time `TAT`. With the emission
/// interval `T`, the burst `b` and the tolerance `τ = (b − 1)·T` of the
/// [`Quota`], a request of `cost` cells at `now` is admitted iff
///
/// ```text
/// max(TAT, now) + cost·T − now ≤ τ + T                    (= b·T, the span)
/// ```
///
/// and then `TAT ← max(TAT, now) + cost·T`; a denial changes nothing. It runs
/// in sub-ticks (`now · scale`, see [`Quota`]): one multiply, adds, compares
/// and one compare-and-swap, no division. `remaining`, `retry_after` and
/// `reset_after` follow from the same inequality and are converted only when
/// read ([`Decision`]). A [`TokenBucket`] of capacity `b` refilled every `T`
/// is this GCRA; a [`LeakyBucket`] is the same with no burst, and
/// [`reserve_n`](Self::reserve_n) is the leaky bucket as a queue (a shaper).
///
/// # Serial time
///
/// Answers depend only on differences between the `now`s a limiter sees, so
/// any clock origin works, as does a counter that wraps past `2⁶⁴`. The state
/// word is `2·TAT + 1 (mod 2⁶⁴)` (0 for a new or reset limiter), read in
/// serial-number order (RFC 1982): a TAT ahead of `now` by less than 2⁶²
/// sub-ticks is owed, anything else is idle. Every write leaves the TAT at
/// most [`MAX_SPAN`](crate::MAX_SPAN) sub-ticks ahead, so two checks less
/// than [`Quota::horizon_ticks`] apart are judged exactly; checks further
/// apart may deny a full client until its debt, as read, drains, and never
/// admit more than the quota.
///
/// # Invariants
///
/// * Concurrent checks never admit more than the same checks run one after
///   another in the order of their swaps; a denial, a peek and a check of
///   cost 0 never store.
/// * A `now` earlier than a previous one can deny more, never admit more.
/// * [`set_quota`](Self::set_quota) keeps a client's debt **as cells
///   used**: at that instant a raise never refuses what the old quota
///   admitted, and a lower never admits what it refused.
///
/// ```
/// use cellrate::{Gcra, Quota, RateLimiter};
/// static RADIO: Gcra = Gcra::new(Quota::per_minute(6).with_burst(2).at_hz(1_000));
///
/// assert!(RADIO.check(0).is_ok());
/// assert!(RADIO.check(0).is_ok());
/// let denied = RADIO.check(0).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(10_000)); // one message per 10 s
/// ```
pub struct Gcra {
    /// The quota (replaceable through `&self`) and the TAT.
    shared: Limiter<QuotaCell>,
}

impl Gcra {
    loom_const_fn! {
        /// A full limiter for `quota`.
        pub fn new(quota: Quota) -> Self {
            Gcra { shared: Limiter::from_parts(QuotaCell::new(quota), 0) }
        }
    }

    /// The quota in force (as re-expressed by the last `set_quota`).
    pub fn quota(&self) -> Quota {
        self.shared.params().load()
    }

    /// Admits one cell at `now`.
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
    /// assert!(g.check(0).is_ok());
    /// assert_eq!(g.check(400).unwrap_err().retry_after(), Some(600));
    /// ```
    #[inline(always)]
    pub fn check(&self, now: u64) -> Result<Decision, Denied> {
        self.check_n(now, 1)
    }

    /// Admits `cost` cells at `now`, or denies and stores nothing. A cost of 0
    /// is a peek; a cost above the burst is [`Denied::CostTooLarge`].
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(1_000).with_burst(1_500).at_hz(1_000_000));
    /// assert_eq!(g.check_n(0, 1_500).unwrap().remaining(), 0);
    /// assert_eq!(g.check_n(0, 10).unwrap_err().retry_after(), Some(10_000));
    /// ```
    #[inline(always)]
    pub fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.shared.apply_n(now, cost)
    }

    /// The state at `now`, consuming nothing.
    pub fn peek(&self, now: u64) -> Snapshot {
        self.shared.peek_at(now)
    }

    /// Shaping (the leaky bucket as a queue): reserves `cost` cells at the
    /// earliest tick they conform, if at most `max_wait` ticks after `now`;
    /// send them [`send_after`](Reservation::send_after) ticks from `now`. A
    /// longer wait is denied and stores nothing.
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(10).with_burst(2).at_hz(1_000));
    /// let waits: Vec<u64> = (0..5).map(|_| g.reserve_n(0, 1, 250).map(|r| r.send_after()).unwrap_or(u64::MAX)).collect();
    /// assert_eq!(waits, [0, 0, 100, 200, u64::MAX]); // the fifth would wait 300 > 250
    /// ```
    pub fn reserve_n(&self, now: u64, cost: u64, max_wait: u64) -> Result<Reservation, Denied> {
        let quota = self.quota();
        let now = quota.now_word(now);
        let max_wait = max_wait.saturating_mul(quota.scale());
        self.shared
            .state()
            .update(|state| reserve(&quota, state, now, cost, max_wait))
    }

    /// Gives back `cost` cells at `now` (a request admitted but never sent),
    /// never beyond full; the state after.
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(10).at_hz(1_000));
    /// g.check_n(0, 10).unwrap();
    /// assert_eq!(g.refund_n(0, 3).remaining(), 3);
    /// assert_eq!(g.refund_n(0, 100).remaining(), 10);
    /// ```
    pub fn refund_n(&self, now: u64, cost: u64) -> Snapshot {
        self.shared.refund_at(now, cost)
    }

    /// Admits and returns the cells' mark (for a [`Revocable`](crate::Revocable) receipt).
    #[inline]
    pub(crate) fn admit_marked(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        self.shared.admit_marked(now, cost)
    }

    /// [`take_up_to`] on the state word: the cells taken and the room left.
    pub(crate) fn take_up_to(
        &self,
        now: u64,
        least: u64,
        most: u64,
        share: u64,
    ) -> Result<(u64, u64), Denied> {
        let quota = self.quota();
        let now = quota.now_word(now);
        let least = least.max(1);
        self.shared
            .state()
            .update(|state| take_up_to(&quota, state, now, (least, most, share)))
    }

    /// Makes the limiter full, as new.
    pub fn reset(&self) {
        self.shared.clear()
    }

    /// Replaces the quota at `now` through `&mut self`: `quota` is taken at
    /// its own scale (nothing can read the state meanwhile), the state
    /// re-expressed by [`Algorithm::translate`](crate::Algorithm::translate).
    pub(crate) fn replace_quota(&mut self, now: u64, quota: Quota) {
        let old = self.quota();
        let state = crate::Algorithm::translate(&old, self.shared.state().load(), now, &quota);
        self.shared = Limiter::from_parts(QuotaCell::new(quota), state);
    }

    /// Replaces the quota at `now` through `&mut self`: as
    /// [`set_quota`](Self::set_quota), for every quota that builds at this
    /// limiter's clock frequency. Nothing can read the state meanwhile, so
    /// the quota is taken at its own scale (one built for another frequency
    /// is re-expressed at this one first) and the state re-expressed with
    /// it; `set_quota`, through `&self`, keeps the scale the limiter was
    /// built with. Returns the quota in force; never
    /// [`Busy`](SetQuotaError::Busy).
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let mut g = Gcra::new(Quota::per_second(1_000).at_hz(1_000)); // 1 tick each
    /// g.check_n(0, 10).unwrap();
    /// // 1 500/s is not a whole number of ticks: another scale.
    /// let raised = Quota::per_second(1_500).at_hz(1_000);
    /// assert!(g.set_quota(0, raised).is_err());
    /// assert_eq!(g.set_quota_mut(0, raised), Ok(raised));
    /// assert_eq!(g.check(0).unwrap().remaining(), 1_500 - 10 - 1); // the 10 used stay used
    /// ```
    pub fn set_quota_mut(&mut self, now: u64, quota: Quota) -> Result<Quota, SetQuotaError> {
        let quota = quota
            .at_clock(self.quota().hz())
            .map_err(SetQuotaError::Quota)?;
        self.replace_quota(now, quota);
        Ok(quota)
    }

    /// Replaces the quota at `now`. Checks never block on it and each sees
    /// the old quota or the new one whole; the debt is kept as cells used
    /// ([`Algorithm::translate`](crate::Algorithm::translate)), at most the
    /// new burst. Returns the quota in force, re-expressed at this
    /// limiter's scale (rounded toward admitting less if it is not exact
    /// there; one not expressible within 1 % is refused, which
    /// [`set_quota_mut`](Self::set_quota_mut) accepts). Run alone, the change is exact; a check that overlaps it may
    /// be charged at the old price (see docs/design/reconfigure.md).
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
    /// assert!(g.check(0).is_ok() && g.check(0).is_err());
    /// g.set_quota(0, Quota::per_second(1).with_burst(5).at_hz(1_000)).unwrap();
    /// assert_eq!(g.check(0).unwrap().remaining(), 3); // 1 cell used of 5
    /// ```
    ///
    /// A limiter meant to take, through `&self`, quotas whose intervals are
    /// fractions of a tick is made at a scale that expresses them all
    /// exactly ([`Quota::rescaled`]; the scale bounds how far apart two
    /// checks are judged exactly, [`Quota::horizon_ticks`]):
    ///
    /// ```
    /// use cellrate::{Gcra, Quota};
    /// // Rates in thirds and halves of a 1 kHz tick: 6 sub-ticks per tick.
    /// let made = Quota::per_second(1_000).at_hz(1_000).rescaled(6, 1_000).unwrap();
    /// let g = Gcra::new(made);
    /// let raised = g.set_quota(0, Quota::per_second(1_500).at_hz(1_000)).unwrap();
    /// assert!(raised.is_exact());
    /// let again = g.set_quota(0, Quota::per_second(2_000).at_hz(1_000)).unwrap();
    /// assert!(again.is_exact());
    /// ```
    pub fn set_quota(&self, now: u64, quota: Quota) -> Result<Quota, SetQuotaError> {
        let cell = self.shared.params();
        let fixed = cell.fixed();
        let quota = quota
            .rescaled(fixed.scale(), fixed.hz())
            .map_err(SetQuotaError::Quota)?;
        // The new quota is published first, then every state the old one
        // wrote is re-expressed (a compare-and-swap loop).
        let translate = |old: &Quota| {
            let step = |state: u64| {
                Ok::<_, core::convert::Infallible>((
                    crate::Algorithm::translate(old, state, now, &quota),
                    (),
                ))
            };
            let _ = self.shared.state().update(step);
        };
        if cell.try_replace(&quota, translate) {
            Ok(quota)
        } else {
            Err(SetQuotaError::Busy)
        }
    }
}

impl RateLimiter for Gcra {
    #[inline(always)]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        Gcra::check_n(self, now, cost)
    }
    #[inline(always)]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        Gcra::check(self, now)
    }
    fn peek(&self, now: u64) -> Snapshot {
        Gcra::peek(self, now)
    }
}

impl fmt::Debug for Gcra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gcra")
            .field("state", &self.shared.state().load())
            .field("quota", &self.quota())
            .finish()
    }
}

/// A token bucket of `capacity` tokens refilled at `refill`: a [`Gcra`] whose
/// burst is the capacity (see [the math](Gcra#the-math)).
///
/// ```
/// use cellrate::{Quota, Rate, RateLimiter, TokenBucket};
/// let (capacity, refill, hz) = (20, Rate::per_second(5), 1_000);
/// let bucket = TokenBucket::new(Quota::builder(refill).with_burst(capacity).at_hz(hz));
/// assert!((0..20).all(|_| bucket.check(0).is_ok()));
/// assert!(bucket.check(0).is_err());
/// assert!(bucket.check(200).is_ok()); // one token per 200 ms
/// ```
pub type TokenBucket = Gcra;

/// A leaky bucket draining at `rate`: a [`Gcra`] with a burst of 1 (the
/// builder's default burst is the rate's cells, so set it); a meter through
/// `check`, a queue (shaper) through [`reserve_n`](Gcra::reserve_n).
///
/// ```
/// use cellrate::{LeakyBucket, Quota, Rate, RateLimiter};
/// let (rate, hz) = (Rate::per_second(10), 1_000);
/// let meter = LeakyBucket::new(Quota::builder(rate).with_burst(1).at_hz(hz));
/// assert!(meter.check(0).is_ok());
/// assert!(meter.check(99).is_err());
/// assert!(meter.check(100).is_ok());
/// ```
pub type LeakyBucket = Gcra;

#[cfg(feature = "defmt")]
impl defmt::Format for Gcra {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Gcra {{ state: {=u64}, quota: {} }}",
            self.shared.state().load(),
            self.quota()
        )
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
