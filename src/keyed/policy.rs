//! What a table does beyond its default algorithm: per-key [`Overrides`],
//! and the [`WhenFull`] policy for a new key whose probe window holds only
//! clients that still owe.

use super::key::KeyId;

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
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
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
/// Keys are named by [`KeyId`] (see [`KeyedTable::key_id`](super::KeyedTable::key_id)). Every algorithm
/// a table uses must read the state word the same way: for
/// [`Quota`](crate::Quota), the same scale and tick frequency as the table's
/// default (use [`KeyedTable::compatible_quota`](super::KeyedTable::compatible_quota) to re-express one).
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

/// Where a check charged its cells, and under which mark: what undoing it
/// gives back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChargedTo {
    /// The key's slot.
    Slot(u64),
    /// The shared overflow word of [`WhenFull::Shared`]
    /// (the key had no slot).
    Overflow(u64),
    /// Nothing kept: a peek, or [`WhenFull::Admit`]
    /// with no slot.
    Nothing,
}
