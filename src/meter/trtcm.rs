//! RFC 2698, the two rate three colour marker; see the [meter module
//! docs](super) for the math (two independent TATs, each on its own rate).

use super::batch::{Arrivals, Slack};
use super::steps::{lost_second, pair_steps, shared_batch, Pair, Steps};
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
        match Bucket::pair((pir, pbs), (cir, cbs), hz) {
            Ok([peak, committed]) => Ok(TrTcm { peak, committed }),
            Err(e) => Err(e),
        }
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
        self.pair().0
    }

    /// Whether both rates are represented exactly at the profile's clock.
    ///
    /// ```
    /// use cellrate::meter::TrTcm;
    /// assert!(TrTcm::new(1_000, 1_500, 2_000, 3_000, 1_000).unwrap().is_exact());
    /// ```
    pub const fn is_exact(&self) -> bool {
        self.pair().is_exact()
    }

    /// The two buckets in the rules' order (peak, committed).
    #[inline(always)]
    const fn pair(&self) -> Pair<'_> {
        Pair([&self.peak, &self.committed])
    }
}

impl Steps for TrTcm {
    const BOTH: bool = true;

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
        if !self.peak.take_shared(peak, t[0], bytes) {
            return Color::Red;
        }
        if pre == Color::Green && self.committed.take_shared(committed, t[1], bytes) {
            return Color::Green;
        }
        Color::Yellow
    }

    // The RFC's order: the peak bucket, then the committed one. A batch
    // that lost the swap on the committed bucket: green or yellow again
    // among the green-coloured packets that passed the peak bucket.
    pair_steps!(
        |pre, i, color| color != Color::Red && pre.at(i) == Color::Green,
        (Color::Green, Color::Yellow)
    );
}
