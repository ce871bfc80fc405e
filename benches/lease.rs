//! Leased handles on one shared limit, against the shared check, a bare
//! compare-and-swap loop, `governor`'s direct limiter and the single-owner
//! `LocalGcra`, on 1 and 2 threads.
//!
//! * **Paired ratios** (printed first, `ratio:` lines): subject time ÷
//!   baseline time for the same number of operations, timed in alternating
//!   chunks (see `benches/common/paired.rs`). With 2 threads each chunk is
//!   run by both threads at once (65 536 operations each), started by one
//!   spinning signal; the chunk time is until both are done. Every thread checks the **same** shared
//!   limiter (or CAS word, or governor limiter), except for `LocalGcra`,
//!   which each thread owns (the per-operation floor a lease aims at). The
//!   limit is not the bottleneck: a frozen `now` and a burst of 2⁴⁰ cells.
//! * **Excess** (`excess:` lines): 2 threads hammer a binding limit (2 M
//!   cells/s, burst 200 000) with a real clock for 300 ms; the admitted
//!   total minus the exact limit `b + ⌊Δ/T⌋`, in cells, next to the bound
//!   `n·k` of `cellrate::lease`.
//! * **Criterion** (`lease/*`): one thread, 1 024 operations per sample.
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cellrate::lease::{LeasePolicy, Leased};
use cellrate::{Gcra, LocalGcra, Quota};
use criterion::{Criterion, Throughput};

#[path = "common/paired.rs"]
mod paired;
use paired::{cas, ratio, Side};

const HZ: u64 = 1_000_000_000;
const NOW: u64 = 1_000_000;
/// Operations per thread per chunk in the threaded pairs.
const THREAD_BATCH: u64 = 65_536;
/// Pairs of chunks in the threaded pairs.
const THREAD_PAIRS: usize = 600;

fn admitting_quota() -> Quota {
    Quota::per_ticks(1, 1).with_burst(1 << 40).at_hz(HZ)
}

/// Leases of up to 4 096 cells, starting at 64, with 2 workers in mind.
fn policy() -> LeasePolicy {
    LeasePolicy::new(4_096, 1_000_000)
        .with_min(64)
        .with_share(2)
}

/// Prints the paired ratio of `subject` over `baseline` with `threads`
/// threads. `make(i)` builds thread `i`'s pair of operations in that thread.
/// The calling thread is thread 0 and times each chunk from its start
/// signal until every thread has finished; the others wait for the signal
/// spinning (yielding after a while), so that no wake-up latency of a
/// sleeping thread is timed.
fn ratio_threads<B, S>(name: &str, threads: usize, make: impl Fn(usize) -> (B, S) + Sync)
where
    B: FnMut(u64) -> bool,
    S: FnMut(u64) -> bool,
{
    const STOP: usize = usize::MAX;
    let side = AtomicUsize::new(0);
    let round = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    fn wait_until(mut ready: impl FnMut() -> bool) {
        let mut spins = 0u32;
        while !ready() {
            spins += 1;
            if spins < 10_000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
    #[inline(always)]
    fn run<B: FnMut(u64) -> bool, S: FnMut(u64) -> bool>(which: usize, b: &mut B, s: &mut S) {
        let now = black_box(NOW);
        let mut admitted = 0u64;
        if which == 0 {
            for _ in 0..THREAD_BATCH {
                admitted += b(now) as u64;
            }
        } else {
            for _ in 0..THREAD_BATCH {
                admitted += s(now) as u64;
            }
        }
        black_box(admitted);
    }
    let mut ratios = Vec::with_capacity(THREAD_PAIRS);
    std::thread::scope(|scope| {
        for i in 1..threads {
            let (side, round, done, make) = (&side, &round, &done, &make);
            scope.spawn(move || {
                let (mut baseline, mut subject) = make(i);
                let mut seen = 0;
                loop {
                    wait_until(|| round.load(Ordering::Acquire) != seen);
                    seen = round.load(Ordering::Acquire);
                    let which = side.load(Ordering::Acquire);
                    if which == STOP {
                        return;
                    }
                    run(which, &mut baseline, &mut subject);
                    done.fetch_add(1, Ordering::AcqRel);
                }
            });
        }
        let (mut baseline, mut subject) = make(0);
        let mut chunk = |which: usize| {
            side.store(which, Ordering::Release);
            done.store(0, Ordering::Release);
            let t = Instant::now();
            round.fetch_add(1, Ordering::AcqRel);
            run(which, &mut baseline, &mut subject);
            wait_until(|| done.load(Ordering::Acquire) == threads - 1);
            t.elapsed()
        };
        for _ in 0..20 {
            chunk(0);
            chunk(1);
        }
        for i in 0..THREAD_PAIRS {
            let (b, s) = if i % 2 == 0 {
                let b = chunk(0);
                (b, chunk(1))
            } else {
                let s = chunk(1);
                (chunk(0), s)
            };
            ratios.push(s.as_secs_f64() / b.as_secs_f64());
        }
        side.store(STOP, Ordering::Release);
        round.fetch_add(1, Ordering::AcqRel);
    });
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    println!(
        "ratio: {name}: {:.3} (quartiles {:.3}–{:.3})",
        ratios[n / 2],
        ratios[n / 4],
        ratios[3 * n / 4]
    );
}

type Governor = governor::RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;

fn governor_limiter() -> Governor {
    use governor::clock::FakeRelativeClock;
    use governor::{Quota as GQuota, RateLimiter as GLimiter};
    let clock = FakeRelativeClock::default();
    clock.advance(Duration::from_millis(1));
    let quota = GQuota::with_period(Duration::from_nanos(1))
        .expect("non-zero period")
        .allow_burst(NonZeroU32::MAX);
    GLimiter::direct_with_clock(quota, clock)
}

/// `threads` threads hammer one binding limit for `run` with a real clock;
/// prints what was admitted against `b + ⌊Δ/T⌋` and `n·k`.
fn excess(name: &str, threads: usize, leased: bool) {
    // Binding (the threads check far faster), with a burst of 100 ms so that
    // threads descheduled on a busy machine for less than that lose nothing.
    const RATE: u64 = 2_000_000; // cells per second
    const BURST: u64 = 200_000;
    let run = Duration::from_millis(300);
    let shared = Gcra::new(Quota::per_second(RATE).with_burst(BURST).at_hz(HZ));
    let policy = LeasePolicy::new(256, 100_000)
        .with_min(16)
        .with_share(threads as u64);
    let origin = Instant::now();
    let clock = || origin.elapsed().as_nanos() as u64;
    let results: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let shared = &shared;
                s.spawn(move || {
                    let mut handle = Leased::new(shared, policy);
                    let first = clock();
                    let end = first + run.as_nanos() as u64;
                    let (mut now, mut admitted) = (first, 0u64);
                    while now < end {
                        for _ in 0..64 {
                            let ok = if leased {
                                handle.check(now).is_ok()
                            } else {
                                shared.check(now).is_ok()
                            };
                            admitted += ok as u64;
                        }
                        now = clock();
                    }
                    (first, now, admitted)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let t0 = results.iter().map(|r| r.0).min().unwrap();
    let t1 = results.iter().map(|r| r.1).max().unwrap();
    let admitted: u64 = results.iter().map(|r| r.2).sum();
    let exact = BURST + (t1 - t0) * RATE / HZ;
    let nk = if leased {
        threads as u64 * policy.max_cells()
    } else {
        0
    };
    println!(
        "excess: {name}: admitted − (b + ⌊Δ/T⌋) = {} cells of {exact} (bound n·k = {nk})",
        admitted as i64 - exact as i64
    );
}

fn paired_ratios() {
    // One thread.
    let word = AtomicU64::new(0);
    let shared = Gcra::new(admitting_quota());
    let lease_source = Gcra::new(admitting_quota());
    let mut handle = Leased::new(&lease_source, policy());
    let mut local = LocalGcra::new(admitting_quota());
    let gov = governor_limiter();
    let mut leased = Side::new(NOW, 0, move |now| handle.check(now).is_ok());
    ratio(
        "1 thread: Leased::check ÷ LocalGcra::check",
        &mut Side::new(NOW, 0, |now| local.check(now).is_ok()),
        &mut leased,
    );
    ratio(
        "1 thread: Leased::check ÷ Gcra::check",
        &mut Side::new(NOW, 0, |now| shared.check(now).is_ok()),
        &mut leased,
    );
    ratio(
        "1 thread: Leased::check ÷ CAS floor",
        &mut Side::new(NOW, 0, cas(&word)),
        &mut leased,
    );
    ratio(
        "1 thread: Leased::check ÷ governor direct",
        &mut Side::new(NOW, 0, |_| gov.check().is_ok()),
        &mut leased,
    );

    // Two threads on one shared limit.
    let word = AtomicU64::new(0);
    let shared = Gcra::new(admitting_quota());
    let lease_source = Gcra::new(admitting_quota());
    let gov = governor_limiter();
    let leased = |_| {
        let mut h = Leased::new(&lease_source, policy());
        move |now| h.check(now).is_ok()
    };
    ratio_threads("2 threads: Leased::check ÷ Gcra::check (shared)", 2, |i| {
        (|now| shared.check(now).is_ok(), leased(i))
    });
    ratio_threads(
        "2 threads: Leased::check ÷ LocalGcra::check (one each)",
        2,
        |i| {
            let mut local = LocalGcra::new(admitting_quota());
            (move |now| local.check(now).is_ok(), leased(i))
        },
    );
    ratio_threads(
        "2 threads: Leased::check ÷ CAS floor (shared word)",
        2,
        |i| (cas(&word), leased(i)),
    );
    ratio_threads(
        "2 threads: Leased::check ÷ governor direct (shared)",
        2,
        |i| (|_| gov.check().is_ok(), leased(i)),
    );
    ratio_threads("2 threads: Gcra::check (shared) ÷ CAS floor", 2, |_| {
        (cas(&word), |now| shared.check(now).is_ok())
    });

    excess("2 threads, Leased (k = 256)", 2, true);
    excess("2 threads, shared Gcra::check", 2, false);
}

fn criterion_groups(c: &mut Criterion) {
    const BATCH: u64 = 1_024;
    let mut g = c.benchmark_group("lease");
    g.throughput(Throughput::Elements(BATCH));
    let source = Gcra::new(admitting_quota());
    let mut handle = Leased::new(&source, policy());
    g.bench_function("leased_check", |b| {
        b.iter(|| {
            let now = black_box(NOW);
            (0..BATCH).filter(|_| handle.check(now).is_ok()).count()
        })
    });
    let shared = Gcra::new(admitting_quota());
    g.bench_function("gcra_check", |b| {
        b.iter(|| {
            let now = black_box(NOW);
            (0..BATCH).filter(|_| shared.check(now).is_ok()).count()
        })
    });
    let mut local = LocalGcra::new(admitting_quota());
    g.bench_function("local_check", |b| {
        b.iter(|| {
            let now = black_box(NOW);
            (0..BATCH).filter(|_| local.check(now).is_ok()).count()
        })
    });
    g.finish();
}

fn main() {
    paired::main(paired_ratios, &[criterion_groups]);
}
