//! `footprint_gcra` without the limiter: the same loop, storing a constant.
//! The flash difference between the two is what a `Gcra` check costs.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

static TICKS: AtomicU32 = AtomicU32::new(0);
static ADMITTED: AtomicBool = AtomicBool::new(false);

#[no_mangle]
#[inline(never)]
pub fn cellrate_check_n(now: u64, cost: u64) -> bool {
    core::hint::black_box(now) >= core::hint::black_box(cost)
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    loop {
        let now = u64::from(TICKS.load(Relaxed));
        ADMITTED.store(cellrate_check_n(now, 1), Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
