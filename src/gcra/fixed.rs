//! [`FixedGcra`]: the shared GCRA whose quota is fixed when it is built.

use core::fmt;

use super::step::Charge;
use super::{reserve, Reservation};
use crate::algorithm::{apply, Limiter};
use crate::decision::{Decision, Denied, Snapshot};
use crate::quota::Quota;
use crate::sync::loom_const_fn;
use crate::RateLimiter;

/// A GCRA limiter shared through `&self` whose quota is fixed at
/// construction: [`Gcra`](super::Gcra) without `set_quota`.
///
/// Given the same operations at the same `now`s, a `FixedGcra` and a `Gcra`
/// with the same quota return equal results and hold equal state words,
/// with the same guarantee under concurrency. The quota is a plain field
/// and [`check`](Self::check) applies a charge of one cell computed once, in
/// [`new`](Self::new), so a check reads nothing shared but the state word,
/// and a denial loads it, compares and stores nothing.
///
/// ```
/// use cellrate::{FixedGcra, Quota, RateLimiter};
/// static LIMITER: FixedGcra =
///     FixedGcra::new(Quota::per_second(100).with_burst(20).at_hz(1_000_000));
///
/// assert!((0..20).all(|_| LIMITER.check(0).is_ok()));
/// let denied = LIMITER.check(0).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(10_000)); // one cell per 10 ms
/// ```
pub struct FixedGcra {
    /// The quota, fixed, and the state word.
    shared: Limiter<Quota>,
    /// The charge of one cell, prepared once from the quota.
    one: Charge,
}

impl FixedGcra {
    loom_const_fn! {
        /// A full limiter for `quota`.
        ///
        /// ```
        /// use cellrate::{FixedGcra, Quota};
        /// const QUOTA: Quota = Quota::per_minute(6).with_burst(2).at_hz(1_000);
        /// let radio = FixedGcra::new(QUOTA);
        /// assert_eq!(radio.quota(), QUOTA);
        /// ```
        pub fn new(quota: Quota) -> Self {
            FixedGcra {
                shared: Limiter::from_parts(quota, 0),
                one: quota.charge_of_one(),
            }
        }
    }

    /// The quota, as given to [`new`](Self::new).
    pub fn quota(&self) -> Quota {
        *self.shared.params()
    }

    /// Admits one cell at `now`; see [`Gcra::check`](super::Gcra::check).
    #[inline(always)]
    pub fn check(&self, now: u64) -> Result<Decision, Denied> {
        self.shared
            .params()
            .check_one_kept(self.shared.state(), now, &self.one)
    }

    /// Admits `cost` cells at `now`; see [`Gcra::check_n`](super::Gcra::check_n).
    #[inline(always)]
    pub fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        apply(self.shared.state(), self.shared.params(), now, cost).map(|(d, _)| d)
    }

    /// The state at `now`, consuming nothing.
    pub fn peek(&self, now: u64) -> Snapshot {
        self.shared.peek_at(now)
    }

    /// Shaping; see [`Gcra::reserve_n`](super::Gcra::reserve_n).
    pub fn reserve_n(&self, now: u64, cost: u64, max_wait: u64) -> Result<Reservation, Denied> {
        let quota = self.shared.params();
        let now = quota.now_word(now);
        let max_wait = max_wait.saturating_mul(quota.scale());
        self.shared
            .state()
            .update(|state| reserve(quota, state, now, cost, max_wait))
    }

    /// Gives back `cost` cells; see [`Gcra::refund_n`](super::Gcra::refund_n).
    pub fn refund_n(&self, now: u64, cost: u64) -> Snapshot {
        self.shared.refund_at(now, cost)
    }

    /// Makes the limiter full, as new.
    pub fn reset(&self) {
        self.shared.clear()
    }

    /// The state word (for the loom models, which replay it).
    #[cfg(all(test, feature = "loom"))]
    pub(crate) fn state_word(&self) -> u64 {
        self.shared.state().load()
    }
}

impl RateLimiter for FixedGcra {
    #[inline(always)]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        FixedGcra::check_n(self, now, cost)
    }
    #[inline(always)]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        FixedGcra::check(self, now)
    }
    fn peek(&self, now: u64) -> Snapshot {
        FixedGcra::peek(self, now)
    }
}

impl fmt::Debug for FixedGcra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedGcra")
            .field("state", &self.shared.state().load())
            .field("quota", self.shared.params())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for FixedGcra {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "FixedGcra {{ state: {=u64}, quota: {} }}",
            self.shared.state().load(),
            self.shared.params()
        )
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::Gcra;

    /// The charge kept for one cell is what `prepare` computes for a cost
    /// of 1, for quotas at both ends of the range.
    #[test]
    fn the_charge_of_one_is_prepares() {
        use crate::Algorithm;
        for quota in [
            Quota::per_second(1).at_hz(1_000),
            Quota::per_second(7).with_burst(3).at_hz(1_000_000_000),
            Quota::per_ticks(1, 1)
                .with_burst(1 << 40)
                .at_hz(1_000_000_000),
            Quota::per_ticks(1, 1 << 61).at_hz(1),
        ] {
            let kept = quota.charge_of_one();
            for now in [0, 1, u64::MAX] {
                assert_eq!(quota.prepare(now, 1).unwrap().charge(), kept);
            }
            // A cost of 2 (where the burst allows it) is another charge.
            if let Ok(two) = quota.prepare(0, 2) {
                assert_ne!(two.charge(), kept);
            }
        }
    }

    /// A few answers side by side with `Gcra` (the property test in
    /// `tests/fixed_gcra.rs` runs random histories).
    #[test]
    fn answers_as_gcra() {
        let quota = Quota::per_second(10).with_burst(3).at_hz(1_000);
        let (fixed, gcra) = (FixedGcra::new(quota), Gcra::new(quota));
        for now in [0, 0, 0, 0, 50, 100, 100, 250, u64::MAX] {
            assert_eq!(fixed.check(now), gcra.check(now));
            assert_eq!(fixed.peek(now), gcra.peek(now));
        }
        assert_eq!(fixed.check_n(300, 4), gcra.check_n(300, 4));
        assert_eq!(fixed.reserve_n(300, 2, 500), gcra.reserve_n(300, 2, 500));
        assert_eq!(fixed.refund_n(300, 1), gcra.refund_n(300, 1));
        fixed.reset();
        gcra.reset();
        assert_eq!(fixed.check_n(300, 3), gcra.check_n(300, 3));
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    //! Every interleaving (up to the preemption bound) of concurrent
    //! checks (through the charge of one cell kept by `new`, and through
    //! `check_n`), refunds and resets on one `FixedGcra` must be explained
    //! by some sequential order of the same operations that respects each
    //! thread's program order, replayed on the quota's pure steps: same
    //! outcomes, same final state. That rules out over-admission and lost
    //! updates.
    use super::*;
    use crate::Algorithm;
    use loom::sync::Arc;
    use loom::thread;

    extern crate std;
    use std::vec::Vec;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Op {
        /// `check` (one cell, the kept charge).
        Check,
        /// `check_n` of this many cells.
        CheckN(u64),
        Refund(u64),
        Reset,
    }

    type Log = Vec<(Op, bool)>;

    const NOW: u64 = 1_000;

    fn quota() -> Quota {
        Quota::per_second(10).with_burst(3).at_hz(1_000)
    }

    fn run(g: &FixedGcra, ops: &[Op]) -> Log {
        ops.iter()
            .map(|&op| {
                let out = match op {
                    Op::Check => g.check(NOW).is_ok(),
                    Op::CheckN(cost) => g.check_n(NOW, cost).is_ok(),
                    Op::Refund(cost) => {
                        g.refund_n(NOW, cost);
                        true
                    }
                    Op::Reset => {
                        g.reset();
                        true
                    }
                };
                (op, out)
            })
            .collect()
    }

    /// Tries every merge of the per-thread logs, replaying each on the
    /// quota's pure steps from `state`.
    fn explained(logs: &[Log], next: &mut Vec<usize>, state: u64, end: u64) -> bool {
        let q = quota();
        if logs.iter().zip(next.iter()).all(|(l, &i)| i == l.len()) {
            return state == end;
        }
        for t in 0..logs.len() {
            let Some(&(op, out)) = logs[t].get(next[t]) else {
                continue;
            };
            let after = match op {
                Op::Check | Op::CheckN(_) => {
                    let cost = if let Op::CheckN(c) = op { c } else { 1 };
                    match q.check(state, NOW, cost) {
                        Ok((s, _)) if out => s,
                        Err(_) if !out => state,
                        _ => continue,
                    }
                }
                Op::Refund(cost) => q.refund(state, q.mark_at(NOW), cost),
                Op::Reset => Quota::NEW,
            };
            next[t] += 1;
            let ok = explained(logs, next, after, end);
            next[t] -= 1;
            if ok {
                return true;
            }
        }
        false
    }

    fn model(threads: Vec<Vec<Op>>) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let g = Arc::new(FixedGcra::new(quota()));
            let handles: Vec<_> = threads[1..]
                .iter()
                .map(|ops| {
                    let (g, ops) = (g.clone(), ops.clone());
                    thread::spawn(move || run(&g, &ops))
                })
                .collect();
            let mut logs = std::vec![run(&g, &threads[0])];
            logs.extend(handles.into_iter().map(|h| h.join().unwrap()));
            let end = g.state_word();
            assert!(
                explained(&logs, &mut std::vec![0; logs.len()], Quota::NEW, end),
                "no sequential order explains {logs:?} ending in {end}"
            );
        });
    }

    #[test]
    fn racing_checks_never_over_admit() {
        // Burst 3: four cells asked for at one instant, at most three fit.
        model(std::vec![
            std::vec![Op::Check, Op::Check],
            std::vec![Op::CheckN(2)],
        ]);
    }

    #[test]
    fn checks_race_refunds_and_resets() {
        model(std::vec![
            std::vec![Op::CheckN(2), Op::Check],
            std::vec![Op::Refund(1), Op::Check],
            std::vec![Op::Reset],
        ]);
    }
}
