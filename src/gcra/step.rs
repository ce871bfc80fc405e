//! The one GCRA step, as pure functions over primitives, in serial time.
//!
//! Numbers are sub-ticks modulo 2⁶³; a **state word** holds a TAT as
//! `2·TAT + 1` (mod 2⁶⁴), and `now` arrives as a word too ([`word`]). The
//! state is read at `now` as `e = (state − now).rotate_right(1)`
//! ([`ahead`]): the TAT is ahead by `e` iff `e <` [`AHEAD`], else idle. A
//! request is admitted iff `debt + increment ≤ span` (`span ≤` [`REACH`],
//! `increment = cost·T ≤ span`), then `TAT ← now + debt + increment`.
//! [`admit`] is that test as `e ≤ room`, `room = span − increment`
//! prepared before the load; [`fits`] is the debt form the meters use.
//! Nothing here divides but [`reserve`]. Why these forms, with the
//! proofs and measurements: docs/design/gcra.md, "Serial time".

/// How far ahead of `now` a TAT may be read: a state whose TAT is less
/// than `AHEAD = 2⁶²` sub-ticks ahead of `now` (serial-number order, RFC
/// 1982) owes; any other is idle.
pub(crate) const AHEAD: u64 = 1 << 62;

/// How far ahead of the `now` that writes it a state may be: every write
/// (an admission within a span of at most `REACH`, a reservation, a lease,
/// a refund) leaves the TAT at most `REACH = 2⁶¹` sub-ticks ahead.
pub(crate) const REACH: u64 = 1 << 61;

/// The state word of the TAT `sub` (sub-ticks, mod 2⁶³): `2·sub + 1`. Also
/// `now` as a word, as [`ahead`] and [`later`] take it.
#[inline(always)]
pub(crate) const fn word(sub: u64) -> u64 {
    (sub << 1) | 1
}

/// `e`: how far the TAT of `state` is ahead of `now` (a word), modulo 2⁶³;
/// at least 2⁶³ for an even word (never written by GCRA). The TAT is ahead
/// iff `e <` [`AHEAD`].
#[inline(always)]
pub(crate) const fn ahead(state: u64, now: u64) -> u64 {
    state.wrapping_sub(now).rotate_right(1)
}

/// The debt of `state` at `now`: [`ahead`] if the TAT is ahead, else 0.
#[inline(always)]
pub(crate) const fn debt(state: u64, now: u64) -> u64 {
    let e = ahead(state, now);
    if e < AHEAD {
        e
    } else {
        0
    }
}

/// The word of the TAT `by` sub-ticks after that of `word` (`by < 2⁶³`).
#[inline(always)]
pub(crate) const fn later(word: u64, by: u64) -> u64 {
    word.wrapping_add(by << 1)
}

/// The serial difference `a − b` of two words GCRA wrote (both odd), if
/// `a` is not before `b`; `None` if it is. Exact while they are less than
/// [`AHEAD`] apart.
#[inline(always)]
pub(crate) const fn after(a: u64, b: u64) -> Option<u64> {
    let d = ahead(a, b);
    if d < AHEAD {
        Some(d)
    } else {
        None
    }
}

/// `max(TAT, now)` in serial order, as a word: `state` if its TAT is
/// ahead of `now`, else `now`.
#[inline(always)]
pub(crate) const fn base(state: u64, now: u64) -> u64 {
    if ahead(state, now) < AHEAD {
        state
    } else {
        now
    }
}

/// `a − b` for two words GCRA wrote, floored at 0 (serial order; see
/// [`after`]).
#[inline(always)]
pub(crate) const fn excess(a: u64, b: u64) -> u64 {
    match after(a, b) {
        Some(d) => d,
        None => 0,
    }
}

/// Whether `state` is idle at `now`: its TAT is not ahead (`e ≥ AHEAD`, or
/// exactly `now`), or it is a word GCRA never wrote.
#[inline(always)]
pub(crate) const fn is_idle(state: u64, now: u64) -> bool {
    let e = ahead(state, now);
    e == 0 || e >= AHEAD
}

/// A denied step: the debt it saw (`TAT − now`, 0 for an idle state) and
/// the sub-ticks `wait` before the same request fits (`u64::MAX`: never,
/// a reservation beyond [`REACH`]).
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// `TAT − now` (0 if idle).
    pub(crate) debt: u64,
    /// Sub-ticks until the request would fit.
    pub(crate) wait: u64,
}

/// `span − increment`: how far the TAT may be ahead of `now` for a charge of
/// `increment` to fit. The caller ensures `increment ≤ span`.
#[inline(always)]
pub(crate) const fn room(span: u64, increment: u64) -> u64 {
    span - increment
}

/// A charge prepared for [`admit`] before the state is read, in word units,
/// so nothing is shifted between the load and the store.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Charge {
    /// `cost·T`, sub-ticks.
    pub(crate) increment: u64,
    /// `2·increment`: what an admission adds to a word.
    added: u64,
    /// `2·(span − increment)`: the room in word units.
    room: u64,
}

impl Charge {
    #[inline(always)]
    pub(crate) const fn room(&self) -> u64 {
        self.room
    }

    /// The charge of `increment ≤ span` sub-ticks against `span`.
    #[inline(always)]
    pub(crate) const fn new(span: u64, increment: u64) -> Charge {
        Charge {
            increment,
            added: increment << 1,
            room: room(span, increment) << 1,
        }
    }
}

/// One step: the new state word and its debt `TAT′ − now`, or, denied, the
/// distance `d = state − now` (word units) that
/// [`shortfall`](crate::decision::shortfall) reads later. Owing with
/// `e ≤ room`: `state + 2·increment`; idle: `now + 2·increment`; else
/// denied.
#[inline(always)]
pub(crate) const fn admit(state: u64, now: u64, charge: &Charge) -> Result<(u64, u64), u64> {
    // For a written (odd) word `d = 2·e`, so `e ≤ room ⇔ d ≤ 2·room` and
    // `e ≥ AHEAD ⇔ d ≥ 2⁶³`; an even word is idle. The parity test reads
    // the word alone, beside the subtract.
    let d = state.wrapping_sub(now);
    let written = state & 1 == 1;
    if written && d <= charge.room {
        Ok((
            state.wrapping_add(charge.added),
            (d >> 1) + charge.increment,
        ))
    } else if !written || (d as i64) < 0 {
        Ok((now.wrapping_add(charge.added), charge.increment))
    } else {
        Err(d)
    }
}

/// [`admit`]'s admission in the debt form (the meters' buckets): the word
/// `now + debt + increment` if `debt + increment ≤ span`, else `None`.
#[inline(always)]
pub(crate) const fn fits(state: u64, now: u64, increment: u64, span: u64) -> Option<u64> {
    match charged(debt(state, now), increment, span) {
        Some(after) => Some(later(now, after)),
        None => None,
    }
}

/// The debt after a charge of `increment` on a state that owes `debt`
/// (`< 2⁶²`), if it fits the span: `debt + increment ≤ span`.
#[inline(always)]
pub(crate) const fn charged(debt: u64, increment: u64, span: u64) -> Option<u64> {
    // debt < 2⁶², increment ≤ span ≤ 2⁶¹: no overflow.
    let after = debt + increment;
    if after <= span {
        Some(after)
    } else {
        None
    }
}

/// The sub-ticks before one more cell of `interval` sub-ticks would fit:
/// `debt + interval − span`, floored at 0.
#[inline(always)]
pub(crate) const fn wait_for_one(debt: u64, interval: u64, span: u64) -> u64 {
    debt.saturating_sub(span - interval)
}

/// The state after giving back `give_back` sub-ticks at `now` (a word):
/// the debt less `give_back`, never below 0; an idle state is kept.
#[inline(always)]
pub(crate) const fn refund(state: u64, now: u64, give_back: u64) -> u64 {
    if is_idle(state, now) {
        return state;
    }
    later(now, ahead(state, now).saturating_sub(give_back))
}

/// A reservation's numbers: the new state word, `until_full = TAT′ − now`
/// as the decision reports it, and the sub-ticks after `now` at which the
/// cells go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reserved {
    pub(crate) state: u64,
    pub(crate) until_full: u64,
    pub(crate) wait: u64,
}

/// Shaping: send `increment` sub-ticks of cells at the earliest conforming
/// time, if at most `max_wait` (whole ticks, in sub-ticks) after `now`. The
/// wait `debt + increment − span` is rounded up to a whole tick (the one
/// division) and the debt becomes `max(debt, wait) + increment`; past
/// [`REACH`] it is refused with no finite wait.
#[inline(always)]
pub(crate) fn reserve(
    state: u64,
    now: u64,
    increment: u64,
    span: u64,
    scale: u64,
    max_wait: u64,
) -> Result<Reserved, Shortfall> {
    let debt = debt(state, now);
    let wait = debt.saturating_sub(span - increment);
    if wait > max_wait {
        return Err(Shortfall {
            debt,
            wait: wait - max_wait,
        });
    }
    if increment == 0 {
        return Ok(Reserved {
            state,
            until_full: debt,
            wait,
        });
    }
    // wait ≤ debt < 2⁶², scale ≤ 2⁶³: a saturated product only refuses.
    let aligned = if scale == 1 || wait == 0 {
        wait
    } else {
        wait.div_ceil(scale).saturating_mul(scale)
    };
    let until_full = match (if debt > aligned { debt } else { aligned }).checked_add(increment) {
        Some(d) if d <= REACH => d,
        _ => {
            return Err(Shortfall {
                debt,
                wait: u64::MAX,
            })
        }
    };
    Ok(Reserved {
        state: later(now, until_full),
        until_full,
        wait: aligned,
    })
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    /// The quota's longest gap between checks is serial time's half-range.
    #[test]
    fn the_quota_gap_is_the_serial_half_range() {
        assert_eq!(AHEAD, crate::quota::GAP);
    }

    /// The reference: TATs and times as plain (unbounded) integers, the
    /// inequality as written.
    fn reference(tat: i128, now: i128, increment: u64, span: u64) -> Result<i128, (u64, u64)> {
        let base = tat.max(now);
        let debt = (base - now) as u64;
        let new_tat = base + increment as i128;
        if new_tat - now <= span as i128 {
            Ok(new_tat)
        } else {
            Err((debt, (new_tat - now - span as i128) as u64))
        }
    }

    /// `tat` and `now` as words after shifting both by `origin`.
    fn words(tat: i128, now: i128, origin: u64) -> (u64, u64) {
        let at = |t: i128| word((t as u64).wrapping_add(origin));
        (at(tat), at(now))
    }

    const ORIGINS: [u64; 6] = [0, 1, 1 << 62, (1 << 63) + 1, u64::MAX, u64::MAX - 1_500];

    #[test]
    fn the_step_agrees_with_the_inequality_at_every_origin() {
        let span = 1_000;
        for tat in [0i128, 1, 400, 999, 1_000, 1_001, 1_500, 2_000, 2_999] {
            for now in [0i128, 1, 500, 1_000, 1_999, 2_000] {
                for increment in [1, 100, 999, 1_000] {
                    let want = reference(tat, now, increment, span);
                    for origin in ORIGINS {
                        let (state, at) = words(tat, now, origin);
                        let got = admit(state, at, &Charge::new(span, increment));
                        match (got, want) {
                            (Ok((next, debt)), Ok(new_tat)) => {
                                assert_eq!(
                                    (next, debt as i128),
                                    (words(new_tat, 0, origin).0, new_tat - now)
                                );
                            }
                            (Err(d), Err((debt, wait))) => {
                                let s = crate::decision::shortfall(
                                    d,
                                    Charge::new(span, increment).room(),
                                );
                                assert_eq!(s, (debt, wait));
                            }
                            other => panic!("{other:?} at tat {tat} now {now} origin {origin}"),
                        }
                        assert_eq!(fits(state, at, increment, span).is_some(), want.is_ok());
                    }
                }
            }
        }
    }

    #[test]
    fn a_word_never_written_is_idle_at_every_now() {
        for now in [0, 1, 1 << 62, 1 << 63, u64::MAX] {
            let at = word(now);
            for even in [0, 2, 1 << 63, u64::MAX - 1] {
                assert!(is_idle(even, at));
                assert_eq!(debt(even, at), 0);
                assert_eq!(
                    admit(even, at, &Charge::new(100, 10)),
                    Ok((later(at, 10), 10))
                );
            }
        }
    }

    #[test]
    fn states_read_exactly_within_the_bounds() {
        // Written at 0 with debt o ≤ REACH, read at δ in (−(AHEAD − REACH), AHEAD].
        let lag = (AHEAD - REACH) as i128;
        for o in [0, 1, 1_000, REACH - 1, REACH] {
            for delta in [1 - lag, -1, 0, 1, o as i128, o as i128 + 1, AHEAD as i128] {
                for origin in ORIGINS {
                    let (state, at) = words(o as i128, delta, origin);
                    let want = (o as i128 - delta).max(0) as u64;
                    assert_eq!(debt(state, at), want, "o {o} δ {delta} origin {origin}");
                    assert_eq!(is_idle(state, at), want == 0);
                }
            }
        }
        // The bound is open below: a lag of 2⁶¹ behind a state 2⁶¹ ahead
        // would owe 2⁶² and reads idle.
        let (state, at) = words(REACH as i128, -lag, 0);
        assert!(is_idle(state, at));
    }

    #[test]
    fn refunds_never_overfill() {
        let at = |t: u64| word(t);
        assert_eq!(refund(at(500), at(1_000), 100), at(500));
        assert_eq!(refund(at(1_500), at(1_000), 100), at(1_400));
        assert_eq!(refund(at(1_500), at(1_000), 700), at(1_000));
        assert_eq!(refund(at(1_500), at(1_000), u64::MAX), at(1_000));
        assert_eq!(refund(0, at(1_000), 5), 0);
    }

    #[test]
    fn reservations_wait_whole_ticks_and_stay_within_reach() {
        let at = |t: u64| word(t);
        // span 30, T 10, scale 4: TAT 35 at now 0 leaves room for 10 at 15.
        let r = reserve(at(35), at(0), 10, 30, 4, 40).unwrap();
        assert_eq!((r.wait, r.state, r.until_full), (16, at(45), 45));
        assert_eq!(reserve(at(35), at(0), 10, 30, 4, 12).unwrap_err().wait, 3);
        let peek = reserve(at(35), at(0), 0, 30, 4, 40).unwrap();
        assert_eq!((peek.state, peek.wait), (at(35), 5));
        // A queue that would end more than REACH ahead is refused for good.
        let deep = at(REACH - 5);
        assert_eq!(
            reserve(deep, at(0), 10, 30, 1, u64::MAX).unwrap_err().wait,
            u64::MAX
        );
        assert!(reserve(deep, at(0), 5, 30, 1, u64::MAX).is_ok());
    }
}
