//! [`Guarded`]: state larger than one word (the sliding log's ring) that
//! one writer at a time changes and readers see whole.
//!
//! A sequence lock where the `std` feature is on and the target has 64-bit
//! atomics (reads never write; a write is one compare-and-swap, a few
//! relaxed stores and one release store), and a critical section everywhere
//! else (bare metal, where a handler could preempt a writer).

#[allow(unused_imports)]
use super::atomic;
#[allow(unused_imports)]
use super::loom::{loom_const_fn, section_guarded, seqlocked};

seqlocked! {
    use super::seq::Seq;

    /// State larger than one word (the sliding log's ring) that one writer
    /// at a time changes and readers see whole.
    ///
    /// This variant (hosts with `std`, and loom) is a sequence lock, the
    /// crate's one [`Seq`]: reads never write, and a read followed by a
    /// write on success is a single step ([`update`](Self::update)), one
    /// compare-and-swap. So a decision that writes nothing (a denial) is
    /// loads only, and one that writes costs one compare-and-swap, as on a
    /// single atomic word.
    ///
    /// A waiting thread (a writer came between its reads, or holds `seq`
    /// odd) spins a little, then yields. Without `std` (bare metal, where an
    /// interrupt handler could preempt a writer and spin forever) this is a
    /// critical section.
    pub(crate) struct Guarded<T> {
        seq: Seq,
        value: T,
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
                    seq: Seq::new(),
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
                if self.seq.unchanged(seq) {
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
                        if self.seq.unchanged(seq) {
                            return out;
                        }
                    }
                    Ok(plan) => {
                        if let Some(_publish) = self.seq.try_write(seq) {
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
                if let Some(_publish) = self.seq.try_write(seq) {
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
            match self.seq.start() {
                Some(seq) => seq,
                None => self.wait(),
            }
        }

        #[cold]
        #[inline(never)]
        fn wait(&self) -> u64 {
            let mut spins = 0;
            loop {
                if let Some(seq) = self.seq.start() {
                    return seq;
                }
                if spins < SPINS {
                    spins += 1;
                    atomic::spin_hint();
                } else {
                    super::loom::yield_now();
                }
            }
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
    super::loom::repeat_const!(GuardedU64::new(0); N)
}

/// `N` zeroed [`GuardedU64`]s.
#[cfg(all(feature = "loom", test))]
pub(crate) fn guarded_zeros<const N: usize>() -> [GuardedU64; N] {
    super::loom::repeat_const!(GuardedU64::new(0); N)
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
