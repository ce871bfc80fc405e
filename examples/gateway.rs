//! A small HTTP gateway that limits per API key and per (key, endpoint)
//! through Redis, and tells clients where they stand with the IETF
//! `RateLimit` / `RateLimit-Policy` fields, the legacy `X-RateLimit-*` ones
//! and `Retry-After`.
//!
//! ```text
//! cargo run --example gateway --features redis -- [REDIS_URL] [LISTEN_ADDR]
//! curl -i -H 'x-api-key: alice' http://127.0.0.1:8080/orders
//! ```
//!
//! Defaults: `$CELLRATE_REDIS_URL` or `redis://127.0.0.1:6379/`, and
//! `127.0.0.1:8080`. The first line printed is `listening on ADDR` (port 0
//! picks a free one). `$CELLRATE_GATEWAY_PREFIX` sets the key prefix.
//!
//! Limits: 10 requests per minute per API key ("key"), and 3 per minute per
//! key and endpoint ("endpoint"), decided together in one Redis round trip:
//! a request refused by one tier consumes from neither. While Redis is down,
//! each gateway falls back to local limits twice as loose.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use cellrate::headers::{self, Policy, PolicyState};
use cellrate::redis::{
    AsyncRedisGcra, FailurePolicy, Outcome, RedisConfig, RedisPolicy, RedisTier, Target, HZ,
};
use cellrate::Quota;

struct App {
    limiter: AsyncRedisGcra,
}

fn policy(prefix: &str) -> RedisPolicy {
    RedisPolicy::new(
        prefix,
        vec![
            RedisTier::new("key", Quota::per_minute(10).at_hz(1_000)).expect("valid tier"),
            RedisTier::new("endpoint", Quota::per_minute(3).at_hz(1_000))
                .expect("valid tier")
                .per_scope(),
        ],
    )
    .expect("valid policy")
}

fn header(value: &str) -> HeaderValue {
    // Every value written here is ASCII digits, quotes, ';', '=' and ','.
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// The header fields for an outcome: every tier in the IETF fields, the
/// tightest tier (fewest remaining) in the legacy ones.
fn rate_headers(policy: &RedisPolicy, outcome: &Outcome) -> HeaderMap {
    let mut map = HeaderMap::new();
    let tiers = policy.tiers();
    let policies: Vec<Policy<'_>> = tiers
        .iter()
        .map(|t| Policy::from_quota(t.name(), &t.quota()))
        .collect();
    let states: Vec<PolicyState<'_>> = tiers
        .iter()
        .zip(outcome.results())
        .map(|(t, r)| PolicyState::new(t.name(), *r))
        .collect();
    let mut s = String::new();
    if headers::write_ratelimit_policy(&mut s, &policies, HZ).is_ok() {
        map.insert("ratelimit-policy", header(&s));
    }
    s.clear();
    if headers::write_ratelimit(&mut s, &states, HZ).is_ok() {
        map.insert("ratelimit", header(&s));
    }
    let tightest = outcome.denied().map(Err).or_else(|| {
        outcome
            .results()
            .iter()
            .copied()
            .min_by_key(|r| r.map_or(0, |d| d.remaining()))
    });
    if let Some(result) = tightest {
        if let Ok((limit, remaining, reset)) = headers::x_ratelimit(&result, HZ) {
            map.insert("x-ratelimit-limit", header(&limit.to_string()));
            map.insert("x-ratelimit-remaining", header(&remaining.to_string()));
            map.insert("x-ratelimit-reset", header(&reset.to_string()));
        }
    }
    if let Some(denied) = outcome.denied() {
        s.clear();
        if headers::write_retry_after(&mut s, &denied, HZ).is_ok() {
            map.insert("retry-after", header(&s));
        }
    }
    map
}

async fn handle(State(app): State<Arc<App>>, uri: Uri, req_headers: HeaderMap) -> Response {
    let Some(key) = req_headers.get("x-api-key").and_then(|v| v.to_str().ok()) else {
        return (StatusCode::UNAUTHORIZED, "missing x-api-key\n").into_response();
    };
    let outcome = match app.limiter.check_n(key, Some(uri.path()), 1).await {
        Ok(o) => o,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    let map = rate_headers(app.limiter.policy(), &outcome);
    if outcome.is_admitted() {
        (StatusCode::OK, map, format!("ok {}\n", uri.path())).into_response()
    } else {
        (StatusCode::TOO_MANY_REQUESTS, map, "rate limited\n").into_response()
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .or_else(|| std::env::var("CELLRATE_REDIS_URL").ok())
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let prefix = std::env::var("CELLRATE_GATEWAY_PREFIX").unwrap_or_else(|_| "gw".into());

    let target = match Target::standalone(&url) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bad redis url {url}: {e}");
            std::process::exit(2);
        }
    };
    let config = RedisConfig::new(FailurePolicy::Fallback(vec![
        Quota::per_minute(20).at_hz(1_000),
        Quota::per_minute(6).at_hz(1_000),
    ]))
    .with_timeout(Duration::from_millis(200));
    let limiter = match AsyncRedisGcra::new(target, policy(&prefix), config) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bad limiter config: {e}");
            std::process::exit(2);
        }
    };
    let app = Arc::new(App { limiter });
    let router = axum::Router::new().fallback(handle).with_state(app);
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {addr}: {e}");
            std::process::exit(2);
        }
    };
    match listener.local_addr() {
        Ok(a) => println!("listening on {a}"),
        Err(e) => eprintln!("no local address: {e}"),
    }
    if let Err(e) = axum::serve(listener, router).await {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
}
