//! [`Algorithm`] (the contract of a one-word limiter's steps) and
//! [`Limiter`], the one container of a shared state word.

use crate::sync::StateWord;
use crate::{Decision, Denied, RateLimiter, Snapshot};

/// The steps of a rate limiter whose per-client state is one `u64`.
///
/// The parameters (a [`Quota`](crate::Quota), a window…) implement it; the
/// containers ([`Limiter`], [`Gcra`](crate::Gcra), [`LocalGcra`](crate::LocalGcra),
/// the keyed tables) own the words and apply the steps with a
/// compare-and-swap or inside a critical section. A check runs in three
/// phases:
///
/// 1. [`prepare`](Self::prepare), before the state is read: what depends on
///    `now` and `cost` alone; it refuses a cost above the limit.
/// 2. [`step`](Self::step), between the load and the store: the new state
///    and the decision, or a small [`Shortfall`](Self::Shortfall). Only this
///    phase may run more than once.
/// 3. [`denial`](Self::denial), after the loop and only on a denial.
///
/// # Contract
///
/// * [`NEW`](Self::NEW) is the state of a client never seen: full quota.
/// * `prepare` reads no state; `step` depends only on the state and what
///   `prepare` returned. An admitting `step` returns a state that differs
///   from the one it was given (a container stores it without testing);
///   denying, nothing is stored.
/// * [`is_idle`](Self::is_idle) is true only when the state is
///   indistinguishable from `NEW` at `now` and later, so a table may reuse
///   the slot.
/// * Nothing panics or allocates; `prepare` and `step` never divide (a
///   `denial` may).
/// * Every method is total over any `u64` state, even one these parameters
///   did not write, and never admits more than the quota from it.
/// * Every method depends on `now` only through differences between the
///   `now`s it sees, so any clock works (see [`Clock`](crate::Clock#any-clock)).
///
/// ```
/// use cellrate::{Algorithm, Quota};
/// let quota = Quota::per_second(2).at_hz(1_000);
/// let (state, d) = quota.check(Quota::NEW, 0, 1).unwrap();
/// assert_eq!(d.remaining(), 1);
/// assert!(!quota.is_idle(state, 0));
/// assert!(quota.is_idle(state, 500));
///
/// // The same check, phase by phase (as a container runs it).
/// let prepared = quota.prepare(0, 1).unwrap();
/// let (again, _) = quota.step(state, &prepared).unwrap();
/// let shortfall = quota.step(again, &prepared).unwrap_err();
/// assert_eq!(quota.denial(&prepared, shortfall).retry_after(), Some(500));
/// ```
pub trait Algorithm {
    /// The state of a client never seen.
    const NEW: u64 = 0;

    /// What [`prepare`](Self::prepare) computes from `now` and `cost`
    /// alone, before the state is read.
    type Prepared: Copy;

    /// What a denying [`step`](Self::step) leaves for
    /// [`denial`](Self::denial): the numbers the denial is built from.
    type Shortfall: Copy;

    /// The phase before the state is read, for `cost > 0` cells at `now`;
    /// or the denial that no state could avoid (a cost above the limit).
    fn prepare(&self, now: u64, cost: u64) -> Result<Self::Prepared, Denied>;

    /// The step on `state`: the state to store and the decision, or the
    /// shortfall (store nothing). May run more than once per check, on
    /// fresher states.
    fn step(
        &self,
        state: u64,
        prepared: &Self::Prepared,
    ) -> Result<(u64, Decision), Self::Shortfall>;

    /// The denial of a step that returned `shortfall`.
    fn denial(&self, prepared: &Self::Prepared, shortfall: Self::Shortfall) -> Denied;

    /// Admits `cost` cells at `now` given `state`: the new state and the
    /// decision, or the denial (store nothing). A cost of 0 is a peek.
    #[inline(always)]
    fn check(&self, state: u64, now: u64, cost: u64) -> Result<(u64, Decision), Denied> {
        if cost == 0 {
            return Ok((state, self.peek(state, now).to_decision()));
        }
        let prepared = self.prepare(now, cost)?;
        match self.step(state, &prepared) {
            Ok(admitted) => Ok(admitted),
            Err(shortfall) => Err(self.denial(&prepared, shortfall)),
        }
    }

    /// The state at `now`, consuming nothing.
    fn peek(&self, state: u64, now: u64) -> Snapshot;

    /// Whether `state` is, at `now` and ever after, the same as
    /// [`NEW`](Self::NEW).
    fn is_idle(&self, state: u64, now: u64) -> bool;

    /// Where an admission at `now` that stored `stored` counted its cells,
    /// for [`refund`](Self::refund) (GCRA: `now`; a window: the window the
    /// state was written in).
    fn mark(&self, stored: u64, now: u64) -> u64;

    /// The mark of cells counted at `now` (a refund that has no receipt).
    fn mark_at(&self, now: u64) -> u64;

    /// The state after giving back `cost` cells counted under `mark`:
    /// never fuller than full, unchanged where those cells no longer count.
    ///
    /// ```
    /// use cellrate::{Algorithm, window::FixedWindowQuota};
    /// let w = FixedWindowQuota::new(3, 100);
    /// let (s, _) = w.check(FixedWindowQuota::NEW, 10, 2).unwrap();
    /// let back = w.refund(s, w.mark(s, 10), 1);
    /// assert_eq!(w.peek(back, 10).remaining(), 2);
    /// // Cells of a window that has passed have expired: nothing to give back.
    /// assert_eq!(w.refund(s, w.mark_at(150), 1), s);
    /// ```
    fn refund(&self, state: u64, mark: u64, cost: u64) -> u64;

    /// `state` re-expressed for the parameters `new` at `now`, for
    /// `set_quota`: the cells used at `now` are kept, at most the new
    /// limit, so a change that raises the limits never refuses at that
    /// instant what the old admitted, and one that lowers them never
    /// admits what the old refused (docs/design/reconfigure.md).
    ///
    /// ```
    /// use cellrate::{Algorithm, window::FixedWindowQuota};
    /// let (old, new) = (FixedWindowQuota::new(10, 100), FixedWindowQuota::new(1_000, 100));
    /// let (s, _) = old.check(FixedWindowQuota::NEW, 5, 7).unwrap();
    /// assert_eq!(new.peek(old.translate(s, 5, &new), 5).remaining(), 993);
    /// ```
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64;
}

/// Where a shared limiter's parameters live: fixed in the limiter, or in a
/// [`QuotaCell`](crate::sync::QuotaCell) that `set_quota` replaces through
/// `&self`.
pub(crate) trait Params {
    type Algorithm: Algorithm;
    /// A reference when the parameters are fixed, a copy read whole from
    /// the cell otherwise.
    type Current<'a>: core::ops::Deref<Target = Self::Algorithm>
    where
        Self: 'a;
    /// The parameters in force, read once per operation.
    fn current(&self) -> Self::Current<'_>;
}

impl<A: Algorithm + Copy> Params for A {
    type Algorithm = A;
    type Current<'a>
        = &'a A
    where
        A: 'a;
    #[inline(always)]
    fn current(&self) -> &A {
        self
    }
}

/// The one container of the shared one-word limiters: parameters and one
/// shared state word, updated by the [`Algorithm`] phases.
/// [`FixedWindow`](crate::FixedWindow) and
/// [`SlidingWindow`](crate::SlidingWindow) are this container over their
/// quotas.
///
/// ```
/// use cellrate::{Limiter, RateLimiter, window::FixedWindowQuota};
/// let w = Limiter::with_quota(FixedWindowQuota::new(2, 1_000));
/// assert!(w.check(0).is_ok() && w.check(0).is_ok());
/// assert_eq!(w.check(0).unwrap_err().retry_after(), Some(1_000));
/// assert_eq!(w.refund_n(0, 1).remaining(), 1);
/// ```
pub struct Limiter<P> {
    params: P,
    state: StateWord,
}

impl<P> Limiter<P> {
    crate::sync::loom_const_fn! {
        pub(crate) fn from_parts(params: P, state: u64) -> Self {
            Limiter { params, state: StateWord::new(state) }
        }
    }

    #[inline(always)]
    pub(crate) fn params(&self) -> &P {
        &self.params
    }

    #[inline(always)]
    pub(crate) fn state(&self) -> &StateWord {
        &self.state
    }
}

#[allow(private_bounds)]
impl<P: Params> Limiter<P> {
    /// Admits `cost` cells at `now`: the decision and the cells' mark.
    #[inline(always)]
    pub(crate) fn admit_marked(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        let algorithm = self.params.current();
        apply(&self.state, &*algorithm, now, cost)
            .map(|(d, stored)| (d, algorithm.mark(stored, now)))
    }

    /// Gives back `cost` cells counted under `mark`; the state after.
    #[inline]
    pub(crate) fn refund_marked(&self, mark: u64, cost: u64) -> u64 {
        refund(&self.state, &*self.params.current(), mark, cost)
    }

    #[inline(always)]
    pub(crate) fn apply_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        apply(&self.state, &*self.params.current(), now, cost).map(|(d, _)| d)
    }

    #[inline]
    pub(crate) fn peek_at(&self, now: u64) -> Snapshot {
        self.params.current().peek(self.state.load(), now)
    }

    pub(crate) fn refund_at(&self, now: u64, cost: u64) -> Snapshot {
        let algorithm = self.params.current();
        let state = refund(&self.state, &*algorithm, algorithm.mark_at(now), cost);
        algorithm.peek(state, now)
    }

    pub(crate) fn clear(&self) {
        self.state.store(P::Algorithm::NEW)
    }
}

impl<A: Algorithm + Copy> Limiter<A> {
    crate::sync::loom_const_fn! {
        /// A full limiter for `quota`.
        pub fn with_quota(quota: A) -> Self {
            Limiter::from_parts(quota, A::NEW)
        }
    }

    /// The parameters in force.
    ///
    /// ```
    /// use cellrate::window::{SlidingWindow, SlidingWindowQuota};
    /// let w = SlidingWindow::new(5, 100);
    /// assert_eq!(w.quota(), SlidingWindowQuota::new(5, 100));
    /// ```
    pub fn quota(&self) -> A {
        self.params
    }

    /// Admits `cost` cells at `now`, or denies and stores nothing. A cost
    /// of 0 is a peek.
    ///
    /// ```
    /// use cellrate::window::FixedWindow;
    /// let w = FixedWindow::new(3, 1_000);
    /// assert_eq!(w.check_n(0, 2).unwrap().remaining(), 1);
    /// assert!(w.check_n(0, 2).is_err());
    /// ```
    #[inline(always)]
    pub fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.apply_n(now, cost)
    }

    /// Gives back `cost` cells counted at `now` (a request admitted but
    /// never served), never beyond full; the state after.
    ///
    /// ```
    /// use cellrate::window::FixedWindow;
    /// let w = FixedWindow::new(10, 1_000);
    /// w.check_n(0, 10).unwrap();
    /// assert_eq!(w.refund_n(0, 3).remaining(), 3);
    /// assert_eq!(w.refund_n(0, 100).remaining(), 10);
    /// ```
    pub fn refund_n(&self, now: u64, cost: u64) -> Snapshot {
        self.refund_at(now, cost)
    }

    /// The state at `now`, consuming nothing.
    ///
    /// ```
    /// use cellrate::window::FixedWindow;
    /// let w = FixedWindow::new(3, 1_000);
    /// w.check_n(0, 1).unwrap();
    /// assert_eq!(w.peek(0).remaining(), 2);
    /// ```
    pub fn peek(&self, now: u64) -> Snapshot {
        self.peek_at(now)
    }

    /// Makes the limiter full, as new.
    ///
    /// ```
    /// use cellrate::window::FixedWindow;
    /// let w = FixedWindow::new(3, 1_000);
    /// w.check_n(0, 3).unwrap();
    /// w.reset();
    /// assert_eq!(w.peek(0).remaining(), 3);
    /// ```
    pub fn reset(&self) {
        self.clear()
    }

    /// Replaces the parameters at `now`, the state re-expressed by
    /// [`Algorithm::translate`] (a window's count is kept, at most the new
    /// limit). Returns `quota`.
    ///
    /// ```
    /// use cellrate::{RateLimiter, window::{FixedWindow, FixedWindowQuota}};
    /// let mut w = FixedWindow::new(10, 1_000);
    /// w.check_n(0, 7).unwrap();
    /// w.set_quota(500, FixedWindowQuota::new(20, 2_000));
    /// assert_eq!(w.peek(500).remaining(), 13);
    /// ```
    pub fn set_quota(&mut self, now: u64, quota: A) -> A {
        let state = self.params.translate(self.state.load(), now, &quota);
        self.params = quota;
        self.state.store(state);
        quota
    }
}

impl<A: Algorithm + Copy> RateLimiter for Limiter<A> {
    #[inline(always)]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.apply_n(now, cost)
    }
    #[inline(always)]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        self.apply_n(now, 1)
    }
    fn peek(&self, now: u64) -> Snapshot {
        self.peek_at(now)
    }
}

impl<A: Algorithm + Copy + core::fmt::Debug> core::fmt::Debug for Limiter<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Limiter")
            .field("quota", &self.params)
            .field("state", &self.state.load())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<A: Algorithm + Copy + defmt::Format> defmt::Format for Limiter<A> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Limiter {{ quota: {}, state: {=u64} }}",
            self.params,
            self.state.load()
        )
    }
}

/// `Err(CostTooLarge)` for a `cost` above `limit`.
#[inline(always)]
pub(crate) fn within_limit(cost: u64, limit: u64) -> Result<(), Denied> {
    if cost > limit {
        return Err(Denied::CostTooLarge { cost, limit });
    }
    Ok(())
}

/// The three phases of `algorithm` on one shared `word`: the decision and
/// the state stored, or the denial.
#[inline(always)]
pub(crate) fn apply<A: Algorithm>(
    word: &StateWord,
    algorithm: &A,
    now: u64,
    cost: u64,
) -> Result<(Decision, u64), Denied> {
    if cost == 0 {
        let state = word.load();
        return Ok((algorithm.peek(state, now).to_decision(), state));
    }
    let prepared = algorithm.prepare(now, cost)?;
    apply_prepared(word, algorithm, &prepared)
}

/// [`apply`] from its second phase, for a cost above 0.
#[inline(always)]
pub(crate) fn apply_prepared<A: Algorithm>(
    word: &StateWord,
    algorithm: &A,
    prepared: &A::Prepared,
) -> Result<(Decision, u64), Denied> {
    let stepped = word.update(|state| {
        algorithm
            .step(state, prepared)
            .map(|(next, decision)| (next, (decision, next)))
    });
    match stepped {
        Ok(admitted) => Ok(admitted),
        Err(shortfall) => Err(algorithm.denial(prepared, shortfall)),
    }
}

/// [`Algorithm::refund`] applied to one shared `word`: the state after.
#[inline]
pub(crate) fn refund<A: Algorithm>(word: &StateWord, algorithm: &A, mark: u64, cost: u64) -> u64 {
    let step = |state: u64| -> Result<(u64, u64), core::convert::Infallible> {
        let back = algorithm.refund(state, mark, cost);
        Ok((back, back))
    };
    match word.update(step) {
        Ok(state) => state,
        Err(never) => match never {},
    }
}
