//! The loom facade: the one place that names `loom`.
//!
//! Under `all(feature = "loom", test)` (this crate's own unit tests with
//! `--features loom`) the atomics are loom's, so the models in the modules
//! beside the code explore every interleaving; everywhere else they are
//! `core`'s (and, for the 128-bit slot word, `portable-atomic`'s). Code in
//! `sync` takes its atomics from [`atomic`], never from `core` or `loom`
//! directly, and declares its `const` constructors with [`loom_const_fn!`]
//! (loom's constructors are not `const`).
//!
//! The cfg predicates that choose between an atomic word and a critical
//! section are spelled here once, as the item macros [`word_atomic!`] and
//! [`word_section!`].

/// The atomics this crate uses: loom's inside loom models, `core`'s (and
/// `portable-atomic`'s 128-bit one) otherwise. A type is exported only where
/// the target has it.
#[allow(unused_imports)]
pub(crate) mod atomic {
    #[cfg(all(feature = "loom", test))]
    pub(crate) use ::loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

    /// loom has no 128-bit atomic: in models the keyed slot word is
    /// [`AtomicU128`](super::model::AtomicU128), a loom `Mutex<u128>` with
    /// the atomic's interface.
    #[cfg(all(feature = "loom", test))]
    pub(crate) use super::model::AtomicU128;
    #[cfg(all(not(all(feature = "loom", test)), target_has_atomic = "64"))]
    pub(crate) use core::sync::atomic::AtomicU64;
    #[cfg(all(not(all(feature = "loom", test)), target_has_atomic = "ptr"))]
    pub(crate) use core::sync::atomic::AtomicUsize;
    #[cfg(not(all(feature = "loom", test)))]
    pub(crate) use core::sync::atomic::{fence, AtomicBool, Ordering};
    /// The 128-bit word of keyed slots where [`pair_atomic!`] holds (see
    /// `Cargo.toml`).
    #[cfg(all(
        not(all(feature = "loom", test)),
        any(
            target_arch = "aarch64",
            all(
                target_arch = "x86_64",
                any(
                    target_feature = "cmpxchg16b",
                    not(any(target_os = "none", target_os = "uefi"))
                )
            ),
        )
    ))]
    pub(crate) use portable_atomic::AtomicU128;

    /// A hint inside a spin loop (a yield to loom's scheduler in models).
    #[allow(dead_code)]
    #[inline]
    pub(crate) fn spin_hint() {
        #[cfg(all(feature = "loom", test))]
        ::loom::thread::yield_now();
        #[cfg(not(all(feature = "loom", test)))]
        core::hint::spin_loop();
    }
}

/// Gives the thread's time slice away (a waiting seqlock user, after its
/// spins); loom's scheduler in models.
#[cfg(any(feature = "std", all(feature = "loom", test)))]
#[inline]
pub(crate) fn yield_now() {
    #[cfg(all(feature = "loom", test))]
    ::loom::thread::yield_now();
    #[cfg(not(all(feature = "loom", test)))]
    std::thread::yield_now();
}

/// Declares a `const fn` that is a plain `fn` when loom's atomics (whose
/// constructors are not `const`) are in use.
macro_rules! loom_const_fn {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        #[cfg(not(all(feature = "loom", test)))]
        $(#[$attr])* $vis const fn $name($($arg: $ty),*) -> $ret $body
        #[cfg(all(feature = "loom", test))]
        $(#[$attr])* $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use loom_const_fn;

/// `[value; N]` for a `value` that is not `Copy` (one evaluation per
/// element): an inline `const` block, usable in a `const fn`, or a plain
/// array built at run time when loom's atomics (not `const`) are in use.
macro_rules! repeat_const {
    ($value:expr; $n:expr) => {{
        #[cfg(not(all(feature = "loom", test)))]
        let array = [const { $value }; $n];
        #[cfg(all(feature = "loom", test))]
        let array = core::array::from_fn(|_| $value);
        array
    }};
}
pub(crate) use repeat_const;

/// Items for where a 64-bit word is an atomic: targets with 64-bit
/// compare-and-swap, and loom.
macro_rules! word_atomic {
    ($($item:item)*) => {$(
        #[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
        $item
    )*};
}
pub(crate) use word_atomic;

/// Items for where a 64-bit word sits in a critical section (the
/// complement of [`word_atomic!`]).
macro_rules! word_section {
    ($($item:item)*) => {$(
        #[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
        $item
    )*};
}
pub(crate) use word_section;

/// Items for where [`Guarded`](super::Guarded) is a sequence lock rather
/// than a critical section: hosts with `std` (threads, no interrupt
/// handlers) that have 64-bit atomics, and loom.
macro_rules! seqlocked {
    ($($item:item)*) => {$(
        #[cfg(any(all(feature = "std", target_has_atomic = "64"), all(feature = "loom", test)))]
        $item
    )*};
}
pub(crate) use seqlocked;

/// Items for where [`Guarded`](super::Guarded) holds a critical section
/// (the complement of [`seqlocked!`]).
macro_rules! section_guarded {
    ($($item:item)*) => {$(
        #[cfg(not(any(all(feature = "std", target_has_atomic = "64"), all(feature = "loom", test))))]
        $item
    )*};
}
pub(crate) use section_guarded;

/// Stand-ins for atomics loom does not model.
#[cfg(all(feature = "loom", test))]
mod model {
    use super::atomic::Ordering;

    /// A 128-bit word in models: a loom `Mutex<u128>`, so that each access
    /// is one step loom can interleave.
    pub(crate) struct AtomicU128(::loom::sync::Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn new(value: u128) -> Self {
            AtomicU128(::loom::sync::Mutex::new(value))
        }

        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }

        pub(crate) fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            _: Ordering,
            _: Ordering,
        ) -> Result<u128, u128> {
            let mut guard = self.0.lock().unwrap();
            if *guard == current {
                *guard = new;
                Ok(current)
            } else {
                Err(*guard)
            }
        }
    }
}

/// Items for where a 128-bit word (a keyed slot) is an atomic:
/// `portable_atomic::AtomicU128` on aarch64 (always native), on x86_64
/// with `cmpxchg16b` enabled at compile time, and on x86_64 under an
/// operating system (detected at run time, see `Cargo.toml`); loom's
/// stand-in in models. Bare-metal and UEFI x86_64 (`target_os = "none"`,
/// `"uefi"`) without `cmpxchg16b` at compile time are left out: there, on
/// a CPU without the instruction, portable-atomic would fall back to a
/// global lock, which an interrupt handler (or a UEFI event callback)
/// could spin on forever.
macro_rules! pair_atomic {
    ($($item:item)*) => {$(
        #[cfg(any(
            target_arch = "aarch64",
            all(
                target_arch = "x86_64",
                any(target_feature = "cmpxchg16b", not(any(target_os = "none", target_os = "uefi"))),
            ),
            all(feature = "loom", test),
        ))]
        $item
    )*};
}
pub(crate) use pair_atomic;

/// Items for where a 128-bit word sits in a critical section (the
/// complement of [`pair_atomic!`]).
macro_rules! pair_section {
    ($($item:item)*) => {$(
        #[cfg(not(any(
            target_arch = "aarch64",
            all(
                target_arch = "x86_64",
                any(target_feature = "cmpxchg16b", not(any(target_os = "none", target_os = "uefi"))),
            ),
            all(feature = "loom", test),
        )))]
        $item
    )*};
}
pub(crate) use pair_section;

/// Items for where a `usize` counter is an atomic: targets with
/// pointer-sized compare-and-swap, and loom.
macro_rules! counter_atomic {
    ($($item:item)*) => {$(
        #[cfg(any(target_has_atomic = "ptr", all(feature = "loom", test)))]
        $item
    )*};
}
pub(crate) use counter_atomic;

/// Items for where a `usize` counter sits in a critical section (the
/// complement of [`counter_atomic!`]).
macro_rules! counter_section {
    ($($item:item)*) => {$(
        #[cfg(not(any(target_has_atomic = "ptr", all(feature = "loom", test))))]
        $item
    )*};
}
pub(crate) use counter_section;
