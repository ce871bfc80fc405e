//! The HTTP layer's rules as plain data (feature `serde`): where the key
//! comes from, the tiers, the header families, what a keyless request gets
//! and what a full table does. [`LayerConfig::build`] makes the layer
//! through the public builder, so a configured layer is exactly one
//! written in code.
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
//! [[tiers]]
//! name = "endpoint"
//! quota = { rate = 10, per = "s" }
//! scope = "client_and_endpoint"
//! capacity = 100000
//! "#;
//! let config: LayerConfig =
//!     cellrate_config::from_deserializer(toml::Deserializer::parse(text).unwrap()).unwrap();
//! // axum: Router::new().route("/orders", get(handler)).route_layer(layer)
//! let _layer = config.build(StdClock::new(), StdClock::HZ).unwrap();
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
//! | `tiers[i].algorithm` | `"gcra"`, `"token_bucket"`, `"leaky_bucket"`, `"fixed_window"`, `"sliding_window"`, `"bucketed_window"` (with `buckets`), `"sliding_log"`: the quota's rate per period | `"gcra"` |
//! | `tiers[i].capacity` | live keys the tier's table holds, ≥ 1 | required |
//! | `tiers[i].overrides` | a table `client key → quota`: that client's own quota in this tier (on each endpoint of a `client_and_endpoint` tier), of the tier's algorithm | none |
//! | `tiers[i].max_overrides` | clients that can have an override in the tier at a time, counting those set at run time, 1 to 4 096 | 64 |
//! | `tiers[i].routes` | the matched routes (`["/search", "/orders/{id}"]`) this tier decides, with `key.endpoint = "route"`; in process only; see [`LayerConfig::check_routes`] | every route |
//! | `fields` | `"ietf"`, `"legacy"`, `"both"`, `"neither"` ([`Fields`]) | `"both"` |
//! | `keyless` | `{ reject = <a 4xx status but 407> }`, `"shared"` ([`Keyless`]) | `{ reject = 400 }` |
//! | `challenge` | `{ scheme = "Bearer", realm = "api" }`: the `WWW-Authenticate` of a keyless 401 ([`RateLimitBuilder::challenge`](super::RateLimitBuilder::challenge)); required with `reject = 401` | none |
//! | `when_full` | `"deny"`, `"admit"`, `"shared"` ([`WhenFull`]) | `"deny"` |
//! | `metrics_name` | the `limiter` label of the layer's series (feature `metrics`; checked and unused without it) | `"default"` |
//! | `redis` | a `RedisRules` table (feature `redis`; without it the section is an error): the tiers live in Redis (`LayerConfig::build_redis`) | none (in process) |
//!
//! A request is decided, all or nothing, by the tiers of its route (those
//! whose `routes` name it and those without), in order; its
//! `RateLimit-Policy` lists those only. An override decides and announces
//! its client in its tier. New rules apply at run time, keeping every
//! client's state ([`Reloader`](super::Reloader)); a kept tier's algorithm
//! may change only within the GCRA family (another is refused at
//! `tiers[i].algorithm`: give the tier a new name); design:
//! docs/design/tower.md.

use std::collections::BTreeMap;

use http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::{Fields, Keyless};
use cellrate::config::QuotaSpec;
use cellrate::keyed::WhenFull;

mod algorithm;
mod build;
mod key;
mod plan;
#[cfg(feature = "redis")]
mod redis;
mod routes;

pub use key::ConfigKey;
pub(crate) use plan::{Applied, TierPlan};

/// Where one part of a key comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeySource {
    /// A request header ([`HeaderKey`](crate::HeaderKey)): `{ header = "x-api-key" }`.
    Header(String),
    /// The peer's address ([`PeerIp`](crate::PeerIp)): `"peer_ip"`.
    PeerIp,
    /// The matched route ([`Route`](crate::Route)): `"route"`.
    Route,
}

/// The key: a client and, optionally, an endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
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
    /// The client ([`KeyedTiers::per_client`](crate::KeyedTiers::per_client)).
    #[default]
    Client,
    /// (client, endpoint) ([`KeyedTiers::per_client_and_endpoint`](crate::KeyedTiers::per_client_and_endpoint)).
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
    /// address with `key.client = "peer_ip"`); in a tier scoped
    /// `client_and_endpoint`, the client's quota on each of its endpoints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, QuotaSpec>,
    /// How many clients can have an override in this tier at a time,
    /// counting the ones set at run time ([`Reloader`](super::Reloader));
    /// default [`DEFAULT_MAX_OVERRIDES`]. Removing an override frees its
    /// slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_overrides: Option<usize>,
    /// The matched routes (`key.endpoint = "route"`) this tier decides;
    /// `None`: every route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
    /// The algorithm, by its configuration name (`"fixed_window"`, …, as
    /// [`LimiterConfig`](cellrate::compose::LimiterConfig) reads it);
    /// `None`: GCRA. A window or sliding-log tier admits its quota's rate
    /// count per period (no burst).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<cellrate::compose::AlgorithmKind>,
    /// The buckets of a `bucketed_window` tier (required there, refused
    /// elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u32>,
}

/// The override slots of a tier whose `max_overrides` is not set.
pub const DEFAULT_MAX_OVERRIDES: usize = 64;

/// The most override slots a tier may have (each check of the tier reads
/// the bound ones).
pub const MAX_OVERRIDES: usize = 4_096;

fn both() -> Fields {
    Fields::Both
}

fn is_both(f: &Fields) -> bool {
    *f == Fields::Both
}

fn reject_400() -> Keyless {
    Keyless::Reject(StatusCode::BAD_REQUEST)
}

fn is_reject_400(k: &Keyless) -> bool {
    *k == reject_400()
}

fn deny() -> WhenFull {
    WhenFull::Deny
}

fn is_deny(w: &WhenFull) -> bool {
    *w == WhenFull::Deny
}

/// The Redis backend of a layer (`LayerConfig::build_redis`, feature
/// `redis`):
///
/// ```toml
/// [redis]
/// target = { standalone = "redis://127.0.0.1:6379/" }   # or { cluster = ["redis://…", …] }
/// prefix = "gw"                                         # default "rl"
/// failure = { fallback = ["20/min", "6/min"] }          # or "open", "closed"
/// timeout_ms = 200                                      # default 100
/// reconnect_ms = 250                                    # default 250
/// fallback_capacity = 65536                             # default 65 536
/// ```
///
/// With `redis`, a tier's `capacity` bounds nothing in Redis, and
/// `max_overrides` only how many overrides the configuration lists (an
/// override is a limiter of its own for that client, over the same keys);
/// the fallback's table holds `fallback_capacity` clients per tier.
///
/// `target` and `failure` are cellrate-redis's own [`Target`] and
/// [`FailurePolicy`]: a bad URL is an error at `redis.target.standalone`
/// (or `.cluster`) while the file is read. A fallback quota is a bare
/// quota (its own `hz`, else [`DEFAULT_HZ`](cellrate::config::DEFAULT_HZ)):
/// the Redis client runs the fallback on its own µs clock and re-expresses
/// each quota there as it does every tier, so the layer's clock plays no
/// part in it.
///
/// [`Target`]: cellrate_redis::Target
/// [`FailurePolicy`]: cellrate_redis::FailurePolicy
#[cfg(feature = "redis")]
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisRules {
    /// Where.
    pub target: cellrate_redis::Target,
    /// The key prefix.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// What a check answers while Redis cannot.
    pub failure: cellrate_redis::FailurePolicy,
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

#[cfg(feature = "redis")]
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
#[non_exhaustive]
// Without `redis`, its one private field reads a `[redis]` section as an error.
#[cfg_attr(not(feature = "redis"), allow(clippy::manual_non_exhaustive))]
pub struct LayerConfig {
    /// Where the key comes from.
    pub key: KeyConfig,
    /// The tiers, all or nothing, in order.
    pub tiers: Vec<LayerTier>,
    /// The header families.
    #[serde(default = "both", skip_serializing_if = "is_both")]
    pub fields: Fields,
    /// What a request without a key gets.
    #[serde(default = "reject_400", skip_serializing_if = "is_reject_400")]
    pub keyless: Keyless,
    /// The challenge of a keyless 401.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<Challenge>,
    /// What a full table does with a new key.
    #[serde(default = "deny", skip_serializing_if = "is_deny")]
    pub when_full: WhenFull,
    /// The Redis backend; `None`: in-process tables.
    #[cfg(feature = "redis")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisRules>,
    /// Without the `redis` feature a `[redis]` section is an error at its
    /// place, never ignored.
    #[cfg(not(feature = "redis"))]
    #[serde(
        default,
        rename = "redis",
        deserialize_with = "no_redis",
        skip_serializing
    )]
    no_redis: (),
    /// The `limiter` label of the layer's series (feature `metrics`);
    /// `None`: `"default"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_name: Option<String>,
}

impl LayerConfig {
    /// Rules keyed by `key` with these `tiers`, and every other field at
    /// its default (both header families, a keyless request refused with
    /// 400, a full table denying new keys, in-process tables).
    ///
    /// ```
    /// use cellrate_tower::config::{KeyConfig, KeySource, LayerConfig};
    /// let rules = LayerConfig::new(KeyConfig::new(KeySource::PeerIp), Vec::new());
    /// assert!(!rules.on_redis());
    /// ```
    pub fn new(key: KeyConfig, tiers: Vec<LayerTier>) -> Self {
        LayerConfig {
            key,
            tiers,
            fields: both(),
            keyless: reject_400(),
            challenge: None,
            when_full: deny(),
            #[cfg(feature = "redis")]
            redis: None,
            #[cfg(not(feature = "redis"))]
            no_redis: (),
            metrics_name: None,
        }
    }
}

/// A `[redis]` section read without the `redis` feature.
#[cfg(not(feature = "redis"))]
fn no_redis<'de, D: serde::Deserializer<'de>>(_: D) -> Result<(), D::Error> {
    Err(serde::de::Error::custom(
        "a Redis backend needs cellrate-tower's `redis` feature, which this build lacks",
    ))
}

impl LayerConfig {
    /// Whether the rules put the tiers in Redis (a `redis` section; always
    /// `false` without the `redis` feature, where such a section is an
    /// error when read).
    ///
    /// ```
    /// use cellrate_tower::config::{KeyConfig, KeySource, LayerConfig};
    /// let rules = LayerConfig::new(KeyConfig::new(KeySource::PeerIp), Vec::new());
    /// assert!(!rules.on_redis());
    /// ```
    pub fn on_redis(&self) -> bool {
        #[cfg(feature = "redis")]
        return self.redis.is_some();
        #[cfg(not(feature = "redis"))]
        false
    }
}

impl KeyConfig {
    /// A key of `client` alone (no endpoint).
    pub fn new(client: KeySource) -> Self {
        KeyConfig {
            client,
            endpoint: None,
        }
    }
}
