//! Loom models: workers taking, spending and giving back leases on one
//! shared `Gcra` (and one shared meter flow), racing plain checks, `reset`
//! and `set_quota`. In every interleaving: each admitted cell was charged
//! (a handle's admissions equal what its takes charged minus what it gave
//! back minus what it holds), the total stays within the bound of the
//! module docs, and the shared state holds exactly what was charged.
//!
//! Run with `LOOM_MAX_PREEMPTIONS=2 cargo test --release --features loom --lib lease`.

use super::*;
use crate::meter::{Color, Flow, Meter, TrTcm4115};
use crate::Quota;
use loom::sync::Arc;
use loom::thread;

extern crate std;
use std::vec::Vec;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// 100 cells per second on a 1 kHz clock: `T` = 10 ticks.
fn quota(burst: u64) -> Quota {
    Quota::per_second(100).with_burst(burst).at_hz(1_000)
}

/// What one worker saw: cells admitted, and its books just before it was
/// dropped (taken, returned, held).
#[derive(Debug, Clone, Copy)]
struct Books {
    admitted: u64,
    taken: u64,
    returned: u64,
    held: u64,
}

/// Runs one worker: a check of `cost` at each `now`, then drop.
fn worker(g: &Gcra, policy: LeasePolicy, checks: &[(u64, u64)]) -> Books {
    let mut handle = Leased::new(g, policy);
    let mut admitted = 0;
    for &(now, cost) in checks {
        if handle.check_n(now, cost).is_ok() {
            admitted += cost;
        }
        // Conservation holds after every call, not only at the end.
        assert!(handle.held() <= policy.max_cells().max(cost));
    }
    Books {
        admitted,
        taken: handle.taken(),
        returned: handle.returned(),
        held: handle.held(),
    }
}

fn spawn_worker(
    g: &Arc<Gcra>,
    policy: LeasePolicy,
    checks: &'static [(u64, u64)],
) -> thread::JoinHandle<Books> {
    let g = g.clone();
    thread::spawn(move || worker(&g, policy, checks))
}

fn assert_charged(books: &[Books]) {
    for b in books {
        assert_eq!(
            b.admitted,
            b.taken - b.returned - b.held,
            "admitted cells not charged: {b:?}"
        );
    }
}

#[test]
fn two_workers_and_a_plain_check_share_one_burst() {
    // Burst 3 at one instant: two leasing workers (leases up to 2) and one
    // plain check never admit more than 3 together, and once the handles
    // are dropped the limiter holds exactly 3 − admitted.
    model(|| {
        let g = Arc::new(Gcra::new(quota(3)));
        let policy = LeasePolicy::new(2, 100).with_min(2);
        let a = spawn_worker(&g, policy, &[(0, 1), (0, 1)]);
        let b = spawn_worker(&g, policy, &[(0, 1), (0, 1)]);
        let plain = g.check(0).is_ok() as u64;
        let books = [a.join().unwrap(), b.join().unwrap()];
        assert_charged(&books);
        let admitted: u64 = books.iter().map(|b| b.admitted).sum::<u64>() + plain;
        assert!(admitted <= 3, "admitted {admitted} > burst 3: {books:?}");
        // Everything held went back on drop: the shared state is exactly
        // what was admitted.
        assert_eq!(g.peek(0).remaining(), 3 - admitted);
        // Nobody was denied while cells were free somewhere: with 5
        // requests for 3 cells, all 3 are admitted.
        assert_eq!(admitted, 3, "{books:?} plain {plain}");
    });
}

#[test]
fn leases_race_reset() {
    // A reset forgives the shared debt: the bound grows by one burst per
    // reset, never more; every admitted cell was still charged.
    model(|| {
        let g = Arc::new(Gcra::new(quota(2)));
        let policy = LeasePolicy::new(2, 100).with_min(2);
        let a = spawn_worker(&g, policy, &[(0, 1), (0, 1), (0, 1)]);
        let b = spawn_worker(&g, policy, &[(0, 1), (0, 1)]);
        g.reset();
        let books = [a.join().unwrap(), b.join().unwrap()];
        assert_charged(&books);
        let admitted: u64 = books.iter().map(|b| b.admitted).sum();
        assert!(
            admitted <= 2 * 2,
            "admitted {admitted} > 2 bursts: {books:?}"
        );
        // After the drops the limiter never holds more than full.
        assert!(g.peek(0).remaining() <= 2);
    });
}

#[test]
fn leases_race_set_quota() {
    // The burst changes from 3 to 1 (same T) while a worker leases; then
    // a second worker leases under the new quota. At one instant nobody
    // admits more than the largest burst in force. After the drops the
    // shared state holds at least what was admitted, read against the
    // final quota, and never more room than its burst: the change keeps
    // the cells used up to the new burst (docs/design/reconfigure.md), so
    // cells a lease held past it and gives back afterwards may leave the
    // client more room than its books, never more than full. `set_quota`
    // races the first worker's take and give-back (each reads the quota
    // under its sequence lock).
    model(|| {
        let g = Arc::new(Gcra::new(quota(3)));
        let policy = LeasePolicy::new(2, 100).with_min(2);
        let a = spawn_worker(&g, policy, &[(0, 1)]);
        g.set_quota(0, quota(1)).unwrap();
        let b = worker(&g, policy, &[(0, 1)]);
        let books = [a.join().unwrap(), b];
        assert_charged(&books);
        let admitted: u64 = books.iter().map(|b| b.admitted).sum();
        assert!(admitted <= 3, "admitted {admitted} > burst 3: {books:?}");
        let left = g.peek(0).remaining();
        assert!(
            left >= 1u64.saturating_sub(admitted) && left <= 1,
            "left {left}: {books:?}"
        );
    });
}

#[test]
fn lapsed_leases_go_back_and_time_refills() {
    // T = 10 ticks, burst 2. Worker a leases at 0 and comes back at 25,
    // after its lease lapsed (lifetime 10): it gives the rest back first.
    // Over [0, 25] the bound is b + ⌊25/T⌋ + H(0) = 2 + 2 + 0.
    model(|| {
        let g = Arc::new(Gcra::new(quota(2)));
        let policy = LeasePolicy::new(2, 10).with_min(2);
        let a = spawn_worker(&g, policy, &[(0, 1), (25, 1), (25, 1)]);
        let b = spawn_worker(&g, policy, &[(0, 1), (20, 1), (25, 1)]);
        let books = [a.join().unwrap(), b.join().unwrap()];
        assert_charged(&books);
        let admitted: u64 = books.iter().map(|b| b.admitted).sum();
        assert!(admitted <= 4, "admitted {admitted} > 4: {books:?}");
    });
}

#[test]
fn leased_meter_green_within_committed_bucket() {
    // RFC 4115, CBS = EBS = 100 bytes at one instant; two workers lease
    // bytes (up to 80 per lease) and mark 60-byte packets: green ≤ 100,
    // yellow ≤ 100, and the buckets hold exactly what was coloured once
    // the handles are dropped.
    model(|| {
        let profile = TrTcm4115::new(1_000, 100, 1_000, 100, 1_000).unwrap();
        let flow = Arc::new(Flow::new());
        let policy = LeasePolicy::new(80, 100).with_min(80);
        let run = move |flow: Arc<Flow>, sizes: &'static [u64]| {
            thread::spawn(move || {
                let mut h = LeasedMeter::new(&profile, &flow, policy);
                let colours: Vec<(u64, Color)> = sizes.iter().map(|&s| (s, h.mark(0, s))).collect();
                for i in 0..2 {
                    assert_eq!(
                        colours
                            .iter()
                            .filter(|&&(_, c)| c as usize == i)
                            .map(|&(s, _)| s)
                            .sum::<u64>(),
                        h.spent()[i],
                        "bytes coloured from bucket {i} were not charged"
                    );
                }
                colours
            })
        };
        let a = run(flow.clone(), &[60, 60]);
        let b = run(flow.clone(), &[60]);
        let mut sums = [0u64; 3];
        for (s, c) in a.join().unwrap().into_iter().chain(b.join().unwrap()) {
            sums[c as usize] += s;
        }
        assert!(sums[0] <= 100 && sums[1] <= 100, "{sums:?}");
        let tokens = profile.tokens(flow.words(), 0);
        assert_eq!(tokens, [100 - sums[0], 100 - sums[1]]);
    });
}
