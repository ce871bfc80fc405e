//! Keyed limiting: cellrate's `Keyed` table against `governor`'s keyed
//! limiter on its default map (`DashMap`), in one run, both on a frozen
//! clock and admitting throughout (burst 2³² − 1 per key).
//!
//! Cases, each over the same key sequences for every contender:
//!
//! * `hot`: one key.
//! * `rr_1k`, `rr_100k`: 1 000 or 100 000 keys in turn.
//! * `random_1k`, `random_100k`: keys drawn uniformly (a fixed
//!   pseudo-random sequence, built once outside the timed loops).
//! * `cellrate/dense_*_100k`: the 100 000 keys in 131 072 slots (the
//!   memory figure's configuration, 98.5 % tracked) instead of 262 144.
//! * `cellrate/random_1k_siphash`: the 1 000 random keys wrapped in
//!   `Hashed` (SipHash-1-3 placement and fingerprint).
//! * `floor_slot16/*`: the least any table of 16-byte slots can do per
//!   check (mix, probe from the home, one 16-byte load and
//!   compare-and-swap): a bound, not a limiter. The floors of the layouts
//!   the keyed design rejected, and their last figures, are in
//!   docs/design/keyed.md.
//! * `keyed_floor/*`: a 16-byte and an 8-byte atomic load +
//!   compare-and-swap over 1 024 words in turn, and `KeyId` of a `u32`.
//!
//! **Paired ratios** (`ratio:` lines, printed first): the machine is shared,
//! and criterion's measurements of two functions can be seconds apart, under
//! different loads. So for each case, chunks of 2 048 checks of governor
//! and of the contender alternate (ABBA), each walking the same keys, and
//! the figure is the median over 600 pairs of governor's time ÷ the
//! contender's (above 1: faster than governor), with quartiles. Each side's
//! check is inlined into its own loop (`ratio` is generic), as in a
//! criterion loop. These are the figures docs/benchmarks.md tables
//! (`bench-runner --runs 5 keyed`); the criterion timings that follow
//! measure each case's contenders back to back. A single run can land far
//! from the median: compare medians of several runs from one build
//! (docs/design/keyed.md has what the harness learned, and how to time the
//! `x86-64-v2` build).
//!
//! Fairness: every key is inserted before measuring; neither loop allocates
//! or hashes anything the library would not. Each cellrate table has its
//! own monomorphic closure. Governor reads its fake clock (one relaxed
//! atomic load) where cellrate is given `now`.
//!
//! Memory per tracked key is printed first (`memory:` lines), measured the
//! same way for both: bytes of the table over keys tracked. Governor's bytes
//! are counted by a counting global allocator around building its limiter
//! and inserting the keys; cellrate's table allocates nothing, so its bytes
//! are `size_of` of the table (the allocator confirms that inserting
//! allocates nothing). The `occupancy` lines offer 0.5 to 1.1 keys per slot
//! to one 131 072-slot table and count the keys that got a slot: about
//! 98.6 % of keys at 0.76 keys per slot (21.4 bytes per tracked key), 91.5 %
//! at 1.0 (17.5 bytes). A 16-byte slot per key cannot go below 16 bytes per
//! tracked key.
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::time::Duration;

use cellrate::keyed::{Hashed, Keyed, Seed, WhenFull};
use cellrate::Quota;
use criterion::Criterion;

/// Counts the bytes currently allocated through it.
struct Counting;

static ALLOCATED: AtomicIsize = AtomicIsize::new(0);

// The package denies `unsafe_code` (Cargo.toml); a global allocator cannot
// be written without it, and this one only counts.
// SAFETY: every method forwards to `System` with the caller's own arguments,
// so `System`'s guarantees hold unchanged; the counter is only arithmetic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> isize {
    ALLOCATED.load(Ordering::Relaxed)
}

const HZ: u64 = 1_000_000_000;
const NOW: u64 = 1_000_000;
const SMALL: u32 = 1_000;
const LARGE: u32 = 100_000;

const fn admitting() -> Quota {
    Quota::per_ticks(1, 1).with_burst(u32::MAX as u64).at_hz(HZ)
}

#[path = "common/keyed_floor.rs"]
mod keyed_floor;
use keyed_floor::{random_keys, Floor};

/// The bench quota of `Floor::step16`.
static STEP_QUOTA: Quota = admitting();

const SEED: Seed = Seed::new(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344);

// Capacities: about twice the keys, so that (nearly) every key is tracked
// (a probe window of 16 slots places ~98.6 % of keys at 76 % load and
// ~99.97 % at ~50 %; see the memory lines). An untracked key is admitted
// (`WhenFull::Admit`) after reading its whole window.
static HOT: Keyed<Quota, 16> = Keyed::new(admitting(), WhenFull::Admit, SEED);
static SMALL_TABLE: Keyed<Quota, 2_048> = Keyed::new(admitting(), WhenFull::Admit, SEED);
static LARGE_TABLE: Keyed<Quota, 262_144> = Keyed::new(admitting(), WhenFull::Admit, SEED);
// The densest table used for the memory figure: 100 000 keys in 131 072 slots.
static DENSE_TABLE: Keyed<Quota, 131_072> = Keyed::new(admitting(), WhenFull::Admit, SEED);
// The 1 000 keys again, wrapped in `Hashed` (SipHash-1-3 placement).
static HASHED_TABLE: Keyed<Quota, 2_048> = Keyed::new(admitting(), WhenFull::Admit, SEED);
// Occupancy curve: keys 0.. inserted in steps into one table.
static CURVE_TABLE: Keyed<Quota, 131_072> = Keyed::new(admitting(), WhenFull::Admit, SEED);

type Governor = governor::RateLimiter<
    u32,
    governor::state::keyed::DefaultKeyedStateStore<u32>,
    governor::clock::FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;

fn governor_limiter() -> Governor {
    let clock = governor::clock::FakeRelativeClock::default();
    clock.advance(Duration::from_millis(1));
    let quota = governor::Quota::with_period(Duration::from_nanos(1))
        .expect("non-zero period")
        .allow_burst(NonZeroU32::MAX);
    governor::RateLimiter::dashmap_with_clock(quota, clock)
}

fn tracked<const N: usize>(table: &Keyed<Quota, N>, n: u32) -> usize {
    (0..n).filter(|k| table.contains(k, NOW)).count()
}

/// Prints bytes per tracked key for both, measured the same way.
fn memory() {
    let mut governor_per_key = [0.0f64; 2];
    for (i, n) in [SMALL, LARGE].into_iter().enumerate() {
        let before = allocated();
        let limiter = governor_limiter();
        for key in 0..n {
            let _ = limiter.check_key(&key);
        }
        let bytes = allocated() - before;
        governor_per_key[i] = bytes as f64 / n as f64;
        println!(
            "memory: governor {n} keys: {bytes} bytes, {:.1} bytes/key (len {})",
            bytes as f64 / n as f64,
            limiter.len()
        );
        drop(limiter);
    }
    let report = |name: &str, size: usize, capacity: usize, tracked: usize, n: u32| {
        let per_key = size as f64 / tracked as f64;
        let governor = governor_per_key[usize::from(n == LARGE)];
        // The same shape as the speed ratios (governor ÷ cellrate, above 1:
        // cellrate uses less), so the runner tables it with them.
        println!(
            "ratio: memory per tracked key, {name} table, {n} keys: governor ÷ contender {:.2}",
            governor / per_key
        );
        println!(
            "memory: cellrate {name} {n} keys: {size} bytes, {capacity} slots of {} bytes, {tracked} tracked, {:.1} bytes/tracked key",
            size_of::<cellrate::keyed::Slot>(),
            size as f64 / tracked as f64
        );
    };
    let before = allocated();
    for key in 0..LARGE {
        let _ = DENSE_TABLE.check(&key, NOW);
    }
    assert_eq!(allocated(), before, "cellrate allocated while inserting");
    report(
        "dense",
        size_of_val(&DENSE_TABLE),
        DENSE_TABLE.capacity(),
        tracked(&DENSE_TABLE, LARGE),
        LARGE,
    );
    for key in 0..SMALL {
        let _ = SMALL_TABLE.check(&key, NOW);
    }
    for key in 0..LARGE {
        let _ = LARGE_TABLE.check(&key, NOW);
    }
    report(
        "bench",
        size_of_val(&SMALL_TABLE),
        SMALL_TABLE.capacity(),
        tracked(&SMALL_TABLE, SMALL),
        SMALL,
    );
    for key in 0..SMALL {
        let _ = HASHED_TABLE.check(&Hashed(key), NOW);
    }
    // How full the probe window lets a table get: insert keys in steps and
    // count how many of them got a slot.
    let capacity = CURVE_TABLE.capacity();
    let mut inserted = 0u32;
    for percent in [50u32, 60, 70, 76, 80, 85, 90, 95, 100, 110] {
        let keys = (capacity as u64 * percent as u64 / 100) as u32;
        for key in inserted..keys {
            let _ = CURVE_TABLE.check(&key, NOW);
        }
        inserted = keys;
        let tracked = (0..keys).filter(|k| CURVE_TABLE.contains(k, NOW)).count();
        println!(
            "memory: occupancy {percent}% offered: {keys} keys, {tracked} tracked ({:.1}% of keys, {:.1}% of slots), {:.1} bytes/tracked key",
            100.0 * tracked as f64 / keys as f64,
            100.0 * tracked as f64 / capacity as f64,
            size_of_val(&CURVE_TABLE) as f64 / tracked as f64
        );
    }
    report(
        "bench",
        size_of_val(&LARGE_TABLE),
        LARGE_TABLE.capacity(),
        tracked(&LARGE_TABLE, LARGE),
        LARGE,
    );
}

/// How a case walks its keys: in turn, or along the fixed random sequence.
#[derive(Clone, Copy)]
enum Order {
    RoundRobin,
    Random,
}

/// Times `f` over the keys of `order` (the same walk for every library).
fn walk(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: String,
    order: Order,
    n: u32,
    keys: &[u32],
    f: impl Fn(u32) -> bool,
) {
    match order {
        Order::RoundRobin => {
            let mut next = 0u32;
            g.bench_function(name, |b| {
                b.iter(|| {
                    next = if next + 1 == n { 0 } else { next + 1 };
                    f(black_box(next))
                })
            });
        }
        Order::Random => {
            let mut i = 0usize;
            g.bench_function(name, |b| {
                b.iter(|| {
                    i = (i + 1) & (keys.len() - 1);
                    f(black_box(keys[i]))
                })
            });
        }
    }
}

/// Every case measures cellrate, the floor and governor back to back
/// (the machine is shared, so pairs measured far apart in time drift).
fn speed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    let small_random = random_keys(SMALL);
    let large_random = random_keys(LARGE);

    g.bench_function("cellrate/hot", |b| {
        b.iter(|| HOT.check(black_box(&7u32), NOW).is_ok())
    });
    let hot = governor_limiter();
    g.bench_function("governor/hot", |b| {
        b.iter(|| hot.check_key(black_box(&7u32)).is_ok())
    });

    // One monomorphic closure per table (no branch on the table in the
    // measured loop: governor's loop has none either).
    let small_floor = Floor::new(SMALL_TABLE.capacity(), SMALL);
    let large_floor = Floor::new(LARGE_TABLE.capacity(), LARGE);
    let small_gov = governor_limiter();
    for key in 0..SMALL {
        let _ = small_gov.check_key(&key);
    }
    let large_gov = governor_limiter();
    for key in 0..LARGE {
        let _ = large_gov.check_key(&key);
    }
    for (order, label) in [(Order::RoundRobin, "rr"), (Order::Random, "random")] {
        let keys = &small_random;
        let case = format!("{label}_1k");
        walk(
            &mut g,
            format!("cellrate/{case}"),
            order,
            SMALL,
            keys,
            |k| SMALL_TABLE.check(&k, NOW).is_ok(),
        );
        walk(
            &mut g,
            format!("floor_slot16/{case}"),
            order,
            SMALL,
            keys,
            |k| small_floor.slot16(k, NOW),
        );
        walk(
            &mut g,
            format!("governor/{case}"),
            order,
            SMALL,
            keys,
            |k| small_gov.check_key(&k).is_ok(),
        );
    }
    for (order, label) in [(Order::RoundRobin, "rr"), (Order::Random, "random")] {
        let keys = &large_random;
        let case = format!("{label}_100k");
        walk(
            &mut g,
            format!("cellrate/{case}"),
            order,
            LARGE,
            keys,
            |k| LARGE_TABLE.check(&k, NOW).is_ok(),
        );
        // The same 100 000 keys in the denser table (98.5 % tracked, the
        // rest admitted untracked after a full window scan).
        walk(
            &mut g,
            format!("cellrate/dense_{case}"),
            order,
            LARGE,
            keys,
            |k| DENSE_TABLE.check(&k, NOW).is_ok(),
        );
        walk(
            &mut g,
            format!("floor_slot16/{case}"),
            order,
            LARGE,
            keys,
            |k| large_floor.slot16(k, NOW),
        );
        walk(
            &mut g,
            format!("governor/{case}"),
            order,
            LARGE,
            keys,
            |k| large_gov.check_key(&k).is_ok(),
        );
    }

    // SipHash-1-3 placement of the same keys (`Hashed`): what the cheaper
    // home mix of exact keys saves.
    walk(
        &mut g,
        "cellrate/random_1k_siphash".into(),
        Order::Random,
        SMALL,
        &small_random,
        |k| HASHED_TABLE.check(&Hashed(k), NOW).is_ok(),
    );
    g.finish();
}

/// What one slot update costs at least: a 16-byte atomic load and
/// compare-and-swap (portable-atomic, as the table uses it), next to the
/// 8-byte pair every shared GCRA pays, each over 1 024 words in turn (one
/// word over and over measures the same-line round trip instead).
fn floors(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_floor");
    let wide: Vec<portable_atomic::AtomicU128> = (0..1024)
        .map(|_| portable_atomic::AtomicU128::new(0))
        .collect();
    let mut i = 0usize;
    g.bench_function("u128_load_cas", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            let wide = &wide[i];
            let v = wide.load(Ordering::Acquire);
            black_box(wide.compare_exchange(
                v,
                black_box(v + 1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ))
        })
    });
    let narrow: Vec<AtomicU64> = (0..1024).map(|_| AtomicU64::new(0)).collect();
    let mut i = 0usize;
    g.bench_function("u64_load_cas", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            let narrow = &narrow[i];
            let v = narrow.load(Ordering::Acquire);
            black_box(narrow.compare_exchange(
                v,
                black_box(v + 1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ))
        })
    });
    let probe: Keyed<Quota, 16> = Keyed::new(admitting(), WhenFull::Admit, SEED);
    g.bench_function("key_id_u32", |b| b.iter(|| probe.key_id(black_box(&7u32))));
    g.finish();
}

/// A walker over a case's keys: the next key in turn, or the next of the
/// fixed random sequence.
struct Walk<'a> {
    order: Order,
    n: u32,
    keys: &'a [u32],
    at: usize,
}

impl Walk<'_> {
    #[inline(always)]
    fn next(&mut self) -> u32 {
        self.at += 1;
        match self.order {
            Order::RoundRobin => {
                if self.at == self.n as usize {
                    self.at = 0;
                }
                self.at as u32
            }
            Order::Random => self.keys[self.at & (self.keys.len() - 1)],
        }
    }
}

/// Runs `CHUNK` checks of `f` along `walk`, returning the elapsed time.
fn chunk(walk: &mut Walk<'_>, f: &impl Fn(u32) -> bool) -> std::time::Duration {
    let start = std::time::Instant::now();
    for _ in 0..CHUNK {
        black_box(f(black_box(walk.next())));
    }
    start.elapsed()
}

const CHUNK: usize = 2_048;
const PAIRS: usize = 600;

/// Prints the median over `PAIRS` alternating chunk pairs of governor's
/// time ÷ the contender's, and the quartiles. Generic, so that each side's
/// check is inlined into its own loop as in criterion's measurements.
fn ratio(
    name: &str,
    order: Order,
    n: u32,
    keys: &[u32],
    governor: impl Fn(u32) -> bool,
    contender: impl Fn(u32) -> bool,
) {
    ratio_to("governor", name, order, n, keys, governor, contender)
}

/// [`ratio`] against another baseline, named `base` in the line.
fn ratio_to(
    base: &str,
    name: &str,
    order: Order,
    n: u32,
    keys: &[u32],
    governor: impl Fn(u32) -> bool,
    contender: impl Fn(u32) -> bool,
) {
    let walk = || Walk {
        order,
        n,
        keys,
        at: 0,
    };
    let (mut gw, mut cw) = (walk(), walk());
    // Warm both up.
    for _ in 0..50 {
        chunk(&mut gw, &governor);
        chunk(&mut cw, &contender);
    }
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            let (gt, ct) = if i % 2 == 0 {
                let gt = chunk(&mut gw, &governor);
                (gt, chunk(&mut cw, &contender))
            } else {
                let ct = chunk(&mut cw, &contender);
                (chunk(&mut gw, &governor), ct)
            };
            gt.as_secs_f64() / ct.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "ratio: {name}: {base} ÷ contender {:.2} (quartiles {:.2}–{:.2})",
        ratios[PAIRS / 2],
        ratios[PAIRS / 4],
        ratios[3 * PAIRS / 4]
    );
}

/// Paired ratios, robust to a shared machine: chunks of `CHUNK` checks of
/// governor and of a contender alternate (ABBA), each on its own walk over
/// the same keys, and the ratio reported is the median over `PAIRS` chunk
/// pairs of governor's time ÷ the contender's. Other processes slow both
/// sides of a pair alike, where criterion's separate measurements of the two
/// can be seconds apart. Printed as `ratio:` lines (above 1: faster than
/// governor).
fn paired() {
    let small_random = random_keys(SMALL);
    let large_random = random_keys(LARGE);
    let small_floor = Floor::new(SMALL_TABLE.capacity(), SMALL);
    let large_floor = Floor::new(LARGE_TABLE.capacity(), LARGE);
    let hot = governor_limiter();
    let small_gov = governor_limiter();
    for key in 0..SMALL {
        let _ = small_gov.check_key(&key);
    }
    let large_gov = governor_limiter();
    for key in 0..LARGE {
        let _ = large_gov.check_key(&key);
    }
    let gov_hot = |k: u32| hot.check_key(&k).is_ok();
    ratio("cellrate hot", Order::RoundRobin, 1, &[], gov_hot, |k| {
        HOT.check(&k, NOW).is_ok()
    });
    for (order, label) in [(Order::RoundRobin, "rr"), (Order::Random, "random")] {
        let gov = |k: u32| small_gov.check_key(&k).is_ok();
        let keys = &small_random;
        ratio(
            &format!("cellrate {label}_1k"),
            order,
            SMALL,
            keys,
            gov,
            |k| SMALL_TABLE.check(&k, NOW).is_ok(),
        );
        ratio(
            &format!("floor_slot16 {label}_1k"),
            order,
            SMALL,
            keys,
            gov,
            |k| small_floor.slot16(k, NOW),
        );
    }
    for (order, label) in [(Order::RoundRobin, "rr"), (Order::Random, "random")] {
        let gov = |k: u32| large_gov.check_key(&k).is_ok();
        let keys = &large_random;
        ratio(
            &format!("cellrate {label}_100k"),
            order,
            LARGE,
            keys,
            gov,
            |k| LARGE_TABLE.check(&k, NOW).is_ok(),
        );
        ratio(
            &format!("cellrate dense_{label}_100k"),
            order,
            LARGE,
            keys,
            gov,
            |k| DENSE_TABLE.check(&k, NOW).is_ok(),
        );
        ratio(
            &format!("floor_slot16 {label}_100k"),
            order,
            LARGE,
            keys,
            gov,
            |k| large_floor.slot16(k, NOW),
        );
    }
    let (small_steps, large_steps) = (
        Floor::new(SMALL_TABLE.capacity(), SMALL),
        Floor::new(LARGE_TABLE.capacity(), LARGE),
    );
    direct(
        "1k",
        SMALL,
        &small_random,
        &small_floor,
        &small_steps,
        |k| SMALL_TABLE.check(&k, NOW).is_ok(),
    );
    direct(
        "100k",
        LARGE,
        &large_random,
        &large_floor,
        &large_steps,
        |k| LARGE_TABLE.check(&k, NOW).is_ok(),
    );
}

/// The table against its floors directly (no governor between them), on
/// random keys: `floor_slot16`, and `floor_step16`, 16-byte slots of their
/// own with the GCRA step a table's check runs in place of the bare
/// increment (what the step itself adds to a 16-byte-slot check).
fn direct(
    label: &str,
    n: u32,
    keys: &[u32],
    slots: &Floor,
    steps: &Floor,
    table: impl Fn(u32) -> bool,
) {
    let slot = |k: u32| slots.slot16(k, NOW);
    let step = |k: u32| steps.step16(k, NOW, &STEP_QUOTA);
    let name = |who: &str| format!("{who} random_{label}");
    ratio_to(
        "floor_slot16",
        &name("cellrate"),
        Order::Random,
        n,
        keys,
        slot,
        &table,
    );
    ratio_to(
        "floor_slot16",
        &name("floor_step16"),
        Order::Random,
        n,
        keys,
        slot,
        step,
    );
    ratio_to(
        "floor_step16",
        &name("cellrate"),
        Order::Random,
        n,
        keys,
        step,
        &table,
    );
}

fn main() {
    memory();
    paired();
    // `-- --paired-only` (as `tools/bench-runner` runs the benches):
    // the memory and paired lines only, criterion skipped.
    if std::env::args().any(|a| a == "--paired-only") {
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    speed(&mut c);
    floors(&mut c);
    c.final_summary();
}
