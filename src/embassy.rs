//! [embassy-time] integration (feature `embassy-time`): a [`Clock`] over
//! embassy's tick counter and an async wait until a cost is admitted.
//!
//! # The math
//!
//! embassy-time counts time in ticks of [`TICK_HZ`](embassy_time::TICK_HZ)
//! per second (a build-time choice of the application, 1 MHz unless a
//! `tick-hz-*` feature says otherwise). [`EmbassyClock::now`] is
//! `Instant::now().as_ticks()`, so a quota built with
//! `.at_hz(EmbassyClock::HZ)` counts exactly the ticks embassy's timers
//! sleep in: [`wait_n`] sleeps `retry_after` ticks with
//! [`Timer::after_ticks`](embassy_time::Timer::after_ticks), no unit
//! conversion and no rounding.
//!
//! # Invariants
//!
//! * [`wait_n`] resolves only with an admitted decision, or at once with
//!   [`Denied::CostTooLarge`]; every sleep is at least one tick, so it never
//!   busy-loops on the executor.
//! * Dropping the future before it resolves consumes nothing: cells are
//!   taken only by the check that admits.
//!
//! [embassy-time]: https://docs.rs/embassy-time

use embassy_time::{Instant, Timer};

use crate::{Clock, Decision, Denied, RateLimiter};

/// embassy-time's tick counter as a [`Clock`]: `now()` is
/// `Instant::now().as_ticks()`, at [`EmbassyClock::HZ`] ticks per second.
///
/// ```
/// use cellrate::embassy::EmbassyClock;
/// use cellrate::{Clock, Gcra, Quota};
///
/// static TX: Gcra = Gcra::new(Quota::per_second(10).at_hz(EmbassyClock::HZ));
/// assert!(TX.check(EmbassyClock.now()).is_ok());
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EmbassyClock;

impl EmbassyClock {
    /// Ticks per second of embassy-time's clock (its `TICK_HZ`).
    pub const HZ: u64 = embassy_time::TICK_HZ;
}

impl Clock for EmbassyClock {
    fn now(&self) -> u64 {
        Instant::now().as_ticks()
    }
}

/// Waits (asynchronously, on embassy's timer) until `limiter` admits `cost`
/// cells at embassy's current tick, then returns the admitting decision.
/// The limiter's quota must count embassy ticks (`.at_hz(EmbassyClock::HZ)`).
///
/// A cost above the burst returns [`Denied::CostTooLarge`] at once. When
/// another task or an interrupt handler takes the room it was waiting for,
/// it sleeps again.
///
/// ```
/// use cellrate::embassy::{wait_n, EmbassyClock};
/// use cellrate::{Gcra, Quota};
///
/// static UPLINK: Gcra = Gcra::new(Quota::per_minute(6).at_hz(EmbassyClock::HZ));
///
/// async fn send_report(payload: &[u8]) {
///     // Sleeps until the uplink budget has room, then sends.
///     wait_n(&UPLINK, 1).await.unwrap();
///     // radio.send(payload).await;
/// #   let _ = payload;
/// }
/// ```
pub async fn wait_n<L: RateLimiter + ?Sized>(limiter: &L, cost: u64) -> Result<Decision, Denied> {
    loop {
        match limiter.check_n(Instant::now().as_ticks(), cost) {
            Ok(decision) => return Ok(decision),
            Err(Denied::Limited(limited)) => Timer::after_ticks(limited.retry_after().max(1)).await,
            Err(never @ Denied::CostTooLarge { .. }) => return Err(never),
        }
    }
}

/// [`wait_n`] for one cell.
pub async fn wait<L: RateLimiter + ?Sized>(limiter: &L) -> Result<Decision, Denied> {
    wait_n(limiter, 1).await
}
