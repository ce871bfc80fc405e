//! Integration tests against a real `redis-server` and a real 3-node Redis
//! Cluster. `scripts/stages/70-redis.sh` starts them and sets:
//!
//! * `CELLRATE_REDIS_URL`: a standalone server, `redis://127.0.0.1:PORT/`;
//! * `CELLRATE_REDIS_CLUSTER`: comma-separated node URLs of the cluster;
//! * `CELLRATE_REDIS_SERVER`: the `redis-server` binary, for the fault tests,
//!   which start, stop and restart a server of their own.
//!
//! The tests that need one of them are `#[ignore]`d with that reason, so
//! `cargo test --features redis` alone reports them as ignored, never as
//! passed; the stage runs them with `--include-ignored`, and there a test
//! whose variable is missing, or whose server does not answer, fails.
//! (Plain `cargo test` never builds this file: it needs `--features redis`.)

use std::collections::{BTreeMap, HashSet};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cellrate::{Gcra, Quota};
use cellrate_redis::lease::LeasedRedisGcra;
use cellrate_redis::{
    AsyncRedisGcra, FailurePolicy, Outcome, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Source,
    Target,
};

#[path = "support/redis_server.rs"]
mod redis_server;
use redis_server::Server;

#[path = "support/redis_env.rs"]
mod redis_env;
use redis_env::{cluster_nodes, env, standalone, unique};

fn limiter(url: &str, policy: RedisPolicy, failure: FailurePolicy) -> RedisGcra {
    RedisGcra::new(
        Target::standalone(url).unwrap(),
        policy,
        RedisConfig::new(failure).with_timeout(Duration::from_millis(500)),
    )
    .unwrap()
}

/// The outcomes of a batch in which no key is corrupt.
fn all_ok(
    batch: Result<Vec<Result<Outcome, cellrate_redis::Error>>, cellrate_redis::Error>,
) -> Vec<Outcome> {
    batch
        .expect("redis up")
        .into_iter()
        .map(|o| o.expect("no corrupt key"))
        .collect()
}

/// Replays `(server time, cost, outcome)` on a local GCRA with the same
/// quota, in server-time order, and checks every answer is the same.
fn assert_same_as_local(quota: Quota, mut log: Vec<(u64, u64, Outcome)>) -> usize {
    log.sort_by_key(|(t, _, _)| *t);
    let local = Gcra::new(quota);
    let mut admitted = 0;
    for (now, cost, outcome) in &log {
        let expected = local.check_n(*now, *cost);
        assert_eq!(
            outcome.tiers().results()[0],
            expected,
            "at server time {now}, cost {cost}"
        );
        admitted += usize::from(expected.is_ok());
    }
    admitted
}

/// [`assert_same_as_local`] for each client's log; each admitted at least
/// `least` requests.
fn assert_each_same_as_local(
    quota: Quota,
    logs: BTreeMap<&str, Vec<(u64, u64, Outcome)>>,
    least: usize,
) {
    for (client, log) in logs {
        let admitted = assert_same_as_local(quota, log);
        assert!(admitted >= least, "{client}: {admitted}");
    }
}

/// Makes the server forget every script (`SCRIPT FLUSH`): the next call
/// of each script is answered `NOSCRIPT`.
fn script_flush(url: &str) {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
}

/// Puts a log of cost-1 checks whose order within a script call is not
/// known (concurrent async checks, coalesced) in the order the call decided
/// them: by server time, then admissions before denials, and admissions by
/// decreasing `remaining` (each one leaves one cell fewer).
fn in_decision_order(mut log: Vec<(u64, u64, Outcome)>) -> Vec<(u64, u64, Outcome)> {
    assert!(log.iter().all(|(_, cost, _)| *cost == 1));
    log.sort_by_key(|(t, _, o)| {
        let first = &o.tiers().results()[0];
        let remaining = first.as_ref().map_or(0, |d| d.remaining());
        (*t, first.is_err(), std::cmp::Reverse(remaining))
    });
    log
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn script_decides_exactly_like_the_local_gcra() {
    let url = standalone();
    // 3 per 10 ms with bursts of 4: T = 3 333⅓ µs, kept exactly at 3
    // sub-ticks per µs (whole microseconds would round it to 3 334).
    let quota = Quota::per_duration(3, Duration::from_millis(10))
        .with_burst(4)
        .at_hz(1_000);
    let policy = RedisPolicy::single(unique("exact"), "t", quota).unwrap();
    let q = policy.tiers()[0].quota();
    assert_eq!(
        (q.scale(), q.emission_interval(), q.burst()),
        (3, 10_000, 4)
    );
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    let mut log = Vec::new();
    for i in 0..400u64 {
        let cost = [1, 1, 2, 0, 3, 1, 5][(i % 7) as usize];
        let o = rl.try_check_n("c", None, cost).unwrap();
        assert_eq!(o.source(), Source::Redis);
        if cost > 4 {
            assert!(
                o.server_time().is_none(),
                "a cost over the burst needs no round trip"
            );
            continue;
        }
        log.push((o.server_time().unwrap(), cost, o));
        if i % 50 == 0 {
            thread::sleep(Duration::from_millis(7));
        }
    }
    let admitted = assert_same_as_local(q, log);
    assert!(admitted > 10, "some admitted: {admitted}");
}

/// On a real server: a tier keeps the burst that was asked. For
/// quotas kept exactly and quotas whose `T` is rounded up: `b` cells at once
/// from full are admitted; every cost up to `b` is then either admitted or
/// limited (never "too large") with the exact `retry_after` of the GCRA
/// with the rounded `T′` (reference: rational arithmetic below); and every
/// admitted request conforms to the exact quota asked (time only goes
/// forward here: one client, sequential calls).
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn tiers_keep_the_burst_and_never_exceed_the_exact_quota() {
    let url = standalone();
    // (cells, period µs, burst).
    let cases: [(u64, u64, u64); 8] = [
        (3, 1_000_000, 3),
        (7, 60_000_000, 7),
        (9_999, 1_000_000, 1_000),
        (3, 10_000, 4),
        (10_007, 1_000_000, 13),
        (99_991, 1_000_000, 20),
        (50_021, 1_000_000, 7),
        (999_983, 100_000_000, 9),
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (cells, period_us, burst) in cases {
        let asked = Quota::per_duration(cells, Duration::from_micros(period_us))
            .with_burst(burst)
            .at_hz(1);
        let policy = RedisPolicy::single(unique("burst"), "t", asked).unwrap();
        let tier = policy.tiers()[0].clone();
        let (scale, interval) = (
            tier.quota().scale() as u128,
            tier.quota().emission_interval() as u128,
        );
        // T′ = interval/scale µs ≥ T = period/cells µs, within 1 %.
        assert!(interval * cells as u128 >= period_us as u128 * scale);
        assert!(
            100 * (interval * cells as u128 - period_us as u128 * scale)
                <= interval * cells as u128
        );
        assert_eq!(tier.quota().burst(), burst);
        let rl = limiter(&url, policy, FailurePolicy::Closed);
        let first = rl.try_check_n("c", None, burst).unwrap();
        assert!(
            first.tiers().is_admitted(),
            "{cells}/{period_us}µs b={burst}: {first:?}"
        );
        assert_eq!(first.tiers().results()[0].unwrap().remaining(), 0);
        let mut log = vec![(first.server_time().unwrap(), burst, first)];
        for i in 0..250 {
            let cost = 1 + next() % burst;
            let o = rl.try_check_n("c", None, cost).unwrap();
            log.push((o.server_time().unwrap(), cost, o));
            if i % 10 == 0 {
                thread::sleep(Duration::from_micros(next() % 2_000));
            }
        }
        // Reference 1, the rounded GCRA, in 1/scale µs: TAT′ and the span b·T′.
        // Reference 2, the exact GCRA asked, in 1/cells µs: T = period.
        let (mut tat_rounded, mut tat_exact) = (0u128, 0u128);
        let mut admitted = 0;
        for (now, cost, o) in &log {
            let (now, cost) = (*now as u128, *cost as u128);
            let base = tat_rounded.max(now * scale);
            let over = (base + cost * interval).checked_sub(now * scale + burst as u128 * interval);
            match (over, &o.tiers().results()[0]) {
                (None | Some(0), Ok(_)) => {
                    tat_rounded = base + cost * interval;
                    admitted += 1;
                    let base = tat_exact.max(now * cells as u128);
                    let need = base + cost * period_us as u128 - now * cells as u128;
                    assert!(
                        need <= burst as u128 * period_us as u128,
                        "{cells}/{period_us}µs: admitted beyond the exact quota at {now}"
                    );
                    tat_exact = base + cost * period_us as u128;
                }
                (Some(over), Err(cellrate::Denied::Limited(l))) if over > 0 => {
                    assert_eq!(l.retry_after() as u128, over.div_ceil(scale), "{cells}/{period_us}µs at {now}");
                }
                (over, r) => panic!("{cells}/{period_us}µs b={burst} cost {cost} at {now}: expected over {over:?}, got {r:?}"),
            }
        }
        if period_us / cells < 500 {
            assert!(admitted > 1, "{cells}/{period_us}µs refills: {admitted}");
        }
    }
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn key_expires_when_full_and_peek_writes_nothing() {
    let url = standalone();
    let prefix = unique("ttl");
    let policy = RedisPolicy::single(&*prefix, "t", Quota::per_second(4).at_hz(1_000)).unwrap();
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    let key = format!("{prefix}:{{c}}:t");
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let peek = rl.try_check_n("c", None, 0).unwrap();
    assert!(peek.tiers().is_admitted());
    let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut conn).unwrap();
    assert!(!exists, "a peek stores nothing");
    rl.try_check_n("c", None, 3).unwrap(); // 750 ms of debt
    let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
    assert!((700..=751).contains(&pttl), "PTTL {pttl}");
    let tat: String = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
    assert!(
        tat.bytes().all(|b| b.is_ascii_digit()),
        "stored as an integer: {tat}"
    );
    let peek = rl.try_check_n("c", None, 0).unwrap();
    assert_eq!(peek.tiers().results()[0].unwrap().remaining(), 1);
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn noscript_is_reloaded() {
    let url = standalone();
    let policy = RedisPolicy::single(unique("flush"), "t", Quota::per_second(10).at_hz(1)).unwrap();
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    rl.try_check_n("c", None, 1).unwrap();
    script_flush(&url);
    let o = rl.try_check_n("c", None, 1).unwrap();
    assert_eq!(o.tiers().results()[0].unwrap().remaining(), 8);
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_request_denied_by_one_tier_consumes_from_none() {
    let url = standalone();
    let policy = RedisPolicy::new(
        unique("tiers"),
        vec![
            RedisTier::new("burst", Quota::per_second(10).with_burst(3).at_hz(1_000)).unwrap(),
            RedisTier::new("day", Quota::per_day(5).at_hz(1_000)).unwrap(),
        ],
    )
    .unwrap();
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    for _ in 0..3 {
        assert!(rl.try_check_n("c", None, 1).unwrap().tiers().is_admitted());
    }
    // The burst tier denies; the day tier must not be charged.
    let o = rl.try_check_n("c", None, 1).unwrap();
    assert!(o.tiers().results()[0].is_err() && o.tiers().results()[1].is_ok());
    assert_eq!(o.tiers().results()[1].unwrap().remaining(), 2);
    let retry = o.tiers().denied().unwrap().retry_after().unwrap();
    assert!(retry > 90_000 && retry <= 100_000, "{retry} µs");
    thread::sleep(Duration::from_micros(retry + 260_000)); // all three cells back
    assert!(rl.try_check_n("c", None, 2).unwrap().tiers().is_admitted()); // day: 0 left
                                                                          // Now the day tier denies, and the burst tier keeps its room.
    let before = rl.try_check_n("c", None, 0).unwrap().tiers().results()[0]
        .unwrap()
        .remaining();
    let o = rl.try_check_n("c", None, 1).unwrap();
    assert!(o.tiers().results()[1].is_err());
    assert!(o.tiers().results()[0].unwrap().remaining() >= before);
    assert!(o.tiers().denied().unwrap().retry_after().unwrap() > 17_000_000_000);
    // T = 86 400 s / 5
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_pipelined_batch_decides_like_single_calls() {
    let url = standalone();
    let quota = Quota::per_second(100).with_burst(6).at_hz(1_000);
    let policy = RedisPolicy::single(unique("batch"), "t", quota).unwrap();
    let q = policy.tiers()[0].quota();
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    script_flush(&url);
    let clients = ["a", "b", "c"];
    let requests: Vec<(&str, Option<&str>, u64)> = (0..60)
        .map(|i| (clients[i % 3], None, [1, 2, 0, 7, 1][i % 5]))
        .collect();
    // The first batch also reloads the flushed script.
    let mut per_client: BTreeMap<&str, Vec<(u64, u64, Outcome)>> = BTreeMap::new();
    for _ in 0..3 {
        let outcomes = all_ok(rl.try_check_batch(&requests));
        assert_eq!(outcomes.len(), requests.len());
        for (&(client, _, cost), o) in requests.iter().zip(outcomes) {
            if cost > 6 {
                assert!(matches!(
                    o.tiers().results()[0],
                    Err(cellrate::Denied::CostTooLarge { cost: 7, limit: 6 })
                ));
                continue;
            }
            per_client
                .entry(client)
                .or_default()
                .push((o.server_time().unwrap(), cost, o));
        }
        thread::sleep(Duration::from_millis(15));
    }
    assert_each_same_as_local(q, per_client, 6);
}

/// A multi-tier, per-scope batch (repeated clients inside one script call,
/// costs 0 to 3) decides exactly like in-process limiters with the same
/// quotas: one `LocalGcra` per key, a request admitted only if every tier
/// admits, and then charged on every tier; a denied request reports the
/// untouched state of the tiers that would have admitted.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_multi_tier_batch_decides_like_local_limiters() {
    let url = standalone();
    let prefix = unique("mbatch");
    let policy = RedisPolicy::new(
        &*prefix,
        vec![
            RedisTier::new("client", Quota::per_second(200).with_burst(8).at_hz(1_000)).unwrap(),
            RedisTier::new(
                "endpoint",
                Quota::per_second(100).with_burst(3).at_hz(1_000),
            )
            .unwrap()
            .per_scope(),
        ],
    )
    .unwrap();
    let quotas: Vec<Quota> = policy.tiers().iter().map(|t| t.quota()).collect();
    let rl = limiter(&url, policy.clone(), FailurePolicy::Closed);
    let requests: Vec<(&str, Option<&str>, u64)> = (0..40)
        .map(|i| {
            (
                ["ann", "bob"][i % 2],
                Some(["/a", "/b", "/c"][i % 3]),
                [1, 0, 2, 1, 3][i % 5],
            )
        })
        .collect();
    let mut local: BTreeMap<String, cellrate::LocalGcra> = BTreeMap::new();
    let mut admitted = 0;
    let mut denied = 0;
    for round in 0..4 {
        let outcomes = all_ok(rl.try_check_batch(&requests));
        let now = outcomes[0].server_time().unwrap();
        for (&(client, scope, cost), o) in requests.iter().zip(&outcomes) {
            assert_eq!(o.server_time(), Some(now), "one call, one server time");
            let keys = policy.keys(client, scope).unwrap();
            let mut tried: Vec<cellrate::LocalGcra> = keys
                .iter()
                .zip(&quotas)
                .map(|(k, q)| {
                    local
                        .entry(k.clone())
                        .or_insert_with(|| cellrate::LocalGcra::new(*q))
                        .clone()
                })
                .collect();
            let answers: Vec<_> = tried.iter_mut().map(|g| g.check_n(now, cost)).collect();
            let all = answers.iter().all(Result::is_ok);
            let expected: Vec<_> = if all {
                for (k, g) in keys.iter().zip(tried) {
                    local.insert(k.clone(), g);
                }
                answers
            } else {
                answers
                    .into_iter()
                    .zip(&keys)
                    .map(|(a, k)| a.map(|_| local[k].peek(now).to_decision()))
                    .collect()
            };
            assert_eq!(
                o.tiers().results(),
                &expected[..],
                "round {round}: {client} {scope:?} cost {cost}"
            );
            if cost > 0 {
                if all {
                    admitted += 1;
                } else {
                    denied += 1;
                }
            }
        }
        thread::sleep(Duration::from_millis(12));
    }
    assert!(
        admitted > 10 && denied > 10,
        "{admitted} admitted, {denied} denied"
    );
}

/// More keys than one script call carries: the batch is split into calls
/// pipelined in one round trip, each reloaded after `SCRIPT FLUSH`, and the
/// answers still match one in-process GCRA per client, in order.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_batch_split_over_several_calls_reloads_and_keeps_order() {
    let url = standalone();
    let quota = Quota::per_second(1_000).with_burst(50).at_hz(1_000);
    let policy = RedisPolicy::single(unique("split"), "t", quota).unwrap();
    let q = policy.tiers()[0].quota();
    let rl = limiter(&url, policy, FailurePolicy::Closed);
    script_flush(&url);
    let n = 3 * cellrate_redis::MAX_KEYS_PER_CALL + 17;
    let requests: Vec<(&str, Option<&str>, u64)> = (0..n)
        .map(|i| (["x", "y", "z", "w"][i % 4], None, 1))
        .collect();
    let outcomes = all_ok(rl.try_check_batch(&requests));
    assert_eq!(outcomes.len(), n);
    let times: HashSet<u64> = outcomes.iter().map(|o| o.server_time().unwrap()).collect();
    assert!(times.len() >= 4, "4 calls: {times:?}");
    let mut per_client: BTreeMap<&str, Vec<(u64, u64, Outcome)>> = BTreeMap::new();
    for (&(client, _, cost), o) in requests.iter().zip(outcomes) {
        per_client
            .entry(client)
            .or_default()
            .push((o.server_time().unwrap(), cost, o));
    }
    assert_each_same_as_local(q, per_client, 50);
}

/// A key under the prefix that holds something that is not a TAT (another
/// type, or a string that is not one) fails the requests that use it, and
/// those alone, with `Error::CorruptKey` naming it; they write nothing, the
/// key is left as it was, and the other requests of the same call are
/// decided and charged normally. The same in the single-request script,
/// through the failure policy (which does not apply) and when leasing.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_foreign_key_fails_its_requests_alone_and_is_left_untouched() {
    let url = standalone();
    let prefix = unique("foreign");
    let policy = RedisPolicy::new(
        &*prefix,
        vec![
            RedisTier::new("a", Quota::per_second(10).at_hz(1_000)).unwrap(),
            RedisTier::new("b", Quota::per_second(10).at_hz(1_000)).unwrap(),
        ],
    )
    .unwrap();
    let rl = limiter(&url, policy.clone(), FailurePolicy::Closed);
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let fresh = policy.keys("fresh", None).unwrap();
    let hash = policy.keys("hash", None).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&hash[1])
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    // Strings that are no TAT: text, negative, fractional, not finite, a
    // fraction not below its scale, an empty string.
    let texts = ["hello", "-5", "1.5", "nan", "inf", "12+3/3", ""];
    let mut clients = vec!["fresh", "hash"];
    let text_clients: Vec<String> = (0..texts.len()).map(|i| format!("text{i}")).collect();
    for (c, v) in text_clients.iter().zip(texts) {
        let key = &policy.keys(c, None).unwrap()[0];
        let _: () = redis::cmd("SET").arg(key).arg(v).query(&mut conn).unwrap();
        clients.push(c);
    }
    clients.push("fresh");
    let requests: Vec<(&str, Option<&str>, u64)> = clients.iter().map(|c| (*c, None, 1)).collect();
    let outcomes = rl
        .try_check_batch(&requests)
        .expect("the call itself succeeds");
    assert_eq!(outcomes.len(), requests.len());
    for ((client, _, _), o) in requests.iter().zip(&outcomes) {
        match *client {
            "fresh" => assert!(o.as_ref().unwrap().tiers().is_admitted(), "{o:?}"),
            "hash" => assert!(
                matches!(o, Err(cellrate_redis::Error::CorruptKey(k)) if *k == hash[1]),
                "{o:?}"
            ),
            c => {
                let key = policy.keys(c, None).unwrap()[0].clone();
                assert!(
                    matches!(o, Err(cellrate_redis::Error::CorruptKey(k)) if *k == key),
                    "{c}: {o:?}"
                );
            }
        }
    }
    // Both "fresh" requests were charged (8 of 10 left), on both tiers.
    let peek = rl.try_check_n("fresh", None, 0).unwrap();
    assert_eq!(peek.tiers().results()[0].unwrap().remaining(), 8);
    assert_eq!(peek.tiers().results()[1].unwrap().remaining(), 8);
    let exists: u64 = redis::cmd("EXISTS").arg(&fresh).query(&mut conn).unwrap();
    assert_eq!(exists, 2);
    // Nothing written for the bad requests, and the bad keys untouched.
    let exists: u64 = redis::cmd("EXISTS").arg(&hash[0]).query(&mut conn).unwrap();
    assert_eq!(exists, 0, "the bad request's other tier is not charged");
    let kind: String = redis::cmd("TYPE").arg(&hash[1]).query(&mut conn).unwrap();
    assert_eq!(kind, "hash");
    for (c, v) in text_clients.iter().zip(texts) {
        let keys = policy.keys(c, None).unwrap();
        let value: String = redis::cmd("GET").arg(&keys[0]).query(&mut conn).unwrap();
        assert_eq!(value, v);
        let exists: u64 = redis::cmd("EXISTS").arg(&keys[1]).query(&mut conn).unwrap();
        assert_eq!(exists, 0);
    }
    // One request alone, with the failure policy: the same distinct error.
    for client in ["hash", "text0"] {
        let e = rl.check_n(client, None, 1).unwrap_err();
        assert!(matches!(e, cellrate_redis::Error::CorruptKey(_)), "{e}");
        assert!(e.to_string().contains("key holds no TAT"), "{e}");
    }
    // The single-request script (a one-tier policy) and the lease script.
    let single = RedisPolicy::single(&*prefix, "a", Quota::per_second(10).at_hz(1_000)).unwrap();
    let one = limiter(&url, single.clone(), FailurePolicy::Open);
    let e = one.check_n("text0", None, 1).unwrap_err();
    assert!(
        matches!(e, cellrate_redis::Error::CorruptKey(k) if k == single.keys("text0", None).unwrap()[0])
    );
    let _: () = redis::cmd("HSET")
        .arg(&single.keys("hash", None).unwrap()[0])
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    assert!(matches!(
        one.check_n("hash", None, 1),
        Err(cellrate_redis::Error::CorruptKey(_))
    ));
    assert!(one.check_n("fresh", None, 1).unwrap().tiers().is_admitted());
    let leased = LeasedRedisGcra::new(
        limiter(&url, single, FailurePolicy::Open),
        5,
        Duration::from_secs(10),
    );
    for client in ["hash", "text1"] {
        assert!(matches!(
            leased.check(client),
            Err(cellrate_redis::Error::CorruptKey(_))
        ));
    }
    assert_eq!(leased.check("other").unwrap().source(), Source::Redis);
    assert_eq!(leased.check("other").unwrap().source(), Source::Lease);
}

/// One client's key poisoned (a hash where a TAT belongs) among
/// twenty clients checking concurrently through the coalescing async
/// client, under each failure policy. The poisoned client gets
/// `CorruptKey` on every check; every other client's decisions are exactly
/// those of a healthy run: all decided by Redis, and identical, answer by
/// answer, to one in-process GCRA per client replaying them in the order
/// the script decided them.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_poisoned_key_among_coalesced_clients_harms_no_other_client() {
    let url = standalone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let policies = [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Fallback(vec![Quota::per_hour(1_000).at_hz(1_000)]),
    ];
    for failure in policies {
        let quota = Quota::per_hour(5).at_hz(1_000);
        let policy = RedisPolicy::single(unique("poison"), "t", quota).unwrap();
        let q = policy.tiers()[0].quota();
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg(&policy.keys("c0", None).unwrap()[0])
            .arg("f")
            .arg("v")
            .query(&mut conn)
            .unwrap();
        let rl = Arc::new(
            AsyncRedisGcra::new(
                Target::standalone(&url).unwrap(),
                policy,
                RedisConfig::new(failure.clone()).with_timeout(Duration::from_secs(2)),
            )
            .unwrap(),
        );
        let logs = rt.block_on(async {
            let tasks: Vec<_> = (0..20)
                .flat_map(|c| (0..4).map(move |t| (c, t)))
                .map(|(c, _)| {
                    let rl = rl.clone();
                    tokio::spawn(async move {
                        let client = format!("c{c}");
                        let mut log = Vec::new();
                        for _ in 0..8 {
                            log.push((c, rl.check_n(&client, None, 1).await));
                            tokio::task::yield_now().await;
                        }
                        log
                    })
                })
                .collect();
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        });
        let mut per_client: BTreeMap<usize, Vec<(u64, u64, Outcome)>> = BTreeMap::new();
        let mut coalesced = 0;
        for (c, answer) in logs {
            if c == 0 {
                assert!(
                    matches!(&answer, Err(cellrate_redis::Error::CorruptKey(_))),
                    "{failure:?}: the poisoned client: {answer:?}"
                );
                continue;
            }
            let o = answer.unwrap_or_else(|e| panic!("{failure:?}: client c{c}: {e}"));
            assert_eq!(o.source(), Source::Redis, "{failure:?}: client c{c}: {o:?}");
            per_client
                .entry(c)
                .or_default()
                .push((o.server_time().unwrap(), 1, o));
        }
        for (c, log) in per_client {
            coalesced += log.len();
            let admitted = assert_same_as_local(q, in_decision_order(log));
            assert_eq!(admitted, 5, "{failure:?}: c{c} admitted its burst, no more");
        }
        assert_eq!(coalesced, 19 * 32);
    }
}

/// Two "API servers" (two limiters, two connections), four threads each,
/// hammer the same three keys. Every decision reports the server time it
/// used; replayed in that order on one in-process GCRA with the same quota,
/// every single answer is the same, so the totals are equal. Requests that
/// share a server microsecond replay in either order with the same count
/// (all costs are 1), which is the only tolerance needed: none in counts.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn fleet_admits_what_one_gcra_admits() {
    let url = standalone();
    let quota = Quota::per_second(500).with_burst(25).at_hz(1_000_000);
    let prefix = unique("fleet");
    let servers: Vec<Arc<RedisGcra>> = (0..2)
        .map(|_| {
            let policy = RedisPolicy::single(&*prefix, "api", quota).unwrap();
            Arc::new(limiter(&url, policy, FailurePolicy::Closed))
        })
        .collect();
    let q = servers[0].policy().tiers()[0].quota();
    let deadline = Instant::now() + Duration::from_millis(1_500);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let server = servers[i % 2].clone();
            thread::spawn(move || {
                let mut log = Vec::new();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let key = ["k0", "k1", "k2"][(n % 3) as usize];
                    n += 1;
                    let o = server.try_check_n(key, None, 1).expect("redis up");
                    log.push((key, o.server_time().unwrap(), o));
                }
                log
            })
        })
        .collect();
    let mut per_key: BTreeMap<&str, Vec<(u64, u64, Outcome)>> = BTreeMap::new();
    for h in handles {
        for (key, t, o) in h.join().unwrap() {
            per_key.entry(key).or_default().push((t, 1, o));
        }
    }
    for (key, log) in per_key {
        let (first, last) = (
            log.iter().map(|e| e.0).min().unwrap(),
            log.iter().map(|e| e.0).max().unwrap(),
        );
        let asked = log.len();
        let redis_admitted = log.iter().filter(|e| e.2.tiers().is_admitted()).count();
        let local_admitted = assert_same_as_local(q, log);
        assert_eq!(redis_admitted, local_admitted, "{key}");
        // And the closed form: burst + elapsed / T, at most.
        let ideal = 25 + ((last - first) / q.emission_interval()) as usize;
        assert!(redis_admitted <= ideal, "{key}: {redis_admitted} > {ideal}");
        assert!(
            asked > redis_admitted,
            "{key}: the keys were really contended"
        );
        eprintln!("{key}: {asked} asked, {redis_admitted} admitted, ideal bound {ideal}");
    }
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn async_client_matches_the_blocking_one() {
    let url = standalone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let quota = Quota::per_second(50).with_burst(5).at_hz(1_000);
        let policy = RedisPolicy::single(unique("async"), "t", quota).unwrap();
        let q = policy.tiers()[0].quota();
        let rl = Arc::new(
            AsyncRedisGcra::new(
                Target::standalone(&url).unwrap(),
                policy,
                RedisConfig::new(FailurePolicy::Closed),
            )
            .unwrap(),
        );
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let rl = rl.clone();
                tokio::spawn(async move {
                    let mut log = Vec::new();
                    for _ in 0..50 {
                        let o = rl.try_check_n("c", None, 1).await.unwrap();
                        log.push((o.server_time().unwrap(), 1, o));
                    }
                    log
                })
            })
            .collect();
        let mut log = Vec::new();
        for t in tasks {
            log.extend(t.await.unwrap());
        }
        let admitted = assert_same_as_local(q, in_decision_order(log));
        assert!(admitted >= 5);
    });
}

/// Concurrent async checks share script calls (several requests decided at
/// one server time), and the decisions are still exactly those of one
/// in-process GCRA per client taking the requests in that order.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn concurrent_async_checks_coalesce_and_decide_like_local_limiters() {
    let url = standalone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let quota = Quota::per_hour(40).with_burst(40).at_hz(1_000);
        let policy = RedisPolicy::single(unique("coalesce"), "t", quota).unwrap();
        let q = policy.tiers()[0].quota();
        let rl = Arc::new(
            AsyncRedisGcra::new(
                Target::standalone(&url).unwrap(),
                policy,
                RedisConfig::new(FailurePolicy::Closed),
            )
            .unwrap(),
        );
        let tasks: Vec<_> = (0..300)
            .map(|i| {
                let rl = rl.clone();
                let client = ["a", "b", "c"][i % 3];
                tokio::spawn(async move {
                    let o = rl.try_check_n(client, None, 1).await.unwrap();
                    (client, o)
                })
            })
            .collect();
        let mut per_client: BTreeMap<&str, Vec<(u64, u64, Outcome)>> = BTreeMap::new();
        let mut times = HashSet::new();
        for t in tasks {
            let (client, o) = t.await.unwrap();
            assert_eq!(o.source(), Source::Redis);
            let at = o.server_time().unwrap();
            times.insert(at);
            per_client.entry(client).or_default().push((at, 1, o));
        }
        assert!(
            times.len() < 300,
            "300 concurrent checks took {} script calls: nothing was coalesced",
            times.len()
        );
        for (client, log) in per_client {
            assert_eq!(log.len(), 100);
            // 100 checks against a burst of 40 per hour: exactly 40 pass.
            assert_eq!(
                assert_same_as_local(q, in_decision_order(log)),
                40,
                "{client}"
            );
        }
    });
}

// ---------------------------------------------------------------- cluster

fn node_of(nodes: &[String], key: &str) -> String {
    // Ask any node which slot the key is in and which node serves it.
    let client = redis::Client::open(nodes[0].as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut conn)
        .unwrap();
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).unwrap();
    for range in slots {
        let redis::Value::Array(parts) = range else {
            continue;
        };
        let lo: i64 = redis::from_redis_value(parts[0].clone()).unwrap();
        let hi: i64 = redis::from_redis_value(parts[1].clone()).unwrap();
        if (lo..=hi).contains(&slot) {
            let redis::Value::Array(master) = &parts[2] else {
                panic!("slots reply")
            };
            let port: i64 = redis::from_redis_value(master[1].clone()).unwrap();
            return format!("port {port}");
        }
    }
    panic!("slot {slot} unserved")
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn cluster_spreads_clients_and_keeps_a_clients_tiers_together() {
    let nodes = cluster_nodes();
    let prefix = unique("cl");
    let policy = RedisPolicy::new(
        &*prefix,
        vec![
            RedisTier::new("burst", Quota::per_second(1).with_burst(3).at_hz(1_000)).unwrap(),
            RedisTier::new("endpoint", Quota::per_minute(2).at_hz(1_000))
                .unwrap()
                .per_scope(),
        ],
    )
    .unwrap();
    let rl = RedisGcra::new(
        Target::cluster(&nodes).unwrap(),
        policy.clone(),
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(1)),
    )
    .unwrap();
    let mut used = HashSet::new();
    for c in 0..12 {
        let client = format!("client{c}");
        let keys = policy.keys(&client, Some("/x")).unwrap();
        let node = node_of(&nodes, &keys[0]);
        assert_eq!(
            node,
            node_of(&nodes, &keys[1]),
            "one client's tiers share a node"
        );
        used.insert(node);
        // Two per minute on /x, then denied by the endpoint tier only.
        assert!(rl
            .try_check_n(&client, Some("/x"), 1)
            .unwrap()
            .tiers()
            .is_admitted());
        assert!(rl
            .try_check_n(&client, Some("/x"), 1)
            .unwrap()
            .tiers()
            .is_admitted());
        let o = rl.try_check_n(&client, Some("/x"), 1).unwrap();
        assert!(
            o.tiers().results()[0].is_ok() && o.tiers().results()[1].is_err(),
            "{o:?}"
        );
        // Another endpoint has its own budget; the burst tier is shared: 1 left.
        assert!(rl
            .try_check_n(&client, Some("/y"), 1)
            .unwrap()
            .tiers()
            .is_admitted());
        let o = rl.try_check_n(&client, Some("/y"), 1).unwrap();
        assert!(o.tiers().results()[0].is_err(), "burst of 3 used: {o:?}");
    }
    assert_eq!(
        used.len(),
        3,
        "12 clients land on all three nodes: {used:?}"
    );

    // A batch over clients spread on every node: one call per request,
    // pipelined, each decided on its own node like a single check.
    let clients: Vec<String> = (0..12).map(|c| format!("batch{c}")).collect();
    let batch: Vec<(&str, Option<&str>, u64)> = clients
        .iter()
        .map(|c| (c.as_str(), Some("/x"), 1))
        .collect();
    for round in 0..3 {
        for o in all_ok(rl.try_check_batch(&batch)) {
            // Two per minute on /x: the third round is denied by that tier.
            assert_eq!(o.tiers().is_admitted(), round < 2, "round {round}: {o:?}");
            assert!(
                o.tiers().results()[0].is_ok(),
                "the burst tier admits: {o:?}"
            );
        }
    }

    // A client limited per endpoint as separate clients ("alice|/a") has
    // its keys on different nodes; each is decided on its own node.
    let single = RedisPolicy::single(unique("ep"), "t", Quota::per_second(1).at_hz(1)).unwrap();
    let per_ep = RedisGcra::new(
        Target::cluster(&nodes).unwrap(),
        single.clone(),
        RedisConfig::new(FailurePolicy::Closed),
    )
    .unwrap();
    let mut ep_nodes = HashSet::new();
    for ep in ["/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"] {
        let client = format!("alice|{ep}");
        ep_nodes.insert(node_of(&nodes, &single.keys(&client, None).unwrap()[0]));
        assert!(per_ep
            .try_check_n(&client, None, 1)
            .unwrap()
            .tiers()
            .is_admitted());
        assert!(!per_ep
            .try_check_n(&client, None, 1)
            .unwrap()
            .tiers()
            .is_admitted());
    }
    assert!(
        ep_nodes.len() >= 2,
        "alice's endpoint keys span nodes: {ep_nodes:?}"
    );

    // The async cluster client sees the same state.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let arl = AsyncRedisGcra::new(
            Target::cluster(&nodes).unwrap(),
            single,
            RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(1)),
        )
        .unwrap();
        let o = arl.try_check_n("alice|/a", None, 1).await.unwrap();
        assert!(!o.tiers().is_admitted(), "{o:?}");
        assert!(arl
            .try_check_n("bob|/a", None, 1)
            .await
            .unwrap()
            .tiers()
            .is_admitted());
    });
}

/// On a Cluster each request is its own call: a poisoned key fails its own
/// requests (`CorruptKey`), the other clients of the same batch, on every
/// node, are decided normally, by the blocking and the async client.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_poisoned_key_on_a_cluster_fails_its_checks_alone() {
    let nodes = cluster_nodes();
    let policy =
        RedisPolicy::single(unique("clpoison"), "t", Quota::per_minute(2).at_hz(1_000)).unwrap();
    let bad = policy.keys("bad", None).unwrap()[0].clone();
    let writer = redis::cluster::ClusterClient::new(nodes.clone()).unwrap();
    let mut conn = writer.get_connection().unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&bad)
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let rl = RedisGcra::new(
        Target::cluster(&nodes).unwrap(),
        policy.clone(),
        RedisConfig::new(FailurePolicy::Open).with_timeout(Duration::from_secs(1)),
    )
    .unwrap();
    let clients: Vec<String> = (0..9).map(|c| format!("ok{c}")).collect();
    let mut batch: Vec<(&str, Option<&str>, u64)> =
        clients.iter().map(|c| (c.as_str(), None, 1)).collect();
    batch.insert(4, ("bad", None, 1));
    let spread: HashSet<String> = clients
        .iter()
        .map(|c| node_of(&nodes, &policy.keys(c, None).unwrap()[0]))
        .collect();
    assert!(spread.len() >= 2, "clients on several nodes: {spread:?}");
    for round in 0..3 {
        let outcomes = rl.try_check_batch(&batch).expect("the cluster answers");
        for (&(client, _, _), o) in batch.iter().zip(outcomes) {
            if client == "bad" {
                assert!(
                    matches!(&o, Err(cellrate_redis::Error::CorruptKey(k)) if *k == bad),
                    "{o:?}"
                );
            } else {
                let o = o.unwrap();
                assert_eq!(o.source(), Source::Redis);
                assert_eq!(
                    o.tiers().is_admitted(),
                    round < 2,
                    "{client} round {round}: {o:?}"
                );
            }
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let arl = AsyncRedisGcra::new(
            Target::cluster(&nodes).unwrap(),
            policy,
            RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(1)),
        )
        .unwrap();
        assert!(matches!(
            arl.check_n("bad", None, 1).await,
            Err(cellrate_redis::Error::CorruptKey(_))
        ));
        let o = arl.check_n("ok0", None, 1).await.unwrap();
        assert_eq!(
            (o.source(), o.tiers().is_admitted()),
            (Source::Redis, false)
        );
        let o = arl.check_n("fresh", None, 1).await.unwrap();
        assert_eq!((o.source(), o.tiers().is_admitted()), (Source::Redis, true));
    });
}

// ---------------------------------------------------------------- faults

fn fault_run(server: &mut Server, failure: FailurePolicy, expect: Source) {
    let policy =
        RedisPolicy::single(unique("fault"), "t", Quota::per_second(5).at_hz(1_000)).unwrap();
    let rl = RedisGcra::new(
        Target::standalone(&server.url()).unwrap(),
        policy.clone(),
        RedisConfig::new(failure.clone())
            .with_timeout(Duration::from_millis(100))
            .with_reconnect_interval(Duration::from_millis(50)),
    )
    .unwrap();
    let arl = AsyncRedisGcra::new(
        Target::standalone(&server.url()).unwrap(),
        policy,
        RedisConfig::new(failure)
            .with_timeout(Duration::from_millis(100))
            .with_reconnect_interval(Duration::from_millis(50)),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rl.check("c").unwrap().source(), Source::Redis);
    assert_eq!(
        rt.block_on(arl.check_n("c", None, 1)).unwrap().source(),
        Source::Redis
    );

    server.stop();
    let mut seen = Vec::new();
    let down = Instant::now();
    for _ in 0..10 {
        let start = Instant::now();
        let o = rl.check("c").unwrap();
        let a = rt.block_on(arl.check_n("c", None, 1)).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "bounded by the timeout"
        );
        seen.push((o.source(), o.tiers().is_admitted()));
        seen.push((a.source(), a.tiers().is_admitted()));
    }
    for (source, admitted) in &seen {
        assert_eq!(*source, expect, "{seen:?}");
        match expect {
            Source::FailOpen => assert!(admitted),
            Source::FailClosed => assert!(!admitted),
            _ => {}
        }
    }
    if expect == Source::Fallback {
        // Local quota 3/s, burst 3, per limiter: each admits its burst of 3,
        // plus one per 333 ms if the loop was slow.
        let admitted = seen.iter().filter(|s| s.1).count() as u128;
        let refill = down.elapsed().as_millis() / 333;
        assert!(admitted >= 6 && admitted <= 2 * (3 + refill), "{seen:?}");
    }

    server.restart();
    let start = Instant::now();
    loop {
        let o = rl.check("c").unwrap();
        let a = rt.block_on(arl.check_n("c", None, 1)).unwrap();
        if o.source() == Source::Redis && a.source() == Source::Redis {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "decisions resume");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn each_failure_policy_behaves_and_decisions_resume() {
    let bin = env("CELLRATE_REDIS_SERVER");
    let mut server = Server::start(&bin);
    fault_run(&mut server, FailurePolicy::Open, Source::FailOpen);
    fault_run(&mut server, FailurePolicy::Closed, Source::FailClosed);
    fault_run(
        &mut server,
        FailurePolicy::Fallback(vec![Quota::per_second(3).at_hz(1_000)]),
        Source::Fallback,
    );
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_server_stopped_mid_run_under_load() {
    let bin = env("CELLRATE_REDIS_SERVER");
    let mut server = Server::start(&bin);
    let policy =
        RedisPolicy::single(unique("load"), "t", Quota::per_second(1_000).at_hz(1_000)).unwrap();
    let rl = Arc::new(
        RedisGcra::new(
            Target::standalone(&server.url()).unwrap(),
            policy,
            RedisConfig::new(FailurePolicy::Fallback(vec![
                Quota::per_second(100).at_hz(1_000)
            ]))
            .with_timeout(Duration::from_millis(100))
            .with_reconnect_interval(Duration::from_millis(30)),
        )
        .unwrap(),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (rl, stop) = (rl.clone(), stop.clone());
            thread::spawn(move || {
                let mut sources = BTreeMap::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let o = rl.check("hot").unwrap();
                    *sources.entry(format!("{:?}", o.source())).or_insert(0u64) += 1;
                }
                sources
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    server.stop();
    thread::sleep(Duration::from_millis(300));
    server.restart();
    thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = BTreeMap::new();
    for w in workers {
        for (k, v) in w.join().expect("no worker panicked") {
            *total.entry(k).or_insert(0) += v;
        }
    }
    eprintln!("sources under a mid-run stop: {total:?}");
    assert!(total.get("Redis").copied().unwrap_or(0) > 0);
    assert!(total.get("Fallback").copied().unwrap_or(0) > 0);
    assert_eq!(rl.check("hot").unwrap().source(), Source::Redis, "resumed");
}

/// While Redis is down, a flood of new clients must not make the
/// fallback forget an abusive client. Redis here is a loopback port nobody
/// listens on, so every check is decided by the fallback, whose table holds
/// 256 clients; 20 000 new clients pass through it, and the abuser, who
/// owes a day of debt, is still denied at the end, with its retry_after.
#[test]
fn a_flood_of_new_clients_during_an_outage_never_frees_an_abuser() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // bound, then closed: nothing listens there.
    let policy =
        RedisPolicy::single(unique("flood"), "t", Quota::per_day(10).at_hz(1_000)).unwrap();
    for when_full in [
        cellrate::keyed::WhenFull::Admit,
        cellrate::keyed::WhenFull::Deny,
        cellrate::keyed::WhenFull::Shared,
    ] {
        let rl = RedisGcra::new(
            Target::standalone(&format!("redis://127.0.0.1:{port}/")).unwrap(),
            policy.clone(),
            RedisConfig::new(FailurePolicy::Fallback(
                vec![Quota::per_day(3).at_hz(1_000)],
            ))
            .with_timeout(Duration::from_millis(50))
            .with_reconnect_interval(Duration::from_secs(60))
            .with_fallback_capacity(256)
            .with_fallback_when_full(when_full),
        )
        .unwrap();
        for _ in 0..3 {
            let o = rl.check("abuser").unwrap();
            assert_eq!(
                (o.source(), o.tiers().is_admitted()),
                (Source::Fallback, true)
            );
        }
        let o = rl.check("abuser").unwrap();
        assert!(!o.tiers().is_admitted(), "{when_full:?}: {o:?}");
        let mut newcomers = 0;
        for i in 0..20_000 {
            let o = rl.check(&format!("new{i}")).unwrap();
            assert_eq!(o.source(), Source::Fallback);
            newcomers += usize::from(o.tiers().is_admitted());
        }
        let o = rl.check("abuser").unwrap();
        assert_eq!(o.source(), Source::Fallback);
        assert!(
            !o.tiers().is_admitted(),
            "{when_full:?}: the abuser was forgotten: {o:?}"
        );
        let wait = o.tiers().denied().unwrap().retry_after().unwrap();
        assert!(
            wait > 7 * 3_600 * 1_000_000,
            "{when_full:?}: still owes ~8 h: {wait} µs"
        );
        eprintln!(
            "fallback under a flood, {when_full:?}: {newcomers} of 20 000 new clients admitted"
        );
    }
}

/// Timeouts are deadlines. The server is frozen (SIGSTOP): every
/// call, blocking or async, connect and reconnect included, returns within
/// its timeout plus a small slack, with `Error::Timeout` (or, while reconnects
/// are held back, `Error::Backoff` at once). Only the calls already in
/// flight when the server froze and one caller per reconnect interval pay
/// the timeout. Async checks queued behind a stuck batch keep their own
/// deadline. After SIGCONT decisions resume.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_stalled_server_costs_each_call_at_most_its_timeout() {
    let bin = env("CELLRATE_REDIS_SERVER");
    use cellrate_redis::Error;
    let timeout = Duration::from_millis(200);
    // What a call may take beyond its timeout: waking up, setting socket
    // timeouts, scheduling on a loaded machine.
    let slack = Duration::from_millis(60);
    let interval = Duration::from_millis(300);
    let server = Server::start(&bin);
    let policy =
        RedisPolicy::single(unique("stall"), "t", Quota::per_second(1_000).at_hz(1_000)).unwrap();
    let config = RedisConfig::new(FailurePolicy::Closed)
        .with_timeout(timeout)
        .with_reconnect_interval(interval);
    let rl = Arc::new(
        RedisGcra::new(
            Target::standalone(&server.url()).unwrap(),
            policy.clone(),
            config.clone(),
        )
        .unwrap(),
    );
    let arl = Arc::new(
        AsyncRedisGcra::new(Target::standalone(&server.url()).unwrap(), policy, config).unwrap(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    assert!(rl.try_check_n("c", None, 1).unwrap().tiers().is_admitted());
    assert!(rt
        .block_on(arl.try_check_n("c", None, 1))
        .unwrap()
        .tiers()
        .is_admitted());

    server.pause();
    let frozen = Instant::now();
    let run_for = Duration::from_millis(1_200);
    // Blocking: four threads calling back to back.
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let rl = rl.clone();
            thread::spawn(move || {
                let mut calls = Vec::new();
                while frozen.elapsed() < run_for {
                    let start = Instant::now();
                    let r = rl.try_check_n(&format!("b{i}"), None, 1);
                    calls.push((start - frozen, start.elapsed(), r.map(|o| o.source())));
                    thread::sleep(Duration::from_millis(1));
                }
                calls
            })
        })
        .collect();
    // Async: one check stuck in a batch, then waves of checks queued behind
    // it, each with its own deadline.
    let async_calls = rt.block_on(async {
        let mut tasks = Vec::new();
        while frozen.elapsed() < run_for {
            for c in 0..8 {
                let arl = arl.clone();
                tasks.push(tokio::spawn(async move {
                    let start = Instant::now();
                    let r = arl.try_check_n(&format!("a{c}"), None, 1).await;
                    (start - frozen, start.elapsed(), r.map(|o| o.source()))
                }));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut calls = Vec::new();
        for t in tasks {
            calls.push(t.await.unwrap());
        }
        calls
    });
    let blocking_calls: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let elapsed = frozen.elapsed();
    // Leasing: a renewal on the frozen server answers by the failure
    // policy within the same deadline.
    let leased = LeasedRedisGcra::new(
        RedisGcra::new(
            Target::standalone(&server.url()).unwrap(),
            RedisPolicy::single(
                unique("stall-lease"),
                "t",
                Quota::per_second(10).at_hz(1_000),
            )
            .unwrap(),
            RedisConfig::new(FailurePolicy::Closed).with_timeout(timeout),
        )
        .unwrap(),
        5,
        Duration::from_secs(10),
    );
    let start = Instant::now();
    let o = leased.check("l").unwrap();
    assert!(
        start.elapsed() <= timeout + slack,
        "lease: {:?}",
        start.elapsed()
    );
    assert_eq!(o.source(), Source::FailClosed);
    for (label, calls) in [("blocking", &blocking_calls), ("async", &async_calls)] {
        let mut paid = 0;
        for (_, took, r) in calls.iter() {
            assert!(
                *took <= timeout + slack,
                "{label}: a call took {took:?} (timeout {timeout:?}): {r:?}"
            );
            match r {
                Err(Error::Timeout) => paid += 1,
                // Held back at once; an async check may first have waited
                // behind a batch stuck on the frozen server.
                Err(Error::Backoff) => {
                    assert!(label == "async" || *took < timeout / 2, "{label}: {took:?}")
                }
                other => panic!("{label}: the frozen server answered? {other:?}"),
            }
        }
        // Calls that started before the client could know (before the
        // first timeout ended: those in flight when it froze and those
        // queued behind them), then one probe per interval. Counted from
        // the calls' own timeline, so a slow machine that starts more calls
        // before the first deadline does not break the bound.
        let noticed = calls
            .iter()
            .filter(|c| matches!(c.2, Err(Error::Timeout)))
            .map(|c| c.0 + c.1)
            .min()
            .expect("a call paid the timeout");
        let in_flight = calls.iter().filter(|c| c.0 < noticed).count();
        let probes = (elapsed.as_millis() / interval.as_millis()) as usize + 1;
        eprintln!(
            "{label}: {} calls while frozen, {in_flight} before the first timeout, \
             {paid} paid the timeout (bound {}), worst {:?}",
            calls.len(),
            in_flight + probes,
            calls.iter().map(|c| c.1).max().unwrap()
        );
        assert!(
            paid <= in_flight + probes,
            "{label}: {paid} calls paid the timeout"
        );
    }
    let (blocking_paid, async_paid) = (
        blocking_calls
            .iter()
            .filter(|c| matches!(c.2, Err(Error::Timeout)))
            .count(),
        async_calls
            .iter()
            .filter(|c| matches!(c.2, Err(Error::Timeout)))
            .count(),
    );
    assert!(
        blocking_paid >= 1 && async_paid >= 1,
        "the freeze was noticed"
    );

    server.resume();
    let start = Instant::now();
    loop {
        let b = rl.try_check_n("c", None, 1);
        let a = rt.block_on(arl.try_check_n("c", None, 1));
        if b.is_ok() && a.is_ok() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "decisions resume");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The same deadlines on a Cluster (a one-node Cluster of the test's own,
/// frozen with SIGSTOP): every blocking and async call returns within its
/// timeout plus the slack, with `Timeout` or `Backoff`; after SIGCONT
/// decisions resume.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_stalled_cluster_costs_each_call_at_most_its_timeout() {
    let bin = env("CELLRATE_REDIS_SERVER");
    use cellrate_redis::Error;
    let (timeout, slack) = (Duration::from_millis(200), Duration::from_millis(60));
    let node = Server::start_cluster(&bin);
    let policy =
        RedisPolicy::single(unique("cstall"), "t", Quota::per_second(1_000).at_hz(1_000)).unwrap();
    let config = RedisConfig::new(FailurePolicy::Closed)
        .with_timeout(timeout)
        .with_reconnect_interval(Duration::from_millis(300));
    let rl = RedisGcra::new(
        Target::cluster([node.url()]).unwrap(),
        policy.clone(),
        config.clone(),
    )
    .unwrap();
    let arl = AsyncRedisGcra::new(Target::cluster([node.url()]).unwrap(), policy, config).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert!(rl.try_check_n("c", None, 1).unwrap().tiers().is_admitted());
    assert!(rt
        .block_on(arl.try_check_n("c", None, 1))
        .unwrap()
        .tiers()
        .is_admitted());
    node.pause();
    let frozen = Instant::now();
    let mut calls = Vec::new();
    while frozen.elapsed() < Duration::from_millis(1_000) {
        let start = Instant::now();
        let b = rl.try_check_n("c", None, 1);
        calls.push(("blocking", start.elapsed(), b.map(|o| o.source())));
        let start = Instant::now();
        let a = rt.block_on(arl.try_check_n("c", None, 1));
        calls.push(("async", start.elapsed(), a.map(|o| o.source())));
        thread::sleep(Duration::from_millis(10));
    }
    let worst = calls.iter().map(|c| c.1).max().unwrap();
    eprintln!("cluster frozen: {} calls, worst {worst:?}", calls.len());
    for (label, took, r) in &calls {
        assert!(*took <= timeout + slack, "{label}: {took:?}: {r:?}");
        assert!(
            matches!(r, Err(Error::Timeout | Error::Backoff)),
            "{label}: {r:?}"
        );
    }
    assert!(calls.iter().any(|c| matches!(c.2, Err(Error::Timeout))));
    node.resume();
    let start = Instant::now();
    loop {
        let b = rl.try_check_n("c", None, 1);
        let a = rt.block_on(arl.try_check_n("c", None, 1));
        if b.is_ok() && a.is_ok() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "decisions resume: {b:?} {a:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- leasing

struct LeaseRun {
    asked: u64,
    admitted: u64,
    trips: u64,
    elapsed_us: u64,
}

/// Four threads over two leasing servers, `pause` between requests.
fn lease_run(url: &str, k: u64, pause: Duration) -> (LeaseRun, Quota) {
    let quota = Quota::per_second(2_000).with_burst(20).at_hz(1_000);
    let prefix = unique("lease");
    let servers: Vec<Arc<LeasedRedisGcra>> = (0..2)
        .map(|_| {
            let policy = RedisPolicy::single(&*prefix, "hot", quota).unwrap();
            Arc::new(LeasedRedisGcra::new(
                limiter(url, policy, FailurePolicy::Closed),
                k,
                Duration::from_millis(50),
            ))
        })
        .collect();
    let q = servers[0].inner().policy().tiers()[0].quota();
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let mut server_now = || -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
        s * 1_000_000 + us
    };
    let t0 = server_now();
    let deadline = Instant::now() + Duration::from_millis(600);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let s = servers[i % 2].clone();
            thread::spawn(move || {
                let (mut asked, mut admitted) = (0u64, 0u64);
                while Instant::now() < deadline {
                    asked += 1;
                    admitted += u64::from(s.check("hot").unwrap().tiers().is_admitted());
                    if !pause.is_zero() {
                        thread::sleep(pause);
                    }
                }
                (asked, admitted)
            })
        })
        .collect();
    let mut run = LeaseRun {
        asked: 0,
        admitted: 0,
        trips: 0,
        elapsed_us: 0,
    };
    for h in handles {
        let (a, b) = h.join().unwrap();
        run.asked += a;
        run.admitted += b;
    }
    run.elapsed_us = server_now() - t0;
    run.trips = servers.iter().map(|s| s.round_trips()).sum();
    let returned: u64 = servers.iter().map(|s| s.return_all()).sum();
    assert!(
        returned <= 2 * k,
        "at most one lease per server is outstanding"
    );
    (run, q)
}

/// Two leasing servers share one hot client. What they admit stays within
/// the documented bound `b + ⌊Δ/T⌋ + n·k` (n = 2 servers, k = lease size),
/// both when hammered and at half the rate; at half the rate the round
/// trips drop to about one per `k` requests.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn lease_bound_and_round_trips_saved() {
    let url = standalone();
    let k = 10;
    for (label, pause) in [
        ("hammer", Duration::ZERO),
        ("half rate", Duration::from_micros(4_000)),
    ] {
        let (run, q) = lease_run(&url, k, pause);
        let ideal = 20 + run.elapsed_us / q.emission_interval();
        let bound = ideal + 2 * k;
        eprintln!(
            "lease {label}: {} asked, {} admitted (ideal GCRA {ideal}, bound {bound}), {} round trips = {:.3} per request",
            run.asked, run.admitted, run.trips, run.trips as f64 / run.asked as f64
        );
        assert!(run.admitted <= bound, "{label}: {} > {bound}", run.admitted);
        if pause.is_zero() {
            assert!(run.asked > run.admitted, "hammered beyond the limit");
            assert!(
                run.trips * 2 <= run.asked,
                "{label}: denials are remembered"
            );
            assert!(run.admitted * 10 >= ideal * 8, "{label}: not starved");
        } else {
            assert_eq!(run.admitted, run.asked, "below the rate, all admitted");
            assert!(
                run.trips * 5 <= run.asked,
                "{label}: leasing saves round trips"
            );
        }
    }
}

/// Leasing holds no lock shared by all clients across a round
/// trip. With the server frozen (SIGSTOP) while client "b" renews its lease,
/// client "a", which holds a live lease, is answered from it, every time,
/// before b's round trip gives up.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_stalled_renewal_never_blocks_a_client_with_a_live_lease() {
    let bin = env("CELLRATE_REDIS_SERVER");
    let server = Server::start(&bin);
    let policy = RedisPolicy::single(
        unique("lstall"),
        "t",
        Quota::per_second(1_000).with_burst(100).at_hz(1_000),
    )
    .unwrap();
    let inner = RedisGcra::new(
        Target::standalone(&server.url()).unwrap(),
        policy,
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let leased = Arc::new(LeasedRedisGcra::new(inner, 50, Duration::from_secs(60)));
    assert_eq!(leased.check("a").unwrap().source(), Source::Redis);
    // b takes a lease of 50 cells and spends them, so its next check must
    // renew on the server.
    let b_leased = leased.check("b").unwrap();
    assert_eq!(b_leased.source(), Source::Redis);
    for _ in 0..49 {
        assert_eq!(leased.check("b").unwrap().source(), Source::Lease);
    }
    server.pause();
    let b_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b_started = Arc::new(std::sync::Barrier::new(2));
    let renewal = {
        let (leased, b_done, b_started) = (leased.clone(), b_done.clone(), b_started.clone());
        thread::spawn(move || {
            b_started.wait();
            let o = leased.check("b");
            b_done.store(true, std::sync::atomic::Ordering::SeqCst);
            o
        })
    };
    b_started.wait();
    // Let b's renewal reach the frozen server (it waits there up to 2 s).
    thread::sleep(Duration::from_millis(100));
    for i in 0..40 {
        let o = leased.check("a").unwrap();
        assert_eq!(o.source(), Source::Lease, "check {i} of a: {o:?}");
        assert!(
            !b_done.load(std::sync::atomic::Ordering::SeqCst),
            "check {i} of a waited for b's round trip"
        );
    }
    server.resume();
    let b = renewal.join().unwrap().unwrap();
    assert_ne!(
        b.source(),
        Source::Lease,
        "b's check needed the server: {b:?}"
    );
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_returned_lease_is_usable_by_another_server() {
    let url = standalone();
    let prefix = unique("ret");
    let quota = Quota::per_hour(10).at_hz(1_000);
    let mk = || {
        LeasedRedisGcra::new(
            limiter(
                &url,
                RedisPolicy::single(&*prefix, "t", quota).unwrap(),
                FailurePolicy::Closed,
            ),
            6,
            Duration::from_secs(60),
        )
    };
    let (a, b) = (mk(), mk());
    assert!(a.check("c").unwrap().tiers().is_admitted()); // a leases 6, spends 1
    for _ in 0..4 {
        assert!(b.check("c").unwrap().tiers().is_admitted()); // b leases the other 4
    }
    let o = b.check("c").unwrap();
    assert!(!o.tiers().is_admitted(), "all 10 are leased: {o:?}");
    assert_eq!(a.return_all(), 5);
    let o = b.check("c").unwrap();
    assert!(!o.tiers().is_admitted(), "b remembers the server's denial");
    assert_eq!(o.source(), Source::Lease);
    let mut c = mk();
    assert!(
        c.check("c").unwrap().tiers().is_admitted(),
        "a's returned cells are on the server"
    );
    for _ in 0..4 {
        assert!(c.check("c").unwrap().tiers().is_admitted());
    }
    assert!(
        !c.check("c").unwrap().tiers().is_admitted(),
        "exactly 5 came back"
    );
    c = mk();
    assert!(!c.check("c").unwrap().tiers().is_admitted());
}

/// The lease script decides by the same GCRA as the other scripts: every
/// renewal (old lease given back, then up to `k` cells over two tiers of
/// different scales) and every denial equals a replay on local [`Gcra`]s
/// at the server's time. The model follows the client's lease: cells left
/// are given back at the next renewal (a lease that outlived its lifetime),
/// a denial leaves none.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn the_lease_script_decides_like_the_local_gcra() {
    let url = standalone();
    let prefix = unique("lgcra");
    let policy = RedisPolicy::new(
        &*prefix,
        vec![
            // T = 3 333⅓ µs, kept at 3 sub-ticks per µs; T = 1 400 µs.
            RedisTier::new(
                "a",
                Quota::per_duration(3, Duration::from_millis(10))
                    .with_burst(4)
                    .at_hz(1_000),
            )
            .unwrap(),
            RedisTier::new(
                "b",
                Quota::per_duration(5, Duration::from_millis(7))
                    .with_burst(6)
                    .at_hz(1_000),
            )
            .unwrap(),
        ],
    )
    .unwrap();
    let quotas: Vec<Quota> = policy.tiers().iter().map(|t| t.quota()).collect();
    assert_eq!(quotas[0].scale(), 3);
    let k = 3;
    let leased = LeasedRedisGcra::new(
        limiter(&url, policy, FailurePolicy::Closed),
        k,
        Duration::from_millis(2),
    );
    let local: Vec<Gcra> = quotas.iter().map(|q| Gcra::new(*q)).collect();
    let mut left = 0u64;
    let (mut full, mut partial, mut denied, mut refunds) = (0, 0, 0, 0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..400 {
        let o = leased.check("c").unwrap();
        match o.source() {
            Source::Lease if o.tiers().is_admitted() => left -= 1,
            Source::Lease => {}
            Source::Redis => {
                let now = o.server_time().unwrap();
                if left > 0 {
                    refunds += 1;
                    for g in &local {
                        g.refund_n(now, left);
                    }
                }
                let fits = local.iter().map(|g| g.peek(now).remaining()).min();
                let grant = fits.unwrap().min(k);
                let expected: Vec<_> = local
                    .iter()
                    .map(|g| match grant {
                        0 if g.peek(now).remaining() > 0 => Ok(g.peek(now).to_decision()),
                        0 => g.check_n(now, 1),
                        _ => g.check_n(now, grant),
                    })
                    .collect();
                assert_eq!(o.tiers().results(), &expected[..], "renewal {i} at {now}");
                match grant {
                    0 => denied += 1,
                    g if g < k => partial += 1,
                    _ => full += 1,
                }
                left = grant.saturating_sub(1);
            }
            other => panic!("{other:?}"),
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        thread::sleep(Duration::from_micros(seed % 3_000));
    }
    eprintln!(
        "lease script: {full} full, {partial} partial, {denied} denied, {refunds} given back"
    );
    assert!(
        full > 0 && partial > 0 && denied > 0 && refunds > 0,
        "every path taken: {full} full, {partial} partial, {denied} denied, {refunds} given back"
    );
}

/// The lease table is bounded: with room for 4 clients, 10 clients with
/// live leases leave 4 leased and decide the 6 others on Redis, one round
/// trip per check, with the same answers a leasing server would give them
/// in cells (all admitted, the budget shared on the server). Once the
/// leases have expired, new clients take their places.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn the_lease_table_keeps_at_most_its_clients() {
    let url = standalone();
    let prefix = unique("lcap");
    let policy = RedisPolicy::single(&*prefix, "t", Quota::per_second(100).at_hz(1_000)).unwrap();
    let lifetime = Duration::from_millis(400);
    let leased = LeasedRedisGcra::new(limiter(&url, policy, FailurePolicy::Closed), 5, lifetime)
        .with_max_clients(4);
    let clients: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let start = Instant::now();
    for c in &clients {
        assert_eq!(leased.check(c).unwrap().source(), Source::Redis, "{c}");
    }
    assert_eq!(leased.clients(), 4);
    let trips = leased.round_trips();
    for c in &clients {
        let o = leased.check(c).unwrap();
        assert!(o.tiers().is_admitted(), "{c}: {o:?}");
        let leased_one = clients[..4].contains(c);
        let expect = if leased_one {
            Source::Lease
        } else {
            Source::Redis
        };
        assert_eq!(o.source(), expect, "{c}");
    }
    assert!(
        start.elapsed() < lifetime,
        "too slow a machine for this test"
    );
    assert_eq!(leased.round_trips() - trips, 6, "one per unleased check");
    assert_eq!(leased.clients(), 4);
    thread::sleep(lifetime);
    // Every lease has expired: a new client takes a place, and its next
    // check is spent from its lease.
    assert_eq!(leased.check("new").unwrap().source(), Source::Redis);
    assert_eq!(leased.check("new").unwrap().source(), Source::Lease);
    assert!(leased.clients() <= 4);
}
