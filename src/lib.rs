//! # cellrate
//!
//! Exact, lock-free rate limiting with the generic cell rate algorithm (GCRA)
//! and its family, from a Cortex-M0 interrupt handler to a server fleet.
//!
//! * **Time is a number you supply.** Every check takes `now: u64`, ticks of a
//!   monotonic clock at a frequency you declare in the [`Quota`], from any
//!   origin: a counter from boot, one that wraps, Unix time (see
//!   [`Clock`](crate::Clock#any-clock)). A [`Clock`] trait exists for
//!   convenience wrappers; the limiters never read a clock.
//! * **One state word per client.** [`Gcra`] keeps the theoretical arrival time
//!   (TAT) in one `u64` and changes it with a single compare-and-swap: no locks,
//!   no allocation, no panics, no division on the admit/deny path.
//! * **Exact by construction.** A request of `cost` cells is admitted at `now`
//!   iff `max(TAT, now) + cost·T − now ≤ τ + T`, where `T` is the emission
//!   interval and `τ = (burst − 1)·T` the tolerance. [`Quota`] represents `T`
//!   exactly for every rate whose ratio to the tick frequency keeps the
//!   documented longest gap between checks, and otherwise rounds toward
//!   admitting less and says so.
//!
//! ```
//! use cellrate::{Gcra, Quota, RateLimiter};
//!
//! // 100 requests per second, bursts of up to 20, on a 1 MHz tick.
//! static LIMITER: Gcra = Gcra::new(Quota::per_second(100).with_burst(20).at_hz(1_000_000));
//!
//! let now = 5_000_000; // ticks, from your clock
//! match LIMITER.check(now) {
//!     Ok(decision) => assert_eq!(decision.remaining(), 19),
//!     Err(denied) => panic!("denied: retry after {:?} ticks", denied.retry_after()),
//! }
//! ```
//!
//! ## Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `std` | [`StdClock`], a monotonic nanosecond clock; `wait`, blocking and async waits for budget; [`SlidingLog`] uses a sequence lock (denials only read) instead of a critical section; `keyed::Seed::random`; implies `alloc` |
//! | `alloc` | `keyed::KeyedBox`, a keyed table whose capacity is chosen at run time |
//! | `embedded-hal` | `hal`: rate-limited SPI/I2C devices and a blocking wait with a `DelayNs` |
//! | `embassy-time` | `embassy`: a clock over embassy's ticks and an async wait |
//! | `defmt` | `defmt::Format` for every public type |
//! | `serde` | `config`: quotas (structured or `"100/min, burst 20"`); serde for `LimiterConfig`, `AlgorithmKind` and `WhenFull`; implies `alloc` |
//! | `loom` | swaps the atomics for loom's in this crate's own unit tests (`cargo test --features loom`); never enable it in a dependent crate |
//!
//! No feature is on by default: the crate builds for bare metal as it is.
//!
//! ## Adapters
//!
//! Crates beside this one build on its public API: `cellrate-redis` (the
//! same algorithms on a shared Redis or Redis Cluster, with failure
//! policies and leases), `cellrate-tower` (an HTTP rate-limit layer for
//! tower and axum, its rules, live reloads and metrics), `cellrate-headers`
//! (the HTTP rate-limit fields, `no_std`, for any server) and
//! `cellrate-config` (files of named tiers and keyed tables).
//!
//! ## Firmware
//!
//! [`sync`] decides: targets with a 64-bit compare-and-swap use native
//! atomics, lock-free; the others (thumbv6m/7m/7em/8m, riscv32) update the
//! state word in a [`critical_section`], safe against interrupt handlers.
//! The [`firmware`] guide has the table per target, a `static` limiter
//! shared with an interrupt handler, and the measured footprint.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "alloc")]
extern crate alloc;

mod algorithm;
pub mod compose;
#[cfg(feature = "serde")]
pub mod config;
mod decision;
mod divisor;
#[cfg(feature = "embassy-time")]
pub mod embassy;
pub mod firmware;
mod gcra;
#[cfg(feature = "embedded-hal")]
pub mod hal;
pub mod keyed;
pub mod lease;
pub mod meter;
mod quota;
pub mod sync;
mod time;
#[cfg(feature = "std")]
pub mod wait;
pub mod window;

pub use algorithm::{Algorithm, Limiter};
pub use compose::{Adaptive, AnyLimiter, LimiterConfig, Metered, Revocable};
pub use decision::{Decision, Denied, Limited, Snapshot};
pub use gcra::{FixedGcra, Gcra, LeakyBucket, LocalGcra, Reservation, SetQuotaError, TokenBucket};
pub use quota::{Quota, QuotaBuilder, QuotaError, Rate, HORIZON_SECS, MAX_SPAN};
#[cfg(feature = "std")]
pub use time::StdClock;
pub use time::{duration_to_ticks, ticks_to_duration, Clock, ManualClock};
pub use window::{
    BucketedWindow, BucketedWindowQuota, FixedWindow, FixedWindowQuota, SlidingLog, SlidingWindow,
    SlidingWindowQuota,
};

/// The common face of every limiter in the crate.
///
/// `now` is a tick count of a monotonic clock whose frequency the limiter's
/// quota declares. `cost` is a number of cells (requests, bytes, airtime
/// ticks…). A cost of 0 never consumes anything and answers like
/// [`peek`](RateLimiter::peek).
///
/// ```
/// use cellrate::{Gcra, Quota, RateLimiter};
///
/// fn admit(limiter: &impl RateLimiter, now: u64) -> bool {
///     limiter.check(now).is_ok()
/// }
/// let gcra = Gcra::new(Quota::per_second(1).at_hz(1_000));
/// assert!(admit(&gcra, 0));
/// assert!(!admit(&gcra, 1));
/// assert!(admit(&gcra, 1_000));
/// ```
pub trait RateLimiter {
    /// Admits `cost` cells at `now` and consumes them, or denies and consumes
    /// nothing.
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied>;

    /// Admits one cell at `now`, or denies.
    #[inline]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        self.check_n(now, 1)
    }

    /// The state at `now`, without consuming anything.
    fn peek(&self, now: u64) -> Snapshot;
}

impl<L: RateLimiter + ?Sized> RateLimiter for &L {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        (**self).check_n(now, cost)
    }
    #[inline]
    fn check(&self, now: u64) -> Result<Decision, Denied> {
        (**self).check(now)
    }
    fn peek(&self, now: u64) -> Snapshot {
        (**self).peek(now)
    }
}

/// The README's examples, compiled and run as doc tests.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
