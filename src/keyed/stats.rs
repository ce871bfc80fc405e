//! What a table reports for monitoring: running totals ([`KeyedStats`]) and
//! a count of its slots by what they hold ([`Occupancy`]). Neither is needed
//! for correctness.

use crate::sync::Counter;

/// Running totals of a table's decisions, for monitoring.
///
/// ```
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::Quota;
/// let t: Keyed<Quota, 4> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
/// t.check(&1u32, 0).unwrap();
/// t.check(&2u32, 5_000).unwrap();
/// let s = t.stats();
/// assert_eq!((s.inserted, s.overflow_denied), (2, 0));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyedStats {
    /// Keys given a slot. A key is inserted already charged for the request
    /// that inserted it, so it is never idle (evictable) before its first
    /// charge, and each insertion is counted once.
    pub inserted: usize,
    /// Idle clients evicted to make room for a new key (their slot was
    /// claimed; a claim that then lost a race leaves the slot free).
    pub reused: usize,
    /// New keys denied because their window was full
    /// ([`WhenFull::Deny`](super::WhenFull::Deny)).
    pub overflow_denied: usize,
    /// New keys admitted untracked ([`WhenFull::Admit`](super::WhenFull::Admit)).
    pub overflow_admitted: usize,
    /// Checks charged to the shared overflow limiter and admitted.
    pub shared_admitted: usize,
    /// Checks charged to the shared overflow limiter and denied.
    pub shared_denied: usize,
}

/// What a [`KeyedTable::occupancy`](super::KeyedTable::occupancy) found.
///
/// ```
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::Quota;
/// let t: Keyed<Quota, 8> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
/// t.check(&1u32, 0).unwrap();
/// t.check(&2u32, 0).unwrap();
/// let o = t.occupancy(500);
/// assert_eq!((o.capacity, o.owing, o.idle, o.free), (8, 2, 0, 6));
/// assert_eq!(t.occupancy(1_000).idle, 2); // both back to full: reusable
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Occupancy {
    /// Slots in the table.
    pub capacity: usize,
    /// Keys that still owe (cannot be evicted).
    pub owing: usize,
    /// Keys whose state is back to new: their slots are reusable.
    pub idle: usize,
    /// Slots being claimed right now.
    pub claiming: usize,
    /// Slots never used or freed by a lost claim.
    pub free: usize,
}

/// A table's counters, and the source of its claim tickets.
pub(super) struct Counters {
    pub(super) inserted: Counter,
    pub(super) reused: Counter,
    pub(super) overflow_denied: Counter,
    pub(super) overflow_admitted: Counter,
    pub(super) shared_admitted: Counter,
    pub(super) shared_denied: Counter,
    /// Source of unique claim tickets.
    pub(super) tickets: Counter,
}

impl Counters {
    crate::sync::loom_const_fn! {
        pub(super) fn new() -> Self {
            Counters {
                inserted: Counter::new(),
                reused: Counter::new(),
                overflow_denied: Counter::new(),
                overflow_admitted: Counter::new(),
                shared_admitted: Counter::new(),
                shared_denied: Counter::new(),
                tickets: Counter::new(),
            }
        }
    }
}
