//! A worker's leased handle on a shared limiter.

use core::fmt;

use super::{CellSource, LeasePolicy, Lot};
use crate::decision::Denied;

/// A worker's leased handle on a shared limiter: spends cells leased from
/// the shared `S` (a [`Gcra`](crate::Gcra), `&Gcra`, `Arc<Gcra>`) with no atomic
/// operation on its fast path. See the [module docs](crate::lease) for the policy
/// and the bound. Gives back what it holds when dropped (at the last `now`
/// it saw).
///
/// ```
/// use cellrate::lease::{LeasePolicy, Leased};
/// use cellrate::{Gcra, Quota};
/// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
/// let mut worker = Leased::new(&shared, LeasePolicy::new(4, 50));
/// assert!(worker.check(0).is_ok());
/// assert_eq!(worker.taken(), 1); // the first lease is the minimum size
/// worker.release(0);
/// assert_eq!(shared.peek(0).remaining(), 9);
/// ```
pub struct Leased<S: CellSource> {
    source: S,
    policy: LeasePolicy,
    lot: Lot,
}

impl<S: CellSource> Leased<S> {
    /// A handle holding nothing yet.
    pub const fn new(source: S, policy: LeasePolicy) -> Self {
        Leased {
            lot: Lot::new(&policy),
            source,
            policy,
        }
    }

    /// Admits one cell at `now`; see [`check_n`](Self::check_n).
    #[inline(always)]
    pub fn check(&mut self, now: u64) -> Result<(), Denied> {
        self.check_n(now, 1)
    }

    /// Admits `cost` cells at `now` from the lease in hand, taking a new
    /// lease (or topping this one up) from the shared limiter only when the
    /// cells in hand do not cover `cost` or the lease has lapsed. Denied
    /// when the shared limiter cannot provide the rest; a cost above the
    /// shared burst is [`Denied::CostTooLarge`]. A cost of 0 is always
    /// admitted and takes nothing.
    ///
    /// ```
    /// use cellrate::lease::{LeasePolicy, Leased};
    /// use cellrate::{Gcra, Quota};
    /// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
    /// let mut worker = Leased::new(&shared, LeasePolicy::new(8, 50));
    /// assert!(worker.check_n(0, 10).is_ok());
    /// assert!(worker.check_n(0, 1).is_err());
    /// assert!(worker.check_n(0, 11).unwrap_err().retry_after().is_none()); // can never fit
    /// ```
    #[inline(always)]
    pub fn check_n(&mut self, now: u64, cost: u64) -> Result<(), Denied> {
        if self.lot.spend(now, cost, &self.policy) {
            return Ok(());
        }
        self.refill(now, cost)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, now: u64, cost: u64) -> Result<(), Denied> {
        if cost == 0 {
            return Ok(());
        }
        let source = &self.source;
        self.lot.refill(
            &self.policy,
            now,
            cost,
            |least, most, share| source.take(now, least, most, share),
            |cells| source.give_back(now, cells),
        )
    }

    /// Gives back every cell in hand at `now` (the worker stops or pauses).
    /// The next check takes a new lease.
    pub fn release(&mut self, now: u64) {
        let source = &self.source;
        self.lot.release(|cells| source.give_back(now, cells));
    }

    /// Cells in hand (the handle's part of `H(t)` in the bound).
    pub fn held(&self) -> u64 {
        self.lot.held
    }
    /// Cells this handle could still spend at `now`: those in hand if its
    /// lease is live then, else 0 (a lapsed lease is given back at the next
    /// call, never spent).
    ///
    /// ```
    /// use cellrate::lease::{LeasePolicy, Leased};
    /// use cellrate::{Gcra, Quota};
    /// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
    /// let mut worker = Leased::new(&shared, LeasePolicy::new(4, 50).with_min(4));
    /// worker.check(0).unwrap();
    /// assert_eq!((worker.spendable(50), worker.spendable(51)), (3, 0));
    /// ```
    pub fn spendable(&self, now: u64) -> u64 {
        self.lot.spendable(now)
    }
    /// Cells this handle's takes charged to the shared limiter.
    pub fn taken(&self) -> u64 {
        self.lot.taken
    }
    /// Cells this handle gave back.
    pub fn returned(&self) -> u64 {
        self.lot.returned
    }
    /// Cells this handle admitted: `taken − returned − held`.
    pub fn spent(&self) -> u64 {
        self.lot.spent()
    }
    /// The size the next lease aims for (it adapts; see the module docs).
    pub fn lease_size(&self) -> u64 {
        self.lot.size
    }
    /// The policy.
    pub fn policy(&self) -> LeasePolicy {
        self.policy
    }
    /// The shared source.
    pub fn source(&self) -> &S {
        &self.source
    }
}

impl<S: CellSource> Drop for Leased<S> {
    fn drop(&mut self) {
        let (source, now) = (&self.source, self.lot.last);
        self.lot.release(|cells| source.give_back(now, cells));
    }
}

impl<S: CellSource> fmt::Debug for Leased<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leased")
            .field("held", &self.lot.held)
            .field("taken", &self.lot.taken)
            .field("returned", &self.lot.returned)
            .field("lease_size", &self.lot.size)
            .field("policy", &self.policy)
            .finish()
    }
}
