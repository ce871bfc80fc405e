//! The tower layer's cost per request: the same axum handler bare, behind
//! `cellrate::tower`, and behind `tower_governor` with an equivalent quota
//! and an equivalent key (an `x-api-key` header, 1 000 clients in turn).
//!
//! Each request goes through the router as a tower `Service` in process (no
//! sockets: the figure is the middleware, not the network), polled with a
//! no-op waker (every future here is ready on its first poll). Two quotas:
//! *admit* (10⁹ per second, bursts of 1 000: every request admitted) and
//! *deny* (one per hour: every request after a client's first refused).
//!
//! The `ratio:` lines (printed first, see `common/paired.rs`) time chunks of
//! the two sides alternately; then criterion runs each side alone.
//!
//! ```text
//! cargo bench --features axum --bench tower
//! cargo bench --features axum,metrics --bench tower
//! ```
//!
//! With `metrics` the layer also records its series; the extra `ratio:`
//! lines then pair the same layer built under a Prometheus recorder (every
//! request increments its counters, and the keyed tier's are read and
//! published) against one built without a recorder (its handles do
//! nothing), and the recording layer against the bare handler, to be read
//! beside the `cellrate / bare handler` line of a run without the feature.
//!
//! With `serde`, one more pair: a fixed-window tier in process (its own
//! table of cells, `capacity` keys) full of clients that are not idle, a
//! request from a key it has never seen (it looks for room and is refused)
//! against one from a key it holds (admitted), at two capacities; the
//! work a flood of new keys costs.
//!
//! ```text
//! cargo bench --features axum,serde --bench tower
//! ```

#[path = "../../../benches/common/paired.rs"]
mod paired;

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use cellrate::{Quota, StdClock};
use cellrate_tower::{Fields, HeaderKey, KeyedTiers, RateLimitLayer};
use criterion::Criterion;
use http::header::{HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::{GovernorError, GovernorLayer};

const CLIENTS: usize = 1_000;

/// governor's key: the same header, as an owned string (its extractor
/// returns the key by value).
#[derive(Clone)]
struct ApiKey;

impl KeyExtractor for ApiKey {
    type Key = String;
    fn extract<T>(&self, req: &Request<T>) -> Result<String, GovernorError> {
        req.headers()
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

fn handler_router() -> Router {
    Router::new().route("/orders", get(|| async { "orders" }))
}

/// [`cellrate_router`], its series recorded by a Prometheus recorder (kept
/// alive by the handles the layer registers).
#[cfg(feature = "metrics")]
fn recorded_router(deny: bool) -> Router {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || cellrate_router(deny, Fields::Both))
}

fn cellrate_router(deny: bool, fields: Fields) -> Router {
    let hz = StdClock::HZ;
    let quota = if deny {
        Quota::per_hour(1).at_hz(hz)
    } else {
        Quota::per_second(1_000_000_000).with_burst(1_000).at_hz(hz)
    };
    let layer = RateLimitLayer::builder(
        HeaderKey::new("x-api-key"),
        KeyedTiers::new()
            .per_client("key", quota, 4 * CLIENTS)
            .unwrap(),
        StdClock::new(),
    )
    .fields(fields)
    .build()
    .unwrap();
    handler_router().route_layer(layer)
}

/// A fixed-window tier in process of `capacity` keys, filled with clients
/// that stay busy for the bench (an hour's window, far from its limit).
#[cfg(feature = "serde")]
fn full_store_router(capacity: usize) -> Router {
    let text = format!(
        "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
         [[tiers]]\nname = \"w\"\nquota = \"1000000000/h\"\n\
         algorithm = \"fixed_window\"\ncapacity = {capacity}\n"
    );
    let config: cellrate_tower::config::LayerConfig = toml::from_str(&text).unwrap();
    let layer = config.build(StdClock::new(), StdClock::HZ).unwrap();
    let mut router = handler_router().route_layer(layer);
    for i in 0..capacity {
        assert!(send(&mut router, &format!("held-{i}")));
    }
    assert!(!send(&mut router, "new"));
    router
}

/// The pair of [`full_store_router`]: new keys over held keys.
#[cfg(feature = "serde")]
fn store_flood_ratios() {
    for capacity in [1_000, 100_000] {
        let mut router = full_store_router(capacity);
        let (mut held, mut new) = (0usize, 0usize);
        let mut known = || {
            held += 1;
            black_box(send(&mut router, &format!("held-{}", held % capacity)));
        };
        let mut router2 = full_store_router(capacity);
        let mut fresh = || {
            new += 1;
            black_box(send(&mut router2, &format!("new-{new}")));
        };
        paired::ratio_calls(
            &format!("window tier full at {capacity}: new key (refused) / held key (admitted)"),
            16,
            &mut known,
            &mut fresh,
        );
    }
}

fn governor_router(deny: bool) -> Router {
    let mut builder = GovernorConfigBuilder::default();
    if deny {
        builder.period(Duration::from_secs(3_600)).burst_size(1);
    } else {
        builder.per_nanosecond(1).burst_size(1_000);
    }
    let config = builder
        .key_extractor(ApiKey)
        .use_headers()
        .finish()
        .unwrap();
    handler_router().route_layer(GovernorLayer::new(config))
}

/// The floor: a middleware that does no limiter work and inserts the same
/// fields as precomputed static values (what a one-tier `cellrate` layer
/// writes for an admitted request), `five` of them (both families) or the
/// three `X-RateLimit-*` ones. Its cost over the bare handler is what the
/// header-map inserts and one more service and future in the chain cost.
#[derive(Clone)]
struct StaticFields {
    five: bool,
}

#[derive(Clone)]
struct StaticFieldsService<S> {
    inner: S,
    five: bool,
}

impl<S> Layer<S> for StaticFields {
    type Service = StaticFieldsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        StaticFieldsService {
            inner,
            five: self.five,
        }
    }
}

pin_project_lite::pin_project! {
    struct StaticFieldsFuture<F> {
        #[pin]
        inner: F,
        five: bool,
    }
}

const FIELDS: [(HeaderName, HeaderValue); 5] = [
    (
        HeaderName::from_static("x-ratelimit-limit"),
        HeaderValue::from_static("1000"),
    ),
    (
        HeaderName::from_static("x-ratelimit-remaining"),
        HeaderValue::from_static("999"),
    ),
    (
        HeaderName::from_static("x-ratelimit-reset"),
        HeaderValue::from_static("1"),
    ),
    (
        HeaderName::from_static("ratelimit-policy"),
        HeaderValue::from_static("\"key\";q=1000;w=1"),
    ),
    (
        HeaderName::from_static("ratelimit"),
        HeaderValue::from_static("\"key\";r=999;t=1"),
    ),
];

impl<F, B, E> Future for StaticFieldsFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut response = std::task::ready!(this.inner.poll(cx))?;
        let fields = if *this.five {
            &FIELDS[..]
        } else {
            &FIELDS[..3]
        };
        let map = response.headers_mut();
        map.reserve(fields.len());
        for (name, value) in fields {
            map.insert(name.clone(), value.clone());
        }
        Poll::Ready(Ok(response))
    }
}

impl<S, R, B> Service<R> for StaticFieldsService<S>
where
    S: Service<R, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = StaticFieldsFuture<S::Future>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }
    fn call(&mut self, req: R) -> Self::Future {
        StaticFieldsFuture {
            inner: self.inner.call(req),
            five: self.five,
        }
    }
}

fn floor_router(five: bool) -> Router {
    handler_router().route_layer(StaticFields { five })
}

/// The request for client `i`.
/// A waker that does nothing (every future here is ready when polled).
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls a future that is ready at once (or soon) to completion.
fn run<F: Future>(f: F) -> F::Output {
    thread_local! {
        static WAKER: Waker = Waker::from(Arc::new(Noop));
    }
    let waker = WAKER.with(Waker::clone);
    let mut f = pin!(f);
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// One request through `router`; true if admitted.
fn one(router: &mut Router, keys: &[String], i: usize) -> bool {
    send(router, &keys[i % CLIENTS])
}

/// One request of client `key` through `router`; true if admitted.
fn send(router: &mut Router, key: &str) -> bool {
    let request = Request::get("/orders")
        .header("x-api-key", key)
        .body(Body::empty())
        .unwrap();
    let response = run(router.call(request)).unwrap();
    black_box(response.headers().len());
    response.status() == StatusCode::OK
}

fn keys() -> Vec<String> {
    (0..CLIENTS).map(|i| format!("client-{i:04}")).collect()
}

fn paired_ratios() {
    let keys = keys();
    let reps = 16;
    for deny in [false, true] {
        let case = if deny { "deny" } else { "admit" };
        let mut bare = handler_router();
        let mut ours = cellrate_router(deny, Fields::Both);
        let mut ours_legacy = cellrate_router(deny, Fields::Legacy);
        let mut theirs = governor_router(deny);
        let (mut a, mut b, mut c, mut d) = (0usize, 0usize, 0usize, 0usize);
        // Prime every client once, so "deny" denies from the start.
        for i in 0..CLIENTS {
            one(&mut ours, &keys, i);
            one(&mut ours_legacy, &keys, i);
            one(&mut theirs, &keys, i);
        }
        let mut base = || {
            a += 1;
            one(&mut bare, &keys, a);
        };
        let mut with_ours = || {
            b += 1;
            one(&mut ours, &keys, b);
        };
        paired::ratio_calls(
            &format!("tower {case}: cellrate (both families) / bare handler"),
            reps,
            &mut base,
            &mut with_ours,
        );
        let mut with_theirs = || {
            c += 1;
            one(&mut theirs, &keys, c);
        };
        paired::ratio_calls(
            &format!("tower {case}: tower_governor (x-ratelimit) / bare handler"),
            reps,
            &mut base,
            &mut with_theirs,
        );
        let mut with_legacy = || {
            d += 1;
            one(&mut ours_legacy, &keys, d);
        };
        paired::ratio_calls(
            &format!("tower {case}: cellrate (x-ratelimit) / tower_governor (x-ratelimit)"),
            reps,
            &mut with_theirs,
            &mut with_legacy,
        );
        paired::ratio_calls(
            &format!("tower {case}: cellrate (both families) / tower_governor (x-ratelimit)"),
            reps,
            &mut with_theirs,
            &mut with_ours,
        );
        if !deny {
            let (mut e, mut f) = (0usize, 0usize);
            let mut floor = floor_router(true);
            let mut floor_legacy = floor_router(false);
            let mut with_floor = || {
                e += 1;
                one(&mut floor, &keys, e);
            };
            let mut with_floor_legacy = || {
                f += 1;
                one(&mut floor_legacy, &keys, f);
            };
            paired::ratio_calls(
                "tower admit: floor, five static fields / bare handler",
                reps,
                &mut base,
                &mut with_floor,
            );
            paired::ratio_calls(
                "tower admit: floor, five static fields / tower_governor (x-ratelimit)",
                reps,
                &mut with_theirs,
                &mut with_floor,
            );
            paired::ratio_calls(
                "tower admit: cellrate (both families) / floor, five static fields",
                reps,
                &mut with_floor,
                &mut with_ours,
            );
            paired::ratio_calls(
                "tower admit: cellrate (x-ratelimit) / floor, three static fields",
                reps,
                &mut with_floor_legacy,
                &mut with_legacy,
            );
        }
        #[cfg(feature = "metrics")]
        {
            let mut recorded = recorded_router(deny);
            for i in 0..CLIENTS {
                one(&mut recorded, &keys, i);
            }
            let mut e = 0usize;
            let mut with_recorded = || {
                e += 1;
                one(&mut recorded, &keys, e);
            };
            paired::ratio_calls(
                &format!("tower {case}: cellrate, metrics recorded / cellrate, no recorder"),
                reps,
                &mut with_ours,
                &mut with_recorded,
            );
            paired::ratio_calls(
                &format!("tower {case}: cellrate, metrics recorded / bare handler"),
                reps,
                &mut base,
                &mut with_recorded,
            );
        }
    }
    #[cfg(feature = "serde")]
    store_flood_ratios();
}

fn criterion_groups(c: &mut Criterion) {
    let keys = keys();
    for deny in [false, true] {
        let case = if deny { "deny" } else { "admit" };
        let mut g = c.benchmark_group(format!("tower_{case}"));
        let mut i = 0usize;
        let mut bare = handler_router();
        g.bench_function("bare", |b| {
            b.iter(|| {
                i += 1;
                one(&mut bare, &keys, i)
            })
        });
        let mut ours = cellrate_router(deny, Fields::Both);
        let mut ours_legacy = cellrate_router(deny, Fields::Legacy);
        let mut theirs = governor_router(deny);
        for i in 0..CLIENTS {
            one(&mut ours, &keys, i);
            one(&mut ours_legacy, &keys, i);
            one(&mut theirs, &keys, i);
        }
        g.bench_function("cellrate_both", |b| {
            b.iter(|| {
                i += 1;
                one(&mut ours, &keys, i)
            })
        });
        g.bench_function("cellrate_legacy", |b| {
            b.iter(|| {
                i += 1;
                one(&mut ours_legacy, &keys, i)
            })
        });
        g.bench_function("tower_governor", |b| {
            b.iter(|| {
                i += 1;
                one(&mut theirs, &keys, i)
            })
        });
        if !deny {
            let mut floor = floor_router(true);
            g.bench_function("floor_five_static", |b| {
                b.iter(|| {
                    i += 1;
                    one(&mut floor, &keys, i)
                })
            });
        }
        g.finish();
    }
}

fn main() {
    paired::main(paired_ratios, &[criterion_groups]);
}
