//! What every test firmware shares: a panic handler and a HardFault handler
//! that exit qemu with a non-zero code, exit helpers, and a tiny
//! deterministic random sequence.

use core::panic::PanicInfo;

use cortex_m_rt::{exception, ExceptionFrame};
use cortex_m_semihosting::{debug, hprintln};

/// Ends the emulation with exit code 0.
pub fn pass() -> ! {
    debug::exit(debug::EXIT_SUCCESS);
    // Only reached without a debugger attached.
    loop {
        cortex_m::asm::bkpt();
    }
}

/// Ends the emulation with a non-zero exit code.
pub fn fail() -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::bkpt();
    }
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    cortex_m::interrupt::disable();
    hprintln!("PANIC: {}", info);
    fail()
}

#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    hprintln!("HARD FAULT at pc={:#010x}", frame.pc());
    fail()
}

#[allow(dead_code)] // not every binary draws random numbers
/// xorshift32 (Marsaglia, "Xorshift RNGs", J. Stat. Softw. 8(14), 2003):
/// a repeatable sequence, so every run drives the same ticks.
pub struct XorShift32(u32);

#[allow(dead_code)]
impl XorShift32 {
    /// A sequence from a non-zero seed.
    pub const fn new(seed: u32) -> Self {
        XorShift32(if seed == 0 { 0x9E37_79B9 } else { seed })
    }

    /// The next value.
    pub fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// The next value in `0..n` (`n > 0`; a slight bias is harmless here).
    pub fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

/// The core the firmware runs on, from the CPUID register's part number.
pub fn cpu_name() -> &'static str {
    let cpuid = cortex_m::peripheral::CPUID::PTR;
    // SAFETY: CPUID points at the System Control Block's CPUID register,
    // present and read-only on every Cortex-M; reading it has no effect.
    let base = unsafe { (*cpuid).base.read() };
    match (base >> 4) & 0xFFF {
        0xC20 => "Cortex-M0",
        0xC60 => "Cortex-M0+",
        0xC23 => "Cortex-M3",
        0xC24 => "Cortex-M4",
        0xC27 => "Cortex-M7",
        _ => "an unknown core",
    }
}
