//! The tower layer over the Redis clients, over loopback HTTP, with a
//! `redis-server` of its own that is killed mid-test and restarted, under
//! each failure policy, for the blocking (`spawn_blocking`) and the async
//! backend.
//!
//! Needs `CELLRATE_REDIS_SERVER` (the `redis-server` binary), which
//! scripts/stages/70-redis.sh sets: the tests are `#[ignore]`d, and fail
//! without it when run with `--include-ignored`.
#![cfg(all(feature = "axum", feature = "redis"))]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use cellrate::{Quota, StdClock};
use cellrate_redis::{
    AsyncRedisGcra, FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Target,
};
use cellrate_tower::{
    Backend, FallbackCounters, HeaderKey, RateLimitLayer, RedisBackend, RedisClient, Route,
};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

#[path = "../../cellrate-redis/tests/support/redis_server.rs"]
mod redis_server;
use redis_server::Server;

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
}

async fn get_key(addr: SocketAddr, path: &str, key: &str) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", addr.to_string())
        .header("x-api-key", key)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let _ = res.into_body().collect().await;
    Reply { status, headers }
}

fn params(value: &str) -> Vec<(String, HashMap<String, u64>)> {
    value
        .split(", ")
        .map(|item| {
            let mut it = item.split(';');
            let name = it.next().unwrap().trim_matches('"').to_string();
            let p = it
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.parse::<u64>().unwrap())
                })
                .collect();
            (name, p)
        })
        .collect()
}

fn policy(prefix: &str) -> RedisPolicy {
    RedisPolicy::new(
        prefix,
        vec![
            RedisTier::new("key", Quota::per_minute(10).at_hz(1_000)).unwrap(),
            RedisTier::new("endpoint", Quota::per_minute(3).at_hz(1_000))
                .unwrap()
                .per_scope(),
        ],
    )
    .unwrap()
}

fn config(failure: FailurePolicy) -> RedisConfig {
    RedisConfig::new(failure)
        .with_timeout(Duration::from_millis(200))
        .with_reconnect_interval(Duration::from_millis(20))
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("tw-{name}-{nanos}")
}

async fn serve<B: Backend>(backend: B) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let layer = RateLimitLayer::builder(
        (HeaderKey::new("x-api-key"), Route),
        backend,
        StdClock::new(),
    )
    .build()
    .unwrap();
    let router = Router::new()
        .route("/a", get(|| async { "a" }))
        .route("/b", get(|| async { "b" }))
        .route_layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, task)
}

/// Policy (q, w) pairs announced.
fn announced(h: &HeaderMap) -> Vec<(u64, u64)> {
    params(h["ratelimit-policy"].to_str().unwrap())
        .into_iter()
        .map(|(_, p)| (p["q"], p["w"]))
        .collect()
}

/// Every field of a response is consistent with the policy it announces.
fn consistent(r: &Reply) {
    let policy = params(r.headers["ratelimit-policy"].to_str().unwrap());
    let state = params(r.headers["ratelimit"].to_str().unwrap());
    assert_eq!(policy.len(), state.len());
    for ((n1, p), (n2, s)) in policy.iter().zip(&state) {
        assert_eq!(n1, n2);
        assert!(s["r"] <= p["q"], "{policy:?} {state:?}");
        assert!(s["t"] <= p["w"], "{policy:?} {state:?}");
    }
    let xl: u64 = r.headers["x-ratelimit-limit"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(policy.iter().any(|(_, p)| p["q"] == xl));
    if r.status == StatusCode::TOO_MANY_REQUESTS {
        let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry >= 1);
    }
}

async fn run(
    server: &mut Server,
    failure: FailurePolicy,
    make: impl Fn(
        &str,
        RedisConfig,
    ) -> (
        Arc<FallbackCounters>,
        tokio::task::JoinHandle<()>,
        SocketAddr,
    ),
) {
    let name = format!("{failure:?}");
    let (counters, task, addr) = make(&unique(&name[..4]), config(failure.clone()));
    // Redis decides: 3 per endpoint, exact.
    let mut codes = Vec::new();
    for _ in 0..4 {
        let r = get_key(addr, "/a", "alice").await;
        consistent(&r);
        assert_eq!(announced(&r.headers), [(10, 60), (3, 60)]);
        codes.push(r.status.as_u16());
    }
    assert_eq!(codes, [200, 200, 200, 429], "{name}");
    assert_eq!(counters.stats().entered, 0);

    // Killed mid-test.
    server.stop();
    for _ in 0..5 {
        let r = get_key(addr, "/a", "alice").await;
        match &failure {
            FailurePolicy::Open => {
                assert_eq!(r.status, StatusCode::OK, "{name}");
                assert!(
                    r.headers.get("ratelimit").is_none(),
                    "fail-open sends no fields"
                );
            }
            FailurePolicy::Closed => {
                assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{name}");
                assert!(r.headers.get("retry-after").is_some());
                assert!(r.headers.get("ratelimit").is_none());
            }
            FailurePolicy::Fallback(_) => {
                consistent(&r);
                // The fields announce the fallback quotas that decided.
                assert_eq!(announced(&r.headers), [(20, 60), (6, 60)], "{name}");
            }
            other => panic!("no expectation for {other:?}"),
        }
    }
    if let FailurePolicy::Fallback(_) = failure {
        // The fallback is a fresh local table: 6 per endpoint, and 5 were sent.
        let r = get_key(addr, "/a", "alice").await;
        assert_eq!(r.status, StatusCode::OK);
        let r = get_key(addr, "/a", "alice").await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        consistent(&r);
    }
    let s = counters.stats();
    assert!(s.degraded && s.entered == 1 && s.left == 0, "{s:?}");

    // Back.
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let r = get_key(addr, "/b", "bob").await;
        if r.status == StatusCode::OK && counters.stats().left == 1 {
            consistent(&r);
            assert_eq!(announced(&r.headers), [(10, 60), (3, 60)]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never came back: {:?}",
            counters.stats()
        );
    }
    let s = counters.stats();
    assert_eq!((s.entered, s.left, s.degraded), (1, 1, false));
    task.abort();
}

fn failures() -> [FailurePolicy; 3] {
    [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Fallback(vec![
            Quota::per_minute(20).at_hz(1_000),
            Quota::per_minute(6).at_hz(1_000),
        ]),
    ]
}

/// Every failure policy through an outage of a server of the test's own,
/// with the backend over the client `make` builds.
async fn through_an_outage<L: RedisClient>(
    make: fn(Target, RedisPolicy, RedisConfig) -> Result<L, cellrate_redis::Error>,
) {
    let bin = std::env::var("CELLRATE_REDIS_SERVER")
        .expect("CELLRATE_REDIS_SERVER is not set: this test needs redis-server (run scripts/stages/70-redis.sh)");
    let mut server = Server::start(&bin);
    for failure in failures() {
        let url = server.url();
        run(&mut server, failure, |prefix, cfg| {
            let rl = make(Target::standalone(&url).unwrap(), policy(prefix), cfg).unwrap();
            let backend = RedisBackend::new(rl);
            let counters = backend.counters();
            let (addr, task) = futures_block(serve(backend));
            (counters, task, addr)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn blocking_backend_through_an_outage() {
    through_an_outage::<RedisGcra>(RedisGcra::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn async_backend_through_an_outage() {
    through_an_outage::<AsyncRedisGcra>(AsyncRedisGcra::new).await;
}

fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// A fixed-window tier per client and a GCRA tier per endpoint, through
/// the layer on Redis: each refuses in turn, a refusal by one charges the
/// other nothing, and the fields announce both tiers.
async fn a_fixed_window_and_a_gcra_tier<L: RedisClient>(
    make: fn(Target, RedisPolicy, RedisConfig) -> Result<L, cellrate_redis::Error>,
) {
    use cellrate::compose::{AlgorithmKind, LimiterConfig};
    let bin = std::env::var("CELLRATE_REDIS_SERVER")
        .expect("CELLRATE_REDIS_SERVER is not set: this test needs redis-server (run scripts/stages/70-redis.sh)");
    let server = Server::start(&bin);
    let window = LimiterConfig::new(AlgorithmKind::FixedWindow, 3, 60_000, 1_000);
    let policy = RedisPolicy::new(
        unique("mixed"),
        vec![
            RedisTier::from_config("key", &window).unwrap(),
            RedisTier::new("endpoint", Quota::per_minute(2).at_hz(1_000))
                .unwrap()
                .per_scope(),
        ],
    )
    .unwrap();
    let rl = make(
        Target::standalone(&server.url()).unwrap(),
        policy,
        config(FailurePolicy::Closed),
    )
    .unwrap();
    let (addr, task) = serve(RedisBackend::new(rl)).await;
    let mut codes = Vec::new();
    let mut last = None;
    for path in ["/a", "/a", "/a", "/b", "/b"] {
        let r = get_key(addr, path, "alice").await;
        consistent(&r);
        assert_eq!(announced(&r.headers), [(3, 60), (2, 60)]);
        codes.push(r.status.as_u16());
        last = Some(r);
    }
    // /a: the endpoint's GCRA (2) refuses the third, which the window does
    // not count; /b: the window's third cell, then the window refuses.
    assert_eq!(codes, [200, 200, 429, 200, 429]);
    let last = last.unwrap();
    let state = params(last.headers["ratelimit"].to_str().unwrap());
    // The window is spent; the /b endpoint was charged once, not twice.
    assert_eq!((state[0].1["r"], state[1].1["r"]), (0, 1), "{state:?}");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn blocking_backend_with_a_fixed_window_tier() {
    a_fixed_window_and_a_gcra_tier::<RedisGcra>(RedisGcra::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn async_backend_with_a_fixed_window_tier() {
    a_fixed_window_and_a_gcra_tier::<AsyncRedisGcra>(AsyncRedisGcra::new).await;
}
