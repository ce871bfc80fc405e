//! [`KeyedTable::rewrite_states`]: every tracked client's state word
//! re-expressed in one pass, for a table whose algorithm's parameters the
//! caller changes by its own means (a window quota behind the caller's
//! lock, say), where [`LiveQuota`](super::LiveQuota)'s walk does not apply.

use super::key::KeyId;
use super::slot::{key_of, LIVE, TAG_MASK};
use super::storage::Storage;
use super::KeyedTable;

impl<A, S: Storage, O> KeyedTable<A, S, O> {
    /// Replaces the state word `s` of every tracked key `id` by
    /// `rewrite(Some(id), s)`, and the shared overflow word of
    /// [`WhenFull::Shared`](super::WhenFull::Shared) by
    /// `rewrite(None, s)`: one compare-and-swap loop per live slot, each
    /// expecting the slot's own key (a slot evicted meanwhile is skipped;
    /// a key being inserted is not rewritten). `rewrite` may run more than
    /// once for a slot, on a fresher state, so it must be a function of
    /// its arguments. `O(capacity)`.
    ///
    /// It is the walk of a parameter change made outside the table: after
    /// replacing the parameters its algorithm reads, a caller passes each
    /// state through [`Algorithm::translate`](crate::Algorithm::translate)
    /// from the old parameters to the new. A check that overlaps the walk
    /// may be decided by either parameters on an untranslated state: a
    /// caller that needs the change exact keeps checks out meanwhile.
    ///
    /// ```
    /// use cellrate::keyed::{Keyed, Seed, WhenFull};
    /// use cellrate::window::FixedWindowQuota;
    /// use cellrate::Algorithm;
    /// let t: Keyed<FixedWindowQuota, 16> =
    ///     Keyed::new(FixedWindowQuota::new(10, 1_000), WhenFull::Deny, Seed::new(1, 2));
    /// t.check_n(&1u32, 0, 4).unwrap();
    /// t.check_n(&2u32, 0, 1).unwrap();
    /// // Forget every client's cells (as a reset of the whole table).
    /// t.rewrite_states(|_, _| FixedWindowQuota::NEW);
    /// assert_eq!(t.peek(&1u32, 0).remaining(), 10);
    /// assert_eq!(t.peek(&2u32, 0).remaining(), 10);
    /// ```
    pub fn rewrite_states(&self, rewrite: impl Fn(Option<KeyId>, u64) -> u64) {
        for slot in self.slots.slots() {
            let value = slot.load();
            let key = key_of(value);
            if key & TAG_MASK != LIVE {
                continue; // free, or a claim
            }
            let id = KeyId(key & !TAG_MASK);
            // `None`: evicted meanwhile (it was idle).
            let _ = slot.update(key, value, |state| {
                Ok::<_, core::convert::Infallible>((rewrite(Some(id), state), ()))
            });
        }
        let _ = self
            .overflow
            .update(|state| Ok::<_, core::convert::Infallible>((rewrite(None, state), ())));
    }
}
