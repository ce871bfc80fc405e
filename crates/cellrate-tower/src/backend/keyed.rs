//! In-process keyed tiers: a table per tier, all or nothing, with
//! per-client overrides and route groups that change at run time.

use std::sync::Arc;

use cellrate::compose::Tiers;
use cellrate::keyed::{Hashed, KeyedBox, LiveQuota, Seed, WhenFull};
use cellrate::Quota;

pub use super::overrides::Epoch;
pub(crate) use super::overrides::LiveOverrides;
#[cfg(feature = "serde")]
pub(crate) use super::overrides::OverrideSlots;
pub(crate) use super::store::Store;
pub(crate) use super::tier::{TierEntry, TierTable};
pub(crate) use super::window::WindowQuota;
pub(crate) use super::Scope;

pub(crate) use super::routes::Routes;
use super::{Backend, Check, Mode, TierInfo, Verdict, MAX_TIERS};
use crate::key::RequestKey;
use crate::BuildError;

/// A tier's quota: a GCRA quota (GCRA, token bucket, leaky bucket) or a
/// window's, with the frequency of the clock it counts ticks of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TierQuota {
    Gcra(Quota),
    Window { quota: WindowQuota, hz: u64 },
}

impl TierQuota {
    /// What tier `name` announces under this quota.
    pub(crate) fn info(&self, name: &str) -> TierInfo {
        match self {
            TierQuota::Gcra(q) => TierInfo::from_quota(name, q),
            TierQuota::Window { quota, hz } => quota.info(name, *hz),
        }
    }
    pub(crate) fn hz(&self) -> u64 {
        match self {
            TierQuota::Gcra(q) => q.hz(),
            TierQuota::Window { hz, .. } => *hz,
        }
    }
    /// The cells a decision under this quota reports as its limit.
    pub(crate) fn limit(&self) -> u64 {
        match self {
            TierQuota::Gcra(q) => q.burst(),
            TierQuota::Window { quota, .. } => quota.limit(),
        }
    }
}

/// One keyed tier: its table lives as long as some rules in force name it
/// (a reload that keeps the tier keeps the table, and every client's state
/// in it).
pub(crate) struct KeyedTier {
    pub(crate) name: String,
    pub(crate) table: TierTable,
    pub(crate) scope: Scope,
    hz: u64,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl KeyedTier {
    pub(crate) fn new(
        name: &str,
        quota: TierQuota,
        capacity: usize,
        max_overrides: usize,
        scope: Scope,
        when_full: WhenFull,
    ) -> Self {
        let table = match quota {
            TierQuota::Gcra(quota) => TierTable::Gcra(KeyedBox::with_capacity_and_overrides(
                capacity,
                LiveQuota::new(quota),
                LiveOverrides::new(max_overrides, || LiveQuota::new(quota)),
                when_full,
                Seed::random(),
            )),
            TierQuota::Window { quota, .. } => {
                TierTable::Store(Store::new(quota, capacity, max_overrides, when_full))
            }
        };
        KeyedTier {
            name: name.to_string(),
            table,
            scope,
            hz: quota.hz(),
        }
    }
    /// The quota in force.
    pub(crate) fn quota(&self) -> TierQuota {
        match &self.table {
            TierTable::Gcra(t) => TierQuota::Gcra(t.algorithm().quota()),
            TierTable::Store(t) => TierQuota::Window {
                quota: t.quota(),
                hz: self.hz,
            },
        }
    }
    /// How many override slots the tier has.
    pub(crate) fn override_capacity(&self) -> usize {
        match &self.table {
            TierTable::Gcra(t) => t.overrides().capacity(),
            TierTable::Store(t) => t.slots().capacity(),
        }
    }
    /// What each override slot gives its client.
    pub(crate) fn override_infos(&self) -> Vec<Option<TierInfo>> {
        match &self.table {
            TierTable::Gcra(t) => t.overrides().infos(&self.name),
            TierTable::Store(t) => t.override_infos(&self.name, self.hz),
        }
    }
    /// Sets the default quota and the overrides `(slot, client id,
    /// quota)` (a GCRA tier's re-expressed at the table's scale; all
    /// checked and placed in their slots), at `epoch`. A GCRA tier's are
    /// only published: [`translate_states`](Self::translate_states) then
    /// re-expresses each client's state. A store tier's are published and
    /// every client's cell brought to them at `now` (each as it is next
    /// read, or by the walk; see `backend/store.rs`).
    pub(crate) fn apply(
        &self,
        default: TierQuota,
        overrides: &[(usize, u64, TierQuota)],
        epoch: Epoch,
        now: u64,
    ) {
        match (&self.table, default) {
            (TierTable::Gcra(t), TierQuota::Gcra(default)) => {
                let gcra: Vec<(usize, u64, Quota)> = overrides
                    .iter()
                    .filter_map(|&(i, id, q)| match q {
                        TierQuota::Gcra(q) => Some((i, id, q)),
                        TierQuota::Window { .. } => None,
                    })
                    .collect();
                let _ = t.algorithm().set_quota(default);
                t.overrides().apply(&gcra, default, epoch);
            }
            (TierTable::Store(t), TierQuota::Window { quota, .. }) => {
                let windows: Vec<(usize, u64, WindowQuota)> = overrides
                    .iter()
                    .filter_map(|&(i, id, q)| match q {
                        TierQuota::Window { quota, .. } => Some((i, id, quota)),
                        TierQuota::Gcra(_) => None,
                    })
                    .collect();
                t.apply(quota, &windows, epoch, now);
            }
            _ => {} // a plan keeps a table only for its own kind of quota
        }
    }
    /// The quota each client of a GCRA tier follows: the default, and each
    /// override's (`None` for a store tier, whose change translates as it
    /// publishes).
    pub(crate) fn quotas(&self) -> Option<TierQuotas> {
        self.table.gcra().map(|t| TierQuotas {
            default: t.algorithm().quota(),
            overrides: t.overrides().bound(),
        })
    }
    /// After [`apply`](Self::apply) changed a GCRA tier's quotas from
    /// `before`, at `now`: every client whose quota changed keeps the
    /// cells it has used, at most its new burst
    /// ([`KeyedTable::translate_states`](cellrate::keyed::KeyedTable::translate_states)).
    /// Only the reloader (one at a time) calls this, so the table is never
    /// busy with another change.
    pub(crate) fn translate_states(&self, now: u64, before: &TierQuotas) {
        if let Some(t) = self.table.gcra() {
            let _ = t.translate_states(now, before.default, |id| {
                before.overrides.get(&id.get()).copied()
            });
        }
    }
    #[cfg(feature = "metrics")]
    pub(crate) fn capacity(&self) -> usize {
        self.table.capacity()
    }
}

/// The quotas of a tier's clients at one moment: its default, and each
/// override's by client ([`KeyId::get`](cellrate::keyed::KeyId::get)).
pub(crate) struct TierQuotas {
    default: Quota,
    overrides: std::collections::HashMap<u64, Quota>,
}

/// All-or-nothing in-process tiers, each a keyed table keyed by the client
/// or by (client, endpoint): a GCRA table (built here, or from a
/// configuration's GCRA, token-bucket or leaky-bucket tier) or a store (a
/// configuration's fixed, sliding or bucketed window or sliding log tier). A
/// request is admitted only if every tier admits it, and a request refused
/// by one tier consumes from none
/// ([`compose::check_all`](cellrate::compose::check_all) over the request's
/// [`Entry`](cellrate::keyed::Entry) in each table: charged in order,
/// revoked on refusal; the tiers
/// after the refusing one are asked without being charged, so every tier
/// reports its own exact answer and `Retry-After` is the longest wait of
/// all).
///
/// Each table holds at most `capacity` live keys (bounded memory); a key
/// that finds no room is handled as [`WhenFull`] says.
///
/// ```
/// use cellrate_tower::KeyedTiers;
/// use cellrate::Quota;
/// let tiers = KeyedTiers::new()
///     .per_client("key", Quota::per_minute(10).at_hz(1_000), 10_000)
///     .unwrap()
///     .per_client_and_endpoint("endpoint", Quota::per_minute(3).at_hz(1_000), 10_000)
///     .unwrap();
/// # let _ = tiers;
/// ```
pub struct KeyedTiers {
    pub(crate) tiers: Vec<Arc<KeyedTier>>,
    pub(crate) when_full: WhenFull,
    /// Which tiers decide which route, when some tiers are limited to
    /// some routes (a configuration's `tiers[i].routes`).
    pub(crate) routes: Option<Routes>,
    /// How a verdict learns which tiers an override decided, per tier.
    pub(crate) probes: Vec<Probe>,
    /// Whether some tier has overrides (some probe is not `None`).
    pub(crate) overridden: bool,
    /// Each tier's table as metrics, once registered (a reload carries a
    /// kept tier's over).
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Vec<Arc<cellrate_metrics::KeyedMetrics>>,
}

/// How a check learns whether an override decided a tier, so that its
/// fields announce that override's quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// No client has an override: the tier's own quota decided.
    None,
    /// No override has the tier's burst (or each that has it is the tier's
    /// quota): a decision whose limit is this burst was the tier's own,
    /// any other is looked up.
    Unless(u64),
    /// Every decision is looked up.
    Always,
}

impl Probe {
    /// The probe of a tier of `default` quota whose overrides are `quotas`.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn new(default: TierQuota, mut quotas: impl Iterator<Item = TierQuota>) -> Self {
        let burst = default.limit();
        let mut any = false;
        for q in quotas.by_ref() {
            any = true;
            if q.limit() == burst && q != default {
                return Probe::Always;
            }
        }
        if any {
            Probe::Unless(burst)
        } else {
            Probe::None
        }
    }
}

impl Default for KeyedTiers {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyedTiers {
    /// No tiers yet; tables that are full deny new keys ([`WhenFull::Deny`]).
    pub fn new() -> Self {
        KeyedTiers {
            tiers: Vec::new(),
            when_full: WhenFull::Deny,
            routes: None,
            probes: Vec::new(),
            overridden: false,
            #[cfg(feature = "metrics")]
            metrics: Vec::new(),
        }
    }
    /// What a full table does with a new key (for the tiers added after).
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }
    fn add(
        mut self,
        name: &str,
        quota: Quota,
        capacity: usize,
        scope: Scope,
    ) -> Result<Self, BuildError> {
        if self.tiers.len() >= MAX_TIERS {
            return Err(BuildError::TooManyTiers);
        }
        if let Some(first) = self.tiers.first() {
            if first.hz != quota.hz() {
                return Err(BuildError::MixedHz);
            }
        }
        crate::error::check_name(name)?;
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        self.tiers.push(Arc::new(KeyedTier::new(
            name,
            TierQuota::Gcra(quota),
            capacity,
            0,
            scope,
            self.when_full,
        )));
        self.probes.push(Probe::None);
        Ok(self)
    }
    /// A tier keyed by the client.
    pub fn per_client(self, name: &str, quota: Quota, capacity: usize) -> Result<Self, BuildError> {
        self.add(name, quota, capacity, Scope::Client)
    }
    /// A tier keyed by (client, endpoint). A request whose extractor names
    /// no endpoint is keyed by the client alone in this tier.
    pub fn per_client_and_endpoint(
        self,
        name: &str,
        quota: Quota,
        capacity: usize,
    ) -> Result<Self, BuildError> {
        self.add(name, quota, capacity, Scope::ClientAndEndpoint)
    }

    /// `key`'s entry in `tier`'s table: the client, or (client, endpoint).
    #[inline]
    fn entry<'t>(tier: &'t KeyedTier, key: &RequestKey<'_>) -> TierEntry<'t> {
        let table = match &tier.table {
            TierTable::Gcra(table) => table,
            TierTable::Store(store) => return TierEntry::Store(store.entry(tier.scope, key)),
        };
        TierEntry::Gcra(match (tier.scope, key.scope()) {
            // Decided by the client's override, if it has one (overrides
            // name clients), in the (client, endpoint)'s own state.
            (Scope::ClientAndEndpoint, Some(scope)) => table.entry_ruled(
                &(Hashed(key.client()), Hashed(scope)),
                &Hashed(key.client()),
            ),
            _ => table.entry(&Hashed(key.client())),
        })
    }
    /// Every tier's result for `cost` cells of `key` at `now`, all or nothing.
    ///
    /// ```
    /// use cellrate_tower::{KeyedTiers, Part, RequestKey};
    /// use cellrate::Quota;
    /// let tiers = KeyedTiers::new()
    ///     .per_client("key", Quota::per_minute(10).at_hz(1_000), 64).unwrap()
    ///     .per_client_and_endpoint("endpoint", Quota::per_minute(1).at_hz(1_000), 64).unwrap();
    /// let key = RequestKey::new(Part::Str("alice"), Some(Part::Str("/orders")));
    /// assert!(tiers.decide(&key, 0, 1).is_admitted());
    /// let refused = tiers.decide(&key, 0, 1);
    /// assert_eq!(refused.tiers().results()[0].unwrap().remaining(), 9); // not charged
    /// ```
    pub fn decide(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Verdict {
        let members = self
            .routes
            .as_ref()
            .map(|routes| routes.groups[Self::record_route(routes, key)].as_slice());
        let tiers = match members {
            None => {
                let tiers = self.tiers.iter().map(|tier| Self::entry(tier, key));
                Tiers::check_all(tiers, now, cost)
            }
            Some(members) => {
                let tiers = members.iter().map(|&i| Self::entry(&self.tiers[i], key));
                Tiers::check_all(tiers, now, cost)
            }
        };
        let verdict = Verdict::decided(tiers, Mode::Normal);
        if self.overridden {
            self.mark_overrides(verdict, key, members)
        } else {
            verdict
        }
    }

    /// `verdict` with each tier that `key`'s override decided marked with
    /// its slot. A tier's [`Probe`] spares the lookup (a second hash of the
    /// key) when the decision's limit shows the tier's own quota decided.
    fn mark_overrides(
        &self,
        mut verdict: Verdict,
        key: &RequestKey<'_>,
        members: Option<&[usize]>,
    ) -> Verdict {
        let results = *verdict.tiers();
        for (position, result) in results.results().iter().enumerate() {
            let index = members.map_or(Some(position), |m| m.get(position).copied());
            let (Some(tier), Some(probe)) = (
                index.and_then(|i| self.tiers.get(i)),
                index.and_then(|i| self.probes.get(i)),
            ) else {
                continue;
            };
            let limit = match result {
                Ok(d) => d.limit(),
                Err(d) => d.limit(),
            };
            match *probe {
                Probe::None => continue,
                Probe::Unless(burst) if burst == limit => continue,
                _ => {}
            }
            let slot = match &tier.table {
                TierTable::Gcra(table) => {
                    let id = table.key_id(&Hashed(key.client()));
                    table.overrides().slot_of(id.get())
                }
                TierTable::Store(store) => store.slots().slot_of(store.client_id(&key.client())),
            };
            if let Some(slot) = slot {
                verdict = verdict.with_override(position, slot);
            }
        }
        verdict
    }

    /// The group of `key`'s route, recorded as matched (a route of some
    /// tier) or unrouted (named by none).
    fn record_route(routes: &Routes, key: &RequestKey<'_>) -> usize {
        let Some(route) = key.scope() else {
            return 0;
        };
        let mut buf = crate::KeyText::new();
        routes.group_of(route.as_str(&mut buf), true)
    }

    /// The group of `key`'s route (its endpoint).
    fn route_group(&self, routes: &Routes, key: &RequestKey<'_>) -> usize {
        let Some(route) = key.scope() else {
            return 0;
        };
        let mut buf = crate::KeyText::new();
        routes.group_of(route.as_str(&mut buf), false)
    }
}

#[cfg(all(feature = "metrics", feature = "serde"))]
impl KeyedTiers {
    /// This backend's series after a reload from `old`: a tier whose table
    /// was kept keeps its series, and what they have published (new ones
    /// would publish the table's totals again); a new tier's are
    /// registered under `limiter`.
    pub(crate) fn carry_metrics(&mut self, old: &KeyedTiers, limiter: &str) {
        self.metrics = self
            .tiers
            .iter()
            .map(|t| {
                old.tiers
                    .iter()
                    .zip(&old.metrics)
                    .find(|(o, _)| Arc::ptr_eq(o, t))
                    .map(|(_, m)| Arc::clone(m))
                    .unwrap_or_else(|| {
                        Arc::new(cellrate_metrics::KeyedMetrics::new(
                            limiter,
                            &t.name,
                            t.capacity(),
                        ))
                    })
            })
            .collect();
    }
}

impl Backend for KeyedTiers {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        self.tiers.iter().map(|t| t.quota().info(&t.name)).collect()
    }
    fn groups(&self) -> Vec<Vec<TierInfo>> {
        Routes::groups_of(self.routes.as_ref(), self.tiers())
    }
    fn override_slots(&self) -> Vec<Vec<Option<TierInfo>>> {
        self.tiers.iter().map(|t| t.override_infos()).collect()
    }
    fn group(&self, key: &RequestKey<'_>) -> usize {
        match &self.routes {
            None => 0,
            Some(routes) => self.route_group(routes, key),
        }
    }
    fn check(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future> {
        let verdict = self.decide(key, now, cost);
        #[cfg(feature = "metrics")]
        for (tier, metrics) in self.tiers.iter().zip(&self.metrics) {
            metrics.record(tier.table.stats());
        }
        Check::Ready(verdict)
    }
    #[cfg(feature = "metrics")]
    fn register_metrics(&mut self, limiter: &str) {
        self.metrics = self
            .tiers
            .iter()
            .map(|t| {
                Arc::new(cellrate_metrics::KeyedMetrics::new(
                    limiter,
                    &t.name,
                    t.capacity(),
                ))
            })
            .collect();
    }
}
