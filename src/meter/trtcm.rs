//! RFC 2698, the two rate three colour marker; see the [meter module
//! docs](super) for the math (two independent TATs, each on its own rate).

use super::batch::{Arrivals, Slack};
use super::steps::{batch_shared_pair, pair_steps, Pair, Steps};
use super::{Bucket, Color, Flow, MeterError};
use crate::quota::Quota;

/// The trTCM of RFC 2698: committed rate `CIR` with burst `CBS`, peak rate
/// `PIR ≥ CIR` with burst `PBS` (bytes per second, bytes). A shared,
/// read-only profile for any number of flows.
///
/// State words: `[P, C]` (peak and committed TATs, each in its own rate's
/// sub-ticks); [`tokens`](super::Meter::tokens) answers `[Tp, Tc]`.
///
/// ```
/// use cellrate::meter::{Color, LocalFlow, Meter, TrTcm};
/// // CIR 1 MB/s, CBS 3 000 B; PIR 2 MB/s, PBS 9 000 B; microsecond clock.
/// let meter = TrTcm::new(1_000_000, 3_000, 2_000_000, 9_000, 1_000_000).unwrap();
/// let mut flow = LocalFlow::new();
/// assert_eq!(meter.mark_local(&mut flow, 0, 9_000), Color::Yellow); // > CBS, ≤ PBS
/// assert_eq!(meter.mark_local(&mut flow, 0, 64), Color::Red);       // peak bucket empty
/// assert_eq!(meter.mark_local(&mut flow, 32, 64), Color::Green);    // 32 µs refill 64 B of peak
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrTcm {
    peak: Bucket,
    committed: Bucket,
}

impl TrTcm {
    /// The trTCM with `cir`/`cbs` and `pir`/`pbs` on a clock of `hz` ticks per
    /// second. RFC 2698 requires `pir ≥ cir` and both bursts above 0 (and
    /// recommends each at least the largest packet).
    ///
    /// ```
    /// use cellrate::meter::{MeterError, TrTcm};
    /// assert!(TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).is_ok());
    /// assert_eq!(TrTcm::new(1_000, 0, 2_000, 3_000, 1_000), Err(MeterError::ZeroBurst));
    /// ```
    pub const fn new(cir: u64, cbs: u64, pir: u64, pbs: u64, hz: u64) -> Result<TrTcm, MeterError> {
        if cbs == 0 || pbs == 0 {
            return Err(MeterError::ZeroBurst);
        }
        if cir == 0 {
            return Err(MeterError::ZeroRate);
        }
        if pir < cir {
            return Err(MeterError::PeakBelowCommitted);
        }
        let peak = match Bucket::new(pir, pbs, hz) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        let committed = match Bucket::new(cir, cbs, hz) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        Ok(TrTcm { peak, committed })
    }

    /// The committed rate with burst `CBS`, as a [`Quota`].
    ///
    /// ```
    /// use cellrate::meter::TrTcm;
    /// let m = TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap();
    /// assert_eq!(m.committed_quota().burst(), 1_500);
    /// assert_eq!(m.committed_quota().emission_interval_ticks(), 1); // 1 ms per byte
    /// ```
    pub const fn committed_quota(&self) -> Quota {
        self.committed.quota
    }

    /// The peak rate with burst `PBS`, as a [`Quota`].
    ///
    /// ```
    /// use cellrate::meter::TrTcm;
    /// let m = TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap();
    /// assert_eq!((m.peak_quota().burst(), m.peak_quota().scale()), (3_000, 2)); // ½ ms per byte
    /// ```
    pub const fn peak_quota(&self) -> Quota {
        self.peak.quota
    }

    /// The two buckets in word order (peak, committed), for leases of bytes.
    pub(crate) const fn lease_buckets(&self) -> [&Bucket; 2] {
        [&self.peak, &self.committed]
    }

    /// Whether both rates are represented exactly at the profile's clock.
    ///
    /// ```
    /// use cellrate::meter::TrTcm;
    /// assert!(TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap().is_exact());
    /// ```
    pub const fn is_exact(&self) -> bool {
        self.peak.quota.is_exact() && self.committed.quota.is_exact()
    }
}

impl TrTcm {
    /// The two buckets in the rules' order (peak, committed).
    #[inline(always)]
    fn pair(&self) -> Pair<'_> {
        Pair([&self.peak, &self.committed])
    }

    /// A shared batch that took its bytes from the peak bucket but lost
    /// the compare-and-swap on the committed one: green or yellow again
    /// among the green-coloured packets that passed the peak bucket, one
    /// take each from the committed TAT there is now (as packet by packet
    /// would). The candidates stay the same when the pass reruns.
    #[cold]
    #[inline(never)]
    fn lost_committed(
        &self,
        flow: &Flow,
        now: u64,
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) {
        let candidate = |i: usize, color: Color| color != Color::Red && pre.at(i) == Color::Green;
        let _ = flow.words[1].update(|c| -> Result<(u64, ()), ()> {
            let next =
                self.committed
                    .pass(c, now, sizes, out, candidate, (Color::Green, Color::Yellow));
            Ok((next, ()))
        });
    }
}

impl Steps for TrTcm {
    const BOTH: bool = true;

    #[inline(always)]
    fn times(&self, now: u64) -> [u64; 2] {
        [self.peak.now(now), self.committed.now(now)]
    }

    #[inline(always)]
    fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color {
        if pre == Color::Red {
            return Color::Red;
        }
        let Some(p_next) = self.peak.take(words[0], t[0], bytes) else {
            return Color::Red;
        };
        words[0] = p_next;
        if pre == Color::Green {
            if let Some(c_next) = self.committed.take(words[1], t[1], bytes) {
                words[1] = c_next;
                return Color::Green;
            }
        }
        Color::Yellow
    }

    #[inline(always)]
    fn step_shared(&self, flow: &Flow, t: [u64; 2], bytes: u64, pre: Color) -> Color {
        if pre == Color::Red {
            return Color::Red;
        }
        let [peak, committed] = &flow.words;
        let Some(charge) = self.peak.charge(bytes) else {
            return Color::Red;
        };
        let took_peak = peak.update(|p| match self.peak.take_charged(p, t[0], charge) {
            Some(next) => Ok((next, ())),
            None => Err(()),
        });
        if took_peak.is_err() {
            return Color::Red;
        }
        if pre == Color::Green {
            if let Some(charge) = self.committed.charge(bytes) {
                let took =
                    committed.update(|c| match self.committed.take_charged(c, t[1], charge) {
                        Some(next) => Ok((next, ())),
                        None => Err(()),
                    });
                if took.is_ok() {
                    return Color::Green;
                }
            }
        }
        Color::Yellow
    }

    // The RFC's order: the first bucket, then the second.
    pair_steps!(lost_committed);
}
