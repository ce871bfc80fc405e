//! [`StateWord`]: one `u64` of limiter state shared by `&self`.
//!
//! On targets with 64-bit compare-and-swap (and in loom models) it is an
//! atomic; elsewhere a `u64` in a [`critical_section::Mutex`]. Both variants
//! offer the same operations with the same meaning:
//!
//! * `load` / `store`: `Acquire` / `Release` on the atomic path.
//! * [`update`](StateWord::update), the one update entry point (the shape
//!   of governor's `measure_and_replace`): replaces `v` by `f(v)` atomically
//!   with respect to every other access (a compare-and-swap loop retrying
//!   `f` on a fresh value, or one critical section). When `f` declines
//!   (`Err`) nothing is stored; on `Ok` the value is stored without a test
//!   that it changed (a limiter's admitting step always changes it, and
//!   that test would be a compare and branch on the path to the swap that
//!   the compiler cannot prove away; storing an unchanged value, as a
//!   refund to a full limiter does, is still correct).
//! * [`compare_exchange`](StateWord::compare_exchange): replaces `current` by
//!   `new` if the word still holds `current`; `Ok(current)` or `Err(seen)`.
//! * [`fetch_add`](StateWord::fetch_add): adds `delta` (wrapping) and returns
//!   the previous value.
//!
//! The critical section covers only a load, the caller's arithmetic and a
//! store: no call the caller did not inline, no loop.

#[allow(unused_imports)]
use super::loom::{loom_const_fn, word_atomic, word_section};

word_atomic! {
    /// One `u64` of limiter state, shared by `&self`.
    pub(crate) struct StateWord(super::atomic::AtomicU64);

    impl StateWord {
        loom_const_fn! {
            pub(crate) fn new(value: u64) -> Self {
                StateWord(super::atomic::AtomicU64::new(value))
            }
        }

        #[inline(always)]
        pub(crate) fn load(&self) -> u64 {
            self.0.load(super::atomic::Ordering::Acquire)
        }

        #[inline(always)]
        pub(crate) fn store(&self, value: u64) {
            self.0.store(value, super::atomic::Ordering::Release)
        }

        /// Replaces the value `v` by `f(v).0` atomically (stored on every
        /// `Ok`), or leaves it when `f` returns `Err`. `f` may run more than
        /// once (on contention).
        #[inline(always)]
        pub(crate) fn update<T, E>(
            &self,
            mut f: impl FnMut(u64) -> Result<(u64, T), E>,
        ) -> Result<T, E> {
            use super::atomic::Ordering::{AcqRel, Acquire};
            let mut current = self.0.load(Acquire);
            loop {
                let (new, out) = f(current)?;
                match self.0.compare_exchange_weak(current, new, AcqRel, Acquire) {
                    Ok(_) => return Ok(out),
                    Err(actual) => current = actual,
                }
            }
        }

        /// [`update`](Self::update) with only its first attempt in the
        /// caller: the load, `f` and one compare-and-swap are inlined; a
        /// failed swap continues in a loop out of line. So a caller whose
        /// `f` declines (a denial) runs no loop at all, and the loop around
        /// it (say, a caller's batch) keeps a straight body the compiler
        /// can unroll. Same semantics as `update`.
        #[inline(always)]
        pub(crate) fn update_first_inline<T, E, F>(&self, mut f: F) -> Result<T, E>
        where
            F: FnMut(u64) -> Result<(u64, T), E>,
        {
            use super::atomic::Ordering::{AcqRel, Acquire};
            let current = self.0.load(Acquire);
            let (new, out) = f(current)?;
            match self.0.compare_exchange_weak(current, new, AcqRel, Acquire) {
                Ok(_) => Ok(out),
                Err(actual) => self.update_from(actual, f),
            }
        }

        /// `update`'s loop, from a value already read.
        #[inline(never)]
        fn update_from<T, E>(
            &self,
            mut current: u64,
            mut f: impl FnMut(u64) -> Result<(u64, T), E>,
        ) -> Result<T, E> {
            use super::atomic::Ordering::{AcqRel, Acquire};
            loop {
                let (new, out) = f(current)?;
                match self.0.compare_exchange_weak(current, new, AcqRel, Acquire) {
                    Ok(_) => return Ok(out),
                    Err(actual) => current = actual,
                }
            }
        }

        /// Replaces `current` by `new` if the word still holds `current`
        /// (`Ok(current)`); otherwise stores nothing and returns what it
        /// holds (`Err(seen)`). Never fails spuriously.
        #[inline(always)]
        pub(crate) fn compare_exchange(&self, current: u64, new: u64) -> Result<u64, u64> {
            use super::atomic::Ordering::{AcqRel, Acquire};
            self.0.compare_exchange(current, new, AcqRel, Acquire)
        }

        /// Adds `delta` (wrapping) and returns the value before.
        #[inline(always)]
        pub(crate) fn fetch_add(&self, delta: u64) -> u64 {
            self.0.fetch_add(delta, super::atomic::Ordering::AcqRel)
        }
    }
}

word_section! {
    /// One `u64` of limiter state, shared by `&self` through a critical section.
    pub(crate) struct StateWord(critical_section::Mutex<core::cell::Cell<u64>>);

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

        /// Replaces the value `v` by `f(v).0` inside one critical section
        /// (stored on every `Ok`), or leaves it when `f` returns `Err`.
        #[inline]
        pub(crate) fn update<T, E>(
            &self,
            mut f: impl FnMut(u64) -> Result<(u64, T), E>,
        ) -> Result<T, E> {
            critical_section::with(|cs| {
                let cell = self.0.borrow(cs);
                let (new, out) = f(cell.get())?;
                cell.set(new);
                Ok(out)
            })
        }

        /// [`update`](Self::update): one critical section, whose body
        /// has no loop to keep out of the caller.
        #[inline]
        pub(crate) fn update_first_inline<T, E>(
            &self,
            f: impl FnMut(u64) -> Result<(u64, T), E>,
        ) -> Result<T, E> {
            self.update(f)
        }

        /// Replaces `current` by `new` if the word still holds `current`
        /// (`Ok(current)`); otherwise stores nothing and returns what it
        /// holds (`Err(seen)`).
        #[inline]
        pub(crate) fn compare_exchange(&self, current: u64, new: u64) -> Result<u64, u64> {
            critical_section::with(|cs| {
                let cell = self.0.borrow(cs);
                let seen = cell.get();
                if seen == current {
                    cell.set(new);
                    Ok(seen)
                } else {
                    Err(seen)
                }
            })
        }

        /// Adds `delta` (wrapping) and returns the value before.
        #[inline]
        pub(crate) fn fetch_add(&self, delta: u64) -> u64 {
            critical_section::with(|cs| {
                let cell = self.0.borrow(cs);
                let before = cell.get();
                cell.set(before.wrapping_add(delta));
                before
            })
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::StateWord;

    #[test]
    fn compare_exchange_swaps_only_the_expected_value() {
        let w = StateWord::new(5);
        assert_eq!(w.compare_exchange(4, 9), Err(5));
        assert_eq!(w.load(), 5);
        assert_eq!(w.compare_exchange(5, 9), Ok(5));
        assert_eq!(w.load(), 9);
    }

    #[test]
    fn fetch_add_returns_the_value_before_and_wraps() {
        let w = StateWord::new(u64::MAX - 1);
        assert_eq!(w.fetch_add(1), u64::MAX - 1);
        assert_eq!(w.fetch_add(3), u64::MAX);
        assert_eq!(w.load(), 2);
        // A subtraction is the addition of the two's complement.
        assert_eq!(w.fetch_add(2u64.wrapping_neg()), 2);
        assert_eq!(w.load(), 0);
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::StateWord;
    use loom::sync::Arc;
    use loom::thread;

    /// Two racing `fetch_add`s lose neither addition, and each sees a
    /// distinct value before.
    #[test]
    fn racing_fetch_adds_lose_nothing() {
        loom::model(|| {
            let w = Arc::new(StateWord::new(0));
            let other = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.fetch_add(1))
            };
            let mine = w.fetch_add(2);
            let theirs = other.join().unwrap();
            assert!((mine, theirs) == (0, 2) || (mine, theirs) == (1, 0));
            assert_eq!(w.load(), 3);
        });
    }

    /// Two `update_first_inline`s racing with an `update` lose none of the
    /// three additions, whichever of them fails its first swap and retries
    /// out of line; and one that declines stores nothing.
    #[test]
    fn racing_first_inline_updates_lose_nothing() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let w = Arc::new(StateWord::new(0));
            let add = |by: u64| move |v: u64| Ok::<_, ()>((v + by, v));
            let others: [_; 2] = core::array::from_fn(|i| {
                let w = Arc::clone(&w);
                thread::spawn(move || {
                    if i == 0 {
                        w.update_first_inline(add(1)).unwrap()
                    } else {
                        w.update(add(2)).unwrap()
                    }
                })
            });
            let mine = w.update_first_inline(add(4)).unwrap();
            let declined = w.update_first_inline(|v| if v > 100 { Ok((0, ())) } else { Err(v) });
            let [one, two] = others.map(|t| t.join().unwrap());
            assert_eq!(w.load(), 7);
            assert!(declined.is_err());
            // Each addition saw the sum of those before it, in some order.
            let mut seen = [(one, 1), (two, 2), (mine, 4)];
            seen.sort();
            let mut sum = 0;
            for (before, by) in seen {
                assert_eq!(before, sum, "{seen:?}");
                sum += by;
            }
        });
    }

    /// Two `compare_exchange`s from the same value: exactly one wins.
    #[test]
    fn racing_compare_exchanges_have_one_winner() {
        loom::model(|| {
            let w = Arc::new(StateWord::new(0));
            let other = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.compare_exchange(0, 1).is_ok())
            };
            let mine = w.compare_exchange(0, 2).is_ok();
            let theirs = other.join().unwrap();
            assert!(mine ^ theirs);
            assert_eq!(w.load(), if mine { 2 } else { 1 });
        });
    }
}
