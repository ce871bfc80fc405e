//! The HTTP layer's rules as plain data (features `tower` and `serde`):
//! where the key comes from, the tiers with their quotas, scopes and
//! capacities, the header families, what a keyless request gets and what a
//! full table does. [`LayerConfig::build`] makes the layer through the
//! public builder ([`RateLimitLayer::builder`]), so a configured layer is
//! exactly one written in code.
//!
//! ```
//! use cellrate::StdClock;
//! use cellrate_tower::config::LayerConfig;
//!
//! let text = r#"
//! fields = "both"                  # ietf, legacy, both, neither
//! keyless = { reject = 401 }       # or "shared"; default { reject = 400 }
//! challenge = { scheme = "Bearer", realm = "api" }  # a 401 needs one
//! when_full = "deny"               # admit, shared
//! key = { client = { header = "x-api-key" }, endpoint = "route" }
//!
//! [[tiers]]
//! name = "key"
//! quota = "100/min, burst 20"
//! capacity = 100000
//!
//! [[tiers]]
//! name = "endpoint"
//! quota = { rate = 10, per = "s" }
//! scope = "client_and_endpoint"
//! capacity = 100000
//! "#;
//! let config: LayerConfig = cellrate::config::from_deserializer(
//!     toml::Deserializer::parse(text).unwrap(),
//! ).unwrap();
//! let layer = config.build(StdClock::new(), StdClock::HZ).unwrap();
//! // axum: Router::new().route("/orders", get(handler)).route_layer(layer)
//! # let _ = layer;
//! ```
//!
//! # Fields
//!
//! | field | values | default |
//! |---|---|---|
//! | `key.client` | `{ header = "name" }`, `"peer_ip"`, `"route"` | required |
//! | `key.endpoint` | the same, usually `"route"` | none (client only) |
//! | `tiers[i].name` | 1 to 32 printable ASCII characters, unique | required |
//! | `tiers[i].quota` | a quota in either [form](cellrate::config#quotas-two-forms), at the clock's `hz` | required |
//! | `tiers[i].scope` | `"client"`, `"client_and_endpoint"` | `"client"` |
//! | `tiers[i].capacity` | live keys the tier's table holds, ≥ 1 | required |
//! | `tiers[i].overrides` | a table `client key → quota`: that client's own quota in this tier (scope `"client"` only) | none |
//! | `tiers[i].routes` | the matched routes (`["/search", "/orders/{id}"]`) this tier decides, with `key.endpoint = "route"`; a request on another route is decided by the tiers without `routes` (at least one). In process only: on Redis, give each group of routes its own layer (tiers of one name under one prefix share their state on the server) | every route |
//! | `tiers[i].max_overrides` | clients that can ever have an override in the tier, counting those added at run time, 1 to 4 096 | 64 |
//! | `fields` | `"ietf"`, `"legacy"`, `"both"`, `"neither"` ([`Fields`]) | `"both"` |
//! | `keyless` | `{ reject = <a 4xx status but 407> }`, `"shared"` ([`Keyless`]) | `{ reject = 400 }` |
//! | `challenge` | `{ scheme = "Bearer", realm = "api" }`: the `WWW-Authenticate` a keyless 401 carries ([`RateLimitBuilder::challenge`](super::RateLimitBuilder::challenge)); required with `reject = 401` | none |
//! | `when_full` | `"deny"`, `"admit"`, `"shared"` ([`WhenFull`]) | `"deny"` |
//! | `metrics_name` | the `limiter` label of the layer's series ([`RateLimitBuilder::metrics_name`](super::RateLimitBuilder::metrics_name); feature `metrics`, checked and unused without it) | `"default"` |
//! | `redis` | a [`RedisRules`] table: the tiers live in Redis (`LayerConfig::build_redis`, feature `redis`) | none (in process) |
//!
//! With `redis`, `capacity` bounds nothing in Redis, and `max_overrides`
//! only how many overrides the configuration lists (an override is a
//! limiter of its own for that client, over the same keys); the fallback's table holds `redis.fallback_capacity` clients per
//! tier:
//!
//! ```toml
//! [redis]
//! target = { standalone = "redis://127.0.0.1:6379/" }   # or { cluster = ["redis://…", …] }
//! prefix = "gw"                                         # default "rl"
//! failure = { fallback = ["20/min", "6/min"] }          # or "open", "closed"
//! timeout_ms = 200                                      # default 100
//! reconnect_ms = 250                                    # default 250
//! fallback_capacity = 65536                             # default 65 536
//! ```
//!
//! A layer built from a config can take a new one at run time, keeping
//! every client's state: see [`Reloader`](super::Reloader).
//!
//! A request is decided, all or nothing, by the tiers of its route: those
//! whose `routes` name it and those without `routes`, in the file's
//! order; its `RateLimit-Policy` lists those tiers only.

use std::collections::BTreeMap;
use std::format;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use http::request::Parts;
use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::{
    Extract, Fields, HeaderKey, KeyError, KeyPart, KeyedTiers, Keyless, Part, PeerIp,
    RateLimitLayer, RequestKey, Route,
};
use cellrate::config::{Error, QuotaSpec};
use cellrate::keyed::WhenFull;
use cellrate::Clock;

/// Where one part of a key comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// A request header ([`HeaderKey`]): `{ header = "x-api-key" }`.
    Header(String),
    /// The peer's address ([`PeerIp`]): `"peer_ip"`.
    PeerIp,
    /// The matched route ([`Route`]): `"route"`.
    Route,
}

/// The key: a client and, optionally, an endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// Who the client is.
    pub client: KeySource,
    /// The endpoint, for tiers scoped `client_and_endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<KeySource>,
}

/// What a tier is keyed by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TierScope {
    /// The client ([`KeyedTiers::per_client`]).
    #[default]
    Client,
    /// (client, endpoint) ([`KeyedTiers::per_client_and_endpoint`]).
    ClientAndEndpoint,
}

/// One tier of the layer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerTier {
    /// The name announced in `RateLimit-Policy`.
    pub name: String,
    /// Its quota.
    pub quota: QuotaSpec,
    /// What it is keyed by.
    #[serde(default)]
    pub scope: TierScope,
    /// The most live keys its table holds.
    pub capacity: usize,
    /// Per-client quotas, by the client's key (a header value, or an
    /// address with `key.client = "peer_ip"`); only in a tier scoped
    /// `client`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, QuotaSpec>,
    /// How many clients can ever have an override in this tier, counting
    /// the ones added at run time ([`Reloader`](super::Reloader));
    /// default [`DEFAULT_MAX_OVERRIDES`]. A client keeps its slot once it
    /// had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_overrides: Option<usize>,
    /// The matched routes (`key.endpoint = "route"`) this tier decides;
    /// `None`: every route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
}

/// The override slots of a tier whose `max_overrides` is not set.
pub const DEFAULT_MAX_OVERRIDES: usize = 64;

/// The most override slots a tier may have (each check of the tier reads
/// the bound ones).
pub const MAX_OVERRIDES: usize = 4_096;

/// [`Fields`] as data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderMode {
    /// [`Fields::Ietf`].
    Ietf,
    /// [`Fields::Legacy`].
    Legacy,
    /// [`Fields::Both`].
    #[default]
    Both,
    /// [`Fields::Neither`].
    Neither,
}

impl From<HeaderMode> for Fields {
    fn from(m: HeaderMode) -> Fields {
        match m {
            HeaderMode::Ietf => Fields::Ietf,
            HeaderMode::Legacy => Fields::Legacy,
            HeaderMode::Both => Fields::Both,
            HeaderMode::Neither => Fields::Neither,
        }
    }
}

/// [`Keyless`] as data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeylessPolicy {
    /// Answer with this status (a 4xx but 407; 401 only with a
    /// [`Challenge`]): `{ reject = 400 }`.
    Reject(u16),
    /// Charge one shared client: `"shared"`.
    Shared,
}

impl Default for KeylessPolicy {
    fn default() -> Self {
        KeylessPolicy::Reject(400)
    }
}

fn deny() -> WhenFull {
    WhenFull::Deny
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_deny(w: &WhenFull) -> bool {
    *w == WhenFull::Deny
}

/// Where the Redis of a layer is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedisTarget {
    /// A standalone server: `{ standalone = "redis://host:6379/" }`.
    Standalone(String),
    /// A Cluster, from some of its nodes: `{ cluster = ["redis://…"] }`.
    Cluster(Vec<String>),
}

/// What a check answers while Redis cannot (the Redis backend's
/// `FailurePolicy`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// Admit everything: `"open"`.
    Open,
    /// Deny everything (503): `"closed"`.
    Closed,
    /// Local quotas, one per tier in order: `{ fallback = ["20/min"] }`.
    Fallback(Vec<QuotaSpec>),
}

/// The Redis backend of a layer; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisRules {
    /// Where.
    pub target: RedisTarget,
    /// The key prefix.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// What a check answers while Redis cannot.
    pub failure: FailureMode,
    /// Each call's deadline in milliseconds (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The reconnect interval in milliseconds (default 250).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_ms: Option<u64>,
    /// Clients per tier in the fallback's table (default 65 536).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_capacity: Option<usize>,
}

fn default_prefix() -> String {
    String::from("rl")
}

/// The `WWW-Authenticate: {scheme} realm="{realm}"` challenge of a keyless
/// 401 (RFC 9110 §15.5.2): `{ scheme = "Bearer", realm = "api" }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Challenge {
    /// The authentication scheme, an HTTP token.
    pub scheme: String,
    /// The realm: printable ASCII without `"` or `\`.
    pub realm: String,
}

/// The layer's rules; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerConfig {
    /// Where the key comes from.
    pub key: KeyConfig,
    /// The tiers, all or nothing, in order.
    pub tiers: Vec<LayerTier>,
    /// The header families.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fields: HeaderMode,
    /// What a request without a key gets.
    #[serde(default, skip_serializing_if = "is_default")]
    pub keyless: KeylessPolicy,
    /// The challenge of a keyless 401.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<Challenge>,
    /// What a full table does with a new key.
    #[serde(default = "deny", skip_serializing_if = "is_deny")]
    pub when_full: WhenFull,
    /// The Redis backend; `None`: in-process tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisRules>,
    /// The `limiter` label of the layer's series (feature `metrics`);
    /// `None`: `"default"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_name: Option<String>,
}

impl LayerConfig {
    /// `builder` with the series' label of `metrics_name`, checked (with
    /// or without the `metrics` feature: a file is valid or not whatever
    /// the build).
    fn named<E: super::Extract, B: super::Backend, C: cellrate::Clock + Send + Sync + 'static>(
        &self,
        builder: super::RateLimitBuilder<E, B, C>,
    ) -> Result<super::RateLimitBuilder<E, B, C>, Error> {
        let Some(name) = &self.metrics_name else {
            return Ok(builder);
        };
        super::check_name(name).map_err(|e| Error::new("metrics_name", e))?;
        #[cfg(feature = "metrics")]
        return Ok(builder.metrics_name(name));
        #[cfg(not(feature = "metrics"))]
        Ok(builder)
    }
}

/// Where a refusal of [`RateLimitBuilder::build`](super::RateLimitBuilder::build)
/// belongs in the file.
fn builder_error(e: super::ConfigError) -> Error {
    match e {
        super::ConfigError::Keyless => Error::new("keyless.reject", e),
        super::ConfigError::Challenge => Error::new("challenge", e),
        _ => Error::new("tiers", e),
    }
}

/// The configuration a layer was built from (and reloaded to), and the
/// frequency of its clock that every quota of it is read at.
pub(super) struct Applied {
    pub(super) config: LayerConfig,
    pub(super) hz: u64,
}

/// A tier table, kept from the rules in force or new.
pub(super) enum Planned {
    Kept(Arc<super::backend::KeyedTier>),
    New(std::boxed::Box<super::backend::KeyedTier>),
}

impl Planned {
    fn tier(&self) -> &super::backend::KeyedTier {
        match self {
            Planned::Kept(t) => t,
            Planned::New(t) => t,
        }
    }
}

/// One tier of a checked configuration, its quotas at its table's scale.
pub(super) struct TierPlan {
    tier: Planned,
    default: cellrate::Quota,
    overrides: Vec<(cellrate::keyed::KeyId, cellrate::Quota)>,
}

impl TierPlan {
    /// What the tier announces once committed.
    pub(super) fn info(&self) -> super::TierInfo {
        super::TierInfo::from_quota(&self.tier.tier().name, &self.default)
    }
    /// Sets the tier's quotas (each switches on its own, whole) and hands
    /// its table on.
    pub(super) fn commit(self) -> Arc<super::backend::KeyedTier> {
        let tier = match self.tier {
            Planned::Kept(t) => t,
            Planned::New(t) => Arc::from(t),
        };
        tier.apply(self.default, &self.overrides);
        tier
    }
}

/// A key part chosen by configuration.
#[derive(Clone, Debug)]
enum Source {
    Header(HeaderKey),
    PeerIp,
    Route,
}

impl KeyPart for Source {
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError> {
        match self {
            Source::Header(h) => h.part(req),
            Source::PeerIp => PeerIp.part(req),
            Source::Route => Route.part(req),
        }
    }
}

/// The extractor a [`KeyConfig`] describes: a client part and an optional
/// endpoint part, read as the built-in extractors read them.
#[derive(Clone, Debug)]
pub struct ConfigKey {
    client: Source,
    endpoint: Option<Source>,
}

impl Extract for ConfigKey {
    fn extract<'r>(&self, req: &'r Parts) -> Result<RequestKey<'r>, KeyError> {
        match &self.endpoint {
            None => Ok(RequestKey::new(self.client.part(req)?, None)),
            // As the `(client, endpoint)` pair reads them.
            Some(e) => {
                let client = self.client.part(req)?;
                Ok(RequestKey::new(client, Some(e.part(req)?)))
            }
        }
    }
    fn scope<'r>(&self, req: &'r Parts) -> Option<Part<'r>> {
        self.endpoint.as_ref().and_then(|e| e.part(req).ok())
    }
}

impl KeySource {
    fn build(&self, place: &str) -> Result<Source, Error> {
        Ok(match self {
            KeySource::Header(name) => {
                Source::Header(HeaderKey::try_new(name).ok_or_else(|| {
                    Error::new(format!("{place}.header"), "not a valid header name")
                })?)
            }
            KeySource::PeerIp => Source::PeerIp,
            KeySource::Route => Source::Route,
        })
    }
}

impl KeyConfig {
    /// The extractor.
    ///
    /// ```
    /// use cellrate_tower::config::{KeyConfig, KeySource};
    /// let bad = KeyConfig { client: KeySource::Header("bad name".into()), endpoint: None };
    /// assert_eq!(bad.build().unwrap_err().to_string(), "key.client.header: not a valid header name");
    /// ```
    pub fn build(&self) -> Result<ConfigKey, Error> {
        Ok(ConfigKey {
            client: self.client.build("key.client")?,
            endpoint: match &self.endpoint {
                None => None,
                Some(e) => Some(e.build("key.endpoint")?),
            },
        })
    }
}

impl LayerConfig {
    /// The layer, its quotas at `hz` (the frequency of `clock`; a tier
    /// quota's own `hz` must equal it). Errors name the field:
    /// `tiers[1].quota: …`, `keyless: …`.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = serde_json::from_str(r#"{
    ///     "key": {"client": "peer_ip"},
    ///     "tiers": [{"name": "ip", "quota": "10/s", "scope": "client_and_endpoint", "capacity": 10}]
    /// }"#).unwrap();
    /// assert_eq!(
    ///     c.build(StdClock::new(), StdClock::HZ).unwrap_err().to_string(),
    ///     "tiers[0].scope: client_and_endpoint needs key.endpoint"
    /// );
    /// ```
    pub fn build<C: Clock + Send + Sync + 'static>(
        &self,
        clock: C,
        hz: u64,
    ) -> Result<RateLimitLayer<ConfigKey, KeyedTiers, C>, Error> {
        if self.redis.is_some() {
            return Err(Error::new(
                "redis",
                "a Redis backend is built by LayerConfig::build_redis (feature redis)",
            ));
        }
        let (key, keyless) = self.key_and_keyless()?;
        let plan = self.plan_tiers(hz, None)?;
        let routes = self.routes()?;
        let tiers = KeyedTiers {
            tiers: plan.into_iter().map(|p| p.commit()).collect(),
            when_full: self.when_full,
            routes,
            #[cfg(feature = "metrics")]
            metrics: Vec::new(),
        };
        let builder = RateLimitLayer::builder(key, tiers, clock)
            .fields(self.fields.into())
            .keyless(keyless);
        let builder = self.named(builder)?;
        let builder = match &self.challenge {
            Some(c) => builder.challenge(&c.scheme, &c.realm),
            None => builder,
        };
        let layer = builder.build().map_err(builder_error)?;
        if let Ok(mut applied) = layer.shared.applied.lock() {
            *applied = Some(Applied {
                config: self.clone(),
                hz,
            });
        }
        Ok(layer)
    }

    /// Which tiers decide which route, checked: `None` when no tier is
    /// limited to some routes. Each route list names at least one route,
    /// each a matched route (`/orders/{id}`) read as `key.endpoint =
    /// "route"` reads it, and some tier (limited to no route) decides every
    /// request.
    pub(super) fn routes(&self) -> Result<Option<super::backend::Routes>, Error> {
        if self.tiers.iter().all(|t| t.routes.is_none()) {
            return Ok(None);
        }
        for (i, t) in self.tiers.iter().enumerate() {
            let Some(routes) = &t.routes else { continue };
            let place = format!("tiers[{i}].routes");
            if self.key.endpoint != Some(KeySource::Route) {
                return Err(Error::new(
                    place,
                    "a tier limited to some routes needs key.endpoint = \"route\"",
                ));
            }
            if routes.is_empty() {
                return Err(Error::new(
                    place,
                    "names no route: leave it out for every route",
                ));
            }
            for (j, r) in routes.iter().enumerate() {
                if r.is_empty() || r.len() > super::MAX_KEY_LEN || !r.starts_with('/') {
                    return Err(Error::new(
                        format!("{place}[{j}]"),
                        format_args!(
                            "a route is a matched path such as \"/orders/{{id}}\", 1 to {} bytes",
                            super::MAX_KEY_LEN
                        ),
                    ));
                }
                if routes[..j].contains(r) {
                    return Err(Error::new(
                        format!("{place}[{j}]"),
                        format_args!("route {r:?} is named twice"),
                    ));
                }
            }
        }
        if self.tiers.iter().all(|t| t.routes.is_some()) {
            return Err(Error::new(
                "tiers",
                "every tier is limited to some routes: the others would pass unlimited; \
                 give one tier no routes, or limit only those routes' layer",
            ));
        }
        let lists: Vec<Option<&[String]>> =
            self.tiers.iter().map(|t| t.routes.as_deref()).collect();
        Ok(Some(super::backend::Routes::new(&lists)))
    }

    /// The Redis policy, failure policy and per-client policies of the
    /// tiers at `hz` (`redis` must be set): what
    /// [`build_redis`](Self::build_redis) and a reload of a Redis layer
    /// check and make.
    #[cfg(feature = "redis")]
    pub(super) fn redis_policy(&self, hz: u64) -> Result<super::redis::RedisPlan, Error> {
        use cellrate_redis::{FailurePolicy, RedisPolicy, RedisTier};
        let Some(rules) = &self.redis else {
            return Err(Error::new("redis", "no Redis backend is configured"));
        };
        if self.tiers.is_empty() {
            return Err(Error::new("tiers", super::ConfigError::NoTiers));
        }
        if self.tiers.len() > super::MAX_TIERS {
            return Err(Error::new("tiers", super::ConfigError::TooManyTiers));
        }
        let mut tiers = Vec::with_capacity(self.tiers.len());
        for (i, t) in self.tiers.iter().enumerate() {
            let quota = self.tier_quota(i, hz)?;
            if t.routes.is_some() {
                return Err(Error::new(
                    format!("tiers[{i}].routes"),
                    "on Redis every tier decides every route: give each group of \
                     routes a layer of its own (an axum route_layer); tiers of one name \
                     under one prefix share their clients' state on the server",
                ));
            }
            let tier = RedisTier::new(t.name.as_str(), quota)
                .map_err(|e| Error::new(format!("tiers[{i}]"), e))?;
            tiers.push(match t.scope {
                TierScope::Client => tier,
                TierScope::ClientAndEndpoint => tier.per_scope(),
            });
        }
        let policy = RedisPolicy::new(rules.prefix.as_str(), tiers.clone()).map_err(|e| {
            let place = match e {
                cellrate_redis::Error::InvalidKey => "redis.prefix",
                _ => "tiers",
            };
            Error::new(place, e)
        })?;
        // A client with an override in some tier: the policy with its own
        // quota in those tiers (the same keys, so the same state on the
        // server), decided apart from the others.
        let mut own: BTreeMap<String, (&str, Vec<RedisTier>)> = BTreeMap::new();
        for (i, t) in self.tiers.iter().enumerate() {
            self.check_overrides(i)?;
            for (client, spec) in &t.overrides {
                let at = format!("tiers[{i}].overrides.{client}");
                let q = self.override_quota(spec, hz, &at)?;
                let key = super::backend::owned(self.client_part(client, &at)?);
                let tier = RedisTier::new(t.name.as_str(), q).map_err(|e| Error::new(at, e))?;
                own.entry(key)
                    .or_insert_with(|| (client.as_str(), tiers.clone()))
                    .1[i] = tier;
            }
        }
        let mut overrides = Vec::with_capacity(own.len());
        for (key, (client, tiers)) in own {
            let p = RedisPolicy::new(rules.prefix.as_str(), tiers)
                .map_err(|e| Error::new(format!("tiers.overrides.{client}"), e))?;
            overrides.push((key, p));
        }
        let failure = match &rules.failure {
            FailureMode::Open => FailurePolicy::Open,
            FailureMode::Closed => FailurePolicy::Closed,
            FailureMode::Fallback(specs) => {
                if specs.len() != self.tiers.len() {
                    let plural = |n: usize| if n == 1 { "" } else { "s" };
                    return Err(Error::new(
                        "redis.failure.fallback",
                        format_args!(
                            "one quota per tier: {} tier{}, {} quota{}",
                            self.tiers.len(),
                            plural(self.tiers.len()),
                            specs.len(),
                            plural(specs.len())
                        ),
                    ));
                }
                let mut quotas = Vec::with_capacity(specs.len());
                for (j, spec) in specs.iter().enumerate() {
                    let place = || format!("redis.failure.fallback[{j}]");
                    let q = spec.quota(hz).map_err(|e| Error::new(place(), e))?;
                    if q.hz() != hz {
                        return Err(Error::new(
                            place(),
                            "a fallback quota must count ticks at the clock's frequency",
                        ));
                    }
                    quotas.push(q);
                }
                FailurePolicy::Fallback(quotas)
            }
        };
        Ok(super::redis::RedisPlan {
            policy,
            failure,
            overrides,
        })
    }

    /// Every tier checked and made ready at `hz`: a tier of `old` with the
    /// same name keeps its table (its scope, capacity and override slots
    /// must then be the same), the others get new tables. Nothing in `old`
    /// changes until the plans are committed.
    pub(super) fn plan_tiers(
        &self,
        hz: u64,
        old: Option<&KeyedTiers>,
    ) -> Result<Vec<TierPlan>, Error> {
        if self.tiers.len() > super::MAX_TIERS {
            return Err(Error::new("tiers", super::ConfigError::TooManyTiers));
        }
        let mut plans = Vec::with_capacity(self.tiers.len());
        for (i, t) in self.tiers.iter().enumerate() {
            let quota = self.tier_quota(i, hz)?;
            let place = |field: &str| format!("tiers[{i}].{field}");
            super::check_name(&t.name).map_err(|e| Error::new(place("name"), e))?;
            // A size no allocator grants is an error here, not an abort.
            cellrate::config::check_capacity(t.capacity)
                .map_err(|e| Error::new(place("capacity"), e.message()))?;
            let max_overrides = self.check_overrides(i)?;
            let scope = match t.scope {
                TierScope::Client => super::backend::Scope::Client,
                TierScope::ClientAndEndpoint => super::backend::Scope::ClientAndEndpoint,
            };
            let existing = old.and_then(|o| o.tiers.iter().find(|k| k.name == t.name));
            let tier = match existing {
                Some(k) => {
                    let fixed = |field: &str| {
                        Error::new(
                            place(field),
                            format_args!(
                                "fixed while tier {:?} lives (its table keeps every client's state): \
                                 give the tier a new name to make a new table",
                                t.name
                            ),
                        )
                    };
                    if k.scope != scope {
                        return Err(fixed("scope"));
                    }
                    if k.table.capacity() != t.capacity {
                        return Err(fixed("capacity"));
                    }
                    if k.table.overrides().capacity() != max_overrides {
                        return Err(fixed("max_overrides"));
                    }
                    Planned::Kept(Arc::clone(k))
                }
                None => Planned::New(std::boxed::Box::new(super::backend::KeyedTier::new(
                    &t.name,
                    quota,
                    t.capacity,
                    max_overrides,
                    scope,
                    self.when_full,
                ))),
            };
            let table = tier.tier();
            // Every quota at the table's scale (that of the quota it was
            // made with), rounded toward admitting less; refused past 1 %.
            let fixed = table.quota();
            let rescale = |q: cellrate::Quota, place: &str| {
                q.rescaled(fixed.scale(), fixed.hz())
                    .map_err(|e| Error::new(place, e))
            };
            let default = rescale(quota, &place("quota"))?;
            let mut overrides = Vec::with_capacity(t.overrides.len());
            // Clients that will take a slot they do not have yet.
            let mut fresh = 0;
            for (client, spec) in &t.overrides {
                let at = format!("tiers[{i}].overrides.{client}");
                let q = rescale(self.override_quota(spec, hz, &at)?, &at)?;
                let id = self.client_id(&table.table, client, &at)?;
                let slots = table.table.overrides();
                if !slots.is_bound(id) {
                    fresh += 1;
                }
                if slots.bound_count() + fresh > max_overrides {
                    return Err(Error::new(
                        at,
                        format_args!(
                            "every one of the tier's {max_overrides} override slots is taken \
                             (a client keeps its slot once it had one): raise max_overrides \
                             under a new tier name"
                        ),
                    ));
                }
                overrides.push((id, q));
            }
            plans.push(TierPlan {
                tier,
                default,
                overrides,
            });
        }
        Ok(plans)
    }

    /// The table's id of the client named `client` (as the layer's client
    /// extractor reads it from a request).
    fn client_id(
        &self,
        table: &cellrate::keyed::KeyedBox<
            cellrate::keyed::LiveQuota,
            super::backend::LiveOverrides,
        >,
        client: &str,
        place: &str,
    ) -> Result<cellrate::keyed::KeyId, Error> {
        Ok(table.key_id(&cellrate::keyed::Hashed(self.client_part(client, place)?)))
    }

    /// The key part of the client named `client` in an override at `place`,
    /// as the layer's client extractor reads it from a request.
    fn client_part<'a>(&self, client: &'a str, place: &str) -> Result<Part<'a>, Error> {
        match self.key.client {
            KeySource::PeerIp => {
                let ip: std::net::IpAddr = client.parse().map_err(|_| {
                    Error::new(
                        place,
                        "key.client is peer_ip: an override names an IP address",
                    )
                })?;
                Ok(Part::Ip(ip))
            }
            KeySource::Header(_) | KeySource::Route => {
                if client.is_empty() || client.len() > super::MAX_KEY_LEN {
                    return Err(Error::new(
                        place,
                        format_args!("a client key is 1 to {} bytes", super::MAX_KEY_LEN),
                    ));
                }
                Ok(Part::Str(client))
            }
        }
    }

    /// Tier `i`'s override count and scope checked: its `max_overrides`.
    fn check_overrides(&self, i: usize) -> Result<usize, Error> {
        let t = &self.tiers[i];
        let place = |field: &str| format!("tiers[{i}].{field}");
        let max_overrides = t.max_overrides.unwrap_or(DEFAULT_MAX_OVERRIDES);
        if max_overrides > MAX_OVERRIDES {
            return Err(Error::new(
                place("max_overrides"),
                format_args!("at most {MAX_OVERRIDES}"),
            ));
        }
        if t.overrides.len() > max_overrides {
            return Err(Error::new(
                place("overrides"),
                format_args!(
                    "{} overrides, more than max_overrides ({max_overrides})",
                    t.overrides.len()
                ),
            ));
        }
        if t.scope == TierScope::ClientAndEndpoint && !t.overrides.is_empty() {
            return Err(Error::new(
                place("overrides"),
                "overrides name clients: only a tier scoped \"client\" has them",
            ));
        }
        Ok(max_overrides)
    }

    /// The override of `client` at `at` at `hz`.
    fn override_quota(
        &self,
        spec: &QuotaSpec,
        hz: u64,
        at: &str,
    ) -> Result<cellrate::Quota, Error> {
        let q = spec.quota(hz).map_err(|e| Error::new(at, e))?;
        if q.hz() != hz {
            return Err(Error::new(
                at,
                "an override must count ticks at the clock's frequency",
            ));
        }
        Ok(q)
    }

    /// The extractor and the keyless answer.
    fn key_and_keyless(&self) -> Result<(ConfigKey, Keyless), Error> {
        let key = self.key.build()?;
        let keyless = match self.keyless {
            KeylessPolicy::Shared => Keyless::Shared,
            // Which statuses may answer is the builder's rule (checked by
            // `build`, placed by `builder_error`).
            KeylessPolicy::Reject(code) => Keyless::Reject(
                StatusCode::from_u16(code)
                    .map_err(|_| Error::new("keyless.reject", "not an HTTP status code"))?,
            ),
        };
        if self.tiers.is_empty() {
            return Err(Error::new("tiers", super::ConfigError::NoTiers));
        }
        Ok((key, keyless))
    }

    /// Tier `i`'s quota at `hz`, its name and scope checked.
    fn tier_quota(&self, i: usize, hz: u64) -> Result<cellrate::Quota, Error> {
        let t = &self.tiers[i];
        let place = |field: &str| format!("tiers[{i}].{field}");
        if self.tiers[..i].iter().any(|u| u.name == t.name) {
            return Err(Error::new(
                place("name"),
                format_args!("tier name {:?} is used twice", t.name),
            ));
        }
        if t.scope == TierScope::ClientAndEndpoint && self.key.endpoint.is_none() {
            return Err(Error::new(
                place("scope"),
                "client_and_endpoint needs key.endpoint",
            ));
        }
        let quota = t
            .quota
            .quota(hz)
            .map_err(|e| Error::new(place("quota"), e))?;
        if quota.hz() != hz {
            return Err(Error::new(
                place("quota"),
                "a tier must count ticks at the clock's frequency",
            ));
        }
        Ok(quota)
    }

    /// The layer over Redis (`redis` must be set): the tiers' quotas at
    /// `hz`, in a policy under `redis.prefix`, the failure policy's
    /// fallback quotas at `hz` too, one per tier. Connects lazily, at the
    /// first request. Errors name the field (`redis.failure.fallback[1]`,
    /// `redis.target.standalone`).
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = toml::from_str(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "10/min", capacity = 1 }]
    ///     [redis]
    ///     target = { standalone = "redis://127.0.0.1:6379/" }
    ///     failure = { fallback = ["20/min", "5/s"] }
    /// "#).unwrap();
    /// assert_eq!(
    ///     c.build_redis(StdClock::new(), StdClock::HZ).unwrap_err().to_string(),
    ///     "redis.failure.fallback: one quota per tier: 1 tier, 2 quotas"
    /// );
    /// ```
    #[cfg(feature = "redis")]
    pub fn build_redis<C: Clock + Send + Sync + 'static>(
        &self,
        clock: C,
        hz: u64,
    ) -> Result<RateLimitLayer<ConfigKey, super::RedisAsync, C>, Error> {
        use cellrate_redis::{AsyncRedisGcra, RedisConfig, Target};
        let Some(rules) = &self.redis else {
            return Err(Error::new("redis", "no Redis backend is configured"));
        };
        let (key, keyless) = self.key_and_keyless()?;
        let plan = self.redis_policy(hz)?;
        let mut config =
            RedisConfig::new(plan.failure.clone()).with_fallback_when_full(self.when_full);
        if let Some(ms) = rules.timeout_ms {
            config = config.with_timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(ms) = rules.reconnect_ms {
            config = config.with_reconnect_interval(std::time::Duration::from_millis(ms));
        }
        if let Some(c) = rules.fallback_capacity {
            // Its tables are allocated when Redis first fails: a size no
            // allocator grants must fail here, while the file is read.
            cellrate::config::check_capacity(c)
                .map_err(|e| Error::new("redis.fallback_capacity", e.message()))?;
            config = config.with_fallback_capacity(c);
        }
        let target = match &rules.target {
            RedisTarget::Standalone(url) => {
                Target::standalone(url).map_err(|e| Error::new("redis.target.standalone", e))?
            }
            RedisTarget::Cluster(nodes) => {
                Target::cluster(nodes).map_err(|e| Error::new("redis.target.cluster", e))?
            }
        };
        let limiter = AsyncRedisGcra::new(target, plan.policy.clone(), config)
            .map_err(|e| Error::new("redis", e))?;
        let backend = super::RedisAsync::new(limiter)
            .reconfigured(plan)
            .map_err(|e| Error::new("redis", e))?;
        let builder = RateLimitLayer::builder(key, backend, clock)
            .fields(self.fields.into())
            .keyless(keyless);
        let builder = self.named(builder)?;
        let builder = match &self.challenge {
            Some(c) => builder.challenge(&c.scheme, &c.realm),
            None => builder,
        };
        let layer = builder.build().map_err(builder_error)?;
        if let Ok(mut applied) = layer.shared.applied.lock() {
            *applied = Some(Applied {
                config: self.clone(),
                hz,
            });
        }
        Ok(layer)
    }
}
