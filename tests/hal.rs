//! The embedded-hal wrappers against hand-written mock devices that count
//! exactly what reaches the bus. Run with `cargo test --features embedded-hal`.
//!
//! The mocks are written here rather than taken from embedded-hal-mock: they
//! need only count calls and fail on demand, and the main crate's dev
//! dependencies stay as they are.
#![cfg(feature = "embedded-hal")]

use cellrate::hal::{sleep_ticks, wait_n, Cost, ThrottleError, Throttled, MAX_DELAY_NS};
use cellrate::{Clock, Denied, Gcra, ManualClock, Quota};
use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::{self, I2c, TenBitAddress};
use embedded_hal::spi::{self, SpiDevice};

/// Counts transactions and words; fails the call numbered `fail_on` (1-based).
#[derive(Default)]
struct MockSpi {
    transactions: u32,
    words: usize,
    fail_on: Option<u32>,
}

impl spi::ErrorType for MockSpi {
    type Error = spi::ErrorKind;
}

impl SpiDevice for MockSpi {
    fn transaction(&mut self, ops: &mut [spi::Operation<'_, u8>]) -> Result<(), spi::ErrorKind> {
        self.transactions += 1;
        for op in ops.iter_mut() {
            match op {
                spi::Operation::Read(buf) => {
                    buf.fill(0xA5);
                    self.words += buf.len();
                }
                spi::Operation::Write(buf) => self.words += buf.len(),
                spi::Operation::Transfer(r, w) => self.words += r.len().max(w.len()),
                spi::Operation::TransferInPlace(buf) => self.words += buf.len(),
                spi::Operation::DelayNs(_) => {}
            }
        }
        if self.fail_on == Some(self.transactions) {
            return Err(spi::ErrorKind::ModeFault);
        }
        Ok(())
    }
}

/// Records each call by method name, to check that the wrapper forwards the
/// method it was given (a HAL may implement `write_read` specially).
#[derive(Default)]
struct MockI2c {
    calls: Vec<(&'static str, u16)>,
    nack: bool,
}

impl i2c::ErrorType for MockI2c {
    type Error = i2c::ErrorKind;
}

impl MockI2c {
    fn record(&mut self, what: &'static str, address: u16) -> Result<(), i2c::ErrorKind> {
        self.calls.push((what, address));
        if self.nack {
            Err(i2c::ErrorKind::NoAcknowledge(
                i2c::NoAcknowledgeSource::Address,
            ))
        } else {
            Ok(())
        }
    }
}

impl I2c for MockI2c {
    fn transaction(&mut self, a: u8, _: &mut [i2c::Operation<'_>]) -> Result<(), i2c::ErrorKind> {
        self.record("transaction", a.into())
    }
    fn read(&mut self, a: u8, _: &mut [u8]) -> Result<(), i2c::ErrorKind> {
        self.record("read", a.into())
    }
    fn write(&mut self, a: u8, _: &[u8]) -> Result<(), i2c::ErrorKind> {
        self.record("write", a.into())
    }
    fn write_read(&mut self, a: u8, _: &[u8], _: &mut [u8]) -> Result<(), i2c::ErrorKind> {
        self.record("write_read", a.into())
    }
}

impl I2c<TenBitAddress> for MockI2c {
    fn transaction(&mut self, a: u16, _: &mut [i2c::Operation<'_>]) -> Result<(), i2c::ErrorKind> {
        self.record("transaction10", a)
    }
}

fn limited_retry<E: std::fmt::Debug>(r: Result<(), ThrottleError<E>>) -> u64 {
    match r {
        Err(ThrottleError::Limited(Denied::Limited(l))) => l.retry_after(),
        other => panic!("expected a limited error, got {other:?}"),
    }
}

#[test]
fn spi_admits_the_burst_then_limits_without_touching_the_bus() {
    // 3 per second, burst 3, millisecond ticks: T = 1000/3 ms.
    let limiter = Gcra::new(Quota::per_second(3).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut dev = Throttled::new(MockSpi::default(), &limiter, &clock);
    for _ in 0..3 {
        dev.write(&[1, 2]).unwrap();
    }
    // The 4th at t=0 needs TAT + T − now ≤ 3·T, i.e. now ≥ 333.3 ms: 334.
    assert_eq!(limited_retry(dev.write(&[1])), 334);
    assert_eq!(limited_retry(dev.write(&[1])), 334);
    assert_eq!(dev.inner().transactions, 3);
    clock.set(333);
    assert_eq!(limited_retry(dev.read(&mut [0; 4])), 1);
    assert_eq!(dev.inner().transactions, 3);
    clock.set(334);
    let mut buf = [0u8; 4];
    dev.read(&mut buf).unwrap();
    assert_eq!(buf, [0xA5; 4]);
    assert_eq!(dev.inner().transactions, 4);
}

#[test]
fn spi_cost_in_words_counts_what_each_operation_moves() {
    // 16 words per second, burst 16.
    let limiter = Gcra::new(Quota::per_second(16).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut dev = Throttled::new(MockSpi::default(), &limiter, &clock).with_cost(Cost::Words);
    dev.write(&[0; 10]).unwrap(); // 10
    let mut read = [0u8; 2];
    let write = [0u8; 4];
    dev.transaction(&mut [
        spi::Operation::Write(&write),
        spi::Operation::Read(&mut read),
    ])
    .unwrap(); // 6: 16 used
    assert_eq!(limiter.peek(0).remaining(), 0);
    // A transfer moves max(read, write) words: 5, at 62.5 ms per word.
    clock.set(250); // 4 words back
    let mut r = [0u8; 3];
    assert_eq!(limited_retry(dev.transfer(&mut r, &[0; 5])), 63);
    clock.set(313);
    dev.transfer(&mut r, &[0; 5]).unwrap();
    assert_eq!((dev.inner().transactions, dev.inner().words), (3, 21));
    // More words than the burst can never go: no retry time, bus untouched.
    let err = dev.write(&[0; 17]).unwrap_err();
    assert_eq!(
        err,
        ThrottleError::Limited(Denied::CostTooLarge {
            cost: 17,
            limit: 16
        })
    );
    assert_eq!(err.retry_after(), None);
    assert_eq!(dev.inner().transactions, 3);
}

#[test]
fn spi_bus_errors_pass_through_and_still_cost() {
    use embedded_hal::spi::Error as _;
    let limiter = Gcra::new(Quota::per_second(2).at_hz(1_000));
    let clock = ManualClock::new(0);
    let inner = MockSpi {
        fail_on: Some(1),
        ..MockSpi::default()
    };
    let mut dev = Throttled::new(inner, &limiter, &clock);
    let err = dev.write(&[1]).unwrap_err();
    assert_eq!(err, ThrottleError::Bus(spi::ErrorKind::ModeFault));
    assert_eq!(err.kind(), spi::ErrorKind::ModeFault);
    assert_eq!(err.denied(), None);
    dev.write(&[1]).unwrap();
    // Both attempts used the bus, so both consumed a cell.
    let err = dev.write(&[1]).unwrap_err();
    assert_eq!(err.kind(), spi::ErrorKind::Other);
    assert_eq!(err.retry_after(), Some(500));
    assert_eq!(dev.inner().transactions, 2);
}

#[test]
fn i2c_forwards_each_method_and_limits() {
    use embedded_hal::i2c::Error as _;
    let limiter = Gcra::new(Quota::per_second(4).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut dev = Throttled::new(MockI2c::default(), &limiter, &clock);
    dev.write(0x10u8, &[1]).unwrap();
    dev.read(0x11u8, &mut [0; 2]).unwrap();
    dev.write_read(0x12u8, &[1], &mut [0; 2]).unwrap();
    dev.transaction(0x13u8, &mut [i2c::Operation::Write(&[1])])
        .unwrap();
    let err = dev.write(0x14u8, &[1]).unwrap_err();
    assert_eq!(err.kind(), i2c::ErrorKind::Other);
    assert_eq!(err.retry_after(), Some(250));
    assert_eq!(
        dev.inner().calls,
        [
            ("write", 0x10),
            ("read", 0x11),
            ("write_read", 0x12),
            ("transaction", 0x13)
        ]
    );
    // Ten-bit addresses go through the same limiter.
    clock.set(250);
    I2c::<TenBitAddress>::transaction(&mut dev, 0x3FF, &mut []).unwrap();
    assert!(I2c::<TenBitAddress>::transaction(&mut dev, 0x3FF, &mut []).is_err());
    assert_eq!(dev.inner().calls.len(), 5);
    assert_eq!(dev.inner().calls[4], ("transaction10", 0x3FF));
}

#[test]
fn i2c_words_cost_and_bus_error_kind() {
    use embedded_hal::i2c::Error as _;
    let limiter = Gcra::new(Quota::per_second(8).at_hz(1_000));
    let clock = ManualClock::new(0);
    let inner = MockI2c {
        nack: true,
        ..MockI2c::default()
    };
    let mut dev = Throttled::new(inner, &limiter, &clock).with_cost(Cost::Words);
    let err = dev.write_read(0x20u8, &[1, 2, 3], &mut [0; 3]).unwrap_err(); // 6 words
    assert_eq!(
        err.kind(),
        i2c::ErrorKind::NoAcknowledge(i2c::NoAcknowledgeSource::Address)
    );
    assert_eq!(limiter.peek(0).remaining(), 2);
    assert_eq!(limited_retry(dev.write(0x20u8, &[0; 3])), 125);
    assert_eq!(dev.inner().calls.len(), 1);
}

#[test]
fn devices_sharing_one_static_limiter_share_its_budget() {
    static BUS_BUDGET: Gcra = Gcra::new(Quota::per_second(3).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut a = Throttled::new(MockSpi::default(), &BUS_BUDGET, &clock);
    let mut b = Throttled::new(MockI2c::default(), &BUS_BUDGET, &clock);
    a.write(&[1]).unwrap();
    b.write(0x50u8, &[1]).unwrap();
    a.write(&[1]).unwrap();
    assert!(b.write(0x50u8, &[1]).is_err());
    assert!(a.write(&[1]).is_err());
    assert_eq!((a.inner().transactions, b.inner().calls.len()), (2, 1));
}

/// A delay that moves a simulated clock of `hz` ticks per second, and
/// records every call.
struct SimDelay<'a> {
    clock: &'a ManualClock,
    hz: u64,
    calls: Vec<u32>,
    /// Called at each delay with the number of calls so far (to model other
    /// users of a shared limiter).
    meanwhile: Box<dyn FnMut(usize) + 'a>,
}

impl<'a> SimDelay<'a> {
    fn new(clock: &'a ManualClock, hz: u64) -> Self {
        SimDelay {
            clock,
            hz,
            calls: Vec::new(),
            meanwhile: Box::new(|_| {}),
        }
    }
    fn total_ns(&self) -> u128 {
        self.calls.iter().map(|&ns| u128::from(ns)).sum()
    }
}

impl DelayNs for SimDelay<'_> {
    fn delay_ns(&mut self, ns: u32) {
        assert!(ns > 0, "a zero delay would spin");
        assert!(ns <= MAX_DELAY_NS);
        self.calls.push(ns);
        // Whole ticks elapsed, rounding down: a delay never runs the clock
        // ahead of real time.
        let ticks = u128::from(ns) * u128::from(self.hz) / 1_000_000_000;
        self.clock.advance(ticks as u64);
        (self.meanwhile)(self.calls.len());
    }
}

#[test]
fn wait_n_sleeps_exactly_the_retry_time() {
    // From 0, and on a tick counter that wraps past 2⁶⁴ while it waits:
    // the same sleeps.
    for start in [0, u64::MAX - 5_000] {
        // 1 % duty cycle in ms: 400 ms of airtime needs 40 s of rest.
        let radio = Gcra::new(Quota::per_ticks(1, 100).with_burst(400).at_hz(1_000));
        let clock = ManualClock::new(start);
        let mut delay = SimDelay::new(&clock, 1_000);
        let d = wait_n(&radio, &clock, &mut delay, 1_000, 400).unwrap();
        assert_eq!(d.remaining(), 0);
        assert!(delay.calls.is_empty());
        wait_n(&radio, &clock, &mut delay, 1_000, 100).unwrap();
        assert_eq!(clock.now(), start.wrapping_add(10_000));
        assert_eq!(delay.total_ns(), 10_000_000_000);
        assert_eq!(delay.calls.len(), 10);
    }
}

#[test]
fn wait_n_handles_waits_longer_than_one_delay_call() {
    // One message per hour: the second waits 3.6·10¹² ns, 838 times what
    // one u32 delay_ns can express.
    let limiter = Gcra::new(Quota::per_hour(1).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut delay = SimDelay::new(&clock, 1_000);
    wait_n(&limiter, &clock, &mut delay, 1_000, 1).unwrap();
    wait_n(&limiter, &clock, &mut delay, 1_000, 1).unwrap();
    assert_eq!(clock.now(), 3_600_000);
    assert_eq!(delay.total_ns(), 3_600_000_000_000);
    assert!(delay.total_ns() > u128::from(u32::MAX));
    assert_eq!(delay.calls.len(), 3_600);
}

#[test]
fn wait_n_rounds_sub_tick_waits_up() {
    // A 32 768 Hz RTC and 3 per second: T = 32768/3 ticks.
    let limiter = Gcra::new(Quota::per_second(3).with_burst(1).at_hz(32_768));
    let clock = ManualClock::new(0);
    let mut delay = SimDelay::new(&clock, 32_768);
    wait_n(&limiter, &clock, &mut delay, 32_768, 1).unwrap();
    wait_n(&limiter, &clock, &mut delay, 32_768, 1).unwrap();
    // ⌈32768/3⌉ = 10 923 ticks = ⌈10 923·10⁹/32 768⌉ ns.
    assert_eq!(clock.now(), 10_923);
    assert_eq!(delay.total_ns(), 333_343_506);
}

#[test]
fn wait_n_waits_again_when_another_user_takes_the_room() {
    let limiter = Gcra::new(Quota::per_second(1).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut delay = SimDelay::new(&clock, 1_000);
    limiter.check(0).unwrap();
    // During our first sleep (which ends at 1 000 ms), someone else sends
    // at 1 000 ms, so we must sleep a second time.
    let (lim, clk) = (&limiter, &clock);
    delay.meanwhile = Box::new(move |call| {
        if call == 1 {
            lim.check(clk.now()).unwrap();
        }
    });
    wait_n(&limiter, &clock, &mut delay, 1_000, 1).unwrap();
    assert_eq!(clock.now(), 2_000);
    assert_eq!(delay.calls, [MAX_DELAY_NS, MAX_DELAY_NS]);
}

#[test]
fn wait_n_never_waits_for_a_cost_that_cannot_fit() {
    let limiter = Gcra::new(Quota::per_second(5).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut delay = SimDelay::new(&clock, 1_000);
    assert_eq!(
        wait_n(&limiter, &clock, &mut delay, 1_000, 6),
        Err(Denied::CostTooLarge { cost: 6, limit: 5 })
    );
    assert!(delay.calls.is_empty());
}

#[test]
fn sleep_ticks_splits_at_one_second() {
    let clock = ManualClock::new(0);
    let mut delay = SimDelay::new(&clock, 1_000_000);
    sleep_ticks(&mut delay, 2_000_001, 1_000_000); // 2.000001 s
    assert_eq!(delay.calls, [MAX_DELAY_NS, MAX_DELAY_NS, 1_000]);
    assert_eq!(clock.now(), 2_000_001);
}

#[test]
fn paced_spi_waits_instead_of_refusing() {
    // 2 per second, burst 2, millisecond ticks.
    let limiter = Gcra::new(Quota::per_second(2).at_hz(1_000));
    let clock = ManualClock::new(0);
    let mut dev = Throttled::new(MockSpi::default(), &limiter, &clock)
        .paced(SimDelay::new(&clock, 1_000), 1_000);
    for _ in 0..5 {
        dev.write(&[7]).unwrap();
    }
    // Two at once, then one every 500 ms.
    assert_eq!(clock.now(), 1_500);
    assert_eq!(dev.inner().transactions, 5);
    let (throttled, delay) = dev.into_parts();
    assert_eq!(delay.calls, [500_000_000; 3]);
    assert_eq!(throttled.inner().transactions, 5);
}

#[test]
fn paced_i2c_refuses_only_what_can_never_fit_and_passes_bus_errors() {
    let limiter = Gcra::new(Quota::per_second(4).at_hz(1_000));
    let clock = ManualClock::new(0);
    let inner = MockI2c {
        nack: true,
        ..MockI2c::default()
    };
    let mut dev = Throttled::new(inner, &limiter, &clock)
        .with_cost(Cost::Words)
        .paced(SimDelay::new(&clock, 1_000), 1_000);
    // 5 bytes can never fit a burst of 4: refused at once, bus untouched.
    assert_eq!(
        dev.write(0x20u8, &[0; 5]),
        Err(ThrottleError::Limited(Denied::CostTooLarge {
            cost: 5,
            limit: 4
        }))
    );
    assert!(dev.inner().calls.is_empty());
    // 4 bytes now, 4 more after a full second; the NACK comes through.
    for _ in 0..2 {
        assert_eq!(
            dev.write_read(0x20u8, &[1, 2], &mut [0; 2]),
            Err(ThrottleError::Bus(i2c::ErrorKind::NoAcknowledge(
                i2c::NoAcknowledgeSource::Address
            )))
        );
    }
    assert_eq!(clock.now(), 1_000);
    assert_eq!(
        dev.inner().calls,
        [("write_read", 0x20), ("write_read", 0x20)]
    );
}
