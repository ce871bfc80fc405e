//! The `metrics` feature: the series a layer records equal the answers its
//! clients received.
//!
//! * In process (feature `tower`): a layer built under a local Prometheus
//!   recorder, driven through `tower::Service` at a manual clock, so each
//!   count (admitted, denied, table full, evictions, keys) is known
//!   exactly; and a Redis backend whose server is unreachable (a closed
//!   loopback port: connection errors, then back-off, fail-open).
//! * Over loopback HTTP (feature `axum`): the gateway example
//!   (`examples/gateway.rs`, built by `cargo test --features axum,metrics`)
//!   is sent known traffic, then `/metrics` is scraped and every counter is
//!   compared with the statuses this test received.
#![cfg(feature = "metrics")]

use std::collections::HashMap;
use std::sync::Arc;

use cellrate::keyed::WhenFull;
use cellrate::{Clock, ManualClock, Quota};
use cellrate_tower::{HeaderKey, KeyedTiers, RateLimitLayer};
use http::{Request, Response, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use tower::{Layer, Service, ServiceExt};

const HZ: u64 = 1_000;

/// A clock the test moves, shared with the layer.
#[derive(Clone)]
struct TestClock(Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

/// The samples of a Prometheus text page: `name{labels}` → value, labels in
/// the page's order.
fn samples(page: &str) -> HashMap<String, f64> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The value of the series `name` whose labels include every pair of
/// `labels`; panics if there is not exactly one.
fn value(samples: &HashMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = samples
        .iter()
        .filter(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name} {labels:?}: {found:?} in {samples:#?}"
    );
    found[0]
}

fn ok_service() -> impl Service<
    Request<()>,
    Response = Response<String>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone {
    tower::service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
    })
}

fn request(key: Option<&str>) -> Request<()> {
    let mut b = Request::get("/orders");
    if let Some(k) = key {
        b = b.header("x-api-key", k);
    }
    b.body(()).unwrap()
}

/// One request through `svc`: its status.
async fn send<S>(svc: &mut S, key: Option<&str>) -> StatusCode
where
    S: Service<Request<()>, Response = Response<String>>,
    S::Error: std::fmt::Debug,
{
    let r = ServiceExt::<Request<()>>::ready(svc)
        .await
        .unwrap()
        .call(request(key))
        .await
        .unwrap();
    r.status()
}

/// Statuses seen, by code.
#[derive(Default, Debug)]
struct Seen(HashMap<u16, u64>);

impl Seen {
    fn add(&mut self, s: StatusCode) {
        *self.0.entry(s.as_u16()).or_default() += 1;
    }
    fn get(&self, code: u16) -> f64 {
        self.0.get(&code).copied().unwrap_or(0) as f64
    }
}

/// One keyed tier of 4 slots (one probe window: a new key finds room only
/// in an idle or free slot), 2 per minute, at a frozen clock: the first 4
/// clients take the slots and get 200, 200, 429; every later client is
/// refused as "table full" while they owe. A minute later they are idle,
/// and a new client evicts one.
#[tokio::test]
async fn keyed_counts_equal_the_answers() {
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = TestClock(Arc::new(ManualClock::new(0)));
    let tiers = KeyedTiers::new()
        .when_full(WhenFull::Deny)
        .per_client("key", Quota::per_minute(2).at_hz(HZ), 4)
        .unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers, clock.clone())
            .metrics_name("unit")
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(ok_service());
    let mut seen = Seen::default();
    for c in 0..10 {
        let key = format!("client-{c}");
        for _ in 0..3 {
            seen.add(send(&mut svc, Some(&key)).await);
        }
    }
    seen.add(send(&mut svc, None).await);
    seen.add(send(&mut svc, Some("")).await);
    assert_eq!(
        (seen.get(200), seen.get(429), seen.get(400)),
        (8.0, 22.0, 2.0)
    );

    let s = samples(&handle.render());
    let req = |outcome| {
        value(
            &s,
            "cellrate_requests_total",
            &[("limiter", "unit"), ("outcome", outcome)],
        )
    };
    assert_eq!(req("admitted"), seen.get(200));
    assert_eq!(req("denied"), seen.get(429));
    assert_eq!(req("no_key") + req("invalid_key"), seen.get(400));
    assert_eq!((req("no_key"), req("invalid_key")), (1.0, 1.0));
    let tier = |name, outcome| {
        value(
            &s,
            name,
            &[("limiter", "unit"), ("tier", "key"), ("outcome", outcome)],
        )
    };
    assert_eq!(tier("cellrate_decisions_total", "admitted"), seen.get(200));
    assert_eq!(tier("cellrate_decisions_total", "denied"), seen.get(429));
    assert_eq!(tier("cellrate_keyed_full_total", "denied"), 18.0); // clients 4..9, 3 each
    assert_eq!(tier("cellrate_keyed_full_total", "admitted"), 0.0);
    let keyed = |name| value(&s, name, &[("limiter", "unit"), ("tier", "key")]);
    assert_eq!(keyed("cellrate_keyed_capacity"), 4.0);
    assert_eq!(keyed("cellrate_keyed_keys"), 4.0);
    assert_eq!(keyed("cellrate_keyed_inserted_total"), 4.0);
    assert_eq!(keyed("cellrate_keyed_evictions_total"), 0.0);

    // A minute on, every client is full again (idle): a new one evicts one.
    clock.0.advance(60 * HZ);
    assert_eq!(send(&mut svc, Some("client-9")).await, StatusCode::OK);
    let s = samples(&handle.render());
    let keyed = |name| value(&s, name, &[("limiter", "unit"), ("tier", "key")]);
    assert_eq!(keyed("cellrate_keyed_evictions_total"), 1.0);
    assert_eq!(keyed("cellrate_keyed_inserted_total"), 5.0);
    assert_eq!(keyed("cellrate_keyed_keys"), 4.0);
    assert_eq!(
        value(
            &s,
            "cellrate_requests_total",
            &[("limiter", "unit"), ("outcome", "admitted")]
        ),
        seen.get(200) + 1.0
    );
}

/// Two tiers, all or nothing, with traffic from a fixed pseudo-random
/// sequence of clients and times: the request counters equal the statuses,
/// every admitted request counts once in each tier, and every 429 in at
/// least one tier.
#[tokio::test]
async fn two_tiers_count_each_request_once() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = TestClock(Arc::new(ManualClock::new(0)));
    let tiers = KeyedTiers::new()
        .per_client("burst", Quota::per_second(2).with_burst(3).at_hz(HZ), 64)
        .unwrap()
        .per_client("minute", Quota::per_minute(20).at_hz(HZ), 64)
        .unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers, clock.clone())
            .build()
            .unwrap()
    });
    let mut svc = layer.layer(ok_service());
    let mut seen = Seen::default();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        clock.0.advance(x % 200);
        let key = format!("c{}", (x >> 32) % 8);
        seen.add(send(&mut svc, Some(&key)).await);
    }
    assert!(seen.get(200) > 100.0 && seen.get(429) > 100.0, "{seen:?}");
    assert_eq!(seen.get(200) + seen.get(429), 2_000.0, "{seen:?}");
    let s = samples(&handle.render());
    let d = [("limiter", "default")];
    let req = |outcome| value(&s, "cellrate_requests_total", &[d[0], ("outcome", outcome)]);
    assert_eq!(req("admitted"), seen.get(200));
    assert_eq!(req("denied"), seen.get(429));
    let tier = |tier, outcome| {
        value(
            &s,
            "cellrate_decisions_total",
            &[d[0], ("tier", tier), ("outcome", outcome)],
        )
    };
    assert_eq!(tier("burst", "admitted"), seen.get(200));
    assert_eq!(tier("minute", "admitted"), seen.get(200));
    let denials = tier("burst", "denied") + tier("minute", "denied");
    assert!(
        denials >= seen.get(429) && denials <= 2.0 * seen.get(429),
        "{denials} tier denials for {} refusals",
        seen.get(429)
    );
    assert!(tier("burst", "denied") > 0.0 && tier("minute", "denied") > 0.0);
}

/// Built without a recorder, a layer's handles do nothing, and it answers
/// as usual.
#[tokio::test]
async fn without_a_recorder_nothing_is_recorded() {
    let tiers = KeyedTiers::new()
        .per_client("key", Quota::per_minute(1).at_hz(HZ), 8)
        .unwrap();
    let clock = TestClock(Arc::new(ManualClock::new(0)));
    let layer = RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers, clock)
        .build()
        .unwrap();
    let mut svc = layer.layer(ok_service());
    for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        assert_eq!(send(&mut svc, Some("a")).await, expected);
    }
}

#[test]
fn a_bad_limiter_name_is_refused() {
    let tiers = KeyedTiers::new()
        .per_client("key", Quota::per_minute(1).at_hz(HZ), 8)
        .unwrap();
    let built = RateLimitLayer::builder(HeaderKey::new("x-api-key"), tiers, ManualClock::new(0))
        .metrics_name("no spaces\n")
        .build();
    assert_eq!(built.err(), Some(cellrate_tower::BuildError::InvalidName));
}

/// A Redis backend whose server is unreachable (a loopback port nothing
/// listens on) and that fails open: the first check's connection is
/// refused, the next ones are held back, every request is admitted, the
/// degraded gauge is 1 and one transition was counted.
#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_errors_and_failure_mode() {
    use cellrate::StdClock;
    use cellrate_redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
    use cellrate_tower::RedisAsync;
    use std::time::Duration;

    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let limiter = AsyncRedisGcra::new(
        Target::standalone(&format!("redis://127.0.0.1:{port}/")).unwrap(),
        RedisPolicy::single("mt", "api", Quota::per_minute(10).at_hz(1_000)).unwrap(),
        RedisConfig::new(FailurePolicy::Open)
            .with_timeout(Duration::from_millis(500))
            .with_reconnect_interval(Duration::from_secs(60)),
    )
    .unwrap();
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::builder(
            HeaderKey::new("x-api-key"),
            RedisAsync::new(limiter),
            StdClock::new(),
        )
        .metrics_name("shared")
        .build()
        .unwrap()
    });
    let mut svc = layer.layer(ok_service());
    for _ in 0..3 {
        assert_eq!(
            send(&mut svc, Some("alice")).await,
            StatusCode::OK,
            "fails open"
        );
    }
    let s = samples(&handle.render());
    let l = ("limiter", "shared");
    let errors = |kind| value(&s, "cellrate_redis_errors_total", &[l, ("kind", kind)]);
    assert_eq!(errors("connection"), 1.0);
    assert_eq!(errors("backoff"), 2.0);
    assert_eq!(errors("timeout"), 0.0);
    assert_eq!(value(&s, "cellrate_redis_degraded", &[l]), 1.0);
    let to = |state| value(&s, "cellrate_redis_transitions_total", &[l, ("to", state)]);
    assert_eq!((to("degraded"), to("redis")), (1.0, 0.0));
    let req = |outcome| value(&s, "cellrate_requests_total", &[l, ("outcome", outcome)]);
    assert_eq!(req("admitted"), 3.0);
    // Fail-open decides no tier.
    let tier = |outcome| {
        value(
            &s,
            "cellrate_decisions_total",
            &[l, ("tier", "api"), ("outcome", outcome)],
        )
    };
    assert_eq!((tier("admitted"), tier("denied")), (0.0, 0.0));
}

/// A Redis backend whose server is unreachable and that falls back to
/// local tables: they publish the `cellrate_keyed_*` series (under the
/// layer's name and the tier's), and a reload that keeps the tier keeps
/// the table and its counts.
#[cfg(all(feature = "redis", feature = "serde"))]
#[tokio::test]
async fn redis_fallback_tables_are_published() {
    use cellrate::StdClock;
    use cellrate_tower::config::LayerConfig;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rules = |quota: &str| -> LayerConfig {
        toml::from_str(&format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\nmetrics_name = \"edge\"\n\
             tiers = [{{ name = \"key\", quota = \"{quota}\", capacity = 8 }}]\n\
             [redis]\ntarget = {{ standalone = \"redis://127.0.0.1:{port}/\" }}\n\
             failure = {{ fallback = [\"2/min\"] }}\nreconnect_ms = 60000\nfallback_capacity = 64\n"
        ))
        .unwrap()
    };
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let layer = metrics::with_local_recorder(&recorder, || {
        rules("10/min").build_redis(StdClock::new(), StdClock::HZ)
    })
    .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let mut seen = Seen::default();
    for c in ["a", "b", "c"] {
        for _ in 0..3 {
            seen.add(send(&mut svc, Some(c)).await);
        }
    }
    // 2/min in the fallback: two of each client's three.
    assert_eq!((seen.get(200), seen.get(429)), (6.0, 3.0));
    let keyed =
        |s: &HashMap<String, f64>, name| value(s, name, &[("limiter", "edge"), ("tier", "key")]);
    let s = samples(&handle.render());
    assert_eq!(keyed(&s, "cellrate_keyed_capacity"), 64.0);
    assert_eq!(keyed(&s, "cellrate_keyed_inserted_total"), 3.0);
    assert_eq!(keyed(&s, "cellrate_keyed_keys"), 3.0);
    assert_eq!(
        value(&s, "cellrate_redis_degraded", &[("limiter", "edge")]),
        1.0
    );
    // The tier and its fallback quota stay: the same table, still owing.
    metrics::with_local_recorder(&recorder, || reloader.apply(&rules("20/min"))).unwrap();
    for c in ["a", "d"] {
        seen.add(send(&mut svc, Some(c)).await);
    }
    assert_eq!((seen.get(200), seen.get(429)), (7.0, 4.0));
    let s = samples(&handle.render());
    assert_eq!(keyed(&s, "cellrate_keyed_inserted_total"), 4.0);
    assert_eq!(keyed(&s, "cellrate_keyed_keys"), 4.0);
}

/// The gateway example over loopback HTTP: known traffic, then a scrape.
#[cfg(all(feature = "axum", feature = "serde"))]
mod gateway {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use super::{samples, value};

    struct Gateway(Child);

    impl Drop for Gateway {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// One GET over a fresh connection: the status and the body.
    fn get(addr: &str, path: &str, key: Option<&str>) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let key_line = key
            .map(|k| format!("x-api-key: {k}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{key_line}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").expect("a full HTTP reply");
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_string())
    }

    #[test]
    fn scraped_counters_equal_the_responses() {
        // target/<profile>/deps/metrics-<hash> → target/<profile>/examples/gateway
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples")
            .join("gateway");
        assert!(
            bin.exists(),
            "{} missing: run `cargo build --features axum,serde,metrics --example gateway`",
            bin.display()
        );
        // The rules this test counts against, in the gateway's file format.
        let rules =
            std::env::temp_dir().join(format!("cellrate-metrics-{}.toml", std::process::id()));
        std::fs::write(
            &rules,
            r#"
[admin]
token = "test-token"

[limits]
key = { client = { header = "x-api-key" }, endpoint = "route" }
fields = "both"

[[limits.tiers]]
name = "key"
quota = "10/min"
capacity = 1024

[[limits.tiers]]
name = "endpoint"
quota = "3/min"
scope = "client_and_endpoint"
capacity = 1024
"#,
        )
        .unwrap();
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&rules)
            .arg("127.0.0.1:0")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let _guard = Gateway(child);
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .to_string();

        // 10/min per key, 3/min per (key, endpoint): alice's /orders gets 3
        // then 429s; bob's /users 2; keyless and empty keys get 400.
        let traffic: Vec<(&str, Option<&str>)> = [
            vec![("/orders", None); 2],
            vec![("/orders", Some("alice")); 5],
            vec![("/users", Some("bob")); 2],
            vec![("/status", Some("")); 1],
            vec![("/orders/7", Some("alice")); 4],
        ]
        .concat();
        let mut statuses: Vec<u16> = Vec::new();
        for (path, key) in &traffic {
            statuses.push(get(&addr, path, *key).0);
        }
        let count = |f: &dyn Fn(u16) -> bool| statuses.iter().filter(|s| f(**s)).count() as f64;
        let ok = count(&|s| (200..300).contains(&s));
        let refused = count(&|s| s == 429);
        let bad = count(&|s| s == 400);
        assert_eq!((ok, refused, bad), (8.0, 3.0, 3.0), "{statuses:?}");

        let (status, page) = get(&addr, "/metrics", None);
        assert_eq!(
            status, 200,
            "no /metrics: is the gateway built without `metrics`? \
             run `cargo build --features axum,metrics --example gateway`\n{page}"
        );
        let s = samples(&page);
        let l = ("limiter", "default");
        let req = |outcome| value(&s, "cellrate_requests_total", &[l, ("outcome", outcome)]);
        assert_eq!(req("admitted"), ok);
        assert_eq!(req("denied"), refused);
        assert_eq!(req("no_key") + req("invalid_key"), bad);
        for tier in ["key", "endpoint"] {
            let d = |outcome| {
                value(
                    &s,
                    "cellrate_decisions_total",
                    &[l, ("tier", tier), ("outcome", outcome)],
                )
            };
            assert_eq!(d("admitted"), ok, "{tier}");
        }
        // Every refusal here is the endpoint tier's (3 per minute).
        let endpoint_denied = value(
            &s,
            "cellrate_decisions_total",
            &[l, ("tier", "endpoint"), ("outcome", "denied")],
        );
        assert_eq!(endpoint_denied, refused);
        // Keys: alice and bob; endpoints: (alice, /orders), (bob, /users),
        // (alice, /orders/{id}).
        let keys = |tier| value(&s, "cellrate_keyed_keys", &[l, ("tier", tier)]);
        assert_eq!((keys("key"), keys("endpoint")), (2.0, 3.0));
        // The scrape itself is not limited, nor counted.
        let (status, again) = get(&addr, "/metrics", None);
        assert_eq!(status, 200);
        let s = samples(&again);
        assert_eq!(
            value(&s, "cellrate_requests_total", &[l, ("outcome", "admitted")]),
            ok
        );
    }
}

/// A reload keeps the series exact: a tier that stays keeps its table and
/// its series (its totals are not published again), a tier added gets its
/// own, and every counter still equals the answers the client received.
#[cfg(feature = "serde")]
#[tokio::test]
async fn a_reload_keeps_every_series_exact() {
    use cellrate_tower::config::LayerConfig;
    let rules = |quota: &str, extra: bool| -> LayerConfig {
        let mut text = format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
             [[tiers]]\nname = \"key\"\nquota = \"{quota}\"\ncapacity = 8\n"
        );
        if extra {
            text.push_str("[[tiers]]\nname = \"extra\"\nquota = \"100/min\"\ncapacity = 8\n");
        }
        toml::from_str(&text).unwrap()
    };
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = TestClock(Arc::new(ManualClock::new(0)));
    let layer =
        metrics::with_local_recorder(&recorder, || rules("2/min", false).build(clock.clone(), HZ))
            .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let mut seen = Seen::default();
    for c in 0..3 {
        for _ in 0..3 {
            seen.add(send(&mut svc, Some(&format!("client-{c}"))).await);
        }
    }
    assert_eq!((seen.get(200), seen.get(429)), (6.0, 3.0));
    metrics::with_local_recorder(&recorder, || reloader.apply(&rules("5/min", true))).unwrap();
    // Two clients already seen and one new, on the kept tier and the new one.
    for c in 1..4 {
        for _ in 0..3 {
            seen.add(send(&mut svc, Some(&format!("client-{c}"))).await);
        }
    }
    let s = samples(&handle.render());
    let req = |outcome| {
        value(
            &s,
            "cellrate_requests_total",
            &[("limiter", "default"), ("outcome", outcome)],
        )
    };
    assert_eq!(req("admitted"), seen.get(200));
    assert_eq!(req("denied"), seen.get(429));
    let keyed = |tier, name| value(&s, name, &[("limiter", "default"), ("tier", tier)]);
    // The kept table saw 4 clients in all: published once each.
    assert_eq!(keyed("key", "cellrate_keyed_inserted_total"), 4.0);
    assert_eq!(keyed("key", "cellrate_keyed_keys"), 4.0);
    // The new table: tiers are checked in order and a refusal stops there.
    // The raise to 5/min keeps the 2 cells clients 1 and 2 used and gives
    // them the 3 it adds, so all three clients reached it.
    assert_eq!(keyed("extra", "cellrate_keyed_inserted_total"), 3.0);
    assert_eq!(keyed("extra", "cellrate_keyed_capacity"), 8.0);
}

/// `metrics_name` in a configuration labels the layer's series; a bad one
/// is refused with its place, and a reload cannot change it.
#[cfg(feature = "serde")]
#[tokio::test]
async fn a_configured_layer_is_labelled_by_its_metrics_name() {
    use cellrate_tower::config::LayerConfig;
    let rules = |name: &str| -> LayerConfig {
        toml::from_str(&format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\nmetrics_name = \"{name}\"\n\
             tiers = [{{ name = \"key\", quota = \"1/min\", capacity = 8 }}]\n"
        ))
        .unwrap()
    };
    let clock = TestClock(Arc::new(ManualClock::new(0)));
    assert_eq!(
        rules(&"x".repeat(200))
            .build(clock.clone(), HZ)
            .unwrap_err()
            .path(),
        "metrics_name"
    );
    let recorder: PrometheusRecorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let layer =
        metrics::with_local_recorder(&recorder, || rules("edge").build(clock.clone(), HZ)).unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let mut seen = Seen::default();
    for _ in 0..3 {
        seen.add(send(&mut svc, Some("c")).await);
    }
    let s = samples(&handle.render());
    for (outcome, status) in [("admitted", 200), ("denied", 429)] {
        assert_eq!(
            value(
                &s,
                "cellrate_requests_total",
                &[("limiter", "edge"), ("outcome", outcome)]
            ),
            seen.get(status)
        );
    }
    assert_eq!(
        reloader.apply(&rules("other")).unwrap_err().path(),
        "metrics_name"
    );
}
