//! [`LiveQuota`]: a table's quota (or one key's override) that changes at
//! run time.

use crate::algorithm::Algorithm;
use crate::gcra::SetQuotaError;
use crate::sync::QuotaCell;
use crate::{Decision, Denied, Quota, Snapshot};

/// A [`Quota`] that [`set_quota`](Self::set_quota) replaces while checks
/// read it: the algorithm of a keyed table (or of an override) whose
/// limits change at run time. A new quota is re-expressed at the scale and
/// frequency the `LiveQuota` was made with (rounding `T` up); every client
/// keeps its TAT, so its debt is kept **as time** (unlike
/// [`Gcra::set_quota`](crate::Gcra::set_quota), which keeps the cells used:
/// a table cannot reach every client's state at the change). Each check
/// reads the quota once, whole, and decides entirely by the old or entirely
/// by the new one. The set of overridden keys is fixed when the table is
/// made.
///
/// ```
/// use cellrate::keyed::{Keyed, KeyId, LiveQuota, Seed, WhenFull};
/// use cellrate::Quota;
/// let hz = 1_000;
/// let t: Keyed<LiveQuota, 16, [(KeyId, LiveQuota); 1]> = Keyed::with_overrides(
///     LiveQuota::new(Quota::per_minute(100).at_hz(hz)),
///     [(KeyId::exact(123, 32), LiveQuota::new(Quota::per_minute(100).at_hz(hz)))],
///     WhenFull::Deny,
///     Seed::new(1, 2),
/// );
/// assert!(t.check_n(&123u32, 0, 100).is_ok());
/// assert!(t.check(&123u32, 0).is_err()); // 100/min used up
/// // acct 123 goes to 500/min: its debt (60 s) is kept, as time, so 12 s
/// // later it has the 100 cells 12 s earn at 500/min (20 at 100/min).
/// t.overrides()[0].1.set_quota(Quota::per_minute(500).at_hz(hz)).unwrap();
/// assert_eq!(t.check_n(&123u32, 12_000, 100).unwrap().remaining(), 0);
/// assert!(t.check(&123u32, 12_000).is_err());
/// assert_eq!(t.check(&9u32, 0).unwrap().limit(), 100); // the others are unchanged
/// ```
pub struct LiveQuota {
    cell: QuotaCell,
}

impl LiveQuota {
    crate::sync::loom_const_fn! {
        /// `quota`, whose scale and frequency every later quota is
        /// re-expressed at.
        pub fn new(quota: Quota) -> Self {
            LiveQuota { cell: QuotaCell::new(quota) }
        }
    }

    /// The quota in force.
    ///
    /// ```
    /// use cellrate::keyed::LiveQuota;
    /// use cellrate::Quota;
    /// let q = Quota::per_second(5).at_hz(1_000);
    /// assert_eq!(LiveQuota::new(q).quota(), q);
    /// ```
    pub fn quota(&self) -> Quota {
        self.cell.load()
    }

    /// Replaces the quota: the next checks use `quota`, re-expressed at
    /// this one's scale and frequency (returned); every client keeps its
    /// TAT. [`SetQuotaError::Busy`] if another `set_quota` is in progress.
    ///
    /// ```
    /// use cellrate::keyed::LiveQuota;
    /// use cellrate::Quota;
    /// let live = LiveQuota::new(Quota::per_second(5).at_hz(1_000));
    /// let set = live.set_quota(Quota::per_second(10).with_burst(2).at_hz(1_000)).unwrap();
    /// assert_eq!(live.quota(), set);
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<Quota, SetQuotaError> {
        let fixed = self.cell.fixed();
        let quota = quota
            .rescaled(fixed.scale(), fixed.hz())
            .map_err(SetQuotaError::Quota)?;
        if self.cell.try_store(&quota) {
            Ok(quota)
        } else {
            Err(SetQuotaError::Busy)
        }
    }
}

impl core::fmt::Debug for LiveQuota {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("LiveQuota").field(&self.quota()).finish()
    }
}

impl Algorithm for LiveQuota {
    const NEW: u64 = <Quota as Algorithm>::NEW;
    /// The quota read once for this check, and its preparation.
    type Prepared = (Quota, <Quota as Algorithm>::Prepared);
    type Shortfall = <Quota as Algorithm>::Shortfall;

    #[inline]
    fn prepare(&self, now: u64, cost: u64) -> Result<Self::Prepared, Denied> {
        let quota = self.cell.load();
        let prepared = quota.prepare(now, cost)?;
        Ok((quota, prepared))
    }
    #[inline]
    fn step(
        &self,
        state: u64,
        prepared: &Self::Prepared,
    ) -> Result<(u64, Decision), Self::Shortfall> {
        prepared.0.step(state, &prepared.1)
    }
    fn denial(&self, prepared: &Self::Prepared, shortfall: Self::Shortfall) -> Denied {
        prepared.0.denial(&prepared.1, shortfall)
    }
    fn peek(&self, state: u64, now: u64) -> Snapshot {
        self.cell.load().peek(state, now)
    }
    fn is_idle(&self, state: u64, now: u64) -> bool {
        self.cell.load().is_idle(state, now)
    }
    fn mark(&self, stored: u64, now: u64) -> u64 {
        self.cell.load().mark(stored, now)
    }
    fn mark_at(&self, now: u64) -> u64 {
        self.cell.load().mark_at(now)
    }
    fn refund(&self, state: u64, mark: u64, cost: u64) -> u64 {
        self.cell.load().refund(state, mark, cost)
    }
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        self.cell.load().translate(state, now, &new.cell.load())
    }
}

impl<A, S, O> super::KeyedTable<A, S, O> {
    /// The per-key overrides, e.g. to change one client's [`LiveQuota`].
    pub fn overrides(&self) -> &O {
        &self.overrides
    }
}
