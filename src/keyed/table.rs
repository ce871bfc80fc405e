//! The table: fields, constructors, check, peek and refund of one key, the
//! full-window policy and statistics. Finding and inserting keys is in
//! [`probe`](super::probe).

use super::hash::Seed;
use super::key::{identify, Key, KeyId};
use super::policy::{ChargedTo, NoOverrides, Overrides, WhenFull};
use super::slot::{key_of, state_of, Slot, CLAIMING, LIVE, TAG_MASK};
use super::stats::{Counters, KeyedStats, Occupancy};
use super::storage::Storage;
use crate::quota::Quota;
use crate::sync::StateWord;
use crate::{Algorithm, Decision, Denied, Limited, Snapshot};

/// A keyed limiter: one [`Algorithm`] state per key in a table of fixed size.
/// See the [module docs](super) for the protocol and its invariants.
///
/// Use the aliases: [`Keyed<A, N>`](Keyed) (capacity as a const generic, no
/// heap, `const`-constructible for `static`s) or, with the `alloc` feature,
/// `KeyedBox<A>` (capacity chosen at run time).
pub struct KeyedTable<A, S, O = NoOverrides> {
    pub(super) algorithm: A,
    pub(super) overrides: O,
    pub(super) when_full: WhenFull,
    pub(super) seed: Seed,
    /// The overflow limiter of [`WhenFull::Shared`].
    pub(super) overflow: StateWord,
    pub(super) counters: Counters,
    pub(super) slots: S,
}

/// A keyed table of `N` slots in an array: no heap, usable in a `static`.
pub type Keyed<A, const N: usize, O = NoOverrides> = KeyedTable<A, [Slot; N], O>;

/// A keyed table whose capacity is chosen at run time.
#[cfg(feature = "alloc")]
pub type KeyedBox<A, O = NoOverrides> = KeyedTable<A, alloc::boxed::Box<[Slot]>, O>;

impl<A: Algorithm, const N: usize> Keyed<A, N> {
    crate::sync::loom_const_fn! {
        /// An empty table of `N` slots for `algorithm` (the default for every
        /// key), with the policy for a full window and the hash seed.
        ///
        /// ```
        /// use cellrate::keyed::{Keyed, Seed, WhenFull};
        /// use cellrate::Quota;
        /// static PEERS: Keyed<Quota, 8> =
        ///     Keyed::new(Quota::per_minute(6).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
        /// assert_eq!(PEERS.capacity(), 8);
        /// ```
        pub fn new(algorithm: A, when_full: WhenFull, seed: Seed) -> Self {
            Self::with_overrides(algorithm, NoOverrides, when_full, seed)
        }
    }
}

impl<A: Algorithm, O: Overrides<A>, const N: usize> Keyed<A, N, O> {
    crate::sync::loom_const_fn! {
        /// Like [`new`](Keyed::new), with per-key [`Overrides`].
        ///
        /// ```
        /// use cellrate::keyed::{KeyId, Keyed, Seed, WhenFull};
        /// use cellrate::Quota;
        /// let t: Keyed<Quota, 8, [(KeyId, Quota); 1]> = Keyed::with_overrides(
        ///     Quota::per_second(1).at_hz(1_000),
        ///     [(KeyId::exact(1, 32), Quota::per_second(3).at_hz(1_000))],
        ///     WhenFull::Deny,
        ///     Seed::new(1, 2),
        /// );
        /// assert_eq!(t.check(&1u32, 0).unwrap().limit(), 3);
        /// ```
        pub fn with_overrides(algorithm: A, overrides: O, when_full: WhenFull, seed: Seed) -> Self {
            let slots = crate::sync::repeat_const!(Slot::new(0); N);
            Self::from_parts(algorithm, overrides, when_full, seed, slots)
        }
    }
}

impl<A: Algorithm, S, O> KeyedTable<A, S, O> {
    crate::sync::loom_const_fn! {
        /// A table over empty `slots`, its overflow limiter new and its
        /// counters at zero: what every constructor builds.
        fn from_parts(algorithm: A, overrides: O, when_full: WhenFull, seed: Seed, slots: S) -> Self {
            KeyedTable {
                algorithm,
                overrides,
                when_full,
                seed,
                overflow: StateWord::new(A::NEW),
                counters: Counters::new(),
                slots,
            }
        }
    }
}

#[cfg(feature = "alloc")]
impl<A: Algorithm> KeyedBox<A> {
    /// An empty heap table of `capacity` slots.
    ///
    /// ```
    /// use cellrate::keyed::{KeyedBox, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t = KeyedBox::with_capacity(100_000, Quota::per_second(10).at_hz(1_000), WhenFull::Admit, Seed::new(1, 2));
    /// assert_eq!(t.capacity(), 100_000);
    /// assert!(t.check(&"alice", 0).is_ok());
    /// ```
    pub fn with_capacity(capacity: usize, algorithm: A, when_full: WhenFull, seed: Seed) -> Self {
        KeyedBox::with_capacity_and_overrides(capacity, algorithm, NoOverrides, when_full, seed)
    }
}

#[cfg(feature = "alloc")]
impl<A: Algorithm, O: Overrides<A>> KeyedBox<A, O> {
    /// Like [`with_capacity`](KeyedBox::with_capacity), with per-key
    /// [`Overrides`].
    ///
    /// ```
    /// use cellrate::keyed::{KeyedBox, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let basic = Quota::per_second(1).at_hz(1_000);
    /// let seed = Seed::new(1, 2);
    /// // KeyIds of fingerprinted keys depend on the seed: ask a table for them.
    /// let probe = KeyedBox::with_capacity(1, basic, WhenFull::Deny, seed);
    /// let vip = probe.key_id("vip");
    /// let t = KeyedBox::with_capacity_and_overrides(
    ///     64, basic, vec![(vip, Quota::per_second(4).at_hz(1_000))], WhenFull::Deny, seed);
    /// assert_eq!(t.check("vip", 0).unwrap().limit(), 4);
    /// assert_eq!(t.check("guest", 0).unwrap().limit(), 1);
    /// ```
    pub fn with_capacity_and_overrides(
        capacity: usize,
        algorithm: A,
        overrides: O,
        when_full: WhenFull,
        seed: Seed,
    ) -> Self {
        let slots = super::storage::boxed(capacity);
        KeyedTable::from_parts(algorithm, overrides, when_full, seed, slots)
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// The number of slots.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 3> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// assert_eq!(t.capacity(), 3);
    /// ```
    pub fn capacity(&self) -> usize {
        self.slots.slots().len()
    }

    /// The policy for a full window.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 3> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Admit, Seed::new(1, 2));
    /// assert_eq!(t.when_full(), WhenFull::Admit);
    /// ```
    pub fn when_full(&self) -> WhenFull {
        self.when_full
    }

    /// The default algorithm.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let q = Quota::per_second(1).at_hz(1_000);
    /// let t: Keyed<Quota, 3> = Keyed::new(q, WhenFull::Deny, Seed::new(1, 2));
    /// assert_eq!(*t.algorithm(), q);
    /// ```
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The name this table gives `key` (it depends on the seed for
    /// fingerprinted keys). Use it to build [`Overrides`].
    ///
    /// ```
    /// use cellrate::keyed::{KeyId, Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 3> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// assert_eq!(t.key_id(&9u32), KeyId::exact(9, 32));
    /// assert_ne!(t.key_id("a"), t.key_id("b"));
    /// ```
    pub fn key_id<K: Key + ?Sized>(&self, key: &K) -> KeyId {
        identify(key, &self.seed).0
    }

    /// Admits one cell for `key` at `now`, or denies.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// assert!(t.check(&1u32, 0).is_ok());
    /// assert_eq!(t.check(&1u32, 300).unwrap_err().retry_after(), Some(700));
    /// assert!(t.check(&2u32, 300).is_ok()); // another key, its own limit
    /// ```
    #[inline]
    pub fn check<K: Key + ?Sized>(&self, key: &K, now: u64) -> Result<Decision, Denied> {
        self.check_n(key, now, 1)
    }

    /// Admits `cost` cells for `key` at `now`, or denies and stores nothing.
    /// A cost of 0 is a [`peek`](Self::peek) (it never inserts the key).
    ///
    /// A key not yet in the table is inserted if its window has a free or
    /// idle slot, and otherwise handled by the [`WhenFull`] policy.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_second(10).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// assert_eq!(t.check_n(&"bob", 0, 4).unwrap().remaining(), 6);
    /// assert!(t.check_n(&"bob", 0, 7).is_err());
    /// ```
    #[inline(always)]
    pub fn check_n<K: Key + ?Sized>(
        &self,
        key: &K,
        now: u64,
        cost: u64,
    ) -> Result<Decision, Denied> {
        let (id, hash) = identify(key, &self.seed);
        self.check_id(id, hash, id, now, cost)
    }

    /// The state of `key` at `now`, consuming nothing (a key not in the table
    /// reads as new).
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_second(10).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&5u32, 0, 3).unwrap();
    /// assert_eq!(t.peek(&5u32, 0).remaining(), 7);
    /// assert_eq!(t.peek(&6u32, 0).remaining(), 10);
    /// ```
    pub fn peek<K: Key + ?Sized>(&self, key: &K, now: u64) -> Snapshot {
        let (id, hash) = identify(key, &self.seed);
        self.peek_id(id, hash, id, now)
    }

    /// Whether `key` has a slot now.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 16> = Keyed::new(Quota::per_second(10).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// assert!(!t.contains(&5u32, 0));
    /// t.check(&5u32, 0).unwrap();
    /// assert!(t.contains(&5u32, 0));
    /// ```
    pub fn contains<K: Key + ?Sized>(&self, key: &K, now: u64) -> bool {
        let _ = now; // a slot is held whatever the time (kept for symmetry with `peek`)
        let (id, hash) = identify(key, &self.seed);
        self.locate(id, hash).is_some()
    }

    /// The state of the key `(id, hash)` at `now`: its slot's, or new.
    #[inline]
    pub(super) fn state_id(&self, id: KeyId, hash: u64) -> u64 {
        match self.locate(id, hash) {
            Some((_, value)) => state_of(value),
            None => A::NEW,
        }
    }

    /// [`peek`](Self::peek) of an identified key, under the algorithm of
    /// `rule`'s override (the key's own id but for a ruled
    /// [`entry`](Self::entry_ruled)).
    pub(super) fn peek_id(&self, id: KeyId, hash: u64, rule: KeyId, now: u64) -> Snapshot {
        self.algorithm_for(rule).peek(self.state_id(id, hash), now)
    }

    /// [`check_n`](Self::check_n) of an identified key.
    #[inline(always)]
    pub(super) fn check_id(
        &self,
        id: KeyId,
        hash: u64,
        rule: KeyId,
        now: u64,
        cost: u64,
    ) -> Result<Decision, Denied> {
        self.check_id_marked(id, hash, rule, now, cost, |_, _| (), |_| ())
            .map(|(d, ())| d)
    }

    /// [`check_id`](Self::check_id), also saying where the cells were
    /// charged and under which mark (what a revocation gives back).
    #[inline(always)]
    pub(super) fn check_id_charged(
        &self,
        id: KeyId,
        hash: u64,
        rule: KeyId,
        now: u64,
        cost: u64,
    ) -> Result<(Decision, ChargedTo), Denied> {
        self.check_id_marked(
            id,
            hash,
            rule,
            now,
            cost,
            |algorithm, stored| ChargedTo::Slot(algorithm.mark(stored, now)),
            |charged| charged,
        )
    }

    /// The one check of an identified key, under the algorithm of `rule`'s
    /// override: the decision and `slot(stored)` for a charge to the key's
    /// slot, or `other(charged)` for a new key's (inserted or sent to the
    /// [`WhenFull`] policy).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn check_id_marked<M>(
        &self,
        id: KeyId,
        hash: u64,
        rule: KeyId,
        now: u64,
        cost: u64,
        slot: impl Fn(&A, u64) -> M,
        other: impl FnOnce(ChargedTo) -> M,
    ) -> Result<(Decision, M), Denied> {
        let algorithm = self.algorithm_for(rule);
        if cost == 0 {
            let state = self.state_id(id, hash);
            let decision = algorithm.peek(state, now).to_decision();
            return Ok((decision, other(ChargedTo::Nothing)));
        }
        loop {
            let (slot_of_key, value) = match self.locate(id, hash) {
                Some(found) => found,
                // A new key is inserted already charged, so that it is never
                // idle (evictable) between its insertion and its first charge.
                None => match self.check_new(id, hash, rule, now, cost) {
                    Ok(found) => found,
                    Err(answer) => return answer.map(|(d, charged)| (d, other(charged))),
                },
            };
            // `check` stays inside the loop (docs/design/keyed.md, "The
            // algorithm's phases inside the slot loop").
            if let Some(result) = slot_of_key.update(LIVE | id.0, value, |state| {
                let (next, d) = algorithm.check(state, now, cost)?;
                Ok((next, (d, next)))
            }) {
                return result.map(|(d, stored)| (d, slot(algorithm, stored)));
            }
            // Evicted while idle: look again.
        }
    }
}

impl<S: Storage, O: Overrides<Quota>> KeyedTable<Quota, S, O> {
    /// `quota` re-expressed at this table's scale and tick frequency, so that
    /// it can be used as a per-key override (rounding its emission interval
    /// up, toward admitting less, if that is not exact).
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// use core::time::Duration;
    /// let t: Keyed<Quota, 4> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// let third = Quota::per_duration(1, Duration::from_millis(1_000)).with_burst(3).at_hz(1_000);
    /// assert_eq!(t.compatible_quota(third).unwrap().scale(), t.algorithm().scale());
    /// ```
    pub fn compatible_quota(&self, quota: Quota) -> Result<Quota, crate::QuotaError> {
        quota.rescaled(self.algorithm.scale(), self.algorithm.hz())
    }
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// Gives back `cost` cells to `key` counted at `now` (see
    /// [`Algorithm::refund`]); a key not in the table is left as it is.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 4> = Keyed::new(Quota::per_second(2).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&1u32, 0, 2).unwrap();
    /// assert_eq!(t.refund_n(&1u32, 0, 1).remaining(), 1);
    /// ```
    pub fn refund_n<K: Key + ?Sized>(&self, key: &K, now: u64, cost: u64) -> Snapshot {
        let (id, hash) = identify(key, &self.seed);
        let algorithm = self.algorithm_for(id);
        let state = self.refund_id(id, hash, id, algorithm.mark_at(now), cost);
        algorithm.peek(state, now)
    }

    /// Gives back `cost` cells counted under `mark` to the shared overflow
    /// limiter of [`WhenFull::Shared`].
    pub(super) fn refund_overflow(&self, mark: u64, cost: u64) {
        crate::algorithm::refund(&self.overflow, &self.algorithm, mark, cost);
    }

    /// Gives back `cost` cells counted under `mark` to an identified key:
    /// its state after (new, if the key has no slot).
    pub(super) fn refund_id(&self, id: KeyId, hash: u64, rule: KeyId, mark: u64, cost: u64) -> u64 {
        let algorithm = self.algorithm_for(rule);
        loop {
            let Some((slot, value)) = self.locate(id, hash) else {
                return A::NEW;
            };
            let refunded = slot.update(LIVE | id.0, value, |state| {
                let back = algorithm.refund(state, mark, cost);
                Ok::<_, core::convert::Infallible>((back, back))
            });
            if let Some(Ok(state)) = refunded {
                return state;
            }
            // Evicted meanwhile: look again.
        }
    }
}

impl<A: Algorithm + core::fmt::Debug, S: Storage, O: Overrides<A>> core::fmt::Debug
    for KeyedTable<A, S, O>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedTable")
            .field("algorithm", &self.algorithm)
            .field("capacity", &self.capacity())
            .field("when_full", &self.when_full)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "defmt")]
impl<A: Algorithm + defmt::Format, S: Storage, O: Overrides<A>> defmt::Format
    for KeyedTable<A, S, O>
{
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "KeyedTable {{ algorithm: {}, capacity: {=usize}, when_full: {}, stats: {} }}",
            self.algorithm,
            self.capacity(),
            self.when_full,
            self.stats()
        )
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

    /// A new key whose window is full, under the algorithm of `rule`'s
    /// override.
    pub(super) fn overflow(
        &self,
        hash: u64,
        rule: KeyId,
        now: u64,
        cost: u64,
    ) -> Result<(Decision, ChargedTo), Denied> {
        let algorithm = self.algorithm_for(rule);
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

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// Running totals of inserts, reuses and overflow decisions.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::Quota;
    /// let t: Keyed<Quota, 1> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Admit, Seed::new(1, 2));
    /// t.check(&1u32, 0).unwrap();
    /// t.check(&2u32, 0).unwrap();    // window full: admitted untracked
    /// t.check(&3u32, 1_000).unwrap(); // key 1 idle again: its slot is reused
    /// let s = t.stats();
    /// assert_eq!((s.inserted, s.reused, s.overflow_admitted), (2, 1, 1));
    /// ```
    pub fn stats(&self) -> KeyedStats {
        let c = &self.counters;
        KeyedStats {
            inserted: c.inserted.get(),
            reused: c.reused.get(),
            overflow_denied: c.overflow_denied.get(),
            overflow_admitted: c.overflow_admitted.get(),
            shared_admitted: c.shared_admitted.get(),
            shared_denied: c.shared_denied.get(),
        }
    }

    /// Counts the slots by what they hold at `now` (one read of each slot,
    /// not a snapshot: concurrent checks may move slots between counts).
    ///
    /// See [`Occupancy`] for an example.
    pub fn occupancy(&self, now: u64) -> Occupancy {
        let slots = self.slots.slots();
        let mut o = Occupancy {
            capacity: slots.len(),
            ..Occupancy::default()
        };
        for slot in slots {
            let value = slot.load();
            let key = key_of(value);
            match key & TAG_MASK {
                LIVE => {
                    if self
                        .algorithm_for(KeyId(key & !TAG_MASK))
                        .is_idle(state_of(value), now)
                    {
                        o.idle += 1
                    } else {
                        o.owing += 1
                    }
                }
                CLAIMING => o.claiming += 1,
                _ => o.free += 1,
            }
        }
        o
    }
}
