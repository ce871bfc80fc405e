//! [`Reloader`]: a layer built from a [`LayerConfig`] takes a new one at
//! run time, keeping every client's state. The semantics at the switch and
//! why it never over-admits are in the type's docs.
use std::sync::{Arc, MutexGuard};

use super::config::ConfigKey;
use std::any::Any;

use std::collections::BTreeMap;

use super::backend::keyed::Epoch;
use super::config::{Applied, LayerConfig};
use super::live::{Live, Shared};
use super::{Backend, KeyedTiers, RateLimitLayer, TierInfo};
use cellrate::config::QuotaSpec;
use cellrate::Clock;
use cellrate_config::ConfigError as Error;

/// Changes the rules of a layer built from a [`LayerConfig`] while it
/// serves, keeping every client's state; shared by every clone of the
/// layer and of its services (they all read the same rules), made by
/// [`RateLimitLayer::reloader`] (features `tower` and `serde`).
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
///
/// let read = |text: &str| -> LayerConfig { toml::from_str(text).unwrap() };
/// let layer = read(r#"
///     key = { client = { header = "x-api-key" } }
///     [[tiers]]
///     name = "key"
///     quota = "100/min"
///     capacity = 1000
///     overrides = { acct_123 = "100/min" }
/// "#)
/// .build(StdClock::new(), StdClock::HZ)
/// .unwrap();
/// let reloader = layer.reloader(); // any clone of the layer or its services
///
/// // The operator raises acct_123 to 500/min.
/// reloader.set_override("key", "acct_123", Some("500/min".parse().unwrap())).unwrap();
/// // A bad file is refused with its place; the rules in force stay.
/// let bad = read(r#"
///     key = { client = { header = "x-api-key" } }
///     tiers = [{ name = "key", quota = "100/min", capacity = 50 }]
/// "#);
/// assert_eq!(
///     reloader.apply(&bad).unwrap_err().to_string(),
///     "tiers[0].capacity: fixed while tier \"key\" lives (its table keeps every client's \
///      state): give the tier a new name to make a new table"
/// );
/// assert_eq!(reloader.config().tiers[0].overrides["acct_123"].to_string(), "500/min");
/// ```
///
/// # What a reload changes
///
/// [`Reloader::apply`] checks the whole new configuration first (every
/// error names its place, as [`LayerConfig::build`] does) and changes
/// nothing if any part is wrong. Then:
///
/// * a tier whose **name** is in both keeps its table, so every client's
///   state; its default quota and its overrides switch, and each client
///   keeps the cells it has used (below). Its
///   scope, capacity and `max_overrides` are fixed while it lives, and so
///   is its algorithm but within the GCRA family (GCRA, token bucket,
///   leaky bucket share one kind of table): to change them, give the
///   tier a new name;
/// * a tier only in the new configuration starts with an empty table; a
///   tier only in the old one is dropped when the last request that read
///   it is answered;
/// * an override only in the new configuration gives that client one of
///   the tier's `max_overrides` slots; an override the new configuration
///   drops makes that client follow the tier's default quota again and
///   frees its slot. A freed slot passes to another client only once every
///   request decided by rules from before the freeing reload is answered,
///   so a check never reads another client's quota (a reload that needs
///   more slots than are free is refused with the override's place);
/// * the overrides set at run time ([`set_override`](Self::set_override))
///   are laid over the new configuration while their tier is in it (with
///   a slot for them), over its override of the same client if it has
///   one; the answer, [`Reloaded`], says which were kept and which
///   dropped and why (the tier removed, no slot left). An override removed at run time is gone
///   until a configuration names it again;
/// * the tier order, and so the order of the `RateLimit` fields, is the new
///   one.
///
/// What the layer does besides its tiers (`key`, `fields`, `keyless`,
/// `challenge`, `when_full`) is fixed when it is built: a new
/// configuration that changes one is refused with that field's name. So is
/// the backend: an in-process layer cannot move to Redis, nor back.
///
/// # On Redis
///
/// A layer made by [`LayerConfig::build_redis`] reloads the same way, with
/// the state on the server: a tier kept by name keeps every client's state
/// there, over the same connection. What decides where state lives or how
/// the server is called is fixed: `redis.target`, `redis.prefix`,
/// `redis.timeout_ms`, `redis.reconnect_ms`, `redis.fallback_capacity`;
/// `redis.failure` follows the tiers (one fallback quota per tier). The
/// details are in `docs/design/tower.md`.
///
/// # The switch
///
/// Every request reads the rules in force with one lock-free load and is
/// decided and announced by them (a client with an override is announced
/// its override's quota in that tier). A kept tier's quotas switch whole,
/// then each client whose quota changed keeps the cells it has used, at
/// most its new burst
/// ([`KeyedTable::translate_states`](cellrate::keyed::KeyedTable::translate_states)):
/// at the instant of the switch a raise (rate and burst both at least the
/// old) never refuses what the old rules admit, a lower never admits what
/// they refuse, and a client may take what it could before plus the burst
/// difference. A window or sliding-log tier's quotas switch and each
/// client's state is re-expressed (the cells used kept, at most the new
/// limit) before any check reads it under the new quota. Nobody is reset. Over
/// any span a client is admitted at most
/// the largest burst plus what the fastest rate earns, plus what each
/// switch in the span may forgive (the cells above a lowered burst); the
/// proof is in `docs/design/tower.md`. On Redis the same rule holds per
/// client at the first call that reads its key after the switch (the
/// state carries the parameters it was written under). Reloads are
/// serialized by a lock that no request takes.
pub struct Reloader<C, B: Reload = KeyedTiers> {
    shared: Arc<Shared<ConfigKey, B, C>>,
}

/// A backend whose layer a [`Reloader`] can change: the in-process
/// [`KeyedTiers`] that [`LayerConfig::build`] makes, and the
/// [`RedisAsync`](super::RedisAsync) that
/// [`LayerConfig::build_redis`] makes (features `tower`, `serde`).
/// Sealed. Code that serves either names the backend as a parameter:
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::{Reload, Reloader};
///
/// /// Raises one client, whichever backend the layer decides on.
/// fn raise<B: Reload>(reloader: &Reloader<StdClock, B>, client: &str) -> bool {
///     reloader.set_override("key", client, Some("500/min".parse().unwrap())).is_ok()
/// }
/// let layer = toml::from_str::<LayerConfig>(
///     r#"
///     key = { client = { header = "x-api-key" } }
///     tiers = [{ name = "key", quota = "100/min", capacity = 64 }]
///     "#,
/// )
/// .unwrap()
/// .build(StdClock::new(), StdClock::HZ)
/// .unwrap();
/// assert!(raise(&layer.reloader(), "acct_123"));
/// ```
pub trait Reload: sealed::Reload {}

impl Reload for KeyedTiers {}
#[cfg(feature = "redis")]
impl Reload for super::RedisAsync {}

mod sealed {
    use super::*;

    /// What a reload asks of a backend: a checked plan that changes
    /// nothing, what it will announce, and its commit (which cannot fail).
    pub trait Reload: Backend + Sized {
        type Plan;
        /// `config` checked against `old` (the configuration in force) and
        /// made ready at `hz`; nothing in force changes.
        fn plan(
            &self,
            config: &LayerConfig,
            old: &LayerConfig,
            hz: u64,
            epoch: Epoch,
        ) -> Result<Self::Plan, Error>;
        /// The groups of tiers (and the fallback tiers, and each tier's
        /// override slots) the plan's backend will have.
        fn announced(plan: &Self::Plan) -> Announced;
        /// The backend of the plan, its series carried from `self`; the
        /// clients of a kept table keep the cells they have used at `now`.
        fn commit(&self, plan: Self::Plan, metrics_name: &str, now: u64) -> Self;
    }

    /// What a backend's tiers announce: the groups, the fallback tiers and
    /// each tier's override slots.
    pub type Announced = (
        Vec<Vec<TierInfo>>,
        Option<Vec<TierInfo>>,
        Vec<Vec<Option<TierInfo>>>,
    );

    /// The plans of a [`KeyedTiers`] reload (not nameable outside the crate).
    pub struct KeyedPlan(
        pub(crate) Vec<crate::config::TierPlan>,
        pub(crate) Option<crate::backend::keyed::Routes>,
    );
}

impl sealed::Reload for KeyedTiers {
    type Plan = sealed::KeyedPlan;
    fn plan(
        &self,
        config: &LayerConfig,
        _old: &LayerConfig,
        hz: u64,
        epoch: Epoch,
    ) -> Result<Self::Plan, Error> {
        if config.on_redis() {
            return Err(fixed("redis"));
        }
        let plans = config.plan_tiers(hz, Some(self), epoch)?;
        Ok(sealed::KeyedPlan(plans, config.routes()?))
    }
    fn announced(plan: &Self::Plan) -> sealed::Announced {
        let all: Vec<TierInfo> = plan.0.iter().map(|p| p.info()).collect();
        (
            crate::backend::keyed::Routes::groups_of(plan.1.as_ref(), all),
            None,
            plan.0.iter().map(|p| p.override_infos()).collect(),
        )
    }
    fn commit(&self, plan: Self::Plan, metrics_name: &str, now: u64) -> Self {
        let _ = metrics_name;
        let before: Vec<_> = self.tiers.iter().map(|t| (t, t.quotas())).collect();
        // What requests taught the rules in force about their routes is kept.
        let routes = match (plan.1, &self.routes) {
            (Some(new), Some(old)) => Some(new.carrying(old)),
            (new, _) => new,
        };
        #[allow(unused_mut)]
        let mut backend = KeyedTiers::committed(plan.0, self.when_full, routes, now);
        // The quotas are published (a store tier's clients already
        // re-expressed); each kept GCRA table's clients now keep the cells
        // they have used (until its walk passes a client, its debt reads as
        // time under the new quota).
        for tier in &backend.tiers {
            if let Some((_, Some(was))) = before.iter().find(|(old, _)| Arc::ptr_eq(old, tier)) {
                tier.translate_states(now, was);
            }
        }
        // A kept tier keeps its table's series (and what they have
        // published); a new tier's are registered.
        #[cfg(feature = "metrics")]
        backend.carry_metrics(self, metrics_name);
        backend
    }
}

#[cfg(feature = "redis")]
impl sealed::Reload for super::RedisAsync {
    type Plan = super::RedisAsync;
    fn plan(
        &self,
        config: &LayerConfig,
        old: &LayerConfig,
        hz: u64,
        _epoch: Epoch,
    ) -> Result<Self::Plan, Error> {
        let (Some(new), Some(was)) = (&config.redis, &old.redis) else {
            return Err(fixed("redis"));
        };
        // The server, the key prefix (every client's keys) and the call
        // settings stay; the failure policy follows the tiers.
        unchanged(&new.target, &was.target, "redis.target")?;
        unchanged(&new.prefix, &was.prefix, "redis.prefix")?;
        unchanged(&new.timeout_ms, &was.timeout_ms, "redis.timeout_ms")?;
        unchanged(&new.reconnect_ms, &was.reconnect_ms, "redis.reconnect_ms")?;
        unchanged(
            &new.fallback_capacity,
            &was.fallback_capacity,
            "redis.fallback_capacity",
        )?;
        let plan = config.redis_policy(hz)?;
        self.reconfigured(plan).map_err(|e| Error::new("redis", e))
    }
    fn announced(plan: &Self::Plan) -> sealed::Announced {
        (plan.groups(), plan.fallback_tiers(), plan.override_slots())
    }
    fn commit(&self, plan: Self::Plan, metrics_name: &str, _now: u64) -> Self {
        // The failure counters and series are shared; a new fallback table
        // gets its series.
        #[cfg(feature = "metrics")]
        plan.register_fallback_metrics(metrics_name);
        #[cfg(not(feature = "metrics"))]
        let _ = metrics_name;
        plan
    }
}

/// `Ok` if `field` keeps its value `was`, else its refusal.
fn unchanged<T: PartialEq>(new: &T, was: &T, field: &str) -> Result<(), Error> {
    if new == was {
        Ok(())
    } else {
        Err(fixed(field))
    }
}

fn fixed(field: &str) -> Error {
    Error::new(
        field,
        "fixed when the layer is built: build a new layer to change it",
    )
}

impl<C> Reloader<C, KeyedTiers> {
    /// The routes the tiers' `routes` name that no request has matched
    /// since the rules naming them came into force (a reload keeps what
    /// was learnt of a route it keeps naming), in order. After traffic has
    /// reached every route, a route listed here is likely no route of the
    /// application (a typo, or a path where its pattern is meant); see
    /// [`LayerConfig::check_routes`](crate::config::LayerConfig::check_routes)
    /// to catch it before serving.
    ///
    /// ```
    /// use cellrate::ManualClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = toml::from_str(r#"
    ///     key = { client = "peer_ip", endpoint = "route" }
    ///     tiers = [{ name = "all", quota = "9/s", capacity = 8 },
    ///              { name = "search", quota = "1/s", capacity = 8, routes = ["/serch"] }]
    /// "#).unwrap();
    /// let layer = c.build(ManualClock::new(0), 1_000).unwrap();
    /// assert_eq!(layer.reloader().unmatched_routes(), ["/serch"]);
    /// assert_eq!(layer.reloader().unrouted_requests(), 0);
    /// ```
    pub fn unmatched_routes(&self) -> Vec<String> {
        let live = self.shared.live.load();
        live.backend
            .routes
            .as_ref()
            .map_or_else(Vec::new, |r| r.unmatched())
    }

    /// How many requests came on a route that no tier's `routes` names
    /// (each decided by the tiers without `routes`), over the layer's life.
    /// With the `tracing` feature, the first request on each such route
    /// logs an event (`info`, target `cellrate::tower`, field `route`).
    /// Counted only while some tier has `routes`.
    ///
    /// ```
    /// use cellrate::ManualClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = toml::from_str(r#"
    ///     key = { client = "peer_ip" }
    ///     tiers = [{ name = "all", quota = "9/s", capacity = 8 }]
    /// "#).unwrap();
    /// let layer = c.build(ManualClock::new(0), 1_000).unwrap();
    /// assert_eq!(layer.reloader().unrouted_requests(), 0);
    /// ```
    pub fn unrouted_requests(&self) -> u64 {
        let live = self.shared.live.load();
        live.backend
            .routes
            .as_ref()
            .map_or(0, |r| r.unrouted_requests())
    }
}

impl<C, B: Reload> Clone for Reloader<C, B> {
    fn clone(&self) -> Self {
        Reloader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C, B: Reload> core::fmt::Debug for Reloader<C, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reloader")
            .field("tiers", &self.shared.live.load().announce().names)
            .finish_non_exhaustive()
    }
}

impl<C: Clock + Send + Sync + 'static, B: Reload> RateLimitLayer<ConfigKey, B, C> {
    /// The handle that reloads this layer (and every clone of it and of
    /// its services). Only a layer made by [`LayerConfig::build`] or
    /// [`LayerConfig::build_redis`] has a configuration to change: on
    /// another, [`Reloader::apply`] says so.
    pub fn reloader(&self) -> Reloader<C, B> {
        Reloader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: Clock + Send + Sync + 'static, B: Reload> Reloader<C, B> {
    fn lock(&self) -> MutexGuard<'_, Option<Box<dyn Any + Send>>> {
        // A reload that panicked left the rules it had swapped in (or the
        // old ones): either is whole, so the lock's poison is not a state.
        self.shared
            .applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The configuration in force (with the overrides set at run time).
    /// A layer not built from a configuration has none: an empty one.
    pub fn config(&self) -> LayerConfig {
        match applied(&self.lock()) {
            Some(a) => a.config.clone(),
            None => LayerConfig::new(
                super::config::KeyConfig::new(super::config::KeySource::PeerIp),
                Vec::new(),
            ),
        }
    }

    /// The overrides set at run time ([`set_override`](Self::set_override))
    /// that are in force, by tier and client: what
    /// [`Admin::keep_overrides`](crate::Admin::keep_overrides) writes.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let layer = toml::from_str::<LayerConfig>(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "100/min", capacity = 1000 }]
    /// "#).unwrap().build(StdClock::new(), StdClock::HZ).unwrap();
    /// let reloader = layer.reloader();
    /// reloader.set_override("key", "acct_1", Some("500/min".parse().unwrap())).unwrap();
    /// assert_eq!(reloader.run_time_overrides()["key"]["acct_1"].to_string(), "500/min");
    /// ```
    pub fn run_time_overrides(&self) -> OverrideSet {
        match applied(&self.lock()) {
            Some(a) => a.runtime.clone(),
            None => OverrideSet::new(),
        }
    }

    /// Makes `config` the rules in force, keeping every client's state
    /// (see [`Reloader`]), with the overrides set at run time laid over it
    /// while their tier lives; all or nothing: an error names the place of
    /// the first problem and changes nothing. The answer says what became
    /// of the run-time overrides.
    pub fn apply(&self, config: &LayerConfig) -> Result<Reloaded, Error> {
        let mut applied = self.lock();
        let Some(state) = applied_mut(&mut applied) else {
            return Err(not_configured());
        };
        let (next, runtime, report) = lay_over(config, &state.runtime);
        self.apply_locked(state, &next)?;
        state.runtime = runtime;
        Ok(report)
    }

    /// Sets (`Some`) or removes (`None`: the client follows the tier's
    /// default quota again) the override of one client in one tier, as
    /// [`apply`](Self::apply) with the configuration in force changed in
    /// that one place; every other client and tier is untouched. An
    /// override set here outlives later [`apply`](Self::apply)s while its
    /// tier lives (see [`Reloaded`]); removing one frees its slot, and
    /// removing one the client does not have is
    /// [`OverrideError::NoOverride`].
    pub fn set_override(
        &self,
        tier: &str,
        client: &str,
        quota: Option<QuotaSpec>,
    ) -> Result<(), OverrideError> {
        let mut applied = self.lock();
        let Some(state) = applied_mut(&mut applied) else {
            return Err(OverrideError::Refused(not_configured()));
        };
        let mut next = state.config.clone();
        let Some(t) = next.tiers.iter_mut().find(|t| t.name == tier) else {
            return Err(OverrideError::NoTier(tier.into()));
        };
        match &quota {
            Some(q) => {
                t.overrides.insert(String::from(client), *q);
            }
            None => {
                if t.overrides.remove(client).is_none() {
                    return Err(OverrideError::NoOverride {
                        tier: tier.into(),
                        client: client.into(),
                    });
                }
            }
        }
        self.apply_locked(state, &next)
            .map_err(OverrideError::Refused)?;
        match quota {
            Some(q) => {
                state
                    .runtime
                    .entry(tier.into())
                    .or_default()
                    .insert(client.into(), q);
            }
            None => {
                if let Some(clients) = state.runtime.get_mut(tier) {
                    clients.remove(client);
                    if clients.is_empty() {
                        state.runtime.remove(tier);
                    }
                }
            }
        }
        Ok(())
    }

    /// The `limiter` label of the layer's series ("" without `metrics`).
    fn metrics_name(&self) -> &str {
        #[cfg(feature = "metrics")]
        return &self.shared.metrics_name;
        #[cfg(not(feature = "metrics"))]
        ""
    }

    /// Makes `config` (the run-time overrides already in it) the rules in
    /// force.
    fn apply_locked(&self, state: &mut Applied, config: &LayerConfig) -> Result<(), Error> {
        let epoch = state.epoch();
        let old = &state.config;
        unchanged(&config.key, &old.key, "key")?;
        unchanged(&config.fields, &old.fields, "fields")?;
        unchanged(&config.keyless, &old.keyless, "keyless")?;
        unchanged(&config.challenge, &old.challenge, "challenge")?;
        unchanged(&config.when_full, &old.when_full, "when_full")?;
        unchanged(&config.metrics_name, &old.metrics_name, "metrics_name")?;
        if config.tiers.is_empty() {
            return Err(Error::new("tiers", super::BuildError::NoTiers));
        }
        let current = self.shared.live.load_full();
        let plan = current.backend.plan(config, old, state.hz, epoch)?;
        let (groups, fallback, overrides) = B::announced(&plan);
        let announces = super::announce::announces(
            groups.clone(),
            fallback,
            &overrides,
            self.shared.fields,
            self.metrics_name(),
        )
        .map_err(|e| Error::new("tiers", e))?;
        // Checked: from here on nothing fails.
        let now = self.shared.clock.now();
        let backend = current.backend.commit(plan, self.metrics_name(), now);
        debug_assert_eq!(backend.groups(), groups);
        drop(current);
        let replaced: Arc<dyn Any + Send + Sync> = self.shared.live.swap(Arc::new(Live {
            backend: Arc::new(backend),
            announces,
        }));
        state.retire(Arc::downgrade(&replaced));
        state.config = config.clone();
        Ok(())
    }
}

/// `config` with the overrides set at run time (`runtime`) laid over it:
/// each kept while its tier is there and has a slot for it (it takes the place of the configuration's override of the same
/// client); the overrides kept, and what became of them.
fn lay_over(config: &LayerConfig, runtime: &Runtime) -> (LayerConfig, Runtime, Reloaded) {
    let mut next = config.clone();
    let mut kept = Runtime::new();
    let mut report = Reloaded::default();
    for (tier, clients) in runtime {
        let Some(at) = next.tiers.iter().position(|t| &t.name == tier) else {
            for client in clients.keys() {
                report.dropped.push(Dropped {
                    tier: tier.clone(),
                    client: client.clone(),
                    why: Why::TierRemoved,
                });
            }
            continue;
        };
        for (client, quota) in clients {
            let t = &mut next.tiers[at];
            let slots = t
                .max_overrides
                .unwrap_or(super::config::DEFAULT_MAX_OVERRIDES);
            let why = if !t.overrides.contains_key(client) && t.overrides.len() >= slots {
                Some(Why::NoSlot)
            } else {
                None
            };
            if let Some(why) = why {
                report.dropped.push(Dropped {
                    tier: tier.clone(),
                    client: client.clone(),
                    why,
                });
                continue;
            }
            t.overrides.insert(client.clone(), *quota);
            kept.entry(tier.clone())
                .or_default()
                .insert(client.clone(), *quota);
            report.kept.push((tier.clone(), client.clone()));
        }
    }
    (next, kept, report)
}

/// The overrides set at run time, by tier and client.
type Runtime = OverrideSet;

/// Per-client quotas by tier name and client: the overrides set at run
/// time ([`Reloader::run_time_overrides`]).
///
/// ```
/// use cellrate_tower::OverrideSet;
/// let set: OverrideSet = toml::from_str("[key]\nacct_1 = \"500/min\"\n").unwrap();
/// assert_eq!(set["key"]["acct_1"].to_string(), "500/min");
/// ```
pub type OverrideSet = BTreeMap<String, BTreeMap<String, QuotaSpec>>;

/// What a reload ([`Reloader::apply`]) did with the overrides set at run
/// time ([`Reloader::set_override`]): they outlive reloads while their tier
/// does, each laid over the new configuration (over its override of the
/// same client, if it has one). Its `Display` is one line for a log.
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::config::LayerConfig;
/// use cellrate_tower::Why;
///
/// let read = |tiers: &str| -> LayerConfig {
///     toml::from_str(&format!("key = {{ client = {{ header = \"x-api-key\" }} }}\n{tiers}")).unwrap()
/// };
/// let both = r#"tiers = [{ name = "key", quota = "100/min", capacity = 64 },
///                        { name = "burst", quota = "10/s", capacity = 64 }]"#;
/// let layer = read(both).build(StdClock::new(), StdClock::HZ).unwrap();
/// let reloader = layer.reloader();
/// reloader.set_override("key", "acct_123", Some("500/min".parse().unwrap())).unwrap();
/// reloader.set_override("burst", "acct_123", Some("50/s".parse().unwrap())).unwrap();
///
/// // The file is reloaded without the "burst" tier.
/// let report = reloader.apply(&read(r#"tiers = [{ name = "key", quota = "200/min", capacity = 64 }]"#)).unwrap();
/// assert_eq!(report.kept, [("key".to_string(), "acct_123".to_string())]);
/// assert_eq!(report.dropped[0].why, Why::TierRemoved);
/// assert_eq!(
///     report.to_string(),
///     "run-time overrides kept: key/acct_123; dropped: burst/acct_123 (its tier was removed)"
/// );
/// assert_eq!(reloader.config().tiers[0].overrides["acct_123"].to_string(), "500/min");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The run-time overrides in force after the reload, as `(tier, client)`.
    pub kept: Vec<(String, String)>,
    /// The run-time overrides the reload dropped, and why.
    pub dropped: Vec<Dropped>,
}

/// A run-time override that a reload dropped: that client follows the
/// new configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dropped {
    /// Its tier's name.
    pub tier: String,
    /// The client.
    pub client: String,
    /// Why.
    pub why: Why,
}

/// Why a reload dropped a run-time override.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Why {
    /// The new configuration has no tier of that name.
    TierRemoved,
    /// The tier's `max_overrides` slots are taken by the configuration's
    /// own overrides and the run-time ones kept before it (in client order).
    NoSlot,
}

impl core::fmt::Display for Why {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Why::TierRemoved => "its tier was removed",
            Why::NoSlot => "no override slot left in its tier",
        })
    }
}

impl core::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.kept.is_empty() && self.dropped.is_empty() {
            return f.write_str("no run-time overrides");
        }
        f.write_str("run-time overrides kept: ")?;
        if self.kept.is_empty() {
            f.write_str("none")?;
        }
        for (i, (tier, client)) in self.kept.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{tier}/{client}")?;
        }
        for (i, d) in self.dropped.iter().enumerate() {
            let sep = if i == 0 { "; dropped: " } else { ", " };
            write!(f, "{sep}{}/{} ({})", d.tier, d.client, d.why)?;
        }
        Ok(())
    }
}

/// Why [`Reloader::set_override`] changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverrideError {
    /// No tier has this name.
    NoTier(String),
    /// The client has no override in the tier to remove.
    NoOverride {
        /// The tier.
        tier: String,
        /// The client.
        client: String,
    },
    /// The rules with the change are refused (the place and the reason,
    /// as [`Reloader::apply`] says them).
    Refused(Error),
}

impl core::fmt::Display for OverrideError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OverrideError::NoTier(tier) => write!(f, "tiers: no tier is named {tier:?}"),
            OverrideError::NoOverride { tier, client } => {
                write!(f, "tier {tier:?} has no override for client {client:?}")
            }
            OverrideError::Refused(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OverrideError {}

/// The configuration a layer was built from, as its builder left it in
/// the layer (type-erased there: the layer does not know configurations).
fn applied(slot: &Option<Box<dyn Any + Send>>) -> Option<&Applied> {
    slot.as_ref()?.downcast_ref()
}

fn applied_mut(slot: &mut Option<Box<dyn Any + Send>>) -> Option<&mut Applied> {
    slot.as_mut()?.downcast_mut()
}

fn not_configured() -> Error {
    Error::new(
        "",
        "this layer was not built from a LayerConfig: it has no configuration to change",
    )
}
