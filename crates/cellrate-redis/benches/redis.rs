//! Decisions per second against a real Redis, over one connection:
//!
//! * `single/gcra_script`: one GCRA script call per decision (no pipelining);
//! * `single/incr_expire`: the baseline, a plain fixed window —
//!   `INCR key` + `EXPIRE key 1 NX` in one round trip per decision;
//! * `pipelined_64/gcra_script`: 64 decisions per round trip
//!   (`try_check_batch`: on a standalone server, one script call that reads
//!   the 64 keys with one `MGET` and writes each with one `SET … PX`);
//! * `pipelined_64/incr_expire`: the baseline, 64 decisions (128 commands)
//!   per round trip, the commands built in the timed loop as ours are (a
//!   caller builds them per request);
//! * `pipelined_64/incr_expire_prebuilt`: the same pipeline built once
//!   outside the timed loop: the server and the round trip alone, a
//!   baseline that pays no client cost at all.
//! * in the interleaved comparison only, `async_64`: 64 concurrent
//!   `AsyncRedisGcra::try_check_n` tasks (which coalesce into shared script
//!   calls) against 64 concurrent `INCR`+`EXPIRE` tasks on one multiplexed
//!   connection (which the `redis` crate pipelines), on a single-threaded
//!   tokio runtime.
//!
//! * in the interleaved comparison only, `single` and `pipelined_64` for each
//!   window algorithm on Redis (`RedisTier::from_config`, its one-tier script):
//!   fixed window (10⁶ per s), sliding window (10⁶ per s), bucketed window
//!   (255 per 1.2 s in 6 buckets, the most its word holds: most decisions past
//!   the first few batches are denials) and sliding log (64 per s: its value
//!   holds one expiry per cell, so a larger limit costs more per check),
//!   each ÷ the same `incr_expire` baseline.
//! * in the interleaved comparison only, `sliding_log denied`: the server's
//!   time per **denied** check of a full sliding log (one check of cost
//!   `limit` fills it, a 60 s window keeps it full) at limits 100, 1 000 and
//!   4 096, from `INFO commandstats` (`usec_per_call` of `EVALSHA` over 300
//!   checks after `CONFIG RESETSTAT`), in µs, and the largest ÷ the
//!   smallest limit's: what a check costs as the log grows.
//! * in the interleaved comparison only, the *script floor*: `INCR` (and
//!   `PEXPIRE` on a new key) inside one `EVALSHA` call, single and 64 per
//!   pipeline, ÷ the same baseline: the least an atomic script-based
//!   decision costs on this server.
//!
//! Every GCRA decision of ours is admitted (a generous quota over 64 clients), so
//! every one writes its key: the costliest path of the script. All run in
//! the same process against the same server, so compare their throughputs
//! as ratios. Needs a server:
//!
//! ```text
//! redis-server --port 6399 --save '' --appendonly no &
//! CELLRATE_REDIS_URL=redis://127.0.0.1:6399/ \
//!     cargo bench --features redis --bench redis -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Before the criterion groups it prints the same comparisons measured
//! **interleaved**: 7 rounds, each timing every variant for a short burst in
//! turn, then per comparison a `ratio:` line (decisions per second of ours
//! ÷ the baseline's: above 1, ours is faster) with the median and quartiles
//! of the per-round ratios. On a machine shared with other work (the load
//! moves between criterion's groups, which run one after the other) those
//! ratios are the ones to quote; `-- --paired-only` prints them alone, as
//! `tools/bench-runner` runs the benches (docs/benchmarks.md).
//!
//! Without `CELLRATE_REDIS_URL` it prints a notice and measures nothing.
//! `scripts/stages/70-redis.sh` only builds it (`cargo bench --no-run --features redis`).

use std::time::{Duration, Instant};

use std::sync::Arc;

use cellrate::compose::{AlgorithmKind, LimiterConfig};
use cellrate::Quota;
use cellrate_redis::{
    AsyncRedisGcra, FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, RedisTier, Target,
};
use criterion::{BatchSize, Criterion, Throughput};

#[path = "../../../benches/common/paired.rs"]
mod paired;

const BATCH: usize = 64;

/// The baseline's pipeline: `INCR` + `EXPIRE … NX` per key, 64 decisions.
fn fixed_window(keys: &[String]) -> redis::Pipeline {
    let mut p = redis::pipe();
    for k in keys {
        p.cmd("INCR")
            .arg(k)
            .cmd("EXPIRE")
            .arg(k)
            .arg(1)
            .arg("NX")
            .ignore();
    }
    p
}

/// Decisions per second of `f` (which makes `per_call` decisions) over `calls` calls.
fn rate(calls: usize, per_call: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..calls / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    (calls * per_call) as f64 / start.elapsed().as_secs_f64()
}

/// 64 concurrent checks of ours and of the baseline, from async code.
struct Async {
    rt: tokio::runtime::Runtime,
    limiter: Arc<AsyncRedisGcra>,
    conn: redis::aio::MultiplexedConnection,
}

impl Async {
    fn new(url: &str, policy: RedisPolicy) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let limiter = Arc::new(
            AsyncRedisGcra::new(
                Target::standalone(url).unwrap(),
                policy,
                RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
            )
            .unwrap(),
        );
        let client = redis::Client::open(url).unwrap();
        let conn = rt
            .block_on(client.get_multiplexed_async_connection())
            .unwrap();
        Async { rt, limiter, conn }
    }

    fn ours(&self, keys: &Arc<Vec<String>>) {
        self.rt.block_on(async {
            let tasks: Vec<_> = (0..keys.len())
                .map(|i| {
                    let (limiter, keys) = (Arc::clone(&self.limiter), Arc::clone(keys));
                    tokio::spawn(async move { limiter.try_check_n(&keys[i], None, 1).await })
                })
                .collect();
            for t in tasks {
                t.await.unwrap().unwrap();
            }
        })
    }

    fn baseline(&self, keys: &Arc<Vec<String>>) {
        self.rt.block_on(async {
            let tasks: Vec<_> = (0..keys.len())
                .map(|i| {
                    let (mut conn, keys) = (self.conn.clone(), Arc::clone(keys));
                    tokio::spawn(async move {
                        let (count,): (u64,) = redis::pipe()
                            .cmd("INCR")
                            .arg(&keys[i])
                            .cmd("EXPIRE")
                            .arg(&keys[i])
                            .arg(1)
                            .arg("NX")
                            .ignore()
                            .query_async(&mut conn)
                            .await
                            .unwrap();
                        count
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    }
}

/// A limiter on `url` with one tier of `kind`: `limit` per second (the
/// bucketed window per 1.2 s in 6 buckets of 200 ms).
fn window_limiter(url: &str, kind: AlgorithmKind, limit: u64) -> RedisGcra {
    let mut c = LimiterConfig::new(kind, limit, 1_000, 1_000);
    if kind == AlgorithmKind::BucketedWindow {
        c = LimiterConfig::new(kind, limit, 1_200, 1_000).with_buckets(6);
    }
    let policy = RedisPolicy::new(
        format!("bench-{}", kind.as_str()),
        vec![RedisTier::from_config("api", &c).unwrap()],
    )
    .unwrap();
    RedisGcra::new(
        Target::standalone(url).unwrap(),
        policy,
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
    )
    .unwrap()
}

/// The window algorithms the interleaved comparison runs.
fn window_limiters(url: &str) -> Vec<(&'static str, RedisGcra)> {
    [
        (AlgorithmKind::FixedWindow, 1_000_000),
        (AlgorithmKind::SlidingWindow, 1_000_000),
        (AlgorithmKind::BucketedWindow, 255),
        (AlgorithmKind::SlidingLog, 64),
    ]
    .into_iter()
    .map(|(kind, limit)| (kind.as_str(), window_limiter(url, kind, limit)))
    .collect()
}

/// The baseline's one decision: `INCR` + `EXPIRE … NX` in one round trip.
fn incr_expire(conn: &mut redis::Connection, key: &str) {
    let _: (u64,) = redis::pipe()
        .cmd("INCR")
        .arg(key)
        .cmd("EXPIRE")
        .arg(key)
        .arg(1)
        .arg("NX")
        .ignore()
        .query(conn)
        .unwrap();
}

/// The floor of any decision made by a server-side script: `INCR` and,
/// on a new key, `PEXPIRE`, inside one script call (`EVALSHA`). What a
/// script costs beyond the plain commands (the call, the interpreter) is
/// the least any atomic script-based limiter pays.
const FLOOR_SCRIPT: &str = "local c = redis.call('INCR', KEYS[1]) \
    if c == 1 then redis.call('PEXPIRE', KEYS[1], 1000) end return c";

/// 64 calls of the floor script (by SHA) in one pipeline, built per call.
fn floor_pipeline(sha: &str, keys: &[String]) -> redis::Pipeline {
    let mut p = redis::pipe();
    for k in keys {
        p.cmd("EVALSHA").arg(sha).arg(1).arg(k);
    }
    p
}

/// The limits of the denied-log rows.
const LOG_LIMITS: [u64; 3] = [100, 1_000, 4_096];

/// `usec_per_call` of `EVALSHA` in `INFO commandstats`.
fn evalsha_usec(conn: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec_per_call=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Full sliding logs of each of [`LOG_LIMITS`] (60 s windows), and the
/// client each holds.
fn full_logs(url: &str) -> Vec<(u64, RedisGcra)> {
    LOG_LIMITS
        .iter()
        .map(|&limit| {
            let c = LimiterConfig::new(AlgorithmKind::SlidingLog, limit, 60_000, 1_000);
            let prefix = format!("bench-log-{limit}-{}", std::process::id());
            let policy =
                RedisPolicy::new(prefix, vec![RedisTier::from_config("log", &c).unwrap()]).unwrap();
            let rl = RedisGcra::new(
                Target::standalone(url).unwrap(),
                policy,
                RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
            )
            .unwrap();
            let _ = rl.try_check_n("full", None, limit).unwrap();
            (limit, rl)
        })
        .collect()
}

/// Server µs per denied check of each full log, one figure per log.
fn denied_log_usec(conn: &mut redis::Connection, logs: &[(u64, RedisGcra)]) -> Vec<f64> {
    logs.iter()
        .map(|(_, rl)| {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).unwrap();
            for _ in 0..300 {
                let o = rl.try_check_n("full", None, 1).unwrap();
                assert!(!o.tiers().is_admitted(), "the log is full");
            }
            evalsha_usec(conn)
        })
        .collect()
}

/// The interleaved comparison (see the module docs).
fn interleaved(
    limiter: &RedisGcra,
    conn: &mut redis::Connection,
    keys: &[String],
    window_keys: &[String],
    asynch: &Async,
    windows: &[(&'static str, RedisGcra)],
    logs: &[(u64, RedisGcra)],
) {
    let mut log_usec: Vec<Vec<f64>> = logs.iter().map(|_| Vec::new()).collect();
    let mut log_spread = Vec::new();
    let mut per_alg: Vec<(Vec<f64>, Vec<f64>)> =
        windows.iter().map(|_| Default::default()).collect();
    let (async_keys, async_window_keys) = (Arc::new(keys.to_vec()), Arc::new(window_keys.to_vec()));
    let mut concurrent = Vec::new();
    let batch: Vec<(&str, Option<&str>, u64)> =
        keys.iter().map(|k| (k.as_str(), None, 1)).collect();
    let prebuilt = fixed_window(window_keys);
    let (mut piped, mut piped_pre, mut single) = (Vec::new(), Vec::new(), Vec::new());
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(FLOOR_SCRIPT)
        .query(conn)
        .unwrap();
    let floor_keys: Vec<String> = window_keys.iter().map(|k| format!("{k}:floor")).collect();
    let (mut floor_single, mut floor_piped) = (Vec::new(), Vec::new());
    let mut n = 0;
    for _ in 0..7 {
        let floor_one = rate(400, 1, || {
            n = (n + 1) % BATCH;
            let _: u64 = redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(&floor_keys[n])
                .query(conn)
                .unwrap();
        });
        let floor_base_one = rate(400, 1, || {
            n = (n + 1) % BATCH;
            incr_expire(conn, &window_keys[n]);
        });
        let floor_batch = rate(150, BATCH, || {
            let _: Vec<u64> = floor_pipeline(&sha, &floor_keys).query(conn).unwrap();
        });
        let floor_base = rate(150, BATCH, || {
            let _: Vec<u64> = fixed_window(window_keys).query(conn).unwrap();
        });
        floor_single.push(floor_one / floor_base_one);
        floor_piped.push(floor_batch / floor_base);
        let ours = rate(150, BATCH, || {
            limiter.try_check_batch(&batch).unwrap();
        });
        let built = rate(150, BATCH, || {
            let _: Vec<u64> = fixed_window(window_keys).query(conn).unwrap();
        });
        let pre = rate(150, BATCH, || {
            let _: Vec<u64> = prebuilt.query(conn).unwrap();
        });
        let ours_single = rate(400, 1, || {
            n = (n + 1) % BATCH;
            limiter.try_check_n(&keys[n], None, 1).unwrap();
        });
        let base_single = rate(400, 1, || {
            n = (n + 1) % BATCH;
            incr_expire(conn, &window_keys[n]);
        });
        for ((_, w), (single_r, piped_r)) in windows.iter().zip(per_alg.iter_mut()) {
            let batch_w = rate(150, BATCH, || {
                w.try_check_batch(&batch).unwrap();
            });
            let base_w = rate(150, BATCH, || {
                let _: Vec<u64> = fixed_window(window_keys).query(conn).unwrap();
            });
            let one_w = rate(400, 1, || {
                n = (n + 1) % BATCH;
                w.try_check_n(&keys[n], None, 1).unwrap();
            });
            let base_one = rate(400, 1, || {
                n = (n + 1) % BATCH;
                incr_expire(conn, &window_keys[n]);
            });
            piped_r.push(batch_w / base_w);
            single_r.push(one_w / base_one);
        }
        let usec = denied_log_usec(conn, logs);
        for (all, u) in log_usec.iter_mut().zip(&usec) {
            all.push(*u);
        }
        log_spread.push(usec[usec.len() - 1] / usec[0]);
        let ours_async = rate(150, BATCH, || asynch.ours(&async_keys));
        let base_async = rate(150, BATCH, || asynch.baseline(&async_window_keys));
        concurrent.push(ours_async / base_async);
        piped.push(ours / built);
        piped_pre.push(ours / pre);
        single.push(ours_single / base_single);
    }
    for (name, mut ratios) in [
        (
            "pipelined_64, gcra_script ÷ incr_expire built per call",
            piped,
        ),
        (
            "pipelined_64, gcra_script ÷ incr_expire prebuilt",
            piped_pre,
        ),
        ("single, gcra_script ÷ incr_expire", single),
        ("async_64, gcra_script ÷ incr_expire", concurrent),
        ("single, script floor ÷ incr_expire", floor_single),
        (
            "pipelined_64, script floor ÷ incr_expire built per call",
            floor_piped,
        ),
    ] {
        paired::report(&format!("{name}, decisions/s"), &mut ratios);
    }
    for ((limit, _), mut usec) in logs.iter().zip(log_usec) {
        paired::report(
            &format!("sliding_log denied, limit {limit}, server µs per check"),
            &mut usec,
        );
    }
    paired::report(
        "sliding_log denied, limit 4096 ÷ limit 100, server µs per check",
        &mut log_spread,
    );
    for ((alg, _), (mut single_r, mut piped_r)) in windows.iter().zip(per_alg) {
        paired::report(
            &format!("single, {alg} ÷ incr_expire, decisions/s"),
            &mut single_r,
        );
        paired::report(
            &format!("pipelined_64, {alg} ÷ incr_expire built per call, decisions/s"),
            &mut piped_r,
        );
    }
}

/// The server's URL, or `None` (and a notice) without `CELLRATE_REDIS_URL`.
fn server_url() -> Option<String> {
    let url = std::env::var("CELLRATE_REDIS_URL").ok();
    if url.is_none() {
        eprintln!("NOTICE: CELLRATE_REDIS_URL is not set; the redis bench measures nothing");
    }
    url
}

/// Our limiter, the baseline's connection, and each one's 64 keys.
struct Setup {
    limiter: RedisGcra,
    conn: redis::Connection,
    keys: Vec<String>,
    window_keys: Vec<String>,
}

fn setup(url: &str) -> Setup {
    // A generous quota: the bench measures the decision, admitted or not.
    let policy =
        RedisPolicy::single("bench", "api", Quota::per_second(1_000_000).at_hz(1_000)).unwrap();
    let limiter = RedisGcra::new(
        Target::standalone(url).unwrap(),
        policy,
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let keys: Vec<String> = (0..BATCH).map(|i| format!("client{i}")).collect();
    let window_keys = keys.iter().map(|k| format!("bench-fw:{k}")).collect();
    Setup {
        limiter,
        conn,
        keys,
        window_keys,
    }
}

/// The interleaved comparison's `ratio:` lines.
fn paired_ratios() {
    let Some(url) = server_url() else { return };
    let mut s = setup(&url);
    let asynch = Async::new(&url, s.limiter.policy().clone());
    let windows = window_limiters(&url);
    let logs = full_logs(&url);
    interleaved(
        &s.limiter,
        &mut s.conn,
        &s.keys,
        &s.window_keys,
        &asynch,
        &windows,
        &logs,
    );
}

fn bench(c: &mut Criterion) {
    let Ok(url) = std::env::var("CELLRATE_REDIS_URL") else {
        return;
    };
    let Setup {
        limiter,
        mut conn,
        keys,
        window_keys,
    } = setup(&url);

    let batch: Vec<(&str, Option<&str>, u64)> =
        keys.iter().map(|k| (k.as_str(), None, 1)).collect();
    let mut g = c.benchmark_group("pipelined_64");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("gcra_script", |b| {
        b.iter(|| limiter.try_check_batch(&batch).unwrap())
    });
    g.bench_function("incr_expire", |b| {
        b.iter(|| {
            let counts: Vec<u64> = fixed_window(&window_keys).query(&mut conn).unwrap();
            counts
        })
    });
    g.bench_function("incr_expire_prebuilt", |b| {
        b.iter_batched(
            || fixed_window(&window_keys),
            |p| {
                let counts: Vec<u64> = p.query(&mut conn).unwrap();
                counts
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("single");
    g.throughput(Throughput::Elements(1));
    let mut n = 0usize;
    g.bench_function("gcra_script", |b| {
        b.iter(|| {
            n = (n + 1) % BATCH;
            limiter.try_check_n(&keys[n], None, 1).unwrap()
        })
    });
    g.bench_function("incr_expire", |b| {
        b.iter(|| {
            n = (n + 1) % BATCH;
            let (count,): (u64,) = redis::pipe()
                .cmd("INCR")
                .arg(&window_keys[n])
                .cmd("EXPIRE")
                .arg(&window_keys[n])
                .arg(1)
                .arg("NX")
                .ignore()
                .query(&mut conn)
                .unwrap();
            count
        })
    });
    g.finish();
}

fn main() {
    paired::main(paired_ratios, &[bench]);
}
