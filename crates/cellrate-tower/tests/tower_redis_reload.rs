//! Live reconfiguration of a layer on Redis (features `redis`, `tower`,
//! `serde`): a layer made by `LayerConfig::build_redis` takes new rules
//! through its `Reloader`, and
//!
//! * every decision across any schedule of reloads (quotas changed, a tier
//!   added and removed, one client's override set and dropped) equals a
//!   reference model in which a client's state on the server survives
//!   every reload, its cells used kept under the new quota
//!   (docs/design/reconfigure.md): no over-admission at the switch, on Redis;
//! * the seed's story: acct_123 spends its 100/min, the operator raises it
//!   to 500/min, and the next request sees it, its 100 cells still used;
//! * what the server holds cannot change under a running layer (target,
//!   prefix, call settings): refused with the field's name, the rules in
//!   force staying.
//!
//! The tests that need a server are `#[ignore]`d; `scripts/stages/70-redis.sh`
//! runs them against the one it starts (`CELLRATE_REDIS_URL`).
#![cfg(all(feature = "redis", feature = "serde"))]

#[path = "../../cellrate-redis/tests/support/redis_env.rs"]
mod redis_env;
#[path = "support/reload_model.rs"]
mod reload_model;
use reload_model::{call, ok_service, rules, tiers_toml, Model, Quotas, Rules};

use std::time::{Duration, Instant};

use cellrate::StdClock;
use cellrate_tower::config::LayerConfig;
use http::StatusCode;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tower::Layer;

fn read(text: &str) -> LayerConfig {
    toml::from_str(text).unwrap()
}

/// Quotas per hour, (rate, burst), the model's time in seconds. Every
/// emission interval is a multiple of 120 s, so every TAT and tolerance the
/// model meets is too: the few hundred milliseconds a case takes on the
/// server's clock never move a decision, and the model takes the time as
/// constant.
static QUOTAS: Quotas = Quotas {
    table: [(1, 1), (3, 2), (5, 5), (10, 3), (30, 4), (10, 1)],
    unit: "h",
    unit_len: 3_600,
};

fn config(prefix: &str, r: &Rules) -> LayerConfig {
    let url = redis_env::env("CELLRATE_REDIS_URL");
    read(&format!(
        "key = {{ client = {{ header = \"x-api-key\" }} }}\nfields = \"both\"\n\
         [redis]\ntarget = {{ standalone = \"{url}\" }}\nprefix = \"{prefix}\"\n\
         failure = \"closed\"\n{}",
        tiers_toml(&QUOTAS, r)
    ))
}

/// One tier "key" of `quota` on the server `url` under `prefix`, failing
/// closed.
fn one_tier(url: &str, prefix: &str, quota: &str) -> LayerConfig {
    read(&format!(
        r#"
        key = {{ client = {{ header = "x-api-key" }} }}
        [[tiers]]
        name = "key"
        quota = "{quota}"
        capacity = 64
        [redis]
        target = {{ standalone = "{url}" }}
        prefix = "{prefix}"
        failure = "closed"
        "#
    ))
}

#[derive(Clone, Debug)]
enum Op {
    Request(u8),
    Reload(Rules),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            6 => (0u8..3).prop_map(Op::Request),
            1 => rules().prop_map(Op::Reload),
        ],
        1..60,
    )
}

/// Every answer across any schedule of reloads is the model's: a kept tier
/// keeps each client's state on the server, its cells used re-expressed
/// under the new quota at the first check after the switch; the override of one client changes that client
/// alone; the fields announce the rules in force.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn reloads_on_redis_decide_as_the_model() {
    redis_env::standalone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(Config::with_cases(48));
    runner
        .run(&(rules(), ops()), |(first, ops)| {
            rt.block_on(async {
                let prefix = redis_env::unique("reload");
                let layer = config(&prefix, &first)
                    .build_redis(StdClock::new(), StdClock::HZ)
                    .unwrap();
                let reloader = layer.reloader();
                let mut svc = layer.layer(ok_service());
                let mut model = Model::translating(&QUOTAS, false);
                let mut rules = first;
                for op in ops {
                    match op {
                        Op::Reload(r) => {
                            reloader.apply(&config(&prefix, &r)).unwrap();
                            rules = r;
                        }
                        Op::Request(client) => {
                            let got = call(&mut svc, &format!("c{client}")).await;
                            let want = model.check(&rules, client, 0);
                            prop_assert_eq!(
                                got.status() == StatusCode::OK,
                                want,
                                "client {} under {:?}: {:?}",
                                client,
                                rules,
                                got.headers()
                            );
                            if !want {
                                prop_assert_eq!(got.status(), StatusCode::TOO_MANY_REQUESTS);
                            }
                            let policy = got.headers()["ratelimit-policy"].to_str().unwrap();
                            prop_assert!(
                                policy.starts_with(&format!(
                                    "\"key\";q={};",
                                    rules.key_burst(&QUOTAS, client)
                                )),
                                "{}",
                                policy
                            );
                            prop_assert_eq!(policy.contains("\"extra\""), rules.extra.is_some());
                        }
                    }
                }
                Ok(())
            })
        })
        .unwrap();
}

/// The seed's story on Redis: acct_123 spends its 100/min, the operator
/// raises it to 500/min, and the next request is admitted under the new
/// quota with its 100 cells still used: the raise adds the 400 cells of
/// burst it adds, not a new burst of 500; acct_9 is untouched; dropping
/// the override brings the default back, still owing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn one_clients_override_changes_alone_on_redis() {
    let (url, prefix) = (redis_env::standalone(), redis_env::unique("story"));
    let text = one_tier(&url, &prefix, "100/min");
    let layer = text.build_redis(StdClock::new(), StdClock::HZ).unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let first = Instant::now();
    for _ in 0..100 {
        assert_eq!(call(&mut svc, "acct_123").await.status(), StatusCode::OK);
    }
    for _ in 0..99 {
        assert_eq!(call(&mut svc, "acct_9").await.status(), StatusCode::OK);
    }
    let refused = call(&mut svc, "acct_123").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        first.elapsed() < Duration::from_millis(500),
        "too slow for the story: {:?}",
        first.elapsed()
    );
    reloader
        .set_override("key", "acct_123", Some("500/min".parse().unwrap()))
        .unwrap();
    let switch = Instant::now();
    let next = call(&mut svc, "acct_123").await;
    assert_eq!(next.status(), StatusCode::OK, "{:?}", next.headers());
    assert_eq!(next.headers()["x-ratelimit-limit"], "500");
    // The 100 cells used (99 if one came back at 100/min meanwhile) stay
    // used: 400 or 401 cells at once, then one per 120 ms.
    let mut admitted = 1;
    while call(&mut svc, "acct_123").await.status() == StatusCode::OK {
        admitted += 1;
        assert!(admitted < 500, "a new burst: the cells used were forgotten");
    }
    let earned = switch.elapsed().as_millis() as u64 / 120 + 1;
    assert!(admitted >= 400, "only {admitted} admitted after the raise");
    assert!(
        admitted <= 401 + earned,
        "{admitted} admitted after the raise, {earned} earned"
    );
    // acct_9 is untouched: its last cell of the burst.
    assert_eq!(call(&mut svc, "acct_9").await.status(), StatusCode::OK);
    // Dropping the override: 100/min again, still owing (500 cells used,
    // kept as at most the 100 of its burst).
    reloader.set_override("key", "acct_123", None).unwrap();
    let back = call(&mut svc, "acct_123").await;
    assert_eq!(back.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(back.headers()["x-ratelimit-limit"], "100");
}

/// What decides where clients' state lives, or how the layer calls the
/// server, is fixed: a reload that changes it is refused with the field's
/// name and the rules in force stay. Needs no server (the layer connects
/// at its first request).
#[test]
fn a_redis_reload_keeps_the_server_settings() {
    let base = r#"
        key = { client = { header = "x-api-key" } }
        tiers = [{ name = "key", quota = "10/min", capacity = 8 }]
        [redis]
        target = { standalone = "redis://127.0.0.1:1/" }
        prefix = "rl"
        failure = { fallback = ["5/min"] }
    "#;
    let layer = read(base)
        .build_redis(StdClock::new(), StdClock::HZ)
        .unwrap();
    let reloader = layer.reloader();
    let changed = |from: &str, to: &str| read(&base.replace(from, to));
    for (from, to, field) in [
        ("127.0.0.1:1", "127.0.0.1:2", "redis.target"),
        (r#"prefix = "rl""#, r#"prefix = "other""#, "redis.prefix"),
        (
            r#"prefix = "rl""#,
            "prefix = \"rl\"\ntimeout_ms = 5",
            "redis.timeout_ms",
        ),
        (
            r#"prefix = "rl""#,
            "prefix = \"rl\"\nfallback_capacity = 5",
            "redis.fallback_capacity",
        ),
    ] {
        let e = reloader.apply(&changed(from, to)).unwrap_err();
        assert_eq!(e.path(), field, "{e}");
    }
    // No Redis section: the layer cannot leave its server.
    let local = read(
        r#"
        key = { client = { header = "x-api-key" } }
        tiers = [{ name = "key", quota = "10/min", capacity = 8 }]
    "#,
    );
    assert_eq!(reloader.apply(&local).unwrap_err().path(), "redis");
    // A fallback list that no longer matches the tiers names its place.
    let two = changed(
        r#"tiers = [{ name = "key", quota = "10/min", capacity = 8 }]"#,
        r#"tiers = [{ name = "key", quota = "10/min", capacity = 8 }, { name = "b", quota = "1/s", capacity = 8 }]"#,
    );
    let e = reloader.apply(&two).unwrap_err();
    assert_eq!(
        e.to_string(),
        "redis.failure.fallback: one quota per tier: 2 tiers, 1 quota"
    );
    // Overrides are checked as in process.
    let bad = changed(
        r#"capacity = 8 }]"#,
        r#"capacity = 8, max_overrides = 1, overrides = { a = "1/s", b = "2/s" } }]"#,
    );
    assert_eq!(
        reloader.apply(&bad).unwrap_err().to_string(),
        "tiers[0].overrides: 2 overrides, more than max_overrides (1)"
    );
    // A good change goes through, and the rules in force say so.
    let raised = changed(r#"quota = "10/min""#, r#"quota = "20/min""#);
    reloader.apply(&raised).unwrap();
    assert_eq!(reloader.config(), raised);
}

/// Under load on Redis: four clients at their limits from concurrent tasks
/// while the rules switch between two quotas every 10 ms. Each client's
/// admissions over the run stay within the bound of the quotas it had
/// (`n ≤ b_max + elapsed / T_min + Σ (b′ − b)` over the raises of the
/// burst, docs/design/reconfigure.md, "Redis"), which a reload that reset
/// a client (a whole burst per switch, 5 or 2) could pass; and each client
/// is admitted at least at the slower rate, so the layer did not refuse by
/// mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn reloads_under_load_on_redis_stay_within_the_bound() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let url = redis_env::standalone();
    let prefix = redis_env::unique("load");
    let rules = |quota: &str| one_tier(&url, &prefix, quota);
    // T = 20 ms, b = 5 and T = 50 ms, b = 2.
    let (fast, slow) = (rules("50/s, burst 5"), rules("20/s, burst 2"));
    let layer = fast.build_redis(StdClock::new(), StdClock::HZ).unwrap();
    let reloader = layer.reloader();
    let svc = layer.layer(ok_service());
    let stop = Arc::new(AtomicBool::new(false));
    let admitted: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..4 {
        for _ in 0..2 {
            let (mut svc, stop, admitted) = (svc.clone(), stop.clone(), admitted.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let r = call(&mut svc, &format!("load{c}")).await;
                    match r.status() {
                        StatusCode::OK => {
                            admitted[c].fetch_add(1, Ordering::Relaxed);
                        }
                        StatusCode::TOO_MANY_REQUESTS => {}
                        other => panic!("{other}: {:?}", r.headers()),
                    }
                }
            }));
        }
    }
    let mut switches = 0;
    while start.elapsed() < Duration::from_millis(1_500) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        reloader
            .apply(if switches % 2 == 0 { &slow } else { &fast })
            .unwrap();
        switches += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed().as_millis() as u64;
    // Server time may run a little ahead of ours between the first and
    // the last request: 20 ms of slack, one cell at the fastest rate.
    // Every second switch (the 2nd, 4th, …) raises the burst from 2 to 5.
    let bound = 5 + (elapsed + 20) / 20 + 3 * (switches / 2);
    let floor = elapsed / 50 / 2;
    for (c, n) in admitted.iter().enumerate() {
        let n = n.load(Ordering::Relaxed);
        assert!(
            n <= bound,
            "client {c}: {n} admitted in {elapsed} ms, bound {bound}"
        );
        assert!(n >= floor, "client {c}: only {n} admitted in {elapsed} ms");
    }
    assert!(switches > 50, "{switches} reloads");
}

/// One GET of `/` with `x-api-key: key` over loopback HTTP: the status
/// and the fields, lower-cased names.
#[cfg(feature = "axum")]
async fn http_get(addr: &str, key: &str) -> std::collections::HashMap<String, String> {
    use std::io::{Read, Write};
    let (addr, key) = (addr.to_string(), key.to_string());
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "GET / HTTP/1.1\r\nHost: {addr}\r\nx-api-key: {key}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let head = text.split("\r\n\r\n").next().unwrap();
        let mut lines = head.lines();
        let mut fields = std::collections::HashMap::new();
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
        fields.insert("status".to_string(), status);
        for (k, v) in lines.filter_map(|l| l.split_once(": ")) {
            fields.insert(k.to_ascii_lowercase(), v.to_string());
        }
        fields
    })
    .await
    .unwrap()
}

/// On Redis, over loopback HTTP: a client overridden to 200/min on a tier
/// of 50/min is announced its own quota beside its own `r`, the others the
/// tier's; the override set at run time outlives a reload of the rules
/// (and the reload says so), and removing it brings the tier's back.
#[cfg(feature = "axum")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
async fn an_override_is_announced_and_kept_on_redis() {
    let (url, prefix) = (redis_env::standalone(), redis_env::unique("own"));
    let layer = one_tier(&url, &prefix, "50/min")
        .build_redis(StdClock::new(), StdClock::HZ)
        .unwrap();
    let reloader = layer.reloader();
    let router = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    reloader
        .set_override("key", "bob", Some("200/min".parse().unwrap()))
        .unwrap();
    let bob = http_get(&addr, "bob").await;
    assert_eq!(bob["status"], "200");
    assert_eq!(bob["ratelimit-policy"], r#""key";q=200;w=60"#);
    assert_eq!(bob["ratelimit"], r#""key";r=199;t=1"#);
    assert_eq!(bob["x-ratelimit-limit"], "200");
    let eve = http_get(&addr, "eve").await;
    assert_eq!(eve["ratelimit-policy"], r#""key";q=50;w=60"#);
    assert_eq!(eve["ratelimit"], r#""key";r=49;t=2"#);

    let report = reloader.apply(&one_tier(&url, &prefix, "60/min")).unwrap();
    assert_eq!(report.to_string(), "run-time overrides kept: key/bob");
    let bob = http_get(&addr, "bob").await;
    assert_eq!(bob["ratelimit-policy"], r#""key";q=200;w=60"#);
    assert!(bob["ratelimit"].starts_with(r#""key";r=198;"#), "{bob:?}");
    assert_eq!(
        http_get(&addr, "eve").await["ratelimit-policy"],
        r#""key";q=60;w=60"#
    );
    reloader.set_override("key", "bob", None).unwrap();
    let bob = http_get(&addr, "bob").await;
    assert_eq!(bob["ratelimit-policy"], r#""key";q=60;w=60"#);
    assert_eq!(bob["x-ratelimit-limit"], "60");
}
