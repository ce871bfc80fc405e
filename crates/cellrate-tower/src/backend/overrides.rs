//! A tier's per-client quotas that change at run time: its override
//! slots, and the generations of rules that say when a freed slot may be
//! given again. A GCRA tier keeps each slot's quota in the slot
//! ([`LiveOverrides`]); a store tier keeps them in its rules and uses the
//! slots for their places only.

use std::sync::atomic::{AtomicU64, Ordering};

use cellrate::keyed::{KeyId, LiveQuota, Overrides};
use cellrate::Quota;

use super::TierInfo;

/// A tier's per-client quotas that change at run time: at most `capacity`
/// clients at a time, each in a slot of its own. A slot's key word is `0`
/// (never used; every slot after it is unused too), `id + 1` (bound to
/// that client) or [`RETIRED`] (freed); only the reloader, one at a time,
/// writes it, a bound slot's quota before its key word.
///
/// A check that found its client's slot reads that client's quota, whatever
/// a reload does meanwhile: a freed slot is given to another client only
/// once every request that could have found it bound is answered. The
/// reloader says when that is with [`Epoch`]: a slot freed while the rules
/// of generation `g` were in force is given again once no rules of a
/// generation `≤ g` are read by any request.
pub(crate) struct OverrideSlots<Q> {
    slots: Box<[OverrideSlot<Q>]>,
}

/// A GCRA tier's override slots, each with its client's live quota.
pub(crate) type LiveOverrides = OverrideSlots<LiveQuota>;

/// The key word of a freed slot (no client's: an id has 62 bits).
const RETIRED: u64 = u64::MAX;

struct OverrideSlot<Q> {
    key: AtomicU64,
    quota: Q,
    /// The generation of the rules in force when the slot was freed
    /// (written and read by the reloader only).
    retired_at: AtomicU64,
}

/// Which rules a reload replaces, and the oldest that requests still read:
/// the generation of the rules in force (each reload makes the next one),
/// and the oldest generation some request may still be deciding by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Epoch {
    pub(crate) current: u64,
    pub(crate) oldest: u64,
}

// Reloads are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl<Q> OverrideSlots<Q> {
    pub(crate) fn new(capacity: usize, mut make: impl FnMut() -> Q) -> Self {
        OverrideSlots {
            slots: (0..capacity)
                .map(|_| OverrideSlot {
                    key: AtomicU64::new(0),
                    quota: make(),
                    retired_at: AtomicU64::new(0),
                })
                .collect(),
        }
    }
    /// How many clients can have an override at a time.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// The slots that are or were in use.
    fn used(&self) -> impl Iterator<Item = (usize, &OverrideSlot<Q>)> {
        self.slots
            .iter()
            .enumerate()
            .take_while(|(_, s)| s.key.load(Ordering::Acquire) != 0)
    }
    /// The slot of the client `id` (below 2⁶²), if it has one.
    #[inline]
    pub(crate) fn slot_of(&self, id: u64) -> Option<usize> {
        let word = id + 1;
        self.used()
            .find(|(_, s)| s.key.load(Ordering::Acquire) == word)
            .map(|(i, _)| i)
    }
    /// The slot each of `ids` will hold once a reload with these overrides
    /// (and no others) is committed at `epoch`: its own if it has one, else
    /// a slot freed long enough ago (see [`LiveOverrides`]), else the first
    /// never used. `Err(i)`: `ids[i]` finds no slot.
    pub(crate) fn assign(&self, ids: &[u64], epoch: Epoch) -> Result<Vec<usize>, usize> {
        let mut free = self
            .used()
            .filter(|(_, s)| {
                s.key.load(Ordering::Acquire) == RETIRED
                    && s.retired_at.load(Ordering::Relaxed) < epoch.oldest
            })
            .map(|(i, _)| i)
            .chain(
                self.slots
                    .iter()
                    .enumerate()
                    .skip_while(|(_, s)| s.key.load(Ordering::Acquire) != 0)
                    .map(|(i, _)| i),
            );
        let mut taken = Vec::with_capacity(ids.len());
        for (n, &id) in ids.iter().enumerate() {
            match self.slot_of(id).or_else(|| free.next()) {
                Some(slot) => taken.push(slot),
                None => return Err(n),
            }
        }
        Ok(taken)
    }
    /// Commits one reload's overrides, `(slot, id)` as
    /// [`assign`](Self::assign) placed them: `set` runs on each override's
    /// slot (with its index in `bound`) before its key word is written; a
    /// bound client not among them has its slot freed at `epoch`, after
    /// `set` ran on it with `None`. Only the reloader (one at a time) calls
    /// this.
    pub(crate) fn bind(
        &self,
        bound: &[(usize, u64)],
        epoch: Epoch,
        mut set: impl FnMut(&Q, Option<usize>),
    ) {
        for (_, slot) in self.used() {
            let word = slot.key.load(Ordering::Acquire);
            if word != RETIRED && !bound.iter().any(|&(_, id)| id + 1 == word) {
                set(&slot.quota, None);
                slot.retired_at.store(epoch.current, Ordering::Relaxed);
                slot.key.store(RETIRED, Ordering::Release);
            }
        }
        for (n, &(i, id)) in bound.iter().enumerate() {
            let Some(slot) = self.slots.get(i) else {
                continue; // placed by `assign`: unreachable
            };
            set(&slot.quota, Some(n));
            slot.key.store(id + 1, Ordering::Release);
        }
    }
    /// Each slot's client (`None`: free) and what the slot holds.
    pub(crate) fn clients(&self) -> impl Iterator<Item = (Option<u64>, &Q)> {
        self.slots
            .iter()
            .map(|s| match s.key.load(Ordering::Acquire) {
                0 | RETIRED => (None, &s.quota),
                word => (Some(word - 1), &s.quota),
            })
    }
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl LiveOverrides {
    /// Commits one reload's overrides, `(slot, id, quota)`, quotas already
    /// at the tier's scale ([`bind`](Self::bind)): a client whose slot is
    /// freed follows `default` again.
    pub(crate) fn apply(&self, overrides: &[(usize, u64, Quota)], default: Quota, epoch: Epoch) {
        let bound: Vec<(usize, u64)> = overrides.iter().map(|&(i, id, _)| (i, id)).collect();
        self.bind(&bound, epoch, |quota, n| {
            let _ = quota.set_quota(n.map_or(default, |n| overrides[n].2));
        });
    }
    /// Each client bound to a slot, by [`KeyId::get`], with its quota.
    pub(crate) fn bound(&self) -> std::collections::HashMap<u64, Quota> {
        self.clients()
            .filter_map(|(id, q)| id.map(|id| (id, q.quota())))
            .collect()
    }
    /// What each slot gives its client in tier `name` (`None`: free).
    pub(crate) fn infos(&self, name: &str) -> Vec<Option<TierInfo>> {
        self.clients()
            .map(|(id, q)| id.map(|_| TierInfo::from_quota(name, &q.quota())))
            .collect()
    }
}

impl Overrides<LiveQuota> for LiveOverrides {
    #[inline]
    fn get(&self, id: KeyId) -> Option<&LiveQuota> {
        let word = id.get() + 1;
        for slot in self.slots.iter() {
            match slot.key.load(Ordering::Acquire) {
                0 => return None,
                w if w == word => return Some(&slot.quota),
                _ => {} // another client's, or freed
            }
        }
        None
    }
}
