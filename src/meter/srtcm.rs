//! RFC 2697, the single rate three colour marker; see the [meter module
//! docs](super) for the math (two TATs `C` and `A` on one `T = 1/CIR`).

use super::sealed::Steps;
use super::{Bucket, Color, Flow, MeterError};
use crate::quota::Quota;

/// The srTCM of RFC 2697: committed information rate `CIR` (bytes per
/// second), committed burst size `CBS` and excess burst size `EBS` (bytes).
/// A shared, read-only profile for any number of flows.
///
/// State words: `[C, A]` (the committed bucket's TAT and the TAT of both
/// buckets together); [`tokens`](super::Meter::tokens) answers
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
    /// clock of `hz` ticks per second. One of `cbs`, `ebs` may be 0 (RFC 2697
    /// requires at least one above 0; it recommends each at least the largest
    /// packet). The rate is rounded toward admitting less if it is not exact
    /// at `hz` (see [`is_exact`](Self::is_exact)).
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

    /// The committed rate as a [`Quota`] (burst `CBS + EBS`): its
    /// [`effective_rate`](Quota::effective_rate) is what the meter enforces.
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
    /// // 34-year horizon allows: T is rounded up (marks less green).
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

    /// The words after `total` bytes of green packets at sub-tick `now`, if
    /// both C and A hold them (then every prefix is green too).
    #[inline(always)]
    fn all_green_at(&self, words: [u64; 2], now: u64, total: u64) -> Option<[u64; 2]> {
        let c = self.committed.take(words[0], now, total)?;
        let a = self.all.take(words[1], now, total)?;
        Some([c, a])
    }

    /// The three rooms of a batch in whole bytes at sub-tick `now`, or `None`
    /// for a state a batch should step through packet by packet (past a
    /// span, `A` behind `C`, or at the horizon).
    #[inline(always)]
    fn rooms(&self, [c, a]: [u64; 2], now: u64) -> Option<Rooms> {
        let (c_base, room_c) = self.committed.room(c, now)?;
        let (a_base, room_a) = self.all.room(a, now)?;
        let excess_deficit = a_base.checked_sub(c_base)?;
        let excess_slack = self.ebs_span.checked_sub(excess_deficit)?;
        Some(Rooms {
            c_base,
            a_base,
            room_c,
            room_a,
            room_e: excess_slack / self.all.quota.emission_interval(),
        })
    }

    /// The yellow test: the new `A` if the excess bucket holds `bytes`,
    /// given the committed TAT `c` (a stale, smaller `c` only makes this
    /// stricter). Also keeps `A − now ≤ (CBS + EBS)·T`.
    #[inline(always)]
    fn yellow(&self, c: u64, a: u64, now: u64, bytes: u64) -> Option<u64> {
        if bytes > self.ebs {
            return None;
        }
        let next = self.all.take(a, now, bytes)?;
        let c_base = if c > now { c } else { now };
        if next.saturating_sub(c_base) <= self.ebs_span {
            Some(next)
        } else {
            None
        }
    }
}

/// A batch's view of an srTCM flow: `max(C, now)`, `max(A, now)` and the
/// whole bytes the committed, total and excess buckets hold.
struct Rooms {
    c_base: u64,
    a_base: u64,
    room_c: u64,
    room_a: u64,
    room_e: u64,
}

// The batch loop indexes two slices and a closure by one index.
#[allow(clippy::needless_range_loop)]
impl Steps for SrTcm {
    #[inline(always)]
    fn times(&self, now: u64) -> [u64; 2] {
        let now = self.all.now(now);
        [now, now]
    }

    #[inline(always)]
    fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color {
        // The same tests as `Bucket::take` on C and A and as `yellow`, with
        // the shared parts computed once: one multiply `B·T` (both buckets
        // run on `T = 1/CIR`) and one `max(A, now) + B·T`.
        let now = t[0];
        let [c, a] = *words;
        if bytes > self.all.size || pre == Color::Red {
            // Neither bucket can ever hold it (or it arrived red).
            return Color::Red;
        }
        // bytes ≤ CBS + EBS, so B·T ≤ (CBS + EBS)·T fits.
        let cost = bytes * self.all.quota.emission_interval();
        let a_base = if a > now { a } else { now };
        let c_base = if c > now { c } else { now };
        let Some(a_next) = a_base.checked_add(cost) else {
            return Color::Red;
        };
        if a_next - now > self.all.span {
            // Not even the two buckets together hold it.
            return Color::Red;
        }
        if pre == Color::Green && bytes <= self.committed.size {
            if let Some(c_next) = c_base.checked_add(cost) {
                if c_next - now <= self.committed.span {
                    *words = [c_next, a_next];
                    return Color::Green;
                }
            }
        }
        if bytes <= self.ebs && a_next.saturating_sub(c_base) <= self.ebs_span {
            words[1] = a_next;
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
            // Green looks possible. Reserve in A first (so a concurrent yellow
            // test sees the bytes in A before it can see them in C), then take
            // from C.
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
                    // A concurrent packet emptied C. Our reservation stands
                    // as yellow if the excess bucket holds it. A read after
                    // C holds every reservation, ours included, and C at most
                    // the completed greens: `A − C` over-counts the excess
                    // bucket's deficit by the greens still in flight, so the
                    // test errs toward red.
                    let c_base = if c_now > now { c_now } else { now };
                    let a_now = all.load();
                    if bytes <= self.ebs && a_now.saturating_sub(c_base) <= self.ebs_span {
                        return Color::Yellow;
                    }
                    // Red: give the reservation back if A is as we left it
                    // (then it is exactly undone); otherwise keep it, which
                    // only withholds tokens from later packets.
                    let _ = all.update(|a| {
                        if a == a_after {
                            Ok((a_before, ()))
                        } else {
                            Err(())
                        }
                    });
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
    fn all_green(&self, words: [u64; 2], t: [u64; 2], total: u64) -> Option<[u64; 2]> {
        self.all_green_at(words, t[0], total)
    }

    #[inline]
    fn batch_local<P: Fn(usize) -> Color>(
        &self,
        words: &mut [u64; 2],
        t: [u64; 2],
        sizes: &[u64],
        pre: P,
        out: &mut [Color],
    ) {
        if self.batch_all_green(words, t, sizes, &pre, out) {
            return;
        }
        let n = sizes.len().min(out.len());
        let Some(rooms) = self.rooms(*words, t[0]) else {
            for i in 0..n {
                out[i] = self.step(words, t, sizes[i], pre(i));
            }
            return;
        };
        // In whole bytes at this `now` (see the module docs): green needs
        // `B ≤ room_c` and `B ≤ room_a`, yellow `B ≤ room_e` and `B ≤ room_a`;
        // green leaves `max(A, now) − max(C, now)`, hence `room_e`, as it is.
        let Rooms {
            c_base,
            a_base,
            mut room_c,
            mut room_a,
            mut room_e,
        } = rooms;
        let (mut taken_c, mut taken_a) = (0u64, 0u64);
        let (mut any_c, mut any_a) = (false, false);
        for i in 0..n {
            let bytes = sizes[i];
            let pre = pre(i);
            out[i] = if pre == Color::Green && bytes <= room_c && bytes <= room_a {
                room_c -= bytes;
                room_a -= bytes;
                taken_c += bytes;
                taken_a += bytes;
                any_c = true;
                any_a = true;
                Color::Green
            } else if pre != Color::Red && bytes <= room_e && bytes <= room_a {
                room_e -= bytes;
                room_a -= bytes;
                taken_a += bytes;
                any_a = true;
                Color::Yellow
            } else {
                Color::Red
            };
        }
        // taken_c ≤ CBS, taken_a ≤ CBS + EBS: the products fit, and the sums
        // stay within now + span (checked by `rooms`).
        let interval = self.all.quota.emission_interval();
        if any_c {
            words[0] = c_base + taken_c * interval;
        }
        if any_a {
            words[1] = a_base + taken_a * interval;
        }
    }

    #[inline]
    fn batch_shared<P: Fn(usize) -> Color>(
        &self,
        flow: &Flow,
        t: [u64; 2],
        sizes: &[u64],
        pre: P,
        out: &mut [Color],
    ) {
        let now = t[0];
        let [committed, all] = &flow.words;
        // A conforming burst of green-coloured packets: the single-packet
        // green protocol (reserve in A, then take from C) for the total.
        let all_green_coloured = (0..sizes.len()).all(|i| pre(i) == Color::Green);
        let total = super::batch_total(sizes.iter().copied()).filter(|&total| total > 0);
        if let (true, Some(total)) = (all_green_coloured, total) {
            if self.committed.take(committed.load(), now, total).is_some() {
                let reserved = all.update(|a| match self.all.take(a, now, total) {
                    Some(next) => Ok((next, (a, next))),
                    None => Err(()),
                });
                if let Ok((a_before, a_after)) = reserved {
                    let taken = committed.update(|c| match self.committed.take(c, now, total) {
                        Some(next) => Ok((next, ())),
                        None => Err(()),
                    });
                    if taken.is_ok() {
                        out.fill(Color::Green);
                        return;
                    }
                    // Lost a race for C: undo the reservation if A is as we
                    // left it (otherwise it stays, withholding tokens), and
                    // mark packet by packet.
                    let _ = all.update(|a| {
                        if a == a_after {
                            Ok((a_before, ()))
                        } else {
                            Err(())
                        }
                    });
                }
            }
        }
        // The buckets are coupled: packet by packet (see the module docs).
        for (i, (bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
            *color = self.step_shared(flow, t, *bytes, pre(i));
        }
    }

    fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
        let now = t[0];
        let [c, a] = words;
        let c_base = if c > now { c } else { now };
        let excess_deficit = a.saturating_sub(c_base);
        let te = self.ebs_span.saturating_sub(excess_deficit) / self.all.quota.emission_interval();
        [self.committed.tokens(c, now), te]
    }
}
