//! A keyed tier's table, of its algorithm's kind: a live GCRA table (GCRA,
//! token bucket, leaky bucket; per-client overrides) or a window table
//! (fixed, sliding, bucketed). A request's check dispatches once per tier
//! on the kind, then runs that table's own entry.

use cellrate::compose::Revocable;
use cellrate::keyed::{Entry, EntryReceipt, KeyedBox, KeyedStats, LiveQuota, Slot};
use cellrate::{Decision, Denied, RateLimiter, Snapshot};

use super::overrides::LiveOverrides;
use super::window::{WindowEntry, WindowTable};

/// A tier's table.
pub(crate) enum TierTable {
    Gcra(KeyedBox<LiveQuota, LiveOverrides>),
    Window(WindowTable),
}

impl TierTable {
    #[cfg_attr(not(any(feature = "serde", feature = "metrics")), allow(dead_code))]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            TierTable::Gcra(t) => t.capacity(),
            TierTable::Window(t) => t.capacity(),
        }
    }
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn stats(&self) -> KeyedStats {
        match self {
            TierTable::Gcra(t) => t.stats(),
            TierTable::Window(t) => t.stats(),
        }
    }
    /// The live GCRA table, if the tier is of the GCRA family.
    pub(crate) fn gcra(&self) -> Option<&KeyedBox<LiveQuota, LiveOverrides>> {
        match self {
            TierTable::Gcra(t) => Some(t),
            TierTable::Window(_) => None,
        }
    }
}

/// One request's key in one tier's table.
pub(crate) enum TierEntry<'t> {
    Gcra(Entry<'t, LiveQuota, Box<[Slot]>, LiveOverrides>),
    Window(WindowEntry<'t>),
}

/// `$body` with `$e` bound to the entry of whichever table `$entry` is of.
macro_rules! each {
    ($entry:expr, $e:ident => $body:expr) => {
        match $entry {
            TierEntry::Gcra($e) => $body,
            TierEntry::Window(WindowEntry::Fixed(g)) => {
                let $e = &g.entry;
                $body
            }
            TierEntry::Window(WindowEntry::Sliding(g)) => {
                let $e = &g.entry;
                $body
            }
            TierEntry::Window(WindowEntry::Bucketed(g)) => {
                let $e = &g.entry;
                $body
            }
        }
    };
}

impl RateLimiter for TierEntry<'_> {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        each!(self, e => e.check_n(now, cost))
    }
    fn peek(&self, now: u64) -> Snapshot {
        each!(self, e => e.peek(now))
    }
}

impl Revocable for TierEntry<'_> {
    type Receipt = EntryReceipt;
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, EntryReceipt), Denied> {
        each!(self, e => e.admit_n(now, cost))
    }
    #[inline]
    fn revoke(&self, receipt: EntryReceipt) {
        each!(self, e => e.revoke(receipt))
    }
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        each!(self, e => e.probe_n(now, cost))
    }
}
