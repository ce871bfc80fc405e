//! A keyed tier's table, of its algorithm's kind: a live GCRA table (GCRA,
//! token bucket, leaky bucket) or a store (fixed, sliding and bucketed
//! windows, sliding log); both take per-client overrides. A request's
//! check dispatches once per tier on the kind, then runs that table's own
//! entry.

use cellrate::compose::Revocable;
use cellrate::keyed::{Entry, EntryReceipt, KeyedBox, KeyedStats, LiveQuota, Slot};
use cellrate::{Decision, Denied, RateLimiter, Snapshot};

use super::overrides::LiveOverrides;
use super::store::{Store, StoreEntry, StoreReceipt};

/// A tier's table.
pub(crate) enum TierTable {
    Gcra(KeyedBox<LiveQuota, LiveOverrides>),
    Store(Store),
}

impl TierTable {
    #[cfg_attr(not(any(feature = "serde", feature = "metrics")), allow(dead_code))]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            TierTable::Gcra(t) => t.capacity(),
            TierTable::Store(t) => t.capacity(),
        }
    }
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn stats(&self) -> KeyedStats {
        match self {
            TierTable::Gcra(t) => t.stats(),
            TierTable::Store(t) => t.stats(),
        }
    }
    /// The live GCRA table, if the tier is of the GCRA family.
    pub(crate) fn gcra(&self) -> Option<&KeyedBox<LiveQuota, LiveOverrides>> {
        match self {
            TierTable::Gcra(t) => Some(t),
            TierTable::Store(_) => None,
        }
    }
}

/// One request's key in one tier's table.
pub(crate) enum TierEntry<'t> {
    Gcra(Entry<'t, LiveQuota, Box<[Slot]>, LiveOverrides>),
    Store(StoreEntry<'t>),
}

/// What a tier's entry gives back on revocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TierReceipt {
    Gcra(EntryReceipt),
    Store(StoreReceipt),
}

impl RateLimiter for TierEntry<'_> {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        match self {
            TierEntry::Gcra(e) => e.check_n(now, cost),
            TierEntry::Store(e) => e.check_n(now, cost),
        }
    }
    fn peek(&self, now: u64) -> Snapshot {
        match self {
            TierEntry::Gcra(e) => e.peek(now),
            TierEntry::Store(e) => e.peek(now),
        }
    }
}

impl Revocable for TierEntry<'_> {
    type Receipt = TierReceipt;
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, TierReceipt), Denied> {
        match self {
            TierEntry::Gcra(e) => e.admit_n(now, cost).map(|(d, r)| (d, TierReceipt::Gcra(r))),
            TierEntry::Store(e) => e
                .admit_n(now, cost)
                .map(|(d, r)| (d, TierReceipt::Store(r))),
        }
    }
    #[inline]
    fn revoke(&self, receipt: TierReceipt) {
        match (self, receipt) {
            (TierEntry::Gcra(e), TierReceipt::Gcra(r)) => e.revoke(r),
            (TierEntry::Store(e), TierReceipt::Store(r)) => e.revoke(r),
            _ => {} // a receipt is only ever given back to its own entry
        }
    }
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        match self {
            TierEntry::Gcra(e) => e.probe_n(now, cost),
            TierEntry::Store(e) => e.probe_n(now, cost),
        }
    }
}
