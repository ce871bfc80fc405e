//! How a limiter's state is shared: the place that chooses native atomics,
//! critical sections or loom for one 64-bit word and for a quota under
//! `set_quota`. (The keyed tables' 16-byte slots make the same choice for
//! their 128-bit word in `keyed/slot.rs`.)
//!
//! | target | state word | quota under `set_quota` |
//! |---|---|---|
//! | has 64-bit CAS (`target_has_atomic = "64"`: x86_64, aarch64, riscv64…) | one `AtomicU64`, compare-and-swap loop: **lock-free** | two seqlocked slots, readers never wait for a writer |
//! | no 64-bit CAS (thumbv6m, thumbv7m/7em, thumbv8m, riscv32) | `u64` in a [`critical_section::Mutex`] | the same mutex |
//! | this crate's unit tests with `--features loom` | loom's `AtomicU64` | loom's atomics |
//!
//! State larger than a word (the sliding log's ring) is a `Guarded`: a
//! sequence lock where the `std` feature is on and the target has 64-bit
//! atomics (reads never write; a write is one compare-and-swap, a few
//! relaxed stores and one release store), and a critical section everywhere
//! else (bare metal, where a handler could preempt a writer).
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

mod slot;
pub(crate) use slot::{repeat, Counter, PairWord};

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
mod atomic {
    #[cfg(all(feature = "loom", test))]
    pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

    #[cfg(not(all(feature = "loom", test)))]
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    // Only the sequence lock ([`super::Guarded`] on hosts) fences.
    #[cfg(all(feature = "std", not(all(feature = "loom", test))))]
    pub(crate) use core::sync::atomic::fence;

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
///
/// Only the three words `set_quota` may change are kept here, each in its
/// own `Cell`: the critical section reads or writes them as three 64-bit
/// loads or stores, never as a block copy (a whole `Quota` copied inside
/// the section became a `memcpy` call at `opt-level = "z"`), and the
/// quota is rebuilt from them after interrupts are unmasked.
#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
pub(crate) struct QuotaCell {
    fixed: Quota,
    current: critical_section::Mutex<[core::cell::Cell<u64>; 3]>,
}

#[cfg(not(any(target_has_atomic = "64", all(feature = "loom", test))))]
impl QuotaCell {
    pub(crate) const fn new(quota: Quota) -> Self {
        let words = quota.variable_words();
        QuotaCell {
            fixed: quota,
            current: critical_section::Mutex::new([
                core::cell::Cell::new(words[0]),
                core::cell::Cell::new(words[1]),
                core::cell::Cell::new(words[2]),
            ]),
        }
    }

    #[inline(always)]
    pub(crate) fn fixed(&self) -> &Quota {
        &self.fixed
    }

    #[inline]
    pub(crate) fn load(&self) -> Quota {
        let words = critical_section::with(|cs| {
            let words = self.current.borrow(cs);
            [words[0].get(), words[1].get(), words[2].get()]
        });
        Quota::from_words(words, &self.fixed)
    }

    pub(crate) fn try_store(&self, quota: &Quota) -> bool {
        let new = quota.variable_words();
        critical_section::with(|cs| {
            let words = self.current.borrow(cs);
            words[0].set(new[0]);
            words[1].set(new[1]);
            words[2].set(new[2]);
        });
        true
    }
}

/// Where [`Guarded`] is a sequence lock rather than a critical section:
/// hosts with `std` (threads, no interrupt handlers) that have 64-bit
/// atomics, and loom.
macro_rules! seqlocked {
    ($($item:item)*) => {$(
        #[cfg(any(all(feature = "std", target_has_atomic = "64"), all(feature = "loom", test)))]
        $item
    )*};
}

/// Where [`Guarded`] holds a critical section (the complement of
/// [`seqlocked!`]).
macro_rules! section_guarded {
    ($($item:item)*) => {$(
        #[cfg(not(any(all(feature = "std", target_has_atomic = "64"), all(feature = "loom", test))))]
        $item
    )*};
}

seqlocked! {
    /// State larger than one word (the sliding log's ring) that one writer
    /// at a time changes and readers see whole.
    ///
    /// This variant (hosts with `std`, and loom) is a sequence lock. `seq`
    /// is even at rest and odd while a writer works. A reader loads `seq`
    /// (`Acquire`, waiting out an odd value), reads the value's
    /// [`GuardedU64`]s (relaxed), then, after an `Acquire` fence, loads
    /// `seq` again: unchanged means no write overlapped, so what it read is
    /// one state. A writer takes `seq` from the even value it read to odd by
    /// one compare-and-swap, so a read followed by a write on success is a
    /// single step ([`update`](Self::update)): the read is still current
    /// exactly when the swap succeeds (every writer changes `seq` first). A
    /// `Release` fence after the swap keeps its stores behind it (a reader
    /// that sees any of them sees the odd `seq`), and a `Release` store of
    /// the next even value publishes them. So a decision that writes nothing
    /// (a denial) is loads only, and one that writes costs one
    /// compare-and-swap, as on a single atomic word. (The fences and the
    /// relaxed data accesses are the form H.-J. Boehm shows correct in "Can
    /// seqlocks get along with programming language memory models?", MSPC
    /// 2012.)
    ///
    /// A waiting thread (a writer came between its reads, or holds `seq`
    /// odd) spins a little, then yields. Without `std` (bare metal, where an
    /// interrupt handler could preempt a writer and spin forever) this is a
    /// critical section.
    pub(crate) struct Guarded<T> {
        seq: atomic::AtomicU64,
        value: T,
    }

    /// Publishes a write when dropped (the next even `seq`), also if the
    /// writer unwinds.
    struct Publish<'a> {
        seq: &'a atomic::AtomicU64,
        next: u64,
    }

    /// A `u64` inside a [`Guarded`]: a relaxed atomic (the sequence orders
    /// it), a plain move on x86_64 and aarch64.
    pub(crate) struct GuardedU64(atomic::AtomicU64);
}

section_guarded! {
    /// State larger than one word (the sliding log's ring) that one writer
    /// at a time changes and readers see whole: this variant runs every
    /// access inside one critical section.
    pub(crate) struct Guarded<T>(critical_section::Mutex<T>);

    /// A `u64` inside a [`Guarded`].
    pub(crate) struct GuardedU64(core::cell::Cell<u64>);
}

/// Spins before a waiting [`Guarded`] user yields its thread.
#[cfg(any(
    all(feature = "std", target_has_atomic = "64"),
    all(feature = "loom", test)
))]
const SPINS: u32 = 64;

seqlocked! {
    impl<T> Guarded<T> {
        loom_const_fn! {
            pub(crate) fn new(value: T) -> Self {
                Guarded {
                    seq: atomic::AtomicU64::new(0),
                    value,
                }
            }
        }

        /// Runs `f` on a consistent view of the value (again if a write
        /// overlapped it: `f` must only read, and must tolerate a torn view
        /// whose result is thrown away).
        #[inline(always)]
        pub(crate) fn read<R>(&self, mut f: impl FnMut(&T) -> R) -> R {
            loop {
                let seq = self.begin();
                let out = f(&self.value);
                if self.unchanged(seq) {
                    return out;
                }
            }
        }

        /// Runs `decide` on a view of the value; on `Err(r)` returns `r`
        /// once the view is known consistent, on `Ok(plan)` runs
        /// `commit(value, plan)` as the single writer with the view still
        /// current. Repeats `decide` (which must only read, and tolerate a
        /// torn view) until one of the two holds.
        #[inline(always)]
        pub(crate) fn update<P, R>(
            &self,
            mut decide: impl FnMut(&T) -> Result<P, R>,
            commit: impl FnOnce(&T, P) -> R,
        ) -> R {
            loop {
                let seq = self.begin();
                match decide(&self.value) {
                    Err(out) => {
                        if self.unchanged(seq) {
                            return out;
                        }
                    }
                    Ok(plan) => {
                        if let Some(_publish) = self.try_write(seq) {
                            return commit(&self.value, plan);
                        }
                    }
                }
            }
        }

        /// Runs `f` as the single writer.
        pub(crate) fn write<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            loop {
                let seq = self.begin();
                if let Some(_publish) = self.try_write(seq) {
                    return f(&self.value);
                }
            }
        }

        /// The value, through exclusive access.
        pub(crate) fn get_mut(&mut self) -> &mut T {
            &mut self.value
        }

        /// An even `seq` (no write in progress), loaded `Acquire`.
        #[inline(always)]
        fn begin(&self) -> u64 {
            let seq = self.seq.load(atomic::Ordering::Acquire);
            if seq & 1 == 0 {
                seq
            } else {
                self.wait()
            }
        }

        #[cold]
        #[inline(never)]
        fn wait(&self) -> u64 {
            let mut spins = 0;
            loop {
                let seq = self.seq.load(atomic::Ordering::Acquire);
                if seq & 1 == 0 {
                    return seq;
                }
                if spins < SPINS {
                    spins += 1;
                    atomic::spin_hint();
                } else {
                    #[cfg(not(all(feature = "loom", test)))]
                    std::thread::yield_now();
                    #[cfg(all(feature = "loom", test))]
                    loom::thread::yield_now();
                }
            }
        }

        /// Whether no write began since [`begin`](Self::begin) returned
        /// `seq` (the reads since were of one state).
        #[inline(always)]
        fn unchanged(&self, seq: u64) -> bool {
            atomic::fence(atomic::Ordering::Acquire);
            self.seq.load(atomic::Ordering::Relaxed) == seq
        }

        /// Becomes the writer if no write began since `begin` returned
        /// `seq`; the returned guard publishes.
        #[inline(always)]
        fn try_write(&self, seq: u64) -> Option<Publish<'_>> {
            use atomic::Ordering::{Acquire, Relaxed, Release};
            let next = seq.wrapping_add(1);
            if self.seq.compare_exchange(seq, next, Acquire, Relaxed).is_err() {
                return None;
            }
            // The writer's stores stay after the odd `seq` (see the type's
            // docs).
            atomic::fence(Release);
            Some(Publish {
                seq: &self.seq,
                next: next.wrapping_add(1),
            })
        }
    }

    impl Drop for Publish<'_> {
        #[inline(always)]
        fn drop(&mut self) {
            self.seq.store(self.next, atomic::Ordering::Release);
        }
    }

    impl GuardedU64 {
        loom_const_fn! {
            pub(crate) fn new(value: u64) -> Self {
                GuardedU64(atomic::AtomicU64::new(value))
            }
        }

        #[inline(always)]
        pub(crate) fn get(&self) -> u64 {
            self.0.load(atomic::Ordering::Relaxed)
        }

        #[inline(always)]
        pub(crate) fn set(&self, value: u64) {
            self.0.store(value, atomic::Ordering::Relaxed)
        }
    }
}

section_guarded! {
    impl<T> Guarded<T> {
        pub(crate) const fn new(value: T) -> Self {
            Guarded(critical_section::Mutex::new(value))
        }

        /// Runs `f` on the value inside one critical section.
        #[inline(always)]
        pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            critical_section::with(|cs| f(self.0.borrow(cs)))
        }

        /// `decide`, then on `Ok(plan)` `commit`, inside one critical
        /// section.
        #[inline(always)]
        pub(crate) fn update<P, R>(
            &self,
            decide: impl FnOnce(&T) -> Result<P, R>,
            commit: impl FnOnce(&T, P) -> R,
        ) -> R {
            critical_section::with(|cs| {
                let value = self.0.borrow(cs);
                match decide(value) {
                    Ok(plan) => commit(value, plan),
                    Err(out) => out,
                }
            })
        }

        /// Runs `f` on the value inside one critical section.
        pub(crate) fn write<R>(&self, f: impl FnOnce(&T) -> R) -> R {
            critical_section::with(|cs| f(self.0.borrow(cs)))
        }

        /// The value, through exclusive access.
        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0.get_mut()
        }
    }

    impl GuardedU64 {
        pub(crate) const fn new(value: u64) -> Self {
            GuardedU64(core::cell::Cell::new(value))
        }

        #[inline(always)]
        pub(crate) fn get(&self) -> u64 {
            self.0.get()
        }

        #[inline(always)]
        pub(crate) fn set(&self, value: u64) {
            self.0.set(value)
        }
    }
}

/// `N` zeroed [`GuardedU64`]s.
#[cfg(not(all(feature = "loom", test)))]
pub(crate) const fn guarded_zeros<const N: usize>() -> [GuardedU64; N] {
    [const { GuardedU64::new(0) }; N]
}

/// `N` zeroed [`GuardedU64`]s.
#[cfg(all(feature = "loom", test))]
pub(crate) fn guarded_zeros<const N: usize>() -> [GuardedU64; N] {
    core::array::from_fn(|_| GuardedU64::new(0))
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::{Guarded, GuardedU64};
    use loom::sync::Arc;
    use loom::thread;

    fn pair() -> Guarded<[GuardedU64; 2]> {
        Guarded::new([GuardedU64::new(0), GuardedU64::new(0)])
    }

    /// A reader racing a writer that adds one to both words sees them
    /// equal: never half a write.
    #[test]
    fn reads_are_never_torn() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let shared = Arc::new(pair());
            let writer = {
                let g = Arc::clone(&shared);
                thread::spawn(move || {
                    g.write(|w| {
                        w[0].set(w[0].get() + 1);
                        w[1].set(w[1].get() + 1);
                    })
                })
            };
            let reader = {
                let g = Arc::clone(&shared);
                thread::spawn(move || g.read(|w| (w[0].get(), w[1].get())))
            };
            let (a, b) = reader.join().unwrap();
            assert_eq!(a, b);
            writer.join().unwrap();
            assert_eq!(shared.read(|w| (w[0].get(), w[1].get())), (1, 1));
        });
    }

    /// `update` decides on a view and commits only if no write came
    /// between: two threads each move the words from (0, 0) to their own
    /// value only if they still read (0, 0); exactly one succeeds.
    #[test]
    fn update_commits_only_on_a_current_view() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let shared = Arc::new(pair());
            let threads: [_; 2] = core::array::from_fn(|i| {
                let g = Arc::clone(&shared);
                thread::spawn(move || {
                    g.update(
                        |w| match (w[0].get(), w[1].get()) {
                            (0, 0) => Ok(()),
                            _ => Err(false),
                        },
                        |w, ()| {
                            w[0].set(i as u64 + 1);
                            w[1].set(i as u64 + 1);
                            true
                        },
                    )
                })
            });
            let won: usize = threads
                .into_iter()
                .map(|t| t.join().unwrap() as usize)
                .sum();
            assert_eq!(won, 1);
            let (a, b) = shared.read(|w| (w[0].get(), w[1].get()));
            assert!(a == b && a != 0);
        });
    }
}
