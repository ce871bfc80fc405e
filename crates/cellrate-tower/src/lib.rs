//! HTTP rate limiting as tower middleware (feature `tower`): a [`Layer`] and
//! [`Service`] for any `http::Request` service (axum, hyper, tonic), over an
//! in-process keyed table, all-or-nothing tiers, Redis, or any
//! [`RateLimiter`](cellrate::RateLimiter).
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
//! 1. Its key is extracted ([`Extract`]: a header, the peer address, the
//!    matched route, or a `(client, endpoint)` pair of them). A request
//!    without one is answered as [`Keyless`] says (400 `missing rate-limit
//!    key` by default, see below, or charged to one client every keyless
//!    request shares); a key that cannot be one (empty, not UTF-8, repeated,
//!    over [`MAX_KEY_LEN`]) is answered 400 `invalid rate-limit key`. An
//!    extractor that finds nothing because of the *server* (e.g. [`PeerIp`]
//!    served without connect info: [`KeyError::Unavailable`]) gets 500, and
//!    the layer logs once what to fix: the client is not to blame.
//! 2. Its weight (1 by default; [`RateLimitBuilder::weight`], e.g. by route;
//!    bytes by `Content-Length` together with
//!    [`charge_body`](RateLimitBuilder::charge_body), which charges a body
//!    of unknown length as it streams) is checked at the [`Clock`]'s time by the
//!    [`Backend`]: every tier must admit, and a request refused by one tier
//!    consumes from none.
//! 3. Admitted: the inner service answers, and the response gets the
//!    rate-limit fields. Refused: `429 Too Many Requests` with
//!    `Retry-After` and the fields, without calling the inner service. A
//!    weight that can never fit (above a tier's burst): `413 Content Too
//!    Large` with `RateLimit-Policy` only (the `q` it exceeds; there is no
//!    state or wait to announce). A backend that cannot decide: 500 (or
//!    400 for a key the backend cannot store), with a fixed body: internal
//!    errors are never echoed. Every answer the layer writes itself is
//!    `text/plain`.
//!
//! # Fields
//!
//! [`Fields`] chooses the families. `RateLimit-Policy` and `RateLimit` (IETF
//! draft, see [`headers`](cellrate::headers#fields)) list every tier: `q` its burst,
//! `w` the time to refill it, `r` the cells left, `t` the seconds until it
//! is full again; a tier whose burst does not refill in whole seconds also
//! lists its rate policy `"<tier>/rate"` (its real rate as `q` per `w`
//! whole seconds, see [`headers`](cellrate::headers#policies-a-client-can-pace-by)),
//! so a client can pace by the burst and the rate without exceeding either. `X-RateLimit-Limit`/`-Remaining`/`-Reset` describe the
//! tightest tier ([`cellrate::headers::tightest`]): the
//! refusing one, else the one with the fewest cells left. `Retry-After` is
//! the refusing tier's wait ([`cellrate::headers::refusing`]:
//! the longest of the tiers that refused), rounded up to whole seconds, at
//! least 1: a client that waits that long is admitted if nothing else
//! consumed meanwhile.
//!
//! Under a Redis outage the fields describe what decided: with
//! [`FailurePolicy::Fallback`](cellrate_redis::FailurePolicy::Fallback) the
//! `RateLimit-Policy` field announces the fallback quotas (the tiers' names,
//! the local quotas' `q` and `w`, as the client applies them at its µs
//! clock) beside the fallback's `r` and `t`; when the
//! policy fails open, no rate-limit fields are sent (nothing limited the
//! request); when it fails closed, the answer is `503 Service Unavailable`
//! with `Retry-After` (the reconnect interval) and no rate-limit fields
//! (the client is not over any quota).
//!
//! # Cost per request
//!
//! An in-process backend decides inside `call`, with no allocation besides
//! the `RateLimit` value of a layer with several tiers (a one-tier layer
//! makes each of its values once per `(r, t)` state and shares it, and the
//! other values are shared too); the inner service is called at once. With
//! [`charge_body`](RateLimitBuilder::charge_body) the key is copied once
//! for the body meter. The Redis backends allocate the key strings they send
//! and box the round trip's future, and the layer boxes the state of a
//! request that waits (a Redis check, a held request), so the future of a
//! request decided in `call` carries the inner future and the fields only. `poll_ready` is the inner service's:
//! when the check has to wait (Redis, or the delaying mode), the ready
//! service is moved into the response future and a clone stays behind, as
//! tower's documentation asks.
//!
//! # Changing the rules at run time
//!
//! A layer built from a configuration (`config::LayerConfig::build`,
//! feature `serde`) takes new rules while it serves through its
//! `Reloader` (`RateLimitLayer::reloader`): tiers that stay keep every
//! client's state and switch quota with `set_quota` semantics, tiers come
//! and go, one client's override changes alone, and a bad configuration is
//! refused whole. Every request reads the rules in force with one
//! lock-free load; see the `Reloader` docs for the switch and why it never
//! over-admits.
//!
//! # Waiting instead of refusing
//!
//! With a [`Shaper`] backend, [`RateLimitBuilder::delay`] holds a request
//! over the rate until its turn (`Gcra::reserve_n`: served in arrival order,
//! the rate exact), at most `max_wait`, with at most `max_queued` requests
//! waiting; a request that would wait longer gets 429 with `Retry-After`,
//! one that finds the queue full gets 503.
//!
//! The fields describe the decision made, so `t ≤ w` holds here too: a
//! held request's fields are the limiter's state when it is released and
//! its response leaves (its cells spent, `r = 0`, `t` the time to refill
//! the burst); a 429's are the limiter seen from the end of the queue,
//! `max_wait` ahead (`t` the debt beyond the queue, `Retry-After` how much
//! later a retry would be held at most `max_wait`). The limiter's raw
//! state at arrival would say `t` up to `max_wait + w`, which no client
//! can read against a policy of window `w`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod backend;
#[cfg(feature = "axum")]
mod body;
mod clock;
#[cfg(feature = "serde")]
pub mod config;
mod key;
#[cfg(feature = "metrics")]
mod metrics;

/// Without axum there is no body meter: nothing is ever refused mid-body.
#[cfg(not(feature = "axum"))]
mod body {
    pub(super) struct Meter;
    impl Meter {
        pub(super) fn refused(&self) -> Option<super::Verdict> {
            None
        }
    }
}
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "serde")]
mod reload;

use core::fmt::{self, Write};
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::boxed::Box;
use std::future::Future;
use std::string::String;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use ::tower::{Layer, Service};
use http::header::{HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, Request, Response, StatusCode};

use cellrate::headers::{self, PolicyState};
use cellrate::{ticks_to_duration, Clock, Decision, Denied};

pub use backend::{
    Backend, Check, Fault, Global, KeyedTiers, Mode, Shaper, TierInfo, Verdict, MAX_TIERS,
};
#[cfg(feature = "axum")]
pub use body::BodyLimited;
pub use clock::TokioClock;
pub use key::{
    Extract, HeaderKey, KeyError, KeyPart, KeyText, Part, PeerIp, RequestKey, Route, RouteName,
    MAX_KEY_LEN, UNMATCHED_ROUTE,
};
#[cfg(feature = "redis")]
pub use redis::{
    FallbackCounters, FallbackStats, RedisAsync, RedisBackend, RedisBlocking, RedisClient,
};
#[cfg(feature = "serde")]
pub use reload::{Reload, Reloader};

/// Which rate-limit header families a response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fields {
    /// `RateLimit-Policy` and `RateLimit` (IETF draft).
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    Legacy,
    /// Both families (the default).
    Both,
    /// None (a refusal still carries `Retry-After`).
    Neither,
}

impl Fields {
    fn ietf(self) -> bool {
        matches!(self, Fields::Ietf | Fields::Both)
    }
    fn legacy(self) -> bool {
        matches!(self, Fields::Legacy | Fields::Both)
    }
}

/// What a request without a key gets.
///
/// The default is `Reject(400 Bad Request)`: the request lacks a field the
/// server requires, and 400 needs nothing else. `401 Unauthorized` fits a
/// key that is a credential, but RFC 9110 §15.5.2 requires every 401 to
/// carry a `WWW-Authenticate` challenge, so the layer answers 401 only with
/// one ([`RateLimitBuilder::challenge`]): building `Reject(401)` without a
/// challenge is [`ConfigError::Keyless`], as is any status outside 4xx and
/// 407 (a proxy's challenge is not the layer's to send).
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::{ConfigError, Global, HeaderKey, Keyless, RateLimitLayer};
/// use cellrate::Quota;
/// use http::StatusCode;
/// let backend = || Global::gcra("all", Quota::per_second(5).at_hz(StdClock::HZ)).unwrap();
/// let unchallenged = RateLimitLayer::builder(HeaderKey::new("x-api-key"), backend(), StdClock::new())
///     .keyless(Keyless::Reject(StatusCode::UNAUTHORIZED))
///     .build();
/// assert_eq!(unchallenged.unwrap_err(), ConfigError::Keyless);
/// let challenged = RateLimitLayer::builder(HeaderKey::new("x-api-key"), backend(), StdClock::new())
///     .keyless(Keyless::Reject(StatusCode::UNAUTHORIZED))
///     .challenge("ApiKey", "orders")
///     .build();
/// assert!(challenged.is_ok()); // 401 with `WWW-Authenticate: ApiKey realm="orders"`
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keyless {
    /// This status (a 4xx; 401 only with a challenge) with the fixed body
    /// `missing rate-limit key`; nothing is charged.
    Reject(StatusCode),
    /// Charged to one client that every keyless request shares (and, with a
    /// `(client, endpoint)` extractor, to its endpoint).
    Shared,
}

/// Why a layer could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// The backend has no tiers.
    NoTiers,
    /// More than [`MAX_TIERS`] tiers.
    TooManyTiers,
    /// Tiers count ticks at different frequencies, or at 0 Hz.
    MixedHz,
    /// A tier name is empty, longer than 32 bytes, or not printable ASCII.
    InvalidName,
    /// A keyed table of capacity 0.
    ZeroCapacity,
    /// The Redis client's fallback quotas do not match its tiers.
    Fallback,
    /// [`Keyless::Reject`] with a status that is not 4xx, 407, or 401
    /// without a [challenge](RateLimitBuilder::challenge).
    Keyless,
    /// A challenge whose scheme is not an HTTP token or whose realm is not
    /// printable ASCII (or holds `"` or `\`).
    Challenge,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::NoTiers => "the backend has no tiers",
            ConfigError::TooManyTiers => "more than 8 tiers",
            ConfigError::MixedHz => "the tiers count ticks at different (or zero) frequencies",
            ConfigError::InvalidName => "tier names are 1 to 32 printable ASCII characters",
            ConfigError::ZeroCapacity => "a keyed table needs a capacity of at least 1",
            ConfigError::Fallback => "the fallback quotas do not match the tiers",
            ConfigError::Keyless => {
                "a keyless request is rejected with a 4xx status other than 407, and 401 needs a challenge"
            }
            ConfigError::Challenge => {
                "a challenge's scheme is an HTTP token and its realm printable ASCII without quotes or backslashes"
            }
        })
    }
}

impl std::error::Error for ConfigError {}

/// A tier name: what a header can carry ([`headers`]' one rule), 1 to 32
/// bytes long.
pub(crate) fn check_name(name: &str) -> Result<(), ConfigError> {
    if cellrate::headers::valid_tier_name(name) {
        Ok(())
    } else {
        Err(ConfigError::InvalidName)
    }
}

/// One header value, written straight into the buffer the value will own
/// (one allocation, no copy).
struct ValueBuf {
    buf: bytes::BytesMut,
}

impl ValueBuf {
    fn with_capacity(capacity: usize) -> Self {
        ValueBuf {
            buf: bytes::BytesMut::with_capacity(capacity),
        }
    }
    fn value(self) -> Option<HeaderValue> {
        HeaderValue::from_maybe_shared(self.buf.freeze()).ok()
    }
}

impl Write for ValueBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Header values for the integers `0..SMALL`, made once per process: the
/// `X-RateLimit-*` and `Retry-After` values are almost always small, and a
/// value from this table is a shared static, not an allocation.
const SMALL: u64 = 4_096;

fn number(n: u64) -> HeaderValue {
    static TABLE: std::sync::OnceLock<Vec<HeaderValue>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(SMALL as usize);
        for i in 0..SMALL {
            let _ = write!(text, "{i}");
            ends.push(text.len());
        }
        let text: &'static str = Box::leak(text.into_boxed_str());
        let mut start = 0;
        ends.into_iter()
            .map(|end| {
                let v = HeaderValue::from_static(&text[start..end]);
                start = end;
                v
            })
            .collect()
    });
    match table.get(n as usize) {
        Some(v) if n < SMALL => v.clone(),
        _ => HeaderValue::from(n),
    }
}

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// A tier's rate policy, announced after its burst policy: its name
/// (`<tier>/rate`), `q`, and `q − burst` (the cells its `r` adds to the
/// burst's).
#[derive(Clone, Debug)]
struct RatePolicy {
    name: String,
    limit: u64,
    extra: u64,
}

/// The rate policy of each tier (`None`: the burst policy says the rate).
fn rate_policies(tiers: &[TierInfo]) -> Vec<Option<RatePolicy>> {
    tiers
        .iter()
        .map(|t| {
            t.rate.map(|(q, _)| RatePolicy {
                name: std::format!("{}/rate", t.name),
                limit: q,
                extra: q.saturating_sub(t.limit),
            })
        })
        .collect()
}

/// The `RateLimit-Policy` value for `tiers` (all at `tiers[0].hz`): each
/// tier's burst policy, then its rate policy if it has one.
fn policy_value(tiers: &[TierInfo]) -> Option<HeaderValue> {
    let hz = tiers.first()?.hz;
    let rates = rate_policies(tiers);
    let mut policies: Vec<headers::Policy<'_>> = Vec::with_capacity(2 * tiers.len());
    for (t, rate) in tiers.iter().zip(&rates) {
        policies.push(headers::Policy::new(&t.name, t.limit, t.window_ticks));
        if let (Some(r), Some((_, w))) = (rate, t.rate) {
            policies.push(headers::Policy::new(&r.name, r.limit, w));
        }
    }
    let mut buf = ValueBuf::with_capacity(64 * policies.len());
    headers::write_ratelimit_policy(&mut buf, &policies, hz).ok()?;
    buf.value()
}

/// The rate policy's answer: the burst's, with `extra` more cells left.
fn rate_result(rate: &RatePolicy, result: Result<Decision, Denied>) -> Result<Decision, Denied> {
    match result {
        Ok(d) => Ok(Decision::new(
            rate.limit,
            d.remaining().saturating_add(rate.extra).min(rate.limit),
            d.reset_after(),
        )),
        Err(Denied::Limited(l)) => Err(Denied::Limited(cellrate::Limited::with_remaining(
            rate.limit,
            l.remaining().saturating_add(rate.extra).min(rate.limit),
            l.retry_after(),
            l.reset_after(),
        ))),
        never => never,
    }
}

/// The header fields to add to one response, kept small (it travels in
/// the response future): the two shared IETF values, and the legacy
/// numbers and `Retry-After` as integers (their values come from
/// [`number`] when applied). A keyless 401's challenge is added by the
/// keyless path itself.
#[derive(Clone, Debug, Default)]
struct Stamp {
    policy: Option<HeaderValue>,
    ratelimit: Option<HeaderValue>,
    /// `(X-RateLimit-Limit, -Remaining, -Reset)`.
    legacy: Option<(u64, u64, u64)>,
    retry: Option<u64>,
}

impl Stamp {
    fn is_empty(&self) -> bool {
        self.policy.is_none()
            && self.ratelimit.is_none()
            && self.legacy.is_none()
            && self.retry.is_none()
    }
    fn apply(self, map: &mut HeaderMap) {
        let n = self.policy.is_some() as usize
            + self.ratelimit.is_some() as usize
            + 3 * self.legacy.is_some() as usize
            + self.retry.is_some() as usize;
        if n == 0 {
            return;
        }
        map.reserve(n);
        if let Some(v) = self.policy {
            map.insert(RATELIMIT_POLICY, v);
        }
        if let Some(v) = self.ratelimit {
            map.insert(RATELIMIT, v);
        }
        if let Some((limit, remaining, reset)) = self.legacy {
            map.insert(X_LIMIT, number(limit));
            map.insert(X_REMAINING, number(remaining));
            map.insert(X_RESET, number(reset));
        }
        if let Some(secs) = self.retry {
            map.insert(RETRY_AFTER, number(secs));
        }
    }
}

/// The `RateLimit` value for `results` (one per tier of `names`, at `hz`;
/// each tier's rate policy, if any, in `rates`).
fn ratelimit_value(
    names: &[String],
    rates: &[Option<RatePolicy>],
    hz: u64,
    results: &[Result<Decision, Denied>],
) -> Option<HeaderValue> {
    let mut states = [PolicyState::new("", Ok(Decision::new(0, 0, 0))); 2 * MAX_TIERS];
    let mut len = 0;
    let mut capacity = 16;
    for (i, (name, result)) in names.iter().zip(results).take(MAX_TIERS).enumerate() {
        states[len] = PolicyState::new(name, *result);
        len += 1;
        capacity += name.len() + 24;
        if let Some(Some(rate)) = rates.get(i) {
            states[len] = PolicyState::new(&rate.name, rate_result(rate, *result));
            len += 1;
            capacity += rate.name.len() + 24;
        }
    }
    let mut buf = ValueBuf::with_capacity(capacity);
    headers::write_ratelimit(&mut buf, &states[..len], hz).ok()?;
    buf.value()
}

/// The `RateLimit` values of a one-tier layer, made once per `(r, t)`:
/// `r ≤ q` and `t ≤ w` (whole seconds) take at most `(q + 1)(w + 1)`
/// values, and when that is at most [`RateTable::MAX`] a response shares
/// the value made for the first response with the same state instead of
/// formatting and allocating its own.
struct RateTable {
    limit: u64,
    window: u64,
    values: Box<[std::sync::OnceLock<Option<HeaderValue>>]>,
}

impl RateTable {
    /// The most values a table holds (each a few dozen bytes once made).
    const MAX: u64 = 4_096;

    fn new(tiers: &[TierInfo]) -> Option<Self> {
        let [tier] = tiers else { return None };
        let window = headers::seconds_ceil(tier.window_ticks, tier.hz).ok()?;
        let size = tier
            .limit
            .checked_add(1)?
            .checked_mul(window.checked_add(1)?)?;
        if size > Self::MAX {
            return None;
        }
        Some(RateTable {
            limit: tier.limit,
            window,
            values: (0..size).map(|_| std::sync::OnceLock::new()).collect(),
        })
    }

    /// The value for the state `(remaining, t)` (`t` in whole seconds),
    /// made by `make` the first time.
    fn get(
        &self,
        remaining: u64,
        t: u64,
        make: impl FnOnce() -> Option<HeaderValue>,
    ) -> Option<HeaderValue> {
        if remaining > self.limit || t > self.window {
            return make();
        }
        let slot = self
            .values
            .get((remaining * (self.window + 1) + t) as usize);
        match slot {
            Some(slot) => slot.get_or_init(make).clone(),
            None => make(),
        }
    }
}

/// One tier's `(limit, remaining, t)`: `t` the whole seconds until it is
/// full (the `t` of `RateLimit` and the `X-RateLimit-Reset` value alike).
/// `None` for a cost that can never fit (it has no state to announce).
fn one_state(result: &Result<Decision, Denied>, hz: u64) -> Option<(u64, u64, u64)> {
    let (limit, remaining, reset) = match result {
        Ok(d) => (d.limit(), d.remaining(), d.reset_after()),
        Err(Denied::Limited(l)) => (l.limit(), l.remaining(), l.reset_after()),
        Err(Denied::CostTooLarge { .. }) => return None,
    };
    Some((limit, remaining, headers::seconds_ceil(reset, hz).ok()?))
}

/// Writes the fields of `results` (one per tier of `names`, at `hz`; each
/// tier's rate policy, if any, in `rates`; the one tier's values shared
/// through `table` if there is one).
fn stamp(
    names: &[String],
    rates: &[Option<RatePolicy>],
    hz: u64,
    policy: Option<&HeaderValue>,
    results: &[Result<Decision, Denied>],
    fields: Fields,
    table: Option<&RateTable>,
) -> Stamp {
    let mut out = Stamp::default();
    // One tier (the common layer): its state is read once for both
    // families (each accessor divides), and its `RateLimit` value comes
    // from the table. The same fields as the general path below.
    if let [only] = results {
        if let Some((limit, remaining, t)) = one_state(only, hz) {
            if fields.ietf() {
                out.policy = policy.cloned();
                let make = || ratelimit_value(names, rates, hz, results);
                out.ratelimit = match table {
                    Some(table) => table.get(remaining, t, make),
                    None => make(),
                };
            }
            if fields.legacy() {
                out.legacy = Some((limit, remaining, t));
            }
            if let Err(denied) = only {
                out.retry = headers::retry_after_secs(denied, hz).ok();
            }
            return out;
        }
    }
    if fields.ietf() {
        out.policy = policy.cloned();
        out.ratelimit = ratelimit_value(names, rates, hz, results);
    }
    if fields.legacy() {
        if let Some(Ok((limit, remaining, reset))) =
            headers::tightest(results).map(|r| headers::x_ratelimit(&r, hz))
        {
            out.legacy = Some((limit, remaining, reset));
        }
    }
    if let Some(Err(denied)) = headers::refusing(results).map(|i| results[i]) {
        if let Ok(secs) = headers::retry_after_secs(&denied, hz) {
            out.retry = Some(secs);
        }
    }
    out
}

/// Inserts the rate-limit fields for one outcome of any backend into
/// `map`: `results` has one entry per tier of `tiers` (a Redis
/// `Outcome::results()`, [`Tiers::results`](cellrate::compose::Tiers::results),
/// [`Verdict::results`]), all counted at `tiers[0].hz`. On a refusal it
/// also inserts `Retry-After`.
///
/// ```
/// use cellrate_tower::{insert_fields, Fields, TierInfo};
/// use cellrate::compose::AllTiers;
/// use cellrate::{Gcra, Quota};
/// let (q1, q2) = (Quota::per_second(5).at_hz(1_000), Quota::per_minute(20).at_hz(1_000));
/// let tiers = [Gcra::new(q1), Gcra::new(q2)];
/// let info = [TierInfo::from_quota("burst", &q1), TierInfo::from_quota("minute", &q2)];
/// let mut map = http::HeaderMap::new();
/// insert_fields(&mut map, &info, tiers.check_tiers(0, 1).results(), Fields::Both);
/// assert_eq!(map["ratelimit-policy"], r#""burst";q=5;w=1, "minute";q=20;w=60"#);
/// assert_eq!(map["ratelimit"], r#""burst";r=4;t=1, "minute";r=19;t=3"#);
/// assert_eq!(map["x-ratelimit-remaining"], "4");
/// assert!(map.get("retry-after").is_none());
/// ```
pub fn insert_fields(
    map: &mut HeaderMap,
    tiers: &[TierInfo],
    results: &[Result<Decision, Denied>],
    fields: Fields,
) {
    let Some(hz) = tiers.first().map(|t| t.hz) else {
        return;
    };
    let names: Vec<String> = tiers.iter().map(|t| t.name.clone()).collect();
    let policy = policy_value(tiers);
    let rates = rate_policies(tiers);
    stamp(&names, &rates, hz, policy.as_ref(), results, fields, None).apply(map);
}

/// What every request of a layer shares, besides the key and the backend.
struct Announce {
    names: Vec<String>,
    rates: Vec<Option<RatePolicy>>,
    fallback_rates: Vec<Option<RatePolicy>>,
    /// The shared `RateLimit` values of a one-tier layer.
    table: Option<RateTable>,
    hz: u64,
    policy: Option<HeaderValue>,
    fallback_policy: Option<HeaderValue>,
    fields: Fields,
    /// The layer's series (feature `metrics`).
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::LayerMetrics,
}

/// Counts one request's `outcome` in the layer's metrics (feature
/// `metrics`; nothing without it).
macro_rules! count {
    ($announce:expr, $outcome:ident) => {
        #[cfg(feature = "metrics")]
        $announce.metrics.request(crate::metrics::Outcome::$outcome);
    };
}

impl Announce {
    /// [`answer`](Self::answer), counted in the layer's metrics.
    #[inline]
    fn decide(&self, verdict: &Verdict) -> (StatusCode, Stamp) {
        let answer = self.answer(verdict);
        #[cfg(feature = "metrics")]
        self.metrics.verdict(verdict, answer.0);
        answer
    }

    /// What a layer announces for `tiers` (and, when the backend has a
    /// fallback mode, `fallback`), checked as [`RateLimitBuilder::build`]
    /// documents.
    fn new(
        tiers: &[TierInfo],
        fallback: Option<Vec<TierInfo>>,
        fields: Fields,
        metrics_name: &str,
    ) -> Result<Self, ConfigError> {
        #[cfg(not(feature = "metrics"))]
        let _ = metrics_name;
        let first = tiers.first().ok_or(ConfigError::NoTiers)?;
        if tiers.len() > MAX_TIERS {
            return Err(ConfigError::TooManyTiers);
        }
        let hz = first.hz;
        if hz == 0 || tiers.iter().any(|t| t.hz != hz) {
            return Err(ConfigError::MixedHz);
        }
        for t in tiers {
            check_name(&t.name)?;
        }
        let (fallback_policy, fallback_rates) = match fallback {
            None => (None, Vec::new()),
            Some(f) => {
                if f.len() != tiers.len() || f.iter().any(|t| t.hz != hz) {
                    return Err(ConfigError::Fallback);
                }
                (policy_value(&f), rate_policies(&f))
            }
        };
        Ok(Announce {
            names: tiers.iter().map(|t| t.name.clone()).collect(),
            rates: rate_policies(tiers),
            fallback_rates,
            table: if fields.ietf() {
                RateTable::new(tiers)
            } else {
                None
            },
            hz,
            policy: policy_value(tiers),
            fallback_policy,
            fields,
            #[cfg(feature = "metrics")]
            metrics: crate::metrics::LayerMetrics::new(
                metrics_name,
                &tiers.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            ),
        })
    }

    /// The status and fields for a verdict.
    fn answer(&self, verdict: &Verdict) -> (StatusCode, Stamp) {
        if let Some(fault) = verdict.fault_kind() {
            let status = match fault {
                Fault::InvalidKey => StatusCode::BAD_REQUEST,
                Fault::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            };
            return (status, Stamp::default());
        }
        let results = verdict.results();
        let admitted = verdict.is_admitted();
        match verdict.mode() {
            Mode::FailOpen => return (StatusCode::OK, Stamp::default()),
            Mode::FailClosed if !admitted => {
                let mut s = stamp(
                    &self.names,
                    &[],
                    self.hz,
                    None,
                    results,
                    Fields::Neither,
                    None,
                );
                if s.is_empty() {
                    s.retry = Some(1);
                }
                return (StatusCode::SERVICE_UNAVAILABLE, s);
            }
            _ => {}
        }
        let (policy, rates, table) = match verdict.mode() {
            Mode::Fallback => (self.fallback_policy.as_ref(), &self.fallback_rates, None),
            _ => (self.policy.as_ref(), &self.rates, self.table.as_ref()),
        };
        let s = stamp(
            &self.names,
            rates,
            self.hz,
            policy,
            results,
            self.fields,
            table,
        );
        let status = if admitted {
            StatusCode::OK
        } else if headers::refusing(results)
            .and_then(|i| results[i].err())
            .is_some_and(|d| d.retry_after().is_none())
        {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        (status, s)
    }
}

type Weigh = dyn Fn(&Parts) -> u64 + Send + Sync;

/// The delaying mode's bounds and queue.
struct Delay {
    max_wait: u64,
    max_queued: usize,
    queued: AtomicUsize,
}

/// The rules in force: the backend and what its tiers announce, read
/// together by each request (one lock-free load) and replaced together by a
/// [`Reloader`].
struct Live<B> {
    backend: Arc<B>,
    /// What each of the backend's [groups](Backend::groups) announces.
    announces: Vec<Arc<Announce>>,
}

/// What each group of tiers announces (the first with the backend's
/// `fallback` tiers), checked as [`RateLimitBuilder::build`]
/// documents.
fn announces(
    groups: Vec<Vec<TierInfo>>,
    mut fallback: Option<Vec<TierInfo>>,
    fields: Fields,
    metrics_name: &str,
) -> Result<Vec<Arc<Announce>>, ConfigError> {
    let mut announces = Vec::new();
    for tiers in groups {
        let announce = Announce::new(&tiers, fallback.take(), fields, metrics_name)?;
        announces.push(Arc::new(announce));
    }
    if announces.is_empty() {
        return Err(ConfigError::NoTiers);
    }
    Ok(announces)
}

impl<B> Live<B> {
    /// What the first group announces: the tiers of every route no tier
    /// is limited to (what counts a request decided before its key).
    fn announce(&self) -> &Arc<Announce> {
        &self.announces[0]
    }
}

impl<B: Backend> Live<B> {
    /// What the group that decides `key` announces.
    fn announce_for(&self, key: &RequestKey<'_>) -> &Arc<Announce> {
        self.announces
            .get(self.backend.group(key))
            .unwrap_or(&self.announces[0])
    }
}

struct Shared<E, B, C> {
    extract: E,
    live: arc_swap::ArcSwap<Live<B>>,
    clock: C,
    weigh: Option<Box<Weigh>>,
    keyless: Keyless,
    /// The `WWW-Authenticate` value of a keyless 401.
    challenge: Option<HeaderValue>,
    /// Whether a server misconfiguration has been logged (once per layer).
    misconfigured: AtomicBool,
    delay: Option<Delay>,
    /// Whether request bodies are metered (`RateLimitBuilder::charge_body`).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    charge_body: bool,
    /// The header families (what a reload announces with).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    fields: Fields,
    /// The configuration a [`Reloader`] applies changes to, if the layer
    /// was built from one; its lock serializes reloads (never taken by a
    /// request).
    #[cfg(feature = "serde")]
    applied: std::sync::Mutex<Option<config::Applied>>,
    /// The `limiter` label of the layer's series (what a reload registers
    /// new tiers' series under).
    #[cfg(all(feature = "metrics", feature = "serde"))]
    metrics_name: String,
}

/// What a metered request's response needs: the meter, and how to answer
/// its refusal.
type Metering = Option<(Arc<body::Meter>, Arc<Announce>)>;

/// What the layer logs when `charge_body` meets a body it cannot meter.
#[cfg(feature = "axum")]
const NOT_AXUM_BODY: &str = "charge_body meters axum::body::Body only, and this service's \
    request body is another type: every request is answered 500";

/// Logs `hint` (a [`KeyError::Unavailable`]) the first time only.
fn log_misconfigured(flag: &AtomicBool, hint: &str) {
    if flag.swap(true, Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "tracing")]
    tracing::error!(target: "cellrate::tower", "{hint}");
    #[cfg(not(feature = "tracing"))]
    std::eprintln!("cellrate::tower: {hint}");
}

/// The `WWW-Authenticate` value `scheme realm="realm"`, if both are valid.
fn challenge_value(scheme: &str, realm: &str) -> Result<HeaderValue, ConfigError> {
    const TCHAR: &[u8] = b"!#$%&'*+-.^_`|~";
    let token = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || TCHAR.contains(&b));
    let quotable = realm
        .bytes()
        .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\');
    if !token || !quotable {
        return Err(ConfigError::Challenge);
    }
    HeaderValue::try_from(std::format!("{scheme} realm=\"{realm}\""))
        .map_err(|_| ConfigError::Challenge)
}

/// Builds a [`RateLimitLayer`]; see the [module docs](self).
pub struct RateLimitBuilder<E, B, C> {
    extract: E,
    backend: B,
    clock: C,
    weigh: Option<Box<Weigh>>,
    keyless: Keyless,
    fields: Fields,
    delay: Option<(u64, usize)>,
    challenge: Option<(String, String)>,
    charge_body: bool,
    #[cfg(feature = "metrics")]
    metrics_name: String,
}

impl<E: Extract, B: Backend, C: Clock + Send + Sync + 'static> RateLimitBuilder<E, B, C> {
    /// The `limiter` label of this layer's series (feature `metrics`;
    /// default `"default"`): a name like a tier's, 1 to 32 printable ASCII
    /// characters ([`ConfigError::InvalidName`] otherwise). Give each layer
    /// of a process its own. See the `cellrate-metrics` crate for the series.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::{Global, PeerIp, RateLimitLayer};
    /// use cellrate::Quota;
    /// let layer = RateLimitLayer::builder(
    ///     PeerIp,
    ///     Global::gcra("all", Quota::per_second(100).at_hz(StdClock::HZ)).unwrap(),
    ///     StdClock::new(),
    /// )
    /// .metrics_name("edge")
    /// .build()
    /// .unwrap();
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics_name(mut self, name: &str) -> Self {
        self.metrics_name = name.into();
        self
    }
    /// The header families to send (default [`Fields::Both`]).
    pub fn fields(mut self, fields: Fields) -> Self {
        self.fields = fields;
        self
    }
    /// What a request without a key gets (default
    /// `Keyless::Reject(StatusCode::BAD_REQUEST)`; see [`Keyless`]).
    pub fn keyless(mut self, keyless: Keyless) -> Self {
        self.keyless = keyless;
        self
    }
    /// The challenge a keyless `401` carries, as RFC 9110 §15.5.2 requires:
    /// `WWW-Authenticate: {scheme} realm="{realm}"`. The scheme must be an
    /// HTTP token and the realm printable ASCII without `"` or `\`
    /// (checked by [`build`](Self::build): [`ConfigError::Challenge`]).
    /// See [`Keyless`] for an example.
    pub fn challenge(mut self, scheme: &str, realm: &str) -> Self {
        self.challenge = Some((scheme.into(), realm.into()));
        self
    }
    /// The cells a request costs (default 1), e.g. by route. A cost of 0
    /// charges nothing; a cost above a tier's burst is answered 413.
    ///
    /// A weight read from the request head alone cannot limit bytes: a
    /// chunked body declares no length. To limit bytes, weigh by
    /// `Content-Length` (0 when absent) *and* [`charge_body`](Self::charge_body),
    /// which charges every byte past the declared ones as the body streams:
    ///
    /// ```
    /// # #[cfg(feature = "axum")] {
    /// use cellrate::StdClock;
    /// use cellrate_tower::{Global, PeerIp, RateLimitLayer};
    /// use cellrate::Quota;
    /// let q = Quota::per_second(1_000_000).at_hz(StdClock::HZ); // bytes per second
    /// let layer = RateLimitLayer::builder(PeerIp, Global::gcra("bytes", q).unwrap(), StdClock::new())
    ///     .weight(|req| {
    ///         req.headers.get(http::header::CONTENT_LENGTH)
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(0) // unknown length: charged as it streams
    ///     })
    ///     .charge_body()
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// # }
    /// ```
    pub fn weight(mut self, weigh: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.weigh = Some(Box::new(weigh));
        self
    }
    /// Charges the request body as it streams (feature `axum`; see
    /// [`BodyLimited`]): the [`weight`](Self::weight) is then the bytes paid
    /// before the handler runs (the `Content-Length`, or 0 for a body of
    /// unknown length), and every data frame past them is charged to the
    /// same key when the handler reads it. A refused frame ends the body
    /// with [`BodyLimited`] and the client gets `429` (or `413` for a frame
    /// above a tier's burst) instead of the handler's answer, so a chunked
    /// or unsized body cannot carry more than the quota. Meters
    /// `axum::body::Body` only; any other request body type is a
    /// misconfiguration, answered 500 and logged once. The example under
    /// [`weight`](Self::weight) limits bytes this way.
    #[cfg(feature = "axum")]
    pub fn charge_body(mut self) -> Self {
        self.charge_body = true;
        self
    }
    /// Delaying mode: hold a request over the rate until its turn instead of
    /// refusing it, at most `max_wait` ticks, with at most `max_queued`
    /// requests held at once. Only backends that can shape ([`Shaper`])
    /// delay; the others keep refusing.
    pub fn delay(mut self, max_wait: u64, max_queued: usize) -> Self {
        self.delay = Some((max_wait, max_queued));
        self
    }
    /// The layer.
    pub fn build(self) -> Result<RateLimitLayer<E, B, C>, ConfigError> {
        #[cfg(feature = "metrics")]
        check_name(&self.metrics_name)?;
        #[cfg(feature = "metrics")]
        let metrics_name = self.metrics_name.as_str();
        #[cfg(not(feature = "metrics"))]
        let metrics_name = "";
        let announces = announces(
            self.backend.groups(),
            self.backend.fallback_tiers(),
            self.fields,
            metrics_name,
        )?;
        let challenge = match &self.challenge {
            Some((scheme, realm)) => Some(challenge_value(scheme, realm)?),
            None => None,
        };
        if let Keyless::Reject(status) = self.keyless {
            let unchallenged = status == StatusCode::UNAUTHORIZED && challenge.is_none();
            if !status.is_client_error()
                || status == StatusCode::PROXY_AUTHENTICATION_REQUIRED
                || unchallenged
            {
                return Err(ConfigError::Keyless);
            }
        }
        #[allow(unused_mut)]
        let mut backend = self.backend;
        #[cfg(feature = "metrics")]
        backend.register_metrics(&self.metrics_name);
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                extract: self.extract,
                live: arc_swap::ArcSwap::from_pointee(Live {
                    backend: Arc::new(backend),
                    announces,
                }),
                #[cfg(all(feature = "metrics", feature = "serde"))]
                metrics_name: self.metrics_name,
                clock: self.clock,
                weigh: self.weigh,
                keyless: self.keyless,
                challenge,
                misconfigured: AtomicBool::new(false),
                charge_body: self.charge_body,
                delay: self.delay.map(|(max_wait, max_queued)| Delay {
                    max_wait,
                    max_queued,
                    queued: AtomicUsize::new(0),
                }),
                fields: self.fields,
                #[cfg(feature = "serde")]
                applied: std::sync::Mutex::new(None),
            }),
        })
    }
}

/// The [`Layer`]: wraps a service in a [`RateLimit`].
pub struct RateLimitLayer<E, B, C> {
    shared: Arc<Shared<E, B, C>>,
}

impl<E, B, C> Clone for RateLimitLayer<E, B, C> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E, B, C> fmt::Debug for RateLimitLayer<E, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("tiers", &self.shared.live.load().announce().names)
            .finish_non_exhaustive()
    }
}

impl<E: Extract, B: Backend, C: Clock + Send + Sync + 'static> RateLimitLayer<E, B, C> {
    /// Starts a layer that keys requests with `extract`, decides with
    /// `backend`, and reads the time from `clock` (whose ticks the backend's
    /// quotas count).
    pub fn builder(extract: E, backend: B, clock: C) -> RateLimitBuilder<E, B, C> {
        RateLimitBuilder {
            extract,
            backend,
            clock,
            weigh: None,
            keyless: Keyless::Reject(StatusCode::BAD_REQUEST),
            fields: Fields::Both,
            delay: None,
            challenge: None,
            charge_body: false,
            #[cfg(feature = "metrics")]
            metrics_name: "default".into(),
        }
    }
    /// The backend in force (e.g. to read a Redis backend's counters); a
    /// [`Reloader`] may replace it, so this is a handle to the one in force
    /// now.
    pub fn backend(&self) -> Arc<B> {
        Arc::clone(&self.shared.live.load().backend)
    }
}

impl<S, E, B, C> Layer<S> for RateLimitLayer<E, B, C> {
    type Service = RateLimit<S, E, B, C>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The [`Service`]: limits the requests to `S`; see the [module docs](self).
pub struct RateLimit<S, E, B, C> {
    inner: S,
    shared: Arc<Shared<E, B, C>>,
}

impl<S: Clone, E, B, C> Clone for RateLimit<S, E, B, C> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, E, B, C> fmt::Debug for RateLimit<S, E, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

fn plain<B: From<&'static str>>(
    status: StatusCode,
    body: &'static str,
    stamp: Stamp,
) -> Response<B> {
    let mut r = Response::new(B::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    stamp.apply(r.headers_mut());
    r
}

fn body_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "rate limited\n",
        StatusCode::PAYLOAD_TOO_LARGE => "request too large for the rate limit\n",
        StatusCode::SERVICE_UNAVAILABLE => "rate limiter unavailable\n",
        StatusCode::BAD_REQUEST => "invalid rate-limit key\n",
        _ => "internal error\n",
    }
}

/// Takes a place in the delaying queue, or `None` if it is full.
struct QueueSlot<E, B, C> {
    shared: Arc<Shared<E, B, C>>,
}

impl<E, B, C> Drop for QueueSlot<E, B, C> {
    fn drop(&mut self) {
        if let Some(d) = &self.shared.delay {
            d.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A place in the delaying queue (type-erased).
type Slot = Box<dyn Send + Sync>;

impl<S, E, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, E, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    E: Extract,
    B: Backend,
    C: Clock + Send + Sync + 'static,
    ReqBody: 'static,
    ResBody: From<&'static str>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B::Future, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        // The rules in force, backend and announcement together: one
        // lock-free load, held for this call only.
        let live = shared.live.load();
        let (parts, body) = req.into_parts();
        let key = match shared.extract.extract(&parts) {
            Ok(key) => key,
            Err(KeyError::Invalid) => {
                count!(live.announce(), InvalidKey);
                return ResponseFuture::done(StatusCode::BAD_REQUEST);
            }
            Err(KeyError::Unavailable(hint)) => {
                count!(live.announce(), Error);
                log_misconfigured(&shared.misconfigured, hint);
                return ResponseFuture::done(StatusCode::INTERNAL_SERVER_ERROR);
            }
            Err(KeyError::Missing) => match shared.keyless {
                Keyless::Reject(status) => {
                    count!(live.announce(), NoKey);
                    let mut response = plain(status, "missing rate-limit key\n", Stamp::default());
                    if status == StatusCode::UNAUTHORIZED {
                        if let Some(challenge) = &shared.challenge {
                            response
                                .headers_mut()
                                .insert(WWW_AUTHENTICATE, challenge.clone());
                        }
                    }
                    return ResponseFuture::fixed(response);
                }
                Keyless::Shared => RequestKey::new(Part::Keyless, shared.extract.scope(&parts)),
            },
        };
        let cost = shared.weigh.as_ref().map_or(1, |w| w(&parts));
        // What the tiers that decide this request announce.
        let announce = live.announce_for(&key);
        #[cfg(feature = "axum")]
        let (body, metering): (ReqBody, Metering) = if shared.charge_body {
            match body::meter(body, &key, cost, &self.shared) {
                Ok((body, meter)) => (body, Some((meter, Arc::clone(announce)))),
                Err(other) => {
                    count!(announce, Error);
                    if other.is_some() {
                        log_misconfigured(&shared.misconfigured, NOT_AXUM_BODY);
                    }
                    return ResponseFuture::done(StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
        } else {
            (body, None)
        };
        #[cfg(not(feature = "axum"))]
        let metering: Metering = None;
        let now = shared.clock.now();
        if let Some(delay) = &shared.delay {
            // Take a place in the queue first, so a full queue books nothing.
            if delay.queued.fetch_add(1, Ordering::AcqRel) >= delay.max_queued {
                delay.queued.fetch_sub(1, Ordering::AcqRel);
                count!(announce, QueueFull);
                return ResponseFuture::done(StatusCode::SERVICE_UNAVAILABLE);
            }
            let slot: Slot = Box::new(QueueSlot {
                shared: Arc::clone(&self.shared),
            });
            if let Some(reserved) = live.backend.reserve(&key, now, cost, delay.max_wait) {
                return match reserved {
                    Err(verdict) | Ok((0, verdict)) => {
                        drop(slot);
                        self.finish(verdict, announce, parts, body, metering)
                    }
                    Ok((wait, verdict)) => {
                        let hz = announce.hz;
                        let (_, stamp) = announce.decide(&verdict);
                        #[cfg(feature = "metrics")]
                        announce.metrics.held();
                        let clone = self.inner.clone();
                        let inner = core::mem::replace(&mut self.inner, clone);
                        ResponseFuture {
                            state: State::Sleeping {
                                waiting: Box::pin(Sleeping {
                                    sleep: tokio::time::sleep(ticks_to_duration(wait, hz)),
                                    req: Some(Request::from_parts(parts, body)),
                                    inner: Some(inner),
                                    stamp: Some(stamp),
                                    slot: Some(slot),
                                    metering,
                                }),
                            },
                        }
                    }
                };
            }
            drop(slot);
        }
        match live.backend.check(&key, now, cost) {
            Check::Ready(verdict) => self.finish(verdict, announce, parts, body, metering),
            Check::Pending(check) => {
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                ResponseFuture {
                    state: State::Checking {
                        waiting: Box::pin(Checking {
                            check,
                            req: Some(Request::from_parts(parts, body)),
                            inner: Some(inner),
                            announce: Arc::clone(announce),
                            metering,
                        }),
                    },
                }
            }
        }
    }
}

impl<S, E, B, C> RateLimit<S, E, B, C> {
    fn finish<ReqBody, ResBody>(
        &mut self,
        verdict: Verdict,
        announce: &Announce,
        parts: Parts,
        body: ReqBody,
        metering: Metering,
    ) -> ResponseFuture<S, B::Future, ReqBody>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        B: Backend,
        ResBody: From<&'static str>,
    {
        let (status, stamp) = announce.decide(&verdict);
        if status == StatusCode::OK {
            ResponseFuture {
                state: State::Calling {
                    fut: self.inner.call(Request::from_parts(parts, body)),
                    stamp: Some(stamp),
                    metering,
                },
            }
        } else {
            ResponseFuture::fixed(plain(status, body_for(status), stamp))
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RateLimit`].
    pub struct ResponseFuture<S, F, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, F, ReqBody>,
    }
}

pin_project_lite::pin_project! {
    /// A request whose check is not decided yet (a Redis round trip).
    #[project = CheckingProj]
    struct Checking<S, F, ReqBody> {
        #[pin] check: F,
        req: Option<Request<ReqBody>>,
        inner: Option<S>,
        announce: Arc<Announce>,
        metering: Metering,
    }
}

pin_project_lite::pin_project! {
    /// A request held until its turn (the delaying mode).
    #[project = SleepingProj]
    struct Sleeping<S, ReqBody> {
        #[pin] sleep: tokio::time::Sleep,
        req: Option<Request<ReqBody>>,
        inner: Option<S>,
        stamp: Option<Stamp>,
        slot: Option<Slot>,
        metering: Metering,
    }
}

pin_project_lite::pin_project! {
    /// The response future's states. The waiting ones are boxed: an
    /// in-process backend's check future holds a whole [`Verdict`], and a
    /// held request its request and a timer, while the common path
    /// (decided in `call`) carries only the inner future and the fields;
    /// the future is moved (into axum's box, for one) by its size.
    #[project = StateProj]
    enum State<S, F, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Fixed { response: Option<S::Response> },
        Checking { waiting: Pin<Box<Checking<S, F, ReqBody>>> },
        Sleeping { waiting: Pin<Box<Sleeping<S, ReqBody>>> },
        Calling { #[pin] fut: S::Future, stamp: Option<Stamp>, metering: Metering },
    }
}

impl<S, F, ReqBody> ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fixed(response: S::Response) -> Self {
        ResponseFuture {
            state: State::Fixed {
                response: Some(response),
            },
        }
    }
}

impl<S, F, ReqBody, ResBody> ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: From<&'static str>,
{
    fn done(status: StatusCode) -> Self {
        Self::fixed(plain(status, body_for(status), Stamp::default()))
    }
}

impl<S, F, ReqBody, ResBody> Future for ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    F: Future<Output = Verdict>,
    ResBody: From<&'static str>,
{
    type Output = Result<Response<ResBody>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Fixed { response } => {
                    return match response.take() {
                        Some(r) => Poll::Ready(Ok(r)),
                        // Polled after completion: answer again rather than panic.
                        None => Poll::Ready(Ok(plain(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "internal error\n",
                            Stamp::default(),
                        ))),
                    };
                }
                StateProj::Checking { waiting } => {
                    let CheckingProj {
                        check,
                        req,
                        inner,
                        announce,
                        metering,
                    } = waiting.as_mut().project();
                    let verdict = ready!(check.poll(cx));
                    let (status, stamp) = announce.decide(&verdict);
                    let (Some(req), Some(mut inner)) = (req.take(), inner.take()) else {
                        state.set(State::Fixed { response: None });
                        continue;
                    };
                    if status == StatusCode::OK {
                        let fut = inner.call(req);
                        let metering = metering.take();
                        state.set(State::Calling {
                            fut,
                            stamp: Some(stamp),
                            metering,
                        });
                    } else {
                        state.set(State::Fixed {
                            response: Some(plain(status, body_for(status), stamp)),
                        });
                    }
                }
                StateProj::Sleeping { waiting } => {
                    let SleepingProj {
                        sleep,
                        req,
                        inner,
                        stamp,
                        slot,
                        metering,
                    } = waiting.as_mut().project();
                    ready!(sleep.poll(cx));
                    drop(slot.take());
                    let (Some(req), Some(mut inner)) = (req.take(), inner.take()) else {
                        state.set(State::Fixed { response: None });
                        continue;
                    };
                    let stamp = stamp.take();
                    let metering = metering.take();
                    let fut = inner.call(req);
                    state.set(State::Calling {
                        fut,
                        stamp,
                        metering,
                    });
                }
                StateProj::Calling {
                    fut,
                    stamp,
                    metering,
                } => {
                    let mut response = ready!(fut.poll(cx))?;
                    // The body went over while the handler read it: the
                    // answer is the refusal, not the handler's.
                    if let Some((meter, announce)) = metering.take() {
                        if let Some(verdict) = meter.refused() {
                            let (status, stamp) = announce.answer(&verdict);
                            count!(announce, BodyDenied);
                            return Poll::Ready(Ok(plain(status, body_for(status), stamp)));
                        }
                    }
                    if let Some(stamp) = stamp.take() {
                        stamp.apply(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
            }
        }
    }
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
