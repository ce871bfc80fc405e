//! Paired ratios: a subject and its baseline timed in alternating chunks.
//!
//! Criterion measures one function after another, seconds apart; on a shared
//! machine the load can change in between and move a ratio by tens of
//! percent. Here chunks of [`BATCH`] operations of the baseline and of the
//! subject alternate (ABBA, so neither always runs second), each chunk at
//! one opaque `now` (as in the criterion benches), and the printed figure
//! is the median over [`PAIRS`] pairs of subject time ÷ baseline time, with
//! quartiles: a neighbour that slows the machine for a while slows both
//! sides of a pair. The benches print these `ratio:` lines first, then run
//! criterion as usual; with `-- --paired-only` they print the `ratio:`
//! lines alone. `tools/bench-runner` runs a bench that way several times,
//! takes the median over runs and writes docs/benchmarks.md's tables.
// Each bench includes this module and uses part of it.
#![allow(dead_code)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Operations per chunk.
pub const BATCH: u64 = 1_024;
/// Chunks of each side; the median is over this many pairs.
pub const PAIRS: usize = 10_000;

/// One side of a pair: `op(now)`, with `now` moving on by `step` per chunk.
pub struct Side<F> {
    pub op: F,
    pub now: u64,
    pub step: u64,
}

impl<F: FnMut(u64) -> bool> Side<F> {
    pub fn new(now: u64, step: u64, op: F) -> Self {
        Side { op, now, step }
    }

    #[inline(never)]
    fn chunk(&mut self) -> Duration {
        self.now += self.step;
        let now = black_box(self.now);
        let start = Instant::now();
        let mut admitted = 0u64;
        for _ in 0..BATCH {
            admitted += (self.op)(now) as u64;
        }
        black_box(admitted);
        start.elapsed()
    }
}

/// A bench's `main`: the paired ratios, then, unless `-- --paired-only`,
/// the criterion `groups`.
pub fn main(paired_ratios: impl FnOnce(), groups: &[fn(&mut criterion::Criterion)]) {
    paired_ratios();
    if only() {
        return;
    }
    let mut c = criterion::Criterion::default().configure_from_args();
    for group in groups {
        group(&mut c);
    }
    c.final_summary();
}

/// Whether to print only the paired ratios and skip criterion
/// (`-- --paired-only`, as `tools/bench-runner` runs the benches).
pub fn only() -> bool {
    std::env::args().any(|a| a == "--paired-only")
}

/// Prints `ratio: <name>: <median> (quartiles …)` for the time of `reps`
/// calls of `subject` ÷ the time of `reps` calls of `baseline`, timed in
/// alternating chunks as [`ratio`] does, and returns the median. For work
/// that is not one `op(now)` (a burst of packets, say).
pub fn ratio_calls(
    name: &str,
    reps: u32,
    baseline: &mut impl FnMut(),
    subject: &mut impl FnMut(),
) -> f64 {
    #[inline(never)]
    fn chunk(reps: u32, f: &mut impl FnMut()) -> Duration {
        let start = Instant::now();
        for _ in 0..reps {
            f();
        }
        start.elapsed()
    }
    for _ in 0..50 {
        chunk(reps, baseline);
        chunk(reps, subject);
    }
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            let (b, s) = if i % 2 == 0 {
                let b = chunk(reps, baseline);
                (b, chunk(reps, subject))
            } else {
                let s = chunk(reps, subject);
                (chunk(reps, baseline), s)
            };
            s.as_secs_f64() / b.as_secs_f64()
        })
        .collect();
    report(name, ratios.as_mut_slice())
}

/// Prints `ratio: <name>: <median> (quartiles <q1>–<q3>)` for `ratios`
/// (each subject ÷ baseline, one per pair or round; sorted in place), the
/// line `tools/bench-runner` reads, and returns the median.
pub fn report(name: &str, ratios: &mut [f64]) -> f64 {
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = ratios[n / 2];
    println!(
        "ratio: {name}: {median:.2} (quartiles {:.2}–{:.2})",
        ratios[n / 4],
        ratios[3 * n / 4]
    );
    median
}

/// Prints `ratio: <name>: <median> (quartiles <q1>–<q3>)` for the time of
/// `subject` ÷ the time of `baseline`, and returns the median.
pub fn ratio<B, S>(name: &str, baseline: &mut Side<B>, subject: &mut Side<S>) -> f64
where
    B: FnMut(u64) -> bool,
    S: FnMut(u64) -> bool,
{
    for _ in 0..50 {
        baseline.chunk();
        subject.chunk();
    }
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            let (b, s) = if i % 2 == 0 {
                let b = baseline.chunk();
                (b, subject.chunk())
            } else {
                let s = subject.chunk();
                (baseline.chunk(), s)
            };
            s.as_secs_f64() / b.as_secs_f64()
        })
        .collect();
    report(name, ratios.as_mut_slice())
}

/// One load + compare-and-swap increment of `word`: the floor of any shared
/// lock-free update (the baseline of `benches/gcra.rs` and
/// `benches/family.rs`).
pub fn cas(word: &AtomicU64) -> impl FnMut(u64) -> bool + '_ {
    move |_| {
        let mut current = word.load(Ordering::Acquire);
        loop {
            match word.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }
}
