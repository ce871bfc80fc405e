//! In-process keyed tiers: a table per tier, all or nothing, with
//! per-client overrides and route groups that change at run time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cellrate::compose::Tiers;
use cellrate::keyed::{Entry, Hashed, KeyId, KeyedBox, LiveQuota, Overrides, Seed, Slot, WhenFull};
use cellrate::Quota;

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
/// clients, each bound to one slot for the tier's life (a slot is never
/// given to another client, so a check that found its client's slot reads
/// that client's quota, whatever a reload does meanwhile). A slot's key
/// word is `0` (free; every slot after it is free too) or `id + 1`; it is
/// written once, after its quota, by the one reloader at a time.
pub(crate) struct LiveOverrides {
    slots: Box<[OverrideSlot]>,
}

struct OverrideSlot {
    key: AtomicU64,
    quota: LiveQuota,
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
                })
                .collect(),
        }
    }
    /// How many clients can ever have an override.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// The bound clients.
    fn bound(&self) -> impl Iterator<Item = &OverrideSlot> {
        self.slots
            .iter()
            .take_while(|s| s.key.load(Ordering::Acquire) != 0)
    }
    /// Whether `id` has a slot.
    pub(crate) fn is_bound(&self, id: KeyId) -> bool {
        let word = id.get() + 1;
        self.bound().any(|s| s.key.load(Ordering::Acquire) == word)
    }
    /// How many clients have a slot.
    pub(crate) fn bound_count(&self) -> usize {
        self.bound().count()
    }
    /// Sets the quotas of one reload, already re-expressed at the tier's
    /// scale (checked first: a slot for every id): `overrides` are
    /// bound (a new client takes the first free slot, its quota written
    /// before its key word), and every other bound client follows
    /// `default`. Only the reloader (one at a time) calls this.
    fn apply(&self, overrides: &[(KeyId, Quota)], default: Quota) {
        for slot in self.bound() {
            let word = slot.key.load(Ordering::Acquire);
            match overrides.iter().find(|(id, _)| id.get() + 1 == word) {
                Some(&(_, q)) => {
                    let _ = slot.quota.set_quota(q);
                }
                None => {
                    let _ = slot.quota.set_quota(default);
                }
            }
        }
        for &(id, q) in overrides {
            let word = id.get() + 1;
            if self.bound().any(|s| s.key.load(Ordering::Acquire) == word) {
                continue;
            }
            let Some(free) = self
                .slots
                .iter()
                .find(|s| s.key.load(Ordering::Acquire) == 0)
            else {
                continue; // the slots were counted first: unreachable
            };
            let _ = free.quota.set_quota(q);
            free.key.store(word, Ordering::Release);
        }
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
                _ => {}
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
    /// Sets the default quota and the overrides (both already re-expressed
    /// at the table's scale and checked).
    pub(crate) fn apply(&self, default: Quota, overrides: &[(KeyId, Quota)]) {
        let _ = self.table.algorithm().set_quota(default);
        self.table.overrides().apply(overrides, default);
    }
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
    /// Each tier's table as metrics, once registered (a reload carries a
    /// kept tier's over).
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Vec<Arc<cellrate_metrics::KeyedMetrics>>,
}

/// The tiers of each route: group 0 (the tiers limited to no route) for a
/// route no tier names, else the group of the route's tiers, each in the
/// tiers' order. Routes are the request's endpoint (`key.endpoint =
/// "route"`: the matched route).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Routes {
    /// Tier indices per group; group 0 is the tiers limited to no route.
    pub(crate) groups: Vec<Vec<usize>>,
    pub(crate) by_route: std::collections::HashMap<String, usize>,
}

// Routes are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl Routes {
    /// The groups of tiers whose route lists are `routes` (`None`: every
    /// route), and the group of each route named.
    pub(crate) fn new(routes: &[Option<&[String]>]) -> Self {
        let default: Vec<usize> = (0..routes.len()).filter(|&i| routes[i].is_none()).collect();
        let mut groups = std::vec![default.clone()];
        let mut by_route = std::collections::HashMap::new();
        let named: std::collections::BTreeSet<&String> =
            routes.iter().flatten().flat_map(|r| r.iter()).collect();
        for route in named {
            let members: Vec<usize> = (0..routes.len())
                .filter(|&i| routes[i].is_none_or(|r| r.contains(route)))
                .collect();
            let g = match groups.iter().position(|m| *m == members) {
                Some(g) => g,
                None => {
                    groups.push(members);
                    groups.len() - 1
                }
            };
            by_route.insert(route.clone(), g);
        }
        Routes { groups, by_route }
    }

    /// The groups of `all` (every tier, in order) that `routes` makes: one,
    /// `all`, without routes.
    pub(crate) fn groups_of(routes: Option<&Routes>, all: Vec<TierInfo>) -> Vec<Vec<TierInfo>> {
        match routes {
            None => std::vec![all],
            Some(r) => r
                .groups
                .iter()
                .map(|m| m.iter().map(|&i| all[i].clone()).collect())
                .collect(),
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
            (Scope::ClientAndEndpoint, Some(scope)) => {
                tier.table.entry(&(Hashed(key.client()), Hashed(scope)))
            }
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
        let tiers = match &self.routes {
            None => {
                let tiers = self.tiers.iter().map(|tier| Self::entry(tier, key));
                Tiers::check_all(tiers, now, cost)
            }
            Some(routes) => {
                let members = &routes.groups[self.route_group(routes, key)];
                let tiers = members.iter().map(|&i| Self::entry(&self.tiers[i], key));
                Tiers::check_all(tiers, now, cost)
            }
        };
        Verdict::decided(tiers, Mode::Normal)
    }

    /// The group of `key`'s route (its endpoint).
    fn route_group(&self, routes: &Routes, key: &RequestKey<'_>) -> usize {
        let Some(route) = key.scope() else {
            return 0;
        };
        let mut buf = crate::KeyText::new();
        routes
            .by_route
            .get(route.as_str(&mut buf))
            .copied()
            .unwrap_or(0)
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
