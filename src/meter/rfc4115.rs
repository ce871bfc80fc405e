//! RFC 4115, the two-rate three-colour marker with efficient handling of
//! in-profile traffic; see the [meter module docs](super) for the math (two
//! independent TATs, each on its own rate).

use super::batch::{Arrivals, Slack};
use super::steps::{lost_second, pair_steps, shared_batch, Pair, Steps};
use super::{Bucket, Color, Flow, MeterError};
use crate::quota::Quota;

/// The marker of RFC 4115: committed rate `CIR` with burst `CBS`, excess
/// rate `EIR` with burst `EBS` (bytes per second, bytes). Unlike RFC 2698,
/// green packets do not consume excess tokens and there is no `EIR ≥ CIR`
/// requirement. A shared, read-only profile for any number of flows.
///
/// State words: `[C, E]` (committed and excess TATs, each in its own rate's
/// sub-ticks); [`tokens`](super::Meter::tokens) answers `[Tc, Te]`.
///
/// ```
/// use cellrate::meter::{Color, LocalFlow, Meter, TrTcm4115};
/// let meter = TrTcm4115::new(1_000, 1_500, 500, 1_500, 1_000).unwrap();
/// let mut flow = LocalFlow::new();
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_500), Color::Green);
/// assert_eq!(meter.mark_local(&mut flow, 0, 1_500), Color::Yellow); // green took no excess tokens
/// assert_eq!(meter.mark_local(&mut flow, 0, 1), Color::Red);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrTcm4115 {
    committed: Bucket,
    excess: Bucket,
}

impl TrTcm4115 {
    /// The RFC 4115 marker with `cir`/`cbs` and `eir`/`ebs` on a clock of
    /// `hz` ticks per second. A bucket may be switched off with rate and size
    /// 0 (e.g. `eir = ebs = 0`: a two-colour policer); a bucket with a size
    /// needs a rate.
    ///
    /// ```
    /// use cellrate::meter::{MeterError, TrTcm4115};
    /// assert!(TrTcm4115::new(1_000, 1_500, 0, 0, 1_000).is_ok());
    /// assert_eq!(TrTcm4115::new(1_000, 1_500, 0, 1_500, 1_000), Err(MeterError::ZeroRate));
    /// assert_eq!(TrTcm4115::new(0, 0, 0, 0, 1_000), Err(MeterError::NoBucket));
    /// ```
    pub const fn new(
        cir: u64,
        cbs: u64,
        eir: u64,
        ebs: u64,
        hz: u64,
    ) -> Result<TrTcm4115, MeterError> {
        if cbs == 0 && ebs == 0 {
            return Err(MeterError::NoBucket);
        }
        match Bucket::pair((cir, cbs), (eir, ebs), hz) {
            Ok([committed, excess]) => Ok(TrTcm4115 { committed, excess }),
            Err(e) => Err(e),
        }
    }

    /// The committed rate with burst `max(CBS, 1)`, as a [`Quota`].
    ///
    /// ```
    /// use cellrate::meter::TrTcm4115;
    /// let m = TrTcm4115::new(1_000, 1_500, 500, 1_500, 1_000).unwrap();
    /// assert_eq!(m.committed_quota().burst(), 1_500);
    /// ```
    pub const fn committed_quota(&self) -> Quota {
        self.committed.quota
    }

    /// The excess rate with burst `max(EBS, 1)`, as a [`Quota`].
    ///
    /// ```
    /// use cellrate::meter::TrTcm4115;
    /// let m = TrTcm4115::new(1_000, 1_500, 500, 1_500, 1_000).unwrap();
    /// assert_eq!(m.excess_quota().emission_interval_ticks(), 2); // 2 ms per byte
    /// ```
    pub const fn excess_quota(&self) -> Quota {
        self.excess.quota
    }

    /// The two buckets in word order (committed, excess), for leases of bytes.
    pub(crate) const fn lease_buckets(&self) -> [&Bucket; 2] {
        self.pair().0
    }

    /// Whether both rates are represented exactly at the profile's clock.
    ///
    /// ```
    /// use cellrate::meter::TrTcm4115;
    /// assert!(TrTcm4115::new(1_000, 1_500, 500, 1_500, 1_000).unwrap().is_exact());
    /// ```
    pub const fn is_exact(&self) -> bool {
        self.pair().is_exact()
    }

    /// The two buckets in the rules' order (committed, excess).
    #[inline(always)]
    const fn pair(&self) -> Pair<'_> {
        Pair([&self.committed, &self.excess])
    }
}

impl Steps for TrTcm4115 {
    const BOTH: bool = false;

    #[inline(always)]
    fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color {
        if pre == Color::Green {
            if let Some(c_next) = self.committed.take(words[0], t[0], bytes) {
                words[0] = c_next;
                return Color::Green;
            }
        }
        if pre != Color::Red {
            if let Some(e_next) = self.excess.take(words[1], t[1], bytes) {
                words[1] = e_next;
                return Color::Yellow;
            }
        }
        Color::Red
    }

    #[inline(always)]
    fn step_shared(&self, flow: &Flow, t: [u64; 2], bytes: u64, pre: Color) -> Color {
        let [committed, excess] = &flow.words;
        if pre == Color::Green && self.committed.take_shared(committed, t[0], bytes) {
            return Color::Green;
        }
        if pre != Color::Red && self.excess.take_shared(excess, t[1], bytes) {
            return Color::Yellow;
        }
        Color::Red
    }

    // The RFC's order: the committed bucket, then the excess one. A batch
    // that lost the swap on the excess bucket: yellow or red again among
    // the packets not green and not coloured red on arrival.
    pair_steps!(
        |pre, i, color| color != Color::Green && pre.at(i) != Color::Red,
        (Color::Yellow, Color::Red)
    );
}
