//! The blocking and async waits: served in booking order, never above the
//! rate, bounded waits book nothing, a cancelled async wait gives its cells
//! back.
#![cfg(feature = "std")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cellrate::wait::{wait_n_with, Jitter};
use cellrate::{Denied, Gcra, ManualClock, Quota};

/// Reference: the departures of `n` unit requests booked at time 0 on a
/// GCRA of `per` cells per second with burst `b` (ms clock): the first `b`
/// leave at once, then one every `1000 / per` ms.
fn reference(n: u64, per: u64, b: u64) -> Vec<u64> {
    (0..n)
        .map(|i| if i < b { 0 } else { (i + 1 - b) * 1_000 / per })
        .collect()
}

#[test]
fn waiters_are_served_in_order_at_the_exact_rate() {
    // From 0, on Unix milliseconds, and on a clock about to wrap past 2⁶⁴:
    // the same departures.
    let cases = [(10u64, 1u64), (4, 3), (100, 20)];
    for (start, (per, b)) in [0, 1_796_169_600_000, u64::MAX - 100]
        .into_iter()
        .flat_map(|s| cases.map(|c| (s, c)))
    {
        let g = Gcra::new(Quota::per_second(per).with_burst(b).at_hz(1_000));
        let clock = ManualClock::new(start);
        let mut departures = Vec::new();
        for _ in 0..3 * b + 5 {
            let mut slept = Duration::ZERO;
            wait_n_with(&g, &clock, 1, None, Jitter::NONE, |d| slept = d).unwrap();
            departures.push(slept.as_millis() as u64);
        }
        assert_eq!(
            departures,
            reference(3 * b + 5, per, b),
            "per {per} burst {b} from {start}"
        );
    }
}

#[test]
fn threads_waiting_together_never_exceed_the_rate() {
    let g = Arc::new(Gcra::new(Quota::per_second(20).with_burst(2).at_hz(1_000)));
    let clock = Arc::new(ManualClock::new(0));
    let departures = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (g, clock, departures) = (g.clone(), clock.clone(), departures.clone());
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let mut at = 0;
                    wait_n_with(&g, &*clock, 1, None, Jitter::NONE, |d| {
                        at = d.as_millis() as u64
                    })
                    .unwrap();
                    departures.lock().unwrap().push(at);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut d = departures.lock().unwrap().clone();
    d.sort_unstable();
    // 40 sends at a frozen clock: exactly the GCRA schedule, whoever booked.
    assert_eq!(d, reference(40, 20, 2));
}

#[test]
fn a_bounded_wait_books_nothing_when_too_long() {
    let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
    let clock = ManualClock::new(0);
    g.check(0).unwrap();
    let before = g.peek(0);
    let err = wait_n_with(
        &g,
        &clock,
        1,
        Some(Duration::from_millis(500)),
        Jitter::NONE,
        |_| panic!("must not sleep"),
    )
    .unwrap_err();
    assert!(matches!(err, Denied::Limited(_)));
    assert_eq!(g.peek(0), before);
    assert!(matches!(
        wait_n_with(&g, &clock, 5, None, Jitter::NONE, |_| ()),
        Err(Denied::CostTooLarge { .. })
    ));
}

#[test]
fn jitter_only_delays() {
    let g = Gcra::new(Quota::per_second(10).with_burst(1).at_hz(1_000));
    let clock = ManualClock::new(0);
    let jitter = Jitter::up_to(Duration::from_millis(30));
    let mut extra = Vec::new();
    for i in 0..50u64 {
        let mut slept = Duration::ZERO;
        wait_n_with(&g, &clock, 1, None, jitter, |d| slept = d).unwrap();
        let booked = Duration::from_millis(i * 100);
        assert!(slept >= booked && slept <= booked + Duration::from_millis(30));
        extra.push(slept - booked);
    }
    // Not a constant: the draws differ.
    extra.sort();
    extra.dedup();
    assert!(extra.len() > 10);
}

/// tokio's (paused, auto-advancing) time in nanoseconds, as a [`Clock`].
#[cfg(feature = "std")]
struct TokioTime(tokio::time::Instant);

#[cfg(feature = "std")]
impl cellrate::Clock for TokioTime {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

#[cfg(feature = "std")]
#[tokio::test(start_paused = true)]
async fn a_cancelled_async_wait_gives_its_cells_back() {
    use cellrate::wait::wait_n_async;
    use cellrate::Clock;
    let clock = TokioTime(tokio::time::Instant::now());
    let g = Gcra::new(Quota::per_second(10).with_burst(1).at_hz(1_000_000_000));
    g.check(clock.now()).unwrap();
    // Booked for 100 ms from now, then dropped after 10 ms.
    let waited = tokio::time::timeout(
        Duration::from_millis(10),
        wait_n_async(&g, &clock, 1, None, Jitter::NONE, tokio::time::sleep),
    )
    .await;
    assert!(waited.is_err());
    // Its cell is back: the next waiter is served at 100 ms, not 200 ms.
    let start = tokio::time::Instant::now();
    wait_n_async(&g, &clock, 1, None, Jitter::NONE, tokio::time::sleep)
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(90));
}
