//! The algorithm family against the same floor, in one run.
//!
//! * `floor/cas`: one `AtomicU64` load + compare-and-swap increment, the
//!   least a shared lock-free update costs (as in `benches/gcra.rs`).
//! * `family/<algorithm>_admit`, `family/<algorithm>_deny`: checks of cost 1.
//! * `family/tuple_admit`: a (GCRA, fixed window) pair admitting.
//! * `family/any_<algorithm>_admit`: the same check through `AnyLimiter`,
//!   to compare with `family/<algorithm>_admit`.
//!
//! The one-word bucketed window admitting has 2 buckets (a limit of 2²⁰
//! takes 21 bits a bucket, and the counts get 48), denying 4 (limit 100);
//! the wide form has 8 buckets either way.
//!
//! As in `benches/gcra.rs`, each sample is a batch of 1 024 checks at one
//! opaque `now`, and limiters are called directly (generic, inlinable), as
//! the floor is. Admitting benches move `now` on by one window per batch, so
//! they admit throughout and take the window rollover once per batch (the
//! limit, 2²⁰ per window, holds a batch); denying benches exhaust a frozen
//! limiter first.
//!
//! Run: `cargo bench --bench family --features std -- --warm-up-time 1
//! --measurement-time 3`. `std` is how a host runs `SlidingLog` (a sequence
//! lock); without it the log holds a critical section, here the
//! `critical-section` crate's `std` implementation (one process-wide lock).
//! The figures to quote are the **paired ratios** printed first (`ratio:`
//! lines, see `benches/common/paired.rs`: the subject and its baseline timed
//! in alternating chunks, robust on a shared machine); the criterion results
//! follow, times per batch for profiling. `tools/bench-runner` repeats the
//! paired pass and writes docs/benchmarks.md's table.
use std::hint::black_box;
use std::sync::atomic::AtomicU64;

use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::window::{
    BucketedWindow, FixedWindow, SlidingLog, SlidingWindow, WideBucketedWindow,
};
use cellrate::{Gcra, Quota, RateLimiter};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

#[path = "common/paired.rs"]
mod paired;
use paired::{cas, ratio, Side};

const HZ: u64 = 1_000_000_000;
const BATCH: u64 = 1_024;
/// Cells per window, and the window in ticks (T = 1 tick for GCRA).
const LIMIT: u64 = 1 << 20;
const WINDOW: u64 = 1 << 20;

/// Runs `op(now)` BATCH times per sample, `now` moving on by `step` per batch.
fn batched(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    step: u64,
    mut op: impl FnMut(u64) -> bool,
) {
    g.throughput(Throughput::Elements(BATCH));
    let mut now = WINDOW;
    g.bench_function(name, |b| {
        b.iter(|| {
            now += step;
            let at = black_box(now);
            let mut admitted = 0u64;
            for _ in 0..BATCH {
                admitted += op(at) as u64;
            }
            admitted
        })
    });
}

fn admit<L: RateLimiter>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, limiter: &L) {
    batched(g, name, WINDOW, |now| limiter.check(now).is_ok());
}

fn deny<L: RateLimiter>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, limiter: &L) {
    while limiter.check(WINDOW).is_ok() {}
    batched(g, name, 0, |now| limiter.check(now).is_ok());
}

fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    let word = AtomicU64::new(0);
    batched(&mut g, "cas", 0, cas(&word));
    g.finish();
}

/// An admitting side: `now` moves on by a window per chunk.
fn admitting<L: RateLimiter>(limiter: &L) -> Side<impl FnMut(u64) -> bool + '_> {
    Side::new(WINDOW, WINDOW, move |now| limiter.check(now).is_ok())
}

/// A denying side: the limiter exhausted at a frozen `now`.
fn denying<L: RateLimiter>(limiter: &L) -> Side<impl FnMut(u64) -> bool + '_> {
    while limiter.check(WINDOW).is_ok() {}
    Side::new(WINDOW, 0, move |now| limiter.check(now).is_ok())
}

/// How this build shares the sliding log's ring (see `window::log`).
const LOG_LOCK: &str = if cfg!(feature = "std") {
    " (std: sequence lock)"
} else {
    " (no std: critical section)"
};

/// `AnyLimiter`'s configuration of `kind` at the benches' limit and window
/// (the bucketed window in 2 buckets, which it runs as a
/// `WideBucketedWindow<2>`).
fn any_config(kind: AlgorithmKind) -> LimiterConfig {
    let config = LimiterConfig::new(kind, LIMIT, WINDOW, HZ);
    if kind == AlgorithmKind::BucketedWindow {
        config.with_buckets(2)
    } else {
        config
    }
}

/// The paired ratios (subject time ÷ baseline time) the README reports.
fn paired_ratios() {
    let word = AtomicU64::new(0);
    let floor = || Side::new(WINDOW, 0, cas(&word));
    let gcra = || Gcra::new(Quota::per_ticks(LIMIT, WINDOW).at_hz(HZ));
    let (fixed, sliding, g) = (
        FixedWindow::new(LIMIT, WINDOW),
        SlidingWindow::new(LIMIT, WINDOW),
        gcra(),
    );
    ratio(
        "FixedWindow admitting ÷ CAS floor",
        &mut floor(),
        &mut admitting(&fixed),
    );
    ratio(
        "SlidingWindow admitting ÷ CAS floor",
        &mut floor(),
        &mut admitting(&sliding),
    );
    ratio(
        "Gcra admitting ÷ CAS floor",
        &mut floor(),
        &mut admitting(&g),
    );
    let log = SlidingLog::<1_024>::new(1_024, WINDOW);
    ratio(
        &format!("SlidingLog<1024> admitting ÷ CAS floor{LOG_LOCK}"),
        &mut floor(),
        &mut admitting(&log),
    );
    ratio(
        "FixedWindow denying ÷ CAS floor",
        &mut floor(),
        &mut denying(&FixedWindow::new(100, WINDOW)),
    );
    ratio(
        "SlidingWindow denying ÷ CAS floor",
        &mut floor(),
        &mut denying(&SlidingWindow::new(100, WINDOW)),
    );
    ratio(
        &format!("SlidingLog<64> denying ÷ CAS floor{LOG_LOCK}"),
        &mut floor(),
        &mut denying(&SlidingLog::<64>::new(64, WINDOW)),
    );
    ratio(
        "Gcra denying ÷ CAS floor",
        &mut floor(),
        &mut denying(&Gcra::new(Quota::per_ticks(100, WINDOW).at_hz(HZ))),
    );
    let bucketed = BucketedWindow::new(LIMIT, WINDOW, 2);
    ratio(
        "BucketedWindow (2 buckets) admitting ÷ CAS floor",
        &mut floor(),
        &mut admitting(&bucketed),
    );
    let wide = WideBucketedWindow::<8>::new(LIMIT, WINDOW);
    ratio(
        &format!("WideBucketedWindow<8> admitting ÷ CAS floor{LOG_LOCK}"),
        &mut floor(),
        &mut admitting(&wide),
    );
    ratio(
        "BucketedWindow (4 buckets) denying ÷ CAS floor",
        &mut floor(),
        &mut denying(&BucketedWindow::new(100, WINDOW, 4)),
    );
    ratio(
        &format!("WideBucketedWindow<8> denying ÷ CAS floor{LOG_LOCK}"),
        &mut floor(),
        &mut denying(&WideBucketedWindow::<8>::new(100, WINDOW)),
    );
    let pair = (gcra(), FixedWindow::new(LIMIT, WINDOW));
    ratio(
        "(Gcra, FixedWindow) admitting ÷ CAS floor",
        &mut floor(),
        &mut admitting(&pair),
    );
    for (kind, name) in [
        (AlgorithmKind::FixedWindow, "FixedWindow"),
        (AlgorithmKind::SlidingWindow, "SlidingWindow"),
        (AlgorithmKind::BucketedWindow, "WideBucketedWindow<2>"),
        (AlgorithmKind::Gcra, "Gcra"),
    ] {
        let any: AnyLimiter<2> = AnyLimiter::from_config(any_config(kind)).unwrap();
        let name = format!("AnyLimiter ÷ {name}, admitting");
        match kind {
            AlgorithmKind::FixedWindow => {
                let concrete = FixedWindow::new(LIMIT, WINDOW);
                ratio(&name, &mut admitting(&concrete), &mut admitting(&any));
            }
            AlgorithmKind::SlidingWindow => {
                let concrete = SlidingWindow::new(LIMIT, WINDOW);
                ratio(&name, &mut admitting(&concrete), &mut admitting(&any));
            }
            AlgorithmKind::BucketedWindow => {
                let concrete = WideBucketedWindow::<2>::new(LIMIT, WINDOW);
                ratio(&name, &mut admitting(&concrete), &mut admitting(&any));
            }
            _ => {
                let concrete = gcra();
                ratio(&name, &mut admitting(&concrete), &mut admitting(&any));
            }
        };
    }
}

fn family(c: &mut Criterion) {
    let mut g = c.benchmark_group("family");
    let gcra = || Gcra::new(Quota::per_ticks(LIMIT, WINDOW).at_hz(HZ));
    admit(
        &mut g,
        "fixed_window_admit",
        &FixedWindow::new(LIMIT, WINDOW),
    );
    admit(
        &mut g,
        "sliding_window_admit",
        &SlidingWindow::new(LIMIT, WINDOW),
    );
    admit(&mut g, "gcra_admit", &gcra());
    // The log keeps every admission time: its limit is its capacity.
    let log = SlidingLog::<1_024>::new(1_024, WINDOW);
    admit(&mut g, "sliding_log_admit", &log);
    admit(
        &mut g,
        "bucketed_window_admit",
        &BucketedWindow::new(LIMIT, WINDOW, 2),
    );
    admit(
        &mut g,
        "wide_bucketed_window_admit",
        &WideBucketedWindow::<8>::new(LIMIT, WINDOW),
    );

    deny(&mut g, "fixed_window_deny", &FixedWindow::new(100, WINDOW));
    deny(
        &mut g,
        "sliding_window_deny",
        &SlidingWindow::new(100, WINDOW),
    );
    deny(
        &mut g,
        "sliding_log_deny",
        &SlidingLog::<64>::new(64, WINDOW),
    );
    deny(
        &mut g,
        "bucketed_window_deny",
        &BucketedWindow::new(100, WINDOW, 4),
    );
    deny(
        &mut g,
        "wide_bucketed_window_deny",
        &WideBucketedWindow::<8>::new(100, WINDOW),
    );
    deny(
        &mut g,
        "gcra_deny",
        &Gcra::new(Quota::per_ticks(100, WINDOW).at_hz(HZ)),
    );

    admit(
        &mut g,
        "tuple_admit",
        &(gcra(), FixedWindow::new(LIMIT, WINDOW)),
    );

    for (kind, name) in [
        (AlgorithmKind::FixedWindow, "any_fixed_window_admit"),
        (AlgorithmKind::SlidingWindow, "any_sliding_window_admit"),
        (AlgorithmKind::BucketedWindow, "any_bucketed_window_admit"),
        (AlgorithmKind::Gcra, "any_gcra_admit"),
    ] {
        let any: AnyLimiter<2> = AnyLimiter::from_config(any_config(kind)).unwrap();
        admit(&mut g, name, &any);
    }
    g.finish();
}

fn main() {
    paired::main(paired_ratios, &[floor, family]);
}
