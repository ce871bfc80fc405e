//! One key of a table as a limiter of its own, so that keyed tiers compose
//! with [`compose`](crate::compose)'s all-or-nothing tuples.

use super::key::{identify, Key, KeyId};
use super::policy::{ChargedTo, NoOverrides, Overrides};
use super::storage::Storage;
use super::table::KeyedTable;
use crate::compose::Revocable;
use crate::{Algorithm, Decision, Denied, RateLimiter, Snapshot};

/// One key of a [`KeyedTable`], identified (hashed) once: a
/// [`RateLimiter`] that checks and peeks that key's state, and a
/// [`Revocable`] one (for every algorithm: a revocation is its
/// [`refund`](Algorithm::refund)), so it can be a part of an all-or-nothing
/// tuple (see [`compose`](crate::compose)).
///
/// Made by [`KeyedTable::entry`]. It borrows the table, not the key.
///
/// ```
/// use cellrate::compose::AllTiers;
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::Quota;
/// static GLOBAL: Keyed<Quota, 64> = Keyed::new(Quota::per_second(5).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
/// static ENDPOINT: Keyed<Quota, 64> = Keyed::new(Quota::per_second(2).at_hz(1_000), WhenFull::Deny, Seed::new(3, 4));
/// let client = 9u32;
/// let tiers = (GLOBAL.entry(&client), ENDPOINT.entry(&(client, 1u16)));
/// assert!(tiers.check_tiers(0, 1).is_admitted());
/// assert!(tiers.check_tiers(0, 1).is_admitted());
/// // The endpoint tier is exhausted; the global tier is not charged for the denial.
/// let refused = tiers.check_tiers(0, 1);
/// assert_eq!(refused.refused(), Some(1));
/// assert_eq!(refused.results()[0].unwrap().remaining(), 3);
/// assert_eq!(GLOBAL.peek(&client, 0).remaining(), 3);
/// ```
pub struct Entry<'t, A, S, O = NoOverrides> {
    table: &'t KeyedTable<A, S, O>,
    id: KeyId,
    hash: u64,
    /// The key whose override decides (`id` but for
    /// [`entry_ruled`](KeyedTable::entry_ruled)).
    rule: KeyId,
}

impl<A, S, O> Clone for Entry<'_, A, S, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A, S, O> Copy for Entry<'_, A, S, O> {}

impl<A, S, O> core::fmt::Debug for Entry<'_, A, S, O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// `key` of this table as a limiter of its own (see [`Entry`]): its
    /// checks are this table's checks of `key`.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::{Quota, RateLimiter};
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_second(2).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// let alice = t.entry("alice");
    /// assert_eq!(alice.check(0).unwrap().remaining(), 1);
    /// assert_eq!(t.peek("alice", 0).remaining(), 1);
    /// ```
    pub fn entry<K: Key + ?Sized>(&self, key: &K) -> Entry<'_, A, S, O> {
        let (id, hash) = identify(key, &self.seed);
        Entry {
            table: self,
            id,
            hash,
            rule: id,
        }
    }

    /// `key` of this table as a limiter of its own, decided by the
    /// override of `rule` (another key of this table, e.g. the client of a
    /// `(client, endpoint)` key) instead of its own: the key keeps its own
    /// slot and state; only which algorithm decides it changes. A table
    /// keyed by `(client, endpoint)` whose overrides name clients gives a
    /// client's override on every endpoint so.
    ///
    /// A slot's idleness (what eviction tests) is still judged by its own
    /// key's algorithm, so the overrides of such a table must agree with
    /// its default on [`is_idle`](Algorithm::is_idle): GCRA quotas of one
    /// scale and frequency do (a state is idle when its TAT is not ahead
    /// of `now`, whatever the quota; see [`Quota::rescaled`](crate::Quota::rescaled)).
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::{Quota, RateLimiter};
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_minute(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// // Without overrides a ruled entry is decided by the default quota.
    /// let e = t.entry_ruled(&("bob", "/a"), "bob");
    /// assert!(e.check(0).is_ok());
    /// assert!(e.check(0).is_err());
    /// assert!(t.entry_ruled(&("bob", "/b"), "bob").check(0).is_ok()); // its own state
    /// ```
    pub fn entry_ruled<K: Key + ?Sized, R: Key + ?Sized>(
        &self,
        key: &K,
        rule: &R,
    ) -> Entry<'_, A, S, O> {
        let (id, hash) = identify(key, &self.seed);
        Entry {
            table: self,
            id,
            hash,
            rule: identify(rule, &self.seed).0,
        }
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> RateLimiter for Entry<'_, A, S, O> {
    #[inline(always)]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.table
            .check_id(self.id, self.hash, self.rule, now, cost)
    }

    fn peek(&self, now: u64) -> Snapshot {
        self.table.peek_id(self.id, self.hash, self.rule, now)
    }
}

/// What undoing an [`Entry`]'s admission needs: the cells, and where and
/// under which [`mark`](Algorithm::mark) the table charged them (the key's
/// slot, or the shared overflow limiter of
/// [`WhenFull::Shared`](super::WhenFull::Shared) when the key had no slot).
///
/// ```
/// use cellrate::compose::Revocable;
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::Quota;
/// // One slot; a second key is charged to the shared overflow limiter.
/// let t: Keyed<Quota, 1> = Keyed::new(Quota::per_second(1).with_burst(2).at_hz(1_000), WhenFull::Shared, Seed::new(1, 2));
/// t.check(&1u32, 0).unwrap();
/// let (_, receipt) = t.entry(&2u32).admit_n(0, 2).unwrap();
/// assert!(t.check(&3u32, 0).is_err()); // the overflow limiter is spent
/// t.entry(&2u32).revoke(receipt); // gives its cells back there
/// assert!(t.check(&3u32, 0).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryReceipt {
    cost: u64,
    charged: ChargedTo,
}

impl EntryReceipt {
    /// The cells admitted.
    ///
    /// ```
    /// use cellrate::compose::Revocable;
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 4> = Keyed::new(Quota::per_second(5).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// let (_, receipt) = t.entry(&1u32).admit_n(0, 3).unwrap();
    /// assert_eq!(receipt.cost(), 3);
    /// ```
    pub const fn cost(&self) -> u64 {
        self.cost
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> Revocable for Entry<'_, A, S, O> {
    type Receipt = EntryReceipt;

    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, EntryReceipt), Denied> {
        let (decision, charged) = self
            .table
            .check_id_charged(self.id, self.hash, self.rule, now, cost)?;
        Ok((decision, EntryReceipt { cost, charged }))
    }

    /// Gives the cells back where they were charged: the key's slot
    /// or the shared overflow limiter, under the admission's mark.
    fn revoke(&self, receipt: EntryReceipt) {
        if receipt.cost == 0 {
            return;
        }
        match receipt.charged {
            ChargedTo::Slot(mark) => {
                self.table
                    .refund_id(self.id, self.hash, self.rule, mark, receipt.cost);
            }
            ChargedTo::Overflow(mark) => self.table.refund_overflow(mark, receipt.cost),
            ChargedTo::Nothing => {}
        }
    }

    /// Answers from the key's state without writing it: a key not in the
    /// table is answered as a new client and not inserted.
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        let quota = self.table.algorithm_for(self.rule);
        let state = self.table.state_id(self.id, self.hash);
        quota
            .check(state, now, cost)
            .map(|_| quota.peek(state, now).to_decision())
    }
}
