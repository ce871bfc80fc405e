//! [`LiveQuota`]: a table's quota (or one key's override) that changes at
//! run time, and the table's reconfiguration that keeps what each client
//! has used (see [`LiveQuota`] for the contract, docs/design/reconfigure.md
//! for the proof).

use super::key::KeyId;
use super::policy::Overrides;
use super::slot::{key_of, state_of, LIVE, TAG_MASK};
use super::storage::Storage;
use super::KeyedTable;
use crate::algorithm::Algorithm;
use crate::gcra::SetQuotaError;
use crate::sync::QuotaCell;
use crate::{Decision, Denied, Quota, Snapshot};

/// A [`Quota`] that [`set_quota`](Self::set_quota) replaces while checks
/// read it: the algorithm of a keyed table (or of an override) whose
/// limits change at run time. A new quota is re-expressed at the scale and
/// frequency the `LiveQuota` was made with (rounding `T` up; refused past
/// 1 %): to take quotas of fractional intervals exactly, make it at a
/// scale that expresses them all ([`Quota::rescaled`], as for
/// [`Gcra::set_quota`](crate::Gcra::set_quota)). Each check
/// reads the quota once, whole, and decides entirely by the old or
/// entirely by the new one. The set of overridden keys is fixed when the
/// table is made.
///
/// # Changing quotas
///
/// Change a table's quotas through the table
/// ([`KeyedTable::set_quota`], [`KeyedTable::set_override_quota`]): each
/// publishes the new quota, then walks the slots and re-expresses the
/// state of every client whose quota changed, one compare-and-swap loop
/// per slot ([`Algorithm::translate`]: the cells used kept, at most the
/// new burst). Run alone, the change is exact: at its instant a raise never
/// refuses what the old quota admitted and a lower never admits what it
/// refused. [`LiveQuota::set_quota`] alone only publishes: every client
/// keeps its TAT, its debt **as time**, until
/// [`KeyedTable::translate_states`] re-expresses it.
///
/// Checks never wait for a change. A check that overlaps one is decided by
/// the old quota (at most one operation per thread: one that read the
/// quota before the publication) or by the new quota on a state the walk
/// has not reached yet, which the walk then re-expresses with the rest of
/// the debt: until the walk passes a client's slot, its debt reads as time
/// (docs/design/reconfigure.md, with its loom model).
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
/// // acct 123 goes to 500/min (burst 500): its 100 cells stay used, so it
/// // may take 400 more at once.
/// t.set_override_quota(0, KeyId::exact(123, 32), Quota::per_minute(500).at_hz(hz)).unwrap();
/// assert_eq!(t.check_n(&123u32, 0, 400).unwrap().remaining(), 0);
/// assert!(t.check(&123u32, 0).is_err());
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

    /// Publishes a new quota: the next checks use `quota`, re-expressed at
    /// this one's scale and frequency (returned). It reaches no client's
    /// state: each keeps its TAT (its debt as time) until
    /// [`KeyedTable::translate_states`] re-expresses it; a table's
    /// [`set_quota`](KeyedTable::set_quota) does both.
    /// [`SetQuotaError::Busy`] if another change is in progress.
    ///
    /// ```
    /// use cellrate::keyed::LiveQuota;
    /// use cellrate::Quota;
    /// let live = LiveQuota::new(Quota::per_second(5).at_hz(1_000));
    /// let set = live.set_quota(Quota::per_second(10).with_burst(2).at_hz(1_000)).unwrap();
    /// assert_eq!(live.quota(), set);
    /// ```
    pub fn set_quota(&self, quota: Quota) -> Result<Quota, SetQuotaError> {
        let quota = self.rescaled(quota)?;
        if self.cell.try_store(&quota) {
            Ok(quota)
        } else {
            Err(SetQuotaError::Busy)
        }
    }

    /// `quota` at this one's scale and frequency.
    fn rescaled(&self, quota: Quota) -> Result<Quota, SetQuotaError> {
        let fixed = self.cell.fixed();
        quota
            .rescaled(fixed.scale(), fixed.hz())
            .map_err(SetQuotaError::Quota)
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

impl<A, S, O> KeyedTable<A, S, O> {
    /// The per-key overrides.
    pub fn overrides(&self) -> &O {
        &self.overrides
    }
}

impl<S: Storage, O: Overrides<LiveQuota>> KeyedTable<LiveQuota, S, O> {
    /// Replaces the default quota at `now`: every client that follows it
    /// keeps the cells it has used, at most the new burst (see
    /// [changing quotas](LiveQuota#changing-quotas) for checks that overlap
    /// the change). Returns
    /// the quota in force, re-expressed at the table's scale.
    /// [`SetQuotaError::Busy`] if another change of this table is in
    /// progress. The walk reads each slot once: `O(capacity)`.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, LiveQuota, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<LiveQuota, 16> =
    ///     Keyed::new(LiveQuota::new(Quota::per_minute(10).at_hz(1_000)), WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&1u32, 0, 4).unwrap();
    /// // 10/min to 100/min (burst 100): the 4 cells used stay used.
    /// t.set_quota(0, Quota::per_minute(100).at_hz(1_000)).unwrap();
    /// assert_eq!(t.peek(&1u32, 0).remaining(), 96);
    /// // A lower to burst 3 leaves nothing: 4 cells are used.
    /// t.set_quota(0, Quota::per_minute(3).at_hz(1_000)).unwrap();
    /// assert!(t.check(&1u32, 0).is_err());
    /// ```
    pub fn set_quota(&self, now: u64, quota: Quota) -> Result<Quota, SetQuotaError> {
        let quota = self.algorithm.rescaled(quota)?;
        let cell = &self.algorithm.cell;
        cell.try_hold(|| {
            let old = cell.store_held(&quota);
            self.translate_held(now, old, |id| self.overrides.get(id).map(LiveQuota::quota));
        })
        .ok_or(SetQuotaError::Busy)?;
        Ok(quota)
    }

    /// Replaces the quota of the override of `id` at `now`, as
    /// [`set_quota`](Self::set_quota) does the default:
    /// [`SetQuotaError::NoOverride`] if `id` has none.
    ///
    /// ```
    /// use cellrate::keyed::{KeyId, Keyed, LiveQuota, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let q = Quota::per_second(2).at_hz(1_000);
    /// let vip = KeyId::exact(7, 32);
    /// let t: Keyed<LiveQuota, 16, [(KeyId, LiveQuota); 1]> =
    ///     Keyed::with_overrides(LiveQuota::new(q), [(vip, LiveQuota::new(q))], WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&7u32, 0, 2).unwrap();
    /// t.set_override_quota(0, vip, Quota::per_second(5).at_hz(1_000)).unwrap();
    /// assert_eq!(t.peek(&7u32, 0).remaining(), 3);
    /// assert!(t.set_override_quota(0, KeyId::exact(8, 32), q).is_err());
    /// ```
    pub fn set_override_quota(
        &self,
        now: u64,
        id: KeyId,
        quota: Quota,
    ) -> Result<Quota, SetQuotaError> {
        let live = self.overrides.get(id).ok_or(SetQuotaError::NoOverride)?;
        let quota = live.rescaled(quota)?;
        // The default's cell is the table's lock for a walk.
        self.algorithm
            .cell
            .try_hold(|| {
                live.cell.try_hold(|| {
                    let old = live.cell.store_held(&quota);
                    let before = |key: KeyId| match key == id {
                        true => Some(old),
                        false => self.overrides.get(key).map(LiveQuota::quota),
                    };
                    self.translate_held(now, self.algorithm.quota(), before);
                })
            })
            .flatten()
            .ok_or(SetQuotaError::Busy)?;
        Ok(quota)
    }

    /// Re-expresses at `now` the state of every client whose quota
    /// changed, from the quota it was under (`override_before(id)` if it
    /// had an override then, else `default_before`) to the one it is under
    /// now, keeping the cells it has used: the walk of
    /// [`set_quota`](Self::set_quota), for a change made of several
    /// [`LiveQuota::set_quota`] publications and changes of which keys
    /// have overrides (a reload). The shared overflow of
    /// [`WhenFull::Shared`](super::WhenFull::Shared) follows the default.
    /// [`SetQuotaError::Busy`] if another change of this table is in
    /// progress.
    ///
    /// ```
    /// use cellrate::keyed::{KeyId, Keyed, LiveQuota, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let (old, new) = (Quota::per_second(2).at_hz(1_000), Quota::per_second(8).at_hz(1_000));
    /// let t: Keyed<LiveQuota, 16> = Keyed::new(LiveQuota::new(old), WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&1u32, 0, 2).unwrap();
    /// t.algorithm().set_quota(new).unwrap(); // published: the debt (1 s) reads as time
    /// assert_eq!(t.peek(&1u32, 0).remaining(), 0);
    /// t.translate_states(0, old, |_| None).unwrap(); // the 2 cells used, of 8
    /// assert_eq!(t.peek(&1u32, 0).remaining(), 6);
    /// ```
    pub fn translate_states(
        &self,
        now: u64,
        default_before: Quota,
        override_before: impl Fn(KeyId) -> Option<Quota>,
    ) -> Result<(), SetQuotaError> {
        self.algorithm
            .cell
            .try_hold(|| self.translate_held(now, default_before, override_before))
            .ok_or(SetQuotaError::Busy)
    }

    /// The walk: one compare-and-swap loop per live slot whose key's quota
    /// differs from the one it was under. Only with the table's lock held.
    fn translate_held(
        &self,
        now: u64,
        default_before: Quota,
        override_before: impl Fn(KeyId) -> Option<Quota>,
    ) {
        for slot in self.slots.slots() {
            let value = slot.load();
            let key = key_of(value);
            if key & TAG_MASK != LIVE {
                continue; // free, or a claim: charged by the quota its check read
            }
            let id = KeyId(key & !TAG_MASK);
            let old = override_before(id).unwrap_or(default_before);
            let new = self.algorithm_for(id).quota();
            if old == new || old.is_idle(state_of(value), now) {
                continue;
            }
            // `None`: evicted while idle meanwhile, nothing to keep.
            let _ = slot.update(key, value, |state| {
                Ok::<_, core::convert::Infallible>((old.translate(state, now, &new), ()))
            });
        }
        let new = self.algorithm.quota();
        if default_before != new {
            let _ = self.overflow.update(|state| {
                let next = default_before.translate(state, now, &new);
                Ok::<_, core::convert::Infallible>((next, ()))
            });
        }
    }
}
