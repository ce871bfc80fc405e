//! Counting what a limiter decides.

use core::convert::Infallible;
use core::fmt;

use super::Revocable;
use crate::sync::{loom_const_fn, StateWord};
use crate::{Decision, Denied, RateLimiter, Snapshot};

/// A limiter that counts its admitted and denied requests and cells.
///
/// The four counters are 64-bit words updated through the crate's
/// [`sync`](crate::sync) facade (atomic adds, or a critical section on
/// targets without 64-bit CAS); the cell counts saturate at `u64::MAX`
/// (the request counts would need 2⁶⁴ requests to). Each counter is exact; [`stats`](Self::stats) reads them one
/// after another, so under concurrency the four numbers may come from
/// slightly different instants. A check of cost 0 (a peek) counts as
/// nothing. A revoked admission (see
/// [`Revocable`]) is moved from the admitted to the denied counts.
///
/// ```
/// use cellrate::compose::Metered;
/// use cellrate::{RateLimiter, window::FixedWindow};
/// static API: Metered<FixedWindow> = Metered::new(FixedWindow::new(2, 1_000));
/// for _ in 0..3 {
///     let _ = API.check_n(0, 1);
/// }
/// let stats = API.stats();
/// assert_eq!((stats.admitted, stats.denied, stats.admitted_cells), (2, 1, 2));
/// ```
pub struct Metered<L> {
    inner: L,
    admitted: StateWord,
    denied: StateWord,
    admitted_cells: StateWord,
    denied_cells: StateWord,
}

/// Counts read from a [`Metered`] limiter.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MeterStats {
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied (including costs that can never fit).
    pub denied: u64,
    /// Cells admitted (the sum of admitted costs).
    pub admitted_cells: u64,
    /// Cells denied.
    pub denied_cells: u64,
}

/// One more request: a single atomic add (a count of requests cannot reach
/// `u64::MAX`, so it never needs to saturate).
fn count(word: &StateWord) {
    word.fetch_add(1);
}

/// Adds `n` cells, saturating (one denied cost can be as large as
/// `u64::MAX`).
fn add(word: &StateWord, n: u64) {
    let step = |v: u64| -> Result<(u64, ()), Infallible> { Ok((v.saturating_add(n), ())) };
    let _ = word.update(step);
}

fn sub(word: &StateWord, n: u64) {
    let step = |v: u64| -> Result<(u64, ()), Infallible> { Ok((v.saturating_sub(n), ())) };
    let _ = word.update(step);
}

impl<L> Metered<L> {
    loom_const_fn! {
        /// Counts the decisions of `inner`, from zero.
        pub fn new(inner: L) -> Self {
            Metered {
                inner,
                admitted: StateWord::new(0),
                denied: StateWord::new(0),
                admitted_cells: StateWord::new(0),
                denied_cells: StateWord::new(0),
            }
        }
    }

    /// The wrapped limiter.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The counts so far.
    pub fn stats(&self) -> MeterStats {
        MeterStats {
            admitted: self.admitted.load(),
            denied: self.denied.load(),
            admitted_cells: self.admitted_cells.load(),
            denied_cells: self.denied_cells.load(),
        }
    }

    /// Sets every count back to zero.
    ///
    /// ```
    /// use cellrate::compose::Metered;
    /// use cellrate::{RateLimiter, window::FixedWindow};
    /// let m = Metered::new(FixedWindow::new(1, 10));
    /// m.check(0).unwrap();
    /// m.clear();
    /// assert_eq!(m.stats().admitted, 0);
    /// ```
    pub fn clear(&self) {
        self.admitted.store(0);
        self.denied.store(0);
        self.admitted_cells.store(0);
        self.denied_cells.store(0);
    }

    fn record<T>(&self, result: &Result<T, Denied>, cost: u64) {
        if cost == 0 {
            return;
        }
        match result {
            Ok(_) => {
                count(&self.admitted);
                add(&self.admitted_cells, cost);
            }
            Err(_) => {
                count(&self.denied);
                add(&self.denied_cells, cost);
            }
        }
    }
}

impl<L: RateLimiter> RateLimiter for Metered<L> {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        let result = self.inner.check_n(now, cost);
        self.record(&result, cost);
        result
    }
    fn peek(&self, now: u64) -> Snapshot {
        self.inner.peek(now)
    }
}

impl<L: Revocable> Revocable for Metered<L> {
    type Receipt = (L::Receipt, u64);
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied> {
        let result = self.inner.admit_n(now, cost);
        self.record(&result, cost);
        result.map(|(d, r)| (d, (r, cost)))
    }
    fn revoke(&self, (receipt, cost): Self::Receipt) {
        self.inner.revoke(receipt);
        if cost > 0 {
            sub(&self.admitted, 1);
            sub(&self.admitted_cells, cost);
            count(&self.denied);
            add(&self.denied_cells, cost);
        }
    }
}

impl<L: fmt::Debug> fmt::Debug for Metered<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metered")
            .field("inner", &self.inner)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<L: defmt::Format> defmt::Format for Metered<L> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Metered {{ inner: {}, stats: {} }}",
            self.inner,
            self.stats()
        )
    }
}
