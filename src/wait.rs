//! Waiting for budget instead of being refused (feature `std`), for code that calls someone else's API: a
//! crawler, an SDK, a job runner.
//!
//! # The math
//!
//! A wait books its cells with [`Gcra::reserve_n`] at the earliest tick they
//! conform, `send = max(TAT, now) + cost·T − (τ + T)` clamped to `now`,
//! then sleeps `send − now` ticks. Booking moves the TAT at once, so:
//!
//! * **in order**: waiters are served in the order they booked (a later
//!   waiter's booking starts from the earlier one's TAT);
//! * **exact**: the sends follow the GCRA schedule, so at no time have more
//!   cells been sent than the quota admits; a sleep that oversleeps only
//!   sends later;
//! * **jitter** ([`Jitter`]) is added *after* the booked time (as governor's
//!   `until_ready_with_jitter` does): it spreads a thundering herd, and can
//!   only send later, never above the rate.
//!
//! A cost above the burst is [`Denied::CostTooLarge`] at once; a wait
//! longer than `max_wait` books nothing and returns the [`Denied::Limited`]
//! it would have needed; an async wait dropped before it resolves gives its
//! cells back ([`Gcra::refund_n`]). The time is the caller's [`Clock`].

use core::time::Duration;
use std::hash::{BuildHasher, Hasher};

use crate::gcra::{Gcra, Reservation};
use crate::time::{duration_to_ticks, ticks_to_duration};
use crate::{Clock, Denied};

/// A random extra delay of up to `max`, added after the booked send time.
///
/// ```
/// use cellrate::wait::Jitter;
/// use std::time::Duration;
/// let j = Jitter::up_to(Duration::from_millis(50));
/// assert!(j.sample() <= Duration::from_millis(50));
/// assert_eq!(Jitter::NONE.sample(), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Jitter {
    max: Duration,
}

impl Jitter {
    /// No jitter.
    pub const NONE: Jitter = Jitter {
        max: Duration::ZERO,
    };
    /// Uniform in `[0, max]`.
    pub const fn up_to(max: Duration) -> Self {
        Jitter { max }
    }
    /// One draw (from the standard library's randomly keyed hasher: no
    /// extra dependency, not for cryptography).
    pub fn sample(&self) -> Duration {
        let nanos = self.max.as_nanos().min(u64::MAX as u128) as u64;
        if nanos == 0 {
            return Duration::ZERO;
        }
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(nanos);
        let draw = (h.finish() as u128 * (nanos as u128 + 1)) >> 64;
        Duration::from_nanos(draw as u64)
    }
}

/// Books `cost` cells now within `max_wait`: the reservation and the pause
/// (its wait plus the jitter).
fn book<C: Clock + ?Sized>(
    gcra: &Gcra,
    clock: &C,
    cost: u64,
    max_wait: Option<Duration>,
    jitter: Jitter,
) -> Result<(Reservation, Duration), Denied> {
    let hz = gcra.quota().hz();
    let max = max_wait.map_or(u64::MAX, |d| duration_to_ticks(d, hz));
    let r = gcra.reserve_n(clock.now(), cost, max)?;
    Ok((
        r,
        ticks_to_duration(r.send_after(), hz).saturating_add(jitter.sample()),
    ))
}

/// Blocks until `cost` cells of `gcra` may be sent, sleeping with
/// `std::thread::sleep`, then returns the reservation. `clock` must count
/// the quota's ticks.
///
/// ```
/// use cellrate::StdClock;
/// use cellrate::wait::{wait_n, Jitter};
/// use cellrate::{Gcra, Quota};
/// let api = Gcra::new(Quota::per_second(1_000).with_burst(2).at_hz(StdClock::HZ));
/// let clock = StdClock::new();
/// for _ in 0..4 {
///     wait_n(&api, &clock, 1, None, Jitter::NONE).unwrap(); // the 3rd and 4th wait ~1 ms each
/// }
/// ```
pub fn wait_n<C: Clock + ?Sized>(
    gcra: &Gcra,
    clock: &C,
    cost: u64,
    max_wait: Option<Duration>,
    jitter: Jitter,
) -> Result<Reservation, Denied> {
    wait_n_with(gcra, clock, cost, max_wait, jitter, std::thread::sleep)
}

/// [`wait_n`] with the sleeper given (a test's fake, an instrumented
/// sleep). The sleeper is called once, with the wait plus the jitter (not
/// at all when both are zero).
///
/// ```
/// use cellrate::wait::{wait_n_with, Jitter};
/// use cellrate::{Gcra, ManualClock, Quota};
/// use std::time::Duration;
/// let g = Gcra::new(Quota::per_second(10).with_burst(1).at_hz(1_000));
/// let clock = ManualClock::new(0);
/// let mut slept = Vec::new();
/// for _ in 0..3 {
///     wait_n_with(&g, &clock, 1, None, Jitter::NONE, |d| slept.push(d)).unwrap();
/// }
/// // Booked in order at 0, 100 and 200 ms while the clock stood still.
/// assert_eq!(slept, [Duration::from_millis(100), Duration::from_millis(200)]);
/// ```
pub fn wait_n_with<C: Clock + ?Sized>(
    gcra: &Gcra,
    clock: &C,
    cost: u64,
    max_wait: Option<Duration>,
    jitter: Jitter,
    mut sleep: impl FnMut(Duration),
) -> Result<Reservation, Denied> {
    let (r, pause) = book(gcra, clock, cost, max_wait, jitter)?;
    if !pause.is_zero() {
        sleep(pause);
    }
    Ok(r)
}

/// Gives the cells back if the async wait is dropped before it resolves.
struct Refund<'a, C: Clock + ?Sized> {
    gcra: &'a Gcra,
    clock: &'a C,
    cost: u64,
    armed: bool,
}

impl<C: Clock + ?Sized> Drop for Refund<'_, C> {
    fn drop(&mut self) {
        if self.armed && self.cost > 0 {
            self.gcra.refund_n(self.clock.now(), self.cost);
        }
    }
}

/// Waits in an async task until `cost` cells of `gcra` may be sent, calling
/// the runtime's `sleep` once with the pause. Dropped before it resolves,
/// it gives the cells back.
///
/// ```
/// use cellrate::wait::{wait_n_async, Jitter};
/// use cellrate::{Gcra, ManualClock, Quota};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = &ManualClock::new(0); // milliseconds, moved by each sleep
/// let api = Gcra::new(Quota::per_second(10).with_burst(1).at_hz(1_000));
/// let start = tokio::time::Instant::now();
/// for _ in 0..3 {
///     wait_n_async(&api, clock, 1, None, Jitter::NONE, |pause| async move {
///         tokio::time::sleep(pause).await;
///         clock.advance(pause.as_millis() as u64);
///     })
///     .await
///     .unwrap();
/// }
/// assert_eq!(start.elapsed(), std::time::Duration::from_millis(200));
/// # }
/// ```
pub async fn wait_n_async<C, S, F>(
    gcra: &Gcra,
    clock: &C,
    cost: u64,
    max_wait: Option<Duration>,
    jitter: Jitter,
    sleep: S,
) -> Result<Reservation, Denied>
where
    C: Clock + ?Sized,
    S: FnOnce(Duration) -> F,
    F: core::future::Future<Output = ()>,
{
    let (r, pause) = book(gcra, clock, cost, max_wait, jitter)?;
    if !pause.is_zero() {
        let mut guard = Refund {
            gcra,
            clock,
            cost,
            armed: true,
        };
        sleep(pause).await;
        guard.armed = false;
    }
    Ok(r)
}
