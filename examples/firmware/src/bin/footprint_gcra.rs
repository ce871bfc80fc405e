//! The smallest firmware that uses a shared limiter: a loop checking a
//! `static Gcra` at a tick read from memory. Built (never run) to measure
//! flash size against `footprint_base` and to disassemble the admit/deny
//! path `cellrate_check_n` (see `scripts/firmware-disasm.py`).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use cellrate::{Gcra, Quota};
use cortex_m_rt::entry;

/// 100 per second with bursts of 20 on a 32 768 Hz RTC: T = 8 192/25 ticks,
/// so the path includes the sub-tick multiply.
const QUOTA: Quota = Quota::per_second(100).with_burst(20).at_hz(32_768);

// The RAM a limiter takes on these targets (see cellrate's firmware guide).
const _: () = assert!(core::mem::size_of::<Gcra>() == 120);

static TICKS: AtomicU32 = AtomicU32::new(0);
static ADMITTED: AtomicBool = AtomicBool::new(false);

/// The admit/deny path, kept whole: `black_box` makes the compiler build
/// the full `Result<Decision, Denied>`, not just the bit `is_ok` needs.
#[no_mangle]
#[inline(never)]
pub fn cellrate_check_n(limiter: &Gcra, now: u64, cost: u64) -> bool {
    core::hint::black_box(limiter.check_n(now, cost)).is_ok()
}

#[entry]
fn main() -> ! {
    // A quota the compiler cannot see through (as if read from
    // configuration), so that nothing of the path is constant-folded away.
    let limiter = Gcra::new(core::hint::black_box(QUOTA));
    loop {
        let now = u64::from(TICKS.load(Relaxed));
        ADMITTED.store(cellrate_check_n(&limiter, now, 1), Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        cortex_m::asm::bkpt();
    }
}
