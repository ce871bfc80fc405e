//! tokio's clock as a [`Clock`](cellrate::Clock).

use cellrate::Clock;

/// tokio's clock as a [`Clock`]: nanoseconds since the clock was made, on
/// `tokio::time::Instant`, so a test's paused, auto-advancing time moves
/// it (a layer built over it can be tested without waiting).
///
/// ```
/// use cellrate::Clock;
/// use cellrate_tower::TokioClock;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock::new();
/// tokio::time::sleep(std::time::Duration::from_millis(5)).await;
/// assert_eq!(clock.now(), 5_000_000);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// Ticks per second: nanoseconds.
    pub const HZ: u64 = 1_000_000_000;
    /// Starts at 0 now. Call inside a tokio runtime when its time is paused.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> u64 {
        // Nanoseconds modulo 2⁶⁴: a wrapping counter, read by differences.
        self.origin.elapsed().as_nanos() as u64
    }
}
