//! Every algorithm on Redis, against a real `redis-server` and a real
//! 3-node Cluster (`scripts/stages/70-redis.sh` starts both and sets
//! `CELLRATE_REDIS_URL` and `CELLRATE_REDIS_CLUSTER`, as for
//! `tests/redis.rs`).
//!
//! The tests that need a server are `#[ignore]`d with that reason, so
//! `cargo test --features redis` alone reports them as ignored, never as
//! passed; the stage runs them with `--include-ignored`, and there a test
//! whose variable is missing, or whose server does not answer, fails.
//!
//! For each algorithm the Redis limiter and the in-process limiter built
//! from the tier's [`TierAlgorithm`] are driven with the same requests at
//! the same clock (the server's time of each decision) and must give the
//! same outcome, `limit`, `remaining`, `reset_after` and `retry_after`.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::window::SlidingLog;
use cellrate::{Denied, Gcra, Limiter, Quota, RateLimiter};
use cellrate_redis::{
    Error, FailurePolicy, Outcome, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Source, Target,
    TierAlgorithm,
};

#[path = "support/answers.rs"]
mod answers;
#[path = "support/redis_env.rs"]
mod redis_env;
use answers::{rng, seen};
use redis_env::{cluster_nodes, standalone, unique};

fn on(target: Target, policy: RedisPolicy) -> RedisGcra {
    RedisGcra::new(
        target,
        policy,
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_millis(500)),
    )
    .unwrap()
}

/// The in-process limiter that runs `tier`'s algorithm with its
/// parameters on the server's µs clock.
fn local(tier: &RedisTier) -> Box<dyn RateLimiter> {
    match tier.algorithm() {
        TierAlgorithm::Gcra => Box::new(Gcra::new(tier.quota())),
        TierAlgorithm::FixedWindow(q) => Box::new(Limiter::with_quota(q)),
        TierAlgorithm::SlidingWindow(q) => Box::new(Limiter::with_quota(q)),
        TierAlgorithm::BucketedWindow(q) => Box::new(Limiter::with_quota(q)),
        TierAlgorithm::SlidingLog { limit, window } => {
            Box::new(SlidingLog::<64>::new(limit, window))
        }
        other => panic!("no local limiter for {other:?}"),
    }
}

/// A tier of `kind` named after it: `limit` per `window_ms` ms (the
/// bucketed window in `buckets` buckets), on a 1 kHz clock.
fn tier(kind: AlgorithmKind, limit: u64, window_ms: u64, buckets: u32) -> RedisTier {
    let mut c = LimiterConfig::new(kind, limit, window_ms, 1_000);
    if kind == AlgorithmKind::BucketedWindow {
        c = c.with_buckets(buckets);
    }
    RedisTier::from_config(kind.as_str(), &c).unwrap()
}

/// The window tiers the property tests run, with small windows so that the
/// requests of a test cross many of them.
fn window_tiers() -> Vec<RedisTier> {
    vec![
        tier(AlgorithmKind::FixedWindow, 5, 20, 0),
        tier(AlgorithmKind::SlidingWindow, 6, 24, 0),
        tier(AlgorithmKind::BucketedWindow, 7, 24, 6),
        tier(AlgorithmKind::SlidingLog, 5, 18, 0),
    ]
}

/// Drives one client of a one-tier policy on `target` with `n` requests
/// of random costs (0 to limit + 1) and random pauses, then replays them on
/// the in-process limiter at the server's times: every answer must be the
/// same. Returns how many were admitted.
fn same_as_in_process(target: Target, tier: RedisTier, seed: u64, n: usize) -> usize {
    let limit = tier.limit();
    let policy = RedisPolicy::new(unique("alg"), vec![tier.clone()]).unwrap();
    let rl = on(target, policy);
    let mut next = rng(seed);
    let mut log: Vec<(u64, u64, Outcome)> = Vec::new();
    for _ in 0..n {
        let cost = next() % (limit + 2);
        let o = rl.try_check_n("c", None, cost).unwrap();
        assert_eq!(o.source(), Source::Redis);
        if cost > limit {
            assert!(matches!(
                o.tiers().results()[0],
                Err(Denied::CostTooLarge { .. })
            ));
            continue;
        }
        log.push((o.server_time().expect("decided on Redis"), cost, o));
        if next().is_multiple_of(3) {
            thread::sleep(Duration::from_micros(next() % 6_000));
        }
    }
    let reference = local(&tier);
    let mut admitted = 0;
    let mut last = 0;
    for (now, cost, o) in &log {
        assert!(*now >= last, "server time went back");
        last = *now;
        let expected = reference.check_n(*now, *cost);
        assert_eq!(
            seen(&o.tiers().results()[0]),
            seen(&expected),
            "{}: cost {cost} at server time {now}",
            tier.name()
        );
        admitted += usize::from(expected.is_ok() && *cost > 0);
    }
    admitted
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn every_algorithm_decides_like_in_process_on_a_standalone_server() {
    let url = standalone();
    for tier in window_tiers() {
        for seed in [0x9e37_79b9_7f4a_7c15u64, 0x2545_f491_4f6c_dd1d] {
            let target = Target::standalone(&url).unwrap();
            let admitted = same_as_in_process(target, tier.clone(), seed, 300);
            assert!(admitted > 20, "{}: {admitted} admitted", tier.name());
        }
    }
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn every_algorithm_decides_like_in_process_on_a_cluster() {
    let nodes = cluster_nodes();
    for tier in window_tiers() {
        let target = Target::cluster(&nodes).unwrap();
        let admitted = same_as_in_process(target, tier.clone(), 0x51_7cc1_b727_220a, 200);
        assert!(admitted > 10, "{}: {admitted} admitted", tier.name());
    }
}

/// A batch repeats clients within one script call (each later request sees
/// the earlier ones' charges) and decides like the in-process limiter fed
/// the same requests in order at the call's time.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_batch_decides_like_in_process_in_order() {
    let url = standalone();
    for tier in window_tiers() {
        let limit = tier.limit();
        let policy = RedisPolicy::new(unique("algbatch"), vec![tier.clone()]).unwrap();
        let rl = on(Target::standalone(&url).unwrap(), policy);
        let clients = ["a", "b", "c"];
        let requests: Vec<(&str, Option<&str>, u64)> = (0..30)
            .map(|i| (clients[i % 3], None, [1, 2, 0, 1, 3][i % 5].min(limit)))
            .collect();
        let references: Vec<Box<dyn RateLimiter>> = clients.iter().map(|_| local(&tier)).collect();
        for _ in 0..6 {
            let outcomes = rl.try_check_batch(&requests).unwrap();
            for (i, (&(_, _, cost), o)) in requests.iter().zip(outcomes).enumerate() {
                let o = o.unwrap();
                let now = o.server_time().unwrap();
                let expected = references[i % 3].check_n(now, cost);
                assert_eq!(
                    seen(&o.tiers().results()[0]),
                    seen(&expected),
                    "{} #{i}",
                    tier.name()
                );
            }
            thread::sleep(Duration::from_millis(7));
        }
    }
}

/// Tiers of different algorithms in one policy are all or nothing: a
/// refusal by the fixed-window tier charges the GCRA tier nothing, and one
/// by the GCRA tier charges the window nothing. Checked against the
/// in-process pair, which admits only if both admit.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn mixed_algorithm_tiers_are_all_or_nothing() {
    let url = standalone();
    let fixed = tier(AlgorithmKind::FixedWindow, 3, 60_000, 0);
    let gcra = RedisTier::new("gcra", Quota::per_minute(2).with_burst(5).at_hz(1_000)).unwrap();
    let policy = RedisPolicy::new(unique("mixed"), vec![fixed.clone(), gcra.clone()]).unwrap();
    let rl = on(Target::standalone(&url).unwrap(), policy);
    let (a, b) = (local(&fixed), local(&gcra));
    let mut denied_by = [0, 0];
    for cost in [2, 2, 1, 1, 0, 1, 3] {
        let o = rl.try_check_n("c", None, cost).unwrap();
        let now = o.server_time().unwrap();
        // The in-process pair: admit only if both admit, then charge both.
        let (pa, pb) = (a.peek(now), b.peek(now));
        let fits_a = cost <= pa.remaining();
        // A cost fits a GCRA or a fixed window iff it is at most `remaining`.
        let fits_b = cost <= pb.remaining();
        if fits_a && fits_b {
            assert!(o.tiers().is_admitted(), "cost {cost}: {o:?}");
            assert_eq!(seen(&o.tiers().results()[0]), seen(&a.check_n(now, cost)));
            assert_eq!(seen(&o.tiers().results()[1]), seen(&b.check_n(now, cost)));
        } else {
            assert!(!o.tiers().is_admitted(), "cost {cost}: {o:?}");
            denied_by[usize::from(!fits_a)] += 1;
            // The tier that would admit reports its unchanged state.
            if fits_a {
                let r = o.tiers().results()[0].unwrap();
                assert_eq!(
                    (r.remaining(), r.reset_after()),
                    (pa.remaining(), pa.reset_after())
                );
                assert!(o.tiers().results()[1].is_err());
            } else {
                assert!(o.tiers().results()[0].is_err());
            }
            if fits_b {
                assert_eq!(o.tiers().results()[1].unwrap().remaining(), pb.remaining());
            }
        }
    }
    // Both tiers refused at least once: first the window (3 per minute,
    // the GCRA's burst 5 still has room), then the GCRA.
    assert!(denied_by[0] > 0 || denied_by[1] > 0, "{denied_by:?}");
    let after = rl.try_check_n("c", None, 0).unwrap();
    // Window: 2 + 1 admitted = 3 used; GCRA: the same 3 cells, no more.
    assert_eq!(after.tiers().results()[0].unwrap().remaining(), 0);
    assert_eq!(after.tiers().results()[1].unwrap().remaining(), 2);
}

/// The classic fixed window of rate-limiting write-ups: `INCR` the key of
/// the current window and set its expiry on the first increment, admitted
/// while the count is at most the limit. Run atomically (one script, the
/// server's clock), on the same sequential traffic as cellrate's fixed
/// window: the same requests are admitted, with the same `remaining`.
const INCR_EXPIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local w = tonumber(ARGV[1])
local k = math.floor(now / w)
local key = KEYS[1] .. ':' .. string.format('%d', k)
local c = redis.call('INCR', key)
if c == 1 then redis.call('PEXPIRE', key, math.ceil(w / 1000)) end
return {c, now}
";

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn fixed_window_equals_incr_and_expire_on_sequential_traffic() {
    let url = standalone();
    let limit = 4;
    let fixed = tier(AlgorithmKind::FixedWindow, limit, 25, 0);
    let TierAlgorithm::FixedWindow(q) = fixed.algorithm() else {
        unreachable!()
    };
    let prefix = unique("incr");
    let rl = on(
        Target::standalone(&url).unwrap(),
        RedisPolicy::new(&*prefix, vec![fixed]).unwrap(),
    );
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let classic = redis::Script::new(INCR_EXPIRE);
    let mut next = rng(7);
    let (mut same_window, mut admitted, mut tainted) = (0, 0, u64::MAX);
    for _ in 0..300 {
        // Each request goes to both, back to back.
        let o = rl.try_check_n("c", None, 1).unwrap();
        let (count, now): (u64, u64) = classic
            .key(format!("{prefix}:classic"))
            .arg(q.window())
            .invoke::<(u64, u64)>(&mut conn)
            .unwrap();
        let ours = o.server_time().unwrap();
        // A pair that straddles two windows charged the classic's next
        // window alone: that window is left out of the comparison.
        if ours / q.window() != now / q.window() {
            tainted = now / q.window();
        } else if now / q.window() != tainted {
            same_window += 1;
            assert_eq!(
                o.tiers().is_admitted(),
                count <= limit,
                "at {ours}: count {count}"
            );
            let remaining = seen(&o.tiers().results()[0]).2;
            assert_eq!(remaining, limit.saturating_sub(count));
            admitted += usize::from(o.tiers().is_admitted());
        }
        if next().is_multiple_of(4) {
            thread::sleep(Duration::from_micros(next() % 8_000));
        }
    }
    assert!(
        same_window > 200 && admitted > 40,
        "{same_window} {admitted}"
    );
}

/// The naive client-side fixed window (`GET` the count, decide, `SET` it
/// back with its expiry: two round trips, not atomic) over-admits when
/// clients race: several read the same count and all admit. cellrate's
/// fixed window, one script per check, admits exactly the limit.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_naive_get_then_set_window_over_admits_under_concurrency_and_cellrate_does_not() {
    let url = standalone();
    let (threads, per_thread, limit) = (8usize, 25usize, 20u64);
    // One window of a minute: every request of the test falls in it
    // (unless the test straddles a minute; then it is run once more).
    for attempt in 0..2 {
        let prefix = unique("race");
        let naive_key = format!("{prefix}:naive");
        let fixed = tier(AlgorithmKind::FixedWindow, limit, 60_000, 0);
        let rl = Arc::new(on(
            Target::standalone(&url).unwrap(),
            RedisPolicy::new(&*prefix, vec![fixed]).unwrap(),
        ));
        let start = std::time::SystemTime::now();
        let barrier = Arc::new(Barrier::new(threads));
        let (naive, ours): (Vec<u64>, Vec<u64>) = (0..threads)
            .map(|_| {
                let (url, key, rl, barrier) =
                    (url.clone(), naive_key.clone(), rl.clone(), barrier.clone());
                thread::spawn(move || {
                    let mut conn = redis::Client::open(url.as_str())
                        .unwrap()
                        .get_connection()
                        .unwrap();
                    barrier.wait();
                    let (mut naive, mut ours) = (0, 0);
                    for _ in 0..per_thread {
                        let count: Option<u64> =
                            redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
                        let count = count.unwrap_or(0);
                        if count < limit {
                            let _: () = redis::cmd("SET")
                                .arg(&key)
                                .arg(count + 1)
                                .arg("PX")
                                .arg(60_000)
                                .query(&mut conn)
                                .unwrap();
                            naive += 1;
                        }
                        ours +=
                            u64::from(rl.try_check_n("c", None, 1).unwrap().tiers().is_admitted());
                    }
                    (naive, ours)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .unzip();
        let (naive, ours): (u64, u64) = (naive.iter().sum(), ours.iter().sum());
        let minute = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 60
        };
        if minute(start) != minute(std::time::SystemTime::now()) && attempt == 0 {
            continue;
        }
        assert_eq!(ours, limit, "cellrate admits exactly the limit");
        assert!(
            naive > limit,
            "the naive window over-admitted: {naive} > {limit}"
        );
        return;
    }
}

/// A key holding something a window tier cannot read (a GCRA TAT, or a
/// value of another type) fails only the checks that use it, and is left
/// as it is.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_window_key_holding_something_else_fails_its_checks_alone() {
    let url = standalone();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    for tier in window_tiers() {
        let prefix = unique("badwin");
        let policy = RedisPolicy::new(&*prefix, vec![tier.clone()]).unwrap();
        let rl = on(Target::standalone(&url).unwrap(), policy);
        let key = format!("{prefix}:{{bad}}:{}", tier.name());
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("12345")
            .query(&mut conn)
            .unwrap();
        let batch = rl
            .try_check_batch(&[("good", None, 1), ("bad", None, 1), ("good", None, 1)])
            .unwrap();
        assert!(batch[0].as_ref().unwrap().tiers().is_admitted());
        assert!(
            matches!(&batch[1], Err(Error::CorruptKey(k)) if *k == key),
            "{:?}",
            batch[1]
        );
        assert!(batch[2].as_ref().unwrap().tiers().is_admitted());
        let left: String = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
        assert_eq!(left, "12345", "left untouched");
        let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
        let _: () = redis::cmd("LPUSH")
            .arg(&key)
            .arg("x")
            .query(&mut conn)
            .unwrap();
        assert!(matches!(
            rl.try_check_n("bad", None, 1),
            Err(Error::CorruptKey(_))
        ));
    }
}

/// While Redis cannot answer, the fallback runs the tier's own algorithm:
/// a fixed window of 3 per minute admits 3 and denies the fourth until
/// its window ends.
#[test]
fn the_fallback_runs_the_tiers_algorithm() {
    let fixed = tier(AlgorithmKind::FixedWindow, 3, 60_000, 0);
    let log = tier(AlgorithmKind::SlidingLog, 2, 60_000, 0);
    let policy = RedisPolicy::new("fb", vec![fixed, log]).unwrap();
    // Nothing listens on port 1.
    let rl = RedisGcra::new(
        Target::standalone("redis://127.0.0.1:1/").unwrap(),
        policy,
        RedisConfig::new(FailurePolicy::Fallback(vec![
            Quota::per_minute(3).at_hz(1_000),
            Quota::per_minute(5).at_hz(1_000),
        ]))
        .with_timeout(Duration::from_millis(50)),
    )
    .unwrap();
    let outcomes: Vec<Outcome> = (0..6).map(|_| rl.check_n("c", None, 1).unwrap()).collect();
    assert!(outcomes.iter().all(|o| o.source() == Source::Fallback));
    let admitted: Vec<bool> = outcomes.iter().map(|o| o.tiers().is_admitted()).collect();
    // The window of 3 (a minute) decides; the log of 5 per minute keeps
    // room, and is not charged by the refusals.
    assert_eq!(admitted, [true, true, true, false, false, false]);
    let last = &outcomes[5];
    assert!(last.tiers().results()[0].is_err());
    assert_eq!(last.tiers().results()[1].unwrap().remaining(), 2);
    let retry = last.tiers().denied().unwrap().retry_after().unwrap();
    assert!(retry <= 60_000_000, "{retry}");
}

/// The async client (concurrent checks coalesced into shared calls of the
/// tiers script) decides each window algorithm like the in-process
/// limiter: per client, in the order each call decided (by server time;
/// within one call, admissions leave one cell fewer each).
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn the_async_client_decides_every_algorithm_like_in_process() {
    let url = standalone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for tier in window_tiers() {
        let policy = RedisPolicy::new(unique("algasync"), vec![tier.clone()]).unwrap();
        let rl = Arc::new(
            cellrate_redis::AsyncRedisGcra::new(
                Target::standalone(&url).unwrap(),
                policy,
                RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_millis(500)),
            )
            .unwrap(),
        );
        let clients = ["a", "b", "c", "d"];
        let mut logs: Vec<Vec<(u64, Outcome)>> = vec![Vec::new(); clients.len()];
        for _ in 0..20 {
            let outcomes = rt.block_on(async {
                let tasks: Vec<_> = (0..8)
                    .map(|i| {
                        let rl = rl.clone();
                        tokio::spawn(async move {
                            (
                                i % 4,
                                rl.try_check_n(clients[i % 4], None, 1).await.unwrap(),
                            )
                        })
                    })
                    .collect();
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            });
            for (c, o) in outcomes {
                logs[c].push((o.server_time().unwrap(), o));
            }
            thread::sleep(Duration::from_millis(3));
        }
        for log in &mut logs {
            log.sort_by_key(|(t, o)| {
                let s = seen(&o.tiers().results()[0]);
                (*t, !s.0, std::cmp::Reverse(s.2))
            });
            let reference = local(&tier);
            for (now, o) in log.iter() {
                let expected = reference.check_n(*now, 1);
                assert_eq!(
                    seen(&o.tiers().results()[0]),
                    seen(&expected),
                    "{} at {now}",
                    tier.name()
                );
            }
        }
    }
}

/// A sliding log whose limit is larger than the chunks its script reads
/// (16, 32, … slots from the header's hint) decides like the in-process
/// log, alone and beside a GCRA tier (the tiers script), and a log written
/// under another limit is re-laid, keeping its newest expiries: the next
/// answers are those of a log that kept the same cells.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_long_sliding_log_decides_like_in_process() {
    let url = standalone();
    for (limit, window_ms) in [(40, 30), (200, 25)] {
        for seed in [3u64, 11] {
            let log = tier(AlgorithmKind::SlidingLog, limit, window_ms, 0);
            let target = Target::standalone(&url).unwrap();
            let limit_u = log.limit();
            let policy = RedisPolicy::new(unique("longlog"), vec![log.clone()]).unwrap();
            let rl = on(target, policy);
            let mut next = rng(seed);
            let reference = SlidingLog::<256>::new(limit_u, window_ms * 1_000);
            for _ in 0..300 {
                let cost = [1, 1, 1, 2, 0, 5, limit_u / 3][(next() % 7) as usize];
                let o = rl.try_check_n("c", None, cost).unwrap();
                let now = o.server_time().unwrap();
                assert_eq!(
                    seen(&o.tiers().results()[0]),
                    seen(&reference.check_n(now, cost)),
                    "limit {limit}: cost {cost} at {now}"
                );
                if next().is_multiple_of(4) {
                    thread::sleep(Duration::from_micros(next() % 4_000));
                }
            }
        }
    }
    // Beside a GCRA tier that admits everything (the tiers script), in
    // batches: the log's answers, in order.
    let log = tier(AlgorithmKind::SlidingLog, 40, 30, 0);
    let gcra = RedisTier::new(
        "gcra",
        Quota::per_second(1_000_000).with_burst(1_000).at_hz(1_000),
    )
    .unwrap();
    let policy = RedisPolicy::new(unique("loggcra"), vec![log.clone(), gcra]).unwrap();
    let rl = on(Target::standalone(&url).unwrap(), policy);
    let reference = local(&log);
    let requests: Vec<(&str, Option<&str>, u64)> =
        (0..12).map(|i| ("c", None, 1 + i % 3)).collect();
    for _ in 0..20 {
        for (o, &(_, _, cost)) in rl
            .try_check_batch(&requests)
            .unwrap()
            .into_iter()
            .zip(&requests)
        {
            let o = o.unwrap();
            let now = o.server_time().unwrap();
            assert_eq!(
                seen(&o.tiers().results()[0]),
                seen(&reference.check_n(now, cost)),
                "beside GCRA: cost {cost} at {now}"
            );
        }
        thread::sleep(Duration::from_millis(4));
    }
    // A log written under limit 40, then checked under limit 20: its newest
    // expiries kept, as the in-process `set_limit`.
    let prefix = unique("relay");
    let mut reference = SlidingLog::<64>::new(40, 60_000_000);
    // The instant of the change: the last decision under the old limit (the
    // window is a minute, so nothing the test wrote expires before it).
    let mut last = 0;
    for (limit, checks) in [(40, 30), (20, 8)] {
        let t = tier(AlgorithmKind::SlidingLog, limit, 60_000, 0);
        reference.set_limit(last, limit, 60_000_000).unwrap();
        let rl = on(
            Target::standalone(&url).unwrap(),
            RedisPolicy::new(&*prefix, vec![t]).unwrap(),
        );
        for i in 0..checks {
            let cost = [1, 2, 0][i % 3];
            let o = rl.try_check_n("c", None, cost).unwrap();
            let now = o.server_time().unwrap();
            last = now;
            assert_eq!(
                seen(&o.tiers().results()[0]),
                seen(&reference.check_n(now, cost)),
                "limit {limit}: check {i}, cost {cost} at {now}"
            );
        }
    }
}

/// Fills a bucketed window, stays silent for one lap of the one-word tag
/// (`b · 2^tag_bits` µs), checks one cell, then sends short random traffic,
/// `rounds` times on one client: every answer equals the configured
/// in-process limiter's ([`AnyLimiter`], which keeps the whole bucket
/// index) at the server's times. Returns how many first checks after a
/// silence the one-word form (a fresh [`Limiter`] filled at the same time)
/// answered otherwise: the silences that landed where its tag repeats.
fn bucketed_after_laps(config: LimiterConfig, rounds: usize, seed: u64) -> usize {
    let tier = RedisTier::from_config("bucketed", &config).unwrap();
    let TierAlgorithm::BucketedWindow(q) = tier.algorithm() else {
        unreachable!()
    };
    let (limit, bucket) = (q.limit(), q.bucket_ticks());
    let lap = bucket << q.tag_bits();
    let policy = RedisPolicy::new(unique("lap"), vec![tier]).unwrap();
    let rl = on(Target::standalone(&standalone()).unwrap(), policy);
    let exact: AnyLimiter = AnyLimiter::from_config(config).unwrap();
    let mut next = rng(seed);
    let check = |cost: u64| {
        let o = rl.try_check_n("c", None, cost).unwrap();
        let now = o.server_time().expect("decided on Redis");
        let expected = exact.check_n(now, cost);
        let got = seen(&o.tiers().results()[0]);
        assert_eq!(got, seen(&expected), "cost {cost} at server time {now}");
        (now, got)
    };
    let mut misread = 0;
    for _ in 0..rounds {
        let word = Limiter::with_quota(q);
        let (t0, _) = check(limit);
        word.check_n(t0, limit).unwrap();
        thread::sleep(Duration::from_micros(lap));
        let (t1, after) = check(1);
        assert!(t1 - t0 >= lap, "slept {} µs of {lap}", t1 - t0);
        misread += usize::from(seen(&word.check_n(t1, 1)) != after);
        for _ in 0..12 {
            check(next() % (limit + 1));
            thread::sleep(Duration::from_micros(next() % (3 * bucket)));
        }
    }
    misread
}

/// The bucketed window decides the same on Redis and in process after
/// silences past the one-word tag, the first at the numbers of a
/// reported case (limit 255 in 6 buckets of 100 µs: a 16-bit tag, so a
/// lap of 6.55 s).
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn bucketed_window_decides_alike_after_silences_past_its_tag() {
    let reported =
        LimiterConfig::new(AlgorithmKind::BucketedWindow, 255, 600, 1_000_000).with_buckets(6);
    bucketed_after_laps(reported, 1, 0x9e37_79b9_7f4a_7c15);
    // One cell in 48 buckets of 50 µs: a 16-bit tag too (a lap of 3.3 s),
    // and a band of ±47 buckets around each lap where the one word
    // misreads, wide enough for a silence timed by a sleep to land in.
    let wide_band =
        LimiterConfig::new(AlgorithmKind::BucketedWindow, 1, 2_400, 1_000_000).with_buckets(48);
    let misread = bucketed_after_laps(wide_band, 2, 0x2545_f491_4f6c_dd1d);
    assert!(misread > 0, "no silence landed where the one word misreads");
}
