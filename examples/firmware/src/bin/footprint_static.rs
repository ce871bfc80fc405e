//! The usual firmware shape: a `static Gcra` with a constant quota, checked
//! in a loop at a tick read from memory. Against `footprint_base` it gives
//! the flash a limiter costs when the compiler sees its quota (it folds the
//! quota's constants into the code), and the limiter's RAM is the size of
//! the `CELLRATE_LIMITER` symbol. `cellrate_check_static` is disassembled
//! like `footprint_gcra`'s path.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use cellrate::{Gcra, Quota};
#[cfg(target_arch = "arm")]
use cortex_m as _;
#[cfg(target_arch = "riscv32")]
use riscv as _;

/// The limiter, in RAM under a name the stage script can find.
#[no_mangle]
static CELLRATE_LIMITER: Gcra = Gcra::new(Quota::per_second(100).with_burst(20).at_hz(32_768));

static TICKS: AtomicU32 = AtomicU32::new(0);
static ADMITTED: AtomicBool = AtomicBool::new(false);

/// The admit/deny path on the `static`, its whole result kept.
#[no_mangle]
#[inline(never)]
pub fn cellrate_check_static(now: u64, cost: u64) -> bool {
    core::hint::black_box(CELLRATE_LIMITER.check_n(now, cost)).is_ok()
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    loop {
        let now = u64::from(TICKS.load(Relaxed));
        ADMITTED.store(cellrate_check_static(now, 1), Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
