//! The core hot paths against their floors, in one run.
//!
//! * `cas_floor`: one `AtomicU64` load + compare-and-swap increment (the least
//!   any shared lock-free update can cost).
//! * `load_compare_floor`: one atomic load and a compare (the least a denial
//!   can cost).
//! * `gcra/*`: `Gcra::check` admitting and denying, `check_n`, `LocalGcra`.
//! * `governor/direct`: the `governor` crate's direct limiter on its fake
//!   clock, frozen, as the outside baseline.
//!
//! Every admitting bench uses a frozen `now` and a burst of 2³² − 1 cells so it
//! admits throughout the run; every denying bench first exhausts its limiter.
//! `scripts/bench_table.py` turns the results into the README's ratios.
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cellrate::{Gcra, LocalGcra, Quota};
use criterion::{criterion_group, criterion_main, Criterion};

const HZ: u64 = 1_000_000_000;
const BIG_BURST: u64 = u32::MAX as u64;

fn admitting_quota() -> Quota {
    Quota::per_ticks(1, 1).with_burst(BIG_BURST).at_hz(HZ)
}

fn floors(c: &mut Criterion) {
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
    g.bench_function("load_compare", |b| {
        b.iter(|| black_box(word.load(Ordering::Acquire) > black_box(7)))
    });
    g.finish();
}

fn gcra(c: &mut Criterion) {
    let mut g = c.benchmark_group("gcra");
    let now = 1_000_000;

    let admitting = Gcra::new(admitting_quota());
    g.bench_function("check_admit", |b| {
        b.iter(|| admitting.check(black_box(now)).is_ok())
    });

    let admitting_n = Gcra::new(admitting_quota());
    g.bench_function("check_n_admit", |b| {
        b.iter(|| admitting_n.check_n(black_box(now), black_box(3)).is_ok())
    });

    let denying = Gcra::new(Quota::per_second(10).at_hz(HZ));
    while denying.check(now).is_ok() {}
    g.bench_function("check_deny", |b| {
        b.iter(|| denying.check(black_box(now)).is_err())
    });

    let mut local = LocalGcra::new(admitting_quota());
    g.bench_function("local_check_admit", |b| {
        b.iter(|| local.check(black_box(now)).is_ok())
    });
    g.finish();
}

fn governor(c: &mut Criterion) {
    use governor::clock::FakeRelativeClock;
    use governor::{Quota as GQuota, RateLimiter as GLimiter};
    let mut g = c.benchmark_group("governor");
    let clock = FakeRelativeClock::default();
    clock.advance(Duration::from_millis(1));
    let quota = GQuota::with_period(Duration::from_nanos(1))
        .expect("non-zero period")
        .allow_burst(NonZeroU32::MAX);
    let admitting = GLimiter::direct_with_clock(quota, clock.clone());
    g.bench_function("direct_admit", |b| {
        b.iter(|| black_box(admitting.check().is_ok()))
    });

    let denying =
        GLimiter::direct_with_clock(GQuota::per_second(NonZeroU32::new(10).unwrap()), clock);
    while denying.check().is_ok() {}
    g.bench_function("direct_deny", |b| {
        b.iter(|| black_box(denying.check().is_err()))
    });
    g.finish();
}

criterion_group!(benches, floors, gcra, governor);
criterion_main!(benches);
