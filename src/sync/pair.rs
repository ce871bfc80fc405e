//! Two words shared as one: the 128-bit word of a keyed table's slot, and
//! the statistics counters beside it.
//!
//! | target | [`PairWord`] | [`Counter`] |
//! |---|---|---|
//! | aarch64 (`ldxp`/`stxp`, or LSE `casp`) | `portable_atomic::AtomicU128`: **lock-free** | `AtomicUsize` |
//! | x86_64 with `cmpxchg16b` at compile time (`-C target-cpu=x86-64-v2` or later) | `portable_atomic::AtomicU128`, inline `lock cmpxchg16b` (and `vmovdqa` loads where AVX is enabled): **lock-free** | `AtomicUsize` |
//! | x86_64 under an OS, default target (no `cmpxchg16b` at compile time) | `portable_atomic::AtomicU128`, which detects `cmpxchg16b` (and AVX) once at run time and calls each operation through a function pointer: **lock-free** on every CPU that has `cmpxchg16b` (every x86_64 CPU since about 2006); on one without it, portable-atomic's global-lock fallback | `AtomicUsize` |
//! | every other target, and bare-metal or UEFI x86_64 (`target_os = "none"`, `"uefi"`) without `cmpxchg16b` at compile time | `u128` in a [`critical_section::Mutex`] | `AtomicUsize` where the target has it, else the same |
//! | this crate's unit tests with `--features loom` | a loom `Mutex<u128>` (each access is one step) | loom's `AtomicUsize` |
//!
//! # Invariants
//!
//! * A `PairWord`'s whole meaning is its 128-bit value: a compare-and-swap
//!   that succeeds proves that neither half changed since the value was
//!   read (no ABA between the two halves).
//! * `load` is acquire, a successful `compare_exchange` acquire-release; on
//!   the critical-section path both are one section.
//! * A `Counter` only counts (relaxed, wrapping); nothing is ordered by it.

use super::loom::{counter_atomic, counter_section, pair_atomic, pair_section};

pair_atomic! {
    /// A 128-bit value shared by `&self`: loaded, and replaced by
    /// compare-and-swap, as one unit.
    pub(crate) struct PairWord(pub(super) super::atomic::AtomicU128);

    impl PairWord {
        super::loom_const_fn! {
            /// A pair holding `value`.
            pub(crate) fn new(value: u128) -> Self {
                PairWord(super::atomic::AtomicU128::new(value))
            }
        }

        /// The value.
        #[inline(always)]
        pub(crate) fn load(&self) -> u128 {
            self.0.load(super::atomic::Ordering::Acquire)
        }

        /// Replaces `current` by `new` if the pair still holds `current`;
        /// otherwise returns what it holds.
        #[inline(always)]
        pub(crate) fn compare_exchange(&self, current: u128, new: u128) -> Result<(), u128> {
            use super::atomic::Ordering::{AcqRel, Acquire};
            self.0
                .compare_exchange(current, new, AcqRel, Acquire)
                .map(|_| ())
        }
    }
}

pair_section! {
    /// A 128-bit value shared by `&self` through a critical section.
    pub(crate) struct PairWord(critical_section::Mutex<core::cell::Cell<u128>>);

    impl PairWord {
        /// A pair holding `value`.
        pub(crate) const fn new(value: u128) -> Self {
            PairWord(critical_section::Mutex::new(core::cell::Cell::new(value)))
        }

        /// The value.
        #[inline(always)]
        pub(crate) fn load(&self) -> u128 {
            critical_section::with(|cs| self.0.borrow(cs).get())
        }

        /// Replaces `current` by `new` if the pair still holds `current`;
        /// otherwise returns what it holds.
        #[inline(always)]
        pub(crate) fn compare_exchange(&self, current: u128, new: u128) -> Result<(), u128> {
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

counter_atomic! {
    /// A statistics counter: relaxed increments, read for reports only.
    pub(crate) struct Counter(super::atomic::AtomicUsize);

    impl Counter {
        super::loom_const_fn! {
            pub(crate) fn new() -> Self {
                Counter(super::atomic::AtomicUsize::new(0))
            }
        }

        /// Adds `n` and returns the previous value (wrapping).
        #[inline(always)]
        pub(crate) fn add(&self, n: usize) -> usize {
            self.0.fetch_add(n, super::atomic::Ordering::Relaxed)
        }

        /// The count.
        pub(crate) fn get(&self) -> usize {
            self.0.load(super::atomic::Ordering::Relaxed)
        }
    }
}

counter_section! {
    /// A statistics counter in a critical section (targets without
    /// pointer-sized atomics), read for reports only.
    pub(crate) struct Counter(critical_section::Mutex<core::cell::Cell<usize>>);

    impl Counter {
        pub(crate) const fn new() -> Self {
            Counter(critical_section::Mutex::new(core::cell::Cell::new(0)))
        }

        /// Adds `n` and returns the previous value (wrapping).
        #[inline(always)]
        pub(crate) fn add(&self, n: usize) -> usize {
            critical_section::with(|cs| {
                let c = self.0.borrow(cs);
                let before = c.get();
                c.set(before.wrapping_add(n));
                before
            })
        }

        /// The count.
        pub(crate) fn get(&self) -> usize {
            critical_section::with(|cs| self.0.borrow(cs).get())
        }
    }
}
