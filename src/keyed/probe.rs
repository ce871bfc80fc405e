//! Finding a key in its probe window, and inserting it there (the claim and
//! resolve protocol of docs/design/keyed.md in the repository).
//!
//! A key's window is the `W = min(PROBE_WINDOW, capacity)` slots from its
//! home `⌊h · (capacity − W + 1) / 2⁶⁴⌋` on: it never passes the end of the
//! table, so every pass reads one contiguous run of slots and nothing here
//! wraps around.

use super::key::KeyId;
use super::policy::ChargedTo;
use super::policy::Overrides;
use super::slot::{key_of, pack, state_of, Slot, CLAIMING, EMPTY, LIVE, TAG_MASK, TOMB};
use super::storage::Storage;
use super::table::KeyedTable;
use crate::{Algorithm, Decision, Denied};

/// The largest number of slots a key may occupy: its probe window.
///
/// A key lives in one of the `min(PROBE_WINDOW, capacity)` slots starting at
/// its home slot, so every lookup reads at most that many 16-byte slots
/// (four 64-byte cache lines).
pub const PROBE_WINDOW: usize = 16;

/// A key's slot and the value read from it.
pub(super) type Found<'t> = (&'t Slot, u128);

/// Where a pass found a key.
pub(super) enum Located<'t> {
    /// The key's slot and the value read from it.
    Live(&'t Slot, u128),
    /// Not in the table, and no slot of its window can take it.
    Full,
    /// Was not in the table, and is now, charged for the request.
    Inserted,
}

/// The home slot of a hash in a table of `n` slots:
/// `⌊hash · (n − W + 1) / 2⁶⁴⌋` with `W = min(PROBE_WINDOW, n)`, so that the
/// window `home .. home + W` never passes the end of the table.
#[inline(always)]
pub(super) fn home(hash: u64, n: usize) -> usize {
    let homes = n - n.min(PROBE_WINDOW) + 1;
    ((hash as u128 * homes as u128) >> 64) as usize
}

/// The window of a hash in `slots`: the `min(W, n)` slots from its home.
#[inline(always)]
fn window(slots: &[Slot], hash: u64) -> &[Slot] {
    let n = slots.len();
    let first = home(hash, n);
    // `home` keeps the window inside the table: never empty unless the
    // table is.
    slots.get(first..first + n.min(PROBE_WINDOW)).unwrap_or(&[])
}

/// The slot of `run` holding `live_key`, and the value read
/// from it; `None` if the key is not there (or not before an EMPTY slot).
///
/// The home slot inline (where most keys live), the rest of the run out of
/// line: a fully unrolled 16-slot loop around the out-of-line 128-bit loads
/// spills every address and costs more than it saves. Reading the whole
/// home line and choosing its slot without branches was measured slower
/// (docs/design/keyed.md).
#[inline(always)]
fn find(run: &[Slot], live_key: u64) -> Option<Found<'_>> {
    let slot = run.first()?;
    let value = slot.load();
    let key = key_of(value);
    if key == live_key {
        return Some((slot, value));
    }
    if key == EMPTY {
        return None;
    }
    scan(run, live_key)
}

/// The slot of `run` after its first holding `live_key`, and its value;
/// `None` at the first EMPTY slot or the end. (Takes the whole run, so the
/// inline part keeps no second pointer alive for it.)
#[inline(never)]
fn scan(run: &[Slot], live_key: u64) -> Option<Found<'_>> {
    for slot in run.iter().skip(1) {
        let value = slot.load();
        let key = key_of(value);
        if key == live_key {
            return Some((slot, value));
        }
        if key == EMPTY {
            break;
        }
    }
    None
}

impl<A: Algorithm, S: Storage, O: Overrides<A>> KeyedTable<A, S, O> {
    /// Finds `id`'s slot and the value read from it, if it has one.
    #[inline(always)]
    pub(super) fn locate(&self, id: KeyId, hash: u64) -> Option<Found<'_>> {
        // The key's slot, or the first EMPTY slot (no copy of a key lies
        // beyond it).
        let run = window(self.slots.slots(), hash);
        find(run, LIVE | id.0)
    }

    /// A key [`locate`](Self::locate) did not find: charge a new client
    /// and insert it in that state, or find the copy another thread
    /// inserted meanwhile, or apply the [`WhenFull`](super::WhenFull) policy.
    #[cold]
    #[inline(never)]
    pub(super) fn check_new(
        &self,
        id: KeyId,
        hash: u64,
        rule: KeyId,
        now: u64,
        cost: u64,
    ) -> Result<Found<'_>, Result<(Decision, ChargedTo), Denied>> {
        // Never insert a key for a request that a new client would be denied
        // (a cost above the burst): it would take a slot for nothing.
        let algorithm = self.algorithm_for(rule);
        let (charged, decision) = match algorithm.check(A::NEW, now, cost) {
            Ok(charged) => charged,
            Err(denied) => return Err(Err(denied)),
        };
        match self.insert(id, hash, now, charged) {
            Located::Live(slot, value) => Ok((slot, value)),
            Located::Inserted => Err(Ok((
                decision,
                ChargedTo::Slot(algorithm.mark(charged, now)),
            ))),
            Located::Full => Err(self.overflow(hash, rule, now, cost)),
        }
    }

    /// Inserts `id` in state `charged` (see the module docs for the
    /// protocol), or finds the copy another thread inserted meanwhile.
    pub(super) fn insert(&self, id: KeyId, hash: u64, now: u64, charged: u64) -> Located<'_> {
        let run = window(self.slots.slots(), hash);
        let live_key = LIVE | id.0;
        let claim_key = CLAIMING | id.0;
        // Whether this call made a claim: then a pass reads the whole window
        // even after finding the key, to withdraw claims left behind.
        let mut claimed = false;
        loop {
            let mut claims: u32 = 0; // window positions holding CLAIMING(id)
            let mut seen = [0u128; PROBE_WINDOW];
            let mut found: Option<(usize, u128)> = None;
            let mut free: Option<(usize, u128)> = None;
            for (position, (slot, seen_here)) in run.iter().zip(seen.iter_mut()).enumerate() {
                let value = slot.load();
                let key = key_of(value);
                if key == live_key {
                    found = Some((position, value));
                    if !claimed {
                        break;
                    }
                } else if key == claim_key {
                    claims |= 1 << position;
                    *seen_here = value;
                } else if key == EMPTY {
                    if free.is_none() {
                        free = Some((position, value));
                    }
                    break;
                } else if free.is_none()
                    && (key == TOMB
                        || (key & TAG_MASK == LIVE
                            && self
                                .algorithm_for(KeyId(key & !TAG_MASK))
                                .is_idle(state_of(value), now)))
                {
                    free = Some((position, value));
                }
            }
            if let Some((position, value)) = found {
                // Withdraw stray claims (ours, or of a thread that lost).
                withdraw(run, claims, &seen);
                return Located::Live(&run[position], value);
            }
            if claims != 0 {
                // Resolve: the first claim in window order wins.
                let winner = claims.trailing_zeros() as usize;
                if !withdraw(run, claims & (claims - 1), &seen) {
                    continue; // a claim was committed meanwhile: look again
                }
                // Committed already charged for this caller's request.
                let live = pack(live_key, charged);
                if run[winner].compare_exchange(seen[winner], live).is_ok() {
                    self.counters.inserted.add(1);
                    return Located::Inserted;
                }
                continue;
            }
            let Some((position, value)) = free else {
                return Located::Full;
            };
            let ticket = self.counters.tickets.add(1) as u64;
            if run[position]
                .compare_exchange(value, pack(claim_key, ticket))
                .is_ok()
            {
                claimed = true;
                if key_of(value) & TAG_MASK == LIVE {
                    self.counters.reused.add(1);
                }
            }
        }
    }

    /// Ticks until the first client of the window of `hash` is back to new
    /// (so that a new key would find a slot).
    pub(super) fn first_idle_after(&self, hash: u64, now: u64) -> u64 {
        if self.slots.slots().is_empty() {
            return u64::MAX;
        }
        let run = window(self.slots.slots(), hash);
        let mut soonest = u64::MAX;
        for slot in run {
            let value = slot.load();
            let key = key_of(value);
            if key & TAG_MASK == LIVE {
                let wait = self
                    .algorithm_for(KeyId(key & !TAG_MASK))
                    .peek(state_of(value), now)
                    .reset_after();
                soonest = soonest.min(wait);
            } else {
                // Free, or a claim in flight: a retry may find room at once.
                soonest = 0;
            }
        }
        soonest
    }
}

/// Turns the claims at the window positions in `mask` (values in `seen`)
/// into TOMB. Returns `false` if one of them had been committed.
fn withdraw(run: &[Slot], mut mask: u32, seen: &[u128; PROBE_WINDOW]) -> bool {
    let mut ok = true;
    while mask != 0 {
        let position = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        let claim = seen[position];
        if let Err(actual) = run[position].compare_exchange(claim, pack(TOMB, 0)) {
            // Withdrawn by someone else, or committed: only the latter
            // matters.
            if key_of(actual) == (key_of(claim) & !TAG_MASK) | LIVE {
                ok = false;
            }
        }
    }
    ok
}
