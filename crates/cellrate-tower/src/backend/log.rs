//! The sliding log of a store tier: per client the expiry ticks of its
//! last `limit` admitted cells, as runs `(expiry, count)` oldest first
//! (cells admitted at one tick share a run).
//!
//! * Answers are the core's [`SlidingLog`](cellrate::window::SlidingLog)'s:
//!   `cost` cells are admitted iff at most `limit − cost` cells are
//!   pending (expiry after `now`); they expire at `now + max(W, newest)`
//!   (`newest`: the ticks until the newest pending cell expires), so the
//!   runs stay sorted; a denial waits until the `(cost − free)`-th oldest
//!   pending cell expires.
//! * Invariants: runs are sorted by expiry, each count is at least 1, the
//!   pending cells number at most the limit, and `cells` is the sum of
//!   the counts. A check drops the runs that expired and writes one run
//!   (`O(1)` amortised); a denial reads the runs up to the cell it waits
//!   for.
//! * A change of limit or window ([`LogQuota::translate`]) keeps the cells
//!   the old window still counts, the newest `min(limit, limit′)`, each
//!   until the later of its old and new expiry: at that instant the new
//!   rules admit exactly `max(0, a + limit′ − limit)` where the old
//!   admitted `a` (the core's `SlidingLog::set_limit`).

use std::collections::VecDeque;

use cellrate::window::{SlidingLog, WindowError};
use cellrate::{Decision, Denied, Limited, Snapshot};

/// A sliding log's parameters: at most `limit` cells in any `window`
/// ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogQuota {
    limit: u64,
    window: u64,
}

/// A client's log: runs `(expiry, count)` of cells that expire at one
/// tick, oldest first, and the cells they hold together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runs {
    runs: VecDeque<(u64, u64)>,
    cells: u64,
}

impl Runs {
    pub(crate) fn new() -> Self {
        Runs::default()
    }

    /// Drops the runs expired at `now`; the pending cells, and the ticks
    /// until the newest expires (0 if none is pending).
    fn expire(&mut self, now: u64) -> (u64, u64) {
        while let Some(&(_, c)) = self.runs.front().filter(|&&(e, _)| e <= now) {
            self.cells -= c;
            self.runs.pop_front();
        }
        let newest = self.runs.back().map_or(0, |&(e, _)| e - now);
        (self.cells, newest)
    }

    /// Takes up to `n` cells from the run at index `i`; the cells taken.
    fn take(&mut self, i: usize, n: u64) -> u64 {
        let Some(run) = self.runs.get_mut(i) else {
            return 0;
        };
        let taken = run.1.min(n);
        run.1 -= taken;
        self.cells -= taken;
        if run.1 == 0 {
            self.runs.remove(i);
        }
        taken
    }
}

impl LogQuota {
    /// `limit` per `window` ticks, both at least 1, the window one the
    /// core's log accepts (at most `cellrate::window::log::MAX_WINDOW`).
    pub(crate) fn try_new(limit: u64, window: u64) -> Result<Self, WindowError> {
        if limit == 0 {
            return Err(WindowError::ZeroLimit);
        }
        SlidingLog::<1>::try_new(1, window)?;
        Ok(LogQuota { limit, window })
    }
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// Admits `cost` cells at `now` (written only if `write`): the decision
    /// and the tick they expire at (their mark for a refund), or the
    /// denial. A cost of 0 is a peek.
    pub(crate) fn check(
        &self,
        runs: &mut Runs,
        now: u64,
        cost: u64,
        write: bool,
    ) -> Result<(Decision, u64), Denied> {
        if cost > self.limit {
            return Err(Denied::CostTooLarge {
                cost,
                limit: self.limit,
            });
        }
        let (pending, newest) = runs.expire(now);
        let free = self.limit.saturating_sub(pending);
        if cost == 0 {
            return Ok((Decision::new(self.limit, free, newest), 0));
        }
        if cost > free {
            let wait = Self::nth_expiry(runs, cost - free).map_or(newest, |e| e - now);
            return Err(Denied::Limited(Limited::with_remaining(
                self.limit, free, wait, newest,
            )));
        }
        let until = newest.max(self.window);
        let at = now.saturating_add(until);
        if write {
            match runs.runs.back_mut() {
                Some((e, c)) if *e == at => *c += cost,
                _ => runs.runs.push_back((at, cost)),
            }
            runs.cells += cost;
        }
        Ok((Decision::new(self.limit, free - cost, until), at))
    }

    /// The expiry of the `n`-th oldest pending cell (`n ≥ 1`).
    fn nth_expiry(runs: &Runs, mut n: u64) -> Option<u64> {
        for &(e, c) in &runs.runs {
            if c >= n {
                return Some(e);
            }
            n -= c;
        }
        None
    }

    /// The log at `now`, writing nothing.
    pub(crate) fn peek(&self, runs: &Runs, now: u64) -> Snapshot {
        let mut pending = 0;
        let mut oldest = None;
        let mut newest = 0;
        for &(e, c) in runs.runs.iter().filter(|&&(e, _)| e > now) {
            pending += c;
            oldest.get_or_insert(e - now);
            newest = e - now;
        }
        let free = self.limit.saturating_sub(pending);
        let wait = if free > 0 { 0 } else { oldest.unwrap_or(0) };
        Snapshot::new(self.limit, free, newest, wait)
    }

    /// Whether every cell has expired at `now` (the log is as new).
    pub(crate) fn is_idle(runs: &Runs, now: u64) -> bool {
        runs.runs.back().is_none_or(|&(e, _)| e <= now)
    }

    /// Takes back `cost` of the cells that expire at `at` (the newest such).
    pub(crate) fn refund(runs: &mut Runs, at: u64, mut cost: u64) {
        while cost > 0 {
            let Some(i) = runs.runs.iter().rposition(|&(e, _)| e == at) else {
                return;
            };
            cost -= runs.take(i, cost);
        }
    }

    /// The log re-expressed at `now` for `new` (see the module docs).
    pub(crate) fn translate(&self, runs: &mut Runs, now: u64, new: &LogQuota) {
        let (pending, _) = runs.expire(now);
        let grow = new.window.saturating_sub(self.window);
        for run in runs.runs.iter_mut() {
            run.0 = run.0.saturating_add(grow);
        }
        // The newest `min(limit, limit′)` cells.
        let mut excess = pending.saturating_sub(self.limit.min(new.limit));
        while excess > 0 && !runs.runs.is_empty() {
            excess -= runs.take(0, excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LogQuota, Runs};
    use cellrate::window::SlidingLog;
    use proptest::prelude::*;

    /// One operation of a history: a check of `cost` cells or a change to
    /// (`limit`, `window`), `gap` ticks after the last.
    #[derive(Clone, Debug)]
    enum Op {
        Check { gap: u64, cost: u64 },
        Change { gap: u64, limit: u64, window: u64 },
        Refund { cost: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u64..40, 0u64..5).prop_map(|(gap, cost)| Op::Check { gap, cost }),
            1 => (0u64..40, 1u64..8, 1u64..150)
                .prop_map(|(gap, limit, window)| Op::Change { gap, limit, window }),
            1 => (0u64..4).prop_map(|cost| Op::Refund { cost }),
        ]
    }

    proptest! {
        /// The runs answer every check, peek, change and refund as the
        /// core's sliding log does (which keeps one slot per cell).
        #[test]
        fn runs_answer_as_the_core_log(start in 0u64..1_000, ops in proptest::collection::vec(op(), 1..120)) {
            let (mut limit, mut window) = (4, 100);
            let mut quota = LogQuota::try_new(limit, window).unwrap();
            let mut core = SlidingLog::<8>::new(limit, window);
            let mut runs = Runs::new();
            let mut now = start;
            let mut last = None;
            for op in ops {
                match op {
                    Op::Check { gap, cost } => {
                        now += gap;
                        let got = quota.check(&mut runs, now, cost, true);
                        prop_assert_eq!(got.map(|(d, _)| d), core.check_n(now, cost));
                        if let Ok((_, at)) = got {
                            if cost > 0 {
                                last = Some((now, at));
                            }
                        }
                    }
                    Op::Change { gap, limit: l, window: w } => {
                        now += gap;
                        let new = LogQuota::try_new(l, w).unwrap();
                        quota.translate(&mut runs, now, &new);
                        core.set_limit(now, l, w).unwrap();
                        (limit, window, quota) = (l, w, new);
                        last = None;
                    }
                    Op::Refund { cost } => {
                        // A refund of the last admission, at its own tick
                        // (the core finds its cells by `now + W`).
                        if let Some((at_now, at)) = last.take().filter(|&(n, at)| at == n + window) {
                            LogQuota::refund(&mut runs, at, cost);
                            core.refund_n(at_now, cost);
                        }
                    }
                }
                prop_assert_eq!(quota.peek(&runs, now), core.peek(now), "limit {} window {}", limit, window);
                prop_assert_eq!(LogQuota::is_idle(&runs, now), core.peek(now).reset_after() == 0);
            }
        }
    }
}
