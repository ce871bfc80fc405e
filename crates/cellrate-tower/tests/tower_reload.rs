//! Live reconfiguration of the HTTP layer (features `tower`, `serde`;
//! the loopback test also `axum`): a layer built from a `LayerConfig`
//! takes new ones through its `Reloader`, and
//!
//! * every decision across any schedule of reloads equals a reference
//!   model (a plain GCRA per client and tier; a kept tier's clients keep
//!   the cells they have used, at most the new burst; a tier that was
//!   removed starts over), in process;
//! * at the instant of a reload, a raise never refuses what the old rules
//!   admit and a lower never admits what they refuse (in process);
//! * under load over loopback HTTP, with clients at their limits while the
//!   rules change every few milliseconds, no client is ever admitted more
//!   than the bound of the quotas it had and the lowerings it saw (which a
//!   client reset by a reload would break);
//! * bad configurations are refused with their place and the old rules
//!   stay in force.
#![cfg(feature = "serde")]

use std::sync::Arc;

#[path = "support/reload_model.rs"]
mod reload_model;
use reload_model::{allowance, call, ok_service, rules, tiers_toml, Model, Quotas, Rules};

use cellrate::config::QuotaSpec;
use cellrate::{Clock, ManualClock};
use cellrate_tower::config::LayerConfig;
use http::StatusCode;
use proptest::prelude::*;
use tower::Layer;

/// A clock the test moves while the layer holds it (1 tick = 1 ms).
struct TestClock(Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

fn read(text: &str) -> LayerConfig {
    toml::from_str(text).unwrap()
}

/// Quotas whose emission interval is a whole number of ms, so the model's
/// arithmetic is plain integers: (per second, burst).
static QUOTAS: Quotas = Quotas {
    table: [(1, 1), (4, 2), (10, 5), (20, 3), (50, 10), (100, 1)],
    unit: "s",
    unit_len: 1_000,
};

fn config(r: &Rules) -> LayerConfig {
    read(&format!(
        "key = {{ client = {{ header = \"x-api-key\" }} }}\nfields = \"both\"\n{}",
        tiers_toml(&QUOTAS, r)
    ))
}

#[derive(Clone, Debug)]
enum Op {
    Request { client: u8, after_ms: u64 },
    Reload(Rules),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            8 => (0u8..3, prop_oneof![Just(0u64), 0u64..30, 0u64..600])
                .prop_map(|(client, after_ms)| Op::Request { client, after_ms }),
            1 => rules().prop_map(Op::Reload),
        ],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Every answer across any schedule of reloads is the model's: a kept
    /// tier keeps the cells each client has used (at most the new burst)
    /// and judges it by the new quota from the switch on; an added tier
    /// starts empty; the override of one client changes that client alone.
    #[test]
    fn reloads_decide_as_the_model(first in rules(), ops in ops()) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let clock = Arc::new(ManualClock::new(1_000_000));
            let layer = config(&first).build(TestClock(clock.clone()), 1_000).unwrap();
            let reloader = layer.reloader();
            let mut svc = layer.layer(ok_service());
            let mut model = Model::new(&QUOTAS, true);
            let mut rules = first;
            for op in ops {
                match op {
                    Op::Reload(r) => {
                        reloader.apply(&config(&r)).unwrap();
                        model.reload_keeping_cells_used(&rules, &r, clock.now());
                        rules = r;
                    }
                    Op::Request { client, after_ms } => {
                        clock.advance(after_ms);
                        let got = call(&mut svc, &format!("c{client}")).await;
                        let want = model.check(&rules, client, clock.now());
                        prop_assert_eq!(
                            got.status() == StatusCode::OK,
                            want,
                            "client {} at {} under {:?}: {:?}",
                            client,
                            clock.now(),
                            rules,
                            got.headers()
                        );
                        if !want {
                            prop_assert_eq!(got.status(), StatusCode::TOO_MANY_REQUESTS);
                        }
                        // The fields announce the rules in force, as they
                        // apply to this client.
                        let policy = got.headers()["ratelimit-policy"].to_str().unwrap();
                        prop_assert!(
                            policy.starts_with(&format!("\"key\";q={};", rules.key_burst(&QUOTAS, client))),
                            "{}",
                            policy
                        );
                        prop_assert_eq!(policy.contains("\"extra\""), rules.extra.is_some());
                    }
                }
            }
            Ok(())
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// At the instant of a reload, client 0 (whose quota is its override's
    /// or the tier's, bound or unbound by the reload) may take exactly
    /// what the old rules allowed plus the burst difference, floored at 0:
    /// a raise (rate and burst both at least the old) never refuses what
    /// the old rules admit, a lower never admits what they refuse. Two
    /// layers see the same history; one reloads, the other shows what the
    /// old rules allow.
    #[test]
    fn a_reload_is_monotone_at_its_instant(
        old in rules(),
        new in rules(),
        history in prop::collection::vec(0u64..1_500, 0..25),
    ) {
        let (old, new) = (Rules { extra: None, ..old }, Rules { extra: None, ..new });
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let clock = Arc::new(ManualClock::new(1_000_000));
            let reloaded = config(&old).build(TestClock(clock.clone()), 1_000).unwrap();
            let reloader = reloaded.reloader();
            let mut svc = reloaded.layer(ok_service());
            let mut kept = config(&old).build(TestClock(clock.clone()), 1_000).unwrap().layer(ok_service());
            for dt in history {
                clock.advance(dt);
                let a = call(&mut svc, "c0").await.status();
                prop_assert_eq!(a, call(&mut kept, "c0").await.status());
            }
            let before = allowance(&mut kept, "c0").await;
            reloader.apply(&config(&new)).unwrap();
            let after = allowance(&mut svc, "c0").await;
            let quota = |r: &Rules| QUOTAS.table[r.override0.unwrap_or(r.default)];
            let ((rate, burst), (rate2, burst2)) = (quota(&old), quota(&new));
            prop_assert_eq!(after, (before + burst2).saturating_sub(burst), "{} → {}", before, after);
            if rate2 >= rate && burst2 >= burst {
                prop_assert!(after >= before, "a raise refused what the old rules admit");
            }
            if rate2 <= rate && burst2 <= burst {
                prop_assert!(after <= before, "a lower admitted what the old rules refuse");
            }
            Ok(())
        })?;
    }
}

/// The seed's story, in process: acct_123 spends its 100/min, the operator
/// raises it to 500/min, and the very next request sees it (the cells it
/// used stay used, the rest of the new burst is there); nobody else
/// changes, and removing the override brings the default back without
/// resetting the client.
#[tokio::test]
async fn one_clients_override_changes_alone() {
    let clock = Arc::new(ManualClock::new(0));
    let layer = read(
        r#"
        key = { client = { header = "x-api-key" } }
        [[tiers]]
        name = "key"
        quota = "100/min"
        capacity = 64
        overrides = { acct_123 = "100/min" }
        "#,
    )
    .build(TestClock(clock.clone()), 1_000)
    .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.clone().layer(ok_service());
    for _ in 0..100 {
        assert_eq!(call(&mut svc, "acct_123").await.status(), StatusCode::OK);
    }
    for _ in 0..99 {
        assert_eq!(call(&mut svc, "acct_9").await.status(), StatusCode::OK);
    }
    assert_eq!(
        call(&mut svc, "acct_123").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // 600 ms later one cell is back at 100/min (600 ms each): 99 used.
    // At 500/min (burst 500) the 99 stay used: 401 are left, not a new
    // burst.
    clock.advance(600);
    reloader
        .set_override("key", "acct_123", Some("500/min".parse().unwrap()))
        .unwrap();
    let next = call(&mut svc, "acct_123").await;
    assert_eq!(next.status(), StatusCode::OK);
    assert_eq!(next.headers()["x-ratelimit-limit"], "500");
    for _ in 0..400 {
        assert_eq!(call(&mut svc, "acct_123").await.status(), StatusCode::OK);
    }
    assert_eq!(
        call(&mut svc, "acct_123").await.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the 99 cells used stay used: 401 of the 500, not a new burst"
    );
    // acct_9 is untouched: its last cell of the burst, plus the one 600 ms earn.
    assert_eq!(call(&mut svc, "acct_9").await.status(), StatusCode::OK);
    assert_eq!(call(&mut svc, "acct_9").await.status(), StatusCode::OK);
    assert_eq!(
        call(&mut svc, "acct_9").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Removing the override: acct_123 follows 100/min again, its 500
    // cells used kept up to the burst of 100: still owing.
    reloader.set_override("key", "acct_123", None).unwrap();
    assert_eq!(
        call(&mut svc, "acct_123").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(reloader.config().tiers[0].overrides.is_empty());
}

/// A bad configuration is refused with its place and nothing changes.
#[tokio::test]
async fn a_bad_reload_keeps_the_old_rules() {
    let clock = Arc::new(ManualClock::new(0));
    let base = r#"
        key = { client = { header = "x-api-key" } }
        [[tiers]]
        name = "key"
        quota = "2/min"
        capacity = 64
        max_overrides = 1
        "#;
    let layer = read(base).build(TestClock(clock.clone()), 1_000).unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    assert_eq!(call(&mut svc, "a").await.status(), StatusCode::OK);
    let cases: [(&str, &str); 8] = [
        (
            "key = { client = { header = \"x-other\" } }\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 64, max_overrides = 1 }]",
            "key: fixed when the layer is built: build a new layer to change it",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = []",
            "tiers: the backend has no tiers",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 65, max_overrides = 1 }]",
            "tiers[0].capacity: fixed while tier \"key\" lives (its table keeps every client's state): give the tier a new name to make a new table",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 64, max_overrides = 1, scope = \"client_and_endpoint\" }]",
            "tiers[0].scope: client_and_endpoint needs key.endpoint",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 64, max_overrides = 1, overrides = { a = \"1/s\", b = \"1/s\" } }]",
            "tiers[0].overrides: 2 overrides, more than max_overrides (1)",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 64, max_overrides = 1 }, { name = \"key\", quota = \"1/s\", capacity = 1 }]",
            "tiers[1].name: tier name \"key\" is used twice",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"key\", quota = \"9/s, hz 10\", capacity = 64, max_overrides = 1 }]",
            "tiers[0].quota: a tier must count ticks at the clock's frequency",
        ),
        (
            "key = { client = { header = \"x-api-key\" } }\nfields = \"ietf\"\ntiers = [{ name = \"key\", quota = \"9/s\", capacity = 64, max_overrides = 1 }]",
            "fields: fixed when the layer is built: build a new layer to change it",
        ),
    ];
    for (text, error) in cases {
        assert_eq!(
            reloader.apply(&read(text)).unwrap_err().to_string(),
            error,
            "{text}"
        );
    }
    // Override slots: one, held by one client at a time.
    reloader
        .set_override("key", "a", Some("5/min".parse().unwrap()))
        .unwrap();
    reloader.set_override("key", "a", None).unwrap();
    reloader
        .set_override("key", "b", Some("5/min".parse().unwrap()))
        .unwrap();
    assert_eq!(
        reloader
            .set_override("key", "c", Some("5/min".parse().unwrap()))
            .unwrap_err()
            .to_string(),
        "tiers[0].overrides: 2 overrides, more than max_overrides (1)"
    );
    reloader.set_override("key", "b", None).unwrap();
    assert_eq!(
        reloader
            .set_override("nope", "a", None)
            .unwrap_err()
            .to_string(),
        "tiers: no tier is named \"nope\""
    );
    // Still 2/min, and "a" still owes its first cell.
    assert_eq!(call(&mut svc, "a").await.status(), StatusCode::OK);
    assert_eq!(
        call(&mut svc, "a").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(reloader.config(), read(base));
    let _ = QuotaSpec::new(1, "s".parse().unwrap());
}

/// A layer written in code has no configuration to change.
#[test]
fn a_layer_built_in_code_has_nothing_to_reload() {
    use cellrate_tower::{KeyedTiers, RateLimitLayer};
    let config = read("key = { client = { header = \"x-api-key\" } }\ntiers = [{ name = \"k\", quota = \"1/s\", capacity = 1 }]");
    let key = config.key.build().unwrap();
    let tiers = KeyedTiers::new()
        .per_client("k", cellrate::Quota::per_second(1).at_hz(1_000), 1)
        .unwrap();
    let layer = RateLimitLayer::builder(key, tiers, ManualClock::new(0))
        .build()
        .unwrap();
    assert_eq!(
        layer.reloader().apply(&config).unwrap_err().to_string(),
        "this layer was not built from a LayerConfig: it has no configuration to change"
    );
}

#[cfg(feature = "axum")]
mod loopback {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// One keep-alive HTTP/1.1 connection.
    struct Conn {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
    }

    impl Conn {
        fn new(addr: &str) -> Self {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.set_nodelay(true).unwrap();
            Conn {
                reader: BufReader::new(s.try_clone().unwrap()),
                writer: s,
            }
        }
        /// One request's status and fields, lower-cased names.
        fn get_fields(&mut self, key: &str) -> std::collections::HashMap<String, String> {
            write!(
                self.writer,
                "GET / HTTP/1.1\r\nHost: test\r\nx-api-key: {key}\r\n\r\n"
            )
            .unwrap();
            let mut status = String::new();
            self.reader.read_line(&mut status).unwrap();
            let mut fields = std::collections::HashMap::new();
            fields.insert(
                "status".to_string(),
                status.split(' ').nth(1).unwrap().to_string(),
            );
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                self.reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    let (k, v) = (k.to_ascii_lowercase(), v.trim().to_string());
                    if k == "content-length" {
                        length = v.parse().unwrap();
                    }
                    fields.insert(k, v);
                }
            }
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).unwrap();
            fields
        }
        fn get(&mut self, key: &str) -> u16 {
            write!(
                self.writer,
                "GET / HTTP/1.1\r\nHost: test\r\nx-api-key: {key}\r\n\r\n"
            )
            .unwrap();
            let mut status = String::new();
            self.reader.read_line(&mut status).unwrap();
            let code = status.split(' ').nth(1).unwrap().parse().unwrap();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                self.reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).unwrap();
            code
        }
    }

    /// The fields of a client with an override are its override's, over
    /// loopback HTTP: `RateLimit-Policy` with `RateLimit` and
    /// `X-RateLimit-*`, in a layer of one tier (the override's value made
    /// once) and of two (written per request); the other clients keep the
    /// tiers' own.
    #[test]
    fn an_override_is_announced_over_http() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let serve = |layer: cellrate_tower::RateLimitLayer<_, _, _>| {
            let router = axum::Router::new()
                .route("/", axum::routing::get(|| async { "ok" }))
                .layer(layer);
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            rt.spawn(async move {
                let _ = axum::serve(listener, router).await;
            });
            addr
        };
        let one = read(
            "key = { client = { header = \"x-api-key\" } }\n\
             tiers = [{ name = \"key\", quota = \"100/min\", capacity = 64 }]",
        )
        .build(cellrate::StdClock::new(), cellrate::StdClock::HZ)
        .unwrap();
        let reloader = one.reloader();
        let addr = serve(one);
        reloader
            .set_override("key", "frank", Some("100/s".parse().unwrap()))
            .unwrap();
        let frank = Conn::new(&addr).get_fields("frank");
        assert_eq!(frank["ratelimit-policy"], r#""key";q=100;w=1"#);
        assert_eq!(frank["ratelimit"], r#""key";r=99;t=1"#);
        assert_eq!(frank["x-ratelimit-limit"], "100");
        assert_eq!(frank["x-ratelimit-remaining"], "99");
        let other = Conn::new(&addr).get_fields("gina");
        assert_eq!(other["ratelimit-policy"], r#""key";q=100;w=60"#);
        assert_eq!(other["ratelimit"], r#""key";r=99;t=1"#);
        // Same burst, another rate: told apart all the same.
        reloader
            .set_override("key", "frank", Some("100/h".parse().unwrap()))
            .unwrap();
        let frank = Conn::new(&addr).get_fields("frank");
        assert_eq!(frank["ratelimit-policy"], r#""key";q=100;w=3600"#);
        assert_eq!(frank["x-ratelimit-limit"], "100");

        let two = read(
            "key = { client = { header = \"x-api-key\" } }\n\
             [[tiers]]\nname = \"key\"\nquota = \"100/min\"\ncapacity = 64\n\
             overrides = { frank = \"500/min\" }\n\
             [[tiers]]\nname = \"burst\"\nquota = \"50/s, burst 10\"\ncapacity = 64\n",
        )
        .build(cellrate::StdClock::new(), cellrate::StdClock::HZ)
        .unwrap();
        let addr = serve(two);
        let frank = Conn::new(&addr).get_fields("frank");
        assert_eq!(
            frank["ratelimit-policy"],
            r#""key";q=500;w=60, "burst";q=10;w=1, "burst/rate";q=50;w=1"#
        );
        assert!(
            frank["ratelimit"].starts_with(r#""key";r=499;t=1, "#),
            "{:?}",
            frank
        );
        let other = Conn::new(&addr).get_fields("gina");
        assert!(other["ratelimit-policy"].starts_with(r#""key";q=100;w=60, "#));
    }

    /// Two quotas the rules swing between, in ms: (interval, burst).
    const SLOW: (&str, u64, u64) = ("50/s, burst 10", 20, 10);
    const FAST: (&str, u64, u64) = ("100/s, burst 5", 10, 5);

    fn rules(quota: &str, with_extra: bool) -> LayerConfig {
        let mut text = format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
             [[tiers]]\nname = \"key\"\nquota = \"{quota}\"\ncapacity = 1024\n"
        );
        if with_extra {
            text += "[[tiers]]\nname = \"extra\"\nquota = \"1000/s\"\ncapacity = 1024\n";
        }
        read(&text)
    }

    /// Four clients at their limits over loopback HTTP while the rules
    /// change every 25 ms (the quota swings between 50/s burst 10 and
    /// 100/s burst 5, and a second tier comes and goes): at no time is a
    /// client over `(Δt + b_max·T_max) / T_min` admissions in any span
    /// `Δt`, plus what each reload overlapping the span may forgive (the
    /// proof sketch in docs/design/tower.md): a lowering of the burst, the
    /// cells above the new burst (`b_max − b_min`); a raise of `T`, a
    /// client's debt read as time by checks that overlap its walk
    /// (`b_min·(1 − T_min/T_max)`); either, one check per server thread
    /// decided by the old quota. A reload that reset a client would hand
    /// it a burst per reload, past the bound within a few cycles.
    #[test]
    fn reloads_under_load_never_over_admit() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let layer = rules(SLOW.0, false)
            .build(cellrate::StdClock::new(), cellrate::StdClock::HZ)
            .unwrap();
        let reloader = layer.reloader();
        let router = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .layer(layer);
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        rt.spawn(async move {
            let _ = axum::serve(listener, router).await;
        });

        let run = Duration::from_secs(2);
        let start = Instant::now();
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut conn = Conn::new(&addr);
                    let key = format!("client-{c}");
                    let mut admitted: Vec<(Instant, Instant)> = Vec::new();
                    let (mut denied, mut sent) = (0u32, 0u32);
                    while start.elapsed() < run && sent < 50_000 {
                        let before = Instant::now();
                        let status = conn.get(&key);
                        sent += 1;
                        match status {
                            200 => admitted.push((before, Instant::now())),
                            429 => denied += 1,
                            other => panic!("{key}: status {other}"),
                        }
                    }
                    (key, admitted, denied)
                })
            })
            .collect();
        let mut reloads = 0;
        // When each reload ran, and the cells it may forgive (see above;
        // the server runs 2 threads).
        let (t_min, t_max, b_max) = (FAST.1 as f64, SLOW.1 as f64, SLOW.2.max(FAST.2) as f64);
        let b_min = SLOW.2.min(FAST.2) as f64;
        let mut switches: Vec<(Instant, Instant, f64)> = Vec::new();
        while start.elapsed() < run {
            std::thread::sleep(Duration::from_millis(25));
            let quota = if reloads % 2 == 0 { FAST.0 } else { SLOW.0 };
            let began = Instant::now();
            reloader.apply(&rules(quota, reloads % 3 == 0)).unwrap();
            let forgiven = if quota == FAST.0 {
                b_max - b_min
            } else {
                b_min * (1.0 - t_min / t_max)
            };
            switches.push((began, Instant::now(), forgiven + 2.0));
            reloads += 1;
        }
        for client in clients {
            let (key, admitted, denied) = client.join().unwrap();
            assert!(denied > 0, "{key} never reached its limit");
            assert!(
                admitted.len() as f64 >= 0.5 * 2_000.0 / t_max,
                "{key}: only {} admitted",
                admitted.len()
            );
            // Every span from the j-th to the k-th admission (decided
            // between the j-th send and the k-th reply).
            for j in 0..admitted.len() {
                for k in j..admitted.len() {
                    let (from, to) = (admitted[j].0, admitted[k].1);
                    let span = to.duration_since(from).as_secs_f64() * 1e3;
                    let n = (k - j + 1) as f64;
                    let forgiven: f64 = switches
                        .iter()
                        .filter(|(began, ended, _)| *began <= to && *ended >= from)
                        .map(|(_, _, f)| f)
                        .sum();
                    let bound = (span + b_max * t_max) / t_min + forgiven;
                    assert!(
                        n <= bound,
                        "{key}: {n} admitted in {span:.1} ms, over the bound {bound:.1} \
                         ({reloads} reloads)"
                    );
                }
            }
        }
        assert!(reloads >= 20, "{reloads} reloads");
    }
}

/// Override slots are counted for the whole reload: clients that have one
/// keep it, and the new ones must all fit in what is left.
#[test]
fn new_overrides_must_all_fit() {
    let text = |overrides: &str| {
        read(&format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
             tiers = [{{ name = \"key\", quota = \"2/min\", capacity = 8, max_overrides = 2, \
             overrides = {{ {overrides} }} }}]"
        ))
    };
    let layer = text("a = \"5/min\"")
        .build(ManualClock::new(0), 1_000)
        .unwrap();
    let reloader = layer.reloader();
    // "a" keeps its slot; "b" and "c" would need two more of the one left.
    assert_eq!(
        reloader
            .apply(&text("b = \"5/min\", c = \"5/min\""))
            .unwrap_err()
            .to_string()
            .split(':')
            .next()
            .unwrap(),
        "tiers[0].overrides.c"
    );
    assert_eq!(reloader.config(), text("a = \"5/min\""));
    reloader
        .apply(&text("a = \"6/min\", b = \"5/min\""))
        .unwrap();
}

/// Run-time overrides outlive reloads while their tier lives: a reload
/// that changes the tier's quota keeps them (over the file's override of
/// the same client), one that removes the tier drops them, and says so.
#[tokio::test]
async fn run_time_overrides_outlive_reloads() {
    use cellrate_tower::Why;
    let clock = Arc::new(ManualClock::new(0));
    let rules = |key: &str, extra: bool| {
        let mut text = format!(
            "key = {{ client = {{ header = \"x-api-key\" }} }}\n\
             [[tiers]]\nname = \"key\"\nquota = \"{key}\"\ncapacity = 64\n\
             overrides = {{ frank = \"6/min\" }}\n"
        );
        if extra {
            text += "[[tiers]]\nname = \"extra\"\nquota = \"10/s\"\ncapacity = 64\n";
        }
        read(&text)
    };
    let layer = rules("100/min", true)
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    reloader
        .set_override("key", "frank", Some("500/min".parse().unwrap()))
        .unwrap();
    reloader
        .set_override("extra", "gina", Some("50/s".parse().unwrap()))
        .unwrap();
    let report = reloader.apply(&rules("200/min", true)).unwrap();
    assert_eq!(
        report.to_string(),
        "run-time overrides kept: extra/gina, key/frank"
    );
    let r = call(&mut svc, "frank").await;
    assert_eq!(r.headers()["x-ratelimit-limit"], "10"); // the extra tier is the tightest
    assert!(r.headers()["ratelimit-policy"]
        .to_str()
        .unwrap()
        .starts_with(r#""key";q=500;w=60, "#));
    let report = reloader.apply(&rules("200/min", false)).unwrap();
    assert_eq!(report.kept, [("key".to_string(), "frank".to_string())]);
    assert_eq!(report.dropped.len(), 1);
    assert_eq!(
        (report.dropped[0].tier.as_str(), report.dropped[0].why),
        ("extra", Why::TierRemoved)
    );
    assert_eq!(
        report.to_string(),
        "run-time overrides kept: key/frank; dropped: extra/gina (its tier was removed)"
    );
    let r = call(&mut svc, "frank").await;
    assert_eq!(r.headers()["ratelimit-policy"], r#""key";q=500;w=60"#);
    assert_eq!(r.headers()["x-ratelimit-limit"], "500");
    // Removed: frank follows the tier's quota; the file's override of frank
    // comes back with the next reload of the file.
    reloader.set_override("key", "frank", None).unwrap();
    let r = call(&mut svc, "frank").await;
    assert_eq!(r.headers()["ratelimit-policy"], r#""key";q=200;w=60"#);
    assert_eq!(
        reloader
            .apply(&rules("200/min", false))
            .unwrap()
            .to_string(),
        "no run-time overrides"
    );
    let r = call(&mut svc, "frank").await;
    assert_eq!(r.headers()["ratelimit-policy"], r#""key";q=6;w=60"#);
}

/// Removing an override frees its slot: with 63 of a tier's 64 slots held,
/// 1 000 clients in turn get an override through the last one and lose it,
/// each announced its own quota while it has it; removing an override the
/// client does not have is its own error. So for a GCRA tier and for the
/// store tiers (a fixed window, a sliding log).
#[tokio::test]
async fn removing_an_override_frees_its_slot() {
    for algorithm in ["gcra", "fixed_window", "sliding_log"] {
        overrides_free_their_slots(algorithm).await;
    }
}

async fn overrides_free_their_slots(algorithm: &str) {
    use cellrate_tower::OverrideError;
    let clock = Arc::new(ManualClock::new(0));
    let layer = read(&format!(
        r#"
        key = {{ client = {{ header = "x-api-key" }} }}
        tiers = [{{ name = "key", quota = "100/min", capacity = 4096, algorithm = "{algorithm}" }}]
        "#,
    ))
    .build(TestClock(clock.clone()), 1_000_000)
    .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let spec = |n: u64| -> QuotaSpec { format!("{n}/min").parse().unwrap() };
    for i in 0..63 {
        reloader
            .set_override("key", &format!("held{i}"), Some(spec(200 + i)))
            .unwrap();
    }
    for i in 0..1_000u64 {
        let client = format!("c{i}");
        reloader
            .set_override("key", &client, Some(spec(300 + i)))
            .unwrap_or_else(|e| panic!("{algorithm}, cycle {i}: {e}"));
        let r = call(&mut svc, &client).await;
        let policy = r.headers()["ratelimit-policy"].to_str().unwrap();
        assert!(
            policy.starts_with(&format!("\"key\";q={};", 300 + i)),
            "{policy}"
        );
        assert_eq!(
            r.headers()["x-ratelimit-limit"],
            (300 + i).to_string().as_str()
        );
        reloader.set_override("key", &client, None).unwrap();
        let r = call(&mut svc, &client).await;
        assert_eq!(r.headers()["ratelimit-policy"], r#""key";q=100;w=60"#);
    }
    // The held ones kept theirs.
    let r = call(&mut svc, "held7").await;
    let policy = r.headers()["ratelimit-policy"].to_str().unwrap();
    assert!(policy.starts_with(r#""key";q=207;"#), "{policy}");
    assert_eq!(
        reloader.set_override("key", "c0", None),
        Err(OverrideError::NoOverride {
            tier: "key".into(),
            client: "c0".into()
        })
    );
    assert_eq!(
        reloader.set_override("nope", "c0", None),
        Err(OverrideError::NoTier("nope".into()))
    );
}
