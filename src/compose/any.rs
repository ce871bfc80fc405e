//! A limiter chosen by configuration.

use core::fmt;
use core::str::FromStr;

use super::{Receipt, Revocable};
use crate::window::{
    BucketedWindowQuota, FixedWindow, FixedWindowQuota, SlidingLog, SlidingWindow,
    SlidingWindowQuota, WideBucketedWindow, WindowError,
};
use crate::{Decision, Denied, Gcra, Quota, QuotaError, RateLimiter, Snapshot};

/// The algorithms an [`AnyLimiter`] can run.
///
/// ```
/// use cellrate::compose::AlgorithmKind;
/// assert_eq!("sliding_window".parse(), Ok(AlgorithmKind::SlidingWindow));
/// assert_eq!(AlgorithmKind::TokenBucket.as_str(), "token_bucket");
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AlgorithmKind {
    /// [`FixedWindow`]: `limit` per aligned window.
    FixedWindow,
    /// [`SlidingWindow`]: `limit` per sliding window, estimated.
    SlidingWindow,
    /// [`SlidingLog`]: `limit` per sliding window, exact (`limit ≤` the log's capacity).
    SlidingLog,
    /// [`BucketedWindow`](crate::window::BucketedWindow): `limit` per
    /// `buckets` consecutive buckets of `window / buckets` ticks
    /// ([`LimiterConfig::buckets`], required). An [`AnyLimiter`] runs it
    /// as a [`WideBucketedWindow`] of `buckets ≤ N` (exact after any
    /// silence, as on Redis).
    BucketedWindow,
    /// [`TokenBucket`](crate::TokenBucket): capacity `burst` (default
    /// `limit`), refilled at `limit` per window.
    TokenBucket,
    /// [`LeakyBucket`](crate::LeakyBucket) as a meter: `limit` per window,
    /// evenly spaced, no burst.
    LeakyBucket,
    /// [`Gcra`]: `limit` per window, burst `burst` (default `limit`).
    Gcra,
}

impl AlgorithmKind {
    /// Every kind, in declaration order.
    pub const ALL: [AlgorithmKind; 7] = [
        AlgorithmKind::FixedWindow,
        AlgorithmKind::SlidingWindow,
        AlgorithmKind::SlidingLog,
        AlgorithmKind::BucketedWindow,
        AlgorithmKind::TokenBucket,
        AlgorithmKind::LeakyBucket,
        AlgorithmKind::Gcra,
    ];

    /// The configuration name (`snake_case`).
    pub const fn as_str(&self) -> &'static str {
        match self {
            AlgorithmKind::FixedWindow => "fixed_window",
            AlgorithmKind::SlidingWindow => "sliding_window",
            AlgorithmKind::SlidingLog => "sliding_log",
            AlgorithmKind::BucketedWindow => "bucketed_window",
            AlgorithmKind::TokenBucket => "token_bucket",
            AlgorithmKind::LeakyBucket => "leaky_bucket",
            AlgorithmKind::Gcra => "gcra",
        }
    }
}

impl FromStr for AlgorithmKind {
    type Err = LimiterConfigError;
    fn from_str(s: &str) -> Result<Self, LimiterConfigError> {
        AlgorithmKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or(LimiterConfigError::UnknownAlgorithm)
    }
}

impl fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a configuration file says about one limiter: the algorithm, `limit`
/// cells per `window` ticks of a clock at `hz`, an optional burst and, for
/// the bucketed window, the number of buckets.
///
/// ```
/// use cellrate::compose::{AlgorithmKind, LimiterConfig};
/// let c = LimiterConfig::new(AlgorithmKind::TokenBucket, 100, 1_000, 1_000).with_burst(20);
/// assert_eq!(c.burst, Some(20));
/// let c = LimiterConfig::new(AlgorithmKind::BucketedWindow, 100, 60_000, 1_000).with_buckets(6);
/// assert_eq!(c.buckets, Some(6));
/// ```
///
/// With feature `serde` it reads and writes these fields (`hz` defaults to
/// `config::DEFAULT_HZ`) and reading checks what [`validate`](Self::validate)
/// checks.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "LimiterFields")
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LimiterConfig {
    /// Which algorithm.
    pub algorithm: AlgorithmKind,
    /// Cells per window (the rate's numerator).
    pub limit: u64,
    /// The window (the rate's period) in ticks.
    pub window: u64,
    /// The burst: GCRA and token bucket only (default `limit`); the leaky
    /// bucket accepts only 1, the windows only `limit`.
    pub burst: Option<u64>,
    /// The number of buckets the window is split into: the bucketed window
    /// only, where it is required (it must divide `window`).
    pub buckets: Option<u32>,
    /// Ticks per second of the clock that supplies `now`.
    pub hz: u64,
}

impl LimiterConfig {
    /// `limit` cells per `window` ticks at `hz`, no explicit burst.
    pub const fn new(algorithm: AlgorithmKind, limit: u64, window: u64, hz: u64) -> Self {
        LimiterConfig {
            algorithm,
            limit,
            window,
            burst: None,
            buckets: None,
            hz,
        }
    }

    /// The same with a burst.
    pub const fn with_burst(self, burst: u64) -> Self {
        LimiterConfig {
            burst: Some(burst),
            ..self
        }
    }

    /// The same with a bucket count (bucketed window only).
    pub const fn with_buckets(self, buckets: u32) -> Self {
        LimiterConfig {
            buckets: Some(buckets),
            ..self
        }
    }

    /// Checks everything [`AnyLimiter::from_config`] checks but the sliding
    /// log's capacity `N` (its limit is checked against the largest any log
    /// accepts, 2³² − 1).
    ///
    /// ```
    /// use cellrate::compose::{AlgorithmKind, LimiterConfigError, LimiterConfig};
    /// use cellrate::QuotaError;
    /// let c = LimiterConfig::new(AlgorithmKind::Gcra, 10, 1_000, 1_000).with_burst(0);
    /// assert_eq!(c.validate(), Err(LimiterConfigError::Quota(QuotaError::ZeroBurst)));
    /// assert!(LimiterConfig::new(AlgorithmKind::SlidingLog, 1_000, 1_000, 1_000).validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), LimiterConfigError> {
        if self.hz == 0 {
            return Err(LimiterConfigError::ZeroHz);
        }
        if self.buckets.is_some() && self.algorithm != AlgorithmKind::BucketedWindow {
            return Err(LimiterConfigError::BucketsNotSupported(self.algorithm));
        }
        match self.algorithm {
            AlgorithmKind::FixedWindow => {
                self.window_burst_ok()?;
                FixedWindowQuota::try_new(self.limit, self.window)
                    .map_err(LimiterConfigError::Window)?;
            }
            AlgorithmKind::SlidingWindow => {
                self.window_burst_ok()?;
                SlidingWindowQuota::try_new(self.limit, self.window)
                    .map_err(LimiterConfigError::Window)?;
            }
            AlgorithmKind::SlidingLog => {
                self.window_burst_ok()?;
                if self.limit > u64::from(u32::MAX) {
                    return Err(LimiterConfigError::Window(WindowError::LimitTooLarge {
                        max: u64::from(u32::MAX),
                    }));
                }
                // The window and a zero limit, as any log checks them.
                SlidingLog::<1>::try_new(self.limit.min(1), self.window)
                    .map_err(LimiterConfigError::Window)?;
                if self.limit == 0 {
                    return Err(LimiterConfigError::Window(WindowError::ZeroLimit));
                }
            }
            AlgorithmKind::BucketedWindow => {
                self.window_burst_ok()?;
                let buckets = self.buckets.ok_or(LimiterConfigError::BucketsRequired)?;
                BucketedWindowQuota::try_new(self.limit, self.window, buckets)
                    .map_err(LimiterConfigError::Window)?;
            }
            AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket | AlgorithmKind::Gcra => {
                self.quota()?;
            }
        }
        Ok(())
    }

    /// The configuration as a GCRA [`Quota`] at its `hz`: a bucket's own
    /// quota (a leaky bucket's burst is 1); for a window, `limit` per
    /// `window` with a burst of `limit`, the rate its answers announce.
    ///
    /// ```
    /// use cellrate::compose::{AlgorithmKind, LimiterConfig};
    /// let c = LimiterConfig::new(AlgorithmKind::TokenBucket, 10, 1_000, 1_000).with_burst(4);
    /// let q = c.quota().unwrap();
    /// assert_eq!((q.burst(), q.hz()), (4, 1_000));
    /// let leaky = LimiterConfig::new(AlgorithmKind::LeakyBucket, 10, 1_000, 1_000);
    /// assert_eq!(leaky.quota().unwrap().burst(), 1);
    /// ```
    pub fn quota(&self) -> Result<Quota, LimiterConfigError> {
        let burst = match (self.algorithm, self.burst) {
            (AlgorithmKind::LeakyBucket, None | Some(1)) => 1,
            (AlgorithmKind::LeakyBucket, Some(_)) => {
                return Err(LimiterConfigError::BurstNotSupported(self.algorithm))
            }
            (_, Some(b)) => b,
            (_, None) => self.limit,
        };
        Quota::per_ticks(self.limit, self.window)
            .with_burst(burst)
            .try_at_hz(self.hz)
            .map_err(LimiterConfigError::Quota)
    }

    fn window_burst_ok(&self) -> Result<(), LimiterConfigError> {
        match self.burst {
            None => Ok(()),
            Some(b) if b == self.limit => Ok(()),
            Some(_) => Err(LimiterConfigError::BurstNotSupported(self.algorithm)),
        }
    }
}

/// Why a [`LimiterConfig`] cannot be used.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimiterConfigError {
    /// The window parameters are invalid (zero, too large for the state word
    /// or the log's capacity, or `limit × window` overflows).
    Window(WindowError),
    /// The bucket quota is invalid (zero rate, burst or frequency, or not
    /// representable).
    Quota(QuotaError),
    /// This algorithm has no separate burst (windows: the burst is the limit;
    /// leaky bucket: 1).
    BurstNotSupported(AlgorithmKind),
    /// The algorithm name is not one of [`AlgorithmKind::as_str`]'s.
    UnknownAlgorithm,
    /// A bucketed window without a bucket count.
    BucketsRequired,
    /// A bucket count for an algorithm other than the bucketed window.
    BucketsNotSupported(AlgorithmKind),
    /// The frequency of the clock is zero.
    ZeroHz,
}

impl fmt::Display for LimiterConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimiterConfigError::Window(e) => write!(f, "invalid window limiter: {e}"),
            LimiterConfigError::Quota(e) => write!(f, "invalid bucket quota: {e}"),
            LimiterConfigError::BurstNotSupported(k) => {
                write!(f, "{k} takes no separate burst")
            }
            LimiterConfigError::UnknownAlgorithm => f.write_str(
                "unknown algorithm (expected fixed_window, sliding_window, sliding_log, bucketed_window, token_bucket, leaky_bucket or gcra)",
            ),
            LimiterConfigError::BucketsRequired => {
                f.write_str("bucketed_window needs a bucket count (buckets)")
            }
            LimiterConfigError::BucketsNotSupported(k) => write!(f, "{k} takes no bucket count"),
            LimiterConfigError::ZeroHz => f.write_str("the clock frequency is zero"),
        }
    }
}

impl core::error::Error for LimiterConfigError {}

#[repr(u8)]
enum Inner<const N: usize> {
    Fixed(FixedWindow),
    Sliding(SlidingWindow),
    Log(SlidingLog<N>),
    Bucketed(WideBucketedWindow<N>),
    Gcra(Gcra),
}

/// Any of the crate's limiters, chosen by a [`LimiterConfig`] at run time
/// and reconfigurable in place.
///
/// `N` is the capacity of the [`SlidingLog`] variant and the most buckets
/// of the bucketed window (default 64; a larger log limit is
/// [`WindowError::LimitTooLarge`], more buckets
/// [`WindowError::TooManyBuckets`]). Both are stored inline, so an
/// `AnyLimiter<N>` is about `8·N + 144` bytes whatever it runs: pick a
/// small `N` if you configure neither. The bucketed window runs as a
/// [`WideBucketedWindow`], which keeps the whole bucket index: after any
/// silence it answers as Redis does, where the one-word
/// [`BucketedWindow`](crate::window::BucketedWindow) may misread a silence
/// of a multiple of `2^tag_bits` buckets. Every other variant is lock-free
/// on targets with 64-bit CAS; the log and the bucketed window need the
/// `std` feature or a `critical-section` implementation to link on a host.
///
/// ```
/// use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
/// use cellrate::RateLimiter;
/// let config = LimiterConfig::new("sliding_window".parse().unwrap(), 10, 1_000, 1_000);
/// let limiter: AnyLimiter = AnyLimiter::from_config(config).unwrap();
/// assert_eq!(limiter.check(0).unwrap().remaining(), 9);
/// ```
///
/// # Reconfiguration
///
/// [`reconfigure`](Self::reconfigure) takes `&mut self` (a shared [`Gcra`]
/// changes its quota through `&self` with [`Gcra::set_quota`]). What
/// happens to the state:
///
/// | from → to | state kept |
/// |---|---|
/// | fixed → fixed window | the count of the window holding `now`, clamped to the new limit, in the new grid's current window |
/// | sliding → sliding window | the same window: both counts, clamped; another window: the estimate, rounded up and clamped, as the new grid's current count |
/// | log → log | the recorded times the old window still counts (the newest `min(old, new)` limit of them), each until the later of its two expiries |
/// | bucketed → bucketed window | the cells in `now`'s window, clamped, counted in the new grid's current bucket ([`Algorithm::translate`](crate::Algorithm::translate)) |
/// | bucket ↔ bucket (token, leaky, GCRA) | the debt as cells used, at most the new burst, at the new quota's own scale ([`Algorithm::translate`](crate::Algorithm::translate)) |
/// | any other change of algorithm | the cells in use at `now` (`limit − remaining`), charged at `now` to the new limiter, at most its limit; the history's shape is lost |
///
/// A configuration error changes nothing.
pub struct AnyLimiter<const N: usize = 64> {
    config: LimiterConfig,
    inner: Inner<N>,
}

impl<const N: usize> AnyLimiter<N> {
    /// Builds the limiter `config` describes, full.
    ///
    /// ```
    /// use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfigError, LimiterConfig};
    /// use cellrate::window::WindowError;
    /// let bad = LimiterConfig::new(AlgorithmKind::SlidingLog, 100, 1_000, 1_000);
    /// assert_eq!(AnyLimiter::<64>::from_config(bad).err(),
    ///            Some(LimiterConfigError::Window(WindowError::LimitTooLarge { max: 64 })));
    /// ```
    pub fn from_config(config: LimiterConfig) -> Result<Self, LimiterConfigError> {
        Ok(AnyLimiter {
            inner: Self::build(&config)?,
            config,
        })
    }

    fn build(config: &LimiterConfig) -> Result<Inner<N>, LimiterConfigError> {
        if config.hz == 0 {
            return Err(LimiterConfigError::ZeroHz);
        }
        if config.buckets.is_some() && config.algorithm != AlgorithmKind::BucketedWindow {
            return Err(LimiterConfigError::BucketsNotSupported(config.algorithm));
        }
        Ok(match config.algorithm {
            AlgorithmKind::FixedWindow => {
                config.window_burst_ok()?;
                Inner::Fixed(FixedWindow::with_quota(
                    FixedWindowQuota::try_new(config.limit, config.window)
                        .map_err(LimiterConfigError::Window)?,
                ))
            }
            AlgorithmKind::SlidingWindow => {
                config.window_burst_ok()?;
                Inner::Sliding(SlidingWindow::with_quota(
                    SlidingWindowQuota::try_new(config.limit, config.window)
                        .map_err(LimiterConfigError::Window)?,
                ))
            }
            AlgorithmKind::SlidingLog => {
                config.window_burst_ok()?;
                Inner::Log(
                    SlidingLog::try_new(config.limit, config.window)
                        .map_err(LimiterConfigError::Window)?,
                )
            }
            AlgorithmKind::BucketedWindow => {
                config.window_burst_ok()?;
                let buckets = config.buckets.ok_or(LimiterConfigError::BucketsRequired)?;
                // The counts must fit the one-word form (as on Redis and in
                // keyed tables); the ring keeps the whole bucket index.
                BucketedWindowQuota::try_new(config.limit, config.window, buckets)
                    .map_err(LimiterConfigError::Window)?;
                Inner::Bucketed(
                    WideBucketedWindow::try_with_buckets(config.limit, config.window, buckets)
                        .map_err(LimiterConfigError::Window)?,
                )
            }
            AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket | AlgorithmKind::Gcra => {
                Inner::Gcra(Gcra::new(config.quota()?))
            }
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &LimiterConfig {
        &self.config
    }

    /// Switches to `config` at `now`; see the [type docs](Self) for what
    /// happens to the state. On error nothing changes.
    ///
    /// ```
    /// use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
    /// use cellrate::RateLimiter;
    /// let mut l: AnyLimiter = AnyLimiter::from_config(
    ///     LimiterConfig::new(AlgorithmKind::FixedWindow, 10, 1_000, 1_000)).unwrap();
    /// l.check_n(0, 4).unwrap();
    /// // Same algorithm, larger limit: the 4 cells used stay used.
    /// l.reconfigure(10, LimiterConfig::new(AlgorithmKind::FixedWindow, 20, 1_000, 1_000)).unwrap();
    /// assert_eq!(l.peek(10).remaining(), 16);
    /// // Another algorithm: the 4 cells in use are charged to the new one.
    /// l.reconfigure(10, LimiterConfig::new(AlgorithmKind::Gcra, 20, 1_000, 1_000)).unwrap();
    /// assert_eq!(l.peek(10).remaining(), 16);
    /// ```
    pub fn reconfigure(
        &mut self,
        now: u64,
        config: LimiterConfig,
    ) -> Result<(), LimiterConfigError> {
        let fresh = Self::build(&config)?;
        match (&mut self.inner, fresh) {
            (Inner::Fixed(w), Inner::Fixed(new)) => {
                w.set_quota(now, new.quota());
            }
            (Inner::Sliding(w), Inner::Sliding(new)) => {
                w.set_quota(now, new.quota());
            }
            (Inner::Log(log), Inner::Log(_)) => log
                .set_limit(now, config.limit, config.window)
                .map_err(LimiterConfigError::Window)?,
            (Inner::Gcra(g), Inner::Gcra(new)) => g.replace_quota(now, new.quota()),
            (_, fresh) => {
                let used = Self::used(&self.inner, now);
                self.inner = fresh;
                self.charge(now, used);
            }
        }
        self.config = config;
        Ok(())
    }

    fn used(inner: &Inner<N>, now: u64) -> u64 {
        let s = Self::peek_inner(inner, now);
        s.limit().saturating_sub(s.remaining())
    }

    fn charge(&self, now: u64, used: u64) {
        if used > 0 {
            let limit = self.peek(now).limit();
            let _ = self.check_n(now, used.min(limit));
        }
    }

    fn peek_inner(inner: &Inner<N>, now: u64) -> Snapshot {
        match inner {
            Inner::Fixed(l) => l.peek(now),
            Inner::Sliding(l) => l.peek(now),
            Inner::Log(l) => l.peek(now),
            Inner::Bucketed(l) => l.peek(now),
            Inner::Gcra(l) => l.peek(now),
        }
    }

    /// Makes the limiter full, as new.
    pub fn reset(&self) {
        match &self.inner {
            Inner::Fixed(l) => l.reset(),
            Inner::Sliding(l) => l.reset(),
            Inner::Log(l) => l.reset(),
            Inner::Bucketed(l) => l.reset(),
            Inner::Gcra(l) => l.reset(),
        }
    }
}

/// The sliding log's check, out of line (docs/design/composition.md).
#[inline(never)]
fn log_check<const N: usize>(log: &SlidingLog<N>, now: u64, cost: u64) -> Result<Decision, Denied> {
    log.check_n(now, cost)
}

impl<const N: usize> RateLimiter for AnyLimiter<N> {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        match &self.inner {
            Inner::Fixed(l) => l.check_n(now, cost),
            Inner::Sliding(l) => l.check_n(now, cost),
            Inner::Log(l) => log_check(l, now, cost),
            Inner::Bucketed(l) => l.check_n(now, cost),
            Inner::Gcra(l) => l.check_n(now, cost),
        }
    }
    // Each variant's own `check`, so a cost of 1 is a constant where it is used.
    #[inline(always)]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        match &self.inner {
            Inner::Fixed(l) => l.check(now),
            Inner::Sliding(l) => l.check(now),
            Inner::Log(l) => log_check(l, now, 1),
            Inner::Bucketed(l) => l.check(now),
            Inner::Gcra(l) => l.check(now),
        }
    }
    fn peek(&self, now: u64) -> Snapshot {
        Self::peek_inner(&self.inner, now)
    }
}

impl<const N: usize> Revocable for AnyLimiter<N> {
    type Receipt = Receipt;
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Receipt), Denied> {
        match &self.inner {
            Inner::Fixed(l) => l.admit_n(now, cost),
            Inner::Sliding(l) => l.admit_n(now, cost),
            Inner::Log(l) => l.admit_n(now, cost),
            Inner::Bucketed(l) => l.admit_n(now, cost),
            Inner::Gcra(l) => l.admit_n(now, cost),
        }
    }
    fn revoke(&self, receipt: Receipt) {
        match &self.inner {
            Inner::Fixed(l) => l.revoke(receipt),
            Inner::Sliding(l) => l.revoke(receipt),
            Inner::Log(l) => l.revoke(receipt),
            Inner::Bucketed(l) => l.revoke(receipt),
            Inner::Gcra(l) => l.revoke(receipt),
        }
    }
}

impl<const N: usize> fmt::Debug for AnyLimiter<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyLimiter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for AnyLimiter<N> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "AnyLimiter {{ config: {} }}", self.config)
    }
}

/// The tick frequency a configuration read without `hz` uses: the
/// nanosecond clock (`config::DEFAULT_HZ`).
#[cfg(feature = "serde")]
pub(crate) const DEFAULT_HZ: u64 = 1_000_000_000;

/// [`LimiterConfig`]'s fields as read, checked before they become one
/// (`#[serde(try_from)]`).
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimiterFields {
    algorithm: AlgorithmKind,
    limit: u64,
    window: u64,
    #[serde(default)]
    burst: Option<u64>,
    #[serde(default)]
    buckets: Option<u32>,
    #[serde(default = "default_hz")]
    hz: u64,
}

#[cfg(feature = "serde")]
fn default_hz() -> u64 {
    DEFAULT_HZ
}

#[cfg(feature = "serde")]
impl TryFrom<LimiterFields> for LimiterConfig {
    type Error = LimiterConfigError;
    fn try_from(f: LimiterFields) -> Result<Self, LimiterConfigError> {
        let mut config = LimiterConfig::new(f.algorithm, f.limit, f.window, f.hz);
        config.burst = f.burst;
        config.buckets = f.buckets;
        config.validate()?;
        Ok(config)
    }
}
