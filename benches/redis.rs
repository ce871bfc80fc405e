//! Decisions per second against a real Redis, over one connection:
//!
//! * `gcra_script/single`: one GCRA script call per decision (no pipelining);
//! * `gcra_script/pipelined_64`: 64 decisions per round trip
//!   (`try_check_batch`: on a standalone server, one script call that reads
//!   the 64 keys with one `MGET` and writes each with one `SET … PX`);
//! * `incr_expire/single`: the baseline, a plain fixed window —
//!   `INCR key` + `EXPIRE key 1 NX` in one round trip per decision;
//! * `incr_expire/pipelined_64`: the same, 64 decisions (128 commands) per
//!   round trip, the commands built in the timed loop as ours are (a caller
//!   builds them per request);
//! * `incr_expire/pipelined_64_prebuilt`: the same pipeline built once
//!   outside the timed loop: the server and the round trip alone, a
//!   baseline that pays no client cost at all.
//!
//! Every decision of ours is admitted (a generous quota over 64 clients), so
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
//! Without `CELLRATE_REDIS_URL` it prints a notice and measures nothing.
//! `scripts/stages/70-redis.sh` only builds it (`cargo bench --no-run --features redis`).

use std::time::Duration;

use cellrate::redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
use cellrate::Quota;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const BATCH: usize = 64;

fn bench(c: &mut Criterion) {
    let Ok(url) = std::env::var("CELLRATE_REDIS_URL") else {
        eprintln!("NOTICE: CELLRATE_REDIS_URL is not set; the redis bench measures nothing");
        return;
    };
    // A generous quota: the bench measures the decision, admitted or not.
    let policy =
        RedisPolicy::single("bench", "api", Quota::per_second(1_000_000).at_hz(1_000)).unwrap();
    let limiter = RedisGcra::new(
        Target::standalone(&url).unwrap(),
        policy,
        RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let keys: Vec<String> = (0..BATCH).map(|i| format!("client{i}")).collect();

    let mut g = c.benchmark_group("gcra_script");
    g.throughput(Throughput::Elements(1));
    let mut n = 0usize;
    g.bench_function("single", |b| {
        b.iter(|| {
            n = (n + 1) % BATCH;
            limiter.try_check_n(&keys[n], None, 1).unwrap()
        })
    });
    g.throughput(Throughput::Elements(BATCH as u64));
    let batch: Vec<(&str, Option<&str>, u64)> =
        keys.iter().map(|k| (k.as_str(), None, 1)).collect();
    g.bench_function("pipelined_64", |b| {
        b.iter(|| limiter.try_check_batch(&batch).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("incr_expire");
    g.throughput(Throughput::Elements(1));
    let window_keys: Vec<String> = keys.iter().map(|k| format!("bench-fw:{k}")).collect();
    g.bench_function("single", |b| {
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
    g.throughput(Throughput::Elements(BATCH as u64));
    let fixed_window = |keys: &[String]| {
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
    };
    g.bench_function("pipelined_64", |b| {
        b.iter(|| {
            let counts: Vec<u64> = fixed_window(&window_keys).query(&mut conn).unwrap();
            counts
        })
    });
    g.bench_function("pipelined_64_prebuilt", |b| {
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
