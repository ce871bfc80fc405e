//! Sliding-log tiers and per-client overrides in process: a layer built
//! from TOML decides each request exactly as the core's limiters fed the
//! same requests (`SlidingLog` per client for a log tier, the window
//! limiter of the client's own quota for a window tier with overrides),
//! announces each client's own quota, keeps each client's cells used
//! across a reload or a change of override (`SlidingLog::set_limit`,
//! `Limiter::set_quota` at the instant), takes nothing from a log tier for
//! a request a later tier refuses, bounds a log tier's table by its
//! `capacity`, and refuses what still has no meaning at its place.
#![cfg(feature = "serde")]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use cellrate::compose::AllTiers;
use cellrate::config::QuotaSpec;
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingLog, SlidingWindowQuota};
use cellrate::{Clock, Gcra, ManualClock};
use cellrate_tower::config::LayerConfig;
use cellrate_tower::TierInfo;
use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

#[path = "support/windows.rs"]
mod windows;
use windows::{
    assert_answer, assert_fields, call, call_on, expected_fields, one_tier, read, schedule,
    LogQuota, Reference, Rules, TestClock, HZ, KEY, LOG_SLOTS,
};

/// The key of a tier per (client, endpoint): the matched route.
const ROUTED_KEY: &str = "key = { client = { header = \"x-api-key\" }, endpoint = \"route\" }\n";

/// One tier named "w" of `spec`, per client or per (client, endpoint).
fn tier(spec: &str, per_endpoint: bool) -> LayerConfig {
    if !per_endpoint {
        return one_tier(spec);
    }
    read(&format!(
        "{ROUTED_KEY}[[tiers]]\nname = \"w\"\ncapacity = 64\nscope = \"client_and_endpoint\"\n{spec}"
    ))
    .unwrap()
}

fn spec(text: &str) -> QuotaSpec {
    text.parse().unwrap()
}

/// One request: ticks to wait, the client, its matched route (if the key
/// has an endpoint).
type Step = (u64, &'static str, Option<&'static str>);

/// [`schedule`], each request on route "/a" or "/b" when `per_endpoint`.
fn schedule_on(seed: u64, n: usize, per_endpoint: bool) -> Vec<Step> {
    schedule(seed, n)
        .into_iter()
        .enumerate()
        .map(|(i, (wait, client))| {
            let bit = (i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 63;
            let route = per_endpoint.then_some(["/a", "/b"][bit as usize]);
            (wait, client, route)
        })
        .collect()
}

/// One request of a one-tier layer: the layer answers as the reference
/// does, every field included, announcing the client's own rules as tier
/// "w". Whether it was admitted.
async fn step<S, P>(
    svc: &mut S,
    clock: &ManualClock,
    reference: &mut Reference<P>,
    (wait, client, route): Step,
    what: &str,
) -> bool
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
    P: Rules,
{
    clock.advance(wait);
    let now = clock.now();
    let expected = reference.check_pair(client, route.unwrap_or(""), now);
    let announced = reference.rules_of(client).info("w");
    let got = call_on(svc, client, route).await;
    let at = format!("{what}: {client} {route:?} at {now}");
    assert_answer(&got, &expected, &at);
    assert_fields(&got, &expected_fields(&[announced], &[expected]), &at);
    expected.is_ok()
}

/// [`step`] through `steps`; how many were admitted and refused.
async fn run<S, P>(
    svc: &mut S,
    clock: &ManualClock,
    reference: &mut Reference<P>,
    steps: &[Step],
    what: &str,
) -> (usize, usize)
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
    P: Rules,
{
    let mut admitted = 0;
    for (i, &s) in steps.iter().enumerate() {
        admitted += step(svc, clock, reference, s, &format!("{what}, step {i}")).await as usize;
    }
    (admitted, steps.len() - admitted)
}

/// Requests of `client` on `route` at the clock's instant until one is
/// refused, each answered as the reference; how many were admitted.
async fn until_refused<S, P>(
    svc: &mut S,
    clock: &ManualClock,
    reference: &mut Reference<P>,
    client: &'static str,
    route: Option<&'static str>,
    what: &str,
) -> u64
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
    P: Rules,
{
    let mut admitted = 0;
    while step(svc, clock, reference, (0, client, route), what).await {
        admitted += 1;
        assert!(admitted <= 64, "{what}: never refused");
    }
    admitted
}

/// A log tier from TOML answers every request as the core's `SlidingLog`
/// of the quota's count per period, one per client (or per (client,
/// endpoint)), fields included.
#[tokio::test]
async fn log_tiers_in_process_decide_as_the_core() {
    async fn case(quota: &str, log: LogQuota, per_endpoint: bool, seed: u64, min_refused: usize) {
        let spec = format!("quota = \"{quota}\"\nalgorithm = \"sliding_log\"");
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = tier(&spec, per_endpoint)
            .build(TestClock(clock.clone()), HZ)
            .unwrap();
        let mut svc = layer.layer(windows::ok_service());
        let mut reference = Reference::new(log);
        let steps = schedule_on(seed, 300, per_endpoint);
        let (admitted, refused) = run(&mut svc, &clock, &mut reference, &steps, &spec).await;
        // The run reaches the limit and passes it.
        assert!(
            admitted > 20 && refused >= min_refused,
            "{spec}: {admitted} {refused}"
        );
    }
    case("3/s", LogQuota::new(3, 1_000), false, 1, 20).await;
    case("5/2s", LogQuota::new(5, 2_000), false, 2, 20).await;
    // Ten a second are seldom reached by this traffic: a few times.
    case("10/s", LogQuota::new(10, 1_000), false, 3, 5).await;
    case("12/5s", LogQuota::new(12, 5_000), false, 5, 20).await;
    case("3/s", LogQuota::new(3, 1_000), true, 4, 20).await;
}

/// A reload that changes a log tier's quota at `t` is, for each client,
/// `SlidingLog::set_limit(t, …)` on the reference: at `t` a client that
/// had `a` cells left under `limit` has `max(0, a + new − limit)`, and
/// every later answer is the reference's.
#[tokio::test]
async fn a_reload_of_a_log_tier_keeps_the_cells_used() {
    async fn case(old: (&str, LogQuota), new: (&str, LogQuota), seed: u64) {
        let text = |q: &str| format!("quota = \"{q}\"\nalgorithm = \"sliding_log\"");
        let what = format!("{} -> {}", old.0, new.0);
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = one_tier(&text(old.0))
            .build(TestClock(clock.clone()), HZ)
            .unwrap();
        let reloader = layer.reloader();
        let mut svc = layer.layer(windows::ok_service());
        let mut reference = Reference::new(old.1);
        let before = schedule_on(seed, 60, false);
        run(&mut svc, &clock, &mut reference, &before, &what).await;
        // "ann" spends all but one of its cells, then the rules change at
        // the same instant.
        clock.advance(1);
        while reference.peek("ann", "", clock.now()).remaining() == 0 {
            clock.advance(50);
        }
        let now = clock.now();
        while reference.peek("ann", "", now).remaining() > 1 {
            step(&mut svc, &clock, &mut reference, (0, "ann", None), &what).await;
        }
        let left = reference.peek("ann", "", now).remaining();
        assert_eq!(left, 1, "{what}");
        reloader.apply(&one_tier(&text(new.0))).unwrap();
        reference.set_quota(now, new.1);
        let admitted = until_refused(&mut svc, &clock, &mut reference, "ann", None, &what).await;
        assert_eq!(
            admitted,
            (left + new.1.limit).saturating_sub(old.1.limit),
            "{what}"
        );
        let after = schedule_on(seed + 1, 200, false);
        run(&mut svc, &clock, &mut reference, &after, &what).await;
    }
    // A raise, a lower (ann used more than the new limit: refused until
    // its cells expire), a longer limit in a shorter window.
    case(
        ("3/s", LogQuota::new(3, 1_000)),
        ("6/s", LogQuota::new(6, 1_000)),
        10,
    )
    .await;
    case(
        ("6/s", LogQuota::new(6, 1_000)),
        ("2/s", LogQuota::new(2, 1_000)),
        20,
    )
    .await;
    case(
        ("4/2s", LogQuota::new(4, 2_000)),
        ("8/s", LogQuota::new(8, 1_000)),
        30,
    )
    .await;
}

/// An override decides its client by its own quota (a limiter of the
/// override's limit and window, of the tier's algorithm), in the
/// configuration and set at run time; each change at `t` (added, changed,
/// removed) moves that client's limiters to the new rules at `t`, keeping
/// its cells used; the other clients follow the tier. Every algorithm
/// that runs in process with overrides, per client and per (client,
/// endpoint) (the client's override decides each of its pairs).
#[tokio::test]
async fn overrides_decide_their_client_in_every_algorithm() {
    async fn case<P: Rules>(algorithm: &str, make: fn(u64, u64) -> P, per_endpoint: bool) {
        let what = format!("{algorithm}, per endpoint: {per_endpoint}");
        let seed = algorithm.len() as u64 + per_endpoint as u64;
        let text = format!("quota = \"3/s\"\n{algorithm}\noverrides = {{ ann = \"9/s\" }}");
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = tier(&text, per_endpoint)
            .build(TestClock(clock.clone()), HZ)
            .unwrap();
        let reloader = layer.reloader();
        let mut svc = layer.layer(windows::ok_service());
        let mut reference = Reference::new(make(3, 1_000));
        reference.set_override(clock.now(), "ann", Some(make(9, 1_000)));
        let route = per_endpoint.then_some("/a");
        let other_route = per_endpoint.then_some("/b");

        let steps = schedule_on(seed, 150, per_endpoint);
        let (admitted, refused) = run(&mut svc, &clock, &mut reference, &steps, &what).await;
        assert!(
            admitted > 20 && refused >= 5,
            "{what}: {admitted} {refused}"
        );

        // Added at run time: bob, out of cells under the tier's quota,
        // gets a larger one at the same instant.
        clock.advance(7);
        until_refused(&mut svc, &clock, &mut reference, "bob", route, &what).await;
        reloader
            .set_override("w", "bob", Some(spec("6/2s")))
            .unwrap();
        reference.set_override(clock.now(), "bob", Some(make(6, 2_000)));
        let added = format!("{what}: bob's override added");
        let admitted = until_refused(&mut svc, &clock, &mut reference, "bob", route, &added).await;
        assert!(admitted > 0, "{added}");
        until_refused(&mut svc, &clock, &mut reference, "bob", other_route, &added).await;
        let steps = schedule_on(seed + 1, 100, per_endpoint);
        run(&mut svc, &clock, &mut reference, &steps, &added).await;

        // Changed: ann's override lowered while ann has cells used.
        clock.advance(3);
        step(&mut svc, &clock, &mut reference, (0, "ann", route), &what).await;
        step(&mut svc, &clock, &mut reference, (0, "ann", route), &what).await;
        reloader
            .set_override("w", "ann", Some(spec("4/s")))
            .unwrap();
        reference.set_override(clock.now(), "ann", Some(make(4, 1_000)));
        let changed = format!("{what}: ann's override changed");
        until_refused(&mut svc, &clock, &mut reference, "ann", route, &changed).await;
        let steps = schedule_on(seed + 2, 100, per_endpoint);
        run(&mut svc, &clock, &mut reference, &steps, &changed).await;

        // Removed: bob follows the tier's quota again, its cells kept.
        clock.advance(5);
        step(&mut svc, &clock, &mut reference, (0, "bob", route), &what).await;
        reloader.set_override("w", "bob", None).unwrap();
        reference.set_override(clock.now(), "bob", None);
        let removed = format!("{what}: bob's override removed");
        until_refused(&mut svc, &clock, &mut reference, "bob", route, &removed).await;
        let steps = schedule_on(seed + 3, 100, per_endpoint);
        run(&mut svc, &clock, &mut reference, &steps, &removed).await;
    }
    for per_endpoint in [false, true] {
        case(
            "algorithm = \"fixed_window\"",
            FixedWindowQuota::new,
            per_endpoint,
        )
        .await;
        case(
            "algorithm = \"sliding_window\"",
            SlidingWindowQuota::new,
            per_endpoint,
        )
        .await;
        case(
            "algorithm = \"bucketed_window\"\nbuckets = 4",
            |limit, window| BucketedWindowQuota::new(limit, window, 4),
            per_endpoint,
        )
        .await;
        case("algorithm = \"sliding_log\"", LogQuota::new, per_endpoint).await;
    }
}

/// An override added, changed or removed by a reload of the
/// configuration is a change of that client's rules at the reload's
/// instant, as one set at run time: its cells used are kept.
#[tokio::test]
async fn a_reload_that_changes_an_override_keeps_the_cells_used() {
    async fn case<P: Rules>(algorithm: &str, make: fn(u64, u64) -> P, seed: u64) {
        let text = |overrides: &str| format!("quota = \"3/s\"\n{algorithm}\n{overrides}");
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = one_tier(&text(""))
            .build(TestClock(clock.clone()), HZ)
            .unwrap();
        let reloader = layer.reloader();
        let mut svc = layer.layer(windows::ok_service());
        let mut reference = Reference::new(make(3, 1_000));
        let steps = schedule_on(seed, 60, false);
        run(&mut svc, &clock, &mut reference, &steps, algorithm).await;
        for (i, (overrides, rules)) in [
            ("overrides = { ann = \"6/s\" }", Some(make(6, 1_000))),
            ("overrides = { ann = \"5/2s\" }", Some(make(5, 2_000))),
            ("", None),
        ]
        .into_iter()
        .enumerate()
        {
            let what = format!("{algorithm}: reloaded with {overrides:?}");
            clock.advance(1);
            step(&mut svc, &clock, &mut reference, (0, "ann", None), &what).await;
            reloader.apply(&one_tier(&text(overrides))).unwrap();
            reference.set_override(clock.now(), "ann", rules);
            until_refused(&mut svc, &clock, &mut reference, "ann", None, &what).await;
            let steps = schedule_on(seed + 1 + i as u64, 60, false);
            run(&mut svc, &clock, &mut reference, &steps, &what).await;
        }
    }
    case("algorithm = \"fixed_window\"", FixedWindowQuota::new, 60).await;
    case(
        "algorithm = \"sliding_window\"",
        SlidingWindowQuota::new,
        61,
    )
    .await;
    case(
        "algorithm = \"bucketed_window\"\nbuckets = 4",
        |limit, window| BucketedWindowQuota::new(limit, window, 4),
        62,
    )
    .await;
    case("algorithm = \"sliding_log\"", LogQuota::new, 63).await;
}

/// The fields of a client with an override are its override's
/// (`RateLimit-Policy`, `RateLimit`, `X-RateLimit-Limit`), the other
/// clients' the tier's, on a window tier and on a log tier, from the
/// configuration and set or removed at run time.
#[tokio::test]
async fn an_override_is_announced_as_its_clients_own() {
    for algorithm in ["fixed_window", "sliding_log"] {
        let text = format!(
            "quota = \"3/s\"\nalgorithm = \"{algorithm}\"\noverrides = {{ ann = \"9/s\" }}"
        );
        let layer = one_tier(&text)
            .build(TestClock(Arc::new(ManualClock::new(5_000))), HZ)
            .unwrap();
        let reloader = layer.reloader();
        let mut svc = layer.layer(windows::ok_service());
        let field =
            |r: &Response<String>, name: &str| r.headers()[name].to_str().unwrap().to_owned();
        let ann = call(&mut svc, "ann").await;
        assert_eq!(
            field(&ann, "ratelimit-policy"),
            r#""w";q=9;w=1"#,
            "{algorithm}"
        );
        assert_eq!(field(&ann, "ratelimit"), r#""w";r=8;t=1"#, "{algorithm}");
        assert_eq!(field(&ann, "x-ratelimit-limit"), "9", "{algorithm}");
        let bob = call(&mut svc, "bob").await;
        assert_eq!(
            field(&bob, "ratelimit-policy"),
            r#""w";q=3;w=1"#,
            "{algorithm}"
        );
        assert_eq!(field(&bob, "ratelimit"), r#""w";r=2;t=1"#, "{algorithm}");
        assert_eq!(field(&bob, "x-ratelimit-limit"), "3", "{algorithm}");

        reloader
            .set_override("w", "bob", Some(spec("5/2s")))
            .unwrap();
        let bob = call(&mut svc, "bob").await;
        assert_eq!(
            field(&bob, "ratelimit-policy"),
            r#""w";q=5;w=2"#,
            "{algorithm}"
        );
        assert_eq!(field(&bob, "x-ratelimit-limit"), "5", "{algorithm}");
        // Two of bob's five cells used (one before the override).
        assert!(
            field(&bob, "ratelimit").starts_with(r#""w";r=3;t="#),
            "{algorithm}: {}",
            field(&bob, "ratelimit")
        );
        reloader.set_override("w", "ann", None).unwrap();
        let ann = call(&mut svc, "ann").await;
        assert_eq!(
            field(&ann, "ratelimit-policy"),
            r#""w";q=3;w=1"#,
            "{algorithm}"
        );
        assert_eq!(field(&ann, "x-ratelimit-limit"), "3", "{algorithm}");
        assert!(
            field(&ann, "ratelimit").starts_with(r#""w";r=1;t="#),
            "{algorithm}: {}",
            field(&ann, "ratelimit")
        );
        let cy = call(&mut svc, "cy").await;
        assert_eq!(
            field(&cy, "ratelimit-policy"),
            r#""w";q=3;w=1"#,
            "{algorithm}"
        );
    }
}

/// A log tier then a GCRA tier, all or nothing: a request the GCRA tier
/// refuses takes nothing from the log (its `remaining` stays, and the
/// cells it did not take are free later), every answer that of the core's
/// pair `(SlidingLog, Gcra)` checked together (`AllTiers::check_tiers`).
#[tokio::test]
async fn a_request_a_later_tier_refuses_takes_nothing_from_a_log_tier() {
    let text = format!(
        "{KEY}[[tiers]]\nname = \"log\"\nquota = \"5/s\"\nalgorithm = \"sliding_log\"\n\
         capacity = 64\n[[tiers]]\nname = \"g\"\nquota = \"1/s\"\ncapacity = 64\n"
    );
    let gcra_quota = spec("1/s").quota(HZ).unwrap();
    let infos = [
        LogQuota::new(5, 1_000).info("log"),
        TierInfo::from_quota("g", &gcra_quota),
    ];
    let clock = Arc::new(ManualClock::new(5_000));
    let layer = read(&text)
        .unwrap()
        .build(TestClock(clock.clone()), HZ)
        .unwrap();
    let mut svc = layer.layer(windows::ok_service());
    let mut pairs: HashMap<&str, (SlidingLog<LOG_SLOTS>, Gcra)> = HashMap::new();
    let mut send = async |wait: u64, client: &'static str| {
        clock.advance(wait);
        let now = clock.now();
        let (log, gcra) = pairs
            .entry(client)
            .or_insert_with(|| (SlidingLog::new(5, 1_000), Gcra::new(gcra_quota)));
        let expected = (&*log, &*gcra).check_tiers(now, 1);
        let got = call(&mut svc, client).await;
        let at = format!("{client} at {now}");
        let status = match expected.is_admitted() {
            true => StatusCode::OK,
            false => StatusCode::TOO_MANY_REQUESTS,
        };
        assert_eq!(got.status(), status, "{at}");
        assert_fields(&got, &expected_fields(&infos, expected.results()), &at);
        (got, log.peek(now).remaining())
    };
    let (first, _) = send(0, "ann").await;
    assert_eq!(first.status(), StatusCode::OK);
    for _ in 0..5 {
        let (refused, log_left) = send(100, "ann").await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(log_left, 4);
        let value = refused.headers()["ratelimit"].to_str().unwrap();
        assert!(value.starts_with(r#""log";r=4;t=1, "g";r=0;"#), "{value}");
    }
    // Had the refused requests taken cells at +100 … +500, the log would
    // have none left now.
    let (second, log_left) = send(500, "ann").await;
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(log_left, 4);
    assert_eq!(
        second.headers()["ratelimit"],
        r#""log";r=4;t=1, "g";r=0;t=1"#
    );
    let mut admitted = 0;
    for (wait, client) in schedule(50, 200) {
        admitted += (send(wait, client).await.0.status() == StatusCode::OK) as usize;
    }
    assert!(admitted > 20 && admitted < 180, "{admitted}");
}

/// A log tier's table holds `capacity` clients: with `when_full` at its
/// default (deny) a new client is refused while every held client still
/// has a cell in its log, told to retry when the first log is empty; once
/// a client's log has fully expired, a new client takes its place. With
/// `when_full = "admit"` the new client is admitted untracked.
#[tokio::test]
async fn a_log_tier_holds_its_capacity_of_clients() {
    let full = |when_full: &str| {
        read(&format!(
            "{KEY}{when_full}[[tiers]]\nname = \"w\"\nquota = \"5/10s\"\n\
             algorithm = \"sliding_log\"\ncapacity = 2\n"
        ))
        .unwrap()
    };
    let t0 = 5_000;
    let clock = Arc::new(ManualClock::new(t0));
    let layer = full("").build(TestClock(clock.clone()), HZ).unwrap();
    let mut svc = layer.layer(windows::ok_service());
    let mut at = async |t: u64, client: &str| {
        clock.set(t0 + t);
        call(&mut svc, client).await
    };
    assert_eq!(at(0, "ann").await.status(), StatusCode::OK);
    assert_eq!(at(3_000, "ann").await.status(), StatusCode::OK);
    assert_eq!(at(3_500, "bob").await.status(), StatusCode::OK);
    // Both owe: ann's log is empty at +13 000 (its newest cell, +3 000).
    let cy = at(4_000, "cy").await;
    assert_eq!(cy.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(cy.headers()["retry-after"], "9");
    // ann's first cell has expired, not its newest.
    let cy = at(10_000, "cy").await;
    assert_eq!(cy.status(), StatusCode::TOO_MANY_REQUESTS);
    let cy = at(13_000, "cy").await;
    assert_eq!(cy.status(), StatusCode::OK);
    assert_eq!(cy.headers()["x-ratelimit-remaining"], "4");
    // ann's place is taken; bob and cy owe.
    let ann = at(13_001, "ann").await;
    assert_eq!(ann.status(), StatusCode::TOO_MANY_REQUESTS);
    // bob's log is empty at +13 500: ann comes back as a new client.
    let ann = at(13_500, "ann").await;
    assert_eq!(ann.status(), StatusCode::OK);
    assert_eq!(ann.headers()["x-ratelimit-remaining"], "4");

    let clock = Arc::new(ManualClock::new(t0));
    let layer = full("when_full = \"admit\"\n")
        .build(TestClock(clock.clone()), HZ)
        .unwrap();
    let mut svc = layer.layer(windows::ok_service());
    assert_eq!(call(&mut svc, "ann").await.status(), StatusCode::OK);
    assert_eq!(call(&mut svc, "bob").await.status(), StatusCode::OK);
    // Untracked: more than a log's limit, all admitted.
    for _ in 0..7 {
        assert_eq!(call(&mut svc, "cy").await.status(), StatusCode::OK);
    }
    // The held clients keep their logs.
    for _ in 0..4 {
        assert_eq!(call(&mut svc, "ann").await.status(), StatusCode::OK);
    }
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// What is still refused, at its place: a burst on a log tier's quota or
/// on any override of a log or window tier (in the configuration and at
/// run time, the rules in force unchanged), and a change of a kept tier's
/// algorithm to or from the sliding log.
#[test]
fn log_tiers_and_overrides_refuse_at_their_place() {
    let build = |spec: &str| match one_tier(spec).build(ManualClock::new(0), HZ) {
        Ok(_) => "built".to_owned(),
        Err(e) => e.to_string(),
    };
    let burst = build("quota = \"3/s, burst 5\"\nalgorithm = \"sliding_log\"");
    assert!(
        burst.starts_with("tiers[0].quota: ") && burst.contains("burst"),
        "{burst}"
    );
    for algorithm in ["sliding_log", "fixed_window"] {
        let e = build(&format!(
            "quota = \"3/s\"\nalgorithm = \"{algorithm}\"\noverrides = {{ ann = \"9/s, burst 2\" }}"
        ));
        assert!(
            e.starts_with("tiers[0].overrides.ann: ") && e.contains("burst"),
            "{algorithm}: {e}"
        );
        let layer = one_tier(&format!("quota = \"3/s\"\nalgorithm = \"{algorithm}\""))
            .build(ManualClock::new(0), HZ)
            .unwrap();
        let reloader = layer.reloader();
        let before = reloader.config();
        let e = reloader
            .set_override("w", "ann", Some(spec("9/s, burst 2")))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("tiers[0].overrides.ann: ") && e.contains("burst"),
            "{algorithm}: {e}"
        );
        assert_eq!(reloader.config(), before, "{algorithm}");
    }
    let fixed = "tiers[0].algorithm: fixed while tier \"w\" lives";
    for (from, to) in [
        ("sliding_window", "sliding_log"),
        ("sliding_log", "fixed_window"),
    ] {
        let layer = one_tier(&format!("quota = \"3/s\"\nalgorithm = \"{from}\""))
            .build(ManualClock::new(0), HZ)
            .unwrap();
        let e = layer
            .reloader()
            .apply(&one_tier(&format!("quota = \"3/s\"\nalgorithm = \"{to}\"")))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(fixed), "{from} -> {to}: {e}");
    }
}
