//! Every interleaving (up to the preemption bound) of concurrent
//! operations on one `Gcra` must be explained by *some* sequential order
//! of the same operations that respects each thread's program order: same
//! outcomes, same final state. That rules out over-admission (a check
//! admitted that no order admits) and lost updates.
use super::*;
use crate::Algorithm;
use loom::sync::Arc;
use loom::thread;

extern crate std;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Check(u64),
    Refund(u64),
    Reset,
    SetQuota(Quota),
}

/// What an operation reported: admitted or not, or whether a
/// reconfiguration took effect.
type Log = Vec<(Op, bool)>;

const NOW: u64 = 1_000;

fn run(g: &Gcra, ops: &[Op]) -> Log {
    ops.iter()
        .map(|&op| {
            let out = match op {
                Op::Check(cost) => g.check_n(NOW, cost).is_ok(),
                Op::Refund(cost) => {
                    g.refund_n(NOW, cost);
                    true
                }
                Op::Reset => {
                    g.reset();
                    true
                }
                Op::SetQuota(q) => g.set_quota(q).is_ok(),
            };
            // Whatever happens, a quota is read whole: one of those set.
            let seen = g.quota();
            assert!(
                [quota(1), quota(3), quota(5)].contains(&seen),
                "torn quota {seen:?}"
            );
            (op, out)
        })
        .collect()
}

/// Sequential semantics, from the same pure steps.
fn replay(order: &[(Op, bool)], start: Quota) -> Option<(u64, Quota)> {
    let (mut tat, mut q) = (0u64, start);
    for &(op, out) in order {
        let now = q.now_word(NOW);
        match op {
            Op::Check(cost) => match q.check(tat, NOW, cost) {
                Ok((next, _)) if out => tat = next,
                Err(_) if !out => {}
                _ => return None,
            },
            Op::Refund(cost) => tat = refund(&q, tat, now, cost),
            Op::Reset => tat = 0,
            // A refused reconfiguration changed nothing.
            Op::SetQuota(next) if out => q = next,
            Op::SetQuota(_) => {}
        }
    }
    Some((tat, q))
}

/// Tries every merge of the per-thread logs.
fn explained(logs: &[Log], start: Quota, end: (u64, Quota)) -> bool {
    fn go(
        logs: &[Log],
        next: &mut Vec<usize>,
        order: &mut Log,
        start: Quota,
        end: (u64, Quota),
    ) -> bool {
        if logs.iter().zip(next.iter()).all(|(l, &i)| i == l.len()) {
            return replay(order, start) == Some(end);
        }
        for t in 0..logs.len() {
            if next[t] < logs[t].len() {
                order.push(logs[t][next[t]]);
                next[t] += 1;
                let ok = go(logs, next, order, start, end);
                next[t] -= 1;
                order.pop();
                if ok {
                    return true;
                }
            }
        }
        false
    }
    go(
        logs,
        &mut std::vec![0; logs.len()],
        &mut Vec::new(),
        start,
        end,
    )
}

fn quota(burst: u64) -> Quota {
    Quota::per_second(10).with_burst(burst).at_hz(1_000)
}

fn model(start: Quota, threads: Vec<Vec<Op>>) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(move || {
        let g = Arc::new(Gcra::new(start));
        let mut handles = Vec::new();
        for ops in &threads[1..] {
            let (g, ops) = (g.clone(), ops.clone());
            handles.push(thread::spawn(move || run(&g, &ops)));
        }
        let mut logs = std::vec![run(&g, &threads[0])];
        logs.extend(handles.into_iter().map(|h| h.join().unwrap()));
        let end = (g.shared.state().load(), g.quota());
        assert!(
            explained(&logs, start, end),
            "no sequential order explains {logs:?} ending in {end:?}"
        );
    });
}

/// Checks of `(now, cost)` from several threads, with `now`s on both
/// sides of the wrap of the tick counter: every interleaving is some
/// sequential order of them (the pure step replayed), so none
/// over-admits, and the answers are those of the same checks shifted
/// back to small times.
fn timed_model(start: u64, threads: Vec<Vec<(u64, u64)>>) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    let q = quota(3);
    builder.check(move || {
        let g = Arc::new(Gcra::new(q));
        let run = move |g: &Gcra, ops: &[(u64, u64)]| -> Vec<((u64, u64), bool)> {
            ops.iter()
                .map(|&(now, cost)| {
                    (
                        (now, cost),
                        g.check_n(start.wrapping_add(now), cost).is_ok(),
                    )
                })
                .collect()
        };
        let handles: Vec<_> = threads[1..]
            .iter()
            .map(|ops| {
                let (g, ops) = (g.clone(), ops.clone());
                thread::spawn(move || run(&g, &ops))
            })
            .collect();
        let mut logs = std::vec![run(&g, &threads[0])];
        logs.extend(handles.into_iter().map(|h| h.join().unwrap()));
        let end = g.shared.state().load();
        // Some merge of the logs, replayed on the pure step at the
        // shifted times, gives the same answers and the same state.
        fn go(
            logs: &[Vec<((u64, u64), bool)>],
            next: &mut Vec<usize>,
            state: u64,
            q: &Quota,
            start: u64,
            end: u64,
        ) -> bool {
            if logs.iter().zip(next.iter()).all(|(l, &i)| i == l.len()) {
                return state == end;
            }
            for t in 0..logs.len() {
                let Some(&((now, cost), admitted)) = logs[t].get(next[t]) else {
                    continue;
                };
                let after = match q.check(state, start.wrapping_add(now), cost) {
                    Ok((s, _)) if admitted => s,
                    Err(_) if !admitted => state,
                    _ => continue,
                };
                next[t] += 1;
                let ok = go(logs, next, after, q, start, end);
                next[t] -= 1;
                if ok {
                    return true;
                }
            }
            false
        }
        assert!(
            go(&logs, &mut std::vec![0; logs.len()], 0, &q, start, end),
            "no sequential order explains {logs:?} ending in {end}"
        );
        // And the same answers from tick 0: the state shifted back.
        let shift = Quota::now_word(&q, start).wrapping_sub(1);
        assert!(
            go(
                &logs,
                &mut std::vec![0; logs.len()],
                0,
                &q,
                0,
                end.wrapping_sub(shift)
            ),
            "{logs:?} are not the answers of the same checks from tick 0"
        );
        // At most the burst, plus one cell per T passed, was admitted.
        let admitted: u64 = logs
            .iter()
            .flatten()
            .filter(|(_, ok)| *ok)
            .map(|((_, c), _)| c)
            .sum();
        assert!(admitted <= 3 + 1, "{logs:?}");
    });
}

#[test]
fn checks_across_the_wrap_never_over_admit() {
    // Burst 3, T = 100 ticks; times from 40 ticks before the wrap of
    // the counter to 60 after it (one T later), from two threads, one
    // of which lags the other across the wrap.
    timed_model(
        u64::MAX - 39,
        std::vec![std::vec![(0, 2), (100, 2)], std::vec![(100, 1), (0, 1)],],
    );
}

#[test]
fn racing_checks_never_over_admit() {
    // Burst 3: two checks of 2 cells at one instant, at most one fits.
    model(
        quota(3),
        std::vec![
            std::vec![Op::Check(2)],
            std::vec![Op::Check(2)],
            std::vec![Op::Check(1)]
        ],
    );
}

#[test]
fn checks_race_refunds_and_resets() {
    model(
        quota(3),
        std::vec![
            std::vec![Op::Check(2), Op::Check(2)],
            std::vec![Op::Refund(1), Op::Check(1)],
            std::vec![Op::Reset]
        ],
    );
}

#[test]
fn checks_race_reconfiguration() {
    model(
        quota(3),
        std::vec![
            std::vec![Op::Check(2), Op::Check(1)],
            std::vec![Op::SetQuota(quota(1))],
            std::vec![Op::SetQuota(quota(5))],
        ],
    );
}
