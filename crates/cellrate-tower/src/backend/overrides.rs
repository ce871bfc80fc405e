//! A GCRA tier's per-client quotas that change at run time: its override
//! slots, and the generations of rules that say when a freed slot may be
//! given again.

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
pub(crate) struct LiveOverrides {
    slots: Box<[OverrideSlot]>,
}

/// The key word of a freed slot (no client's: an id has 62 bits).
const RETIRED: u64 = u64::MAX;

struct OverrideSlot {
    key: AtomicU64,
    quota: LiveQuota,
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
impl LiveOverrides {
    pub(crate) fn new(capacity: usize, default: Quota) -> Self {
        LiveOverrides {
            slots: (0..capacity)
                .map(|_| OverrideSlot {
                    key: AtomicU64::new(0),
                    quota: LiveQuota::new(default),
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
    fn used(&self) -> impl Iterator<Item = (usize, &OverrideSlot)> {
        self.slots
            .iter()
            .enumerate()
            .take_while(|(_, s)| s.key.load(Ordering::Acquire) != 0)
    }
    /// The slot of `id`, if it has one.
    #[inline]
    pub(crate) fn slot_of(&self, id: KeyId) -> Option<usize> {
        let word = id.get() + 1;
        self.used()
            .find(|(_, s)| s.key.load(Ordering::Acquire) == word)
            .map(|(i, _)| i)
    }
    /// The slot each of `ids` will hold once a reload with these overrides
    /// (and no others) is committed at `epoch`: its own if it has one, else
    /// a slot freed long enough ago (see [`LiveOverrides`]), else the first
    /// never used. `Err(i)`: `ids[i]` finds no slot.
    pub(crate) fn assign(&self, ids: &[KeyId], epoch: Epoch) -> Result<Vec<usize>, usize> {
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
    /// Commits one reload's overrides, `(slot, id, quota)` as
    /// [`assign`](Self::assign) placed them, quotas already at the tier's
    /// scale: each client's quota is written before its key word; a bound
    /// client not among them follows `default` and its slot is freed at
    /// `epoch`. Only the reloader (one at a time) calls this.
    pub(crate) fn apply(&self, overrides: &[(usize, KeyId, Quota)], default: Quota, epoch: Epoch) {
        for (_, slot) in self.used() {
            let word = slot.key.load(Ordering::Acquire);
            if word != RETIRED && !overrides.iter().any(|&(_, id, _)| id.get() + 1 == word) {
                let _ = slot.quota.set_quota(default);
                slot.retired_at.store(epoch.current, Ordering::Relaxed);
                slot.key.store(RETIRED, Ordering::Release);
            }
        }
        for &(i, id, q) in overrides {
            let Some(slot) = self.slots.get(i) else {
                continue; // placed by `assign`: unreachable
            };
            let _ = slot.quota.set_quota(q);
            slot.key.store(id.get() + 1, Ordering::Release);
        }
    }
    /// Each client bound to a slot, by [`KeyId::get`], with its quota.
    pub(crate) fn bound(&self) -> std::collections::HashMap<u64, Quota> {
        self.used()
            .filter_map(|(_, s)| match s.key.load(Ordering::Acquire) {
                RETIRED => None,
                word => Some((word - 1, s.quota.quota())),
            })
            .collect()
    }
    /// What each slot gives its client in tier `name` (`None`: free).
    pub(crate) fn infos(&self, name: &str) -> Vec<Option<TierInfo>> {
        self.slots
            .iter()
            .map(|s| match s.key.load(Ordering::Acquire) {
                0 | RETIRED => None,
                _ => Some(TierInfo::from_quota(name, &s.quota.quota())),
            })
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
