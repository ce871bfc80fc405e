//! What a table does beyond its default algorithm: per-key [`Overrides`],
//! and the [`WhenFull`] policy for a new key whose probe window holds only
//! clients that still owe.

use super::entry::ChargedTo;
use super::hash::KeyId;
use super::storage::Storage;
use super::table::KeyedTable;
use crate::decision::Limited;
use crate::{Algorithm, Decision, Denied};

/// What a table does with a new key when its probe window holds only clients
/// that still owe.
///
/// ```
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::Quota;
/// let q = Quota::per_second(1).at_hz(1_000);
/// let closed: Keyed<Quota, 1> = Keyed::new(q, WhenFull::Deny, Seed::new(1, 2));
/// let open: Keyed<Quota, 1> = Keyed::new(q, WhenFull::Admit, Seed::new(1, 2));
/// let shared: Keyed<Quota, 1> = Keyed::new(q, WhenFull::Shared, Seed::new(1, 2));
/// for table in [&closed, &open, &shared] {
///     assert!(table.check(&1u32, 0).is_ok()); // takes the only slot
/// }
/// assert!(closed.check(&2u32, 0).is_err()); // fail closed
/// assert!(open.check(&2u32, 0).is_ok());    // fail open, untracked
/// assert!(open.check(&2u32, 0).is_ok());
/// assert!(shared.check(&2u32, 0).is_ok());  // charged to the overflow limiter…
/// assert!(shared.check(&3u32, 0).is_err()); // …which every untracked key shares
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenFull {
    /// Deny the new key (fail closed). The denial's `retry_after` is when the
    /// first client of the window will be idle.
    Deny,
    /// Admit it untracked, as a new client would be (fail open).
    Admit,
    /// Charge it to one overflow limiter (the table's default algorithm) that
    /// every untracked key shares.
    Shared,
}

/// Per-key algorithms: a premium client with a larger quota.
///
/// Keys are named by [`KeyId`] (see [`KeyedTable::key_id`]). Every algorithm
/// a table uses must read the state word the same way: for
/// [`Quota`](crate::Quota), the same scale and tick frequency as the table's
/// default (use [`KeyedTable::compatible_quota`] to re-express one).
///
/// ```
/// use cellrate::keyed::{KeyId, Keyed, Seed, WhenFull};
/// use cellrate::{Quota, RateLimiter};
/// const BASIC: Quota = Quota::per_second(1).at_hz(1_000);
/// const PREMIUM: Quota = Quota::per_second(5).at_hz(1_000);
/// static TABLE: Keyed<Quota, 64, [(KeyId, Quota); 1]> = Keyed::with_overrides(
///     BASIC,
///     [(KeyId::exact(42, 32), PREMIUM)],
///     WhenFull::Deny,
///     Seed::new(1, 2),
/// );
/// assert_eq!(TABLE.check_n(&42u32, 0, 5).unwrap().remaining(), 0); // premium: 5 at once
/// assert!(TABLE.check_n(&7u32, 0, 5).is_err());                    // basic: burst 1
/// ```
pub trait Overrides<A> {
    /// The algorithm for `id`, if it is not the table's default.
    fn get(&self, id: KeyId) -> Option<&A>;
}

/// No per-key overrides: every key uses the table's algorithm.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoOverrides;

impl<A> Overrides<A> for NoOverrides {
    #[inline(always)]
    fn get(&self, _id: KeyId) -> Option<&A> {
        None
    }
}

impl<A, const M: usize> Overrides<A> for [(KeyId, A); M] {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&A> {
        self.iter().find(|(k, _)| *k == id).map(|(_, a)| a)
    }
}

impl<A> Overrides<A> for &[(KeyId, A)] {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&A> {
        self.iter().find(|(k, _)| *k == id).map(|(_, a)| a)
    }
}

#[cfg(feature = "alloc")]
impl<A> Overrides<A> for alloc::vec::Vec<(KeyId, A)> {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&A> {
        self.iter().find(|(k, _)| *k == id).map(|(_, a)| a)
    }
}

#[cfg(feature = "std")]
impl<A, H: core::hash::BuildHasher> Overrides<A> for std::collections::HashMap<KeyId, A, H> {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&A> {
        std::collections::HashMap::get(self, &id)
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// The algorithm that `id` uses: its override, or the default.
    #[inline(always)]
    pub(super) fn algorithm_for(&self, id: KeyId) -> &A {
        match self.overrides.get(id) {
            Some(a) => a,
            None => &self.algorithm,
        }
    }

    /// A new key whose window is full.
    pub(super) fn overflow(
        &self,
        id: KeyId,
        hash: u64,
        now: u64,
        cost: u64,
    ) -> Result<(Decision, ChargedTo), Denied> {
        let algorithm = self.algorithm_for(id);
        match self.when_full {
            WhenFull::Deny => {
                self.counters.overflow_denied.add(1);
                let retry = self.first_idle_after(hash, now);
                let limit = algorithm.peek(A::NEW, now).limit();
                Err(Denied::Limited(Limited::new(limit, retry, retry)))
            }
            WhenFull::Admit => {
                self.counters.overflow_admitted.add(1);
                algorithm
                    .check(A::NEW, now, cost)
                    .map(|(_, d)| (d, ChargedTo::Nothing))
            }
            WhenFull::Shared => {
                // The overflow word is a shared one-word limiter: the one
                // container path applies the table's default algorithm.
                let result = crate::algorithm::apply(&self.overflow, &self.algorithm, now, cost);
                match result {
                    Ok(_) => self.counters.shared_admitted.add(1),
                    Err(_) => self.counters.shared_denied.add(1),
                };
                let mark = |stored| self.algorithm.mark(stored, now);
                result.map(|(decision, stored)| (decision, ChargedTo::Overflow(mark(stored))))
            }
        }
    }
}
