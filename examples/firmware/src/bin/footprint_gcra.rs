//! The smallest firmware that uses a limiter whose quota is only known at
//! run time: a loop checking a `Gcra` built from a quota the compiler cannot
//! see through (as if read from configuration), at a tick read from memory.
//! Built (never run) to measure flash against `footprint_base` and to
//! disassemble the admit/deny path `cellrate_check_n` (see
//! `scripts/firmware-disasm.py`).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use cellrate::{Gcra, Quota};
// The line that links the critical-section implementation: nothing else in
// this program names the runtime's crate. Feature `unlinked-control` drops
// it, and on Cortex-M the link must then fail (riscv-rt links `riscv` itself).
#[cfg(all(target_arch = "arm", not(feature = "unlinked-control")))]
use cortex_m as _;
#[cfg(all(target_arch = "riscv32", not(feature = "unlinked-control")))]
use riscv as _;

/// 100 per second with bursts of 20 on a 32 768 Hz RTC: T = 8 192/25 ticks,
/// so the path includes the sub-tick multiply.
const QUOTA: Quota = Quota::per_second(100).with_burst(20).at_hz(32_768);

static TICKS: AtomicU32 = AtomicU32::new(0);
static ADMITTED: AtomicBool = AtomicBool::new(false);

/// The admit/deny path, kept whole: `black_box` makes the compiler build
/// the full `Result<Decision, Denied>`, not just the bit `is_ok` needs.
#[no_mangle]
#[inline(never)]
pub fn cellrate_check_n(limiter: &Gcra, now: u64, cost: u64) -> bool {
    core::hint::black_box(limiter.check_n(now, cost)).is_ok()
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    let limiter = Gcra::new(core::hint::black_box(QUOTA));
    loop {
        let now = u64::from(TICKS.load(Relaxed));
        ADMITTED.store(cellrate_check_n(&limiter, now, 1), Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
