//! A bare-metal binary that uses one kind of cellrate state (chosen by a
//! feature) from an entry point the linker keeps, so that what the final
//! binary must provide shows at link time. See `Cargo.toml`.
#![no_std]
#![no_main]

// Link the critical-section implementation (nothing else names the crate).
#[cfg(feature = "cortex-m-cs")]
use cortex_m as _;
#[cfg(feature = "riscv-cs")]
use riscv as _;

#[allow(unused_imports)]
use cellrate::{Quota, RateLimiter};

/// 10 per second, bursts of 3, on a 1 kHz tick.
#[allow(dead_code)]
const QUOTA: Quota = Quota::per_second(10).with_burst(3).at_hz(1_000);

#[cfg(feature = "state-word")]
static LIMITER: cellrate::Gcra = cellrate::Gcra::new(QUOTA);

#[cfg(feature = "keyed")]
static TABLE: cellrate::keyed::Keyed<Quota, 64> = cellrate::keyed::Keyed::new(
    QUOTA,
    cellrate::keyed::WhenFull::Deny,
    cellrate::keyed::Seed::new(1, 2),
);

#[cfg(feature = "sliding-log")]
static LOG: cellrate::SlidingLog<4> = cellrate::SlidingLog::new(4, 1_000);

#[cfg(feature = "wide-bucketed")]
static WIDE: cellrate::window::WideBucketedWindow<4> =
    cellrate::window::WideBucketedWindow::new(4, 1_000);

/// One check of the chosen state at `now` (for key `key` in the table).
#[no_mangle]
pub extern "C" fn cellrate_link_check(key: u32, now: u64) -> bool {
    let _ = (key, now);
    #[cfg(feature = "state-word")]
    let admitted = LIMITER.check(now).is_ok();
    #[cfg(feature = "keyed")]
    let admitted = TABLE.check(&key, now).is_ok();
    #[cfg(feature = "sliding-log")]
    let admitted = LOG.check(now).is_ok();
    #[cfg(feature = "wide-bucketed")]
    let admitted = WIDE.check(now).is_ok();
    #[cfg(not(any(
        feature = "state-word",
        feature = "keyed",
        feature = "sliding-log",
        feature = "wide-bucketed"
    )))]
    let admitted = false;
    admitted
}

/// The entry point (the default entry symbol of these targets' linkers).
#[no_mangle]
pub extern "C" fn _start() -> ! {
    let mut now = 0;
    loop {
        let _ = cellrate_link_check(now as u32 % 8, now);
        now += 1;
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
