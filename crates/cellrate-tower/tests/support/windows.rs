//! What the tests of window and log tiers in process share
//! (`tests/tower_windows.rs`, `tests/tower_store.rs`): layers read from
//! TOML on a clock the test moves, one request at a time, the fields the
//! layer must answer for a result of the core, and the core's reference:
//! one limiter per client (or per (client, endpoint)) of its own quota.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingLog, SlidingWindowQuota};
use cellrate::{Clock, Decision, Denied, Limiter, ManualClock, RateLimiter, Snapshot};
use cellrate_config as config;
use cellrate_tower::config::LayerConfig;
use cellrate_tower::{Fields, TierInfo};
use http::{HeaderMap, Request, Response, StatusCode};
use tower::{Service, ServiceExt};

pub const HZ: u64 = 1_000;
pub const KEY: &str = "key = { client = { header = \"x-api-key\" } }\n";

pub fn read(text: &str) -> Result<LayerConfig, config::ConfigError> {
    config::from_deserializer(toml::Deserializer::parse(text).unwrap())
}

/// One tier named "w" of `spec` (its quota, algorithm and buckets).
pub fn one_tier(spec: &str) -> LayerConfig {
    read(&format!(
        "{KEY}[[tiers]]\nname = \"w\"\ncapacity = 64\n{spec}"
    ))
    .unwrap()
}

/// A clock the test moves while the layer holds it.
pub struct TestClock(pub Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

pub fn ok_service(
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    })
}

pub async fn call<S>(svc: &mut S, key: &str) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    call_on(svc, key, None).await
}

/// A request of client `key`, on the matched route `route` if any
/// (`key.endpoint = "route"`).
pub async fn call_on<S>(svc: &mut S, key: &str, route: Option<&'static str>) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut req = Request::builder()
        .header("x-api-key", key)
        .body(String::new())
        .unwrap();
    if let Some(route) = route {
        req.extensions_mut()
            .insert(cellrate_tower::RouteName(route));
    }
    svc.ready().await.unwrap().call(req).await.unwrap()
}

/// What the layer must answer for the core's result `expected` of its one
/// tier: the status, the legacy fields and `Retry-After`.
pub fn assert_answer(got: &Response<String>, expected: &Result<Decision, Denied>, at: &str) {
    let header = |name: &str| {
        got.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (limit, remaining, reset) = match expected {
        Ok(d) => {
            assert_eq!(got.status(), StatusCode::OK, "{at}");
            assert_eq!(header("retry-after"), None, "{at}");
            (d.limit(), d.remaining(), d.reset_after())
        }
        Err(denied) => {
            assert_eq!(got.status(), StatusCode::TOO_MANY_REQUESTS, "{at}");
            let retry = cellrate_headers::retry_after_secs(denied, HZ).unwrap();
            assert_eq!(header("retry-after"), Some(retry.to_string()), "{at}");
            let l = denied.limited().unwrap();
            (l.limit(), l.remaining(), l.reset_after())
        }
    };
    let reset = cellrate_headers::seconds_ceil(reset, HZ).unwrap();
    assert_eq!(header("x-ratelimit-limit"), Some(limit.to_string()), "{at}");
    assert_eq!(
        header("x-ratelimit-remaining"),
        Some(remaining.to_string()),
        "{at}"
    );
    assert_eq!(header("x-ratelimit-reset"), Some(reset.to_string()), "{at}");
}

/// The fields a layer of `tiers` (each announced as its `TierInfo`, all
/// at [`HZ`]) writes for the core's `results`, as the crate's own
/// [`insert_fields`](cellrate_tower::insert_fields) states them.
pub fn expected_fields(tiers: &[TierInfo], results: &[Result<Decision, Denied>]) -> HeaderMap {
    let mut map = HeaderMap::new();
    cellrate_tower::insert_fields(&mut map, tiers, results, Fields::Both);
    map
}

/// The rate-limit fields of `got` are exactly those of `expected` (the
/// status aside): `RateLimit-Policy`, `RateLimit`, `X-RateLimit-*`,
/// `Retry-After`.
pub fn assert_fields(got: &Response<String>, expected: &HeaderMap, at: &str) {
    for name in [
        "ratelimit-policy",
        "ratelimit",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
    ] {
        assert_eq!(got.headers().get(name), expected.get(name), "{at}: {name}");
    }
}

/// A fixed sequence of (ticks to wait, client) from `seed`: waits of 0 to
/// 399 ms (often 0, so limits are reached), three clients.
pub fn schedule(seed: u64, n: usize) -> Vec<(u64, &'static str)> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let wait = if (x >> 60) < 10 { 0 } else { (x >> 33) % 400 };
            (wait, ["ann", "bob", "cy"][((x >> 20) % 3) as usize])
        })
        .collect()
}

/// The rules of one client in the reference: a quota of the core and the
/// limiter that runs it, which `change` moves to new rules at an instant
/// keeping the cells used.
pub trait Rules: Copy {
    type Limiter: RateLimiter;
    /// A full limiter of these rules.
    fn limiter(self) -> Self::Limiter;
    /// `limiter` runs these rules from `now` on, its cells used kept.
    fn change(self, limiter: &mut Self::Limiter, now: u64);
    /// `(limit, window in ticks)`: what a tier of these rules announces.
    fn announced(self) -> (u64, u64);
    /// What tier `name` of these rules announces, at [`HZ`].
    fn info(self, name: &str) -> TierInfo {
        let (limit, window_ticks) = self.announced();
        TierInfo {
            name: name.to_string(),
            limit,
            window_ticks,
            hz: HZ,
            rate: None,
        }
    }
}

/// A window quota: the core's `Limiter` of it; a change is
/// `Limiter::set_quota` (`Algorithm::translate`).
macro_rules! window_rules {
    ($($q:ty),+) => {$(
        impl Rules for $q {
            type Limiter = Limiter<$q>;
            fn limiter(self) -> Limiter<$q> {
                Limiter::with_quota(self)
            }
            fn change(self, limiter: &mut Limiter<$q>, now: u64) {
                limiter.set_quota(now, self);
            }
            fn announced(self) -> (u64, u64) {
                (self.limit(), self.window())
            }
        }
    )+};
}

window_rules!(FixedWindowQuota, SlidingWindowQuota, BucketedWindowQuota);

/// The slots of a reference log: at least every limit the tests use.
pub const LOG_SLOTS: usize = 64;

/// An exact sliding log of `limit` cells per `window` ticks: the core's
/// `SlidingLog`; a change is `SlidingLog::set_limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogQuota {
    pub limit: u64,
    pub window: u64,
}

impl LogQuota {
    pub fn new(limit: u64, window: u64) -> Self {
        LogQuota { limit, window }
    }
}

impl Rules for LogQuota {
    type Limiter = SlidingLog<LOG_SLOTS>;
    fn limiter(self) -> SlidingLog<LOG_SLOTS> {
        SlidingLog::new(self.limit, self.window)
    }
    fn change(self, log: &mut SlidingLog<LOG_SLOTS>, now: u64) {
        log.set_limit(now, self.limit, self.window).unwrap();
    }
    fn announced(self) -> (u64, u64) {
        (self.limit, self.window)
    }
}

/// The core's reference: one limiter per client, or per (client,
/// endpoint), of the client's override if it has one, else of the tier's
/// quota.
pub struct Reference<P: Rules> {
    quota: P,
    overrides: HashMap<&'static str, P>,
    /// By (client, endpoint); the endpoint is "" in a tier per client.
    keys: HashMap<(&'static str, &'static str), P::Limiter>,
}

impl<P: Rules> Reference<P> {
    pub fn new(quota: P) -> Self {
        Reference {
            quota,
            overrides: HashMap::new(),
            keys: HashMap::new(),
        }
    }
    /// The rules `client` is decided by.
    pub fn rules_of(&self, client: &str) -> P {
        self.overrides.get(client).copied().unwrap_or(self.quota)
    }
    /// The limiter of (`client`, `endpoint`), made full of the client's
    /// rules when first seen.
    pub fn pair(&mut self, client: &'static str, endpoint: &'static str) -> &mut P::Limiter {
        let rules = self.rules_of(client);
        self.keys
            .entry((client, endpoint))
            .or_insert_with(|| rules.limiter())
    }
    pub fn client(&mut self, client: &'static str) -> &mut P::Limiter {
        self.pair(client, "")
    }
    pub fn check(&mut self, client: &'static str, now: u64) -> Result<Decision, Denied> {
        self.client(client).check(now)
    }
    pub fn check_pair(
        &mut self,
        client: &'static str,
        endpoint: &'static str,
        now: u64,
    ) -> Result<Decision, Denied> {
        self.pair(client, endpoint).check(now)
    }
    pub fn peek(&mut self, client: &'static str, endpoint: &'static str, now: u64) -> Snapshot {
        self.pair(client, endpoint).peek(now)
    }
    /// Every client without an override moves to `quota` at `now`.
    pub fn set_quota(&mut self, now: u64, quota: P) {
        self.quota = quota;
        for ((client, _), limiter) in &mut self.keys {
            if !self.overrides.contains_key(client) {
                quota.change(limiter, now);
            }
        }
    }
    /// `client` gets `rules` as its own (`None`: the tier's again) at
    /// `now`: each of its limiters moves to them, its cells used kept.
    pub fn set_override(&mut self, now: u64, client: &'static str, rules: Option<P>) {
        match rules {
            Some(r) => self.overrides.insert(client, r),
            None => self.overrides.remove(client),
        };
        let rules = self.rules_of(client);
        for ((c, _), limiter) in &mut self.keys {
            if *c == client {
                rules.change(limiter, now);
            }
        }
    }
}

/// Drives `svc` and `reference` through `steps`, comparing every answer;
/// how many were admitted and refused.
pub async fn drive<S, P>(
    svc: &mut S,
    clock: &ManualClock,
    reference: &mut Reference<P>,
    steps: &[(u64, &'static str)],
    what: &str,
) -> (usize, usize)
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
    P: Rules,
{
    let (mut admitted, mut refused) = (0, 0);
    for (i, &(wait, client)) in steps.iter().enumerate() {
        clock.advance(wait);
        let now = clock.now();
        let expected = reference.check(client, now);
        match expected {
            Ok(_) => admitted += 1,
            Err(_) => refused += 1,
        }
        let got = call(svc, client).await;
        assert_answer(
            &got,
            &expected,
            &format!("{what}: step {i}, {client} at {now}"),
        );
    }
    (admitted, refused)
}
