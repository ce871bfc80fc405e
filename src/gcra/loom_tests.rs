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
                Op::SetQuota(q) => g.set_quota(NOW, q).is_ok(),
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

/// The replayed limiter: its TAT and quota, the quota a `set_quota` in
/// progress replaced (between its publication and its translation), and,
/// per thread, the older quotas its next check or refund may still use
/// (it may have read one before a publication and commit after it).
#[derive(Clone)]
struct Replay {
    tat: u64,
    quota: Quota,
    translating: Option<(usize, Quota)>,
    stale: Vec<Vec<Quota>>,
}

impl Replay {
    /// The states after thread `t` runs `op` with outcome `out`, under each
    /// quota it may have read (none: no such outcome).
    fn after(&self, t: usize, op: Op, out: bool) -> Vec<Replay> {
        let mut next = self.clone();
        match op {
            Op::Check(_) | Op::Refund(_) => {
                next.stale[t].clear();
                let mut quotas = self.stale[t].clone();
                quotas.push(self.quota);
                quotas
                    .into_iter()
                    .filter_map(|q| {
                        let mut n = next.clone();
                        match op {
                            Op::Check(cost) => match q.check(self.tat, NOW, cost) {
                                Ok((tat, _)) if out => n.tat = tat,
                                Err(_) if !out => {}
                                _ => return None,
                            },
                            Op::Refund(cost) => n.tat = refund(&q, self.tat, q.now_word(NOW), cost),
                            _ => unreachable!(),
                        }
                        Some(n)
                    })
                    .collect()
            }
            Op::Reset => {
                next.tat = 0;
                std::vec![next]
            }
            Op::SetQuota(_) if !out => std::vec![next],
            // The publication: other threads may still use the old quota
            // for one operation each.
            Op::SetQuota(q) => {
                for (u, stale) in next.stale.iter_mut().enumerate() {
                    if u != t {
                        stale.push(self.quota);
                    }
                }
                next.translating = Some((t, self.quota));
                next.quota = q;
                std::vec![next]
            }
        }
    }

    /// The translation that ends a `set_quota`: the cells used kept.
    fn translated(&self) -> Replay {
        let mut next = self.clone();
        if let Some((_, old)) = next.translating.take() {
            next.tat = old.translate(self.tat, NOW, &self.quota);
        }
        next
    }
}

/// Whether some merge of the per-thread logs, replayed on the pure steps,
/// gives the same outcomes and ends in `end`. A `set_quota` that took
/// effect is two steps (publish, then translate the TAT) with other
/// threads' operations between them; an operation in flight across the
/// publication may use the old quota (the bound `Gcra::set_quota` states).
fn explained(logs: &[Log], start: Quota, end: (u64, Quota)) -> bool {
    fn go(logs: &[Log], next: &mut Vec<usize>, state: Replay, end: (u64, Quota)) -> bool {
        if logs.iter().zip(next.iter()).all(|(l, &i)| i == l.len()) && state.translating.is_none() {
            return (state.tat, state.quota) == end;
        }
        for t in 0..logs.len() {
            // The setter's translation comes right after its publication
            // in its own program order.
            if matches!(state.translating, Some((setter, _)) if setter == t) {
                if go(logs, next, state.translated(), end) {
                    return true;
                }
                continue;
            }
            let Some(&(op, out)) = logs[t].get(next[t]) else {
                continue;
            };
            // One `set_quota` at a time: a second is refused meanwhile.
            if state.translating.is_some() && matches!(op, Op::SetQuota(_)) && out {
                continue;
            }
            for after in state.after(t, op, out) {
                next[t] += 1;
                let ok = go(logs, next, after, end);
                next[t] -= 1;
                if ok {
                    return true;
                }
            }
        }
        false
    }
    let state = Replay {
        tat: 0,
        quota: start,
        translating: None,
        stale: std::vec![Vec::new(); logs.len()],
    };
    go(logs, &mut std::vec![0; logs.len()], state, end)
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
    // A lower (burst 3 to 1) while one thread checks twice: the first
    // check may be in flight across the change and use the old quota.
    model(
        quota(3),
        std::vec![
            std::vec![Op::Check(2), Op::Check(1)],
            std::vec![Op::SetQuota(quota(1))],
        ],
    );
}

#[test]
fn reconfigurations_race_each_other_and_a_check() {
    // Two changes at once, after a check left a debt: one is refused
    // (`Busy`) or they follow each other, each translating what the one
    // before it left.
    model(
        quota(3),
        std::vec![
            std::vec![Op::Check(2), Op::SetQuota(quota(1))],
            std::vec![Op::SetQuota(quota(5))],
        ],
    );
}
