//! Two words shared as one: the 128-bit unit of a keyed table's slot, and
//! the statistics counters beside it.
//!
//! | target | [`PairWord`] | [`Counter`] |
//! |---|---|---|
//! | x86_64 (`cmpxchg16b`, detected at run time), aarch64 (`ldxp`/`stxp` or LSE `casp`) | `portable_atomic::AtomicU128`: **lock-free** | `AtomicUsize` |
//! | every other target | `u128` in a [`critical_section::Mutex`] | `AtomicUsize` where the target has it, else the same |
//! | this crate's unit tests with `--features loom` | a loom `Mutex<u128>` (each access is one atomic step) | loom's `AtomicUsize` |
//!
//! A `PairWord`'s whole meaning is its 128-bit value, so a
//! compare-and-swap that succeeds proves that neither half changed since
//! the value was read: no ABA between the two halves.

/// A 128-bit value shared by `&self`: loaded, and replaced by
/// compare-and-swap, as one unit.
pub(crate) struct PairWord(PairInner);

#[cfg(all(feature = "loom", test))]
type PairInner = loom::sync::Mutex<u128>;

#[cfg(all(
    not(all(feature = "loom", test)),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
type PairInner = portable_atomic::AtomicU128;

#[cfg(all(
    not(all(feature = "loom", test)),
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
type PairInner = critical_section::Mutex<core::cell::Cell<u128>>;

/// `[value; n]` for a `value` whose constructor is `const` (loom's are not:
/// there it is built `n` times at run time).
#[cfg(not(all(feature = "loom", test)))]
macro_rules! repeat {
    ($value:expr; $n:expr) => {
        [const { $value }; $n]
    };
}
#[cfg(all(feature = "loom", test))]
macro_rules! repeat {
    ($value:expr; $n:expr) => {
        core::array::from_fn(|_| $value)
    };
}
pub(crate) use repeat;

impl PairWord {
    super::loom_const_fn! {
        /// A pair holding `value`.
        pub(crate) fn new(value: u128) -> Self {
            #[cfg(all(feature = "loom", test))]
            {
                PairWord(loom::sync::Mutex::new(value))
            }
            #[cfg(all(
                not(all(feature = "loom", test)),
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            {
                PairWord(portable_atomic::AtomicU128::new(value))
            }
            #[cfg(all(
                not(all(feature = "loom", test)),
                not(any(target_arch = "x86_64", target_arch = "aarch64"))
            ))]
            {
                PairWord(critical_section::Mutex::new(core::cell::Cell::new(value)))
            }
        }
    }

    /// The value (acquire).
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

    /// Replaces `current` by `new` if the pair still holds `current`
    /// (acquire-release); otherwise returns what it holds.
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

/// A statistics counter: relaxed increments, read for reports only.
pub(crate) struct Counter(CounterInner);

#[cfg(all(feature = "loom", test))]
type CounterInner = loom::sync::atomic::AtomicUsize;
#[cfg(all(not(all(feature = "loom", test)), target_has_atomic = "ptr"))]
type CounterInner = core::sync::atomic::AtomicUsize;
#[cfg(all(not(all(feature = "loom", test)), not(target_has_atomic = "ptr")))]
type CounterInner = critical_section::Mutex<core::cell::Cell<usize>>;

impl Counter {
    super::loom_const_fn! {
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

    /// The count.
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
