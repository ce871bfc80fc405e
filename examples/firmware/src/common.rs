//! What every test firmware shares, on either architecture: output
//! (`say!`), exit codes for the emulator (`pass`, `fail`), a panic handler
//! that fails the run, a periodic timer interrupt, and a tiny deterministic
//! random sequence.
//!
//! * Cortex-M (`qemu-system-arm`): output and exit code through semihosting;
//!   the timer is SysTick; a HardFault fails the run.
//! * RISC-V (`qemu-system-riscv32 -machine virt`): output on the board's
//!   16550 UART, exit code through its test device (`sifive_test`); the
//!   timer is the CLINT's machine timer.
#![allow(dead_code)] // not every binary uses every helper

use core::panic::PanicInfo;

/// `println!` for the firmware.
#[cfg(target_arch = "arm")]
macro_rules! say {
    ($($arg:tt)*) => { cortex_m_semihosting::hprintln!($($arg)*) };
}

/// `println!` for the firmware.
#[cfg(target_arch = "riscv32")]
macro_rules! say {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::common::Uart, $($arg)*);
    }};
}

/// Ends the emulation with exit code 0.
pub fn pass() -> ! {
    exit(true)
}

/// Ends the emulation with a non-zero exit code.
pub fn fail() -> ! {
    exit(false)
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    disable_interrupts();
    say!("PANIC: {}", info);
    fail()
}

#[cfg(target_arch = "arm")]
mod arch {
    use cortex_m::peripheral::syst::SystClkSource;
    use cortex_m_rt::{exception, ExceptionFrame};
    use cortex_m_semihosting::debug;

    pub fn exit(ok: bool) -> ! {
        debug::exit(if ok {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
        // Only reached without a debugger attached.
        loop {
            cortex_m::asm::bkpt();
        }
    }

    pub fn disable_interrupts() {
        cortex_m::interrupt::disable();
    }

    #[exception]
    unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
        say!("HARD FAULT at pc={:#010x}", frame.pc());
        exit(false)
    }

    /// Starts SysTick: an interrupt every `cycles` core clock cycles. The
    /// binary's `SysTick` handler runs then.
    pub fn start_timer(cycles: u32) {
        // SAFETY: called once, before any other use of SYST; nothing else
        // in these binaries touches the core peripherals.
        let mut core = unsafe { cortex_m::Peripherals::steal() };
        core.SYST.set_clock_source(SystClkSource::Core);
        core.SYST.set_reload(cycles);
        core.SYST.clear_current();
        core.SYST.enable_counter();
        core.SYST.enable_interrupt();
    }

    /// Stops the timer interrupt.
    pub fn stop_timer() {
        // SAFETY: only the SysTick interrupt enable bit is cleared.
        let mut core = unsafe { cortex_m::Peripherals::steal() };
        core.SYST.disable_interrupt();
    }

    /// Sleeps until an interrupt.
    pub fn wait_for_interrupt() {
        cortex_m::asm::wfi();
    }

    /// A few instructions that do nothing.
    pub fn nop() {
        cortex_m::asm::nop();
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
}

#[cfg(target_arch = "riscv32")]
mod arch {
    use riscv::interrupt::Interrupt;

    /// The `virt` board's test device: writing 0x5555 ends the emulation
    /// with exit code 0, `(code << 16) | 0x3333` with `code`.
    const SIFIVE_TEST: *mut u32 = 0x0010_0000 as *mut u32;
    /// The CLINT's machine timer (10 MHz on `virt`) and hart 0's compare.
    const MTIME: *const u32 = 0x0200_BFF8 as *const u32;
    const MTIMECMP: *mut u32 = 0x0200_4000 as *mut u32;
    /// The 16550 UART's transmit register.
    const UART_THR: *mut u8 = 0x1000_0000 as *mut u8;

    static PERIOD: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

    pub fn exit(ok: bool) -> ! {
        // SAFETY: SIFIVE_TEST is the test device's register on `virt`.
        unsafe { SIFIVE_TEST.write_volatile(if ok { 0x5555 } else { (1 << 16) | 0x3333 }) };
        loop {
            riscv::asm::wfi();
        }
    }

    pub fn disable_interrupts() {
        riscv::interrupt::disable();
    }

    /// Writes to the UART (QEMU's 16550 needs no set-up and never fills).
    pub struct Uart;

    impl core::fmt::Write for Uart {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            for b in s.bytes() {
                // SAFETY: UART_THR is the UART's transmit register on `virt`.
                unsafe { UART_THR.write_volatile(b) };
            }
            Ok(())
        }
    }

    /// Sets the compare register `period` timer ticks from now.
    pub fn rearm_timer() {
        let period = PERIOD.load(core::sync::atomic::Ordering::Relaxed);
        // SAFETY: MTIME and MTIMECMP are the CLINT's registers on `virt`;
        // only this function writes MTIMECMP. The high word goes to its
        // maximum first so that a half-written compare never fires.
        unsafe {
            let next = MTIME.read_volatile().wrapping_add(period);
            MTIMECMP.add(1).write_volatile(u32::MAX);
            MTIMECMP.write_volatile(next);
            MTIMECMP.add(1).write_volatile(0);
        }
    }

    /// Starts the machine timer: an interrupt every `ticks` of the 10 MHz
    /// timer. The binary's machine-timer handler runs then and must call
    /// `rearm_timer`.
    pub fn start_timer(ticks: u32) {
        PERIOD.store(ticks, core::sync::atomic::Ordering::Relaxed);
        rearm_timer();
        // SAFETY: the binary defines the handler before it starts the timer;
        // handler and thread mode share state only through atomics and
        // critical sections.
        unsafe {
            riscv::interrupt::enable_interrupt(Interrupt::MachineTimer);
            riscv::interrupt::enable();
        }
    }

    /// Stops the timer interrupt.
    pub fn stop_timer() {
        riscv::interrupt::disable_interrupt(Interrupt::MachineTimer);
    }

    /// Sleeps until an interrupt.
    pub fn wait_for_interrupt() {
        riscv::asm::wfi();
    }

    /// A few instructions that do nothing.
    pub fn nop() {
        riscv::asm::nop();
    }

    pub fn cpu_name() -> &'static str {
        "RISC-V rv32imc (virt)"
    }
}

pub use arch::*;

/// xorshift32 (Marsaglia, "Xorshift RNGs", J. Stat. Softw. 8(14), 2003):
/// a repeatable sequence, so every run drives the same ticks.
pub struct XorShift32(u32);

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
