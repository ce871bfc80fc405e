//! In-process keyed tiers: a table per tier, all or nothing, with
//! per-client overrides and route groups that change at run time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cellrate::compose::Tiers;
use cellrate::keyed::{Entry, Hashed, KeyId, KeyedBox, LiveQuota, Overrides, Seed, Slot, WhenFull};
use cellrate::Quota;

pub(crate) use super::routes::Routes;
use super::{Backend, Check, Mode, TierInfo, Verdict, MAX_TIERS};
use crate::key::RequestKey;
use crate::BuildError;

/// What a keyed tier is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Client,
    ClientAndEndpoint,
}

/// A tier's per-client quotas that change at run time: at most `capacity`
/// clients at a time, each in a slot of its own. A slot's key word is `0`
/// (never used; every slot after it is unused too), `id + 1` (bound to
/// that client) or [`RETIRED`] (freed); only the reloader, one at a time,
/// writes it, a bound slot's quota before its key word.
///
/// A check that found its client's slot reads that client's quota, whatever
/// a reload does meanwhile: a freed slot is given to another client only
/// once every request that could have found it bound is answered. The
/// reloader says when that is with [`Epoch`]: a slot freed while the rules
/// of generation `g` were in force is given again once no rules of a
/// generation `≤ g` are read by any request.
pub(crate) struct LiveOverrides {
    slots: Box<[OverrideSlot]>,
}

/// The key word of a freed slot (no client's: an id has 62 bits).
const RETIRED: u64 = u64::MAX;

struct OverrideSlot {
    key: AtomicU64,
    quota: LiveQuota,
    /// The generation of the rules in force when the slot was freed
    /// (written and read by the reloader only).
    retired_at: AtomicU64,
}

/// Which rules a reload replaces, and the oldest that requests still read:
/// the generation of the rules in force (each reload makes the next one),
/// and the oldest generation some request may still be deciding by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Epoch {
    pub(crate) current: u64,
    pub(crate) oldest: u64,
}

// Reloads are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl LiveOverrides {
    fn new(capacity: usize, default: Quota) -> Self {
        LiveOverrides {
            slots: (0..capacity)
                .map(|_| OverrideSlot {
                    key: AtomicU64::new(0),
                    quota: LiveQuota::new(default),
                    retired_at: AtomicU64::new(0),
                })
                .collect(),
        }
    }
    /// How many clients can have an override at a time.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// The slots that are or were in use.
    fn used(&self) -> impl Iterator<Item = (usize, &OverrideSlot)> {
        self.slots
            .iter()
            .enumerate()
            .take_while(|(_, s)| s.key.load(Ordering::Acquire) != 0)
    }
    /// The slot of `id`, if it has one.
    #[inline]
    pub(crate) fn slot_of(&self, id: KeyId) -> Option<usize> {
        let word = id.get() + 1;
        self.used()
            .find(|(_, s)| s.key.load(Ordering::Acquire) == word)
            .map(|(i, _)| i)
    }
    /// The slot each of `ids` will hold once a reload with these overrides
    /// (and no others) is committed at `epoch`: its own if it has one, else
    /// a slot freed long enough ago (see [`LiveOverrides`]), else the first
    /// never used. `Err(i)`: `ids[i]` finds no slot.
    pub(crate) fn assign(&self, ids: &[KeyId], epoch: Epoch) -> Result<Vec<usize>, usize> {
        let mut free = self
            .used()
            .filter(|(_, s)| {
                s.key.load(Ordering::Acquire) == RETIRED
                    && s.retired_at.load(Ordering::Relaxed) < epoch.oldest
            })
            .map(|(i, _)| i)
            .chain(
                self.slots
                    .iter()
                    .enumerate()
                    .skip_while(|(_, s)| s.key.load(Ordering::Acquire) != 0)
                    .map(|(i, _)| i),
            );
        let mut taken = Vec::with_capacity(ids.len());
        for (n, &id) in ids.iter().enumerate() {
            match self.slot_of(id).or_else(|| free.next()) {
                Some(slot) => taken.push(slot),
                None => return Err(n),
            }
        }
        Ok(taken)
    }
    /// Commits one reload's overrides, `(slot, id, quota)` as
    /// [`assign`](Self::assign) placed them, quotas already at the tier's
    /// scale: each client's quota is written before its key word; a bound
    /// client not among them follows `default` and its slot is freed at
    /// `epoch`. Only the reloader (one at a time) calls this.
    fn apply(&self, overrides: &[(usize, KeyId, Quota)], default: Quota, epoch: Epoch) {
        for (_, slot) in self.used() {
            let word = slot.key.load(Ordering::Acquire);
            if word != RETIRED && !overrides.iter().any(|&(_, id, _)| id.get() + 1 == word) {
                let _ = slot.quota.set_quota(default);
                slot.retired_at.store(epoch.current, Ordering::Relaxed);
                slot.key.store(RETIRED, Ordering::Release);
            }
        }
        for &(i, id, q) in overrides {
            let Some(slot) = self.slots.get(i) else {
                continue; // placed by `assign`: unreachable
            };
            let _ = slot.quota.set_quota(q);
            slot.key.store(id.get() + 1, Ordering::Release);
        }
    }
    /// Each client bound to a slot, by [`KeyId::get`], with its quota.
    fn bound(&self) -> std::collections::HashMap<u64, Quota> {
        self.used()
            .filter_map(|(_, s)| match s.key.load(Ordering::Acquire) {
                RETIRED => None,
                word => Some((word - 1, s.quota.quota())),
            })
            .collect()
    }
    /// What each slot gives its client in tier `name` (`None`: free).
    fn infos(&self, name: &str) -> Vec<Option<TierInfo>> {
        self.slots
            .iter()
            .map(|s| match s.key.load(Ordering::Acquire) {
                0 | RETIRED => None,
                _ => Some(TierInfo::from_quota(name, &s.quota.quota())),
            })
            .collect()
    }
}

impl Overrides<LiveQuota> for LiveOverrides {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&LiveQuota> {
        let word = id.get() + 1;
        for slot in self.slots.iter() {
            match slot.key.load(Ordering::Acquire) {
                0 => return None,
                w if w == word => return Some(&slot.quota),
                _ => {} // another client's, or freed
            }
        }
        None
    }
}

/// One keyed tier: its table lives as long as some rules in force name it
/// (a reload that keeps the tier keeps the table, and every client's state
/// in it).
pub(crate) struct KeyedTier {
    pub(crate) name: String,
    pub(crate) table: KeyedBox<LiveQuota, LiveOverrides>,
    pub(crate) scope: Scope,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl KeyedTier {
    pub(crate) fn new(
        name: &str,
        quota: Quota,
        capacity: usize,
        max_overrides: usize,
        scope: Scope,
        when_full: WhenFull,
    ) -> Self {
        KeyedTier {
            name: name.to_string(),
            table: KeyedBox::with_capacity_and_overrides(
                capacity,
                LiveQuota::new(quota),
                LiveOverrides::new(max_overrides, quota),
                when_full,
                Seed::random(),
            ),
            scope,
        }
    }
    /// The quota in force.
    pub(crate) fn quota(&self) -> Quota {
        self.table.algorithm().quota()
    }
    /// What each override slot gives its client.
    pub(crate) fn override_infos(&self) -> Vec<Option<TierInfo>> {
        self.table.overrides().infos(&self.name)
    }
    /// Sets the default quota and the overrides (both already re-expressed
    /// at the table's scale, checked and placed in their slots), at `epoch`.
    /// They are only published: [`translate_states`](Self::translate_states)
    /// then re-expresses each client's state.
    pub(crate) fn apply(&self, default: Quota, overrides: &[(usize, KeyId, Quota)], epoch: Epoch) {
        let _ = self.table.algorithm().set_quota(default);
        self.table.overrides().apply(overrides, default, epoch);
    }
    /// The quota each client follows: the default, and each override's.
    pub(crate) fn quotas(&self) -> TierQuotas {
        TierQuotas {
            default: self.quota(),
            overrides: self.table.overrides().bound(),
        }
    }
    /// After [`apply`](Self::apply) changed the quotas from `before`, at
    /// `now`: every client whose quota changed keeps the cells it has
    /// used, at most its new burst
    /// ([`KeyedTable::translate_states`](cellrate::keyed::KeyedTable::translate_states)).
    /// Only the reloader (one at a time) calls this, so the table is never
    /// busy with another change.
    pub(crate) fn translate_states(&self, now: u64, before: &TierQuotas) {
        let _ = self.table.translate_states(now, before.default, |id| {
            before.overrides.get(&id.get()).copied()
        });
    }
}

/// The quotas of a tier's clients at one moment: its default, and each
/// override's by client ([`KeyId::get`]).
pub(crate) struct TierQuotas {
    default: Quota,
    overrides: std::collections::HashMap<u64, Quota>,
}

/// All-or-nothing in-process tiers, each a keyed GCRA table keyed by the
/// client or by (client, endpoint): a request is admitted only if every
/// tier admits it, and a request refused by one tier consumes from none
/// ([`compose::check_all`](cellrate::compose::check_all) over the request's
/// [`Entry`] in each table: charged in order, revoked on refusal; the tiers
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
    pub(crate) fn new(default: Quota, mut quotas: impl Iterator<Item = Quota>) -> Self {
        let burst = default.burst();
        let mut any = false;
        for q in quotas.by_ref() {
            any = true;
            if q.burst() == burst && q != default {
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
            if first.quota().hz() != quota.hz() {
                return Err(BuildError::MixedHz);
            }
        }
        crate::error::check_name(name)?;
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        self.tiers.push(Arc::new(KeyedTier::new(
            name,
            quota,
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
    fn entry<'t>(
        tier: &'t KeyedTier,
        key: &RequestKey<'_>,
    ) -> Entry<'t, LiveQuota, Box<[Slot]>, LiveOverrides> {
        match (tier.scope, key.scope()) {
            // Decided by the client's override, if it has one (overrides
            // name clients), in the (client, endpoint)'s own state.
            (Scope::ClientAndEndpoint, Some(scope)) => tier.table.entry_ruled(
                &(Hashed(key.client()), Hashed(scope)),
                &Hashed(key.client()),
            ),
            _ => tier.table.entry(&Hashed(key.client())),
        }
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
            let id = tier.table.key_id(&Hashed(key.client()));
            if let Some(slot) = tier.table.overrides().slot_of(id) {
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
                            t.table.capacity(),
                        ))
                    })
            })
            .collect();
    }
}

impl Backend for KeyedTiers {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        self.tiers
            .iter()
            .map(|t| TierInfo::from_quota(&t.name, &t.quota()))
            .collect()
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
                    t.table.capacity(),
                ))
            })
            .collect();
    }
}
