//! The shared GCRA (`Gcra`, and `FixedGcra` whose quota is fixed at
//! construction) against governor's direct limiter in a plain loop: no
//! harness, no closures handed to a timer, one process, all limiters in
//! the same binary. What the README quotes about `Gcra::check` against
//! governor must also show here (`cargo bench --bench plain_loop`).
//!
//! Two loop shapes, admitting (a burst that admits throughout) and denying
//! (an exhausted limiter):
//!
//! * `now` opaque per batch: one `black_box(now)` per 1 024 calls, as a
//!   packet loop that reads its clock once per burst;
//! * `now` opaque per call: `black_box(now)` before every call.
//!
//! governor's limiter reads its own (fake, frozen) clock and ignores the
//! `now` the loop makes opaque, so both loops carry the same overhead.
//! Each figure is the median over 31 rounds of 2²⁰ calls of the
//! wall time per call, and each line also prints cellrate's time ÷
//! governor's from the same rounds.
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use cellrate::{FixedGcra, Gcra, Quota};
use governor::clock::FakeRelativeClock;
use governor::{Quota as GQuota, RateLimiter as GLimiter};

const CALLS: u64 = 1 << 20;
const BATCH: u64 = 1_024;
const ROUNDS: usize = 31;
const NOW: u64 = 1_000_000;

/// Nanoseconds per call of `op` over `CALLS` calls, `now` opaque once per
/// batch or once per call; the admitted count is kept opaque.
fn time(per_call: bool, op: &mut impl FnMut(u64) -> bool) -> f64 {
    let start = Instant::now();
    let mut admitted = 0u64;
    if per_call {
        for _ in 0..CALLS {
            admitted += op(black_box(NOW)) as u64;
        }
    } else {
        for _ in 0..CALLS / BATCH {
            let now = black_box(NOW);
            for _ in 0..BATCH {
                admitted += op(now) as u64;
            }
        }
    }
    black_box(admitted);
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Alternates the two loops round by round; prints both medians and the
/// median of the per-round ratios.
fn compare(
    name: &str,
    per_call: bool,
    ours: &mut impl FnMut(u64) -> bool,
    theirs: &mut impl FnMut(u64) -> bool,
) {
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = time(per_call, ours);
            (x, time(per_call, theirs))
        } else {
            let y = time(per_call, theirs);
            (time(per_call, ours), y)
        };
        a.push(x);
        b.push(y);
        r.push(x / y);
    }
    let shape = if per_call { "per call" } else { "per batch" };
    println!(
        "{name}, now opaque {shape}: cellrate {:.2} ns, governor {:.2} ns, ratio {:.2}",
        median(a),
        median(b),
        median(r)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list`: nothing to list
    }
    let clock = FakeRelativeClock::default();
    clock.advance(Duration::from_millis(1));
    let g_admit = GLimiter::direct_with_clock(
        GQuota::with_period(Duration::from_nanos(1))
            .expect("non-zero period")
            .allow_burst(NonZeroU32::MAX),
        clock.clone(),
    );
    let g_deny =
        GLimiter::direct_with_clock(GQuota::per_second(NonZeroU32::new(10).unwrap()), clock);
    while g_deny.check().is_ok() {}

    let admit = Gcra::new(
        Quota::per_ticks(1, 1)
            .with_burst(1 << 40)
            .at_hz(1_000_000_000),
    );
    let deny = Gcra::new(Quota::per_second(10).at_hz(1_000_000_000));
    while deny.check(NOW).is_ok() {}
    let fixed_admit = FixedGcra::new(
        Quota::per_ticks(1, 1)
            .with_burst(1 << 40)
            .at_hz(1_000_000_000),
    );
    let fixed_deny = FixedGcra::new(Quota::per_second(10).at_hz(1_000_000_000));
    while fixed_deny.check(NOW).is_ok() {}

    for per_call in [false, true] {
        compare(
            "Gcra::check admitting",
            per_call,
            &mut |now| admit.check(now).is_ok(),
            &mut |_| g_admit.check().is_ok(),
        );
        compare(
            "Gcra::check denying",
            per_call,
            &mut |now| deny.check(now).is_ok(),
            &mut |_| g_deny.check().is_ok(),
        );
        compare(
            "FixedGcra::check admitting",
            per_call,
            &mut |now| fixed_admit.check(now).is_ok(),
            &mut |_| g_admit.check().is_ok(),
        );
        compare(
            "FixedGcra::check denying",
            per_call,
            &mut |now| fixed_deny.check(now).is_ok(),
            &mut |_| g_deny.check().is_ok(),
        );
    }
}
