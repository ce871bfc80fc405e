//! What a configured layer's rules can say beyond GCRA tiers: each tier's
//! algorithm (in process: all but the sliding log; on Redis: every algorithm),
//! overrides on `client_and_endpoint` tiers (on Redis), and `routes`
//! checked against the application's routes.
//!
//! The tests that need a server are `#[ignore]`d; `scripts/stages/70-redis.sh`
//! runs them against the one it starts (`CELLRATE_REDIS_URL`).
#![cfg(feature = "serde")]

use std::convert::Infallible;
use std::sync::Arc;

use cellrate::{Clock, ManualClock};
use cellrate_config as config;
use cellrate_tower::config::LayerConfig;
use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

fn read(text: &str) -> Result<LayerConfig, config::ConfigError> {
    config::from_deserializer(toml::Deserializer::parse(text).unwrap())
}

/// A clock the test moves while the layer holds it.
struct TestClock(Arc<ManualClock>);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.now()
    }
}

fn ok_service(
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    })
}

/// The statuses of `n` calls of `key` on `route`, as 2xx → 'A', 429 → 'D'.
async fn run<S>(svc: &mut S, key: &str, route: &'static str, n: usize) -> String
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut out = String::new();
    for _ in 0..n {
        out.push(
            match windows::call_on(svc, key, Some(route)).await.status() {
                s if s.is_success() => 'A',
                StatusCode::TOO_MANY_REQUESTS => 'D',
                other => panic!("unexpected status {other}"),
            },
        );
    }
    out
}

const KEY: &str = "key = { client = { header = \"x-api-key\" }, endpoint = \"route\" }\n";

/// In process, a leaky-bucket tier admits its rate evenly, one at a time:
/// "3/s" is one request per 333⅓ ms, where GCRA of "3/s" admits 3 at once.
#[tokio::test]
async fn in_process_a_leaky_bucket_tier_spaces_its_requests() {
    let text = format!(
        "{KEY}[[tiers]]\nname = \"leaky\"\nquota = \"3/s\"\nalgorithm = \"leaky_bucket\"\ncapacity = 8\n\
         [[tiers]]\nname = \"gcra\"\nquota = \"3/s\"\nscope = \"client_and_endpoint\"\ncapacity = 8"
    );
    let clock = Arc::new(ManualClock::new(0));
    let layer = read(&text)
        .unwrap()
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let mut svc = layer.layer(ok_service());
    assert_eq!(run(&mut svc, "ann", "/a", 2).await, "AD");
    clock.advance(333);
    assert_eq!(run(&mut svc, "ann", "/a", 1).await, "D");
    clock.advance(1);
    assert_eq!(run(&mut svc, "ann", "/a", 2).await, "AD");
    // A token-bucket tier is GCRA: its burst at once.
    let text = format!(
        "{KEY}[[tiers]]\nname = \"tokens\"\nquota = \"3/s\"\nalgorithm = \"token_bucket\"\ncapacity = 8"
    );
    let layer = read(&text)
        .unwrap()
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let mut svc = layer.layer(ok_service());
    assert_eq!(run(&mut svc, "ann", "/a", 4).await, "AAAD");
}

/// A tier's algorithm and its fields are checked at their place.
#[test]
fn algorithm_errors_name_their_place() {
    let err = |tier: &str| -> String {
        let text = format!("{KEY}[[tiers]]\nname = \"t\"\ncapacity = 8\n{tier}");
        match read(&text) {
            Err(e) => format!("{}: {}", e.path(), e.message().lines().last().unwrap_or("")),
            Ok(c) => match c.build(ManualClock::new(0), 1_000) {
                Err(e) => e.to_string(),
                Ok(_) => "built".into(),
            },
        }
    };
    assert_eq!(
        err("quota = \"3/s\"\nalgorithm = \"fixed_window\""),
        "built"
    );
    assert_eq!(err("quota = \"3/s\"\nalgorithm = \"sliding_log\""), "built");
    assert!(
        err("quota = \"3/s\"\nalgorithm = \"hourglass\"")
            .starts_with("tiers[0].algorithm: unknown variant `hourglass`"),
        "{}",
        err("quota = \"3/s\"\nalgorithm = \"hourglass\"")
    );
    assert_eq!(
        err("quota = \"3/s, burst 2\"\nalgorithm = \"leaky_bucket\""),
        "tiers[0].quota: a leaky_bucket tier admits its rate's count per period: it takes no burst"
    );
    assert_eq!(
        err("quota = \"3/s\"\nalgorithm = \"bucketed_window\""),
        "tiers[0].buckets: a bucketed_window tier needs its number of buckets"
    );
    assert_eq!(
        err("quota = \"3/s\"\nbuckets = 3"),
        "tiers[0].buckets: only a bucketed_window tier has buckets"
    );
    assert_eq!(err("quota = \"3/s\"\nalgorithm = \"gcra\""), "built");
}

/// In process, an override on a `client_and_endpoint` tier names a client
/// and gives it its own quota on each endpoint (each with its own state);
/// the other clients keep the tier's quota, and the fields announce the
/// quota that decided.
#[tokio::test]
async fn in_process_a_scoped_tier_override_applies_on_every_endpoint() {
    let text = format!(
        "{KEY}[[tiers]]\nname = \"t\"\nquota = \"1/min\"\nscope = \"client_and_endpoint\"\n\
         capacity = 8\noverrides = {{ bob = \"3/min\" }}"
    );
    let clock = Arc::new(ManualClock::new(0));
    let layer = read(&text)
        .unwrap()
        .build(TestClock(clock.clone()), 1_000)
        .unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    assert_eq!(run(&mut svc, "ann", "/a", 2).await, "AD");
    assert_eq!(run(&mut svc, "ann", "/b", 2).await, "AD");
    assert_eq!(run(&mut svc, "bob", "/a", 4).await, "AAAD");
    assert_eq!(run(&mut svc, "bob", "/b", 4).await, "AAAD");
    let r = windows::call_on(&mut svc, "bob", Some("/c")).await;
    assert_eq!(r.headers()["x-ratelimit-limit"], "3");
    assert_eq!(
        windows::call_on(&mut svc, "ann", Some("/c"))
            .await
            .headers()["x-ratelimit-limit"],
        "1"
    );
    // One more a minute for bob on /a (20 s per cell at 3/min).
    clock.advance(20_000);
    assert_eq!(run(&mut svc, "bob", "/a", 2).await, "AD");
    // An override set at run time on the scoped tier, for ann.
    reloader
        .set_override("t", "ann", Some("2/min".parse().unwrap()))
        .unwrap();
    assert_eq!(run(&mut svc, "ann", "/d", 3).await, "AAD");
}

const ROUTED: &str = "[[tiers]]\nname = \"all\"\nquota = \"100/min\"\ncapacity = 8\n\
                      [[tiers]]\nname = \"search\"\nquota = \"1/min\"\ncapacity = 8\n\
                      routes = [\"/search\", \"/serch\", \"/orders/42\"]";

/// Given the application's routes, every route a tier names that is not
/// one of them is an error at its place, before the layer serves.
#[test]
fn routes_checked_against_the_application() {
    let c = read(&format!("{KEY}{ROUTED}")).unwrap();
    let e = c
        .check_routes(["/search", "/serch", "/orders/{id}"])
        .unwrap_err();
    assert_eq!(e.path(), "tiers[1].routes[2]");
    assert!(e.message().contains("\"/orders/42\""), "{}", e.message());
    let e = c.check_routes(["/search", "/orders/42"]).unwrap_err();
    assert_eq!(e.path(), "tiers[1].routes[1]");
    assert!(c
        .check_routes(["/search", "/serch", "/orders/42", "/x"])
        .is_ok());
    // Rules without routes name none to check.
    let plain = read(&format!(
        "{KEY}[[tiers]]\nname = \"t\"\nquota = \"1/s\"\ncapacity = 8"
    ))
    .unwrap();
    assert!(plain.check_routes(std::iter::empty::<&str>()).is_ok());
}

/// Without the application's routes, the layer records what requests
/// show: the named routes no request matched, and the requests on routes
/// no tier names (one event per such route with `tracing`); a reload that
/// keeps naming a route keeps what was learnt of it.
#[tokio::test]
async fn routes_no_request_matched_are_reported() {
    #[cfg(feature = "tracing")]
    let (logs, _guard) = logs::Logs::capture();
    let clock = Arc::new(ManualClock::new(0));
    let config = read(&format!("{KEY}{ROUTED}")).unwrap();
    let layer = config.build(TestClock(clock.clone()), 1_000).unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    assert_eq!(
        reloader.unmatched_routes(),
        ["/orders/42", "/search", "/serch"]
    );
    assert_eq!(run(&mut svc, "ann", "/search", 2).await, "AD");
    assert_eq!(run(&mut svc, "ann", "/orders/{id}", 3).await, "AAA");
    assert_eq!(run(&mut svc, "bob", "/health", 1).await, "A");
    assert_eq!(reloader.unmatched_routes(), ["/orders/42", "/serch"]);
    assert_eq!(reloader.unrouted_requests(), 4);
    // The same rules again, and a route renamed: "/search" stays matched.
    let mut next = config.clone();
    next.tiers[1].routes = Some(vec!["/search".into(), "/orders/{id}".into()]);
    reloader.apply(&next).unwrap();
    assert_eq!(reloader.unmatched_routes(), ["/orders/{id}"]);
    assert_eq!(run(&mut svc, "cat", "/orders/{id}", 1).await, "A");
    assert_eq!(run(&mut svc, "cat", "/health", 1).await, "A");
    assert!(reloader.unmatched_routes().is_empty());
    assert_eq!(reloader.unrouted_requests(), 5);
    #[cfg(feature = "tracing")]
    {
        let log = logs.text();
        let events = |route: &str| logs.lines_with(&["no tier's routes name", route]).len();
        // Once per route, across the reload.
        assert_eq!(events("/health"), 1, "{log}");
        assert_eq!(events("/orders/{id}"), 1, "{log}");
        assert_eq!(events("/search"), 0, "{log}");
    }
}

#[cfg(feature = "tracing")]
#[path = "support/windows.rs"]
mod windows;

#[path = "support/logs.rs"]
mod logs;

#[cfg(feature = "redis")]
#[path = "../../cellrate-redis/tests/support/redis_env.rs"]
mod redis_env;

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;

    use super::redis_env;
    use std::time::Duration;

    /// A prefix no other run uses.
    fn unique(name: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!("{name}{}x{nanos}", std::process::id())
    }

    fn on_server(url: &str, prefix: &str, tiers: &str) -> LayerConfig {
        read(&format!(
            "{KEY}{tiers}\n[redis]\ntarget = {{ standalone = \"{url}\" }}\n\
             prefix = \"{prefix}\"\nfailure = \"closed\"\ntimeout_ms = 2000"
        ))
        .unwrap()
    }

    /// The server's clock, in µs.
    fn server_micros(conn: &mut redis::Connection) -> u64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
        secs * 1_000_000 + micros
    }

    /// Sleeps until the server's clock is `at` µs into one of its seconds
    /// (the next time it is).
    fn sleep_until_into_second(conn: &mut redis::Connection, at: u64) {
        let now = server_micros(conn);
        let into = now % 1_000_000;
        let wait = if into < at {
            at - into
        } else {
            1_000_000 - into + at
        };
        std::thread::sleep(Duration::from_micros(wait));
    }

    /// A fixed-window tier read from TOML and run on a real server: three
    /// per server-clock second. A burst late in a window is refused past
    /// its limit and admitted whole again right after the window's
    /// boundary, well before GCRA of the same quota could (a third of a
    /// second per request).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
    async fn a_fixed_window_tier_on_redis_from_toml() {
        let url = redis_env::standalone();
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let config = on_server(
            &url,
            &unique("fw"),
            "[[tiers]]\nname = \"window\"\nquota = \"3/s\"\nalgorithm = \"fixed_window\"\ncapacity = 8",
        );
        let layer = config
            .build_redis(TestClock(Arc::new(ManualClock::new(0))), 1_000)
            .unwrap();
        let mut svc = layer.layer(ok_service());
        // Late in a window: its limit, then refusals.
        sleep_until_into_second(&mut conn, 550_000);
        assert_eq!(run(&mut svc, "fay", "/a", 4).await, "AAAD");
        let refused = windows::call_on(&mut svc, "fay", Some("/a")).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        // The window ends within the second: Retry-After rounds it up to 1.
        assert_eq!(refused.headers()["retry-after"], "1");
        // Just past the boundary: a whole new window.
        sleep_until_into_second(&mut conn, 50_000);
        assert_eq!(run(&mut svc, "fay", "/a", 4).await, "AAAD");
    }

    /// An override on a `client_and_endpoint` tier names a client and
    /// gives it its own quota on every endpoint; the others keep the tier's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
    async fn a_scoped_tier_override_on_redis_applies_on_every_endpoint() {
        let url = redis_env::standalone();
        let config = on_server(
            &url,
            &unique("so"),
            "[[tiers]]\nname = \"endpoint\"\nquota = \"1/min\"\nscope = \"client_and_endpoint\"\n\
             capacity = 8\noverrides = { bob = \"3/min\" }",
        );
        let layer = config
            .build_redis(TestClock(Arc::new(ManualClock::new(0))), 1_000)
            .unwrap();
        let mut svc = layer.layer(ok_service());
        assert_eq!(run(&mut svc, "ann", "/a", 2).await, "AD");
        assert_eq!(run(&mut svc, "ann", "/b", 2).await, "AD");
        assert_eq!(run(&mut svc, "bob", "/a", 4).await, "AAAD");
        assert_eq!(run(&mut svc, "bob", "/b", 4).await, "AAAD");
        // Announced with bob's own quota.
        let r = windows::call_on(&mut svc, "bob", Some("/c")).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["x-ratelimit-limit"], "3");
        assert_eq!(
            windows::call_on(&mut svc, "ann", Some("/c"))
                .await
                .headers()["x-ratelimit-limit"],
            "1"
        );
    }
}
