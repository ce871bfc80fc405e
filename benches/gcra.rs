//! The core hot paths against their floors, in one run.
//!
//! * `floor/cas`: one `AtomicU64` load + compare-and-swap increment (the least
//!   any shared lock-free update can cost).
//! * `floor/load_compare`: one atomic load and a compare (the least a denial
//!   can cost).
//! * The paired pass also times a *quota-aware denial floor* (`DenyFloor`):
//!   the least a denial can do when the quota may change at run time
//!   through `&self` without blocking, as `Gcra::set_quota` allows: read
//!   one quota word between two loads of a sequence word, read the state
//!   word, bring `now` to sub-ticks, compare. It builds no result and reads
//!   one quota word where a real denial needs three (for `retry_after`,
//!   `reset_after` and the limit).
//! * And a *fixed-quota denial floor* (`FixedDenyFloor`): the least a
//!   denial can do when the quota is fixed at construction but `now` is in
//!   ticks and the state in sub-ticks: read the scale and the state word,
//!   bring `now` to sub-ticks (one multiply), subtract and compare with a
//!   bound. The floor `FixedGcra::check` is held to.
//! * `gcra/*`: `Gcra::check` admitting and denying, `check_n`, `LocalGcra`,
//!   and `FixedGcra::check` (the quota fixed at construction) admitting and
//!   denying, paired against the same floors, `Gcra` and governor.
//! * `governor/*`: the `governor` crate's direct limiter on its fake clock,
//!   frozen, as the outside baseline. The paired pass compares with it in
//!   both loop shapes: `now` opaque once per batch and once per call.
//!   (`benches/plain_loop.rs` times the same pairs in a plain loop; the
//!   package's benches build in one codegen unit, see Cargo.toml.)
//!
//! Each sample runs a batch of 1 024 operations (criterion reports the time
//! per batch and the throughput per operation), so a single-owner limiter can
//! keep its state in a register as it would in a real loop. Every admitting
//! bench uses a frozen `now` and a burst large enough to admit throughout the
//! run; every denying bench first exhausts its limiter.
//! Criterion's results are times per batch, for profiling; the figures to
//! quote are the **paired ratios** printed first (`ratio:` lines, see
//! `benches/common/paired.rs`), which hold up on a shared machine:
//! `tools/bench-runner` repeats them and writes docs/benchmarks.md's table.
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::Duration;

use cellrate::{FixedGcra, Gcra, LocalGcra, Quota};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

#[path = "common/paired.rs"]
mod paired;
use paired::{cas, ratio, Side};

const HZ: u64 = 1_000_000_000;
const BATCH: u64 = 1_024;
const NOW: u64 = 1_000_000;

/// Runs `op(now)` BATCH times per sample, with one opaque `now` per batch
/// (as a packet loop reads its clock once per burst); returns how many were
/// admitted (criterion keeps that count opaque).
fn per_op(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, mut op: impl FnMut(u64) -> bool) {
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(name, |b| {
        b.iter(|| {
            let now = black_box(NOW);
            let mut admitted = 0u64;
            for _ in 0..BATCH {
                admitted += op(now) as u64;
            }
            admitted
        })
    });
}

fn admitting_quota() -> Quota {
    Quota::per_ticks(1, 1).with_burst(1 << 40).at_hz(HZ)
}

fn floors(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    let word = AtomicU64::new(0);
    per_op(&mut g, "cas", cas(&word));
    per_op(&mut g, "load_compare", |now| {
        word.load(Ordering::Acquire) > now
    });
    g.finish();
}

fn gcra(c: &mut Criterion) {
    let mut g = c.benchmark_group("gcra");

    let admitting = Gcra::new(admitting_quota());
    per_op(&mut g, "check_admit", |now| admitting.check(now).is_ok());

    let admitting_n = Gcra::new(admitting_quota());
    per_op(&mut g, "check_n_admit", |now| {
        admitting_n.check_n(now, 3).is_ok()
    });

    let denying = Gcra::new(Quota::per_second(10).at_hz(HZ));
    while denying.check(NOW).is_ok() {}
    per_op(&mut g, "check_deny", |now| denying.check(now).is_ok());

    let mut local = LocalGcra::new(admitting_quota());
    per_op(&mut g, "local_check_admit", |now| local.check(now).is_ok());

    let fixed_admitting = FixedGcra::new(admitting_quota());
    per_op(&mut g, "fixed_check_admit", |now| {
        fixed_admitting.check(now).is_ok()
    });

    let fixed_denying = FixedGcra::new(Quota::per_second(10).at_hz(HZ));
    while fixed_denying.check(NOW).is_ok() {}
    per_op(&mut g, "fixed_check_deny", |now| {
        fixed_denying.check(now).is_ok()
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
    per_op(&mut g, "direct_admit", |_| admitting.check().is_ok());

    let denying =
        GLimiter::direct_with_clock(GQuota::per_second(NonZeroU32::new(10).unwrap()), clock);
    while denying.check().is_ok() {}
    per_op(&mut g, "direct_deny", |_| denying.check().is_ok());
    g.finish();
}

/// The quota-aware denial floor (see the module docs): a bound that may
/// change at run time, read under a sequence word, and a state word.
struct DenyFloor {
    seq: AtomicU64,
    bound: AtomicU64,
    scale: u64,
    state: AtomicU64,
}

impl DenyFloor {
    /// A state `ahead` sub-ticks past `now` against a bound of `bound`.
    fn new(now: u64, scale: u64, ahead: u64, bound: u64) -> Self {
        DenyFloor {
            seq: AtomicU64::new(0),
            bound: AtomicU64::new(bound),
            scale,
            state: AtomicU64::new(now * scale + ahead),
        }
    }

    /// Whether a check at `now` would be admitted: the state's lead over
    /// `now` within the bound, read as a sequence-lock reader does.
    #[inline(always)]
    fn admits(&self, now: u64) -> bool {
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            let bound = self.bound.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if seq & 1 == 0 && self.seq.load(Ordering::Relaxed) == seq {
                let now = now.saturating_mul(self.scale);
                return self.state.load(Ordering::Acquire).saturating_sub(now) <= bound;
            }
        }
    }
}

/// The fixed-quota denial floor (see the module docs): a scale and a bound
/// that never change, and a state word.
struct FixedDenyFloor {
    scale: u64,
    bound: u64,
    state: AtomicU64,
}

impl FixedDenyFloor {
    /// A state `ahead` sub-ticks past `now` against a bound of `bound`.
    fn new(now: u64, scale: u64, ahead: u64, bound: u64) -> Self {
        FixedDenyFloor {
            scale,
            bound,
            state: AtomicU64::new(now * scale + ahead),
        }
    }

    /// Whether a check at `now` would be admitted: the state's lead over
    /// `now` within the bound.
    #[inline(always)]
    fn admits(&self, now: u64) -> bool {
        let now = now.wrapping_mul(self.scale);
        self.state.load(Ordering::Acquire).wrapping_sub(now) <= self.bound
    }
}

/// The paired ratios (subject time ÷ baseline time) the README reports.
fn paired_ratios() {
    use governor::clock::FakeRelativeClock;
    use governor::{Quota as GQuota, RateLimiter as GLimiter};
    let word = AtomicU64::new(0);
    let probe = AtomicU64::new(0);
    let floor = || Side::new(NOW, 0, cas(&word));
    let load_compare = || Side::new(NOW, 0, |now| probe.load(Ordering::Acquire) > now);

    let admitting = Gcra::new(admitting_quota());
    let check_admit = || Side::new(NOW, 0, |now| admitting.check(now).is_ok());
    ratio(
        "Gcra::check admitting ÷ CAS floor",
        &mut floor(),
        &mut check_admit(),
    );
    let admitting_n = Gcra::new(admitting_quota());
    ratio(
        "Gcra::check_n(3) admitting ÷ CAS floor",
        &mut floor(),
        &mut Side::new(NOW, 0, |now| admitting_n.check_n(now, 3).is_ok()),
    );
    let denying = Gcra::new(Quota::per_second(10).at_hz(HZ));
    while denying.check(NOW).is_ok() {}
    let check_deny = || Side::new(NOW, 0, |now| denying.check(now).is_ok());
    ratio(
        "Gcra::check denying ÷ CAS floor",
        &mut floor(),
        &mut check_deny(),
    );
    ratio(
        "Gcra::check denying ÷ one load + compare",
        &mut load_compare(),
        &mut check_deny(),
    );
    let floor_deny = DenyFloor::new(NOW, black_box(1), 1_000, black_box(10));
    assert!(!floor_deny.admits(NOW));
    ratio(
        "quota-aware denial floor ÷ one load + compare",
        &mut load_compare(),
        &mut Side::new(NOW, 0, |now| floor_deny.admits(now)),
    );
    ratio(
        "Gcra::check denying ÷ quota-aware denial floor",
        &mut Side::new(NOW, 0, |now| floor_deny.admits(now)),
        &mut check_deny(),
    );
    let mut local = LocalGcra::new(admitting_quota());
    ratio(
        "Gcra::check admitting ÷ LocalGcra::check",
        &mut Side::new(NOW, 0, |now| local.check(now).is_ok()),
        &mut check_admit(),
    );

    let clock = FakeRelativeClock::default();
    clock.advance(Duration::from_millis(1));
    let gquota = GQuota::with_period(Duration::from_nanos(1))
        .expect("non-zero period")
        .allow_burst(NonZeroU32::MAX);
    let gov = GLimiter::direct_with_clock(gquota, clock.clone());
    ratio(
        "Gcra::check admitting ÷ governor admitting",
        &mut Side::new(NOW, 0, |_| gov.check().is_ok()),
        &mut check_admit(),
    );
    let gov_deny =
        GLimiter::direct_with_clock(GQuota::per_second(NonZeroU32::new(10).unwrap()), clock);
    while gov_deny.check().is_ok() {}
    ratio(
        "Gcra::check denying ÷ governor denying",
        &mut Side::new(NOW, 0, |_| gov_deny.check().is_ok()),
        &mut check_deny(),
    );
    // The same two comparisons with `now` opaque per call (a caller that
    // reads its clock before every check), not once per batch: each side
    // passes every `now` through `black_box` (governor reads its own clock
    // and ignores it, so both loops carry the same opaque value per call).
    ratio(
        "Gcra::check admitting ÷ governor admitting, now per call",
        &mut Side::new(NOW, 0, |now| {
            black_box(now);
            gov.check().is_ok()
        }),
        &mut Side::new(NOW, 0, |now| admitting.check(black_box(now)).is_ok()),
    );
    ratio(
        "Gcra::check denying ÷ governor denying, now per call",
        &mut Side::new(NOW, 0, |now| {
            black_box(now);
            gov_deny.check().is_ok()
        }),
        &mut Side::new(NOW, 0, |now| denying.check(black_box(now)).is_ok()),
    );

    // The quota fixed at construction (`FixedGcra`): the same checks
    // against the same baselines, and against `Gcra` itself.
    let fixed_admitting = FixedGcra::new(admitting_quota());
    let fixed_admit = || Side::new(NOW, 0, |now| fixed_admitting.check(now).is_ok());
    let fixed_denying = FixedGcra::new(Quota::per_second(10).at_hz(HZ));
    while fixed_denying.check(NOW).is_ok() {}
    let fixed_deny = || Side::new(NOW, 0, |now| fixed_denying.check(now).is_ok());
    ratio(
        "FixedGcra::check admitting ÷ CAS floor",
        &mut floor(),
        &mut fixed_admit(),
    );
    ratio(
        "FixedGcra::check admitting ÷ Gcra::check admitting",
        &mut check_admit(),
        &mut fixed_admit(),
    );
    ratio(
        "FixedGcra::check denying ÷ one load + compare",
        &mut load_compare(),
        &mut fixed_deny(),
    );
    let fixed_floor = FixedDenyFloor::new(NOW, black_box(1), 1_000, black_box(10));
    assert!(!fixed_floor.admits(NOW));
    let fixed_floor_deny = || Side::new(NOW, 0, |now| fixed_floor.admits(now));
    ratio(
        "fixed-quota denial floor ÷ one load + compare",
        &mut load_compare(),
        &mut fixed_floor_deny(),
    );
    ratio(
        "FixedGcra::check denying ÷ fixed-quota denial floor",
        &mut fixed_floor_deny(),
        &mut fixed_deny(),
    );
    ratio(
        "FixedGcra::check denying ÷ Gcra::check denying",
        &mut check_deny(),
        &mut fixed_deny(),
    );
    ratio(
        "FixedGcra::check admitting ÷ governor admitting",
        &mut Side::new(NOW, 0, |_| gov.check().is_ok()),
        &mut fixed_admit(),
    );
    ratio(
        "FixedGcra::check denying ÷ governor denying",
        &mut Side::new(NOW, 0, |_| gov_deny.check().is_ok()),
        &mut fixed_deny(),
    );
    ratio(
        "FixedGcra::check admitting ÷ governor admitting, now per call",
        &mut Side::new(NOW, 0, |now| {
            black_box(now);
            gov.check().is_ok()
        }),
        &mut Side::new(NOW, 0, |now| fixed_admitting.check(black_box(now)).is_ok()),
    );
    ratio(
        "FixedGcra::check denying ÷ governor denying, now per call",
        &mut Side::new(NOW, 0, |now| {
            black_box(now);
            gov_deny.check().is_ok()
        }),
        &mut Side::new(NOW, 0, |now| fixed_denying.check(black_box(now)).is_ok()),
    );
}

fn main() {
    paired::main(paired_ratios, &[floors, gcra, governor]);
}
