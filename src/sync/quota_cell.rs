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
//! interrupt handler can never spin on a preempted writer.

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
            self.current.write(quota.variable_words());
            then(&Quota::from_words(old, &self.fixed));
        }
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
        self.try_replace(quota, |_| {})
    }

    /// Publishes `quota` and runs `then` on the quota it replaced, both in
    /// one critical section (so nothing runs between them).
    pub(crate) fn try_replace(&self, quota: &Quota, then: impl FnOnce(&Quota)) -> bool {
        let new = quota.variable_words();
        critical_section::with(|cs| {
            let words = self.current.borrow(cs);
            let old = [words[0].get(), words[1].get(), words[2].get()];
            words[0].set(new[0]);
            words[1].set(new[1]);
            words[2].set(new[2]);
            then(&Quota::from_words(old, &self.fixed));
        });
        true
    }
}
