//! [`Clock`] (its docs say what a `now` may be), two clocks and the
//! tick/[`Duration`] conversions.

use core::time::Duration;

use crate::sync::{loom_const_fn, StateWord};

/// A monotonic source of ticks, for the convenience wrappers (blocking
/// waits, throttled buses) that must ask for the time. The limiters never
/// read a clock: every check takes `now`, ticks at the frequency declared in
/// the [`Quota`](crate::Quota).
///
/// # Any clock
///
/// A limiter reads only the differences between the `now`s it is given, so
/// a clock may start anywhere and may wrap past `u64::MAX` to 0: a counter
/// from boot, a hardware timer, or Unix time, which every server of a fleet
/// agrees on. The answers are those the same traffic gets from tick 0. The
/// one limit is the longest gap between two checks of one limiter,
/// [`Quota::horizon_ticks`](crate::Quota::horizon_ticks); past it the
/// limiter may deny more, never admit more. The window counters align their
/// windows to multiples of the window on the caller's clock (on Unix time,
/// to the calendar).
///
/// ```
/// use cellrate::{Gcra, Quota, RateLimiter};
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// /// Unix time in nanoseconds, modulo 2⁶⁴ (the limiter reads differences).
/// fn unix_ns() -> u64 {
///     let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
///     since.as_nanos() as u64
/// }
///
/// let api = Gcra::new(Quota::per_second(7).at_hz(1_000_000_000));
/// let now = unix_ns();
/// assert!(api.check(now).is_ok());
/// assert_eq!(api.peek(now).remaining(), 6);
/// // One second later, on the same clock: full again.
/// assert_eq!(api.peek(now + 1_000_000_000).remaining(), 7);
/// ```
pub trait Clock {
    /// The current tick count. Must never go backwards; it may wrap past
    /// `u64::MAX` to 0 (limiters read differences between `now`s modulo
    /// 2⁶⁴).
    fn now(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> u64 {
        (**self).now()
    }
}

/// A clock that moves only when told: for tests, simulations and examples.
/// Shareable (`&self` everywhere), usable in a `static`.
///
/// ```
/// use cellrate::{Clock, ManualClock};
/// static CLOCK: ManualClock = ManualClock::new(0);
/// CLOCK.advance(1_000);
/// CLOCK.set(5_000);
/// assert_eq!(CLOCK.now(), 5_000);
/// ```
pub struct ManualClock {
    now: StateWord,
}

impl ManualClock {
    loom_const_fn! {
        /// A clock reading `start`.
        pub fn new(start: u64) -> Self {
            ManualClock { now: StateWord::new(start) }
        }
    }

    /// Moves the clock forward by `ticks`, wrapping past `u64::MAX` as a
    /// hardware counter does (limiters compare differences, so a wrapping
    /// clock is a valid clock); returns the new reading.
    ///
    /// ```
    /// use cellrate::ManualClock;
    /// let clock = ManualClock::new(u64::MAX - 1);
    /// assert_eq!(clock.advance(3), 1);
    /// ```
    pub fn advance(&self, ticks: u64) -> u64 {
        let step = |t: u64| -> Result<(u64, u64), core::convert::Infallible> {
            let next = t.wrapping_add(ticks);
            Ok((next, next))
        };
        match self.now.update(step) {
            Ok(now) => now,
            Err(never) => match never {},
        }
    }

    /// Sets the reading (tests may set it backwards to model a faulty clock).
    pub fn set(&self, now: u64) {
        self.now.store(now)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now.load()
    }
}

impl core::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

const NANOS: u128 = 1_000_000_000;

/// `ticks` at `hz` as a [`Duration`], `⌈ticks · 10⁹ / hz⌉` ns in 128-bit
/// integers: rounded up (a wait converted is never shorter), exact when the
/// result is whole; saturates at [`Duration::MAX`] (also for `hz == 0`).
///
/// ```
/// use cellrate::ticks_to_duration;
/// use core::time::Duration;
/// assert_eq!(ticks_to_duration(32_768, 32_768), Duration::from_secs(1));
/// assert_eq!(ticks_to_duration(1, 3), Duration::from_nanos(333_333_334));
/// ```
pub const fn ticks_to_duration(ticks: u64, hz: u64) -> Duration {
    if hz == 0 {
        return Duration::MAX;
    }
    // ticks · 10⁹ < 2⁶⁴ · 2³⁰: no overflow in u128.
    let nanos = (ticks as u128 * NANOS).div_ceil(hz as u128);
    let secs = nanos / NANOS;
    if secs > u64::MAX as u128 {
        return Duration::MAX;
    }
    Duration::new(secs as u64, (nanos % NANOS) as u32)
}

/// `duration` as ticks at `hz`, `⌈nanos · hz / 10⁹⌉`: rounded up, exact
/// when whole; saturates at `u64::MAX`.
///
/// ```
/// use cellrate::duration_to_ticks;
/// use core::time::Duration;
/// assert_eq!(duration_to_ticks(Duration::from_millis(1), 32_768), 33); // 32.768 → 33
/// assert_eq!(duration_to_ticks(Duration::from_secs(2), 1_000), 2_000);
/// assert_eq!(duration_to_ticks(Duration::MAX, 1_000_000_000), u64::MAX);
/// ```
pub const fn duration_to_ticks(duration: Duration, hz: u64) -> u64 {
    let Some(scaled) = duration.as_nanos().checked_mul(hz as u128) else {
        return u64::MAX;
    };
    let ticks = scaled.div_ceil(NANOS);
    if ticks > u64::MAX as u128 {
        u64::MAX
    } else {
        ticks as u64
    }
}

#[cfg(feature = "std")]
pub use self::std_clock::StdClock;

#[cfg(feature = "std")]
mod std_clock {
    use std::time::Instant;

    /// A monotonic clock in nanoseconds since the clock was made
    /// (`hz = 1_000_000_000`), over [`std::time::Instant`].
    ///
    /// ```
    /// use cellrate::{Clock, Gcra, Quota, RateLimiter, StdClock};
    ///
    /// let clock = StdClock::new();
    /// let limiter = Gcra::new(Quota::per_second(10).at_hz(StdClock::HZ));
    /// assert!(limiter.check(clock.now()).is_ok());
    /// ```
    #[derive(Clone, Copy, Debug)]
    pub struct StdClock {
        origin: Instant,
    }

    impl StdClock {
        /// Ticks per second: nanoseconds.
        pub const HZ: u64 = 1_000_000_000;

        /// A clock reading 0 now.
        pub fn new() -> Self {
            StdClock {
                origin: Instant::now(),
            }
        }
    }

    #[cfg(feature = "defmt")]
    impl defmt::Format for StdClock {
        fn format(&self, f: defmt::Formatter) {
            defmt::write!(f, "StdClock {{ now: {=u64} }}", super::Clock::now(self))
        }
    }

    impl Default for StdClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl super::Clock for StdClock {
        fn now(&self) -> u64 {
            // Nanoseconds modulo 2⁶⁴ (584 years): a wrapping counter, which
            // every limiter reads by differences.
            self.origin.elapsed().as_nanos() as u64
        }
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ManualClock {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "ManualClock {{ now: {=u64} }}", self.now())
    }
}
