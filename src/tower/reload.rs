//! [`Reloader`]: a layer built from a [`LayerConfig`] takes a new one at
//! run time, keeping every client's state. The semantics at the switch and
//! why it never over-admits are in the type's docs.
use std::string::String;
use std::sync::{Arc, MutexGuard};
use std::vec::Vec;

use super::config::ConfigKey;
use super::config::LayerConfig;
use super::{Announce, Backend, KeyedTiers, Live, RateLimitLayer, Shared};
use crate::config::{Error, QuotaSpec};
use crate::Clock;

/// Changes the rules of a layer built from a [`LayerConfig`] while it
/// serves, keeping every client's state; shared by every clone of the
/// layer and of its services (they all read the same rules), made by
/// [`RateLimitLayer::reloader`] (features `tower` and `serde`).
///
/// ```
/// use cellrate::time::StdClock;
/// use cellrate::tower::config::LayerConfig;
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
///   state (its TAT); its default quota and its overrides switch with
///   [`Gcra::set_quota`](crate::Gcra::set_quota) semantics (below). Its
///   scope, capacity and `max_overrides` are fixed while it lives: to
///   change them, give the tier a new name;
/// * a tier only in the new configuration starts with an empty table; a
///   tier only in the old one is dropped when the last request that read
///   it is answered;
/// * an override only in the new configuration binds that client to one of
///   the tier's `max_overrides` slots (for the tier's life: a slot never
///   passes to another client, so a check never reads another client's
///   quota); an override the new configuration drops makes that client
///   follow the tier's default quota again;
/// * the tier order, and so the order of the `RateLimit` fields, is the new
///   one.
///
/// What the layer does besides its tiers (`key`, `fields`, `keyless`,
/// `challenge`, `when_full`, `redis`) is fixed when it is built: a new
/// configuration that changes one is refused with that field's name.
///
/// # The switch
///
/// Every request reads the rules in force with one lock-free load (an
/// [`arc_swap`] read, no lock), and is decided and announced by those
/// rules: its tiers and their `RateLimit-Policy`. A reload writes each
/// kept tier's quotas (each one switches whole: a check reads either the
/// old quota or the new, never a mix; see [`LiveQuota`](crate::keyed::LiveQuota)),
/// then swaps the rules. A request that read the old rules around the swap
/// may be decided by a kept tier's new quota and announced with its old
/// one; it is never decided by a mix. Reloads are serialized by a lock
/// that no request takes.
///
/// **Semantics at the switch** (those of `set_quota`): a client's debt is
/// kept *as time*. A client whose TAT is `θ` at the switch still has TAT
/// `θ`, and from then on a request of cost `c` at `t` is admitted iff
/// `max(θ, t) + c·T′ − t ≤ τ′ + T′` under the new emission interval `T′`
/// and tolerance `τ′ = (b′ − 1)·T′`. Nobody is reset, nobody gets cells
/// back from the change; a new client is full under the new quota.
///
/// **No over-admission, a proof sketch.** Let `T_min` and `T_max` be the
/// smallest and largest emission intervals, and `b_max` the largest burst,
/// that a tier has had between `t₀` and `t`, and let `n` requests of cost
/// 1 be admitted in `[t₀, t]`. Each admission sets `TAT ← max(TAT, now) +
/// T` for the `T` in force, so after the first the TAT is at least
/// `t₀ + T_min`, and after the `n`-th at least `t₀ + n·T_min`. An admission
/// at `now` leaves `TAT ≤ now + b·T ≤ t + b_max·T_max` (the admission test
/// above). Hence `n ≤ (t − t₀ + b_max·T_max) / T_min`: no schedule of
/// reloads lets a client exceed the tightest rate-and-burst bound of the
/// quotas it had, and with one quota throughout this is GCRA's own bound
/// `(t − t₀)/T + b`. A reload that *reset* a client (a new table) would
/// grant a full burst per reload, which this bound rules out once reloads
/// are frequent: `tests/tower_reload.rs` checks both the exact model
/// across a switch and this bound under load over loopback HTTP.
pub struct Reloader<C> {
    shared: Arc<Shared<ConfigKey, KeyedTiers, C>>,
}

impl<C> Clone for Reloader<C> {
    fn clone(&self) -> Self {
        Reloader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> core::fmt::Debug for Reloader<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reloader")
            .field("tiers", &self.shared.live.load().announce.names)
            .finish_non_exhaustive()
    }
}

impl<C: Clock + Send + Sync + 'static> RateLimitLayer<ConfigKey, KeyedTiers, C> {
    /// The handle that reloads this layer (and every clone of it and of
    /// its services). Only a layer made by [`LayerConfig::build`] has a
    /// configuration to change: on another, [`Reloader::apply`] says so.
    pub fn reloader(&self) -> Reloader<C> {
        Reloader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: Clock + Send + Sync + 'static> Reloader<C> {
    fn lock(&self) -> MutexGuard<'_, Option<LayerConfig>> {
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
        match &*self.lock() {
            Some(c) => c.clone(),
            None => LayerConfig {
                key: super::config::KeyConfig {
                    client: super::config::KeySource::PeerIp,
                    endpoint: None,
                },
                tiers: Vec::new(),
                fields: Default::default(),
                keyless: Default::default(),
                challenge: None,
                when_full: crate::keyed::WhenFull::Deny,
                redis: None,
            },
        }
    }

    /// Makes `config` the rules in force, keeping every client's state
    /// (see [`Reloader`]); all or nothing: an error names the
    /// place of the first problem and changes nothing.
    pub fn apply(&self, config: &LayerConfig) -> Result<(), Error> {
        let mut applied = self.lock();
        self.apply_locked(&mut applied, config)
    }

    /// Sets (`Some`) or removes (`None`: the client follows the tier's
    /// default quota again) the override of one client in one tier, as
    /// [`apply`](Self::apply) with the configuration in force changed in
    /// that one place; every other client and tier is untouched.
    pub fn set_override(
        &self,
        tier: &str,
        client: &str,
        quota: Option<QuotaSpec>,
    ) -> Result<(), Error> {
        let mut applied = self.lock();
        let Some(mut next) = applied.clone() else {
            return Err(not_configured());
        };
        let Some(t) = next.tiers.iter_mut().find(|t| t.name == tier) else {
            return Err(Error::new(
                "tiers",
                format_args!("no tier is named {tier:?}"),
            ));
        };
        match quota {
            Some(q) => {
                t.overrides.insert(String::from(client), q);
            }
            None => {
                t.overrides.remove(client);
            }
        }
        self.apply_locked(&mut applied, &next)
    }

    /// The `limiter` label of the layer's series ("" without `metrics`).
    fn metrics_name(&self) -> &str {
        #[cfg(feature = "metrics")]
        return &self.shared.metrics_name;
        #[cfg(not(feature = "metrics"))]
        ""
    }

    fn apply_locked(
        &self,
        applied: &mut Option<LayerConfig>,
        config: &LayerConfig,
    ) -> Result<(), Error> {
        let Some(old) = applied.as_ref() else {
            return Err(not_configured());
        };
        let fixed = |field: &str| {
            Error::new(
                field,
                "fixed when the layer is built: build a new layer to change it",
            )
        };
        if config.key != old.key {
            return Err(fixed("key"));
        }
        if config.fields != old.fields {
            return Err(fixed("fields"));
        }
        if config.keyless != old.keyless {
            return Err(fixed("keyless"));
        }
        if config.challenge != old.challenge {
            return Err(fixed("challenge"));
        }
        if config.when_full != old.when_full {
            return Err(fixed("when_full"));
        }
        if config.redis.is_some() {
            return Err(fixed("redis"));
        }
        if config.tiers.is_empty() {
            return Err(Error::new("tiers", super::ConfigError::NoTiers));
        }
        let current = self.shared.live.load_full();
        let hz = current.announce.hz;
        let plans = config.plan_tiers(hz, Some(&*current.backend))?;
        let infos = plans_info(&plans);
        let announce = Announce::new(&infos, None, self.shared.fields, self.metrics_name())
            .map_err(|e| Error::new("tiers", e))?;
        // Checked: from here on nothing fails.
        #[allow(unused_mut)]
        let mut backend = KeyedTiers {
            tiers: plans.into_iter().map(|p| p.commit()).collect(),
            when_full: config.when_full,
            #[cfg(feature = "metrics")]
            metrics: Vec::new(),
        };
        // A kept tier keeps its table's series (and what they have
        // published); a new tier's are registered.
        #[cfg(feature = "metrics")]
        backend.carry_metrics(&current.backend, self.metrics_name());
        debug_assert_eq!(backend.tiers(), infos);
        self.shared.live.store(Arc::new(Live {
            backend: Arc::new(backend),
            announce: Arc::new(announce),
        }));
        *applied = Some(config.clone());
        Ok(())
    }
}

/// The tiers a set of plans will announce once committed.
fn plans_info(plans: &[super::config::TierPlan]) -> Vec<super::TierInfo> {
    plans.iter().map(|p| p.info()).collect()
}

fn not_configured() -> Error {
    Error::new(
        "",
        "this layer was not built from a LayerConfig: it has no configuration to change",
    )
}
