//! [`Quota`]'s [`Algorithm`]: the GCRA steps ([`step`](super::step)) as
//! the three phases every container runs.

use super::step as gcra_step;
use crate::algorithm::Params;
use crate::decision::Usage;
use crate::sync::{QuotaCell, StateWord};
use crate::{Algorithm, Decision, Denied, Limited, Quota, Snapshot};

impl Quota {
    /// `now` as a state word (see [serial time](crate::Gcra#serial-time)): its
    /// sub-ticks `now · scale` modulo 2⁶⁴ (then 2⁶³), never saturated.
    #[inline(always)]
    pub(crate) const fn now_word(&self, now: u64) -> u64 {
        gcra_step::word(now.wrapping_mul(self.scale()))
    }

    /// The charge of one cell, `T` against the span: what
    /// [`prepare`](Algorithm::prepare) computes for a cost of 1 (a quota's
    /// burst and `T` are at least 1, so that cost is never refused and the
    /// charge is `T` itself), kept by a limiter whose quota never changes.
    #[inline(always)]
    pub(crate) const fn charge_of_one(&self) -> gcra_step::Charge {
        gcra_step::Charge::new(self.span(), self.emission_interval())
    }

    /// Admits one cell at `now` on `word` with the charge `one` kept from
    /// [`charge_of_one`](Self::charge_of_one): the decision or denial that
    /// [`check`](Algorithm::check) gives for a cost of 1 on the same word,
    /// by the same [`step`](Algorithm::step), through
    /// [`StateWord::update_first_inline`] (no loop unless a
    /// compare-and-swap fails).
    #[inline(always)]
    pub(crate) fn check_one_kept(
        &self,
        word: &StateWord,
        now: u64,
        one: &gcra_step::Charge,
    ) -> Result<Decision, Denied> {
        let prepared = GcraPrepared {
            now: self.now_word(now),
            charge: *one,
        };
        // The step holds `now` and a reference to the kept charge, nothing
        // that a retry (out of line) would need copied to memory first.
        let at = prepared.now;
        match word.update_first_inline(move |state| gcra_step::admit(state, at, one)) {
            Ok(debt) => Ok(Decision::from_usage(Usage::gcra(self, debt))),
            Err(distance) => Err(self.denial(&prepared, GcraShortfall(distance))),
        }
    }
}

/// What [`Quota`]'s [`prepare`](Algorithm::prepare) computes: `now` as a
/// state word (its sub-ticks, see [serial time](crate::Gcra#serial-time)), the
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

impl GcraPrepared {
    /// The charge prepared (for the tests of a kept one).
    #[cfg(all(test, not(feature = "loom")))]
    pub(crate) fn charge(&self) -> gcra_step::Charge {
        self.charge
    }
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
        let increment = super::charge(self, cost)?.max(1);
        Ok(GcraPrepared {
            now,
            charge: gcra_step::Charge::new(self.span(), increment),
        })
    }

    /// [`step::admit`](crate::Gcra#the-math): a parity test, a
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
        // Kept as the step saw it: debt, wait and slack are computed by
        // the accessors, if any is read.
        Denied::Limited(Limited::from_gcra_step(self, shortfall.0, p.charge.room()))
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        super::snapshot(self, state, self.now_word(now))
    }

    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        gcra_step::is_idle(state, self.now_word(now))
    }

    /// The admission's `now`: a refund moves the TAT back from there.
    #[inline]
    fn mark(&self, _stored: u64, now: u64) -> u64 {
        now
    }

    #[inline]
    fn mark_at(&self, now: u64) -> u64 {
        now
    }

    /// The debt at `mark` less `cost·T`, never below 0 (a full limiter
    /// cannot get fuller), and unchanged when already full.
    #[inline]
    fn refund(&self, state: u64, mark: u64, cost: u64) -> u64 {
        super::refund(self, state, self.now_word(mark), cost)
    }

    /// The debt kept **as cells used**: owing `d` sub-ticks at `now` is
    /// `d/T` cells, which owe `d′ = min(⌈d·T′/T⌉, span′)` sub-ticks of the
    /// new quota (at its own scale). At that instant the new quota admits
    /// exactly `max(0, a + burst′ − burst)` cells where the old admitted
    /// `a` (proof: docs/design/reconfigure.md), so a change that raises the
    /// burst never refuses what the old admitted, and one that lowers it
    /// never admits what the old refused. An idle word stays idle.
    fn translate(&self, state: u64, now: u64, new: &Self) -> u64 {
        let debt = gcra_step::debt(state, self.now_word(now));
        if debt == 0 {
            return <Quota as Algorithm>::NEW;
        }
        let cells = debt as u128 * new.emission_interval() as u128;
        let debt = cells
            .div_ceil(self.emission_interval() as u128)
            .min(new.span() as u128) as u64;
        gcra_step::later(new.now_word(now), debt)
    }
}

/// A GCRA limiter whose quota `set_quota` replaces through `&self` reads
/// it whole from its cell once per operation.
impl Params for QuotaCell {
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
