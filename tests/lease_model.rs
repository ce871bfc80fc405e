//! `Leased` handles on one shared `Gcra`, against a reference model: a plain
//! token bucket (a level in `1/T` fractions of a cell, refilled by the
//! ticks that pass, capped at the burst), written for clarity rather than
//! speed. `n` workers take turns in a random order at a random, advancing
//! clock, check random costs, release, or pause long enough for their lease
//! to lapse. Checked on every run:
//!
//! * every take and give-back the handles make on the shared limiter is
//!   exactly what the model grants (the largest allowed lease, or a denial
//!   when the model holds less than asked);
//! * every admitted cell was charged: per worker, admitted = taken −
//!   returned − held, after every call;
//! * a handle never holds more than `max_cells` after a call;
//! * over every interval of the run, the admitted cells are within the
//!   bound of the module docs, `b + ⌊Δ/T⌋ + H(t₀)` with `H(t₀)` the cells
//!   held at the start, and so within `b + ⌊Δ/T⌋ + n·k`;
//! * a denied worker was denied because what it held and what the shared
//!   limiter held fell short of the cost.
//!
//! Every run happens at origin 0 and at two other origins of the clock
//! (`support/origin.rs`): the handles and the shared limiter see
//! `origin + now` (wrapping), the model `now`.

use std::cell::RefCell;

use cellrate::lease::{CellSource, LeasePolicy, Leased};
use cellrate::{Denied, Gcra, Quota};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{origins, with_zero};

/// A token bucket: `level` in `1/t` cells (ticks' worth), at most `b·t`.
#[derive(Debug, Clone)]
struct Model {
    t: u64,
    b: u64,
    level: u64,
    last: u64,
    /// Take attempts and give-backs so far (to tell a denial the shared
    /// limiter made from one a handle repeated locally).
    attempts: u64,
    returns: u64,
}

impl Model {
    fn new(t: u64, b: u64) -> Self {
        Model {
            t,
            b,
            level: b * t,
            last: 0,
            attempts: 0,
            returns: 0,
        }
    }
    fn advance(&mut self, now: u64) {
        if now > self.last {
            self.level = (self.level + (now - self.last)).min(self.b * self.t);
            self.last = now;
        }
    }
    /// Whole cells in the bucket.
    fn room(&self) -> u64 {
        self.level / self.t
    }
    /// What a lease take should get.
    fn take(&mut self, now: u64, least: u64, most: u64, share: u64) -> Option<u64> {
        self.advance(now);
        self.attempts += 1;
        let room = self.room();
        if least > self.b || room < least {
            return None;
        }
        let g = (room / share).max(least).min(most.max(least));
        self.level -= g * self.t;
        Some(g)
    }
    fn give_back(&mut self, now: u64, cells: u64) {
        self.advance(now);
        self.returns += (cells > 0) as u64;
        self.level = (self.level + cells * self.t).min(self.b * self.t);
    }
}

/// The shared limiter, with the model following every operation on it
/// (at `now − origin`).
struct Checked<'a> {
    gcra: &'a Gcra,
    model: &'a RefCell<Model>,
    origin: u64,
}

impl CellSource for Checked<'_> {
    fn take(&self, now: u64, least: u64, most: u64, share: u64) -> Result<u64, Denied> {
        let real = self.gcra.take(now, least, most, share);
        let expected =
            self.model
                .borrow_mut()
                .take(now.wrapping_sub(self.origin), least, most, share);
        assert_eq!(
            real.as_ref().ok().copied(),
            expected,
            "take(now {now}, least {least}, most {most}, share {share})"
        );
        real
    }
    fn give_back(&self, now: u64, cells: u64) {
        self.gcra.give_back(now, cells);
        self.model
            .borrow_mut()
            .give_back(now.wrapping_sub(self.origin), cells);
    }
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Check(u64),
    Release,
}

#[derive(Debug, Clone, Copy)]
struct Step {
    worker: usize,
    advance: u64,
    act: Act,
}

fn steps(workers: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = (
        0..workers,
        prop_oneof![6 => 0u64..3, 2 => 0u64..20, 1 => 20u64..200],
        prop_oneof![10 => (1u64..5).prop_map(Act::Check), 1 => Just(Act::Release)],
    )
        .prop_map(|(worker, advance, act)| Step {
            worker,
            advance,
            act,
        });
    prop::collection::vec(step, 1..120)
}

fn setup() -> impl Strategy<Value = (u64, u64, LeasePolicy, usize, Vec<Step>)> {
    (
        1u64..6,  // T, ticks per cell
        3u64..12, // burst
        1u64..9,  // max_cells
        1u64..9,  // min_cells (clamped)
        0u64..60, // lifetime
        0u64..60, // idle
        1u64..4,  // share
        2usize..5,
    )
        .prop_flat_map(|(t, b, max, min, life, idle, share, n)| {
            let policy = LeasePolicy::new(max, life)
                .with_min(min)
                .with_idle(idle)
                .with_share(share);
            (Just(t), Just(b), Just(policy), Just(n), steps(n))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn leased_workers_match_the_model_and_the_bound((t, b, policy, n, steps) in setup(), drawn in origins()) {
        for origin in with_zero(drawn) {
            leased_run(t, b, policy, n, &steps, origin)?;
        }
    }
}

/// [`leased_workers_match_the_model_and_the_bound`] at one origin.
fn leased_run(
    t: u64,
    b: u64,
    policy: LeasePolicy,
    n: usize,
    steps: &[Step],
    origin: u64,
) -> Result<(), TestCaseError> {
    let at = |now: u64| origin.wrapping_add(now);
    {
        let gcra = Gcra::new(Quota::per_ticks(1, t).with_burst(b).at_hz(1_000));
        prop_assume!(gcra.quota().is_exact());
        let model = RefCell::new(Model::new(t, b));
        let mut handles: Vec<_> = (0..n)
            .map(|_| {
                Leased::new(
                    Checked {
                        gcra: &gcra,
                        model: &model,
                        origin,
                    },
                    policy,
                )
            })
            .collect();
        let mut admitted = vec![0u64; n];
        // Give-backs counted at each worker's last denial by the shared limiter.
        let mut returns_at_denial = vec![0u64; n];
        // Per step: its now, the cells it admitted, and H just before it.
        let mut trace: Vec<(u64, u64, u64)> = Vec::new();
        let mut now = 0u64;
        for step in steps {
            now += step.advance;
            let held: u64 = handles.iter().map(|h| h.held()).sum();
            let spendable: u64 = handles.iter().map(|h| h.spendable(at(now))).sum();
            assert!(spendable <= held);
            let h = &mut handles[step.worker];
            let mut got = 0;
            match step.act {
                Act::Check(cost) => {
                    let held_before = h.held();
                    let attempts_before = model.borrow().attempts;
                    match h.check_n(at(now), cost) {
                        Ok(()) => got = cost,
                        Err(_) => {
                            // Denied: what it holds and what the shared
                            // limiter holds fall short of the cost — unless
                            // this is a denial repeated locally and someone
                            // gave cells back since the shared limiter's.
                            let held = h.held();
                            prop_assert!(held < cost);
                            let m = model.borrow();
                            let mut at_now = m.clone();
                            at_now.advance(now);
                            let asked = m.attempts > attempts_before;
                            if asked {
                                returns_at_denial[step.worker] = m.returns;
                            }
                            prop_assert!(at_now.room() + held < cost
                                || (!asked && m.returns > returns_at_denial[step.worker]),
                                "denied {} with {} in the shared limiter (held {} before, {} after, asked {})",
                                cost, at_now.room(), held_before, held, asked);
                        }
                    }
                }
                Act::Release => h.release(at(now)),
            }
            admitted[step.worker] += got;
            prop_assert!(h.held() <= policy.max_cells());
            prop_assert_eq!(admitted[step.worker], h.taken() - h.returned() - h.held());
            trace.push((now, got, held));
        }
        // The bound over every interval of steps [i, j].
        let k = policy.max_cells();
        for i in 0..trace.len() {
            let (t0, _, held0) = trace[i];
            let mut sum = 0;
            for &(t1, got, _) in &trace[i..] {
                sum += got;
                let ideal = b + (t1 - t0) / t;
                prop_assert!(
                    sum <= ideal + held0,
                    "admitted {} in [{}, {}] > b + ⌊Δ/T⌋ + H(t₀) = {} + {}",
                    sum,
                    t0,
                    t1,
                    ideal,
                    held0
                );
                prop_assert!(held0 <= n as u64 * k);
            }
        }
        // Dropping the handles gives everything back: the shared limiter
        // and the model agree on the final level.
        drop(handles);
        let mut m = model.borrow().clone();
        m.advance(now);
        prop_assert_eq!(gcra.peek(at(now)).remaining(), m.room());
    }
    Ok(())
}

/// A stalled worker costs the others exactly what it holds, and gets it
/// back to them at its next call.
#[test]
fn a_stalled_worker_costs_what_it_holds_until_it_returns() {
    // T = 1 tick, burst 10; leases of 4 cells, lifetime 100.
    let gcra = Gcra::new(Quota::per_ticks(1, 1).with_burst(10).at_hz(1_000));
    let policy = LeasePolicy::new(4, 100).with_min(4);
    let mut stalled = Leased::new(&gcra, policy);
    stalled.check(0).unwrap(); // takes 4, holds 3, then stalls
    assert_eq!(stalled.held(), 3);
    let mut other = Leased::new(&gcra, policy);
    let got = (0..20).filter(|_| other.check(0).is_ok()).count() as u64;
    assert_eq!(got, 10 - 4, "the others lose exactly the stalled lease");
    // Its lease lapses at 100; at its next call (200) it gives the 3 back
    // before taking anything.
    stalled.check(200).unwrap();
    assert_eq!(stalled.returned(), 3);
    other.release(200);
    assert_eq!(
        gcra.peek(200).remaining(),
        10 - stalled.held() - 1,
        "everything but the live lease is back"
    );
}

/// Near the limit a take claims at most `room / share` (and at least the
/// cost): one worker cannot drain what the others are about to need.
#[test]
fn leases_shrink_near_the_limit() {
    let gcra = Gcra::new(Quota::per_ticks(1, 1).with_burst(16).at_hz(1_000));
    let policy = LeasePolicy::new(16, 1_000).with_min(16).with_share(4);
    let mut workers = [Leased::new(&gcra, policy), Leased::new(&gcra, policy)];
    let mut grants = Vec::new();
    for i in 0.. {
        let w = &mut workers[i % 2];
        let (room, before) = (gcra.peek(0).remaining(), w.taken());
        if w.check(0).is_err() && workers[(i + 1) % 2].check(0).is_err() {
            break;
        }
        let grant = workers[i % 2].taken() - before;
        if grant > 0 {
            assert!(grant <= (room / 4).max(1), "took {grant} of {room}");
            grants.push(grant);
        }
    }
    assert_eq!(workers[0].spent() + workers[1].spent(), 16);
    assert_eq!(grants[..2], [4, 3]); // 16 / 4, then 12 / 4
    assert!(grants.iter().rev().take(3).all(|&g| g == 1), "{grants:?}");
}

/// Two handles that keep a limit saturated admit exactly what the shared
/// limiter allows, `b + ⌊Δ/T⌋`: leases lose nothing (whatever the lifetime
/// and idle bounds).
#[test]
fn saturating_workers_admit_exactly_the_limit() {
    for (lifetime, idle) in [(100, 100), (100, 10), (5, 5), (0, 0)] {
        let gcra = Gcra::new(Quota::per_ticks(1, 10).with_burst(50).at_hz(1_000));
        let policy = LeasePolicy::new(16, lifetime)
            .with_min(2)
            .with_idle(idle)
            .with_share(2);
        let mut a = Leased::new(&gcra, policy);
        let mut b = Leased::new(&gcra, policy);
        let mut admitted = 0;
        for now in 0..20_000u64 {
            for _ in 0..3 {
                admitted += a.check(now).is_ok() as u64;
                admitted += b.check(now).is_ok() as u64;
            }
        }
        assert_eq!(
            admitted,
            50 + 19_999 / 10,
            "lifetime {lifetime}, idle {idle}"
        );
    }
}
