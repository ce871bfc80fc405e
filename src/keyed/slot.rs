//! One table slot: a key word and a state word, read and replaced as one
//! 128-bit unit ([`PairWord`], which [`sync`](crate::sync) shares), and the
//! one loop that updates a key's state in its slot.
//!
//! The key word is the high half, the state word the low half:
//!
//! | key word | meaning |
//! |---|---|
//! | `0` | [`EMPTY`]: never used |
//! | `1` | [`TOMB`]: a claim that lost a race; free |
//! | `10·id` (tag `0b10`, then the 62-bit [`KeyId`](super::KeyId)) | [`LIVE`]: the slot of `id` |
//! | `11·id` | [`CLAIMING`]: `id` is being inserted; the state word holds a unique ticket |
//!
//! A compare-and-swap of the slot that succeeds proves that neither the key
//! nor the state changed since the value was read: there is no window in
//! which a check of one key can write into a slot another key has taken
//! over.

use crate::sync::PairWord;

pub(crate) const EMPTY: u64 = 0;
pub(crate) const TOMB: u64 = 1;
pub(crate) const LIVE: u64 = 1 << 63;
pub(crate) const CLAIMING: u64 = 3 << 62;
pub(crate) const TAG_MASK: u64 = 3 << 62;

/// One slot of a keyed table: 16 bytes holding a key (or fingerprint) and
/// the limiter's state word. Opaque; it appears only as the storage type of
/// [`KeyedTable`](super::KeyedTable).
///
/// ```
/// assert_eq!(core::mem::size_of::<cellrate::keyed::Slot>(), 16);
/// ```
pub struct Slot(PairWord);

#[cfg(feature = "defmt")]
impl defmt::Format for Slot {
    fn format(&self, f: defmt::Formatter) {
        // Opaque, as its `Debug` is: reading it would race the table.
        defmt::write!(f, "Slot")
    }
}

/// Packs a key word and a state word.
#[inline(always)]
pub(crate) const fn pack(key: u64, state: u64) -> u128 {
    ((key as u128) << 64) | state as u128
}

/// The key word of a slot value.
#[inline(always)]
pub(crate) const fn key_of(value: u128) -> u64 {
    (value >> 64) as u64
}

/// The state word of a slot value.
#[inline(always)]
pub(crate) const fn state_of(value: u128) -> u64 {
    value as u64
}

impl Slot {
    crate::sync::loom_const_fn! {
        /// A slot holding `value`.
        pub(crate) fn new(value: u128) -> Self {
            Slot(PairWord::new(value))
        }
    }

    /// The slot's value.
    #[inline(always)]
    pub(crate) fn load(&self) -> u128 {
        self.0.load()
    }

    /// Replaces `current` by `new` if the slot still holds `current`;
    /// otherwise returns what it holds.
    #[inline(always)]
    pub(crate) fn compare_exchange(&self, current: u128, new: u128) -> Result<(), u128> {
        self.0.compare_exchange(current, new)
    }

    /// Replaces the state `s` of the key whose key word is `key` by
    /// `step(s).0`, starting from `value` (read from this slot), by
    /// compare-and-swap: the one update entry point over a slot, as
    /// [`StateWord::update`](crate::sync::StateWord) is over a word (stored
    /// on every `Ok`, with no test that it changed); `step` returning `Err`
    /// stores nothing. `step` may run more than once (on contention).
    ///
    /// `None` when the slot no longer holds `key` (evicted while idle: the
    /// caller looks the key up again). The expected value of every
    /// compare-and-swap carries the key word, so a state is only ever
    /// written into its own key's slot.
    #[inline(always)]
    pub(crate) fn update<T, E>(
        &self,
        key: u64,
        mut value: u128,
        mut step: impl FnMut(u64) -> Result<(u64, T), E>,
    ) -> Option<Result<T, E>> {
        loop {
            let state = state_of(value);
            let (new, out) = match step(state) {
                Ok(stepped) => stepped,
                Err(e) => return Some(Err(e)),
            };
            match self.0.compare_exchange(value, pack(key, new)) {
                Ok(()) => return Some(Ok(out)),
                Err(actual) if key_of(actual) == key => value = actual,
                Err(_) => return None,
            }
        }
    }
}
