//! The embassy-time adapter on the host, against embassy-time's mock time
//! driver (a clock the test moves by hand). Run with
//! `cargo test --features embassy-time`.
#![cfg(feature = "embassy-time")]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use cellrate::embassy::{wait, wait_n, EmbassyClock};
use cellrate::{Clock, Denied, Gcra, Quota};
use embassy_time::{Duration, MockDriver};

/// The mock driver is one global clock: tests take turns.
fn driver() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    MockDriver::get().reset();
    guard
}

/// Counts wake-ups.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn waker() -> (Arc<CountingWaker>, Waker) {
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    (counter.clone(), Waker::from(counter))
}

fn advance_us(us: u64) {
    MockDriver::get().advance(Duration::from_micros(us));
}

#[test]
fn clock_reads_embassy_ticks() {
    let _g = driver();
    assert_eq!(EmbassyClock::HZ, embassy_time::TICK_HZ);
    assert_eq!(EmbassyClock.now(), 0);
    advance_us(1_500);
    assert_eq!(EmbassyClock.now(), Duration::from_micros(1_500).as_ticks());
}

#[test]
fn wait_resolves_at_once_when_admitted_and_sleeps_exactly_retry_after() {
    let _g = driver();
    // 2 per second, no burst: one cell every 500 ms.
    let limiter = Gcra::new(Quota::per_second(2).with_burst(1).at_hz(EmbassyClock::HZ));
    let (wakes, waker) = waker();
    let mut cx = Context::from_waker(&waker);

    let first = wait(&limiter);
    assert!(matches!(pin!(first).poll(&mut cx), Poll::Ready(Ok(_))));

    let mut second = pin!(wait(&limiter));
    assert!(second.as_mut().poll(&mut cx).is_pending());
    let half_second = Duration::from_millis(500).as_ticks();
    // One tick short: no wake-up yet, still pending.
    MockDriver::get().advance(Duration::from_ticks(half_second - 1));
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    assert!(second.as_mut().poll(&mut cx).is_pending());
    // The last tick: woken, and admitted.
    MockDriver::get().advance(Duration::from_ticks(1));
    assert!(wakes.0.load(Ordering::SeqCst) >= 1);
    match second.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(decision)) => assert_eq!(decision.remaining(), 0),
        other => panic!("expected admission, got {other:?}"),
    }
    assert_eq!(EmbassyClock.now(), half_second);
}

#[test]
fn wait_sleeps_again_when_someone_else_takes_the_room() {
    let _g = driver();
    let limiter = Gcra::new(Quota::per_second(1).with_burst(1).at_hz(EmbassyClock::HZ));
    let (_wakes, waker) = waker();
    let mut cx = Context::from_waker(&waker);
    limiter.check(0).unwrap();

    let mut ours = pin!(wait_n(&limiter, 1));
    assert!(ours.as_mut().poll(&mut cx).is_pending());
    advance_us(1_000_000);
    // An interrupt handler sends first, at the very tick we woke for.
    limiter.check(EmbassyClock.now()).unwrap();
    assert!(ours.as_mut().poll(&mut cx).is_pending());
    advance_us(999_999);
    assert!(ours.as_mut().poll(&mut cx).is_pending());
    advance_us(1);
    assert!(matches!(ours.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
}

#[test]
fn a_cost_that_can_never_fit_returns_at_once() {
    let _g = driver();
    let limiter = Gcra::new(Quota::per_second(4).at_hz(EmbassyClock::HZ));
    let (_wakes, waker) = waker();
    let mut cx = Context::from_waker(&waker);
    let fut = pin!(wait_n(&limiter, 5));
    assert!(matches!(
        fut.poll(&mut cx),
        Poll::Ready(Err(Denied::CostTooLarge { cost: 5, limit: 4 }))
    ));
}

#[test]
fn dropping_a_pending_wait_consumes_nothing() {
    let _g = driver();
    let limiter = Gcra::new(Quota::per_second(1).with_burst(1).at_hz(EmbassyClock::HZ));
    let (_wakes, waker) = waker();
    let mut cx = Context::from_waker(&waker);
    limiter.check(0).unwrap();
    {
        let pending = pin!(wait(&limiter));
        assert!(pending.poll(&mut cx).is_pending());
    }
    advance_us(1_000_000);
    // Still exactly one cell available at 1 s: the dropped wait took none.
    assert!(limiter.check(EmbassyClock.now()).is_ok());
    assert!(limiter.check(EmbassyClock.now()).is_err());
}
