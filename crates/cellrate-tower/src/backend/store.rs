//! A store tier in process: the fixed, sliding and bucketed windows and
//! the sliding log, each client's state kept with the parameters it was
//! written under, so any client can have its own (an override).
//!
//! * The cells are in shards, each a `Mutex` over a map from the key's
//!   64-bit hash (the client, or the client and endpoint) to the key's
//!   cell: its client, its parameters, the generation of rules they are
//!   of, and its state. A check holds its shard's lock while it reads the
//!   rules in force, brings the cell to them, decides and writes.
//! * **Rules** (the default quota and the overrides by client) are
//!   published whole ([`ArcSwap`]), each a generation newer than the last.
//!   A cell of an older generation is brought to the rules in force before
//!   it is read, by whichever comes first, the check or the walk that
//!   follows a publication: its parameters, if its client's changed, with
//!   the state re-expressed at that instant (`WindowQuota::translate`).
//!   So no state is ever read by parameters it was not written or
//!   translated for, and a change is exact at its instant.
//! * At most `capacity` keys hold a cell. A new key finding none free
//!   looks at [`SCAN`] cells of its shard, those looked at longest ago
//!   first, and evicts the idle ones (judged by each cell's own
//!   parameters); finding none, it looks at [`SCAN_OTHER`] cells of each
//!   other shard not busy. So a new key looks at no more than
//!   `SCAN + 15 · SCAN_OTHER` cells whatever the capacity, and a shard's
//!   cells are looked at in turn, each again after all the others.
//!   Failing that, it is handled as the tier's [`WhenFull`] says (a
//!   denial waits until the soonest of the cells it looked at is full
//!   again; the shared cell follows the default quota).
//!
//! Invariants: a cell's generation is never newer than the rules a check
//! reads after taking its shard's lock (rules are published before any
//! cell is brought to them); each key of a shard's map is once in the
//! shard's order of looks, and no other key is.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;
use cellrate::compose::Revocable;
use cellrate::keyed::{KeyedStats, WhenFull};
use cellrate::{Decision, Denied, Limited, RateLimiter, Snapshot};

use super::overrides::{Epoch, OverrideSlots};
use super::window::{CellState, WindowQuota};
use super::{Scope, TierInfo};
use crate::key::{Part, RequestKey};

/// Shards of a store (at most; a store never has more than its capacity).
const SHARDS: usize = 16;

/// How many cells of its own shard a new key looks at for an idle one.
const SCAN: usize = 16;

/// How many cells of each other shard it looks at, finding none there.
const SCAN_OTHER: usize = 4;

/// The client of the shared cell: no client id (62 bits) is this.
const SHARED: u64 = u64::MAX;

/// The rules of one generation: the default quota and the overrides by
/// client id.
pub(crate) struct StoreRules {
    generation: u64,
    default: WindowQuota,
    overrides: HashMap<u64, WindowQuota>,
}

impl StoreRules {
    fn quota_of(&self, client: u64) -> WindowQuota {
        match self.overrides.get(&client) {
            Some(q) => *q,
            None => self.default,
        }
    }
}

/// One key's cell.
struct Cell {
    client: u64,
    quota: WindowQuota,
    generation: u64,
    state: CellState,
}

impl Cell {
    fn new(client: u64, rules: &StoreRules) -> Self {
        let quota = rules.quota_of(client);
        Cell {
            client,
            quota,
            generation: rules.generation,
            state: quota.fresh(),
        }
    }
    /// The cell brought to `rules` at `now` (see the module docs).
    fn refresh(&mut self, rules: &StoreRules, now: u64) {
        if self.generation >= rules.generation {
            return;
        }
        let quota = rules.quota_of(self.client);
        if quota != self.quota {
            self.quota.translate(&mut self.state, now, &quota);
            self.quota = quota;
        }
        self.generation = rules.generation;
    }
    fn is_idle(&self, now: u64) -> bool {
        self.quota.is_idle(&self.state, now)
    }
}

/// The hasher of a shard's map: its keys are already the store's keyed
/// hashes (uniform, and unknown to clients), so they are used as they are.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys reach this map; any other input is still mixed in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One shard: its cells by key, and their keys in the order eviction
/// looks at them (each key of `cells` once).
#[derive(Default)]
struct Shard {
    cells: HashMap<u64, Cell, BuildHasherDefault<Prehashed>>,
    order: VecDeque<u64>,
}

impl Shard {
    fn insert(&mut self, key: u64, cell: Cell) {
        self.cells.insert(key, cell);
        self.order.push_back(key);
    }

    /// Looks at up to `scan` cells, the one looked at longest ago first:
    /// evicts the idle ones and returns how many, and how many it looked
    /// at; the others go to the back, `soonest` lowered to the ticks until
    /// each is full again.
    fn evict_idle(&mut self, now: u64, scan: usize, soonest: &mut u64) -> (usize, usize) {
        let mut evicted = 0;
        let looked = scan.min(self.order.len());
        for _ in 0..looked {
            let Some(key) = self.order.pop_front() else {
                break;
            };
            if let Entry::Occupied(cell) = self.cells.entry(key) {
                if cell.get().is_idle(now) {
                    cell.remove();
                    evicted += 1;
                } else {
                    let cell = cell.get();
                    *soonest = (*soonest).min(cell.quota.peek(&cell.state, now).reset_after());
                    self.order.push_back(key);
                }
            }
        }
        (evicted, looked)
    }
}

/// Running totals, as a keyed table reports them ([`KeyedStats`]).
#[derive(Default)]
struct Counters {
    inserted: AtomicUsize,
    reused: AtomicUsize,
    overflow_denied: AtomicUsize,
    overflow_admitted: AtomicUsize,
    shared_admitted: AtomicUsize,
    shared_denied: AtomicUsize,
    /// Cells looked at for room.
    #[cfg(test)]
    looked_at: AtomicUsize,
}

fn bump(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A store tier's table (see the module docs).
pub(crate) struct Store {
    rules: ArcSwap<StoreRules>,
    slots: OverrideSlots<()>,
    shards: Box<[Mutex<Shard>]>,
    shared: Mutex<Cell>,
    hasher: RandomState,
    capacity: usize,
    len: AtomicUsize,
    when_full: WhenFull,
    counters: Counters,
}

/// Where an admission's cells were counted, and under which parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Charged {
    Cell(WindowQuota),
    Shared(WindowQuota),
    Nothing,
}

/// What a store entry gives back on revocation: where its cells were
/// counted, and their mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoreReceipt {
    key: u64,
    to: Charged,
    mark: u64,
    cost: u64,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl Store {
    pub(crate) fn new(
        quota: WindowQuota,
        capacity: usize,
        max_overrides: usize,
        when_full: WhenFull,
    ) -> Self {
        let rules = StoreRules {
            generation: 0,
            default: quota,
            overrides: HashMap::new(),
        };
        let shared = Cell::new(SHARED, &rules);
        Store {
            rules: ArcSwap::from_pointee(rules),
            slots: OverrideSlots::new(max_overrides, || ()),
            shards: (0..SHARDS.min(capacity.max(1)))
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            shared: Mutex::new(shared),
            hasher: RandomState::new(),
            capacity,
            len: AtomicUsize::new(0),
            when_full,
            counters: Counters::default(),
        }
    }

    /// The default quota in force.
    pub(crate) fn quota(&self) -> WindowQuota {
        self.rules.load().default
    }
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
    /// The override slots (their places; the quotas are in the rules).
    pub(crate) fn slots(&self) -> &OverrideSlots<()> {
        &self.slots
    }

    /// The id of `client` (below 2⁶², as override slots take it).
    pub(crate) fn client_id(&self, client: &Part<'_>) -> u64 {
        Self::id_of(self.key_of(client))
    }

    /// A client's id from its key (the low 62 bits).
    fn id_of(client_key: u64) -> u64 {
        client_key & ((1 << 62) - 1)
    }

    fn key_of(&self, key: impl Hash) -> u64 {
        self.hasher.hash_one(key)
    }

    /// `key`'s entry: the client, or (client, endpoint).
    pub(crate) fn entry<'t>(&'t self, scope: Scope, key: &RequestKey<'_>) -> StoreEntry<'t> {
        let client = key.client();
        let client_key = self.key_of(client);
        let id = match (scope, key.scope()) {
            (Scope::ClientAndEndpoint, Some(endpoint)) => self.key_of((client, endpoint)),
            _ => client_key,
        };
        StoreEntry {
            store: self,
            key: id,
            client: Self::id_of(client_key),
        }
    }

    /// Publishes `default` and `overrides` (`(slot, client id, quota)`, as
    /// [`OverrideSlots::assign`] placed them at `epoch`), then brings every
    /// cell to them at `now`. Only the reloader (one at a time) calls this.
    pub(crate) fn apply(
        &self,
        default: WindowQuota,
        overrides: &[(usize, u64, WindowQuota)],
        epoch: Epoch,
        now: u64,
    ) {
        let rules = StoreRules {
            generation: self.rules.load().generation + 1,
            default,
            overrides: overrides.iter().map(|&(_, id, q)| (id, q)).collect(),
        };
        let rules = Arc::new(rules);
        self.rules.store(Arc::clone(&rules));
        let bound: Vec<(usize, u64)> = overrides.iter().map(|&(i, id, _)| (i, id)).collect();
        self.slots.bind(&bound, epoch, |_, _| {});
        for shard in self.shards.iter() {
            for cell in lock(shard).cells.values_mut() {
                cell.refresh(&rules, now);
            }
        }
        lock(&self.shared).refresh(&rules, now);
    }

    /// What each override slot gives its client in tier `name` (`None`:
    /// free).
    pub(crate) fn override_infos(&self, name: &str, hz: u64) -> Vec<Option<TierInfo>> {
        let rules = self.rules.load();
        self.slots
            .clients()
            .map(|(id, _)| {
                id.and_then(|id| rules.overrides.get(&id))
                    .map(|q| q.info(name, hz))
            })
            .collect()
    }

    pub(crate) fn stats(&self) -> KeyedStats {
        let c = &self.counters;
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let mut s = KeyedStats::default();
        s.inserted = get(&c.inserted);
        s.reused = get(&c.reused);
        s.overflow_denied = get(&c.overflow_denied);
        s.overflow_admitted = get(&c.overflow_admitted);
        s.shared_admitted = get(&c.shared_admitted);
        s.shared_denied = get(&c.shared_denied);
        s
    }

    fn shard(&self, key: u64) -> &Mutex<Shard> {
        // The shard takes bits 32 and up; a shard's map, the low bits and
        // the top seven.
        &self.shards[((key >> 32) % self.shards.len() as u64) as usize]
    }

    /// `cost` cells of `key` (of `client`) at `now`, written only if
    /// `write`: the decision and its receipt, or the denial.
    fn decide(
        &self,
        key: u64,
        client: u64,
        now: u64,
        cost: u64,
        write: bool,
    ) -> Result<(Decision, StoreReceipt), Denied> {
        let mut shard = lock(self.shard(key));
        let rules = self.rules.load();
        let receipt = |to, mark| StoreReceipt {
            key,
            to,
            mark,
            cost,
        };
        if let Some(cell) = shard.cells.get_mut(&key) {
            cell.refresh(&rules, now);
            let (decision, mark) = cell.quota.check(&mut cell.state, now, cost, write)?;
            return Ok((decision, receipt(Charged::Cell(cell.quota), mark)));
        }
        // A new key: its answer on a fresh state (a cost above the limit is
        // refused before it takes room).
        let mut cell = Cell::new(client, &rules);
        let (decision, mark) = cell.quota.check(&mut cell.state, now, cost, write)?;
        if !write || cost == 0 {
            return Ok((decision, receipt(Charged::Nothing, 0)));
        }
        let retry = match self.take_room(&mut shard, now) {
            Ok(()) => {
                let quota = cell.quota;
                shard.insert(key, cell);
                bump(&self.counters.inserted);
                return Ok((decision, receipt(Charged::Cell(quota), mark)));
            }
            Err(retry) => retry,
        };
        drop(shard);
        match self.when_full {
            WhenFull::Deny => {
                bump(&self.counters.overflow_denied);
                Err(Denied::Limited(Limited::new(
                    decision.limit(),
                    retry,
                    retry,
                )))
            }
            WhenFull::Admit => {
                bump(&self.counters.overflow_admitted);
                Ok((decision, receipt(Charged::Nothing, 0)))
            }
            _ => {
                let mut guard = lock(&self.shared);
                let shared = &mut *guard;
                shared.refresh(&rules, now);
                let result = shared.quota.check(&mut shared.state, now, cost, true);
                match result {
                    Ok(_) => bump(&self.counters.shared_admitted),
                    Err(_) => bump(&self.counters.shared_denied),
                }
                let quota = shared.quota;
                result.map(|(d, mark)| (d, receipt(Charged::Shared(quota), mark)))
            }
        }
    }

    /// Room for one more cell, if there is or can be made: idle cells
    /// among [`SCAN`] of `shard` (held) are evicted, failing that among
    /// [`SCAN_OTHER`] of each other shard not busy. `Err`: none, and the ticks
    /// until the soonest of the cells looked at is full again.
    fn take_room(&self, shard: &mut Shard, now: u64) -> Result<(), u64> {
        let taken = self
            .len
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        if taken.is_ok() {
            return Ok(());
        }
        let mut soonest = u64::MAX;
        let mut evict = |shard: &mut Shard, scan: usize| {
            let (evicted, _looked) = shard.evict_idle(now, scan, &mut soonest);
            #[cfg(test)]
            self.counters
                .looked_at
                .fetch_add(_looked, Ordering::Relaxed);
            if let Some(others) = evicted.checked_sub(1) {
                // One freed cell is this key's; the others are free room.
                self.len.fetch_sub(others, Ordering::AcqRel);
            }
            evicted > 0
        };
        let found = evict(shard, SCAN)
            || self.shards.iter().any(|other| match other.try_lock() {
                Ok(mut other) => evict(&mut other, SCAN_OTHER),
                Err(_) => false, // busy (ours, or another check's): skipped
            });
        if found {
            bump(&self.counters.reused);
            Ok(())
        } else {
            Err(if soonest == u64::MAX { 0 } else { soonest })
        }
    }

    fn revoke(&self, r: StoreReceipt) {
        // Given back only under the parameters that counted the cells (a
        // change since re-expressed them with the rest).
        let give_back = |cell: &mut Cell, quota: WindowQuota| {
            if cell.quota == quota {
                cell.quota.refund(&mut cell.state, r.mark, r.cost);
            }
        };
        match r.to {
            Charged::Cell(quota) => {
                if let Some(cell) = lock(self.shard(r.key)).cells.get_mut(&r.key) {
                    give_back(cell, quota);
                }
            }
            Charged::Shared(quota) => give_back(&mut lock(&self.shared), quota),
            Charged::Nothing => {}
        }
    }

    fn peek(&self, key: u64, client: u64, now: u64) -> Snapshot {
        let mut shard = lock(self.shard(key));
        let rules = self.rules.load();
        match shard.cells.get_mut(&key) {
            Some(cell) => {
                cell.refresh(&rules, now);
                cell.quota.peek(&cell.state, now)
            }
            None => {
                let cell = Cell::new(client, &rules);
                cell.quota.peek(&cell.state, now)
            }
        }
    }
}

/// One key of a store tier as a limiter of its own.
pub(crate) struct StoreEntry<'t> {
    store: &'t Store,
    key: u64,
    client: u64,
}

impl RateLimiter for StoreEntry<'_> {
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit_n(now, cost).map(|(d, _)| d)
    }
    fn peek(&self, now: u64) -> Snapshot {
        self.store.peek(self.key, self.client, now)
    }
}

impl Revocable for StoreEntry<'_> {
    type Receipt = StoreReceipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, StoreReceipt), Denied> {
        self.store.decide(self.key, self.client, now, cost, true)
    }
    fn revoke(&self, receipt: StoreReceipt) {
        self.store.revoke(receipt)
    }
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.store
            .decide(self.key, self.client, now, cost, false)
            .map(|(d, _)| d)
    }
}

#[cfg(test)]
mod tests {
    use super::{Scope, Store, WindowQuota};
    use crate::key::{Part, RequestKey};
    use cellrate::compose::Revocable;
    use cellrate::keyed::WhenFull;
    use cellrate::window::FixedWindowQuota;
    use cellrate::RateLimiter;
    use std::sync::atomic::Ordering;

    /// Threads racing on one key, and on keys of their own in a table too
    /// small for them all, at one instant: exactly the limit is admitted
    /// for the shared key, every admission given back is free again, and
    /// the table never holds more keys than its capacity.
    #[test]
    fn racing_checks_admit_exactly_the_limit() {
        let quota = WindowQuota::Fixed(FixedWindowQuota::new(50, 1_000));
        let store = Store::new(quota, 8, 4, WhenFull::Deny);
        let shared = RequestKey::new(Part::Str("shared"), None);
        let admitted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let (store, shared) = (&store, &shared);
                    s.spawn(move || {
                        let own = format!("own{t}");
                        let own = RequestKey::new(Part::Str(&own), None);
                        let (mut kept, mut seen) = (0, 0);
                        for _ in 0..40 {
                            let entry = store.entry(Scope::Client, shared);
                            if let Ok((_, receipt)) = entry.admit_n(10, 1) {
                                seen += 1;
                                // Every other admission is given back.
                                if seen % 2 == 0 {
                                    entry.revoke(receipt);
                                } else {
                                    kept += 1;
                                }
                            }
                            let _ = store.entry(Scope::Client, &own).check_n(10, 1);
                        }
                        kept
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, 50);
        let left = store.entry(Scope::Client, &shared).peek(10).remaining();
        assert_eq!(left, 0);
        let held: usize = store
            .shards
            .iter()
            .map(|s| s.lock().unwrap().cells.len())
            .sum();
        assert!(held <= 8, "{held}");
    }

    /// A store of `capacity` keys, each written at `now`, in windows of
    /// 1 000 ticks.
    fn full_store(capacity: usize, now: u64) -> Store {
        let quota = WindowQuota::Fixed(FixedWindowQuota::new(100, 1_000));
        let store = Store::new(quota, capacity, 4, WhenFull::Deny);
        for i in 0..capacity {
            let key = format!("c{i}");
            let key = RequestKey::new(Part::Str(&key), None);
            assert!(store.entry(Scope::Client, &key).check_n(now, 1).is_ok());
        }
        store
    }

    /// A new key finding a large store full of clients that are not idle
    /// looks at a bounded number of cells, whatever the capacity, and is
    /// denied until the soonest of them is full again.
    #[test]
    fn a_new_key_in_a_full_store_looks_at_a_bounded_number_of_cells() {
        let store = full_store(4_096, 0);
        let key = RequestKey::new(Part::Str("new"), None);
        let denied = store.entry(Scope::Client, &key).check_n(10, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(990));
        let looked = store.counters.looked_at.load(Ordering::Relaxed);
        assert_eq!(looked, super::SCAN + 15 * super::SCAN_OTHER);
        assert!(looked <= 76, "docs/design/tower.md states at most 76");
    }

    /// Each new key looks further into every shard, so an idle cell is
    /// found however deep in its shard it is: the client written last (at
    /// the back of its shard's turn) goes idle while the other 4 095 stay
    /// busy, and new keys find its room within as many tries as a shard
    /// has cells over the cells a try looks at in another shard.
    #[test]
    fn an_idle_cell_is_found_wherever_it_is() {
        let capacity = 4_096;
        let store = full_store(capacity, 0);
        for i in 0..capacity - 1 {
            let key = format!("c{i}");
            let key = RequestKey::new(Part::Str(&key), None);
            assert!(store.entry(Scope::Client, &key).check_n(1_500, 1).is_ok());
        }
        let deepest = store
            .shards
            .iter()
            .map(|s| s.lock().unwrap().cells.len())
            .max()
            .unwrap();
        let tries = (0..deepest.div_ceil(super::SCAN_OTHER) + 1)
            .position(|i| {
                let key = format!("new{i}");
                let key = RequestKey::new(Part::Str(&key), None);
                store.entry(Scope::Client, &key).check_n(1_500, 1).is_ok()
            })
            .expect("the idle cell was never found");
        assert!(tries <= deepest.div_ceil(super::SCAN_OTHER), "{tries}");
        let held: usize = store
            .shards
            .iter()
            .map(|s| s.lock().unwrap().cells.len())
            .sum();
        assert_eq!(held, capacity);
        let victim = format!("c{}", capacity - 1);
        let victim = RequestKey::new(Part::Str(&victim), None);
        let gone = |s: &std::sync::Mutex<super::Shard>| {
            !s.lock()
                .unwrap()
                .cells
                .contains_key(&store.entry(Scope::Client, &victim).key)
        };
        assert!(store.shards.iter().all(gone));
    }
}
