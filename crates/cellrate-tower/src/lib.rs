//! HTTP rate limiting as tower middleware: a [`Layer`](::tower::Layer) and
//! [`Service`](::tower::Service) for any `http::Request` service (axum,
//! hyper, tonic), over an in-process keyed table, all-or-nothing tiers,
//! Redis, or any [`RateLimiter`](cellrate::RateLimiter).
//!
//! ```
//! use cellrate::StdClock;
//! use cellrate_tower::{HeaderKey, KeyedTiers, RateLimitLayer, Route};
//! use cellrate::Quota;
//!
//! let hz = StdClock::HZ; // the quotas count the clock's ticks (ns)
//! let layer = RateLimitLayer::builder(
//!     (HeaderKey::new("x-api-key"), Route),
//!     KeyedTiers::new()
//!         .per_client("key", Quota::per_minute(10).at_hz(hz), 100_000).unwrap()
//!         .per_client_and_endpoint("endpoint", Quota::per_minute(3).at_hz(hz), 100_000).unwrap(),
//!     StdClock::new(),
//! )
//! .build()
//! .unwrap();
//! // axum: Router::new().route("/orders", get(handler)).route_layer(layer)
//! # let _ = layer;
//! ```
//!
//! # What a request gets
//!
//! 1. Its key is [extracted](Extract). No key: as [`Keyless`] says (400
//!    `missing rate-limit key` by default); a key that cannot be one: 400
//!    `invalid rate-limit key`; nothing found because of the server
//!    ([`KeyError::Unavailable`]): 500, logged once.
//! 2. Its weight (1 by default, [`RateLimitBuilder::weight`]; bytes with
//!    [`charge_body`](RateLimitBuilder::charge_body)) is checked at the
//!    [`Clock`](cellrate::Clock)'s time by the [`Backend`]: every tier must
//!    admit, and a request refused by one tier consumes from none.
//! 3. Admitted: the inner service answers, with the rate-limit fields
//!    ([`Fields`]). Refused: `429` with `Retry-After` and the fields. A
//!    weight above a tier's burst: `413` with `RateLimit-Policy` only. A
//!    backend that cannot decide: 500 (400 for a key it cannot store),
//!    with a fixed `text/plain` body; internal errors are never echoed.
//!
//! Under a Redis outage the fields describe what decided: the fallback's
//! quotas, none when failing open, `503` with `Retry-After` when failing
//! closed. A layer built from a configuration (`config`, feature `serde`)
//! takes new rules while it serves (`Reloader`), from a rules file that
//! `RulesWatcher` watches or through `Admin`, an admin endpoint (with
//! `axum`). With a [`Shaper`], [`RateLimitBuilder::delay`] holds a request
//! over the rate until its turn instead of refusing it.
//!
//! The fields, the cost per request, the reload and the delaying mode are
//! explained in `docs/design/tower.md` in the repository.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

/// Counts one request's `outcome` in the layer's metrics (feature
/// `metrics`; nothing without it).
macro_rules! count {
    ($announce:expr, $outcome:ident) => {
        #[cfg(feature = "metrics")]
        $announce.metrics.request(crate::metrics::Outcome::$outcome);
    };
}

#[cfg(all(feature = "axum", feature = "serde"))]
mod admin;
mod announce;
mod backend;
#[cfg(feature = "axum")]
mod body;
mod builder;
mod clock;
#[cfg(feature = "serde")]
pub mod config;
mod error;
mod fields;
mod future;
mod key;
mod keyless;
mod layer;
mod live;
#[cfg(feature = "metrics")]
mod metrics;
mod policy;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "serde")]
mod reload;
mod service;
#[cfg(feature = "serde")]
mod show;
mod stamp;
mod value;
#[cfg(feature = "serde")]
mod watch;

/// Without axum there is no body meter: nothing is ever refused mid-body.
#[cfg(not(feature = "axum"))]
mod body {
    /// A metered request's meter and how to answer its refusal: none here.
    pub(crate) type Metering = Option<(
        std::sync::Arc<Meter>,
        std::sync::Arc<super::announce::Announce>,
    )>;
    pub(super) struct Meter;
    impl Meter {
        pub(super) fn refused(&self) -> Option<super::Verdict> {
            None
        }
    }
}

#[cfg(all(feature = "axum", feature = "serde"))]
pub use admin::{Admin, AdminToken, KeepError, TokenError};
pub use backend::{
    Backend, Check, Fault, Global, KeyedTiers, Mode, Shaper, TierInfo, Verdict, MAX_TIERS,
};
#[cfg(feature = "axum")]
pub use body::BodyLimited;
pub use builder::RateLimitBuilder;
pub use clock::TokioClock;
pub use error::BuildError;
pub use fields::Fields;
pub use future::ResponseFuture;
pub use key::{
    Extract, HeaderKey, KeyError, KeyPart, KeyText, Part, PeerIp, RequestKey, Route, RouteName,
    MAX_KEY_LEN, UNMATCHED_ROUTE,
};
pub use keyless::Keyless;
pub use layer::RateLimitLayer;
#[cfg(feature = "redis")]
pub use redis::{
    FallbackCounters, FallbackStats, RedisAsync, RedisBackend, RedisBlocking, RedisClient,
};
#[cfg(feature = "serde")]
pub use reload::{Dropped, OverrideError, OverrideSet, Reload, Reloaded, Reloader, Why};
pub use service::RateLimit;
#[cfg(feature = "serde")]
pub use show::redact_url;
pub use stamp::insert_fields;
#[cfg(feature = "serde")]
pub use watch::{ReloadError, RulesWatcher, DEFAULT_RULES_POLL};

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
