//! A progressive penalty for clients that keep hitting the limit.
//!
//! The penalty's status word (`level << 32 | strikes`) is not limiter
//! state, so it does not run on the one container of the one-word limiters
//! ([`Limiter`](crate::Limiter) and the `algorithm` module's `apply`): it
//! admits and denies nothing, so there is no [`Decision`], denial or idle
//! state for an [`Algorithm`](crate::Algorithm) step to return; it records
//! what the inner limiter answered. Its transitions are not one step on one
//! word either: a strike follows an inner denial (one `StateWord::update`),
//! and a restore is decided from a second word, the time of the last
//! denial, read before it (one compare-exchange that yields to a strike
//! landing meanwhile).

use core::convert::Infallible;
use core::fmt;

use super::Revocable;
use crate::sync::{loom_const_fn, StateWord};
use crate::{Decision, Denied, Limited, RateLimiter, Snapshot};

/// When and how hard [`Adaptive`] penalises.
///
/// ```
/// use cellrate::compose::Penalty;
/// // Every 3 denials raise the level; up to level 4 (cost × 16);
/// // forgiven after 10 000 ticks without a denial.
/// const P: Penalty = Penalty::new(3, 4, 10_000);
/// assert_eq!(P.max_level(), 4);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Penalty {
    strikes: u32,
    max_level: u8,
    good_period: u64,
}

impl Penalty {
    /// `strikes` denials (at least 1) raise the level by one, up to
    /// `max_level` (at most 32); `good_period` ticks without a denial restore
    /// level 0.
    pub const fn new(strikes: u32, max_level: u8, good_period: u64) -> Self {
        Penalty {
            strikes: if strikes == 0 { 1 } else { strikes },
            max_level: if max_level > 32 { 32 } else { max_level },
            good_period,
        }
    }
    /// Denials per level.
    pub const fn strikes(&self) -> u32 {
        self.strikes
    }
    /// The highest level.
    pub const fn max_level(&self) -> u8 {
        self.max_level
    }
    /// Ticks without a denial that restore level 0.
    pub const fn good_period(&self) -> u64 {
        self.good_period
    }
}

/// A limiter that tightens a client's effective limit after repeated
/// denials and restores it after a good period.
///
/// At level `p` a request of `cost` cells is charged `cost · 2^p` (capped
/// at the inner limit), so the client gets `1/2^p` of the limit and rate;
/// every `strikes` denials (not [`Denied::CostTooLarge`]) raise the level
/// by one up to `max_level`, and `good_period` ticks after the last denial
/// it returns to 0. `limit` and `remaining` are reported in the client's
/// units (divided by `2^p`). The policy in full, with its races, is in
/// docs/design/composition.md.
///
/// ```
/// use cellrate::compose::{Adaptive, Penalty};
/// use cellrate::{RateLimiter, window::FixedWindow};
/// // 8 per 1 000 ticks; 2 denials raise the level; forgiven after 5 000 ticks.
/// let client = Adaptive::new(FixedWindow::new(8, 1_000), Penalty::new(2, 3, 5_000));
/// for _ in 0..8 { client.check(0).unwrap(); }
/// assert!(client.check(1).is_err() && client.check(2).is_err()); // level 1 now
/// assert_eq!(client.level(), 1);
/// assert_eq!(client.check(1_000).unwrap().remaining(), 3); // charged 2 of 8: 6 left = 3 at level 1
/// assert_eq!(client.check(7_000).unwrap().limit(), 8); // 5 000 ticks after the last denial: restored
/// ```
pub struct Adaptive<L> {
    inner: L,
    penalty: Penalty,
    /// `level << 32 | strikes`.
    status: StateWord,
    last_denial: StateWord,
}

impl<L> Adaptive<L> {
    loom_const_fn! {
        /// Wraps `inner` with `penalty`, at level 0.
        pub fn new(inner: L, penalty: Penalty) -> Self {
            Adaptive { inner, penalty, status: StateWord::new(0), last_denial: StateWord::new(0) }
        }
    }

    /// The wrapped limiter.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The current penalty level (0: none).
    pub fn level(&self) -> u8 {
        (self.status.load() >> 32) as u8
    }

    /// The policy.
    pub fn penalty(&self) -> Penalty {
        self.penalty
    }

    /// Forgives the client: level 0, no strikes.
    pub fn forgive(&self) {
        self.status.store(0)
    }

    /// The level at `now`, after restoring it if the good period has passed.
    fn level_at(&self, now: u64) -> u32 {
        let status = self.status.load();
        if status == 0 {
            return 0;
        }
        if self.restored(now) {
            // Restore, unless another check changed the status meanwhile.
            return match self.status.compare_exchange(status, 0) {
                Ok(_) => 0,
                Err(seen) => (seen >> 32) as u32,
            };
        }
        (status >> 32) as u32
    }

    /// Whether `good_period` ticks have passed since the last denial at
    /// `now`: `now − last_denial` (wrapping) read as a signed number is at
    /// least the good period, so any clock works (Unix time, a counter that
    /// wraps). A denial more than 2⁶³ ticks back reads as recent.
    fn restored(&self, now: u64) -> bool {
        let elapsed = now.wrapping_sub(self.last_denial.load());
        elapsed < 1 << 63 && elapsed >= self.penalty.good_period
    }

    fn strike(&self, now: u64) {
        self.last_denial.store(now);
        let penalty = self.penalty;
        let step = |s: u64| -> Result<(u64, ()), Infallible> {
            let level = (s >> 32) as u32;
            let strikes = (s as u32).saturating_add(1);
            let next = if strikes >= penalty.strikes {
                let level = (level + 1).min(penalty.max_level as u32);
                (level as u64) << 32
            } else {
                ((level as u64) << 32) | strikes as u64
            };
            Ok((next, ()))
        };
        let _ = self.status.update(step);
    }

    fn effective(limit: u64, level: u32) -> u64 {
        (limit >> level).max(1)
    }
}

impl<L: Revocable> Adaptive<L> {
    fn admit(&self, now: u64, cost: u64) -> Result<(Decision, L::Receipt), Denied> {
        let level = self.level_at(now);
        // cost · 2^p, saturating (an overflow is capped at the limit below).
        let charged = match cost.checked_shl(level) {
            Some(c) if c >> level == cost => c,
            _ => u64::MAX,
        };
        let result = match self.inner.admit_n(now, charged) {
            // Capped: the cost fits at level 0, so charge the whole limit.
            Err(Denied::CostTooLarge { limit, .. }) if cost <= limit && level > 0 => {
                self.inner.admit_n(now, limit)
            }
            Err(Denied::CostTooLarge { limit, .. }) => {
                return Err(Denied::CostTooLarge { cost, limit })
            }
            other => other,
        };
        match result {
            Ok((d, receipt)) => Ok((
                Decision::new(
                    Self::effective(d.limit(), level),
                    d.remaining() >> level,
                    d.reset_after(),
                ),
                receipt,
            )),
            Err(Denied::Limited(l)) => {
                self.strike(now);
                Err(Denied::Limited(Limited::with_remaining(
                    Self::effective(l.limit(), level),
                    l.remaining() >> level,
                    l.retry_after(),
                    l.reset_after(),
                )))
            }
            Err(e) => Err(e),
        }
    }
}

impl<L: Revocable> RateLimiter for Adaptive<L> {
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit(now, cost).map(|(d, _)| d)
    }
    fn peek(&self, now: u64) -> Snapshot {
        let s = self.inner.peek(now);
        let level = (self.status.load() >> 32) as u32;
        let level = if self.restored(now) { 0 } else { level };
        Snapshot::new(
            Self::effective(s.limit(), level),
            s.remaining() >> level,
            s.reset_after(),
            s.retry_after(),
        )
    }
}

impl<L: Revocable> Revocable for Adaptive<L> {
    type Receipt = L::Receipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied> {
        self.admit(now, cost)
    }
    fn revoke(&self, receipt: Self::Receipt) {
        self.inner.revoke(receipt)
    }
}

impl<L: fmt::Debug> fmt::Debug for Adaptive<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adaptive")
            .field("inner", &self.inner)
            .field("penalty", &self.penalty)
            .field("level", &self.level())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<L: defmt::Format> defmt::Format for Adaptive<L> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Adaptive {{ inner: {}, penalty: {}, level: {=u8} }}",
            self.inner,
            self.penalty,
            self.level()
        )
    }
}
