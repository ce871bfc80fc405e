//! The single-owner GCRA: the same steps on a plain state word.

use core::cell::Cell;
use core::fmt;

#[cfg(doc)]
use super::Gcra;
use super::{reserve, snapshot, Reservation, SetQuotaError};
use crate::decision::{Decision, Denied, Snapshot};
use crate::quota::Quota;
use crate::{Algorithm, RateLimiter};

/// The same GCRA for a single owner: `&mut self`, no atomics, no critical
/// section. It also implements [`RateLimiter`] through `&self` (the state sits
/// in a [`Cell`], so it is `Send` but not `Sync`).
///
/// ```
/// use cellrate::{LocalGcra, Quota};
/// let mut flow = LocalGcra::new(Quota::per_second(1_000_000).at_hz(1_000_000_000));
/// assert!(flow.check_n(0, 1_000_000).is_ok());
/// assert!(flow.check_n(0, 1).is_err());
/// ```
#[derive(Clone)]
pub struct LocalGcra {
    tat: Cell<u64>,
    quota: Quota,
}

impl LocalGcra {
    /// A full limiter for `quota`.
    pub const fn new(quota: Quota) -> Self {
        LocalGcra {
            tat: Cell::new(0),
            quota,
        }
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Admits one cell at `now`.
    #[inline]
    pub fn check(&mut self, now: u64) -> Result<Decision, Denied> {
        self.check_n(now, 1)
    }

    /// Admits `cost` cells at `now`; see [`Gcra::check_n`].
    #[inline]
    pub fn check_n(&mut self, now: u64, cost: u64) -> Result<Decision, Denied> {
        // Through `&mut` the state needs no `Cell`: the compiler may keep
        // it in a register across a caller's loop.
        let LocalGcra { tat, quota, .. } = self;
        admit_local(quota, tat.get_mut(), now, cost)
    }

    /// The state at `now`.
    pub fn peek(&self, now: u64) -> Snapshot {
        snapshot(&self.quota, self.tat.get(), self.quota.now_word(now))
    }

    /// Shaping; see [`Gcra::reserve_n`].
    pub fn reserve_n(&mut self, now: u64, cost: u64, max_wait: u64) -> Result<Reservation, Denied> {
        let quota = &self.quota;
        let max_wait = max_wait.saturating_mul(quota.scale());
        let (tat, reservation) =
            reserve(quota, self.tat.get(), quota.now_word(now), cost, max_wait)?;
        self.tat.set(tat);
        Ok(reservation)
    }

    /// Gives back `cost` cells; see [`Gcra::refund_n`].
    pub fn refund_n(&mut self, now: u64, cost: u64) -> Snapshot {
        let quota = &self.quota;
        let tat = quota.refund(self.tat.get(), quota.mark_at(now), cost);
        self.tat.set(tat);
        quota.peek(tat, now)
    }

    /// Makes the limiter full.
    pub fn reset(&mut self) {
        self.tat.set(0)
    }

    /// Replaces the quota at `now`. Every quota that builds at this
    /// limiter's clock frequency is taken as it is, at its own scale (one
    /// built for another frequency is re-expressed at this one first); the
    /// debt is kept as cells used ([`Algorithm::translate`]), at most the
    /// new burst. Returns the quota in force; never
    /// [`Busy`](SetQuotaError::Busy) here.
    ///
    /// ```
    /// use cellrate::{LocalGcra, Quota};
    /// let mut g = LocalGcra::new(Quota::per_minute(100).at_hz(1_000));
    /// g.check_n(0, 10).unwrap(); // 90 of 100 left
    /// g.set_quota(0, Quota::per_second(100).at_hz(1_000)).unwrap();
    /// assert_eq!(g.check(0).unwrap().remaining(), 89); // the 10 used stay used
    /// ```
    pub fn set_quota(&mut self, now: u64, quota: Quota) -> Result<Quota, SetQuotaError> {
        let quota = quota
            .at_clock(self.quota.hz())
            .map_err(SetQuotaError::Quota)?;
        let tat = self.quota.translate(self.tat.get(), now, &quota);
        self.tat.set(tat);
        self.quota = quota;
        Ok(quota)
    }
}

/// The single-owner container: `quota`'s phases on a plain state word.
#[inline(always)]
fn admit_local(quota: &Quota, tat: &mut u64, now: u64, cost: u64) -> Result<Decision, Denied> {
    let (next, decision) = quota.check(*tat, now, cost)?;
    *tat = next;
    Ok(decision)
}

impl RateLimiter for LocalGcra {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        let mut tat = self.tat.get();
        let decision = admit_local(&self.quota, &mut tat, now, cost)?;
        self.tat.set(tat);
        Ok(decision)
    }
    fn peek(&self, now: u64) -> Snapshot {
        LocalGcra::peek(self, now)
    }
}

impl fmt::Debug for LocalGcra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalGcra")
            .field("state", &self.tat.get())
            .field("quota", &self.quota)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for LocalGcra {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "LocalGcra {{ state: {=u64}, quota: {} }}",
            self.tat.get(),
            self.quota
        )
    }
}
