//! What decides: in-process keyed tiers, one shared limiter, or Redis.

use std::boxed::Box;
use std::future::Future;
use std::string::{String, ToString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use cellrate::compose::check_all;
use cellrate::headers::Policy;
use cellrate::keyed::{Entry, Hashed, KeyId, KeyedBox, LiveQuota, Overrides, Seed, Slot, WhenFull};
use cellrate::{Decision, Denied, Quota, RateLimiter};

#[cfg(feature = "redis")]
use super::key::Part;
use super::key::RequestKey;
use super::ConfigError;

/// The most tiers a backend may have (the Redis policy's limit too).
pub const MAX_TIERS: usize = 8;

/// How a verdict was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// By the backend's own policy.
    Normal,
    /// By the Redis backend's local fallback quotas (Redis unreachable).
    Fallback,
    /// Admitted because Redis was unreachable and the policy fails open.
    FailOpen,
    /// Refused because Redis was unreachable and the policy fails closed.
    FailClosed,
}

/// One request's answer: every tier's result, in the backend's tier order.
///
/// ```
/// use cellrate_tower::{Mode, Verdict};
/// use cellrate::Decision;
/// let v = Verdict::decided(&[Ok(Decision::new(5, 4, 200))], Mode::Normal);
/// assert!(v.is_admitted());
/// assert_eq!(v.results().len(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    results: [Result<Decision, Denied>; MAX_TIERS],
    len: u8,
    mode: Mode,
    fault: Option<Fault>,
}

/// Why a backend could not decide (answered without internal detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The key cannot be stored by the backend (400).
    InvalidKey,
    /// A misconfiguration or an internal failure (500).
    Internal,
}

impl Verdict {
    /// A verdict from at most [`MAX_TIERS`] results (more are dropped).
    pub fn decided(results: &[Result<Decision, Denied>], mode: Mode) -> Self {
        let mut v = Verdict {
            results: [Ok(Decision::new(0, 0, 0)); MAX_TIERS],
            len: 0,
            mode,
            fault: None,
        };
        for (slot, r) in v.results.iter_mut().zip(results) {
            *slot = *r;
            v.len += 1;
        }
        v
    }
    /// A backend that could not decide.
    pub const fn fault(fault: Fault) -> Self {
        Verdict {
            results: [Ok(Decision::new(0, 0, 0)); MAX_TIERS],
            len: 0,
            mode: Mode::Normal,
            fault: Some(fault),
        }
    }
    /// Every tier's result.
    pub fn results(&self) -> &[Result<Decision, Denied>] {
        &self.results[..self.len as usize]
    }
    /// Whether every tier admitted (and the backend could decide).
    pub fn is_admitted(&self) -> bool {
        self.fault.is_none() && self.results().iter().all(Result::is_ok)
    }
    /// How it was reached.
    pub const fn mode(&self) -> Mode {
        self.mode
    }
    /// Why the backend could not decide, if it could not.
    pub const fn fault_kind(&self) -> Option<Fault> {
        self.fault
    }
}

/// A backend's answer: now, or a future for backends that wait on I/O.
// The verdict is returned by value on every request; boxing it to even out
// the variants would allocate per request.
#[allow(clippy::large_enum_variant)]
pub enum Check<F> {
    /// Decided without waiting.
    Ready(Verdict),
    /// Decided when the future resolves.
    Pending(F),
}

/// One tier as the `RateLimit-Policy` field describes it.
///
/// ```
/// use cellrate_tower::TierInfo;
/// use cellrate::Quota;
/// let t = TierInfo::from_quota("api", &Quota::per_minute(10).at_hz(1_000));
/// assert_eq!((t.limit, t.window_ticks, t.hz), (10, 60_000, 1_000));
/// assert_eq!(t.rate, None); // 10 per 60 s is the rate too
/// let t = TierInfo::from_quota("api", &Quota::per_second(50).with_burst(10).at_hz(1_000));
/// assert_eq!(t.rate, Some((50, 1_000))); // announced as "api/rate";q=50;w=1
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierInfo {
    /// The policy name.
    pub name: String,
    /// `q`: cells per window.
    pub limit: u64,
    /// `w`, in ticks of `hz`.
    pub window_ticks: u64,
    /// Ticks per second of `window_ticks` and of the tier's results.
    pub hz: u64,
    /// The rate policy announced beside the burst one, `(q, w)` with `w` in
    /// ticks of `hz` (see [`headers::sustained`](cellrate::headers::sustained)),
    /// or `None` when `limit` per `window_ticks` is the rate.
    pub rate: Option<(u64, u64)>,
}

impl TierInfo {
    /// The tier of a GCRA quota (see [`Policy::from_quota`]).
    pub fn from_quota(name: &str, quota: &Quota) -> Self {
        let p = Policy::from_quota(name, quota);
        TierInfo {
            name: name.to_string(),
            limit: p.limit(),
            window_ticks: p.window_ticks(),
            hz: quota.hz(),
            rate: cellrate::headers::sustained(quota)
                .map(|(q, secs)| (q, secs.saturating_mul(quota.hz()))),
        }
    }
}

/// What the layer asks to decide. Implemented by [`KeyedTiers`],
/// [`Global`], and (feature `redis`) [`RedisBlocking`](super::RedisBlocking)
/// and [`RedisAsync`](super::RedisAsync).
pub trait Backend: Send + Sync + 'static {
    /// The future of a pending check (in-process backends never return one).
    type Future: Future<Output = Verdict> + Send + 'static;
    /// The tiers, in the order of every verdict's results. All share one
    /// `hz` (the layer checks).
    fn tiers(&self) -> Vec<TierInfo>;
    /// The tiers that decide in [`Mode::Fallback`], when the backend has
    /// such a mode.
    fn fallback_tiers(&self) -> Option<Vec<TierInfo>> {
        None
    }
    /// The lists of tiers a request may be decided by, when the tiers that
    /// apply depend on the request (tiers limited to some routes): group
    /// `g`'s verdicts have one result per tier of `groups()[g]`, in its
    /// order. One group, [`tiers`](Self::tiers), for a backend whose every
    /// tier decides every request.
    fn groups(&self) -> Vec<Vec<TierInfo>> {
        std::vec![self.tiers()]
    }
    /// The group of [`groups`](Self::groups) that decides `key`.
    fn group(&self, key: &RequestKey<'_>) -> usize {
        let _ = key;
        0
    }
    /// Decides `cost` cells for `key` at `now` (ticks of the layer's clock;
    /// a backend with its own clock, like Redis, ignores it).
    fn check(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future>;
    /// For the delaying mode: books `cost` cells at the earliest time within
    /// `max_wait` ticks and returns the wait, or the refusal. `None`: this
    /// backend cannot shape.
    fn reserve(
        &self,
        key: &RequestKey<'_>,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Result<(u64, Verdict), Verdict>> {
        let _ = (key, now, cost, max_wait);
        None
    }
    /// Registers the backend's own series (feature `metrics`), labelled
    /// `limiter`: called once, by [`RateLimitBuilder::build`](super::RateLimitBuilder::build).
    /// [`KeyedTiers`] registers its tables' `cellrate_keyed_*` series and
    /// the Redis backends their `cellrate_redis_*` ones (see
    /// `cellrate-metrics`); a backend with nothing of its own to
    /// report keeps this default, and the layer still counts its decisions.
    #[cfg(feature = "metrics")]
    fn register_metrics(&mut self, limiter: &str) {
        let _ = limiter;
    }
}

/// What a keyed tier is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Scope {
    Client,
    ClientAndEndpoint,
}

/// A tier's per-client quotas that change at run time: at most `capacity`
/// clients, each bound to one slot for the tier's life (a slot is never
/// given to another client, so a check that found its client's slot reads
/// that client's quota, whatever a reload does meanwhile). A slot's key
/// word is `0` (free; every slot after it is free too) or `id + 1`; it is
/// written once, after its quota, by the one reloader at a time.
pub(super) struct LiveOverrides {
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
    pub(super) fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// The bound clients.
    fn bound(&self) -> impl Iterator<Item = &OverrideSlot> {
        self.slots
            .iter()
            .take_while(|s| s.key.load(Ordering::Acquire) != 0)
    }
    /// Whether `id` has a slot.
    pub(super) fn is_bound(&self, id: KeyId) -> bool {
        let word = id.get() + 1;
        self.bound().any(|s| s.key.load(Ordering::Acquire) == word)
    }
    /// How many clients have a slot.
    pub(super) fn bound_count(&self) -> usize {
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
pub(super) struct KeyedTier {
    pub(super) name: String,
    pub(super) table: KeyedBox<LiveQuota, LiveOverrides>,
    pub(super) scope: Scope,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl KeyedTier {
    pub(super) fn new(
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
    pub(super) fn quota(&self) -> Quota {
        self.table.algorithm().quota()
    }
    /// Sets the default quota and the overrides (both already re-expressed
    /// at the table's scale and checked).
    pub(super) fn apply(&self, default: Quota, overrides: &[(KeyId, Quota)]) {
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
    pub(super) tiers: Vec<Arc<KeyedTier>>,
    pub(super) when_full: WhenFull,
    /// Which tiers decide which route, when some tiers are limited to
    /// some routes (a configuration's `tiers[i].routes`).
    pub(super) routes: Option<Routes>,
    /// Each tier's table as metrics, once registered (a reload carries a
    /// kept tier's over).
    #[cfg(feature = "metrics")]
    pub(super) metrics: Vec<Arc<cellrate_metrics::KeyedMetrics>>,
}

/// The tiers of each route: group 0 (the tiers limited to no route) for a
/// route no tier names, else the group of the route's tiers, each in the
/// tiers' order. Routes are the request's endpoint (`key.endpoint =
/// "route"`: the matched route).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Routes {
    /// Tier indices per group; group 0 is the tiers limited to no route.
    pub(super) groups: Vec<Vec<usize>>,
    pub(super) by_route: std::collections::HashMap<String, usize>,
}

// Routes are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl Routes {
    /// The groups of tiers whose route lists are `routes` (`None`: every
    /// route), and the group of each route named.
    pub(super) fn new(routes: &[Option<&[String]>]) -> Self {
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
    pub(super) fn groups_of(routes: Option<&Routes>, all: Vec<TierInfo>) -> Vec<Vec<TierInfo>> {
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
    ) -> Result<Self, ConfigError> {
        if self.tiers.len() >= MAX_TIERS {
            return Err(ConfigError::TooManyTiers);
        }
        if let Some(first) = self.tiers.first() {
            if first.quota().hz() != quota.hz() {
                return Err(ConfigError::MixedHz);
            }
        }
        super::check_name(name)?;
        if capacity == 0 {
            return Err(ConfigError::ZeroCapacity);
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
    pub fn per_client(
        self,
        name: &str,
        quota: Quota,
        capacity: usize,
    ) -> Result<Self, ConfigError> {
        self.add(name, quota, capacity, Scope::Client)
    }
    /// A tier keyed by (client, endpoint). A request whose extractor names
    /// no endpoint is keyed by the client alone in this tier.
    pub fn per_client_and_endpoint(
        self,
        name: &str,
        quota: Quota,
        capacity: usize,
    ) -> Result<Self, ConfigError> {
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
    /// assert_eq!(refused.results()[0].unwrap().remaining(), 9); // not charged
    /// ```
    pub fn decide(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Verdict {
        // The results are written in the verdict itself (a verdict is a few
        // hundred bytes: one array, not a second one copied over).
        let mut v = Verdict::decided(&[], Mode::Normal);
        let n = match &self.routes {
            None => {
                let tiers = self.tiers.iter().map(|tier| Self::entry(tier, key));
                check_all(tiers, now, cost, &mut v.results)
            }
            Some(routes) => {
                let members = &routes.groups[self.route_group(routes, key)];
                let tiers = members.iter().map(|&i| Self::entry(&self.tiers[i], key));
                check_all(tiers, now, cost, &mut v.results)
            }
        };
        v.len = n.min(MAX_TIERS) as u8;
        v
    }

    /// The group of `key`'s route (its endpoint).
    fn route_group(&self, routes: &Routes, key: &RequestKey<'_>) -> usize {
        let Some(route) = key.scope() else {
            return 0;
        };
        let mut buf = super::KeyText::new();
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
    pub(super) fn carry_metrics(&mut self, old: &KeyedTiers, limiter: &str) {
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

/// One limiter that every request shares, whatever its key: any
/// [`RateLimiter`] (a [`Gcra`](cellrate::Gcra), a window, a tuple of tiers…),
/// described by one policy. With a [`Gcra`](cellrate::Gcra) it can also shape
/// (the layer's delaying mode).
///
/// ```
/// use cellrate_tower::Global;
/// use cellrate::window::FixedWindow;
/// // 1 000 requests per minute for the whole service, on a 1 kHz clock.
/// let all = Global::new("all", FixedWindow::new(1_000, 60_000), 1_000, 60_000, 1_000).unwrap();
/// # let _ = all;
/// ```
pub struct Global<L> {
    limiter: L,
    info: TierInfo,
}

impl<L: RateLimiter> Global<L> {
    /// `limiter`, announced as a policy of `limit` cells per `window_ticks`
    /// ticks of a clock of `hz` ticks per second.
    pub fn new(
        name: &str,
        limiter: L,
        limit: u64,
        window_ticks: u64,
        hz: u64,
    ) -> Result<Self, ConfigError> {
        super::check_name(name)?;
        if hz == 0 {
            return Err(ConfigError::MixedHz);
        }
        Ok(Global {
            limiter,
            info: TierInfo {
                name: name.to_string(),
                limit,
                window_ticks,
                hz,
                rate: None,
            },
        })
    }
    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }
}

impl Global<cellrate::Gcra> {
    /// A shared GCRA, announced exactly by its quota.
    ///
    /// ```
    /// use cellrate_tower::Global;
    /// use cellrate::Quota;
    /// let g = Global::gcra("all", Quota::per_second(5).at_hz(1_000)).unwrap();
    /// # let _ = g;
    /// ```
    pub fn gcra(name: &str, quota: Quota) -> Result<Self, ConfigError> {
        super::check_name(name)?;
        Ok(Global {
            limiter: cellrate::Gcra::new(quota),
            info: TierInfo::from_quota(name, &quota),
        })
    }
}

impl<L: RateLimiter + Send + Sync + 'static> Backend for Global<L> {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        std::vec![self.info.clone()]
    }
    fn check(&self, _key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future> {
        Check::Ready(Verdict::decided(
            &[self.limiter.check_n(now, cost)],
            Mode::Normal,
        ))
    }
}

/// One GCRA that every request shares, which can also *shape*: in the
/// layer's delaying mode ([`RateLimitBuilder::delay`](super::RateLimitBuilder::delay))
/// a request over the rate is held until its turn
/// ([`Gcra::reserve_n`](cellrate::Gcra::reserve_n)), in arrival order, instead
/// of refused. In the default mode it limits like [`Global`].
///
/// ```
/// use cellrate_tower::Shaper;
/// use cellrate::Quota;
/// let upstream = Shaper::new("upstream", Quota::per_second(50).at_hz(1_000)).unwrap();
/// # let _ = upstream;
/// ```
pub struct Shaper {
    gcra: cellrate::Gcra,
    info: TierInfo,
}

impl Shaper {
    /// A shaper at `quota`.
    pub fn new(name: &str, quota: Quota) -> Result<Self, ConfigError> {
        super::check_name(name)?;
        Ok(Shaper {
            gcra: cellrate::Gcra::new(quota),
            info: TierInfo::from_quota(name, &quota),
        })
    }
    /// The limiter.
    pub fn gcra(&self) -> &cellrate::Gcra {
        &self.gcra
    }
    /// A refusal of the delaying mode as seen from the end of its queue,
    /// `max_wait` ticks ahead: the wait is past `max_wait` there, so the
    /// limiter refuses `cost` at `now + max_wait` too (its debt only grows),
    /// and that denial is exact: its `retry_after` is how much later a
    /// retry would be held at most `max_wait`, its `reset_after` the debt
    /// left beyond the queue (at most the burst's span, so `t ≤ w`).
    fn queue_edge(&self, now: u64, cost: u64, max_wait: u64, denied: Denied) -> Denied {
        if max_wait == 0 || denied.retry_after().is_none() {
            return denied;
        }
        let edge = now.wrapping_add(max_wait);
        match self.gcra.check_n(edge, cost) {
            Err(at_edge) => at_edge,
            Ok(_) => {
                // Only a quota raised meanwhile can admit there: give the
                // cells back and keep the first answer.
                self.gcra.refund_n(edge, cost);
                denied
            }
        }
    }
}

impl Backend for Shaper {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        std::vec![self.info.clone()]
    }
    fn check(&self, _key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future> {
        Check::Ready(Verdict::decided(
            &[self.gcra.check_n(now, cost)],
            Mode::Normal,
        ))
    }
    fn reserve(
        &self,
        _key: &RequestKey<'_>,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Result<(u64, Verdict), Verdict>> {
        Some(match self.gcra.reserve_n(now, cost, max_wait) {
            Ok(r) => {
                // The response leaves when the hold ends: the fields describe
                // the limiter then (the booked cells spent, the debt less the
                // wait), so `t` never exceeds the policy's `w`.
                let wait = r.send_after();
                let decision = if wait == 0 {
                    Decision::new(r.limit(), r.remaining(), r.reset_after())
                } else {
                    Decision::new(r.limit(), 0, r.reset_after().saturating_sub(wait))
                };
                Ok((wait, Verdict::decided(&[Ok(decision)], Mode::Normal)))
            }
            Err(d) => Err(Verdict::decided(
                &[Err(self.queue_edge(now, cost, max_wait, d))],
                Mode::Normal,
            )),
        })
    }
}

/// The text of a key part for the Redis key layout, which reserves `{`
/// and `}` (the Cluster hash tag): they are written `%7B` and `%7D`, and
/// `%` itself `%25`, so distinct parts stay distinct (`/orders/{id}` is
/// `/orders/%7Bid%7D`).
#[cfg(feature = "redis")]
pub(crate) fn owned(part: Part<'_>) -> String {
    let mut buf = super::KeyText::new();
    let text = part.as_str(&mut buf);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}
