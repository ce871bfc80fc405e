//! A negative control for the disassembly check: `Decision::remaining()`
//! converts sub-ticks to cells with a division, so the path from
//! `cellrate_check_remaining` must be flagged by `scripts/firmware-disasm.py`.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use cellrate::{Gcra, Quota};
#[cfg(target_arch = "arm")]
use cortex_m as _;
#[cfg(target_arch = "riscv32")]
use riscv as _;

const QUOTA: Quota = Quota::per_second(100).with_burst(20).at_hz(32_768);
static TICKS: AtomicU32 = AtomicU32::new(0);
static REMAINING: AtomicU32 = AtomicU32::new(0);

/// A check followed by the lazy (dividing) conversion of its result.
#[no_mangle]
#[inline(never)]
pub fn cellrate_check_remaining(limiter: &Gcra, now: u64) -> u64 {
    match limiter.check(now) {
        Ok(decision) => decision.remaining(),
        Err(_) => 0,
    }
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    // A quota the compiler cannot see through (as if read from
    // configuration), so that nothing of the path is constant-folded away.
    let limiter = Gcra::new(core::hint::black_box(QUOTA));
    loop {
        let now = u64::from(TICKS.load(Relaxed));
        REMAINING.store(cellrate_check_remaining(&limiter, now) as u32, Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
