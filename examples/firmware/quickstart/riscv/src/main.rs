//! cellrate on a single-hart RISC-V (riscv32imc, ESP32-C3 class): one
//! `static` limiter shared by thread mode and the machine timer interrupt.
#![no_std]
#![no_main]

use cellrate::{Clock, Gcra, ManualClock, Quota};
use panic_halt as _;
use riscv::interrupt::Interrupt;
// Links the critical-section implementation (`critical-section-single-hart`)
// that cellrate's limiters use on targets without 64-bit atomics. riscv-rt
// links `riscv` too; this line keeps it linked under any runtime, where a
// missing implementation fails the link with `undefined symbol:
// _critical_section_1_0_acquire`.
use riscv as _;
use riscv_rt::{core_interrupt, entry};

/// 10 frames per second, bursts of 3, on a millisecond clock.
static TX_BUDGET: Gcra = Gcra::new(Quota::per_second(10).with_burst(3).at_hz(1_000));
/// Milliseconds, advanced by the timer interrupt.
static MILLIS: ManualClock = ManualClock::new(0);

/// QEMU `virt` / SiFive CLINT: the machine timer and its compare register.
const MTIME: *const u32 = 0x0200_BFF8 as *const u32;
const MTIMECMP: *mut u32 = 0x0200_4000 as *mut u32;
/// mtime ticks per millisecond (10 MHz on `virt`).
const TICKS_PER_MS: u32 = 10_000;

/// Sets the next timer interrupt one millisecond from now.
fn arm_timer() {
    // SAFETY: MTIME and MTIMECMP are the CLINT's registers on this board;
    // only this function writes MTIMECMP. Writing the high word first (to
    // its maximum) keeps the compare from firing on a half-written value.
    unsafe {
        let next = MTIME.read_volatile().wrapping_add(TICKS_PER_MS);
        MTIMECMP.add(1).write_volatile(u32::MAX);
        MTIMECMP.write_volatile(next);
        MTIMECMP.add(1).write_volatile(0);
    }
}

#[core_interrupt(Interrupt::MachineTimer)]
fn machine_timer() {
    arm_timer();
    let now = MILLIS.advance(1);
    // An urgent frame, sent from the interrupt handler when the budget allows.
    if TX_BUDGET.check(now).is_ok() {
        // radio.transmit(&ALARM_FRAME);
    }
}

#[entry]
fn main() -> ! {
    arm_timer();
    // SAFETY: the handler above is ready and shares state only through
    // `static`s that are safe to use from both contexts.
    unsafe {
        riscv::interrupt::enable_interrupt(Interrupt::MachineTimer);
        riscv::interrupt::enable();
    }
    loop {
        let now = MILLIS.now();
        match TX_BUDGET.check(now) {
            Ok(_) => { /* radio.transmit(&telemetry) */ }
            // Sleep until the budget allows the next frame (a cost of one
            // always fits a burst of 3, so a denial always has a retry time).
            Err(denied) => {
                let wake = now + denied.retry_after().unwrap_or(1);
                while MILLIS.now() < wake {
                    riscv::asm::wfi();
                }
            }
        }
    }
}
