//! A limiter as a pure function of one `u64` state word.
//!
//! Every algorithm in the crate keeps one client's state in one `u64` and
//! shares its parameters (a [`Quota`], a window length…) between many such
//! words. [`Algorithm`] is that split: the parameters implement it, and the
//! containers own the words and apply the steps with a compare-and-swap or
//! inside a critical section: the shared limiters ([`Gcra`](crate::Gcra),
//! [`FixedWindow`](crate::window::FixedWindow),
//! [`SlidingWindow`](crate::window::SlidingWindow)) through one container
//! over a shared state word, [`LocalGcra`](crate::LocalGcra) on a plain
//! `u64`, and the keyed tables in their slots.
//!
//! # One step, in three phases
//!
//! 1. [`prepare`](Algorithm::prepare), before the state is read: everything
//!    that depends on `now` and `cost` alone (GCRA: `now` in sub-ticks, the
//!    charge `cost·T` and the room `span − cost·T`; a window: the window of
//!    `now`). It refuses what no state can admit (a cost above the limit).
//! 2. [`step`](Algorithm::step), inside the compare-and-swap loop or the
//!    critical section: the new state and the decision, or a small
//!    [`Shortfall`](Algorithm::Shortfall). Only this phase may run more than
//!    once, and it is the only code between the load and the store.
//! 3. [`denial`](Algorithm::denial), after the loop and only on a denial:
//!    the [`Denied`] built from the shortfall (the wait, a division for the
//!    window counters, happens here).
//!
//! [`check`](Algorithm::check) is the three in order; a cost of 0 is a
//! [`peek`](Algorithm::peek) and never reaches them.
//!
//! # Contract
//!
//! * [`NEW`](Algorithm::NEW) is the state of a client never seen: full quota.
//! * [`check`](Algorithm::check) with `cost > 0` either admits and returns the
//!   state to store, or denies and the caller stores nothing. With `cost == 0`
//!   it returns the state unchanged (a peek).
//! * `prepare` reads no state; `step` depends only on the state and what
//!   `prepare` returned, so a container may run it again on a fresher state.
//!   `step` admitting returns the state to store, which differs from the
//!   state it was given (a cost above 0 always changes it; a container
//!   stores it without testing); denying, nothing is stored.
//! * [`is_idle`](Algorithm::is_idle) is true only when the state is
//!   indistinguishable from `NEW` at `now` and at every later time (within
//!   the longest gap between checks: GCRA's TATs are serial): a table may
//!   then reuse the slot without giving the client anything back.
//! * None of these panic, allocate or divide on the admit/deny path.
//! * Every method is total over any `u64` state, including a word the
//!   parameters did not write (say, saved under another limit without
//!   `translate`): it never panics and never admits more than the quota
//!   from it. GCRA reads an even word as a new client and an odd one as a
//!   TAT (see [`gcra`](crate::gcra#serial-time)); the window quotas judge a
//!   count above their limit as a full window, which the next window clears.
//! * Every method depends on `now` only through differences between the
//!   `now`s it sees (GCRA: modulo 2⁶³ sub-ticks, in serial order; the
//!   windows: modulo their window, see [`window`](crate::window)), so any
//!   clock works: one that starts anywhere, Unix time, one that wraps.

use crate::decision::{Limited, Usage};
use crate::gcra::step as gcra_step;
use crate::sync::StateWord;
use crate::{Decision, Denied, Quota, Snapshot};

/// The steps of a one-word rate limiter; see the [module docs](self).
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

    /// Whether `state` is, at `now` and ever after (within the longest gap
    /// between checks, [`Quota::horizon_ticks`] for GCRA), the same as
    /// [`NEW`](Self::NEW).
    fn is_idle(&self, state: u64, now: u64) -> bool;
}

/// What [`Quota`]'s [`prepare`](Algorithm::prepare) computes: `now` as a
/// state word (its sub-ticks, see [`gcra`](crate::gcra#serial-time)), the
/// charge `cost·T` and the room `span − cost·T`.
///
/// ```
/// use cellrate::{Algorithm, Quota};
/// let q = Quota::per_second(1).with_burst(2).at_hz(1_000);
/// let p = q.prepare(0, 2).unwrap();
/// let (tat, d) = q.step(Quota::NEW, &p).unwrap();
/// assert_eq!((d.remaining(), d.reset_after()), (0, 2_000));
/// // A second request of 2 waits until the TAT is back within the room.
/// let shortfall = q.step(tat, &p).unwrap_err();
/// assert_eq!(q.denial(&p, shortfall).retry_after(), Some(2_000));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcraPrepared {
    now: u64,
    charge: gcra_step::Charge,
}

/// What a denying GCRA step leaves: how far the TAT it saw is ahead of
/// `now`, from which [`denial`](Algorithm::denial) computes the debt and
/// the sub-ticks before the same request fits (after the compare-and-swap
/// loop or critical section). See [`GcraPrepared`] for an example.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcraShortfall(u64);

impl Algorithm for Quota {
    type Prepared = GcraPrepared;
    type Shortfall = GcraShortfall;

    /// `now · scale` as a word, the charge (refusing a cost above the
    /// burst) and the room. Every `now` is valid: time is serial.
    #[inline(always)]
    fn prepare(&self, now: u64, cost: u64) -> Result<GcraPrepared, Denied> {
        let now = self.now_word(now);
        // cost ≥ 1 and T ≥ 1, so the charge is ≥ 1. Saying so lets the
        // compiler see that an admission always changes the state, and drop
        // the equality test `StateWord::update` makes before its swap.
        let increment = crate::gcra::charge(self, cost)?.max(1);
        Ok(GcraPrepared {
            now,
            charge: gcra_step::Charge::new(self.span(), increment),
        })
    }

    /// [`gcra::step::admit`](crate::gcra#the-math): a parity test, a
    /// subtract, a compare and one add between the load and the store (and
    /// a sign test for a state that is not owing).
    #[inline(always)]
    fn step(&self, state: u64, p: &GcraPrepared) -> Result<(u64, Decision), GcraShortfall> {
        match gcra_step::admit(state, p.now, &p.charge) {
            Ok((next, debt)) => Ok((next, Decision::from_usage(Usage::gcra(self, debt)))),
            Err(distance) => Err(GcraShortfall(distance)),
        }
    }

    #[inline(always)]
    fn denial(&self, p: &GcraPrepared, shortfall: GcraShortfall) -> Denied {
        gcra_denial(self, p.charge.shortfall(shortfall.0))
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        crate::gcra::snapshot(self, state, self.now_word(now))
    }

    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        gcra_step::is_idle(state, self.now_word(now))
    }
}

/// The GCRA denial of a step's shortfall.
#[inline(always)]
fn gcra_denial(quota: &Quota, s: gcra_step::Shortfall) -> Denied {
    Denied::Limited(Limited::from_usage(Usage::gcra(quota, s.debt), s.wait))
}

/// Where a shared limiter's parameters live: in the limiter, fixed between
/// `&mut self` reconfigurations (an [`Algorithm`] value), or in a
/// [`QuotaCell`](crate::sync::QuotaCell) that `set_quota` replaces through
/// `&self`.
pub(crate) trait Params {
    /// The parameters a check applies.
    type Algorithm: Algorithm;
    /// A view of the parameters in force: a reference when they are fixed
    /// (no copy: an out-of-line step reads them where they are), a copy
    /// read whole from the [`QuotaCell`](crate::sync::QuotaCell) otherwise.
    type Current<'a>: core::ops::Deref<Target = Self::Algorithm>
    where
        Self: 'a;
    /// The parameters in force, read once per operation before the state
    /// word.
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

impl Params for crate::sync::QuotaCell {
    type Algorithm = Quota;
    type Current<'a> = Loaded;
    #[inline(always)]
    fn current(&self) -> Loaded {
        Loaded(self.load())
    }
}

/// A quota read whole from a [`QuotaCell`](crate::sync::QuotaCell).
pub(crate) struct Loaded(Quota);

impl core::ops::Deref for Loaded {
    type Target = Quota;
    #[inline(always)]
    fn deref(&self) -> &Quota {
        &self.0
    }
}

/// The one container of the shared one-word limiters: parameters and one
/// [`StateWord`], updated by the [`Algorithm`] phases (prepare before the
/// word is read, the step inside the compare-and-swap loop or critical
/// section, the denial after it).
pub(crate) struct Shared<P> {
    params: P,
    state: StateWord,
}

impl<P> Shared<P> {
    crate::sync::loom_const_fn! {
        /// `params` with the state word at `state`.
        pub(crate) fn new(params: P, state: u64) -> Self {
            Shared { params, state: StateWord::new(state) }
        }
    }

    /// The parameters' storage.
    #[inline(always)]
    pub(crate) fn params(&self) -> &P {
        &self.params
    }

    /// The state word.
    #[inline(always)]
    pub(crate) fn state(&self) -> &StateWord {
        &self.state
    }

    /// Both, for `&mut self` reconfiguration.
    pub(crate) fn parts_mut(&mut self) -> (&mut P, &StateWord) {
        (&mut self.params, &self.state)
    }
}

impl<P: Params> Shared<P> {
    /// Admits `cost` cells at `now`: the decision and the state stored, or
    /// the denial. A cost of 0 is a peek (the state returned as read).
    #[inline(always)]
    pub(crate) fn admit(&self, now: u64, cost: u64) -> Result<(Decision, u64), Denied> {
        apply(&self.state, &*self.params.current(), now, cost)
    }

    /// [`admit`](Self::admit) without the stored state.
    #[inline(always)]
    pub(crate) fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit(now, cost).map(|(d, _)| d)
    }

    /// The state at `now`, consuming nothing.
    #[inline]
    pub(crate) fn peek(&self, now: u64) -> Snapshot {
        self.params.current().peek(self.state.load(), now)
    }

    /// Makes the limiter full, as new.
    pub(crate) fn reset(&self) {
        self.state.store(P::Algorithm::NEW)
    }
}

/// The three phases of `algorithm` on one shared `word`: the decision and
/// the state stored, or the denial. Any container of a shared state word
/// (a [`Shared`] limiter, a keyed table's overflow word) runs this.
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
    // A step that admits a cost above 0 changes the state (the contract),
    // so no test for an unchanged value stands between it and the swap.
    let stepped = word.update_storing(|state| {
        algorithm
            .step(state, &prepared)
            .map(|(next, decision)| (next, (decision, next)))
    });
    match stepped {
        Ok(admitted) => Ok(admitted),
        Err(shortfall) => Err(algorithm.denial(&prepared, shortfall)),
    }
}
