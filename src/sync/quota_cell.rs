//! [`QuotaCell`]: a [`Quota`] that `set_quota` replaces while checks read it.
//!
//! On targets with 64-bit atomics, two seqlocked copies (readers never wait
//! for a writer, see the type); elsewhere the three variable words of the
//! quota in one critical section.
//!
//! Invariant: [`QuotaCell::load`] returns a quota that some `store` wrote
//! whole (or the initial one), never a mix of two. It never waits for a
//! writer: the writer saves the current quota in a second seqlocked copy
//! before it rewrites the first, and a reader that catches the first
//! mid-write reads the second. Two writers at once are refused
//! ([`QuotaCell::try_store`] returns `false`) rather than waited for, so an
//! interrupt handler can never spin on a preempted writer. A writer may hold
//! the cell across more work than the store ([`QuotaCell::try_hold`]: a
//! keyed table's walk over its slots); on the critical-section path that
//! work runs with interrupts enabled.

#[allow(unused_imports)]
use super::atomic;
#[allow(unused_imports)]
use super::loom::loom_const_fn;
#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
use super::seq::Seq;
use crate::quota::Quota;

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
    /// The quota given at construction; its scale and frequency
    /// never change.
    fixed: Quota,
    current: QuotaCopy,
    previous: QuotaCopy,
    /// Held by the one writer allowed at a time.
    writing: atomic::AtomicBool,
}

/// One copy: three words behind the crate's one sequence lock ([`Seq`]).
#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
struct QuotaCopy {
    seq: Seq,
    words: [atomic::AtomicU64; 3],
}

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
impl QuotaCopy {
    loom_const_fn! {
        fn new(words: [u64; 3]) -> Self {
            QuotaCopy {
                seq: Seq::new(),
                words: [
                    atomic::AtomicU64::new(words[0]),
                    atomic::AtomicU64::new(words[1]),
                    atomic::AtomicU64::new(words[2]),
                ],
            }
        }
    }

    /// The words, if no write overlapped the read (never waits).
    #[inline(always)]
    fn read(&self) -> Option<[u64; 3]> {
        let seq = self.seq.start()?;
        let words = self
            .words
            .each_ref()
            .map(|w| w.load(atomic::Ordering::Relaxed));
        self.seq.unchanged(seq).then_some(words)
    }

    /// Only ever called by the single writer (so `seq` is even and the
    /// swap succeeds at once).
    fn write(&self, words: [u64; 3]) {
        let _publish = loop {
            if let Some(publish) = self.seq.start().and_then(|seq| self.seq.try_write(seq)) {
                break publish;
            }
            atomic::spin_hint();
        };
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(word, atomic::Ordering::Relaxed);
        }
    }
}

#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
impl QuotaCell {
    loom_const_fn! {
        pub(crate) fn new(quota: Quota) -> Self {
            let words = quota.variable_words();
            QuotaCell {
                fixed: quota,
                current: QuotaCopy::new(words),
                previous: QuotaCopy::new(words),
                writing: atomic::AtomicBool::new(false),
            }
        }
    }

    /// The scale and frequency every stored quota shares.
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
        self.try_replace(quota, |_| {})
    }

    /// Publishes `quota` (already expressed at the fixed scale), then runs
    /// `then` on the quota it replaced, before another store may start.
    /// Returns `false`, changing nothing, if another store is in progress.
    pub(crate) fn try_replace(&self, quota: &Quota, then: impl FnOnce(&Quota)) -> bool {
        self.try_hold(|| then(&self.store_held(quota))).is_some()
    }

    /// Runs `f` as this cell's one writer (no other store starts until it
    /// returns); `None`, running nothing, if another writer holds the cell.
    pub(crate) fn try_hold<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        use atomic::Ordering::{Acquire, Release};
        if self.writing.swap(true, Acquire) {
            return None;
        }
        let out = f();
        self.writing.store(false, Release);
        Some(out)
    }

    /// Publishes `quota` (already expressed at the fixed scale) and returns
    /// the quota it replaced. Only inside [`try_hold`](Self::try_hold).
    pub(crate) fn store_held(&self, quota: &Quota) -> Quota {
        // Only this writer changes `current`, so this read cannot fail.
        let old = loop {
            if let Some(old) = self.current.read() {
                break old;
            }
            atomic::spin_hint();
        };
        self.previous.write(old);
        self.current.write(quota.variable_words());
        Quota::from_words(old, &self.fixed)
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
    /// Held by the one writer of [`try_hold`](Self::try_hold).
    writing: critical_section::Mutex<core::cell::Cell<bool>>,
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
            writing: critical_section::Mutex::new(core::cell::Cell::new(false)),
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
        self.try_replace(quota, |_| {})
    }

    /// Publishes `quota` and runs `then` on the quota it replaced, both in
    /// one critical section (so nothing runs between them); `false`,
    /// changing nothing, while a [`try_hold`](Self::try_hold) runs.
    pub(crate) fn try_replace(&self, quota: &Quota, then: impl FnOnce(&Quota)) -> bool {
        critical_section::with(|cs| {
            if self.writing.borrow(cs).get() {
                return false;
            }
            then(&self.swap(cs, quota));
            true
        })
    }

    /// Runs `f` as this cell's one writer, interrupts enabled (checks may
    /// run meanwhile); `None`, running nothing, if another writer holds it.
    pub(crate) fn try_hold<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let taken = critical_section::with(|cs| !self.writing.borrow(cs).replace(true));
        if !taken {
            return None;
        }
        let out = f();
        critical_section::with(|cs| self.writing.borrow(cs).set(false));
        Some(out)
    }

    /// Publishes `quota` and returns the quota it replaced. Only inside
    /// [`try_hold`](Self::try_hold).
    pub(crate) fn store_held(&self, quota: &Quota) -> Quota {
        critical_section::with(|cs| self.swap(cs, quota))
    }

    fn swap(&self, cs: critical_section::CriticalSection<'_>, quota: &Quota) -> Quota {
        let new = quota.variable_words();
        let words = self.current.borrow(cs);
        let old = [words[0].get(), words[1].get(), words[2].get()];
        words[0].set(new[0]);
        words[1].set(new[1]);
        words[2].set(new[2]);
        Quota::from_words(old, &self.fixed)
    }
}
