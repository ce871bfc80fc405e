//! cellrate on a single-core Cortex-M (M0 to M7): one `static` limiter
//! shared by thread mode and the SysTick interrupt.
#![no_std]
#![no_main]

use cellrate::{Clock, Gcra, ManualClock, Quota};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use panic_halt as _;
// Links the critical-section implementation (`critical-section-single-core`)
// that cellrate's limiters use on targets without 64-bit atomics. A binary
// that names nothing else from `cortex_m` needs this line, or the link fails
// with `undefined symbol: _critical_section_1_0_acquire`.
use cortex_m as _;

/// 10 frames per second, bursts of 3, on a millisecond clock.
static TX_BUDGET: Gcra = Gcra::new(Quota::per_second(10).with_burst(3).at_hz(1_000));
/// Milliseconds, advanced by the SysTick interrupt.
static MILLIS: ManualClock = ManualClock::new(0);

/// Core clock cycles per millisecond (here a 16 MHz core).
const CYCLES_PER_MS: u32 = 16_000;

#[exception]
fn SysTick() {
    let now = MILLIS.advance(1);
    // An urgent frame, sent from the interrupt handler when the budget allows.
    if TX_BUDGET.check(now).is_ok() {
        // radio.transmit(&ALARM_FRAME);
    }
}

#[entry]
fn main() -> ! {
    let mut core = cortex_m::Peripherals::take().unwrap();
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(CYCLES_PER_MS - 1);
    core.SYST.clear_current();
    core.SYST.enable_counter();
    core.SYST.enable_interrupt();
    loop {
        let now = MILLIS.now();
        match TX_BUDGET.check(now) {
            Ok(_) => { /* radio.transmit(&telemetry) */ }
            // Sleep until the budget allows the next frame (a cost of one
            // always fits a burst of 3, so a denial always has a retry time).
            Err(denied) => {
                let wake = now + denied.retry_after().unwrap_or(1);
                while MILLIS.now() < wake {
                    cortex_m::asm::wfi();
                }
            }
        }
    }
}
