//! One table slot: a key word and a state word, read and replaced as one
//! 128-bit unit.
//!
//! | target | slot | counters |
//! |---|---|---|
//! | x86_64 (`cmpxchg16b`, detected at run time), aarch64 (`ldxp`/`stxp` or LSE `casp`) | `portable_atomic::AtomicU128`: **lock-free** | `AtomicUsize` |
//! | every other target | `u128` in a [`critical_section::Mutex`] | `AtomicUsize` where the target has it, else the same |
//! | this crate's unit tests with `--features loom` | a loom `Mutex<u128>` (each access is one atomic step) | loom's `AtomicUsize` |
//!
//! The key word is the high half, the state word the low half. A slot's
//! whole meaning is its 128-bit value, so a compare-and-swap that succeeds
//! proves that neither the key nor the state changed since the value was
//! read: there is no window in which a check of one key can write into a slot
//! another key has taken over (no ABA between the two words).

/// One slot of a keyed table: 16 bytes holding a key (or fingerprint) and
/// the limiter's state word. Opaque; it appears only as the storage type of
/// [`KeyedTable`](super::KeyedTable).
///
/// ```
/// assert_eq!(core::mem::size_of::<cellrate::keyed::Slot>(), 16);
/// ```
pub struct Slot(Inner);

#[cfg(feature = "defmt")]
impl defmt::Format for Slot {
    fn format(&self, f: defmt::Formatter) {
        // Opaque, as its `Debug` is: reading it would race the table.
        defmt::write!(f, "Slot")
    }
}

#[cfg(all(feature = "loom", test))]
type Inner = loom::sync::Mutex<u128>;

#[cfg(all(
    not(all(feature = "loom", test)),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
type Inner = portable_atomic::AtomicU128;

#[cfg(all(
    not(all(feature = "loom", test)),
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
type Inner = critical_section::Mutex<core::cell::Cell<u128>>;

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
            Slot(new_inner(value))
        }
    }

    /// The slot's value.
    #[inline(always)]
    pub(crate) fn load(&self) -> u128 {
        #[cfg(all(feature = "loom", test))]
        {
            *self.0.lock().unwrap()
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            self.0.load(portable_atomic::Ordering::Acquire)
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            not(any(target_arch = "x86_64", target_arch = "aarch64"))
        ))]
        {
            critical_section::with(|cs| self.0.borrow(cs).get())
        }
    }

    /// Replaces `current` by `new` if the slot still holds `current`;
    /// otherwise returns what it holds.
    #[inline(always)]
    pub(crate) fn compare_exchange(&self, current: u128, new: u128) -> Result<(), u128> {
        #[cfg(all(feature = "loom", test))]
        {
            let mut guard = self.0.lock().unwrap();
            if *guard == current {
                *guard = new;
                Ok(())
            } else {
                Err(*guard)
            }
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            use portable_atomic::Ordering::{AcqRel, Acquire};
            self.0
                .compare_exchange(current, new, AcqRel, Acquire)
                .map(|_| ())
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            not(any(target_arch = "x86_64", target_arch = "aarch64"))
        ))]
        {
            critical_section::with(|cs| {
                let cell = self.0.borrow(cs);
                let seen = cell.get();
                if seen == current {
                    cell.set(new);
                    Ok(())
                } else {
                    Err(seen)
                }
            })
        }
    }
}

crate::sync::loom_const_fn! {
    fn new_inner(value: u128) -> Inner {
        #[cfg(all(feature = "loom", test))]
        {
            loom::sync::Mutex::new(value)
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            portable_atomic::AtomicU128::new(value)
        }
        #[cfg(all(
            not(all(feature = "loom", test)),
            not(any(target_arch = "x86_64", target_arch = "aarch64"))
        ))]
        {
            critical_section::Mutex::new(core::cell::Cell::new(value))
        }
    }
}

/// A statistics counter: relaxed increments, read for reports only.
pub(crate) struct Counter(CounterInner);

#[cfg(all(feature = "loom", test))]
type CounterInner = loom::sync::atomic::AtomicUsize;
#[cfg(all(not(all(feature = "loom", test)), target_has_atomic = "ptr"))]
type CounterInner = core::sync::atomic::AtomicUsize;
#[cfg(all(not(all(feature = "loom", test)), not(target_has_atomic = "ptr")))]
type CounterInner = critical_section::Mutex<core::cell::Cell<usize>>;

impl Counter {
    crate::sync::loom_const_fn! {
        pub(crate) fn new() -> Self {
            #[cfg(all(not(all(feature = "loom", test)), not(target_has_atomic = "ptr")))]
            {
                Counter(critical_section::Mutex::new(core::cell::Cell::new(0)))
            }
            #[cfg(any(all(feature = "loom", test), target_has_atomic = "ptr"))]
            {
                Counter(CounterInner::new(0))
            }
        }
    }

    /// Adds `n` and returns the previous value (wrapping).
    #[inline(always)]
    pub(crate) fn add(&self, n: usize) -> usize {
        #[cfg(any(all(feature = "loom", test), target_has_atomic = "ptr"))]
        {
            #[cfg(not(all(feature = "loom", test)))]
            use core::sync::atomic::Ordering::Relaxed;
            #[cfg(all(feature = "loom", test))]
            use loom::sync::atomic::Ordering::Relaxed;
            self.0.fetch_add(n, Relaxed)
        }
        #[cfg(all(not(all(feature = "loom", test)), not(target_has_atomic = "ptr")))]
        critical_section::with(|cs| {
            let c = self.0.borrow(cs);
            let before = c.get();
            c.set(before.wrapping_add(n));
            before
        })
    }

    pub(crate) fn get(&self) -> usize {
        #[cfg(any(all(feature = "loom", test), target_has_atomic = "ptr"))]
        {
            #[cfg(not(all(feature = "loom", test)))]
            use core::sync::atomic::Ordering::Relaxed;
            #[cfg(all(feature = "loom", test))]
            use loom::sync::atomic::Ordering::Relaxed;
            self.0.load(Relaxed)
        }
        #[cfg(all(not(all(feature = "loom", test)), not(target_has_atomic = "ptr")))]
        critical_section::with(|cs| self.0.borrow(cs).get())
    }
}
