//! [`Quota`] and its builders; the contract is on [`Quota`], the proofs in
//! docs/design/quota.md.

use core::fmt;
use core::time::Duration;

/// The largest span `burst · T` (in sub-ticks) a quota accepts: 2⁶¹, the
/// farthest ahead of `now` a state may be written and read back exactly
/// (see [serial time](crate::Gcra#serial-time)).
pub const MAX_SPAN: u64 = 1 << 61;

/// The guaranteed longest gap between two checks of one limiter, in
/// seconds (2²⁸ s ≈ 8.5 years), for clocks below 2³⁴ Hz; see
/// [`Quota::horizon_ticks`].
pub const HORIZON_SECS: u64 = 1 << 28;

/// 2²⁹ s of ticks times the scale fit in 2⁶³, so `2⁶² / scale` ≥ 2²⁸ s.
const SCALE_BUDGET_SECS: u128 = 1 << 29;

/// The longest gap between two checks, in sub-ticks (`gcra::step::AHEAD`).
pub(crate) const GAP: u64 = 1 << 62;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Why a quota cannot be built.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaError {
    /// The rate has zero cells per period.
    ZeroRate,
    /// The period is zero.
    ZeroPeriod,
    /// The burst is zero: nothing could ever be admitted.
    ZeroBurst,
    /// The tick frequency is zero.
    ZeroHz,
    /// The emission interval does not fit in 64 bits, or `burst · T` exceeds
    /// [`MAX_SPAN`] sub-ticks.
    Overflow,
    /// Representing the rate at this tick frequency (keeping
    /// [`HORIZON_SECS`]) would lose more than 1 % of it: use a slower rate,
    /// a coarser unit of cost, or a faster tick.
    Unrepresentable,
}

impl QuotaError {
    /// A one-line explanation, usable in a `const` panic.
    pub const fn as_str(&self) -> &'static str {
        match self {
            QuotaError::ZeroRate => "quota: the rate has zero cells per period",
            QuotaError::ZeroPeriod => "quota: the period is zero",
            QuotaError::ZeroBurst => "quota: the burst is zero",
            QuotaError::ZeroHz => "quota: the tick frequency is zero",
            QuotaError::Overflow => {
                "quota: the emission interval or burst times it overflows 64 bits"
            }
            QuotaError::Unrepresentable => {
                "quota: the rate cannot be represented within 1 % at this tick frequency"
            }
        }
    }
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for QuotaError {}

#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Period {
    Nanos(u128),
    Ticks(u64),
}

/// A rate: a number of cells per period, before a tick frequency is chosen.
///
/// ```
/// use cellrate::Rate;
/// use core::time::Duration;
///
/// let r = Rate::per_duration(3, Duration::from_secs(10));
/// assert_eq!(r.cells(), 3);
/// assert_eq!(r.period_ticks(1_000_000), Some(10_000_000));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate {
    cells: u64,
    period: Period,
}

impl Rate {
    /// `cells` per second.
    pub const fn per_second(cells: u64) -> Self {
        Self::per_secs(cells, 1)
    }
    /// `cells` per minute.
    pub const fn per_minute(cells: u64) -> Self {
        Self::per_secs(cells, 60)
    }
    /// `cells` per hour.
    pub const fn per_hour(cells: u64) -> Self {
        Self::per_secs(cells, 3_600)
    }
    /// `cells` per day (86 400 s).
    pub const fn per_day(cells: u64) -> Self {
        Self::per_secs(cells, 86_400)
    }
    const fn per_secs(cells: u64, secs: u64) -> Self {
        Self {
            cells,
            period: Period::Nanos(secs as u128 * NANOS_PER_SEC),
        }
    }
    /// `cells` per arbitrary `period`.
    pub const fn per_duration(cells: u64, period: Duration) -> Self {
        Self {
            cells,
            period: Period::Nanos(period.as_nanos()),
        }
    }
    /// `cells` per `ticks` ticks of the limiter's clock, whatever its frequency.
    pub const fn per_ticks(cells: u64, ticks: u64) -> Self {
        Self {
            cells,
            period: Period::Ticks(ticks),
        }
    }
    /// The number of cells per period.
    pub const fn cells(&self) -> u64 {
        self.cells
    }
    /// The period in ticks at `hz`, if it is a whole number of ticks that fits.
    pub const fn period_ticks(&self, hz: u64) -> Option<u64> {
        match self.period {
            Period::Ticks(t) => Some(t),
            Period::Nanos(ns) => {
                let Some(scaled) = ns.checked_mul(hz as u128) else {
                    return None;
                };
                if scaled % NANOS_PER_SEC != 0 || scaled / NANOS_PER_SEC > u64::MAX as u128 {
                    return None;
                }
                Some((scaled / NANOS_PER_SEC) as u64)
            }
        }
    }
    /// `T` as a fraction `(numerator, denominator)` of ticks at `hz`, unreduced.
    const fn interval_fraction(&self, hz: u64) -> Result<(u128, u128), QuotaError> {
        match self.period {
            Period::Ticks(t) => Ok((t as u128, self.cells as u128)),
            Period::Nanos(ns) => match ns.checked_mul(hz as u128) {
                Some(num) => Ok((num, self.cells as u128 * NANOS_PER_SEC)),
                None => Err(QuotaError::Overflow),
            },
        }
    }
    const fn validate(&self) -> Result<(), QuotaError> {
        if self.cells == 0 {
            return Err(QuotaError::ZeroRate);
        }
        match self.period {
            Period::Nanos(0) | Period::Ticks(0) => Err(QuotaError::ZeroPeriod),
            _ => Ok(()),
        }
    }
}

/// A rate with an optional burst, waiting for its tick frequency: made by
/// [`Quota::per_second`] and friends, finished by [`at_hz`](Self::at_hz).
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a QuotaBuilder does nothing until `at_hz` or `try_at_hz` turns it into a Quota"]
pub struct QuotaBuilder {
    rate: Rate,
    burst: Option<u64>,
}

impl QuotaBuilder {
    /// Sets the burst, the most cells admitted at once (default: the
    /// rate's cells per period).
    pub const fn with_burst(self, burst: u64) -> Self {
        Self {
            rate: self.rate,
            burst: Some(burst),
        }
    }

    /// Builds the quota for a clock of `hz` ticks per second.
    ///
    /// # Panics
    ///
    /// On an invalid quota (a compile error in a `const`); see
    /// [`try_at_hz`](Self::try_at_hz).
    ///
    /// ```
    /// use cellrate::Quota;
    /// const Q: Quota = Quota::per_second(100).with_burst(20).at_hz(1_000_000);
    /// assert_eq!(Q.burst(), 20);
    /// ```
    ///
    /// ```compile_fail
    /// use cellrate::Quota;
    /// const BAD: Quota = Quota::per_second(0).at_hz(1_000_000); // zero rate
    /// ```
    pub const fn at_hz(self, hz: u64) -> Quota {
        match self.try_at_hz(hz) {
            Ok(q) => q,
            Err(e) => panic!("{}", e.as_str()),
        }
    }

    /// [`at_hz`](Self::at_hz), returning the error instead of panicking.
    ///
    /// ```
    /// use cellrate::{Quota, QuotaError};
    /// assert_eq!(Quota::per_minute(10).with_burst(0).try_at_hz(1_000), Err(QuotaError::ZeroBurst));
    /// assert!(Quota::per_minute(10).try_at_hz(1_000).is_ok());
    /// ```
    pub const fn try_at_hz(self, hz: u64) -> Result<Quota, QuotaError> {
        let burst = match self.burst {
            Some(b) => b,
            None => self.rate.cells,
        };
        Quota::from_rate(self.rate, burst, hz)
    }
}

/// An emission interval and a tolerance in sub-ticks, ready for GCRA.
///
/// # The math
///
/// A quota of `cells` per `period` on a clock of `hz` ticks per second has
/// the emission interval `T = period · hz / cells` ticks (a rational number)
/// and the tolerance `τ = (burst − 1) · T`. To keep `T` exact, time inside a
/// limiter runs in **sub-ticks**: with `T = n/d` in lowest terms, one tick is
/// `scale = d` sub-ticks, `emission_interval = n` and `span = burst · n`
/// (`τ + T` in sub-ticks). Every check multiplies `now` by `scale`, never
/// divides.
///
/// # The longest gap between checks
///
/// `now` may come from any clock (any origin, Unix time, a counter that
/// wraps): answers depend only on differences (see
/// [serial time](crate::Gcra#serial-time)). The one limit is the **gap
/// between two checks** of one limiter, [`horizon_ticks`](Self::horizon_ticks)
/// (`2⁶² / scale` ticks), at least [`HORIZON_SECS`] (about 8.5 years) for
/// clocks below `2³⁴` Hz. A rate whose scale would break that is rounded:
/// `T` is rounded **up** (the burst is kept), so the limiter admits less
/// than asked, never more; [`is_exact`](Self::is_exact) and
/// [`effective_rate`](Self::effective_rate) report it, and a rounding that
/// would lose more than 1 % is refused with [`QuotaError::Unrepresentable`].
///
/// # Invariants
///
/// `scale ≥ 1`, `emission_interval ≥ 1`, `burst ≥ 1` as asked, and
/// `span = burst · emission_interval ≤` [`MAX_SPAN`], so `cost · T` never
/// overflows for `cost ≤ burst`.
///
/// ```
/// use cellrate::Quota;
///
/// // 3 requests per 10 s on a 1 MHz clock: exact, with 3 sub-ticks per tick.
/// let q = Quota::per_duration(3, core::time::Duration::from_secs(10)).at_hz(1_000_000);
/// assert!(q.is_exact());
/// assert_eq!(q.scale(), 3);
/// assert_eq!(q.emission_interval(), 10_000_000); // sub-ticks, i.e. 10/3 s
/// assert_eq!(q.tolerance(), 2 * 10_000_000);     // (burst − 1) · T
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    emission_interval: u64,
    span: u64,
    burst: u64,
    scale: u64,
    hz: u64,
    exact: bool,
}

const fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// `⌈scaled / den⌉`, refused when the rounding would lose more than 1 % of
/// the rate: effective/asked = `scaled / (interval · den)`, refused when
/// `(interval·den − scaled) / (interval·den) > 1/100`.
const fn round_up_within_bound(scaled: u128, den: u128) -> Result<u128, QuotaError> {
    let interval = scaled.div_ceil(den);
    let Some(full) = interval.checked_mul(den) else {
        return Err(QuotaError::Overflow);
    };
    let Some(lost) = (full - scaled).checked_mul(100) else {
        return Err(QuotaError::Overflow);
    };
    if lost > full {
        return Err(QuotaError::Unrepresentable);
    }
    Ok(interval)
}

/// The largest scale that keeps [`HORIZON_SECS`] of ticks at `hz` within
/// the longest gap between two checks (2⁶² sub-ticks).
const fn max_scale(hz: u64) -> u64 {
    let budget_ticks = SCALE_BUDGET_SECS * hz as u128;
    // budget_ticks · scale ≤ 2⁶³ − 1, so 2⁶² / scale > budget_ticks / 2,
    // which is HORIZON_SECS of ticks.
    let bound = ((1u128 << 63) - 1) / budget_ticks;
    if bound == 0 {
        1
    } else if bound > u64::MAX as u128 {
        u64::MAX
    } else {
        bound as u64
    }
}

impl Quota {
    /// `cells` per second; burst `cells` unless set.
    pub const fn per_second(cells: u64) -> QuotaBuilder {
        Self::builder(Rate::per_second(cells))
    }
    /// `cells` per minute; burst `cells` unless set.
    pub const fn per_minute(cells: u64) -> QuotaBuilder {
        Self::builder(Rate::per_minute(cells))
    }
    /// `cells` per hour; burst `cells` unless set.
    pub const fn per_hour(cells: u64) -> QuotaBuilder {
        Self::builder(Rate::per_hour(cells))
    }
    /// `cells` per day; burst `cells` unless set.
    pub const fn per_day(cells: u64) -> QuotaBuilder {
        Self::builder(Rate::per_day(cells))
    }
    /// `cells` per arbitrary `period`; burst `cells` unless set.
    pub const fn per_duration(cells: u64, period: Duration) -> QuotaBuilder {
        Self::builder(Rate::per_duration(cells, period))
    }
    /// `cells` per `ticks` ticks; burst `cells` unless set.
    pub const fn per_ticks(cells: u64, ticks: u64) -> QuotaBuilder {
        Self::builder(Rate::per_ticks(cells, ticks))
    }
    /// A builder from any [`Rate`]; burst `rate.cells()` unless set.
    pub const fn builder(rate: Rate) -> QuotaBuilder {
        QuotaBuilder { rate, burst: None }
    }

    /// The quota for `rate` with `burst` on a clock of `hz` ticks per second.
    ///
    /// ```
    /// use cellrate::{Quota, Rate};
    /// let q = Quota::from_rate(Rate::per_second(100), 5, 32_768).unwrap();
    /// assert_eq!((q.scale(), q.emission_interval()), (25, 8_192));
    /// ```
    pub const fn from_rate(rate: Rate, burst: u64, hz: u64) -> Result<Quota, QuotaError> {
        if let Err(e) = rate.validate() {
            return Err(e);
        }
        if hz == 0 {
            return Err(QuotaError::ZeroHz);
        }
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        let (num, den) = match rate.interval_fraction(hz) {
            Ok(f) => f,
            Err(e) => return Err(e),
        };
        let g = gcd(num, den);
        Self::from_fraction(num / g, den / g, burst, hz)
    }

    /// From `T = num/den` ticks (lowest terms), `T` rounded up when `den`
    /// exceeds [`max_scale`].
    const fn from_fraction(num: u128, den: u128, burst: u64, hz: u64) -> Result<Quota, QuotaError> {
        let bound = max_scale(hz);
        if den <= bound as u128 {
            return Self::assemble(num, burst, den as u64, hz, true);
        }
        let Some(scaled) = num.checked_mul(bound as u128) else {
            return Err(QuotaError::Overflow);
        };
        match round_up_within_bound(scaled, den) {
            Ok(interval) => Self::assemble(interval, burst, bound, hz, false),
            Err(e) => Err(e),
        }
    }

    /// Checks the bounds; `interval` is in sub-ticks.
    const fn assemble(
        interval: u128,
        burst: u64,
        scale: u64,
        hz: u64,
        exact: bool,
    ) -> Result<Quota, QuotaError> {
        if interval == 0 {
            return Err(QuotaError::Overflow);
        }
        let Some(span) = interval.checked_mul(burst as u128) else {
            return Err(QuotaError::Overflow);
        };
        if span > MAX_SPAN as u128 {
            return Err(QuotaError::Overflow);
        }
        Ok(Quota {
            emission_interval: interval as u64,
            span: span as u64,
            burst,
            scale,
            hz,
            exact,
        })
    }

    /// This quota at `scale` sub-ticks per tick of a `hz` clock (for a
    /// limiter whose scale is fixed): the burst kept, `T` rounded up, and
    /// [`QuotaError::Unrepresentable`] past 1 % of loss.
    ///
    /// ```
    /// use cellrate::Quota;
    /// let table = Quota::per_second(7).at_hz(1_000); // T = 1000/7 ms
    /// let q = Quota::per_second(10).at_hz(1_000).rescaled(table.scale(), table.hz()).unwrap();
    /// assert_eq!((q.scale(), q.hz(), q.burst()), (table.scale(), 1_000, 10));
    /// ```
    pub const fn rescaled(&self, scale: u64, hz: u64) -> Result<Quota, QuotaError> {
        if scale == self.scale && hz == self.hz {
            return Ok(*self);
        }
        // x sub-ticks at (self.scale, self.hz) = x · hz · scale / (self.scale · self.hz)
        // sub-ticks at (scale, hz).
        let Some(factor) = (hz as u128).checked_mul(scale as u128) else {
            return Err(QuotaError::Overflow);
        };
        let den = self.scale as u128 * self.hz as u128;
        let Some(scaled) = (self.emission_interval as u128).checked_mul(factor) else {
            return Err(QuotaError::Overflow);
        };
        let exact = self.exact && scaled % den == 0;
        match round_up_within_bound(scaled, den) {
            Ok(interval) => Self::assemble(interval, self.burst, scale, hz, exact),
            Err(e) => Err(e),
        }
    }

    /// This quota on a clock of `hz` ticks per second at the scale it needs
    /// there (as [`from_rate`](Self::from_rate) would build it from the
    /// same `T`): itself when `hz` is its own; otherwise `T` re-expressed
    /// in lowest terms, rounded up only past the scale bound.
    pub(crate) const fn at_clock(&self, hz: u64) -> Result<Quota, QuotaError> {
        if hz == self.hz {
            return Ok(*self);
        }
        if hz == 0 {
            return Err(QuotaError::ZeroHz);
        }
        // T ticks at hz = emission_interval · hz / (scale · self.hz).
        let Some(num) = (self.emission_interval as u128).checked_mul(hz as u128) else {
            return Err(QuotaError::Overflow);
        };
        let den = self.scale as u128 * self.hz as u128;
        let g = gcd(num, den);
        match Self::from_fraction(num / g, den / g, self.burst, hz) {
            Ok(mut q) => {
                q.exact = q.exact && self.exact;
                Ok(q)
            }
            Err(e) => Err(e),
        }
    }

    /// The burst: the most cells admitted at once, as asked.
    pub const fn burst(&self) -> u64 {
        self.burst
    }
    /// The emission interval `T`, in sub-ticks (see [`scale`](Self::scale)).
    pub const fn emission_interval(&self) -> u64 {
        self.emission_interval
    }
    /// The tolerance `τ = (burst − 1)·T`, in sub-ticks.
    pub const fn tolerance(&self) -> u64 {
        self.span - self.emission_interval
    }
    /// `τ + T = burst · T`, in sub-ticks: how far the TAT may run ahead of now.
    pub const fn span(&self) -> u64 {
        self.span
    }
    /// Sub-ticks per tick: the denominator that makes `T` an integer.
    pub const fn scale(&self) -> u64 {
        self.scale
    }
    /// The tick frequency the quota was built for.
    pub const fn hz(&self) -> u64 {
        self.hz
    }
    /// Whether `T` is exactly the rate asked for (otherwise it was rounded up).
    pub const fn is_exact(&self) -> bool {
        self.exact
    }
    /// The longest gap between two checks of one limiter for which every
    /// answer is exact, in ticks: `2⁶² / scale` (a gap, not a date).
    ///
    /// ```
    /// use cellrate::Quota;
    /// let q = Quota::per_second(7).at_hz(1_000_000_000); // scale 7
    /// assert_eq!(q.horizon_ticks(), (1u64 << 62) / 7); // about 20.8 years of ns
    /// ```
    pub const fn horizon_ticks(&self) -> u64 {
        GAP / self.scale
    }
    /// The rate the limiter really enforces: `scale` cells per
    /// `emission_interval` ticks.
    ///
    /// ```
    /// use cellrate::Quota;
    /// // 999 999 937 per second cannot be exact on a 1 GHz clock with an 8.5-year gap.
    /// let q = Quota::per_second(999_999_937).try_at_hz(1_000_000_000);
    /// assert!(q.is_err()); // rounding would lose more than 1 %
    /// let q = Quota::per_second(999_937).at_hz(1_000_000_000);
    /// assert!(!q.is_exact());
    /// let r = q.effective_rate();
    /// // never more than asked: r.cells / r.ticks ≤ 999 937 / 10⁹
    /// assert!((r.cells() as u128) * 1_000_000_000 <= 999_937 * r.period_ticks(0).unwrap() as u128);
    /// ```
    pub const fn effective_rate(&self) -> Rate {
        Rate::per_ticks(self.scale, self.emission_interval)
    }
    /// The emission interval in whole ticks, rounded up.
    pub const fn emission_interval_ticks(&self) -> u64 {
        self.emission_interval.div_ceil(self.scale)
    }
    /// Sub-ticks to whole ticks, rounding up (read lazily by the results).
    #[inline]
    pub(crate) const fn ticks_ceil(sub: u64, scale: u64) -> u64 {
        sub.div_ceil(scale)
    }
    /// The three words that may change under runtime reconfiguration.
    #[cfg_attr(not(target_has_atomic = "64"), allow(dead_code))]
    pub(crate) const fn variable_words(&self) -> [u64; 3] {
        [
            self.emission_interval,
            self.span,
            // burst − 1 < 2⁶³ always fits under the flag bit (burst ≥ 1).
            (self.burst - 1) | ((self.exact as u64) << 63),
        ]
    }
    /// The inverse of [`variable_words`](Self::variable_words).
    #[cfg_attr(not(target_has_atomic = "64"), allow(dead_code))]
    pub(crate) const fn from_words(words: [u64; 3], fixed: &Quota) -> Quota {
        Quota {
            emission_interval: words[0],
            span: words[1],
            burst: (words[2] & !(1 << 63)) + 1,
            exact: words[2] >> 63 == 1,
            scale: fixed.scale,
            hz: fixed.hz,
        }
    }
}
