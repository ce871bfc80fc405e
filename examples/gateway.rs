//! A small HTTP gateway that limits per API key and per (key, endpoint)
//! with `cellrate::tower`, and tells clients where they stand with the IETF
//! `RateLimit` / `RateLimit-Policy` fields, the legacy `X-RateLimit-*` ones
//! and `Retry-After`.
//!
//! ```text
//! cargo run --example gateway --features axum -- [LISTEN_ADDR]
//! cargo run --example gateway --features axum,redis -- --redis [REDIS_URL] [LISTEN_ADDR]
//! curl -i -H 'x-api-key: alice' http://127.0.0.1:8080/orders
//! ```
//!
//! Limits: 10 requests per minute per API key ("key"), and 3 per minute per
//! key and endpoint ("endpoint"); the endpoint is the matched route
//! (`/orders/{id}` for every order id), never the raw path. A request
//! refused by one tier consumes from neither. By default the limits live in
//! this process; with `--redis` they live in Redis (URL: the argument,
//! `$CELLRATE_REDIS_URL` or `redis://127.0.0.1:6379/`), so a fleet of
//! gateways shares them, and while Redis is down each gateway falls back to
//! local limits twice as loose (the fields then announce those).
//!
//! The first line printed is `listening on ADDR` (port 0 picks a free one);
//! the default address is `127.0.0.1:8080`. `$CELLRATE_GATEWAY_PREFIX` sets
//! the Redis key prefix.
//!
//! With the `metrics` feature (`--features axum,metrics`) the gateway also
//! serves `GET /metrics` in Prometheus' text format, unlimited (a real
//! deployment would serve it on an internal address): the layer's
//! `cellrate_*` series (see the crate's `metrics` module), from
//! `metrics-exporter-prometheus` installed before the layer is built.

use axum::routing::get;
use axum::Router;
use cellrate::time::StdClock;
use cellrate::tower::{Backend, HeaderKey, KeyedTiers, RateLimitLayer, Route};
use cellrate::Quota;

fn exit(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2)
}

fn app<B: Backend>(backend: B) -> Router {
    let layer = RateLimitLayer::builder(
        (HeaderKey::new("x-api-key"), Route),
        backend,
        StdClock::new(),
    )
    .build()
    .unwrap_or_else(|e| exit(format!("bad limiter config: {e}")));
    Router::new()
        .route("/orders", get(|| async { "orders\n" }))
        .route("/orders/{id}", get(|| async { "one order\n" }))
        .route("/users", get(|| async { "users\n" }))
        .route("/status", get(|| async { "ok\n" }))
        .route_layer(layer)
}

fn in_process() -> Router {
    let hz = StdClock::HZ;
    let tiers = KeyedTiers::new()
        .per_client("key", Quota::per_minute(10).at_hz(hz), 100_000)
        .and_then(|t| {
            t.per_client_and_endpoint("endpoint", Quota::per_minute(3).at_hz(hz), 100_000)
        })
        .unwrap_or_else(|e| exit(format!("bad limiter config: {e}")));
    app(tiers)
}

#[cfg(feature = "redis")]
fn redis(url: &str) -> Router {
    use cellrate::redis::{
        AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, RedisTier, Target,
    };
    use cellrate::tower::RedisAsync;
    use std::time::Duration;

    let prefix = std::env::var("CELLRATE_GATEWAY_PREFIX").unwrap_or_else(|_| "gw".into());
    let tier = |name: &str, quota: Quota| {
        RedisTier::new(name, quota).unwrap_or_else(|e| exit(format!("bad tier {name}: {e}")))
    };
    let policy = RedisPolicy::new(
        prefix,
        vec![
            tier("key", Quota::per_minute(10).at_hz(1_000)),
            tier("endpoint", Quota::per_minute(3).at_hz(1_000)).per_scope(),
        ],
    )
    .unwrap_or_else(|e| exit(format!("bad policy: {e}")));
    let config = RedisConfig::new(FailurePolicy::Fallback(vec![
        Quota::per_minute(20).at_hz(1_000),
        Quota::per_minute(6).at_hz(1_000),
    ]))
    .with_timeout(Duration::from_millis(200));
    let target =
        Target::standalone(url).unwrap_or_else(|e| exit(format!("bad redis url {url}: {e}")));
    let limiter = AsyncRedisGcra::new(target, policy, config)
        .unwrap_or_else(|e| exit(format!("bad limiter config: {e}")));
    app(RedisAsync::new(limiter))
}

#[cfg(not(feature = "redis"))]
fn redis(_url: &str) -> Router {
    exit(
        "--redis needs the `redis` feature: cargo run --example gateway --features axum,redis"
            .into(),
    )
}

#[tokio::main]
async fn main() {
    // Before any layer is built: a layer registers its series when built.
    let scrape = metrics_endpoint();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let router = if args.first().map(String::as_str) == Some("--redis") {
        args.remove(0);
        let url = if args.first().is_some_and(|a| a.starts_with("redis")) {
            args.remove(0)
        } else {
            std::env::var("CELLRATE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
        };
        redis(&url)
    } else {
        in_process()
    };
    let router = router.merge(scrape);
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| exit(format!("cannot listen on {addr}: {e}")));
    match listener.local_addr() {
        Ok(a) => println!("listening on {a}"),
        Err(e) => eprintln!("no local address: {e}"),
    }
    if let Err(e) = axum::serve(listener, router).await {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
}

/// `GET /metrics` in Prometheus' text format (feature `metrics`): installs
/// the Prometheus recorder as the global `metrics` recorder, so it must run
/// before the layer is built. The Redis check latency gets buckets (without
/// them the exporter writes a summary).
#[cfg(feature = "metrics")]
fn metrics_endpoint() -> Router {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let buckets = [
        0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(cellrate::metrics::REDIS_CHECK_SECONDS.into()),
            &buckets,
        )
        .and_then(PrometheusBuilder::install_recorder)
        .unwrap_or_else(|e| exit(format!("cannot install the metrics recorder: {e}")));
    Router::new().route(
        "/metrics",
        get(move || {
            let handle = handle.clone();
            async move {
                handle.run_upkeep();
                handle.render()
            }
        }),
    )
}

/// No `/metrics` without the `metrics` feature.
#[cfg(not(feature = "metrics"))]
fn metrics_endpoint() -> Router {
    Router::new()
}
