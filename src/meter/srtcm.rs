//! RFC 2697, the single rate three colour marker: two TATs on one `T =
//! 1/CIR`, `C` (committed) and `A` (both buckets together).
//!
//! * `A ≥ C` after every step (serial order), `A − now ≤ (CBS + EBS)·T` and
//!   `C − now ≤ CBS·T` at the `now` of the last take.
//! * A shared packet reserves in `A` before it takes from `C`; a
//!   reservation that cannot stand is undone only by a compare-and-swap
//!   that finds `A` exactly as the packet left it.

use super::batch::{Arrivals, Slack};
use super::steps::{shared_batch, Steps};
use super::{Bucket, Color, Flow, MeterError};
use crate::gcra::step;
use crate::quota::Quota;

/// The srTCM of RFC 2697: committed information rate `CIR` (bytes per
/// second), committed and excess burst sizes `CBS` and `EBS` (bytes). `CIR`
/// fills the committed bucket and spills into the excess one only when the
/// committed one is full. A shared, read-only profile for any number of
/// flows. State words `[C, A]`; [`tokens`](super::Meter::tokens) answers
/// `[Tc, Te]`, the RFC's two token counts.
///
/// ```
/// use cellrate::meter::{Color, LocalFlow, Meter, SrTcm};
/// // 10 Gb/s = 1.25·10⁹ B/s on a 1 GHz clock: T = 0.8 ns, exact (scale 5).
/// let meter = SrTcm::new(1_250_000_000, 3_000, 9_000, 1_000_000_000).unwrap();
/// assert!(meter.is_exact());
/// let mut flow = LocalFlow::new();
/// assert_eq!(meter.mark_local(&mut flow, 0, 9_000), Color::Yellow); // jumbo: > CBS
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_500), Color::Green);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrTcm {
    /// `CBS` at `CIR`.
    committed: Bucket,
    /// `CBS + EBS` at `CIR`, the same time base.
    all: Bucket,
    /// `EBS` bytes.
    ebs: u64,
    /// `EBS·T` sub-ticks.
    ebs_span: u64,
}

impl SrTcm {
    /// The srTCM with `cir` bytes per second, `cbs` and `ebs` bytes, on a
    /// clock of `hz` ticks per second; one of `cbs`, `ebs` may be 0. A rate
    /// not exact at `hz` is rounded toward admitting less ([`is_exact`](Self::is_exact)).
    ///
    /// ```
    /// use cellrate::meter::{MeterError, SrTcm};
    /// assert!(SrTcm::new(125_000, 1_500, 3_000, 1_000_000).is_ok());
    /// assert_eq!(SrTcm::new(125_000, 0, 0, 1_000_000), Err(MeterError::NoBucket));
    /// assert!(matches!(SrTcm::new(0, 1_500, 0, 1_000_000), Err(MeterError::ZeroRate)));
    /// ```
    pub const fn new(cir: u64, cbs: u64, ebs: u64, hz: u64) -> Result<SrTcm, MeterError> {
        let Some(total) = cbs.checked_add(ebs) else {
            return Err(MeterError::Overflow);
        };
        if total == 0 {
            return Err(MeterError::NoBucket);
        }
        if cir == 0 {
            return Err(MeterError::ZeroRate);
        }
        let all = match Bucket::new(cir, total, hz) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        let committed = match Bucket::with_size(all.quota, cbs) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        // ebs ≤ total, so ebs·T ≤ total·T = all.span fits.
        let ebs_span = ebs * all.quota.emission_interval();
        Ok(SrTcm {
            committed,
            all,
            ebs,
            ebs_span,
        })
    }

    /// The committed rate as a [`Quota`] (burst `CBS + EBS`).
    ///
    /// ```
    /// use cellrate::meter::SrTcm;
    /// // 1.25·10⁹ B/s at 1 GHz: 4/5 ns per byte, i.e. 4 sub-ticks of 1/5 ns.
    /// let q = SrTcm::new(1_250_000_000, 1_500, 1_500, 1_000_000_000).unwrap().quota();
    /// assert_eq!((q.emission_interval(), q.scale(), q.burst()), (4, 5, 3_000));
    /// ```
    pub const fn quota(&self) -> Quota {
        self.all.quota
    }

    /// Whether `CIR` is represented exactly at the profile's clock.
    ///
    /// ```
    /// use cellrate::meter::SrTcm;
    /// assert!(SrTcm::new(125_000, 1_500, 1_500, 1_000_000).unwrap().is_exact());
    /// // 999 937 B/s on a 1 GHz clock needs more sub-ticks per tick than the
    /// // 8.5-year gap between checks allows: T is rounded up (marks less green).
    /// assert!(!SrTcm::new(999_937, 1_500, 1_500, 1_000_000_000).unwrap().is_exact());
    /// // 100 Gb/s (12.5·10⁹ B/s) at 1 GHz would lose more than 1 %: refused.
    /// use cellrate::{meter::MeterError, QuotaError};
    /// assert_eq!(
    ///     SrTcm::new(12_500_000_000, 15_000, 15_000, 1_000_000_000),
    ///     Err(MeterError::Quota(QuotaError::Unrepresentable))
    /// );
    /// ```
    pub const fn is_exact(&self) -> bool {
        self.all.quota.is_exact()
    }

    /// `(CBS, EBS)` in bytes.
    ///
    /// ```
    /// use cellrate::meter::SrTcm;
    /// assert_eq!(SrTcm::new(1_000, 1_500, 0, 1_000).unwrap().bursts(), (1_500, 0));
    /// ```
    pub const fn bursts(&self) -> (u64, u64) {
        (self.committed.size, self.ebs)
    }

    /// The yellow test: the new `A` if the excess bucket holds `bytes`,
    /// given the committed TAT `c` (a stale, smaller `c` is stricter).
    #[inline(always)]
    fn yellow(&self, c: u64, a: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.ebs {
            return None;
        }
        let next = self.all.take(a, now, bytes)?;
        let c_base = step::base(c, now);
        if step::excess(next, c_base) <= self.ebs_span {
            Some(next)
        } else {
            None
        }
    }

    /// A shared batch whose swap on C lost, its reservation in A kept (A
    /// moved on): the greens take, in order, from the C there is now; those
    /// that no longer fit turn yellow if the excess bucket (a fresh A, the
    /// new C) holds them all, else red, their reservation kept.
    #[cold]
    #[inline(never)]
    fn lost_committed(&self, flow: &Flow, now: u64, sizes: &[u64], out: &mut [Color]) {
        let [committed, all] = &flow.words;
        let (c, c_next, largest_lost) = loop {
            let c = committed.load();
            let (c_next, lost) = self.greens_on(c, now, sizes, out, None);
            if c_next == c || committed.compare_exchange(c, c_next).is_ok() {
                break (c, c_next, lost);
            }
        };
        let Some(largest) = largest_lost else {
            return; // every green still fits
        };
        let c_base = step::base(c_next, now);
        let excess_deficit = step::excess(all.load(), c_base);
        let demoted = if largest <= self.ebs && excess_deficit <= self.ebs_span {
            Color::Yellow
        } else {
            Color::Red
        };
        // Replay the winning pass (the same takes from the same C) to mark
        // the greens that did not fit.
        self.greens_on(c, now, sizes, out, Some(demoted));
    }

    /// The greens (`out[i] == Green`) taken in order from `c`: C after those
    /// that fit, and the largest that does not; `Some(color)` marks those.
    fn greens_on(
        &self,
        c: u64,
        now: u64,
        sizes: &[u64],
        out: &mut [Color],
        demoted: Option<Color>,
    ) -> (u64, Option<u64>) {
        let (mut c, mut largest_lost) = (c, None::<u64>);
        for (&bytes, color) in sizes.iter().zip(out.iter_mut()) {
            if *color != Color::Green {
                continue;
            }
            match self.committed.take(c, now, bytes) {
                Some(next) => c = next,
                None => {
                    largest_lost = Some(largest_lost.map_or(bytes, |l| l.max(bytes)));
                    if let Some(demoted) = demoted {
                        *color = demoted;
                    }
                }
            }
        }
        (c, largest_lost)
    }
}

impl Steps for SrTcm {
    const BOTH: bool = false;

    #[inline(always)]
    fn times(&self, now: u64) -> [u64; 2] {
        let now = self.all.now(now);
        [now, now]
    }

    #[inline(always)]
    fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color {
        // `Bucket::take` on C and A and `yellow`, sharing `B·T` and A's step.
        let now = t[0];
        let [c, a] = *words;
        if bytes > self.all.size || pre == Color::Red {
            // Neither bucket can ever hold it (or it arrived red).
            return Color::Red;
        }
        // bytes ≤ CBS + EBS, so B·T ≤ (CBS + EBS)·T fits.
        let cost = bytes * self.all.quota.emission_interval();
        let c_debt = step::debt(c, now);
        let Some(a_after) = step::charged(step::debt(a, now), cost, self.all.span) else {
            // Not even the two buckets together hold it.
            return Color::Red;
        };
        if pre == Color::Green && bytes <= self.committed.size {
            // bytes ≤ CBS, so B·T ≤ CBS·T.
            if let Some(c_after) = step::charged(c_debt, cost, self.committed.span) {
                *words = [step::later(now, c_after), step::later(now, a_after)];
                return Color::Green;
            }
        }
        // The excess deficit max(A′, now) − max(C, now), both from `now`.
        if bytes <= self.ebs && a_after.saturating_sub(c_debt) <= self.ebs_span {
            words[1] = step::later(now, a_after);
            return Color::Yellow;
        }
        Color::Red
    }

    #[inline(always)]
    fn step_shared(&self, flow: &Flow, t: [u64; 2], bytes: u64, pre: Color) -> Color {
        let now = t[0];
        if pre == Color::Red {
            return Color::Red;
        }
        let [committed, all] = &flow.words;
        let c_seen = committed.load();
        if pre == Color::Green && self.committed.take(c_seen, now, bytes).is_some() {
            // Reserve in A first (a concurrent yellow test sees the bytes in
            // A before it can see them in C), then take from C.
            let reserved = all.update(|a| match self.all.take(a, now, bytes) {
                Some(next) => Ok((next, (a, next))),
                None => Err(()),
            });
            let Ok((a_before, a_after)) = reserved else {
                // A cannot hold the bytes: neither bucket can (A ≥ C).
                return Color::Red;
            };
            let taken = committed.update(|c| match self.committed.take(c, now, bytes) {
                Some(next) => Ok((next, ())),
                None => Err(c),
            });
            match taken {
                Ok(()) => return Color::Green,
                Err(c_now) => {
                    // C emptied meanwhile: yellow if the excess bucket holds
                    // it (`A − C` over-counts greens in flight: errs red).
                    let c_base = step::base(c_now, now);
                    let a_now = all.load();
                    if bytes <= self.ebs && step::excess(a_now, c_base) <= self.ebs_span {
                        return Color::Yellow;
                    }
                    // Red: undo the reservation if A is as we left it, else
                    // keep it (withholding tokens, never granting).
                    let _ = all.compare_exchange(a_after, a_before);
                    return Color::Red;
                }
            }
        }
        match all.update(|a| match self.yellow(c_seen, a, now, bytes) {
            Some(next) => Ok((next, ())),
            None => Err(()),
        }) {
            Ok(()) => Color::Yellow,
            Err(()) => Color::Red,
        }
    }

    #[inline(always)]
    fn intervals(&self) -> [u64; 2] {
        let interval = self.all.quota.emission_interval();
        [interval, interval]
    }
    #[inline(always)]
    fn rooms(&self, slack: [u64; 2]) -> [u64; 2] {
        [
            self.all.whole_bytes(slack[0]),
            self.all.whole_bytes(slack[1]),
        ]
    }

    /// Bases `max(C, now)`, `max(A, now)`; slacks `CBS·T − (max(C, now) −
    /// now)` and `EBS·T − (max(A, now) − max(C, now))`, whose sum is A's
    /// slack, so A's own test is implied.
    #[inline(always)]
    fn slack(&self, [c, a]: [u64; 2], t: [u64; 2]) -> Option<Slack> {
        let now = t[0];
        let (c_base, c_slack) = self.committed.slack(c, now)?;
        let (a_base, _) = self.all.slack(a, now)?;
        let excess_deficit = step::after(a_base, c_base)?;
        let e_slack = self.ebs_span.checked_sub(excess_deficit)?;
        Some(Slack {
            base: [c_base, a_base],
            slack: [c_slack, e_slack],
        })
    }

    /// Green takes from C and A, yellow from A only.
    #[inline(always)]
    fn commit(
        &self,
        [c, a]: [u64; 2],
        slack: &Slack,
        [green, yellow]: [u64; 2],
        [any_green, any_yellow]: [bool; 2],
    ) -> [u64; 2] {
        let [c_base, a_base] = slack.base;
        // green + yellow ≤ the two slacks' sum, A's slack: fits.
        [
            Bucket::after(c, c_base, green, any_green),
            Bucket::after(a, a_base, green + yellow, any_green | any_yellow),
        ]
    }

    #[inline]
    fn batch_shared(
        &self,
        flow: &Flow,
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) {
        // The single packet's order: reserve everything in A first, then
        // take the greens from C. If a concurrent green took from C since,
        // undo the reservation if A is as we left it and start again; if A
        // moved on, the reservation stays (docs/design/meters.md).
        let all = &flow.words[1];
        shared_batch(self, flow, t, sizes, pre, out, 1, |out, a, a_next| {
            if a_next == a || all.compare_exchange(a_next, a).is_ok() {
                return true;
            }
            self.lost_committed(flow, t[0], sizes, out);
            false
        });
    }

    fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
        let now = t[0];
        let [c, a] = words;
        let c_base = step::base(c, now);
        let excess_deficit = step::excess(a, c_base);
        let te = self
            .all
            .whole_bytes(self.ebs_span.saturating_sub(excess_deficit));
        [self.committed.tokens(c, now), te]
    }
}
