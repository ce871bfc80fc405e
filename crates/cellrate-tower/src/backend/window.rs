//! In-process window tiers: a keyed table of one window quota (fixed,
//! sliding or bucketed) whose parameters a reload changes exactly.
//!
//! * A check decides as the core's window quota in a keyed table
//!   ([`cellrate::window`]): the table's algorithm is [`LiveWindow`], which
//!   reads the quota in force once per step and runs its step.
//! * A change of parameters (a reload) takes the table's gate for writing,
//!   publishes the new quota and re-expresses every client's state with the
//!   old quota's [`Algorithm::translate`] before any check runs again
//!   ([`KeyedTable::rewrite_states`](cellrate::keyed::KeyedTable::rewrite_states)).
//!   A check holds the gate for reading while it reads and writes the
//!   table, so no check ever reads a state under parameters it was not
//!   written or translated for: a window's state word is packed by its
//!   limit and grid, which another quota would misread.
//! * A window tier has no per-client overrides (its slots' idleness, which
//!   eviction tests, is read by the tier's one quota).
//!
//! The gate is a shared lock word on each request's path through a window
//! tier; GCRA tiers do not take it.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use arc_swap::ArcSwap;
use cellrate::compose::{AlgorithmKind, LimiterConfig, LimiterConfigError};
use cellrate::keyed::{Entry, Hashed, KeyedBox, KeyedStats, Seed, Slot, WhenFull};
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Algorithm, Decision, Denied, Snapshot};

use super::{Scope, TierInfo};
use crate::key::RequestKey;

/// A window tier's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowQuota {
    Fixed(FixedWindowQuota),
    Sliding(SlidingWindowQuota),
    Bucketed(BucketedWindowQuota),
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
            _ => return None,
        })
    }

    /// The algorithm.
    pub(crate) fn kind(&self) -> AlgorithmKind {
        match self {
            WindowQuota::Fixed(_) => AlgorithmKind::FixedWindow,
            WindowQuota::Sliding(_) => AlgorithmKind::SlidingWindow,
            WindowQuota::Bucketed(_) => AlgorithmKind::BucketedWindow,
        }
    }

    /// What the tier `name` announces: `limit` per `window` ticks of `hz`.
    pub(crate) fn info(&self, name: &str, hz: u64) -> TierInfo {
        let (limit, window_ticks) = match self {
            WindowQuota::Fixed(q) => (q.limit(), q.window()),
            WindowQuota::Sliding(q) => (q.limit(), q.window()),
            WindowQuota::Bucketed(q) => (q.limit(), q.window()),
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

/// A window quota that a change replaces: the algorithm of a window tier's
/// table. Each step reads the quota in force once (a lock-free load);
/// the table's gate keeps changes and checks apart (see the module docs).
pub(crate) struct LiveWindow<Q> {
    params: ArcSwap<Q>,
}

impl<Q: Copy> LiveWindow<Q> {
    fn new(quota: Q) -> Self {
        LiveWindow {
            params: ArcSwap::from_pointee(quota),
        }
    }
    #[inline]
    fn get(&self) -> Q {
        **self.params.load()
    }
}

impl<Q: Algorithm + Copy> Algorithm for LiveWindow<Q> {
    const NEW: u64 = Q::NEW;
    /// The quota read once for this check, and its preparation.
    type Prepared = (Q, Q::Prepared);
    type Shortfall = Q::Shortfall;

    #[inline]
    fn prepare(&self, now: u64, cost: u64) -> Result<Self::Prepared, Denied> {
        let quota = self.get();
        let prepared = quota.prepare(now, cost)?;
        Ok((quota, prepared))
    }
    #[inline]
    fn step(
        &self,
        state: u64,
        prepared: &Self::Prepared,
    ) -> Result<(u64, Decision), Self::Shortfall> {
        prepared.0.step(state, &prepared.1)
    }
    fn denial(&self, prepared: &Self::Prepared, shortfall: Self::Shortfall) -> Denied {
        prepared.0.denial(&prepared.1, shortfall)
    }
    fn peek(&self, state: u64, now: u64) -> Snapshot {
        self.get().peek(state, now)
    }
    fn is_idle(&self, state: u64, now: u64) -> bool {
        self.get().is_idle(state, now)
    }
    fn mark(&self, stored: u64, now: u64) -> u64 {
        self.get().mark(stored, now)
    }
    fn mark_at(&self, now: u64) -> u64 {
        self.get().mark_at(now)
    }
    fn refund(&self, state: u64, mark: u64, cost: u64) -> u64 {
        self.get().refund(state, mark, cost)
    }
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        self.get().translate(state, now, &new.get())
    }
}

/// One window table and its gate.
pub(crate) struct WindowBox<Q> {
    gate: RwLock<()>,
    table: KeyedBox<LiveWindow<Q>>,
}

/// A key of a window table, the table's gate held for reading while it
/// lives.
pub(crate) struct Gated<'t, Q> {
    _gate: RwLockReadGuard<'t, ()>,
    pub(crate) entry: Entry<'t, LiveWindow<Q>, Box<[Slot]>>,
}

impl<Q: Algorithm + Copy + PartialEq> WindowBox<Q> {
    fn new(quota: Q, capacity: usize, when_full: WhenFull) -> Self {
        WindowBox {
            gate: RwLock::new(()),
            table: KeyedBox::with_capacity(
                capacity,
                LiveWindow::new(quota),
                when_full,
                Seed::random(),
            ),
        }
    }
    /// Replaces the quota at `now`: every client keeps the cells it has
    /// used, at most the new limit (`translate`), before any check reads
    /// the new quota.
    fn set(&self, now: u64, quota: Q) {
        let _writing = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let old = self.table.algorithm().get();
        if old == quota {
            return;
        }
        self.table.algorithm().params.store(Arc::new(quota));
        self.table
            .rewrite_states(|_, state| old.translate(state, now, &quota));
    }
    /// `key`'s entry: the client, or (client, endpoint).
    fn entry<'t>(&'t self, scope: Scope, key: &RequestKey<'_>) -> Gated<'t, Q> {
        let gate = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        let entry = match (scope, key.scope()) {
            (Scope::ClientAndEndpoint, Some(endpoint)) => {
                self.table.entry(&(Hashed(key.client()), Hashed(endpoint)))
            }
            _ => self.table.entry(&Hashed(key.client())),
        };
        Gated { _gate: gate, entry }
    }
}

/// A window tier's table, of its algorithm.
pub(crate) enum WindowTable {
    Fixed(WindowBox<FixedWindowQuota>),
    Sliding(WindowBox<SlidingWindowQuota>),
    Bucketed(WindowBox<BucketedWindowQuota>),
}

/// A key of a window tier's table (see [`WindowTable::entry`]).
pub(crate) enum WindowEntry<'t> {
    Fixed(Gated<'t, FixedWindowQuota>),
    Sliding(Gated<'t, SlidingWindowQuota>),
    Bucketed(Gated<'t, BucketedWindowQuota>),
}

impl WindowTable {
    pub(crate) fn new(quota: WindowQuota, capacity: usize, when_full: WhenFull) -> Self {
        match quota {
            WindowQuota::Fixed(q) => WindowTable::Fixed(WindowBox::new(q, capacity, when_full)),
            WindowQuota::Sliding(q) => WindowTable::Sliding(WindowBox::new(q, capacity, when_full)),
            WindowQuota::Bucketed(q) => {
                WindowTable::Bucketed(WindowBox::new(q, capacity, when_full))
            }
        }
    }
    /// The quota in force.
    pub(crate) fn quota(&self) -> WindowQuota {
        match self {
            WindowTable::Fixed(b) => WindowQuota::Fixed(b.table.algorithm().get()),
            WindowTable::Sliding(b) => WindowQuota::Sliding(b.table.algorithm().get()),
            WindowTable::Bucketed(b) => WindowQuota::Bucketed(b.table.algorithm().get()),
        }
    }
    /// Replaces the quota at `now`, each client's state translated; a
    /// quota of another algorithm is ignored (a plan never makes one).
    pub(crate) fn set(&self, now: u64, quota: WindowQuota) {
        match (self, quota) {
            (WindowTable::Fixed(b), WindowQuota::Fixed(q)) => b.set(now, q),
            (WindowTable::Sliding(b), WindowQuota::Sliding(q)) => b.set(now, q),
            (WindowTable::Bucketed(b), WindowQuota::Bucketed(q)) => b.set(now, q),
            _ => {}
        }
    }
    /// `key`'s entry in this table, keyed as `scope` says.
    pub(crate) fn entry<'t>(&'t self, scope: Scope, key: &RequestKey<'_>) -> WindowEntry<'t> {
        match self {
            WindowTable::Fixed(b) => WindowEntry::Fixed(b.entry(scope, key)),
            WindowTable::Sliding(b) => WindowEntry::Sliding(b.entry(scope, key)),
            WindowTable::Bucketed(b) => WindowEntry::Bucketed(b.entry(scope, key)),
        }
    }
    #[cfg_attr(not(any(feature = "serde", feature = "metrics")), allow(dead_code))]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            WindowTable::Fixed(b) => b.table.capacity(),
            WindowTable::Sliding(b) => b.table.capacity(),
            WindowTable::Bucketed(b) => b.table.capacity(),
        }
    }
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn stats(&self) -> KeyedStats {
        match self {
            WindowTable::Fixed(b) => b.table.stats(),
            WindowTable::Sliding(b) => b.table.stats(),
            WindowTable::Bucketed(b) => b.table.stats(),
        }
    }
}
