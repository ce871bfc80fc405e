//! A store tier's parameters ([`WindowQuota`]: a fixed, sliding or
//! bucketed window, or a sliding log) and the steps each runs on a
//! client's state ([`CellState`]): a fixed or sliding window's one word,
//! by the core's window quota ([`cellrate::window`], its [`Algorithm`]
//! phases), a bucketed window's [`Buckets`], or a log's runs
//! ([`LogQuota`]).
//!
//! A state is only ever read by the parameters it was written or
//! translated for (the store keeps them beside it); a change of
//! parameters re-expresses it with [`Algorithm::translate`] (a window) or
//! [`LogQuota::translate`] (a log): the client keeps the cells it has used,
//! at most the new limit (docs/design/reconfigure.md).

use cellrate::compose::{AlgorithmKind, LimiterConfig, LimiterConfigError};
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Algorithm, Decision, Denied, Snapshot};

use super::buckets::Buckets;
use super::log::{LogQuota, Runs};
use super::TierInfo;

/// A window tier's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowQuota {
    Fixed(FixedWindowQuota),
    Sliding(SlidingWindowQuota),
    Bucketed(BucketedWindowQuota),
    Log(LogQuota),
}

// Window tiers are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl WindowQuota {
    /// The window quota of `config` (a fixed, sliding or bucketed window);
    /// `None` for another algorithm.
    pub(crate) fn from_config(config: &LimiterConfig) -> Option<Result<Self, LimiterConfigError>> {
        let window = |e| LimiterConfigError::Window(e);
        let (limit, ticks) = (config.limit, config.window);
        Some(match config.algorithm {
            AlgorithmKind::FixedWindow => config.validate().and_then(|()| {
                FixedWindowQuota::try_new(limit, ticks)
                    .map(WindowQuota::Fixed)
                    .map_err(window)
            }),
            AlgorithmKind::SlidingWindow => config.validate().and_then(|()| {
                SlidingWindowQuota::try_new(limit, ticks)
                    .map(WindowQuota::Sliding)
                    .map_err(window)
            }),
            AlgorithmKind::BucketedWindow => config.validate().and_then(|()| {
                let buckets = config.buckets.ok_or(LimiterConfigError::BucketsRequired)?;
                BucketedWindowQuota::try_new(limit, ticks, buckets)
                    .map(WindowQuota::Bucketed)
                    .map_err(window)
            }),
            AlgorithmKind::SlidingLog => config.validate().and_then(|()| {
                LogQuota::try_new(limit, ticks)
                    .map(WindowQuota::Log)
                    .map_err(window)
            }),
            _ => return None,
        })
    }

    /// The algorithm.
    pub(crate) fn kind(&self) -> AlgorithmKind {
        match self {
            WindowQuota::Fixed(_) => AlgorithmKind::FixedWindow,
            WindowQuota::Sliding(_) => AlgorithmKind::SlidingWindow,
            WindowQuota::Bucketed(_) => AlgorithmKind::BucketedWindow,
            WindowQuota::Log(_) => AlgorithmKind::SlidingLog,
        }
    }

    /// The cells in a window.
    pub(crate) fn limit(&self) -> u64 {
        match self {
            WindowQuota::Fixed(q) => q.limit(),
            WindowQuota::Sliding(q) => q.limit(),
            WindowQuota::Bucketed(q) => q.limit(),
            WindowQuota::Log(q) => q.limit(),
        }
    }

    /// What the tier `name` announces: `limit` per `window` ticks of `hz`.
    pub(crate) fn info(&self, name: &str, hz: u64) -> TierInfo {
        let (limit, window_ticks) = match self {
            WindowQuota::Fixed(q) => (q.limit(), q.window()),
            WindowQuota::Sliding(q) => (q.limit(), q.window()),
            WindowQuota::Bucketed(q) => (q.limit(), q.window()),
            WindowQuota::Log(q) => (q.limit(), q.window()),
        };
        TierInfo {
            name: name.to_string(),
            limit,
            window_ticks,
            hz,
            rate: None,
        }
    }
}

/// A client's state in a store tier: a fixed or sliding window's word, a
/// bucketed window's buckets (the whole index of the newest), or a log's
/// runs.
#[derive(Clone, Debug)]
pub(crate) enum CellState {
    Word(u64),
    Buckets(Buckets),
    Log(Runs),
}

/// One window step on `word`, written only if `write`: the decision and
/// the cells' mark for a refund.
fn word_check<Q: Algorithm>(
    quota: &Q,
    word: &mut u64,
    now: u64,
    cost: u64,
    write: bool,
) -> Result<(Decision, u64), Denied> {
    let (next, decision) = quota.check(*word, now, cost)?;
    let mark = quota.mark(next, now);
    if write {
        *word = next;
    }
    Ok((decision, mark))
}

impl WindowQuota {
    /// The state of a client never seen (or whose cells have all expired).
    pub(crate) fn fresh(&self) -> CellState {
        match self {
            WindowQuota::Fixed(_) => CellState::Word(FixedWindowQuota::NEW),
            WindowQuota::Sliding(_) => CellState::Word(SlidingWindowQuota::NEW),
            WindowQuota::Bucketed(_) => CellState::Buckets(Buckets::default()),
            WindowQuota::Log(_) => CellState::Log(Runs::new()),
        }
    }

    /// Admits `cost` cells at `now` on `state` (written only if `write`):
    /// the decision and the cells' mark, or the denial; a cost of 0 is a
    /// peek.
    pub(crate) fn check(
        &self,
        state: &mut CellState,
        now: u64,
        cost: u64,
        write: bool,
    ) -> Result<(Decision, u64), Denied> {
        match (self, &mut *state) {
            (WindowQuota::Fixed(q), CellState::Word(w)) => word_check(q, w, now, cost, write),
            (WindowQuota::Sliding(q), CellState::Word(w)) => word_check(q, w, now, cost, write),
            (WindowQuota::Bucketed(q), CellState::Buckets(b)) => b.check(q, now, cost, write),
            (WindowQuota::Log(l), CellState::Log(r)) => l.check(r, now, cost, write),
            // A state of another kind (never paired by the store): as new.
            _ => {
                *state = self.fresh();
                self.check(state, now, cost, write)
            }
        }
    }

    /// `state` at `now`, consuming nothing.
    pub(crate) fn peek(&self, state: &CellState, now: u64) -> Snapshot {
        match (self, state) {
            (WindowQuota::Fixed(q), CellState::Word(w)) => q.peek(*w, now),
            (WindowQuota::Sliding(q), CellState::Word(w)) => q.peek(*w, now),
            (WindowQuota::Bucketed(q), CellState::Buckets(b)) => b.peek(q, now),
            (WindowQuota::Log(l), CellState::Log(r)) => l.peek(r, now),
            _ => self.peek(&self.fresh(), now),
        }
    }

    /// Whether `state` is as new at `now` (its slot may be given to
    /// another client).
    pub(crate) fn is_idle(&self, state: &CellState, now: u64) -> bool {
        match (self, state) {
            (WindowQuota::Fixed(q), CellState::Word(w)) => q.is_idle(*w, now),
            (WindowQuota::Sliding(q), CellState::Word(w)) => q.is_idle(*w, now),
            (WindowQuota::Bucketed(q), CellState::Buckets(b)) => b.is_idle(q, now),
            (WindowQuota::Log(_), CellState::Log(r)) => LogQuota::is_idle(r, now),
            _ => true,
        }
    }

    /// Gives back `cost` cells counted under `mark`.
    pub(crate) fn refund(&self, state: &mut CellState, mark: u64, cost: u64) {
        match (self, state) {
            (WindowQuota::Fixed(q), CellState::Word(w)) => *w = q.refund(*w, mark, cost),
            (WindowQuota::Sliding(q), CellState::Word(w)) => *w = q.refund(*w, mark, cost),
            (WindowQuota::Bucketed(_), CellState::Buckets(b)) => b.refund(mark, cost),
            (WindowQuota::Log(_), CellState::Log(r)) => LogQuota::refund(r, mark, cost),
            _ => {} // nothing of this quota's to give back
        }
    }

    /// `state` re-expressed at `now` for `new`, of the same algorithm (a
    /// plan never changes a tier's algorithm; another is read as new).
    pub(crate) fn translate(&self, state: &mut CellState, now: u64, new: &WindowQuota) {
        match (self, new, &mut *state) {
            (WindowQuota::Fixed(a), WindowQuota::Fixed(b), CellState::Word(w)) => {
                *w = a.translate(*w, now, b)
            }
            (WindowQuota::Sliding(a), WindowQuota::Sliding(b), CellState::Word(w)) => {
                *w = a.translate(*w, now, b)
            }
            (WindowQuota::Bucketed(a), WindowQuota::Bucketed(b), CellState::Buckets(s)) => {
                s.translate(a, now, b)
            }
            (WindowQuota::Log(a), WindowQuota::Log(b), CellState::Log(r)) => a.translate(r, now, b),
            _ => *state = new.fresh(),
        }
    }
}
