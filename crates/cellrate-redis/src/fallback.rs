//! The fallback's tables: per tier, the tier's own algorithm per client,
//! on the tier's fallback quota re-expressed on the µs clock as a
//! [`RedisTier`] would be. GCRA and the windows run in a
//! [`KeyedBox`] (bounded memory, lossless eviction: a client that owes is
//! never forgotten, and the keyed tables' full-table policies); the sliding
//! log, whose state is no 64-bit word, in a bounded table of logs with the
//! same rule. Each client's entry is [`Revocable`], so the tiers compose
//! all or nothing.

use std::collections::{HashMap, VecDeque};
use std::string::String;
use std::sync::Mutex;

use super::policy::{micros_up, on_server_clock, TierAlgorithm};
use super::{Error, RedisConfig, RedisTier};
use cellrate::compose::Revocable;
use cellrate::keyed::{Entry, EntryReceipt, KeyedBox, Seed, WhenFull};
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Decision, Denied, Limited, Quota, RateLimiter, Snapshot};

/// A fallback table and, once its layer registered them, its
/// `cellrate_keyed_*` series (shared by every limiter that shares it).
pub(crate) struct Fallback {
    pub(crate) table: Table,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: std::sync::OnceLock<cellrate_metrics::KeyedMetrics>,
}

impl Fallback {
    pub(crate) fn new(table: Table) -> Self {
        Fallback {
            table,
            #[cfg(feature = "metrics")]
            metrics: std::sync::OnceLock::new(),
        }
    }
}

/// A fallback table: the tier's own algorithm, per client.
pub(crate) enum Table {
    Gcra(KeyedBox<Quota>),
    Fixed(KeyedBox<FixedWindowQuota>),
    Sliding(KeyedBox<SlidingWindowQuota>),
    Bucketed(KeyedBox<BucketedWindowQuota>),
    Log(LogTable),
}

/// The fallback's parameters for `tier` from its fallback quota `q`: a GCRA
/// tier runs `q` on the µs clock; a window tier runs its own algorithm
/// with `q`'s burst as the limit and its span (`τ + T`, i.e. the period
/// of `Quota::per_duration(limit, window)`) as the window, re-expressed in
/// µs as the tier's own window is (the bucketed window keeps its `N`).
pub(crate) fn table_for(
    tier: &RedisTier,
    q: Quota,
    config: &RedisConfig,
    seed: Seed,
) -> Result<Table, Error> {
    let (cap, full) = (config.fallback_capacity, config.fallback_when_full);
    let limit = q.burst();
    let window = || micros_up(q.span().div_ceil(q.scale().max(1)), q.hz()).map(|(w, _)| w);
    let bad = |e| Error::Config(cellrate::compose::LimiterConfigError::Window(e));
    Ok(match tier.algorithm() {
        TierAlgorithm::Gcra => {
            let (q, _) = on_server_clock(q)?;
            Table::Gcra(KeyedBox::with_capacity(cap, q, full, seed))
        }
        TierAlgorithm::FixedWindow(_) => Table::Fixed(KeyedBox::with_capacity(
            cap,
            FixedWindowQuota::try_new(limit, window()?).map_err(bad)?,
            full,
            seed,
        )),
        TierAlgorithm::SlidingWindow(_) => Table::Sliding(KeyedBox::with_capacity(
            cap,
            SlidingWindowQuota::try_new(limit, window()?).map_err(bad)?,
            full,
            seed,
        )),
        TierAlgorithm::BucketedWindow(own) => {
            let n = own.buckets();
            let b = micros_up(q.span().div_ceil(q.scale().max(1)) / u64::from(n), q.hz())?.0;
            Table::Bucketed(KeyedBox::with_capacity(
                cap,
                BucketedWindowQuota::try_new(limit, b * u64::from(n), n).map_err(bad)?,
                full,
                seed,
            ))
        }
        TierAlgorithm::SlidingLog { .. } => Table::Log(LogTable {
            limit,
            window: window()?,
            capacity: cap,
            when_full: full,
            logs: Mutex::new(HashMap::new()),
        }),
    })
}

/// The sliding logs of the fallback: per client the expiry times of its
/// last `limit` cells (the in-process [`SlidingLog`](cellrate::window::SlidingLog)'s
/// rule, on a heap), at most `capacity` clients. A new client finding it
/// full first drops the clients whose cells have all expired (they are as
/// new); if none has, it is admitted untracked ([`WhenFull::Admit`]),
/// denied ([`WhenFull::Deny`]) or charged to one shared log
/// ([`WhenFull::Shared`]).
pub(crate) struct LogTable {
    limit: u64,
    window: u64,
    capacity: usize,
    when_full: WhenFull,
    logs: Mutex<HashMap<String, VecDeque<u64>>>,
}

/// The key of the shared log ([`WhenFull::Shared`]): no Redis key is empty.
const SHARED_LOG: &str = "";

impl LogTable {
    /// The sliding log's step on `log` (expiries, oldest first).
    fn step(
        &self,
        log: &mut VecDeque<u64>,
        now: u64,
        cost: u64,
    ) -> Result<(Decision, u64), Denied> {
        while log.front().is_some_and(|&e| e <= now) || log.len() as u64 > self.limit {
            log.pop_front();
        }
        let pending = log.len() as u64;
        let free = self.limit - pending;
        let newest = log.back().map_or(0, |&e| e - now);
        if cost > self.limit {
            return Err(Denied::CostTooLarge {
                cost,
                limit: self.limit,
            });
        }
        if cost == 0 {
            return Ok((Decision::new(self.limit, free, newest), 0));
        }
        if cost > free {
            let slot = log[(cost - free - 1) as usize];
            return Err(Denied::Limited(Limited::with_remaining(
                self.limit,
                free,
                slot - now,
                newest,
            )));
        }
        let at = (now + self.window).max(now + newest);
        for _ in 0..cost {
            log.push_back(at);
        }
        Ok((Decision::new(self.limit, free - cost, at - now), at))
    }

    fn admit(&self, key: &str, now: u64, cost: u64) -> Result<(Decision, LogReceipt), Denied> {
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = key;
        if !logs.contains_key(key) && logs.len() >= self.capacity {
            logs.retain(|_, l| l.back().is_some_and(|&e| e > now));
            if logs.len() >= self.capacity {
                match self.when_full {
                    WhenFull::Admit => {
                        return Ok((
                            Decision::new(self.limit, self.limit, 0),
                            LogReceipt::default(),
                        ))
                    }
                    WhenFull::Deny => {
                        return Err(Denied::Limited(Limited::new(
                            self.limit,
                            self.window,
                            self.window,
                        )))
                    }
                    _ => key = SHARED_LOG,
                }
            }
        }
        let log = logs.entry(key.into()).or_default();
        let (d, at) = self.step(log, now, cost)?;
        Ok((
            d,
            LogReceipt {
                shared: key.is_empty(),
                at,
                cost: if at > 0 { cost } else { 0 },
            },
        ))
    }

    fn probe(&self, key: &str, now: u64, cost: u64) -> Result<Decision, Denied> {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let mut log = logs.get(key).cloned().unwrap_or_default();
        drop(logs);
        let before = self.step(&mut log, now, 0).map(|(d, _)| d);
        self.step(&mut log, now, cost).and(before)
    }

    /// Takes back the `cost` cells of a receipt: the newest entries with
    /// its expiry.
    fn revoke(&self, key: &str, r: LogReceipt) {
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let key = if r.shared { SHARED_LOG } else { key };
        if let Some(log) = logs.get_mut(key) {
            for _ in 0..r.cost {
                match log.iter().rposition(|&e| e == r.at) {
                    Some(i) => {
                        log.remove(i);
                    }
                    None => break,
                }
            }
        }
    }
}

/// What a fallback log gives back on revocation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LogReceipt {
    shared: bool,
    at: u64,
    cost: u64,
}

/// One tier's limiter for one client in the fallback.
pub(crate) enum FallbackEntry<'a> {
    Gcra(Entry<'a, Quota, std::boxed::Box<[cellrate::keyed::Slot]>>),
    Fixed(Entry<'a, FixedWindowQuota, std::boxed::Box<[cellrate::keyed::Slot]>>),
    Sliding(Entry<'a, SlidingWindowQuota, std::boxed::Box<[cellrate::keyed::Slot]>>),
    Bucketed(Entry<'a, BucketedWindowQuota, std::boxed::Box<[cellrate::keyed::Slot]>>),
    Log(&'a LogTable, &'a str),
}

/// What an entry gives back on revocation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FallbackReceipt {
    Entry(EntryReceipt),
    Log(LogReceipt),
}

macro_rules! each_entry {
    ($self:expr, $e:ident => $body:expr, $log:pat => $log_body:expr) => {
        match $self {
            FallbackEntry::Gcra($e) => $body,
            FallbackEntry::Fixed($e) => $body,
            FallbackEntry::Sliding($e) => $body,
            FallbackEntry::Bucketed($e) => $body,
            $log => $log_body,
        }
    };
}

impl RateLimiter for FallbackEntry<'_> {
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit_n(now, cost).map(|(d, _)| d)
    }
    fn peek(&self, now: u64) -> Snapshot {
        each_entry!(self, e => e.peek(now), FallbackEntry::Log(t, k) => {
            let d = t.probe(k, now, 0).unwrap_or(Decision::new(t.limit, 0, 0));
            Snapshot::new(d.limit(), d.remaining(), d.reset_after(), 0)
        })
    }
}

impl Revocable for FallbackEntry<'_> {
    type Receipt = FallbackReceipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, FallbackReceipt), Denied> {
        each_entry!(self,
            e => e.admit_n(now, cost).map(|(d, r)| (d, FallbackReceipt::Entry(r))),
            FallbackEntry::Log(t, k) => t.admit(k, now, cost).map(|(d, r)| (d, FallbackReceipt::Log(r))))
    }
    fn revoke(&self, receipt: FallbackReceipt) {
        match (self, receipt) {
            (FallbackEntry::Gcra(e), FallbackReceipt::Entry(r)) => e.revoke(r),
            (FallbackEntry::Fixed(e), FallbackReceipt::Entry(r)) => e.revoke(r),
            (FallbackEntry::Sliding(e), FallbackReceipt::Entry(r)) => e.revoke(r),
            (FallbackEntry::Bucketed(e), FallbackReceipt::Entry(r)) => e.revoke(r),
            (FallbackEntry::Log(t, k), FallbackReceipt::Log(r)) => t.revoke(k, r),
            _ => {}
        }
    }
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        each_entry!(self, e => e.probe_n(now, cost), FallbackEntry::Log(t, k) => t.probe(k, now, cost))
    }
}

impl Table {
    /// A keyed table's figures and capacity (a sliding log has none).
    #[cfg(feature = "metrics")]
    pub(crate) fn stats(&self) -> Option<(cellrate::keyed::KeyedStats, usize)> {
        match self {
            Table::Gcra(t) => Some((t.stats(), t.capacity())),
            Table::Fixed(t) => Some((t.stats(), t.capacity())),
            Table::Sliding(t) => Some((t.stats(), t.capacity())),
            Table::Bucketed(t) => Some((t.stats(), t.capacity())),
            Table::Log(_) => None,
        }
    }

    pub(crate) fn entry<'a>(&'a self, key: &'a str) -> FallbackEntry<'a> {
        match self {
            Table::Gcra(t) => FallbackEntry::Gcra(t.entry(key)),
            Table::Fixed(t) => FallbackEntry::Fixed(t.entry(key)),
            Table::Sliding(t) => FallbackEntry::Sliding(t.entry(key)),
            Table::Bucketed(t) => FallbackEntry::Bucketed(t.entry(key)),
            Table::Log(t) => FallbackEntry::Log(t, key),
        }
    }
}
