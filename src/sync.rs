//! How a limiter's state is shared: the one place that chooses native atomics,
//! critical sections or loom.
//!
//! | target | state word | quota under `set_quota` |
//! |---|---|---|
//! | has 64-bit CAS (`target_has_atomic = "64"`: x86_64, aarch64, riscv64…) | one `AtomicU64`, compare-and-swap loop: **lock-free** | two seqlocked slots, readers never wait for a writer |
//! | no 64-bit CAS (thumbv6m, thumbv7m/7em, thumbv8m, riscv32) | `u64` in a [`critical_section::Mutex`] | the same mutex |
//! | this crate's unit tests with `--features loom` | loom's `AtomicU64` | loom's atomics |
//!
//! # Why not `portable-atomic`'s `AtomicU64` on Cortex-M3/M4/M7?
//!
//! On thumbv7m/thumbv7em `portable_atomic::AtomicU64` falls back to a global
//! spin lock, also with its `critical-section` feature. A thread holding it
//! that is interrupted by a handler touching the same atomic spins forever.
//! A `critical_section` instead masks interrupts for the few instructions of
//! the update, so an interrupt handler and thread mode can share a limiter
//! with neither deadlock nor lost update. The critical section covers only a
//! load, the GCRA arithmetic (adds, compares, one multiply; no division, no
//! loop) and a store.
//!
//! The binary, never this library, chooses the critical-section
//! implementation (`cortex-m`'s `critical-section-single-core`, a HAL's
//! multi-core one, `riscv`'s `critical-section-single-hart`, or `std`'s on a
//! host). This crate enables no `unsafe-assume-single-core` anywhere.
//!
//! # Invariants
//!
//! * `StateWord::update` applies `f` to the current value and stores its
//!   result atomically with respect to every other access of the word: on the
//!   atomic path by compare-and-swap (retrying `f` on a fresh value), on the
//!   critical-section path by holding the section. When `f` declines (`Err`)
//!   nothing is stored, and when it returns the value it saw the store is
//!   skipped.
//! * `QuotaCell::load` returns a quota that some `store` wrote whole (or the
//!   initial one), never a mix of two. It never waits for a writer: the
//!   writer saves the current quota in a second seqlocked copy before it
//!   rewrites the first, and a reader that catches the first mid-write reads
//!   the second. Two writers at once are refused (`QuotaCell::try_store`
//!   returns `false`) rather than waited for, so an interrupt handler can never
//!   spin on a preempted writer.

use crate::quota::Quota;

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

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
mod atomic {
    #[cfg(all(feature = "loom", test))]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    #[cfg(not(all(feature = "loom", test)))]
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    #[inline]
    pub(crate) fn spin_hint() {
        #[cfg(all(feature = "loom", test))]
        loom::thread::yield_now();
        #[cfg(not(all(feature = "loom", test)))]
        core::hint::spin_loop();
    }
}

/// One `u64` of limiter state, shared by `&self`.
#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
pub(crate) struct StateWord(atomic::AtomicU64);

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
impl StateWord {
    loom_const_fn! {
        pub(crate) fn new(value: u64) -> Self {
            StateWord(atomic::AtomicU64::new(value))
        }
    }

    #[inline(always)]
    pub(crate) fn load(&self) -> u64 {
        self.0.load(atomic::Ordering::Acquire)
    }

    #[inline(always)]
    pub(crate) fn store(&self, value: u64) {
        self.0.store(value, atomic::Ordering::Release)
    }

    /// Replaces the value `v` by `f(v).0` atomically, or leaves it when `f`
    /// returns `Err`. `f` may run more than once (on contention).
    #[inline(always)]
    pub(crate) fn update<T, E>(
        &self,
        mut f: impl FnMut(u64) -> Result<(u64, T), E>,
    ) -> Result<T, E> {
        use atomic::Ordering::{AcqRel, Acquire};
        let mut current = self.0.load(Acquire);
        loop {
            let (new, out) = f(current)?;
            if new == current {
                return Ok(out);
            }
            match self.0.compare_exchange_weak(current, new, AcqRel, Acquire) {
                Ok(_) => return Ok(out),
                Err(actual) => current = actual,
            }
        }
    }
}

/// One `u64` of limiter state, shared by `&self` through a critical section.
#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
pub(crate) struct StateWord(critical_section::Mutex<core::cell::Cell<u64>>);

#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
impl StateWord {
    pub(crate) const fn new(value: u64) -> Self {
        StateWord(critical_section::Mutex::new(core::cell::Cell::new(value)))
    }

    #[inline]
    pub(crate) fn load(&self) -> u64 {
        critical_section::with(|cs| self.0.borrow(cs).get())
    }

    #[inline]
    pub(crate) fn store(&self, value: u64) {
        critical_section::with(|cs| self.0.borrow(cs).set(value))
    }

    /// Replaces the value `v` by `f(v).0` inside one critical section, or
    /// leaves it when `f` returns `Err`.
    #[inline]
    pub(crate) fn update<T, E>(
        &self,
        mut f: impl FnMut(u64) -> Result<(u64, T), E>,
    ) -> Result<T, E> {
        critical_section::with(|cs| {
            let cell = self.0.borrow(cs);
            let current = cell.get();
            let (new, out) = f(current)?;
            if new != current {
                cell.set(new);
            }
            Ok(out)
        })
    }
}

/// A [`Quota`] that can be replaced while checks read it.
///
/// Two seqlocked copies: `current`, which readers try first, and `previous`,
/// which holds what `current` held before the write in progress. The single
/// writer first copies `current` into `previous`, then rewrites `current`; a
/// reader that finds `current` mid-write reads `previous` instead, which is
/// then stable. So a reader never waits for a preempted writer, and on the
/// fast path its loads have fixed addresses and issue together.
#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
pub(crate) struct QuotaCell {
    /// The quota given at construction; its scale, horizon and frequency
    /// never change.
    fixed: Quota,
    current: Slot,
    previous: Slot,
    /// Held by the one writer allowed at a time.
    writing: atomic::AtomicBool,
}

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
struct Slot {
    /// Odd while being written.
    seq: atomic::AtomicU64,
    words: [atomic::AtomicU64; 3],
}

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
impl Slot {
    loom_const_fn! {
        fn new(words: [u64; 3]) -> Self {
            Slot {
                seq: atomic::AtomicU64::new(0),
                words: [
                    atomic::AtomicU64::new(words[0]),
                    atomic::AtomicU64::new(words[1]),
                    atomic::AtomicU64::new(words[2]),
                ],
            }
        }
    }

    /// The words, if no write overlapped the read.
    #[inline(always)]
    fn read(&self) -> Option<[u64; 3]> {
        use atomic::Ordering::{Acquire, Relaxed};
        let seq = self.seq.load(Acquire);
        // Acquire loads keep the re-read of `seq` after them.
        let words = [
            self.words[0].load(Acquire),
            self.words[1].load(Acquire),
            self.words[2].load(Acquire),
        ];
        if seq & 1 == 0 && self.seq.load(Relaxed) == seq {
            Some(words)
        } else {
            None
        }
    }

    /// Only ever called by the single writer.
    fn write(&self, words: [u64; 3]) {
        use atomic::Ordering::{Relaxed, Release};
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq.wrapping_add(1), Relaxed);
        // Release stores: a reader that sees any new word also sees the odd seq.
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(word, Release);
        }
        self.seq.store(seq.wrapping_add(2), Release);
    }
}

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
impl QuotaCell {
    loom_const_fn! {
        pub(crate) fn new(quota: Quota) -> Self {
            let words = quota.variable_words();
            QuotaCell {
                fixed: quota,
                current: Slot::new(words),
                previous: Slot::new(words),
                writing: atomic::AtomicBool::new(false),
            }
        }
    }

    /// The scale, horizon and frequency every stored quota shares.
    #[inline(always)]
    pub(crate) fn fixed(&self) -> &Quota {
        &self.fixed
    }

    /// The current quota, read whole.
    #[inline(always)]
    pub(crate) fn load(&self) -> Quota {
        loop {
            if let Some(words) = self.current.read() {
                return Quota::from_words(words, &self.fixed);
            }
            // A write is rewriting `current`; `previous` holds what it held.
            if let Some(words) = self.previous.read() {
                return Quota::from_words(words, &self.fixed);
            }
            // Reachable only while writers run concurrently with this read
            // (never when the writer is the code this reader preempted).
            atomic::spin_hint();
        }
    }

    /// Publishes `quota` (already expressed at the fixed scale). Returns
    /// `false`, changing nothing, if another store is in progress.
    pub(crate) fn try_store(&self, quota: &Quota) -> bool {
        use atomic::Ordering::{Acquire, Release};
        if self.writing.swap(true, Acquire) {
            return false;
        }
        // Only this writer changes `current`, so this read cannot fail.
        let mut old = self.current.read();
        while old.is_none() {
            atomic::spin_hint();
            old = self.current.read();
        }
        if let Some(old) = old {
            self.previous.write(old);
        }
        self.current.write(quota.variable_words());
        self.writing.store(false, Release);
        true
    }
}

/// A [`Quota`] that can be replaced while checks read it, behind a critical
/// section.
#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
pub(crate) struct QuotaCell {
    fixed: Quota,
    current: critical_section::Mutex<core::cell::Cell<Quota>>,
}

#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
impl QuotaCell {
    pub(crate) const fn new(quota: Quota) -> Self {
        QuotaCell {
            fixed: quota,
            current: critical_section::Mutex::new(core::cell::Cell::new(quota)),
        }
    }

    #[inline(always)]
    pub(crate) fn fixed(&self) -> &Quota {
        &self.fixed
    }

    #[inline]
    pub(crate) fn load(&self) -> Quota {
        critical_section::with(|cs| self.current.borrow(cs).get())
    }

    pub(crate) fn try_store(&self, quota: &Quota) -> bool {
        critical_section::with(|cs| self.current.borrow(cs).set(*quota));
        true
    }
}
