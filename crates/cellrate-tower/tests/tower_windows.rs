//! Window tiers in process (`tiers[i].algorithm` = `fixed_window`,
//! `sliding_window`, `bucketed_window`): a layer built from TOML decides
//! each request exactly as the core's window limiter fed the same requests,
//! and announces that answer; a reload that changes a window tier keeps
//! each client's cells used (the core's `Algorithm::translate` at the
//! instant); what a window tier in process refuses (a burst, a change of
//! algorithm while the tier lives).
#![cfg(feature = "serde")]

use std::collections::HashMap;
use std::sync::Arc;

use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Clock, Limiter, ManualClock, RateLimiter};
use http::{Request, StatusCode};
use tower::{Layer, Service, ServiceExt};

#[path = "support/windows.rs"]
mod windows;
use windows::{
    assert_answer, call, drive, ok_service, one_tier, read, schedule, Reference, Rules, TestClock,
    HZ, KEY,
};

/// Each window tier from TOML answers every request as the core's limiter
/// of the tier's limiter configuration does, fields included.
#[tokio::test]
async fn window_tiers_in_process_decide_as_the_core() {
    async fn case<Q: Rules>(spec: &str, quota: Q, seed: u64) {
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = one_tier(spec).build(TestClock(clock.clone()), HZ).unwrap();
        let mut svc = layer.layer(ok_service());
        let mut reference = Reference::new(quota);
        let (admitted, refused) =
            drive(&mut svc, &clock, &mut reference, &schedule(seed, 400), spec).await;
        // The run reaches the limit and passes it.
        assert!(
            admitted > 20 && refused > 20,
            "{spec}: {admitted} {refused}"
        );
    }
    case(
        "quota = \"5/s\"\nalgorithm = \"fixed_window\"",
        FixedWindowQuota::new(5, 1_000),
        1,
    )
    .await;
    case(
        "quota = \"6/s\"\nalgorithm = \"bucketed_window\"\nbuckets = 4",
        BucketedWindowQuota::new(6, 1_000, 4),
        2,
    )
    .await;
    case(
        "quota = \"4/s\"\nalgorithm = \"sliding_window\"",
        SlidingWindowQuota::new(4, 1_000),
        3,
    )
    .await;
    // A window of a minute counts ticks of the minute.
    case(
        "quota = \"20/min\"\nalgorithm = \"fixed_window\"",
        FixedWindowQuota::new(20, 60_000),
        4,
    )
    .await;
}

/// A reload that changes a window tier keeps each client's cells used: at
/// the instant of the reload a client may take exactly the new limit less
/// the cells it has used (the core's limiter reconfigured at that instant,
/// `Limiter::set_quota`, agrees), and every later answer is the core's.
#[tokio::test]
async fn a_reload_of_a_window_tier_keeps_the_cells_used() {
    async fn case<Q: Rules>(old: (&str, Q), new: (&str, Q), new_limit: u64, seed: u64) {
        let clock = Arc::new(ManualClock::new(5_000));
        let layer = one_tier(old.0).build(TestClock(clock.clone()), HZ).unwrap();
        let reloader = layer.reloader();
        let mut svc = layer.layer(ok_service());
        let mut reference = Reference::new(old.1);
        let what = format!("{} -> {}", old.0, new.0);
        drive(&mut svc, &clock, &mut reference, &schedule(seed, 60), &what).await;
        // "ann" spends all but one of the old limit's cells, then the rules
        // change at the same instant.
        clock.advance(1);
        let now = clock.now();
        while reference.client("ann").peek(now).remaining() > 1 {
            let expected = reference.check("ann", now);
            assert_answer(&call(&mut svc, "ann").await, &expected, &what);
        }
        let s = reference.client("ann").peek(now);
        let used = s.limit() - s.remaining();
        reloader.apply(&one_tier(new.0)).unwrap();
        reference.set_quota(now, new.1);
        // Exactly what the new limit leaves after the cells used.
        let mut admitted = 0;
        loop {
            let expected = reference.check("ann", now);
            let got = call(&mut svc, "ann").await;
            assert_answer(&got, &expected, &format!("{what}: after the reload"));
            if got.status() != StatusCode::OK {
                break;
            }
            admitted += 1;
        }
        assert_eq!(admitted, new_limit - used, "{what}");
        drive(
            &mut svc,
            &clock,
            &mut reference,
            &schedule(seed + 1, 200),
            &what,
        )
        .await;
    }
    case(
        (
            "quota = \"5/s\"\nalgorithm = \"fixed_window\"",
            FixedWindowQuota::new(5, 1_000),
        ),
        (
            "quota = \"9/s\"\nalgorithm = \"fixed_window\"",
            FixedWindowQuota::new(9, 1_000),
        ),
        9,
        10,
    )
    .await;
    // A longer window and another bucket size: the cells of `now`'s window
    // are counted in the new grid's current bucket.
    case(
        (
            "quota = \"6/s\"\nalgorithm = \"bucketed_window\"\nbuckets = 4",
            BucketedWindowQuota::new(6, 1_000, 4),
        ),
        (
            "quota = \"20/2s\"\nalgorithm = \"bucketed_window\"\nbuckets = 5",
            BucketedWindowQuota::new(20, 2_000, 5),
        ),
        20,
        20,
    )
    .await;
    case(
        (
            "quota = \"4/s\"\nalgorithm = \"sliding_window\"",
            SlidingWindowQuota::new(4, 1_000),
        ),
        (
            "quota = \"7/s\"\nalgorithm = \"sliding_window\"",
            SlidingWindowQuota::new(7, 1_000),
        ),
        7,
        30,
    )
    .await;
}

/// A lower keeps the cells used too: a client that used more than the new
/// limit is refused until its window passes, as the core's limiter is.
#[tokio::test]
async fn a_lower_of_a_window_tier_refuses_what_the_cells_used_fill() {
    let clock = Arc::new(ManualClock::new(5_000));
    let old = "quota = \"8/s\"\nalgorithm = \"fixed_window\"";
    let layer = one_tier(old).build(TestClock(clock.clone()), HZ).unwrap();
    let reloader = layer.reloader();
    let mut svc = layer.layer(ok_service());
    let mut reference = Reference::new(FixedWindowQuota::new(8, 1_000));
    clock.advance(100);
    let now = clock.now();
    for _ in 0..4 {
        let expected = reference.check("ann", now);
        assert_answer(&call(&mut svc, "ann").await, &expected, "before");
    }
    reloader
        .apply(&one_tier("quota = \"3/s\"\nalgorithm = \"fixed_window\""))
        .unwrap();
    reference.set_quota(now, FixedWindowQuota::new(3, 1_000));
    let expected = reference.check("ann", now);
    assert!(expected.is_err());
    assert_answer(&call(&mut svc, "ann").await, &expected, "after");
    drive(
        &mut svc,
        &clock,
        &mut reference,
        &schedule(40, 200),
        "lowered",
    )
    .await;
}

/// What a window tier in process refuses, each at its place; the sliding
/// log and overrides build.
#[test]
fn window_tiers_refuse_at_their_place() {
    let build = |spec: &str| match one_tier(spec).build(ManualClock::new(0), HZ) {
        Ok(_) => "built".to_owned(),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        build("quota = \"3/s\"\nalgorithm = \"sliding_log\""),
        "built"
    );
    assert_eq!(
        build("quota = \"3/s\"\nalgorithm = \"fixed_window\"\noverrides = { ann = \"9/s\" }"),
        "built"
    );
    assert_eq!(
        build(
            "quota = \"3/s\"\nalgorithm = \"fixed_window\"\noverrides = { ann = \"9/s, burst 3\" }"
        ),
        "tiers[0].overrides.ann: a fixed_window tier admits its rate's count per period: \
         it takes no burst"
    );
    // The limiter configuration's own checks, at the quota.
    let buckets = build("quota = \"3/s\"\nalgorithm = \"bucketed_window\"\nbuckets = 7");
    assert!(
        buckets.starts_with("tiers[0].quota: invalid window limiter"),
        "{buckets}"
    );
}

/// A kept tier's algorithm is fixed while it lives (its table keeps every
/// client's state): a change of window, or between windows and the GCRA
/// family, is refused with the place and the way out (a new name); within
/// the GCRA family it is a change of quota.
#[test]
fn a_kept_tier_keeps_its_kind_of_table() {
    let layer = one_tier("quota = \"3/s\"\nalgorithm = \"fixed_window\"")
        .build(ManualClock::new(0), HZ)
        .unwrap();
    let reloader = layer.reloader();
    let fixed = "tiers[0].algorithm: fixed while tier \"w\" lives (its table keeps every \
                 client's state): give the tier a new name to make a new table";
    for other in [
        "quota = \"3/s\"\nalgorithm = \"sliding_window\"",
        "quota = \"3/s\"\nalgorithm = \"bucketed_window\"\nbuckets = 4",
        "quota = \"3/s\"",
    ] {
        let e = reloader.apply(&one_tier(other)).unwrap_err();
        assert_eq!(e.to_string(), fixed, "{other}");
    }
    reloader
        .apply(&one_tier("quota = \"4/s\"\nalgorithm = \"fixed_window\""))
        .unwrap();
    // A new name makes a new table of any algorithm.
    let renamed = read(&format!(
        "{KEY}[[tiers]]\nname = \"w2\"\ncapacity = 64\nquota = \"3/s\"\nalgorithm = \"sliding_window\""
    ))
    .unwrap();
    reloader.apply(&renamed).unwrap();
    // GCRA to the token bucket: one family, one table.
    let gcra = one_tier("quota = \"3/s\"")
        .build(ManualClock::new(0), HZ)
        .unwrap();
    gcra.reloader()
        .apply(&one_tier("quota = \"3/s\"\nalgorithm = \"token_bucket\""))
        .unwrap();
}

/// An override set at run time on a window tier is in the rules at once,
/// and its removal takes it out.
#[test]
fn a_run_time_override_of_a_window_tier_is_set() {
    let layer = one_tier("quota = \"3/s\"\nalgorithm = \"fixed_window\"")
        .build(ManualClock::new(0), HZ)
        .unwrap();
    let reloader = layer.reloader();
    reloader
        .set_override("w", "ann", Some("9/s".parse().unwrap()))
        .unwrap();
    assert_eq!(
        reloader.config().tiers[0].overrides["ann"].to_string(),
        "9/s"
    );
    reloader.set_override("w", "ann", None).unwrap();
    assert!(reloader.config().tiers[0].overrides.is_empty());
}

/// A `client_and_endpoint` window tier keeps a window per (client,
/// endpoint), each answered as the core's limiter of that pair.
#[tokio::test]
async fn a_window_tier_per_client_and_endpoint() {
    let text = "key = { client = { header = \"x-api-key\" }, endpoint = \"route\" }\n\
                [[tiers]]\nname = \"w\"\ncapacity = 64\nquota = \"2/s\"\n\
                algorithm = \"fixed_window\"\nscope = \"client_and_endpoint\"";
    let clock = Arc::new(ManualClock::new(5_000));
    let layer = read(text)
        .unwrap()
        .build(TestClock(clock.clone()), HZ)
        .unwrap();
    let mut svc = layer.layer(ok_service());
    let quota = FixedWindowQuota::new(2, 1_000);
    let mut pairs: HashMap<(&str, &str), Limiter<FixedWindowQuota>> = HashMap::new();
    let mut statuses = String::new();
    for (wait, client, route) in [
        (0, "ann", "/a"),
        (0, "ann", "/a"),
        (0, "ann", "/a"),
        (10, "ann", "/b"),
        (0, "ann", "/b"),
        (0, "ann", "/b"),
        (0, "bob", "/a"),
        (990, "ann", "/a"),
    ] {
        clock.advance(wait);
        let now = clock.now();
        let expected = pairs
            .entry((client, route))
            .or_insert_with(|| Limiter::with_quota(quota))
            .check(now);
        let mut req = Request::builder()
            .header("x-api-key", client)
            .body(String::new())
            .unwrap();
        req.extensions_mut()
            .insert(cellrate_tower::RouteName(route));
        let got = svc.ready().await.unwrap().call(req).await.unwrap();
        assert_answer(&got, &expected, &format!("{client} {route} at {now}"));
        statuses.push(if got.status() == StatusCode::OK {
            'A'
        } else {
            'D'
        });
    }
    assert_eq!(statuses, "AADAADAA");
}
