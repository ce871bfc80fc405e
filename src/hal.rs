//! Rate-limited buses and blocking waits for [embedded-hal 1.0]
//! (feature `embedded-hal`).
//!
//! * [`Throttled`] wraps a bus device (an [`SpiDevice`] or an [`I2c`]) with a
//!   limiter and a [`Clock`]. Each transaction is checked at `clock.now()`
//!   before it touches the bus: admitted, it runs on the inner device;
//!   denied, it returns [`ThrottleError::Limited`] (with
//!   [`retry_after`](Denied::retry_after)) and the bus sees nothing.
//! * [`wait_n`] sleeps with a [`DelayNs`] until a cost is admitted, and
//!   [`Paced`] is the wrapper that does so before each transaction instead
//!   of refusing it.
//!
//! # The math
//!
//! [`Cost::Words`] charges `Σ len` over a transaction's operations (a
//! full-duplex transfer `max(read, write)`); zero words cost nothing.
//! [`wait_n`] sleeps `⌈retry_after · 10⁹ / hz⌉` ns ([`ticks_to_duration`]),
//! in calls of at most [`MAX_DELAY_NS`], and checks again.
//!
//! # Invariants
//!
//! * A denied transaction never reaches the inner device.
//! * An admitted transaction consumes its cost even if the inner device then
//!   fails: the bus was used. The inner error comes back as
//!   [`ThrottleError::Bus`], untouched.
//! * [`wait_n`] returns `Ok` only admitted, at once for
//!   [`Denied::CostTooLarge`]; it never calls `delay_ns(0)`.
//!
//! [embedded-hal 1.0]: https://docs.rs/embedded-hal/1.0.0
//! [`SpiDevice`]: embedded_hal::spi::SpiDevice
//! [`I2c`]: embedded_hal::i2c::I2c
//! [`DelayNs`]: embedded_hal::delay::DelayNs

use core::fmt;

use embedded_hal::delay::DelayNs;
use embedded_hal::{i2c, spi};

use crate::time::ticks_to_duration;
use crate::{Clock, Decision, Denied, RateLimiter};

/// The longest single `delay_ns` call [`wait_n`] makes: 1 s.
pub const MAX_DELAY_NS: u32 = 1_000_000_000;

/// What one transaction costs.
///
/// ```
/// use cellrate::hal::Cost;
/// assert_eq!(Cost::default(), Cost::Transaction);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Cost {
    /// One cell per transaction, whatever it moves.
    #[default]
    Transaction,
    /// One cell per word moved (bytes for `u8` words): bandwidth limiting.
    Words,
}

/// A transaction that did not run.
///
/// ```
/// use cellrate::hal::ThrottleError;
/// use cellrate::{Gcra, Quota};
/// use embedded_hal::spi::{Error as _, ErrorKind};
///
/// let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
/// g.check(0).unwrap();
/// let e: ThrottleError<ErrorKind> = ThrottleError::Limited(g.check(0).unwrap_err());
/// assert_eq!(e.retry_after(), Some(1_000));
/// assert_eq!(e.kind(), ErrorKind::Other);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThrottleError<E> {
    /// The limiter denied the transaction; the bus was not touched.
    Limited(Denied),
    /// The limiter admitted the transaction and the inner device failed.
    Bus(E),
}

impl<E> ThrottleError<E> {
    /// Ticks until the same transaction would be admitted: `None` for a bus
    /// error or a cost that can never fit.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ThrottleError::Limited(denied) => denied.retry_after(),
            ThrottleError::Bus(_) => None,
        }
    }

    /// The denial, if the limiter refused.
    pub fn denied(&self) -> Option<&Denied> {
        match self {
            ThrottleError::Limited(denied) => Some(denied),
            ThrottleError::Bus(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleError::Limited(denied) => denied.fmt(f),
            ThrottleError::Bus(e) => write!(f, "bus error: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for ThrottleError<E> {}

#[cfg(feature = "defmt")]
impl<E: defmt::Format> defmt::Format for ThrottleError<E> {
    fn format(&self, f: defmt::Formatter) {
        match self {
            ThrottleError::Limited(denied) => defmt::write!(f, "Limited({})", denied),
            ThrottleError::Bus(e) => defmt::write!(f, "Bus({})", e),
        }
    }
}

/// A limited transaction is none of the bus failures the trait names:
/// [`Other`](spi::ErrorKind::Other); a bus error keeps its own kind.
impl<E: spi::Error> spi::Error for ThrottleError<E> {
    fn kind(&self) -> spi::ErrorKind {
        match self {
            ThrottleError::Limited(_) => spi::ErrorKind::Other,
            ThrottleError::Bus(e) => e.kind(),
        }
    }
}

/// As for SPI.
impl<E: i2c::Error> i2c::Error for ThrottleError<E> {
    fn kind(&self) -> i2c::ErrorKind {
        match self {
            ThrottleError::Limited(_) => i2c::ErrorKind::Other,
            ThrottleError::Bus(e) => e.kind(),
        }
    }
}

/// A bus device whose transactions pass a rate limiter first.
///
/// `L` is any [`RateLimiter`] (a `&'static Gcra` shares one budget between
/// several devices, or with an interrupt handler); `C` the [`Clock`] whose
/// ticks the limiter's quota counts.
///
/// ```
/// use cellrate::hal::{Cost, ThrottleError, Throttled};
/// use cellrate::{Clock, Gcra, ManualClock, Quota};
/// use embedded_hal::i2c::{ErrorKind, ErrorType, I2c, Operation};
///
/// // A stand-in for a HAL's I2C peripheral.
/// struct Bus;
/// impl ErrorType for Bus { type Error = ErrorKind; }
/// impl I2c for Bus {
///     fn transaction(&mut self, _: u8, _: &mut [Operation<'_>]) -> Result<(), ErrorKind> { Ok(()) }
/// }
///
/// static BUDGET: Gcra = Gcra::new(Quota::per_second(2).at_hz(1_000)); // ms ticks
/// let clock = ManualClock::new(0);
/// let mut sensor = Throttled::new(Bus, &BUDGET, &clock).with_cost(Cost::Transaction);
///
/// sensor.write(0x48, &[0x01]).unwrap();
/// sensor.write(0x48, &[0x02]).unwrap();
/// let err = sensor.write(0x48, &[0x03]).unwrap_err();
/// assert!(matches!(err, ThrottleError::Limited(_)));
/// assert_eq!(err.retry_after(), Some(500));
/// clock.advance(500);
/// assert!(sensor.write(0x48, &[0x03]).is_ok());
/// ```
#[derive(Debug)]
pub struct Throttled<D, L, C> {
    inner: D,
    limiter: L,
    clock: C,
    cost: Cost,
}

impl<D, L: RateLimiter, C: Clock> Throttled<D, L, C> {
    /// Wraps `inner`; each transaction costs one cell ([`Cost::Transaction`]).
    pub const fn new(inner: D, limiter: L, clock: C) -> Self {
        Throttled {
            inner,
            limiter,
            clock,
            cost: Cost::Transaction,
        }
    }

    /// Sets what a transaction costs.
    pub fn with_cost(mut self, cost: Cost) -> Self {
        self.cost = cost;
        self
    }

    /// The inner device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The inner device, mutably: transactions through it bypass the limiter.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }

    /// Unwraps the inner device, limiter and clock.
    pub fn into_parts(self) -> (D, L, C) {
        (self.inner, self.limiter, self.clock)
    }

    /// The same device, but waiting for its budget with `delay` instead of
    /// refusing; `hz` is the frequency of the clock. See [`Paced`].
    pub fn paced<T: DelayNs>(self, delay: T, hz: u64) -> Paced<D, L, C, T> {
        Paced {
            throttled: self,
            delay,
            hz,
        }
    }

    fn cost_of(&self, words: usize) -> u64 {
        match self.cost {
            Cost::Transaction => 1,
            Cost::Words => u64::try_from(words).unwrap_or(u64::MAX),
        }
    }

    /// Checks `words` words (or one transaction) against the limiter now.
    fn admit<E>(&self, words: usize) -> Result<Decision, ThrottleError<E>> {
        self.limiter
            .check_n(self.clock.now(), self.cost_of(words))
            .map_err(ThrottleError::Limited)
    }
}

/// A bus device that **waits** in [`wait_n`] until the limiter admits each
/// transaction (built with [`Throttled::paced`]). Its errors: the inner bus
/// errors and [`Denied::CostTooLarge`] in [`ThrottleError::Limited`].
///
/// ```
/// use cellrate::hal::{Cost, Throttled};
/// use cellrate::{Clock, Gcra, ManualClock, Quota};
/// use embedded_hal::delay::DelayNs;
/// use embedded_hal::spi::{ErrorKind, ErrorType, Operation, SpiDevice};
///
/// struct Dac; // a stand-in for a HAL's SPI device
/// impl ErrorType for Dac { type Error = ErrorKind; }
/// impl SpiDevice for Dac {
///     fn transaction(&mut self, _: &mut [Operation<'_, u8>]) -> Result<(), ErrorKind> { Ok(()) }
/// }
/// // A delay that moves a simulated microsecond clock.
/// struct Sim<'a>(&'a ManualClock);
/// impl DelayNs for Sim<'_> {
///     fn delay_ns(&mut self, ns: u32) { self.0.advance(u64::from(ns).div_ceil(1_000)); }
/// }
///
/// let clock = ManualClock::new(0);
/// // At most 1 000 bytes per second on a microsecond clock, 100 at once.
/// let budget = Gcra::new(Quota::per_second(1_000).with_burst(100).at_hz(1_000_000));
/// let mut dac = Throttled::new(Dac, &budget, &clock)
///     .with_cost(Cost::Words)
///     .paced(Sim(&clock), 1_000_000);
/// for _ in 0..3 {
///     dac.write(&[0; 100]).unwrap(); // never refused: it waits instead
/// }
/// assert_eq!(clock.now(), 200_000); // 2 × 100 bytes at 1 ms each
/// ```
#[derive(Debug)]
pub struct Paced<D, L, C, T> {
    throttled: Throttled<D, L, C>,
    delay: T,
    hz: u64,
}

impl<D, L: RateLimiter, C: Clock, T: DelayNs> Paced<D, L, C, T> {
    /// The inner device.
    pub fn inner(&self) -> &D {
        &self.throttled.inner
    }

    /// The inner device, mutably: transactions through it bypass the limiter.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.throttled.inner
    }

    /// Unwraps the refusing wrapper and the delay.
    pub fn into_parts(self) -> (Throttled<D, L, C>, T) {
        (self.throttled, self.delay)
    }

    /// Waits until `words` words (or one transaction) are admitted.
    fn admit<E>(&mut self, words: usize) -> Result<Decision, ThrottleError<E>> {
        let t = &self.throttled;
        wait_n(
            &t.limiter,
            &t.clock,
            &mut self.delay,
            self.hz,
            t.cost_of(words),
        )
        .map_err(ThrottleError::Limited)
    }
}

#[cfg(feature = "defmt")]
impl<D, L: RateLimiter, C: Clock, T> defmt::Format for Paced<D, L, C, T> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "Paced {{ {}, hz: {=u64} }}", self.throttled, self.hz)
    }
}

/// The cost policy and the limiter's state now.
#[cfg(feature = "defmt")]
impl<D, L: RateLimiter, C: Clock> defmt::Format for Throttled<D, L, C> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Throttled {{ cost: {}, limiter: {} }}",
            self.cost,
            self.limiter.peek(self.clock.now())
        )
    }
}

fn spi_words<W: Copy + 'static>(operations: &[spi::Operation<'_, W>]) -> usize {
    operations
        .iter()
        .map(|op| match op {
            spi::Operation::Read(buf) => buf.len(),
            spi::Operation::Write(buf) => buf.len(),
            spi::Operation::Transfer(read, write) => read.len().max(write.len()),
            spi::Operation::TransferInPlace(buf) => buf.len(),
            spi::Operation::DelayNs(_) => 0,
        })
        .fold(0, usize::saturating_add)
}

fn i2c_words(operations: &[i2c::Operation<'_>]) -> usize {
    operations
        .iter()
        .map(|op| match op {
            i2c::Operation::Read(buf) => buf.len(),
            i2c::Operation::Write(buf) => buf.len(),
        })
        .fold(0, usize::saturating_add)
}

/// The SPI and I2C device traits for a wrapper (`Throttled`, `Paced`): each
/// transaction passes the wrapper's `admit` (its cost in words), then runs
/// on the inner device.
macro_rules! bus_impls {
    ($ty:ident<D, L, C $(, $t:ident: $tb:path)?>) => {
        impl<D: spi::ErrorType, L, C $(, $t)?> spi::ErrorType for $ty<D, L, C $(, $t)?> {
            type Error = ThrottleError<D::Error>;
        }

        impl<W, D, L, C $(, $t)?> spi::SpiDevice<W> for $ty<D, L, C $(, $t)?>
        where
            W: Copy + 'static,
            D: spi::SpiDevice<W>,
            L: RateLimiter,
            C: Clock,
            $($t: $tb,)?
        {
            fn transaction(&mut self, operations: &mut [spi::Operation<'_, W>]) -> Result<(), Self::Error> {
                self.admit(spi_words(operations))?;
                self.inner_mut().transaction(operations).map_err(ThrottleError::Bus)
            }

            fn read(&mut self, buf: &mut [W]) -> Result<(), Self::Error> {
                self.admit(buf.len())?;
                self.inner_mut().read(buf).map_err(ThrottleError::Bus)
            }

            fn write(&mut self, buf: &[W]) -> Result<(), Self::Error> {
                self.admit(buf.len())?;
                self.inner_mut().write(buf).map_err(ThrottleError::Bus)
            }

            fn transfer(&mut self, read: &mut [W], write: &[W]) -> Result<(), Self::Error> {
                self.admit(read.len().max(write.len()))?;
                self.inner_mut().transfer(read, write).map_err(ThrottleError::Bus)
            }

            fn transfer_in_place(&mut self, buf: &mut [W]) -> Result<(), Self::Error> {
                self.admit(buf.len())?;
                self.inner_mut().transfer_in_place(buf).map_err(ThrottleError::Bus)
            }
        }

        impl<D: i2c::ErrorType, L, C $(, $t)?> i2c::ErrorType for $ty<D, L, C $(, $t)?> {
            type Error = ThrottleError<D::Error>;
        }

        impl<A, D, L, C $(, $t)?> i2c::I2c<A> for $ty<D, L, C $(, $t)?>
        where
            A: i2c::AddressMode,
            D: i2c::I2c<A>,
            L: RateLimiter,
            C: Clock,
            $($t: $tb,)?
        {
            fn transaction(
                &mut self,
                address: A,
                operations: &mut [i2c::Operation<'_>],
            ) -> Result<(), Self::Error> {
                self.admit(i2c_words(operations))?;
                self.inner_mut().transaction(address, operations).map_err(ThrottleError::Bus)
            }

            fn read(&mut self, address: A, read: &mut [u8]) -> Result<(), Self::Error> {
                self.admit(read.len())?;
                self.inner_mut().read(address, read).map_err(ThrottleError::Bus)
            }

            fn write(&mut self, address: A, write: &[u8]) -> Result<(), Self::Error> {
                self.admit(write.len())?;
                self.inner_mut().write(address, write).map_err(ThrottleError::Bus)
            }

            fn write_read(&mut self, address: A, write: &[u8], read: &mut [u8]) -> Result<(), Self::Error> {
                self.admit(write.len().saturating_add(read.len()))?;
                self.inner_mut().write_read(address, write, read).map_err(ThrottleError::Bus)
            }
        }
    };
}

bus_impls!(Throttled<D, L, C>);
bus_impls!(Paced<D, L, C, T: DelayNs>);

/// Sleeps `ticks` ticks of a `hz` clock with `delay`, rounding up to the
/// nanosecond, in calls of at most [`MAX_DELAY_NS`].
///
/// ```
/// use cellrate::hal::sleep_ticks;
/// use embedded_hal::delay::DelayNs;
///
/// struct Log(Vec<u32>);
/// impl DelayNs for Log { fn delay_ns(&mut self, ns: u32) { self.0.push(ns) } }
///
/// let mut log = Log(Vec::new());
/// sleep_ticks(&mut log, 2_500, 1_000); // 2.5 s at 1 kHz
/// assert_eq!(log.0, [1_000_000_000, 1_000_000_000, 500_000_000]);
/// ```
pub fn sleep_ticks<D: DelayNs + ?Sized>(delay: &mut D, ticks: u64, hz: u64) {
    let wait = ticks_to_duration(ticks, hz);
    let mut seconds = wait.as_secs();
    while seconds > 0 {
        delay.delay_ns(MAX_DELAY_NS);
        seconds -= 1;
    }
    if wait.subsec_nanos() > 0 {
        delay.delay_ns(wait.subsec_nanos());
    }
}

/// Blocks until `limiter` admits `cost` cells, sleeping with `delay` for
/// each `retry_after` it is told. `clock` must be the clock the limiter's
/// quota counts, running at `hz` ticks per second.
///
/// Returns only admitted, or at once [`Denied::CostTooLarge`]. The clock
/// must advance while `delay` sleeps, or this never returns.
///
/// ```
/// use cellrate::hal::wait_n;
/// use cellrate::{Clock, Gcra, ManualClock, Quota};
/// use embedded_hal::delay::DelayNs;
///
/// // A delay that moves a simulated millisecond clock.
/// struct Sim<'a>(&'a ManualClock);
/// impl DelayNs for Sim<'_> {
///     fn delay_ns(&mut self, ns: u32) { self.0.advance(u64::from(ns).div_ceil(1_000_000)); }
/// }
///
/// let clock = ManualClock::new(0);
/// let radio = Gcra::new(Quota::per_ticks(1, 100).with_burst(400).at_hz(1_000)); // 1 % airtime
/// wait_n(&radio, &clock, &mut Sim(&clock), 1_000, 400).unwrap(); // sent at once
/// wait_n(&radio, &clock, &mut Sim(&clock), 1_000, 400).unwrap(); // after 40 s
/// assert_eq!(clock.now(), 40_000);
/// ```
pub fn wait_n<L, C, D>(
    limiter: &L,
    clock: &C,
    delay: &mut D,
    hz: u64,
    cost: u64,
) -> Result<Decision, Denied>
where
    L: RateLimiter + ?Sized,
    C: Clock + ?Sized,
    D: DelayNs + ?Sized,
{
    loop {
        match limiter.check_n(clock.now(), cost) {
            Ok(decision) => return Ok(decision),
            Err(Denied::Limited(limited)) => sleep_ticks(delay, limited.retry_after().max(1), hz),
            Err(never @ Denied::CostTooLarge { .. }) => return Err(never),
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    struct Sum(u128, u32);
    impl DelayNs for Sum {
        fn delay_ns(&mut self, ns: u32) {
            assert!(ns > 0 && ns <= MAX_DELAY_NS);
            self.0 += u128::from(ns);
            self.1 += 1;
        }
    }

    #[test]
    fn sleep_ticks_rounds_up_and_splits() {
        // (ticks, hz, ⌈ticks·10⁹/hz⌉ worked out by hand, delay_ns calls)
        for (ticks, hz, nanos, calls) in [
            (0u64, 1_000u64, 0u128, 0u32),
            (1, 3, 333_333_334, 1),
            (7_000, 1_000, 7_000_000_000, 7),
            (4_294_967_300, 1_000_000_000, 4_294_967_300, 5),
            (1, 32_768, 30_518, 1),
            (3_600_000, 1_000, 3_600_000_000_000, 3_600),
        ] {
            let mut sum = Sum(0, 0);
            sleep_ticks(&mut sum, ticks, hz);
            assert_eq!((sum.0, sum.1), (nanos, calls), "{ticks} ticks at {hz} Hz");
        }
    }
}
