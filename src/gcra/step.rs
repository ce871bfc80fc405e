//! The one GCRA step, as pure functions over primitives.
//!
//! Everything here works on sub-tick numbers (see [`quota`](crate::quota)):
//! `tat` the theoretical arrival time, `now` the time of the request, `span`
//! the largest allowed `TAT − now` after an admission (`b·T` for a
//! [`Quota`](crate::Quota) of burst `b` and emission interval `T`; a meter's
//! bucket of `S` bytes uses `S·T`), and `increment` the charge of the request
//! (`cost·T`, at most `span`). A request is admitted iff
//!
//! ```text
//! max(TAT, now) + increment − now ≤ span
//! ```
//!
//! and then `TAT ← max(TAT, now) + increment`. A denial changes nothing and
//! reports a [`Shortfall`]: the state it left (`base = max(TAT, now)`) and
//! the wait `max(TAT, now) + increment − span − now` in sub-ticks before the
//! same request fits. The callers turn numbers into a
//! [`Decision`](crate::Decision) or [`Denied`](crate::Denied) themselves,
//! after the compare-and-swap or critical section (lazily).
//!
//! Two forms of the same step, chosen by the caller:
//!
//! * [`admit`]: the inequality in the form `TAT − now ≤ room` with
//!   `room = span − increment` computed before the state is read
//!   ([`room`]). Between the load and the swap there is a subtract and a
//!   compare, and one add on whichever of `TAT` and `now` is the larger; no
//!   `max`. Valid while `now + span` fits in 64 bits ([`within_horizon`]);
//!   past the horizon the caller denies with [`past_horizon`], a constant.
//! * [`admit_max`]: written with `max`, branch-free but for the decision,
//!   valid for every `now`, with no prepared room: the meters' buckets,
//!   whose charge and span vary per packet and per bucket, take its
//!   admission alone ([`fits_max`]), and the Redis replies' checks take it
//!   whole.
//!
//! Neither divides; [`reserve`] divides once, only to round a wait up to a
//! whole tick when `scale > 1`.

/// A denied step: the state it left unchanged, as `base = max(TAT, now)`,
/// and the sub-ticks `wait` before the same request fits (`u64::MAX`:
/// never, past the horizon).
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// `max(TAT, now)`.
    pub(crate) base: u64,
    /// Sub-ticks until the request would fit.
    pub(crate) wait: u64,
}

/// `span − increment`: how far the TAT may be ahead of `now` for a charge of
/// `increment` to fit. The caller ensures `increment ≤ span`.
#[inline(always)]
pub(crate) const fn room(span: u64, increment: u64) -> u64 {
    span - increment
}

/// Whether `now + span` fits in 64 bits, so [`admit`] can add without
/// overflow. Within a quota's horizon it always does (`now ≤ 2⁶³ − 1`,
/// `span ≤ 2⁶³`); only the saturated `now = u64::MAX` fails it.
#[inline(always)]
pub(crate) const fn within_horizon(now: u64, span: u64) -> bool {
    now.checked_add(span).is_some()
}

/// The denial past the horizon: time has stopped (`max(TAT, now) = now`),
/// and every admission would need a TAT beyond `u64::MAX`.
#[inline(always)]
pub(crate) const fn past_horizon(now: u64) -> Shortfall {
    Shortfall {
        base: now,
        wait: u64::MAX,
    }
}

/// One step in the `room` form: the new TAT, or the shortfall.
///
/// Requires [`within_horizon`]`(now, span)` and `room = span − increment`.
/// `TAT − now ≤ room` (computed wrapping, so a `TAT < now` gives a huge
/// value) is the owing case, the usual one under load: `TAT + increment`.
/// Else `TAT < now` means full: the TAT restarts from `now`. Else the TAT is
/// more than `room` ahead and the request waits `TAT − now − room`.
#[inline(always)]
pub(crate) const fn admit(tat: u64, now: u64, increment: u64, room: u64) -> Result<u64, Shortfall> {
    if let Some(new_tat) = owing(tat, now, increment, room) {
        Ok(new_tat)
    } else if let Some(new_tat) = restart(tat, now, increment) {
        Ok(new_tat)
    } else {
        Err(shortfall(tat, now, room))
    }
}

/// [`admit`]'s second case alone: a full limiter (`TAT < now`) restarts
/// from `now`: `now + increment`. Same requirements as [`admit`].
#[inline(always)]
pub(crate) const fn restart(tat: u64, now: u64, increment: u64) -> Option<u64> {
    if tat < now {
        Some(now + increment)
    } else {
        None
    }
}

/// [`admit`]'s third case alone: the TAT is more than `room` ahead of
/// `now` (neither [`owing`] nor [`restart`] admitted), and the request
/// waits `TAT − now − room`.
#[inline(always)]
pub(crate) const fn shortfall(tat: u64, now: u64, room: u64) -> Shortfall {
    Shortfall {
        base: tat,
        wait: tat - now - room,
    }
}

/// [`admit`]'s first case alone: `TAT + increment` if
/// `now ≤ TAT ≤ now + room` (the state owes, and the charge fits), else
/// `None` (full, or denied: the caller takes another path). Same
/// requirements as [`admit`].
#[inline(always)]
pub(crate) const fn owing(tat: u64, now: u64, increment: u64, room: u64) -> Option<u64> {
    if tat.wrapping_sub(now) <= room {
        Some(tat + increment)
    } else {
        None
    }
}

/// One step in the `max` form: `max(TAT, now) + increment` if it is at most
/// `now + span`, else the shortfall. Valid for every `now`; requires
/// `increment ≤ span`. [`fits_max`] is its admission alone.
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn admit_max(tat: u64, now: u64, increment: u64, span: u64) -> Result<u64, Shortfall> {
    match fits_max(tat, now, increment, span) {
        Some(new_tat) => Ok(new_tat),
        None => Err(shortfall_max(tat, now, increment, span)),
    }
}

/// [`admit_max`] without the shortfall: the new TAT, or `None`. The form
/// the meters' buckets take, with their own span `S·T`: a packet path
/// that drops the shortfall compiles to one branch to its red exit (built
/// from a `Result` and `.ok()`, the denied and the unchanged exits merged
/// and were tested again, measured about 5 % slower per shared trTCM mark).
#[allow(dead_code)]
#[inline(always)]
pub(crate) const fn fits_max(tat: u64, now: u64, increment: u64, span: u64) -> Option<u64> {
    let base = if tat > now { tat } else { now };
    match base.checked_add(increment) {
        Some(new_tat) if new_tat - now <= span => Some(new_tat),
        _ => None,
    }
}

/// [`admit_max`]'s shortfall, for a step [`fits_max`] refused.
#[allow(dead_code)]
#[cold]
#[inline]
fn shortfall_max(tat: u64, now: u64, increment: u64, span: u64) -> Shortfall {
    let base = if tat > now { tat } else { now };
    Shortfall {
        base,
        wait: match base.checked_add(increment) {
            Some(new_tat) => new_tat - now - span,
            None => overflow_wait(base, now, increment, span),
        },
    }
}

/// The wait when `base + increment` overflows 64 bits: still exact when the
/// TAT is far ahead (`base − now` past the room `span − increment`);
/// `u64::MAX` (never) only past the horizon, where time has stopped.
// Inlinable, though cold: a caller that drops the shortfall (the meters'
// buckets) is then left with no call on its path.
#[allow(dead_code)]
#[cold]
#[inline]
fn overflow_wait(base: u64, now: u64, increment: u64, span: u64) -> u64 {
    match (base - now).checked_sub(span - increment) {
        Some(wait) if wait > 0 => wait,
        _ => u64::MAX,
    }
}

/// The sub-ticks before one more cell of `interval` sub-ticks would fit:
/// `max(TAT − now, 0) + interval − span`, floored at 0, with
/// `until_full = max(TAT − now, 0)`.
#[inline(always)]
pub(crate) const fn wait_for_one(until_full: u64, interval: u64, span: u64) -> u64 {
    // until_full + interval − span, without a sum that could overflow
    // (span ≥ interval).
    until_full.saturating_sub(span - interval)
}

/// The TAT after giving back `give_back` sub-ticks at `now`: never earlier
/// than `now` (a full limiter cannot get fuller), unchanged when already
/// full.
#[inline(always)]
pub(crate) const fn refund(tat: u64, now: u64, give_back: u64) -> u64 {
    if tat <= now {
        return tat;
    }
    let back = tat.saturating_sub(give_back);
    if back > now {
        back
    } else {
        now
    }
}

/// A reservation's numbers: the new TAT, `until_full = TAT′ − now` as the
/// decision reports it, and the sub-ticks after `now` at which the cells go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reserved {
    pub(crate) tat: u64,
    pub(crate) until_full: u64,
    pub(crate) wait: u64,
}

/// Shaping: send `increment` sub-ticks of cells at the earliest conforming
/// time, if it is at most `max_wait` sub-ticks after `now`.
///
/// The wait `max(TAT, now) − now + increment − span` (floored at 0) is
/// rounded up to a multiple of `scale` (a whole tick: the caller can only
/// send on a tick), and `TAT ← max(TAT, send) + increment`. With
/// `increment = 0` nothing is stored and the wait is reported as is. The
/// rounding is this module's one division, and only when a wait is needed at
/// `scale > 1`. `max_wait` must be a whole number of ticks in sub-ticks, so
/// that `⌈wait/scale⌉ ≤ max_wait/scale ⇔ wait ≤ max_wait`.
#[inline(always)]
pub(crate) fn reserve(
    tat: u64,
    now: u64,
    increment: u64,
    span: u64,
    scale: u64,
    max_wait: u64,
) -> Result<Reserved, Shortfall> {
    let base = if tat > now { tat } else { now };
    // base − now + increment − span without a sum that could overflow.
    let wait = (base - now).saturating_sub(span - increment);
    if wait > max_wait {
        return Err(Shortfall {
            base,
            wait: wait - max_wait,
        });
    }
    if increment == 0 {
        return Ok(Reserved {
            tat,
            until_full: base - now,
            wait,
        });
    }
    let aligned = if scale == 1 || wait == 0 {
        Some(wait)
    } else {
        wait.div_ceil(scale).checked_mul(scale)
    };
    let never = Shortfall {
        base,
        wait: u64::MAX,
    };
    let Some((wait, send)) =
        aligned.and_then(|wait| now.checked_add(wait).map(|send| (wait, send)))
    else {
        return Err(never);
    };
    let Some(new_tat) = tat.max(send).checked_add(increment) else {
        return Err(never);
    };
    Ok(Reserved {
        tat: new_tat,
        until_full: new_tat - now,
        wait,
    })
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    /// The reference: the inequality as written, in 128-bit arithmetic.
    fn reference(tat: u64, now: u64, increment: u64, span: u64) -> Result<u64, Shortfall> {
        let base = tat.max(now) as u128;
        let new_tat = base + increment as u128;
        let wait = new_tat.saturating_sub(now as u128 + span as u128);
        if wait == 0 && new_tat <= u64::MAX as u128 {
            Ok(new_tat as u64)
        } else {
            Err(Shortfall {
                base: base as u64,
                wait: if new_tat > u64::MAX as u128 && wait == 0 {
                    u64::MAX
                } else {
                    wait.min(u64::MAX as u128) as u64
                },
            })
        }
    }

    #[test]
    fn both_forms_agree_with_the_inequality() {
        let span = 1_000;
        for tat in [0, 1, 400, 999, 1_000, 1_001, 1_500, 2_000, 2_999, 5_000] {
            for now in [0, 1, 500, 1_000, 1_999, 2_000] {
                for increment in [1, 100, 999, 1_000] {
                    let want = reference(tat, now, increment, span);
                    assert_eq!(admit_max(tat, now, increment, span), want);
                    assert_eq!(fits_max(tat, now, increment, span), want.ok());
                    assert!(within_horizon(now, span));
                    assert_eq!(admit(tat, now, increment, room(span, increment)), want);
                }
            }
        }
    }

    #[test]
    fn the_max_form_is_exact_near_the_top_of_the_range() {
        let span = 1 << 62;
        for tat in [u64::MAX - 5, u64::MAX] {
            for now in [0, 1 << 63, u64::MAX - (1 << 62)] {
                for increment in [1, 1 << 61, 1 << 62] {
                    let got = admit_max(tat, now, increment, span);
                    let want = reference(tat, now, increment, span);
                    assert_eq!(got, want, "tat {tat} now {now} increment {increment}");
                    assert_eq!(fits_max(tat, now, increment, span), want.ok());
                }
            }
        }
        // Past the horizon nothing fits, ever.
        assert_eq!(admit_max(0, u64::MAX, 1, span).unwrap_err().wait, u64::MAX);
        assert!(!within_horizon(u64::MAX, span));
        assert_eq!(past_horizon(u64::MAX).wait, u64::MAX);
    }

    #[test]
    fn refunds_never_overfill() {
        assert_eq!(refund(500, 1_000, 100), 500);
        assert_eq!(refund(1_500, 1_000, 100), 1_400);
        assert_eq!(refund(1_500, 1_000, 700), 1_000);
        assert_eq!(refund(1_500, 1_000, u64::MAX), 1_000);
    }

    #[test]
    fn reservations_wait_whole_ticks() {
        // span 30, T 10, scale 4: TAT 35 at now 0 leaves room for 10 at 15.
        let r = reserve(35, 0, 10, 30, 4, 40).unwrap();
        assert_eq!((r.wait, r.tat, r.until_full), (16, 45, 45));
        assert_eq!(reserve(35, 0, 10, 30, 4, 12).unwrap_err().wait, 3);
        let peek = reserve(35, 0, 0, 30, 4, 40).unwrap();
        assert_eq!((peek.tat, peek.wait), (35, 5));
    }
}
