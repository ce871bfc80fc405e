//! Reconfiguration on Redis (docs/design/reconfigure.md, "Redis"): a
//! limiter made by `with_policy` reads each client's state, written under
//! the old parameters, re-expressed under the new ones exactly as the
//! in-process `translate` does, at the server time of the first call that
//! reads it. Against a real `redis-server` (`CELLRATE_REDIS_URL`, as
//! `tests/redis_algorithms.rs`; `scripts/stages/70-redis.sh` starts one).
//!
//! For each algorithm and each kind of change (raise: limit and rate both
//! at least the old; lower: both at most; mixed), a random history on the
//! old policy is replayed on the in-process limiter at the server's times;
//! then the new limiter answers a peek and a request in one call (one
//! server time `t`; the request alone on the async client and on a
//! Cluster), which must be what the in-process limiter
//! reconfigured at `t` answers, and the monotone rule itself is checked
//! against what the old rules allowed at `t`: a raise refuses nothing the
//! old rules admit, a lower admits nothing they refuse, and a mixed change
//! moves the allowance by exactly the change of limit (burst), floored at 0.
//! A limiter still on the old policy then reads the state the new one
//! wrote re-expressed back under its own parameters.
//!
//! The new limiter is made by `with_policy`, or started fresh on the same
//! prefix (a process deployed with the new rules: blocking, async, on a
//! Cluster, or fresh on other parameters and then reloaded): each reads the
//! old states under the base the fleet recorded, so all answer alike.

use std::thread;
use std::time::Duration;

use cellrate::compose::{AlgorithmKind, LimiterConfig};
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingLog, SlidingWindowQuota};
use cellrate::{Decision, Denied, Limiter, LocalGcra, Quota};
use cellrate_redis::{
    AsyncRedisGcra, FailurePolicy, Outcome, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Source,
    Target, TierAlgorithm,
};

#[path = "support/answers.rs"]
mod answers;
#[path = "support/redis_env.rs"]
mod redis_env;
#[path = "support/redis_server.rs"]
mod redis_server;
use answers::{rng, seen};
use redis_env::{cluster_nodes, env, standalone, unique};
use redis_server::Server as OwnServer;

/// The in-process limiter of a tier, reconfigurable as the core does it.
enum Reference {
    Gcra(LocalGcra),
    Fixed(Limiter<FixedWindowQuota>),
    Sliding(Limiter<SlidingWindowQuota>),
    Bucketed(Limiter<BucketedWindowQuota>),
    Log(Box<SlidingLog<64>>),
}

impl Reference {
    fn new(tier: &RedisTier) -> Self {
        match tier.algorithm() {
            TierAlgorithm::Gcra => Reference::Gcra(LocalGcra::new(tier.quota())),
            TierAlgorithm::FixedWindow(q) => Reference::Fixed(Limiter::with_quota(q)),
            TierAlgorithm::SlidingWindow(q) => Reference::Sliding(Limiter::with_quota(q)),
            TierAlgorithm::BucketedWindow(q) => Reference::Bucketed(Limiter::with_quota(q)),
            TierAlgorithm::SlidingLog { limit, window } => {
                Reference::Log(Box::new(SlidingLog::new(limit, window)))
            }
            other => panic!("no reference for {other:?}"),
        }
    }

    fn check_n(&mut self, now: u64, cost: u64) -> Result<Decision, Denied> {
        match self {
            Reference::Gcra(l) => l.check_n(now, cost),
            Reference::Fixed(l) => l.check_n(now, cost),
            Reference::Sliding(l) => l.check_n(now, cost),
            Reference::Bucketed(l) => l.check_n(now, cost),
            Reference::Log(l) => l.check_n(now, cost),
        }
    }

    /// The most cells admitted at `now` (a cost fits iff it is at most this).
    fn allowance(&self, now: u64) -> u64 {
        match self {
            Reference::Gcra(l) => l.peek(now).remaining(),
            Reference::Fixed(l) => l.peek(now).remaining(),
            Reference::Sliding(l) => l.peek(now).remaining(),
            Reference::Bucketed(l) => l.peek(now).remaining(),
            Reference::Log(l) => l.peek(now).remaining(),
        }
    }

    /// The core's reconfiguration at `now` (`Algorithm::translate`).
    fn reconfigure(&mut self, now: u64, tier: &RedisTier) {
        match (self, tier.algorithm()) {
            (Reference::Gcra(l), TierAlgorithm::Gcra) => {
                l.set_quota(now, tier.quota()).unwrap();
            }
            (Reference::Fixed(l), TierAlgorithm::FixedWindow(q)) => {
                l.set_quota(now, q);
            }
            (Reference::Sliding(l), TierAlgorithm::SlidingWindow(q)) => {
                l.set_quota(now, q);
            }
            (Reference::Bucketed(l), TierAlgorithm::BucketedWindow(q)) => {
                l.set_quota(now, q);
            }
            (Reference::Log(l), TierAlgorithm::SlidingLog { limit, window }) => {
                l.set_limit(now, limit, window).unwrap();
            }
            (_, other) => panic!("another algorithm: {other:?}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Change {
    Raise,
    Lower,
    Mixed,
}

/// A GCRA tier named `t`: `cells` per second, burst `burst`, on a 1 kHz
/// clock (re-expressed on the server's µs).
fn gcra(cells: u64, burst: u64) -> RedisTier {
    RedisTier::new("t", Quota::per_second(cells).with_burst(burst).at_hz(1_000)).unwrap()
}

/// A window tier named `t`: `limit` per `window_ms` ms (the bucketed
/// window in `buckets` buckets).
fn window(kind: AlgorithmKind, limit: u64, window_ms: u64, buckets: u32) -> RedisTier {
    let mut c = LimiterConfig::new(kind, limit, window_ms, 1_000);
    if kind == AlgorithmKind::BucketedWindow {
        c = c.with_buckets(buckets);
    }
    RedisTier::from_config("t", &c).unwrap()
}

/// Each algorithm's tier before the change, and the changes tried.
fn cases() -> Vec<(RedisTier, Vec<(Change, RedisTier)>)> {
    use AlgorithmKind::{BucketedWindow, FixedWindow, SlidingLog, SlidingWindow};
    use Change::{Lower, Mixed, Raise};
    vec![
        (
            gcra(100, 8),
            vec![
                (Raise, gcra(250, 12)),
                (Raise, gcra(100, 8)),
                (Raise, gcra(100, 11)),
                (Lower, gcra(100, 3)),
                (Lower, gcra(40, 5)),
                // T = 1/7 s: 7 sub-ticks per µs, another scale.
                (Lower, gcra(7, 3)),
                (Mixed, gcra(7, 15)),
                (Mixed, gcra(400, 3)),
            ],
        ),
        (
            window(FixedWindow, 6, 20, 0),
            vec![
                (Raise, window(FixedWindow, 9, 25, 0)),
                (Raise, window(FixedWindow, 8, 20, 0)),
                (Lower, window(FixedWindow, 4, 20, 0)),
                (Lower, window(FixedWindow, 4, 25, 0)),
                (Mixed, window(FixedWindow, 9, 40, 0)),
                (Mixed, window(FixedWindow, 4, 10, 0)),
            ],
        ),
        (
            window(SlidingWindow, 6, 24, 0),
            vec![
                (Raise, window(SlidingWindow, 8, 24, 0)),
                (Raise, window(SlidingWindow, 10, 30, 0)),
                (Lower, window(SlidingWindow, 4, 24, 0)),
                (Lower, window(SlidingWindow, 4, 30, 0)),
                (Mixed, window(SlidingWindow, 9, 48, 0)),
                (Mixed, window(SlidingWindow, 4, 12, 0)),
            ],
        ),
        (
            window(BucketedWindow, 7, 24, 6),
            vec![
                (Raise, window(BucketedWindow, 10, 30, 5)),
                (Raise, window(BucketedWindow, 9, 24, 6)),
                (Lower, window(BucketedWindow, 5, 24, 6)),
                (Lower, window(BucketedWindow, 5, 30, 6)),
                (Mixed, window(BucketedWindow, 10, 60, 6)),
                (Mixed, window(BucketedWindow, 4, 12, 4)),
            ],
        ),
        (
            window(SlidingLog, 5, 18, 0),
            vec![
                (Raise, window(SlidingLog, 8, 18, 0)),
                (Raise, window(SlidingLog, 8, 20, 0)),
                (Lower, window(SlidingLog, 3, 18, 0)),
                (Lower, window(SlidingLog, 3, 30, 0)),
                (Mixed, window(SlidingLog, 8, 40, 0)),
                (Mixed, window(SlidingLog, 3, 6, 0)),
            ],
        ),
    ]
}

/// How the limiter on the new parameters is made.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Made {
    /// `with_policy` of the old limiter (a reload).
    Reload,
    /// `RedisGcra::new` on the same prefix: a process started with the
    /// new parameters.
    Fresh,
    /// `AsyncRedisGcra::new` on the same prefix.
    FreshAsync,
    /// `RedisGcra::new` on the same prefix with other parameters, which
    /// decides for another client, then its `with_policy`.
    FreshThenReload,
}

fn config() -> RedisConfig {
    RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(3))
}

fn on(url: &str, policy: RedisPolicy) -> RedisGcra {
    RedisGcra::new(Target::standalone(url).unwrap(), policy, config()).unwrap()
}

/// The limiter deciding after the change, blocking or async.
enum Deciding {
    Blocking(RedisGcra),
    Async(AsyncRedisGcra, tokio::runtime::Runtime),
}

impl Deciding {
    fn check(&self, cost: u64) -> Outcome {
        match self {
            Deciding::Blocking(rl) => rl.try_check_n("c", None, cost).unwrap(),
            Deciding::Async(rl, rt) => rt.block_on(rl.try_check_n("c", None, cost)).unwrap(),
        }
    }
}

/// One request on Redis, checked against the reference at the server's
/// time; returns that time.
fn same(rl: &Deciding, reference: &mut Reference, cost: u64, what: &str) -> u64 {
    let o = rl.check(cost);
    assert_eq!(o.source(), Source::Redis);
    let now = o.server_time().unwrap();
    let expected = reference.check_n(now, cost);
    assert_eq!(
        seen(&o.tiers().results()[0]),
        seen(&expected),
        "{what}: cost {cost} at {now}"
    );
    now
}

/// Where the limiters of one change live.
#[derive(Clone, Copy)]
enum Server<'a> {
    Standalone(&'a str),
    Cluster(&'a [String]),
}

impl Server<'_> {
    fn target(self) -> Target {
        match self {
            Server::Standalone(url) => Target::standalone(url).unwrap(),
            Server::Cluster(nodes) => Target::cluster(nodes.iter().map(String::as_str)).unwrap(),
        }
    }

    fn blocking(self, prefix: &str, tier: &RedisTier) -> RedisGcra {
        let policy = RedisPolicy::new(prefix, vec![tier.clone()]).unwrap();
        RedisGcra::new(self.target(), policy, config()).unwrap()
    }
}

/// Runs one change: `history` random requests under `old`, the change
/// (the new limiter `made` as said; `other`: the parameters a
/// [`Made::FreshThenReload`] starts on), a peek and a request of `cost`,
/// then `after` more requests.
fn one_change(
    server: Server<'_>,
    old: &RedisTier,
    change: Change,
    new: &RedisTier,
    (made, other): (Made, &RedisTier),
    seed: u64,
) -> (u64, u64) {
    let what = format!(
        "{:?} {:?} {:?} -> {:?}",
        made,
        change,
        old.algorithm(),
        new.algorithm()
    );
    let prefix = unique("reconf");
    let rl = Deciding::Blocking(server.blocking(&prefix, old));
    let mut reference = Reference::new(old);
    let mut next = rng(seed);
    let limit = old.limit();
    for _ in 0..(5 + next() % 40) {
        same(&rl, &mut reference, next() % (limit + 1), &what);
        if next().is_multiple_of(3) {
            thread::sleep(Duration::from_micros(next() % 4_000));
        }
    }
    let policy = RedisPolicy::new(&*prefix, vec![new.clone()]).unwrap();
    let Deciding::Blocking(old_rl) = &rl else {
        unreachable!()
    };
    let raised = match made {
        Made::Reload => {
            Deciding::Blocking(old_rl.with_policy(policy, FailurePolicy::Closed).unwrap())
        }
        Made::Fresh => Deciding::Blocking(server.blocking(&prefix, new)),
        Made::FreshAsync => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let rl = AsyncRedisGcra::new(server.target(), policy, config()).unwrap();
            Deciding::Async(rl, rt)
        }
        Made::FreshThenReload => {
            let started = server.blocking(&prefix, other);
            // It reaches the server (for another client) before the reload.
            started.try_check_n("d", None, 1).unwrap();
            Deciding::Blocking(started.with_policy(policy, FailurePolicy::Closed).unwrap())
        }
    };
    let cost = 1 + next() % new.limit();
    // A peek and a request in one call (one server time) where the client
    // makes one call of both (a standalone blocking limiter); elsewhere the
    // request alone.
    let (peek, request) = match (&raised, server) {
        (Deciding::Blocking(rl), Server::Standalone(_)) => {
            let mut outcomes = rl
                .try_check_batch(&[("c", None, 0), ("c", None, cost)])
                .unwrap()
                .into_iter()
                .map(Result::unwrap);
            let peek = outcomes.next().unwrap();
            (Some(peek), outcomes.next().unwrap())
        }
        _ => (None, raised.check(cost)),
    };
    let now = request.server_time().unwrap();
    if let Some(peek) = &peek {
        assert_eq!(peek.server_time(), Some(now));
    }
    let before = reference.allowance(now);
    reference.reconfigure(now, new);
    let after = reference.allowance(now);
    if let Some(peek) = &peek {
        assert_eq!(
            seen(&peek.tiers().results()[0]),
            seen(&reference.check_n(now, 0)),
            "{what}: peek at {now}"
        );
    }
    let admitted = request.tiers().is_admitted();
    assert_eq!(
        seen(&request.tiers().results()[0]),
        seen(&reference.check_n(now, cost)),
        "{what}: cost {cost} at {now}"
    );
    // The rule itself, on what Redis answered (or, with no peek, on the
    // reference the request matched).
    let told = peek.map_or(after, |p| seen(&p.tiers().results()[0]).2);
    assert_eq!(told, after);
    match change {
        Change::Raise => {
            assert!(told >= before, "{what}: {told} < {before} at {now}");
            if cost <= before {
                assert!(admitted, "{what}: a raise refused {cost} of {before}");
            }
        }
        Change::Lower => {
            assert!(told <= before, "{what}: {told} > {before} at {now}");
            if cost > before {
                assert!(!admitted, "{what}: a lower admitted {cost} over {before}");
            }
        }
        Change::Mixed => {
            let moved = (before + new.limit()).saturating_sub(old.limit());
            assert_eq!(told, moved, "{what}: at {now}");
        }
    }
    // Written back under the new parameters: later answers stay the same.
    for _ in 0..10 {
        same(&raised, &mut reference, next() % (new.limit() + 1), &what);
        if next().is_multiple_of(2) {
            thread::sleep(Duration::from_micros(next() % 3_000));
        }
    }
    // A peer still on the old policy reads what the new one wrote
    // re-expressed under its own parameters, as a change back would.
    let o = rl.check(0);
    let now = o.server_time().unwrap();
    reference.reconfigure(now, old);
    assert_eq!(
        seen(&o.tiers().results()[0]),
        seen(&reference.check_n(now, 0)),
        "{what}: back at {now}"
    );
    for _ in 0..5 {
        same(&rl, &mut reference, next() % (limit + 1), &what);
    }
    (before, told)
}

/// Runs every case's changes with the new limiter `made`, on `seeds`.
fn every_change(server: Server<'_>, made: Made, seeds: &[u64], min_owing: usize) {
    for (old, changes) in cases() {
        let mut owing = 0;
        for (i, (change, new)) in changes.iter().enumerate() {
            // Another change's parameters, for a fresh limiter then reloaded.
            let other = &changes[(i + 1) % changes.len()].1;
            for &seed in seeds {
                let (before, _) = one_change(server, &old, *change, new, (made, other), seed);
                owing += usize::from(before < old.limit());
            }
        }
        // The histories leave state to translate, not only idle clients.
        assert!(owing > min_owing, "{made:?} {:?}: {owing}", old.algorithm());
    }
}

#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_change_reads_each_state_as_in_process_translate_and_is_monotone() {
    let url = standalone();
    every_change(
        Server::Standalone(&url),
        Made::Reload,
        &[0x9e37_79b9_7f4a_7c15u64, 0x2545_f491_4f6c_dd1d, 77, 4_242],
        8,
    );
}

/// A process started fresh with new parameters (no `with_policy`) reads
/// the states the old ones wrote under the base the fleet recorded: the
/// same answers as a reload, blocking or async, and after a reload of its
/// own.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_fresh_limiter_reads_old_states_under_the_recorded_base() {
    let url = standalone();
    let server = Server::Standalone(&url);
    every_change(
        server,
        Made::Fresh,
        &[0x9e37_79b9_7f4a_7c15u64, 77, 4_242],
        4,
    );
    every_change(server, Made::FreshAsync, &[0x2545_f491_4f6c_dd1d, 4_242], 2);
    every_change(
        server,
        Made::FreshThenReload,
        &[0x9e37_79b9_7f4a_7c15u64, 91],
        2,
    );
}

/// The same on a Redis Cluster: the recorded base is one key on one node,
/// the clients' states on others.
#[test]
#[ignore = "needs a Redis Cluster: scripts/stages/70-redis.sh"]
fn a_fresh_limiter_on_a_cluster_reads_under_the_recorded_base() {
    let nodes = cluster_nodes();
    let server = Server::Cluster(&nodes);
    every_change(server, Made::Fresh, &[0x9e37_79b9_7f4a_7c15u64, 4_242], 2);
    every_change(server, Made::FreshAsync, &[77, 91], 2);
}

/// A fresh limiter that finds the server frozen decides nothing (no base
/// known, no script run); once the server answers, its first call learns
/// the recorded base before its script reads the state the old limiter
/// wrote, and answers as the in-process limiter reconfigured then.
#[test]
#[ignore = "needs redis-server: scripts/stages/70-redis.sh"]
fn a_fresh_limiter_learns_the_base_when_the_server_first_answers() {
    let mut server = OwnServer::start(&env("CELLRATE_REDIS_SERVER"));
    let url = server.url();
    // Slow enough that the debt outlasts the freeze (a cell per 500 ms).
    let old = gcra(2, 8);
    let new = gcra(5, 12);
    let prefix = unique("frozen");
    let rl = on(&url, RedisPolicy::new(&*prefix, vec![old.clone()]).unwrap());
    let mut reference = Reference::new(&old);
    let o = rl.try_check_n("c", None, 6).unwrap();
    reference.check_n(o.server_time().unwrap(), 6).unwrap();
    server.pause();
    let fresh = RedisGcra::new(
        Target::standalone(&url).unwrap(),
        RedisPolicy::new(&*prefix, vec![new.clone()]).unwrap(),
        RedisConfig::new(FailurePolicy::Closed)
            .with_timeout(Duration::from_millis(200))
            .with_reconnect_interval(Duration::from_millis(50)),
    )
    .unwrap();
    assert!(fresh.try_check_n("c", None, 1).is_err());
    server.resume();
    thread::sleep(Duration::from_millis(60));
    let peek = fresh.try_check_n("c", None, 0).unwrap();
    let now = peek.server_time().unwrap();
    let before = reference.allowance(now);
    assert!(before < 8, "the old limiter's debt is gone at {now}");
    reference.reconfigure(now, &new);
    assert_eq!(
        seen(&peek.tiers().results()[0]),
        seen(&reference.check_n(now, 0)),
        "at {now}"
    );
    assert!(reference.allowance(now) >= before);
    server.stop();
}

/// A server restarted empty loses the record with the states: the first
/// limiter to reach it records its own parameters, and a running limiter,
/// whose connection failed, learns that record before its next script; so
/// the fresh limiter reads what the running one writes as written under
/// the running one's parameters.
#[test]
#[ignore = "needs redis-server: scripts/stages/70-redis.sh"]
fn after_a_restart_a_running_limiter_learns_the_base_again() {
    let mut server = OwnServer::start(&env("CELLRATE_REDIS_SERVER"));
    let url = server.url();
    let (old, new) = (gcra(2, 8), gcra(5, 12));
    let prefix = unique("restart");
    let made = |tier: &RedisTier| {
        RedisGcra::new(
            Target::standalone(&url).unwrap(),
            RedisPolicy::new(&*prefix, vec![tier.clone()]).unwrap(),
            RedisConfig::new(FailurePolicy::Closed)
                .with_timeout(Duration::from_millis(500))
                .with_reconnect_interval(Duration::from_millis(20)),
        )
        .unwrap()
    };
    let running = made(&old);
    running.try_check_n("c", None, 1).unwrap();
    server.stop();
    server.restart();
    let fresh = made(&new);
    fresh.try_check_n("d", None, 1).unwrap();
    // The running limiter's connection is gone: a call fails, then one
    // reconnects.
    let mut failed = 0;
    let o = loop {
        match running.try_check_n("c", None, 6) {
            Ok(o) => break o,
            Err(e) => {
                failed += 1;
                assert!(failed < 100, "{e}");
                thread::sleep(Duration::from_millis(25));
            }
        }
    };
    assert!(failed > 0);
    let mut reference = Reference::new(&old);
    reference.check_n(o.server_time().unwrap(), 6).unwrap();
    let peek = fresh.try_check_n("c", None, 0).unwrap();
    let now = peek.server_time().unwrap();
    reference.reconfigure(now, &new);
    assert_eq!(
        seen(&peek.tiers().results()[0]),
        seen(&reference.check_n(now, 0)),
        "at {now}"
    );
    server.stop();
}

/// A key written before the parameters were kept in the value reads under
/// the tier's parameters, as it always did: a rolling upgrade is safe.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_value_without_parameters_reads_under_the_tiers() {
    let url = standalone();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let time = |conn: &mut redis::Connection| -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
        s * 1_000_000 + us
    };
    // GCRA, 100/s (T = 10 000 µs), burst 8: a TAT d µs ahead owes
    // ⌈d/T⌉ cells.
    let prefix = unique("legacy");
    let rl = on(
        &url,
        RedisPolicy::new(&*prefix, vec![gcra(100, 8)]).unwrap(),
    );
    let tat = time(&mut conn) + 55_000;
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}:{{c}}:t"))
        .arg(tat.to_string())
        .query(&mut conn)
        .unwrap();
    let o = rl.try_check_n("c", None, 0).unwrap();
    let owed = tat
        .saturating_sub(o.server_time().unwrap())
        .div_ceil(10_000);
    assert!(owed > 0, "the check came too late to tell");
    assert_eq!(o.tiers().results()[0].unwrap().remaining(), 8 - owed);
    // A fixed window of 6 per 20 ms: a count of 4 in now's window.
    let prefix = unique("legacy");
    let tier = window(AlgorithmKind::FixedWindow, 6, 20, 0);
    let rl = on(&url, RedisPolicy::new(&*prefix, vec![tier]).unwrap());
    let now = time(&mut conn);
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}:{{c}}:t"))
        .arg(format!("F{}:4", now / 20_000))
        .query(&mut conn)
        .unwrap();
    let o = rl.try_check_n("c", None, 0).unwrap();
    let k = o.server_time().unwrap() / 20_000;
    let expected = if k == now / 20_000 { 2 } else { 6 };
    assert_eq!(o.tiers().results()[0].unwrap().remaining(), expected);
}

/// A peek that re-expresses a sliding log whose entries have all expired
/// stores it with an expiry of at least 1 ms, never an invalid one: the
/// log's key is kept past its last expiry (`PERSIST`, as a key can outlive
/// its entries by up to a millisecond), then read under new parameters.
#[test]
#[ignore = "needs a Redis server: scripts/stages/70-redis.sh"]
fn a_reload_peek_of_an_expired_log_stores_a_valid_expiry() {
    let url = standalone();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let prefix = unique("logpx");
    let old = window(AlgorithmKind::SlidingLog, 5, 18, 0);
    let rl = on(&url, RedisPolicy::new(&*prefix, vec![old]).unwrap());
    assert!(rl.try_check_n("c", None, 3).unwrap().tiers().is_admitted());
    let key = format!("{prefix}:{{c}}:t");
    let kept: bool = redis::cmd("PERSIST").arg(&key).query(&mut conn).unwrap();
    assert!(kept, "the log's key exists with an expiry");
    std::thread::sleep(Duration::from_millis(25));
    let new = window(AlgorithmKind::SlidingLog, 8, 18, 0);
    let reloaded = rl
        .with_policy(
            RedisPolicy::new(&*prefix, vec![new]).unwrap(),
            FailurePolicy::Closed,
        )
        .unwrap();
    let o = reloaded.try_check_n("c", None, 0).unwrap();
    assert_eq!(o.source(), Source::Redis);
    assert_eq!(o.tiers().results()[0].unwrap().remaining(), 8);
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
    assert!(ttl != -1, "the key was stored with an expiry (PTTL {ttl})");
}
