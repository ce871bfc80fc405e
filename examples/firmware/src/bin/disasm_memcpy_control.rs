//! A negative control for the disassembly check: a critical section that
//! copies a 128-byte table with `memcpy`, which `scripts/firmware-disasm.py`
//! must flag (only the update may run with interrupts masked).
#![no_std]
#![no_main]

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

#[cfg(target_arch = "arm")]
use cortex_m as _;
use critical_section::Mutex;
#[cfg(target_arch = "riscv32")]
use riscv as _;

static TABLE: Mutex<RefCell<[u32; 32]>> = Mutex::new(RefCell::new([7; 32]));
static SUM: AtomicU32 = AtomicU32::new(0);

/// Copies the shared table out while interrupts are masked.
#[no_mangle]
#[inline(never)]
pub fn cellrate_copy_in_section(out: &mut [u32; 32]) {
    critical_section::with(|cs| *out = *TABLE.borrow_ref(cs));
}

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    let mut copy = [0; 32];
    loop {
        cellrate_copy_in_section(core::hint::black_box(&mut copy));
        SUM.store(copy.iter().sum(), Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
