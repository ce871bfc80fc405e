//! The algorithm family against the same floor, in one run.
//!
//! * `floor/cas`: one `AtomicU64` load + compare-and-swap increment, the
//!   least a shared lock-free update costs (the same floor as `benches/gcra.rs`).
//! * `family/<algorithm>_admit`, `family/<algorithm>_deny`: one check of
//!   cost 1. Admitting window benches advance `now` by one window per
//!   iteration (so they admit forever and include the rollover path);
//!   denying benches first exhaust a frozen limiter.
//! * `family/tuple_admit`: a (GCRA, fixed window) pair admitting.
//! * `family/any_<algorithm>_admit`: the same check through `AnyLimiter`.
//!
//! Run: `cargo bench --bench family -- --warm-up-time 1 --measurement-time 3`.
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::window::{FixedWindow, SlidingLog, SlidingWindow};
use cellrate::{Gcra, Quota, RateLimiter};
use criterion::{criterion_group, criterion_main, Criterion};

const HZ: u64 = 1_000_000_000;

fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    let word = AtomicU64::new(0);
    g.bench_function("cas", |b| {
        b.iter(|| {
            let mut current = word.load(Ordering::Acquire);
            loop {
                match word.compare_exchange_weak(
                    current,
                    black_box(current + 1),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(actual) => current = actual,
                }
            }
        })
    });
    g.finish();
}

/// Benches `limiter` admitting, with `now` advancing by `step` each time.
fn admit(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    limiter: &dyn RateLimiter,
    step: u64,
) {
    let now = Cell::new(1_000_000u64);
    g.bench_function(name, |b| {
        b.iter(|| {
            let t = now.get() + step;
            now.set(t);
            limiter.check(black_box(t)).is_ok()
        })
    });
}

/// Benches `limiter` denying at a frozen `now`.
fn deny(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    limiter: &dyn RateLimiter,
) {
    let now = 1_000_000u64;
    while limiter.check(now).is_ok() {}
    g.bench_function(name, |b| b.iter(|| limiter.check(black_box(now)).is_err()));
}

fn family(c: &mut Criterion) {
    let mut g = c.benchmark_group("family");
    let window = 1_000;
    let fixed = FixedWindow::new(100, window);
    let sliding = SlidingWindow::new(100, window);
    let log = SlidingLog::<64>::new(64, window);
    let gcra = Gcra::new(Quota::per_ticks(100, window).at_hz(HZ));
    admit(&mut g, "fixed_window_admit", &fixed, window);
    admit(&mut g, "sliding_window_admit", &sliding, window);
    admit(&mut g, "sliding_log_admit", &log, window);
    admit(&mut g, "gcra_admit", &gcra, window);
    deny(&mut g, "fixed_window_deny", &FixedWindow::new(100, window));
    deny(
        &mut g,
        "sliding_window_deny",
        &SlidingWindow::new(100, window),
    );
    deny(
        &mut g,
        "sliding_log_deny",
        &SlidingLog::<64>::new(64, window),
    );
    deny(
        &mut g,
        "gcra_deny",
        &Gcra::new(Quota::per_ticks(100, window).at_hz(HZ)),
    );

    let pair = (
        Gcra::new(Quota::per_ticks(100, window).at_hz(HZ)),
        FixedWindow::new(100, window),
    );
    admit(&mut g, "tuple_admit", &pair, window);

    for (kind, name) in [
        (AlgorithmKind::FixedWindow, "any_fixed_window_admit"),
        (AlgorithmKind::SlidingWindow, "any_sliding_window_admit"),
        (AlgorithmKind::Gcra, "any_gcra_admit"),
    ] {
        let any: AnyLimiter<1> =
            AnyLimiter::from_config(LimiterConfig::new(kind, 100, window, HZ)).unwrap();
        admit(&mut g, name, &any, window);
    }
    g.finish();
}

criterion_group!(benches, floor, family);
criterion_main!(benches);
