//! Property tests of the layer's answers, for every backend: the rate-limit
//! fields parse as the IETF draft's Structured Field lists, `r` never
//! exceeds `q` of its policy nor `t` its `w`, `Retry-After` is at least 1
//! second and never later than the refusing policy's `t` (the time until it
//! is full again), the legacy fields describe the tightest policy, and —
//! for the in-process backends at a manual clock — a request refused with
//! `Retry-After: s` is admitted when sent again `s` seconds later, and the
//! admissions equal those of an exact rational GCRA reference written
//! independently below. The shaper runs both refusing and delaying (held
//! requests, refusals past `max_wait`): its answers keep the same bounds,
//! and a retry after `Retry-After` is held at most `max_wait`, then
//! admitted.
//!
//! The Redis backends are exercised without a server (their port refuses
//! connections), so every answer comes from their failure policy: fallback,
//! open or closed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use cellrate::window::{FixedWindow, SlidingWindow};
use cellrate::{Clock, ManualClock, Quota};
use cellrate_tower::{
    Backend, Extract, Global, HeaderKey, KeyError, KeyPart, KeyedTiers, Part, RateLimitLayer,
    RequestKey, RouteName, Shaper,
};
use http::{HeaderMap, Request, Response, StatusCode};
use proptest::prelude::*;
use tower::{Service, ServiceBuilder, ServiceExt};

const HZ: u64 = 1_000;

/// A clock the test moves, shared with the layer.
#[derive(Clone)]
struct TestClock(Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

/// `x-client` names the client, the `RouteName` extension the endpoint.
struct ClientAndRoute;

struct RouteOnly;

impl KeyPart for RouteOnly {
    fn part<'r>(&self, req: &'r http::request::Parts) -> Result<Part<'r>, KeyError> {
        req.extensions
            .get::<RouteName>()
            .map(|r| Part::Str(r.0))
            .ok_or(KeyError::Missing)
    }
}

impl Extract for ClientAndRoute {
    fn extract<'r>(&self, req: &'r http::request::Parts) -> Result<RequestKey<'r>, KeyError> {
        (HeaderKey::new("x-client"), RouteOnly).extract(req)
    }
}

/// One parsed list member: name and integer parameters.
type Member = (String, HashMap<String, u64>);

/// Parses an RFC 9651 List of sf-strings with integer parameters, strictly:
/// `"name";key=int;key=int` members separated by `,` and optional spaces.
fn parse_list(value: &str) -> Result<Vec<Member>, String> {
    let b = value.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(format!("expected '\"' at {i} in {value:?}"));
        }
        i += 1;
        let mut name = String::new();
        loop {
            match b.get(i) {
                None => return Err("unterminated string".into()),
                Some(b'"') => {
                    i += 1;
                    break;
                }
                Some(b'\\') => {
                    match b.get(i + 1) {
                        Some(&c @ (b'"' | b'\\')) => name.push(c as char),
                        _ => return Err("bad escape".into()),
                    }
                    i += 2;
                }
                Some(&c) if (0x20..=0x7e).contains(&c) => {
                    name.push(c as char);
                    i += 1;
                }
                Some(c) => return Err(format!("byte {c} in a string")),
            }
        }
        let mut params = HashMap::new();
        while b.get(i) == Some(&b';') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(|c| c.is_ascii_lowercase()) {
                i += 1;
            }
            let key = &value[start..i];
            if key.is_empty() || b.get(i) != Some(&b'=') {
                return Err(format!("bad parameter in {value:?}"));
            }
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            let digits = &value[start..i];
            if digits.is_empty() || digits.len() > 15 {
                return Err(format!("not an sf-integer: {digits:?}"));
            }
            params.insert(key.to_string(), digits.parse().unwrap());
        }
        out.push((name, params));
        match b.get(i) {
            None => return Ok(out),
            Some(b',') => {
                i += 1;
                while b.get(i) == Some(&b' ') {
                    i += 1;
                }
            }
            Some(_) => return Err(format!("junk at {i} in {value:?}")),
        }
    }
}

fn int(h: &HeaderMap, name: &str) -> Option<u64> {
    h.get(name).map(|v| {
        let s = v.to_str().unwrap();
        assert!(
            s.bytes().all(|c| c.is_ascii_digit()) && !s.is_empty(),
            "{name}: {s:?}"
        );
        s.parse().unwrap()
    })
}

/// Checks one answer; returns its status and `Retry-After`.
fn validate(
    res: &Response<String>,
    cost: u64,
    gcra: bool,
) -> Result<(StatusCode, Option<u64>), TestCaseError> {
    let h = res.headers();
    let status = res.status();
    let retry = int(h, "retry-after");
    prop_assert!(
        [200, 429, 413, 503].contains(&status.as_u16()),
        "unexpected status {status}"
    );
    let policy = h
        .get("ratelimit-policy")
        .map(|v| parse_list(v.to_str().unwrap()));
    let state = h.get("ratelimit").map(|v| parse_list(v.to_str().unwrap()));
    match (policy, state) {
        (Some(policy), Some(state)) => {
            let (policy, state) = (
                policy.map_err(TestCaseError::fail)?,
                state.map_err(TestCaseError::fail)?,
            );
            prop_assert_eq!(policy.len(), state.len());
            for ((pn, p), (sn, s)) in policy.iter().zip(&state) {
                prop_assert_eq!(pn, sn);
                prop_assert_eq!(p.len(), 2);
                prop_assert_eq!(s.len(), 2);
                prop_assert!(s["r"] <= p["q"], "r > q: {:?} {:?}", policy, state);
                // A GCRA is full again within its window; a sliding window
                // may take up to two.
                let bound = if gcra { p["w"] } else { 2 * p["w"] };
                prop_assert!(s["t"] <= bound, "t > w: {:?} {:?}", policy, state);
            }
            let min_r = state.iter().map(|(_, s)| s["r"]).min().unwrap();
            let (xl, xr, xt) = (
                int(h, "x-ratelimit-limit").unwrap(),
                int(h, "x-ratelimit-remaining").unwrap(),
                int(h, "x-ratelimit-reset").unwrap(),
            );
            prop_assert!(xr <= xl);
            // The legacy fields are one of the policies.
            prop_assert!(
                policy
                    .iter()
                    .zip(&state)
                    .any(|((_, p), (_, s))| p["q"] == xl && s["r"] == xr && s["t"] == xt),
                "legacy ({}, {}, {}) is none of {:?} {:?}",
                xl,
                xr,
                xt,
                policy,
                state
            );
            match status.as_u16() {
                200 => {
                    prop_assert!(retry.is_none());
                    prop_assert_eq!(xr, min_r);
                }
                429 => {
                    let retry = retry.unwrap();
                    prop_assert!(retry >= 1);
                    // Some policy cannot take the cost now, and the wait it
                    // announces is no later than its own reset.
                    prop_assert!(
                        state
                            .iter()
                            .any(|(_, s)| s["r"] < cost && retry <= s["t"].max(1)),
                        "Retry-After {} vs {:?} for cost {}",
                        retry,
                        state,
                        cost
                    );
                }
                413 => {
                    prop_assert!(retry.is_none());
                    prop_assert!(policy.iter().any(|(_, p)| p["q"] < cost));
                }
                _ => prop_assert!(false, "503 with rate-limit fields"),
            }
        }
        (None, None) => {
            if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
            {
                prop_assert!(retry.unwrap_or(0) >= 1 || status == StatusCode::SERVICE_UNAVAILABLE);
            }
        }
        (Some(policy), None) => {
            // A cost that can never fit has no state to announce: 413 with
            // the policy it exceeds, nothing else.
            let policy = policy.map_err(TestCaseError::fail)?;
            prop_assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
            prop_assert!(retry.is_none());
            prop_assert!(policy.iter().any(|(_, p)| p["q"] < cost));
            prop_assert!(h.get("x-ratelimit-limit").is_none());
        }
        (None, Some(_)) => prop_assert!(false, "RateLimit without RateLimit-Policy"),
    }
    Ok((status, retry))
}

fn request(client: u8, endpoint: u8, cost: u64) -> Request<()> {
    const ROUTES: [&str; 3] = ["/a", "/b/{id}", "/c"];
    let mut req = Request::builder()
        .header("x-client", format!("c{client}"))
        .header("x-cost", cost)
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(RouteName(ROUTES[endpoint as usize % 3]));
    req
}

type Svc = tower::util::BoxService<Request<()>, Response<String>, Infallible>;

fn service<B: Backend>(backend: B, clock: TestClock) -> Svc {
    service_with(backend, clock, None)
}

/// With `delay = Some((max_wait, max_queued))`, the delaying mode.
fn service_with<B: Backend>(backend: B, clock: TestClock, delay: Option<(u64, usize)>) -> Svc {
    let mut builder = RateLimitLayer::builder(ClientAndRoute, backend, clock)
        .weight(|req| req.headers["x-cost"].to_str().unwrap().parse().unwrap());
    if let Some((max_wait, max_queued)) = delay {
        builder = builder.delay(max_wait, max_queued);
    }
    let layer = builder.build().unwrap();
    ServiceBuilder::new()
        .layer(layer)
        .service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(String::new())) })
        .boxed()
}

async fn send(svc: &mut Svc, req: Request<()>) -> Response<String> {
    svc.ready().await.unwrap().call(req).await.unwrap()
}

/// One tier of the reference, keyed like the layer's.
#[derive(Clone, Debug)]
struct TierSpec {
    per: u64,
    secs: u64,
    burst: u64,
    by_endpoint: bool,
}

/// The reference: GCRA over exact rationals. A tier of `per` cells per
/// `secs` seconds with burst `b` has `T = secs·HZ/per` ticks; keeping every
/// time multiplied by `per` makes each quantity an integer:
/// admit ⇔ max(TAT·per, now·per) + cost·secs·HZ − now·per ≤ b·secs·HZ.
#[derive(Default)]
struct Reference {
    tats: HashMap<(usize, u8, u8), u128>,
}

impl Reference {
    fn check(&mut self, tiers: &[TierSpec], client: u8, endpoint: u8, now: u64, cost: u64) -> bool {
        let mut next = Vec::new();
        for (i, t) in tiers.iter().enumerate() {
            let key = (i, client, if t.by_endpoint { endpoint } else { 255 });
            let now_p = now as u128 * t.per as u128;
            let tat = self.tats.get(&key).copied().unwrap_or(0).max(now_p);
            let step = cost as u128 * t.secs as u128 * HZ as u128;
            if tat + step - now_p > t.burst as u128 * t.secs as u128 * HZ as u128 {
                return false;
            }
            next.push((key, tat + step));
        }
        self.tats.extend(next);
        true
    }
}

fn tier_spec() -> impl Strategy<Value = TierSpec> {
    (1u64..20, 1u64..120, 1u64..8, any::<bool>()).prop_map(|(per, secs, burst, by_endpoint)| {
        TierSpec {
            per,
            secs,
            burst,
            by_endpoint,
        }
    })
}

fn op() -> impl Strategy<Value = (u8, u8, u64, u64)> {
    // (client, endpoint, cost, ms to advance before sending)
    (
        0u8..3,
        0u8..3,
        1u64..6,
        prop_oneof![Just(0u64), 0u64..3_000, 0u64..200_000],
    )
}

/// A runtime at tokio's paused time: a held request's sleep ends at once
/// (the layer's own clock is the manual one).
fn paused_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn keyed_tiers_fields_and_admissions(
        tiers in prop::collection::vec(tier_spec(), 1..4),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let rt = rt();
        let gcra = true;
        let clock = TestClock(Arc::new(ManualClock::new(0)));
        let mut backend = KeyedTiers::new();
        for (i, t) in tiers.iter().enumerate() {
            let q = Quota::per_duration(t.per, std::time::Duration::from_secs(t.secs))
                .with_burst(t.burst)
                .at_hz(HZ);
            let name = format!("t{i}");
            backend = if t.by_endpoint {
                backend.per_client_and_endpoint(&name, q, 64).unwrap()
            } else {
                backend.per_client(&name, q, 64).unwrap()
            };
        }
        let mut svc = service(backend, clock.clone());
        let mut reference = Reference::default();
        for (client, endpoint, cost, advance) in ops {
            clock.0.advance(advance);
            let res = rt.block_on(send(&mut svc, request(client, endpoint, cost)));
            let (status, retry) = validate(&res, cost, gcra)?;
            let fits = tiers.iter().all(|t| cost <= t.burst);
            if fits {
                let admit = reference.check(&tiers, client, endpoint, clock.0.now(), cost);
                prop_assert_eq!(status == StatusCode::OK, admit, "status {}", status);
            } else {
                prop_assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
            }
            if let (StatusCode::TOO_MANY_REQUESTS, Some(secs)) = (status, retry) {
                // Waiting the announced time is enough.
                clock.0.advance(secs * HZ);
                let res = rt.block_on(send(&mut svc, request(client, endpoint, cost)));
                prop_assert_eq!(validate(&res, cost, gcra)?.0, StatusCode::OK, "still refused after Retry-After");
                prop_assert!(reference.check(&tiers, client, endpoint, clock.0.now(), cost));
            }
        }
    }

    #[test]
    fn global_limiters_fields(
        kind in 0u8..4,
        limit in 1u64..10,
        window in 1u64..100_000,
        ops in prop::collection::vec(op(), 1..60),
        delay in prop::option::of((0u64..20_000, 1usize..4)),
    ) {
        // Delaying (held requests, refusals past `max_wait`) for the shaper.
        let delay = delay.filter(|_| kind == 3);
        let rt = if delay.is_some() { paused_rt() } else { rt() };
        let gcra = kind != 1;
        let clock = TestClock(Arc::new(ManualClock::new(0)));
        let mut svc = match kind {
            0 => service(Global::new("fixed", FixedWindow::new(limit, window), limit, window, HZ).unwrap(), clock.clone()),
            1 => service(Global::new("sliding", SlidingWindow::new(limit, window), limit, window, HZ).unwrap(), clock.clone()),
            2 => service(Global::gcra("gcra", Quota::per_ticks(limit, window).at_hz(HZ)).unwrap(), clock.clone()),
            _ => service_with(Shaper::new("shaper", Quota::per_ticks(limit, window).at_hz(HZ)).unwrap(), clock.clone(), delay),
        };
        for (client, endpoint, cost, advance) in ops {
            clock.0.advance(advance);
            let res = rt.block_on(send(&mut svc, request(client, endpoint, cost)));
            let (status, retry) = validate(&res, cost, gcra)?;
            if let (StatusCode::TOO_MANY_REQUESTS, Some(secs)) = (status, retry) {
                clock.0.advance(secs * HZ);
                let res = rt.block_on(send(&mut svc, request(client, endpoint, cost)));
                prop_assert_eq!(validate(&res, cost, gcra)?.0, StatusCode::OK, "still refused after Retry-After");
            }
        }
    }
}

#[cfg(feature = "redis")]
mod redis_backends {
    use super::*;
    use cellrate_redis::{
        AsyncRedisGcra, FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Target,
    };
    use cellrate_tower::{RedisAsync, RedisBlocking};

    /// A port with nothing listening: every check fails fast.
    fn dead_target() -> Target {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Target::standalone(&format!("redis://127.0.0.1:{port}/")).unwrap()
    }

    fn policy(tiers: &[(u64, u64, bool)]) -> RedisPolicy {
        RedisPolicy::new(
            "fields",
            tiers
                .iter()
                .enumerate()
                .map(|(i, &(per, burst, scoped))| {
                    let t = RedisTier::new(
                        format!("t{i}"),
                        Quota::per_minute(per).with_burst(burst).at_hz(HZ),
                    )
                    .unwrap();
                    if scoped {
                        t.per_scope()
                    } else {
                        t
                    }
                })
                .collect(),
        )
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn redis_failure_modes_fields(
            tiers in prop::collection::vec((1u64..30, 1u64..6, any::<bool>()), 1..3)
                .prop_filter("one scoped tier at most is fine; scoped needs a route", |_| true),
            fallback_scale in 1u64..4,
            mode in 0u8..3,
            asynchronous in any::<bool>(),
            ops in prop::collection::vec(op(), 1..25),
        ) {
            let rt = rt();
            let gcra = true;
            let _guard = rt.enter();
            let failure = match mode {
                0 => FailurePolicy::Open,
                1 => FailurePolicy::Closed,
                _ => FailurePolicy::Fallback(
                    tiers
                        .iter()
                        .map(|&(per, burst, _)| {
                            Quota::per_minute(per * fallback_scale)
                                .with_burst(burst * fallback_scale)
                                .at_hz(HZ)
                        })
                        .collect(),
                ),
            };
            let config = RedisConfig::new(failure)
                .with_timeout(std::time::Duration::from_millis(50))
                .with_reconnect_interval(std::time::Duration::from_secs(60));
            let clock = TestClock(Arc::new(ManualClock::new(0)));
            let mut svc = if asynchronous {
                let rl = AsyncRedisGcra::new(dead_target(), policy(&tiers), config).unwrap();
                service(RedisAsync::new(rl), clock.clone())
            } else {
                let rl = RedisGcra::new(dead_target(), policy(&tiers), config).unwrap();
                service(RedisBlocking::new(rl), clock.clone())
            };
            for (client, endpoint, cost, _) in ops {
                let res = rt.block_on(send(&mut svc, request(client, endpoint, cost)));
                let (status, _) = validate(&res, cost, gcra)?;
                // Too large for the Redis policy (whose bursts `validate`
                // read from the fields): refused before any round trip,
                // whatever the failure policy.
                let never_fits = tiers.iter().any(|&(_, burst, _)| cost > burst);
                if status == StatusCode::PAYLOAD_TOO_LARGE {
                    continue;
                }
                prop_assert!(!never_fits);
                match mode {
                    0 => prop_assert_eq!(status, StatusCode::OK),
                    1 => prop_assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE),
                    _ => {
                        // The fields announce the fallback quotas as applied
                        // (at the Redis clock, as a tier would hold them).
                        if let Some(p) = res.headers().get("ratelimit-policy") {
                            let p = parse_list(p.to_str().unwrap()).unwrap();
                            // Each tier's burst policy (its rate policy, if
                            // any, follows it as "<tier>/rate").
                            let bursts = p.iter().filter(|(name, _)| !name.ends_with("/rate"));
                            for ((_, params), &(per, burst, _)) in bursts.zip(&tiers) {
                                let fallback = Quota::per_minute(per * fallback_scale)
                                    .with_burst(burst * fallback_scale)
                                    .at_hz(HZ);
                                if let Ok(applied) = RedisTier::new("x", fallback) {
                                    prop_assert_eq!(params["q"], applied.quota().burst());
                                }
                                prop_assert!(params["q"] <= burst * fallback_scale);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The policies one tier announces, as a client reads them: the burst
/// policy `(q, w)` and the rate policy `"<name>/rate"` (the burst policy
/// itself when there is none).
fn announced(res: &Response<String>) -> ((u64, u64), (u64, u64)) {
    let list = parse_list(res.headers()["ratelimit-policy"].to_str().unwrap()).unwrap();
    let get = |(_, p): &Member| (p["q"], p["w"]);
    let burst = get(&list[0]);
    let rate = list.get(1).map_or(burst, get);
    assert!(
        list.len() <= 2 && list.get(1).is_none_or(|(n, _)| n == "t/rate"),
        "{list:?}"
    );
    (burst, rate)
}

/// A client that paces itself as a token bucket of depth `depth` and rate
/// `cells` per `secs` seconds, in exact integers: times are kept in ticks
/// times `cells`, so one cell is `secs·HZ` of them.
struct Pacer {
    depth: u64,
    cells: u64,
    secs: u64,
    tat: u128,
}

impl Pacer {
    /// The first tick at or after `now` at which one more cell fits.
    fn next(&self, now: u64) -> u64 {
        let step = self.secs as u128 * HZ as u128;
        // fits at t ⇔ max(tat, t·cells) + step − t·cells ≤ depth·step
        let earliest = (self.tat + step).saturating_sub(self.depth as u128 * step);
        now.max(earliest.div_ceil(self.cells as u128) as u64)
    }
    fn send(&mut self, at: u64) {
        let step = self.secs as u128 * HZ as u128;
        self.tat = self.tat.max(at as u128 * self.cells as u128) + step;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A client pacing by the announced policies (depth: the burst
    /// policy's `q`; rate: the rate policy's `q` per `w`) is never refused
    /// by the real layer, however it spaces its requests; one that goes
    /// one cell per window faster, or sends one more than the burst at
    /// once, is refused. And the announced rate is the real one whenever
    /// it is a whole number of cells in at most a day.
    #[test]
    fn a_client_pacing_by_the_announced_policies_is_never_refused(
        cells in 1u64..200,
        period in prop::sample::select(vec![1u64, 2, 7, 60, 3_600]),
        burst in 1u64..40,
        gaps in prop::collection::vec(prop_oneof![Just(0u64), 0u64..500, 0u64..20_000], 1..80),
        faster in any::<bool>(),
    ) {
        let rt = rt();
        let quota = Quota::per_duration(cells, std::time::Duration::from_secs(period))
            .with_burst(burst)
            .at_hz(HZ);
        let clock = TestClock(Arc::new(ManualClock::new(0)));
        let backend = KeyedTiers::new().per_client("t", quota, 16).unwrap();
        let mut svc = service(backend, clock.clone());
        // The first request reads the policies (and is a cell of the pacer's).
        let first = rt.block_on(send(&mut svc, request(0, 0, 1)));
        prop_assert_eq!(first.status(), StatusCode::OK);
        let ((depth, _), (rate_q, rate_w)) = announced(&first);
        prop_assert_eq!(depth, burst);
        // The announced rate never exceeds the real one, and equals it when
        // the limiter's rate is exact (its window then divides `period`).
        prop_assert!((rate_q as u128) * (period as u128) <= (cells as u128) * (rate_w as u128));
        if quota.is_exact() {
            prop_assert_eq!((rate_q as u128) * (period as u128), (cells as u128) * (rate_w as u128));
        }
        let mut pacer = Pacer { depth, cells: rate_q, secs: rate_w, tat: 0 };
        pacer.send(0);
        let mut now = 0u64;
        for gap in gaps {
            now = pacer.next(now + gap);
            clock.0.advance(now - clock.0.now());
            let res = rt.block_on(send(&mut svc, request(0, 0, 1)));
            validate(&res, 1, true)?;
            prop_assert_eq!(res.status(), StatusCode::OK, "a pacing client was refused at {} ms: {:?}", now, res.headers());
            pacer.send(now);
        }
        if faster {
            // One cell per window more than announced: from full, the burst
            // at once, then `q + 1` more spread over the next `w` seconds
            // (the last at `w`): the limiter holds `b + w/T ≤ b + q` there.
            clock.0.advance(period * HZ * (burst + 1) + rate_w * HZ);
            let start = clock.0.now();
            let mut refused = 0;
            for k in 0..(depth + rate_q + 1) {
                let at = start + if k < depth {
                    0
                } else {
                    ((k - depth + 1) * rate_w * HZ).div_ceil(rate_q + 1)
                };
                clock.0.advance(at - clock.0.now());
                let res = rt.block_on(send(&mut svc, request(0, 0, 1)));
                refused += (res.status() != StatusCode::OK) as u32;
            }
            prop_assert!(refused >= 1, "one cell per window over the rate policy was never refused");
        }
        // One more than the burst at once, from full, is refused.
        clock.0.advance(period * HZ * (burst + 1));
        let statuses: Vec<_> = (0..=depth)
            .map(|_| rt.block_on(send(&mut svc, request(0, 0, 1))).status())
            .collect();
        prop_assert!(statuses[..depth as usize].iter().all(|s| *s == StatusCode::OK));
        prop_assert_eq!(statuses[depth as usize], StatusCode::TOO_MANY_REQUESTS);
    }
}

/// A second, independent client model of the announced policies (see the
/// `headers` module docs), at a ns clock: it may send the smallest burst
/// policy's `q` at once (the members not named `"<tier>/rate"`), then one
/// request every `w/q` seconds of the fastest member, each gap rounded up
/// to whole ticks of `hz`.
struct NsPacer {
    burst: u64,
    pace: (u64, u64),
    gap: u64,
}

impl NsPacer {
    fn from_policy(list: &[Member], hz: u64) -> Result<NsPacer, TestCaseError> {
        let burst = list
            .iter()
            .filter(|(n, _)| !n.ends_with("/rate"))
            .map(|(_, p)| p["q"])
            .min()
            .unwrap();
        let pace = list
            .iter()
            .map(|(_, p)| (p["q"], p["w"]))
            .max_by(|a, b| ((a.0 as u128) * (b.1 as u128)).cmp(&((b.0 as u128) * (a.1 as u128))))
            .unwrap();
        let gap = (pace.1 * hz).div_ceil(pace.0);
        Ok(NsPacer { burst, pace, gap })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The fields' bounds against the real layer (keyed and global GCRA, a ns
    /// clock at any phase): a client that sends the burst at once, then one
    /// request per `w/q` of the fastest announced policy, is never refused
    /// and falls behind the limiter by less than one cell per window; one
    /// that sends that `q` plus the burst plus one within `w` is refused.
    #[test]
    fn a_client_pacing_evenly_at_a_ns_clock(
        per in 1u64..400,
        secs in prop::sample::select(vec![1u64, 2, 3, 7, 60, 90, 3_600]),
        burst in 1u64..40,
        keyed in any::<bool>(),
        phase in 0u64..5_000_000_000,
    ) {
        const NS: u64 = 1_000_000_000;
        let rt = rt();
        let quota = Quota::per_duration(per, std::time::Duration::from_secs(secs))
            .with_burst(burst)
            .at_hz(NS);
        let clock = TestClock(Arc::new(ManualClock::new(phase)));
        let mut svc = if keyed {
            service(KeyedTiers::new().per_client("api", quota, 8).unwrap(), clock.clone())
        } else {
            service(Global::gcra("api", quota).unwrap(), clock.clone())
        };
        let first = rt.block_on(send(&mut svc, request(0, 0, 1)));
        prop_assert_eq!(first.status(), StatusCode::OK);
        let listed = parse_list(first.headers()["ratelimit-policy"].to_str().unwrap()).unwrap();
        let pacer = NsPacer::from_policy(&listed, NS)?;
        prop_assert_eq!(pacer.burst, burst);
        for _ in 1..pacer.burst {
            let res = rt.block_on(send(&mut svc, request(0, 0, 1)));
            prop_assert_eq!(res.status(), StatusCode::OK, "refused in the burst: {:?}", listed);
        }
        // Two pace windows, at most 600 requests.
        let (q, w) = pacer.pace;
        let paced = (2 * q).min(600);
        for k in 1..=paced {
            clock.0.set(phase + k * pacer.gap);
            let res = rt.block_on(send(&mut svc, request(0, 0, 1)));
            prop_assert_eq!(res.status(), StatusCode::OK,
                "paced request {} of {:?} refused at +{} ns", k, listed, k * pacer.gap);
        }
        // What the limiter refills in the same time, exactly:
        // ⌊elapsed·per / (secs·NS)⌋ cells beyond the burst.
        let elapsed = paced * pacer.gap;
        let capacity = (elapsed as u128 * per as u128 / (secs as u128 * NS as u128)) as u64;
        let windows = elapsed.div_ceil(w * NS);
        prop_assert!(capacity <= paced + windows,
            "{:?} paced {} in {} ns where the limiter refills {}", listed, paced, elapsed, capacity);

        // Exceeding: q + burst + 1 evenly within w seconds, from a full bucket.
        let n = q + burst + 1;
        if n <= 2_000 {
            let start = phase + elapsed;
            let mut refused = 0;
            for i in 0..n {
                clock.0.set(start + i * (w * NS - 1) / (n - 1));
                if rt.block_on(send(&mut svc, request(1, 0, 1))).status() == StatusCode::TOO_MANY_REQUESTS {
                    refused += 1;
                }
            }
            prop_assert!(refused >= 1, "{} within {} s all admitted under {:?}", n, w, listed);
        }
    }
}
