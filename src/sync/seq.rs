//! [`Seq`]: the one sequence-lock core, under both the guarded state
//! ([`Guarded`](super::Guarded), the sliding log's and the wide bucketed
//! window's ring) and the quota cell's two copies
//! ([`QuotaCell`](super::QuotaCell)).
//!
//! `seq` is even at rest and odd while a writer works. A reader takes an
//! even `seq` ([`start`](Seq::start), `Acquire`), reads the guarded words
//! (relaxed atomics), then asks [`unchanged`](Seq::unchanged): after an
//! `Acquire` fence, `seq` loaded again is the same, so no write overlapped
//! and what it read is one state. A writer takes `seq` from the even value
//! it read to odd by one compare-and-swap ([`try_write`](Seq::try_write)),
//! so a read followed by a write on success is a single step: the read is
//! still current exactly when the swap succeeds (every writer changes `seq`
//! first). A `Release` fence after the swap keeps the writer's stores
//! behind it (a reader that sees any of them sees the odd `seq`), and the
//! returned [`Publish`] stores the next even value (`Release`) when
//! dropped, also if the writer unwinds. (The fences and the relaxed data
//! accesses are the form H.-J. Boehm shows correct in "Can seqlocks get
//! along with programming language memory models?", MSPC 2012.)
//!
//! Invariant: a reader whose `unchanged` holds saw no store of any writer
//! that published after its `start`, and every store of every writer that
//! published before it.

use super::atomic;
use super::loom::loom_const_fn;

/// A sequence counter: even at rest, odd while its one writer works (see
/// the module docs).
pub(crate) struct Seq(atomic::AtomicU64);

/// Publishes a write when dropped (the next even `seq`), also if the
/// writer unwinds.
pub(crate) struct Publish<'a> {
    seq: &'a atomic::AtomicU64,
    next: u64,
}

impl Seq {
    loom_const_fn! {
        pub(crate) fn new() -> Self {
            Seq(atomic::AtomicU64::new(0))
        }
    }

    /// `seq`, loaded `Acquire`, if no write is in progress.
    #[inline(always)]
    pub(crate) fn start(&self) -> Option<u64> {
        let seq = self.0.load(atomic::Ordering::Acquire);
        (seq & 1 == 0).then_some(seq)
    }

    /// Whether no write began since [`start`](Self::start) returned `seq`
    /// (the reads since were of one state).
    #[inline(always)]
    pub(crate) fn unchanged(&self, seq: u64) -> bool {
        atomic::fence(atomic::Ordering::Acquire);
        self.0.load(atomic::Ordering::Relaxed) == seq
    }

    /// Becomes the writer if no write began since `start` returned `seq`;
    /// the returned guard publishes.
    #[inline(always)]
    pub(crate) fn try_write(&self, seq: u64) -> Option<Publish<'_>> {
        use atomic::Ordering::{Acquire, Relaxed, Release};
        let next = seq.wrapping_add(1);
        if self
            .0
            .compare_exchange(seq, next, Acquire, Relaxed)
            .is_err()
        {
            return None;
        }
        // The writer's stores stay after the odd `seq` (see the module
        // docs).
        atomic::fence(Release);
        Some(Publish {
            seq: &self.0,
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
