//! A LoRa-like transmitter held to a 1 % duty cycle.
//!
//! The regulatory rule (e.g. ETSI EN 300 220 sub-bands in Europe) is that a
//! device may be on the air at most 1 % of the time. With a millisecond tick
//! and **cost = airtime in ms**, that is a GCRA of one cell per 100 ticks:
//! after a frame of airtime `A`, the budget comes back after `99·A` of
//! silence; a burst allowance lets a few frames go back to back after a quiet
//! spell. The main loop sends telemetry every 30 s, which alone would be
//! 1.2 % of the time, while the SysTick handler (standing in for a sensor
//! interrupt) queues urgent alarms, which jump the queue. A telemetry reading
//! that could not go out before the next one fell due is replaced by it.
//! Every send, denial and wait is logged over semihosting.
//!
//! Time is virtual so the run is short: each SysTick adds `TICK_MS` to the
//! clock, and the main loop sleeps (`wfi`) until the clock reaches its next
//! deadline. At the end the firmware checks the log against the GCRA bound
//! `Σ airtime(i..=j) ≤ burst + (t_j − t_i)/100` for every pair of sends, that
//! every alarm went out, and that the limit was actually reached; it exits
//! non-zero otherwise.
#![no_std]
#![no_main]

#[path = "../common.rs"]
mod common;

use core::cell::RefCell;

use cellrate::hal::sleep_ticks;
use cellrate::{Clock, Denied, Gcra, ManualClock, Quota};
use cortex_m::interrupt::{self, Mutex};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::hprintln;
use embedded_hal::delay::DelayNs;

/// Milliseconds.
const HZ: u64 = 1_000;
/// Airtime allowed back to back after a quiet spell (ms).
const BURST_MS: u64 = 1_200;
/// 1 ms of airtime per 100 ms: 1 %.
static RADIO: Gcra = Gcra::new(Quota::per_ticks(1, 100).with_burst(BURST_MS).at_hz(HZ));
/// The clock the handler advances.
static CLOCK: ManualClock = ManualClock::new(0);

/// Virtual milliseconds per SysTick.
const TICK_MS: u64 = 50;
/// SysTick reload: how many core cycles one virtual tick takes.
const RELOAD: u32 = 1_000;
/// How long the run lasts (virtual).
const RUN_MS: u64 = 20 * 60 * 1_000;
/// Telemetry period and payload.
const TELEMETRY_EVERY_MS: u64 = 30_000;
const TELEMETRY_BYTES: u32 = 24;
/// Alarms: when the sensor interrupt raises them, and their payload.
const ALARMS_AT_MS: [u64; 9] = [
    45_000, 45_050, 45_100, 200_000, 333_300, 600_000, 600_050, 905_000, 1_100_000,
];
const ALARM_BYTES: u32 = 8;

/// Time on air of a LoRa frame in ms, rounded up (Semtech AN1200.13,
/// "LoRa Modem Designer's Guide"): 125 kHz, coding rate 4/5, explicit
/// header, CRC on, 8 preamble symbols, low-data-rate optimisation from SF11.
const fn airtime_ms(payload: u32, sf: u32) -> u64 {
    let de = if sf >= 11 { 1 } else { 0 };
    let bits = 8 * payload as i32 - 4 * sf as i32 + 28 + 16;
    let per_block = 4 * (sf as i32 - 2 * de);
    let blocks = if bits > 0 {
        (bits + per_block - 1) / per_block
    } else {
        0
    };
    let payload_symbols = 8 + blocks as u64 * 5;
    // Symbol time 2^sf / 125 kHz = 2^sf · 8 µs; preamble 12.25 symbols.
    let symbol_us = (1u64 << sf) * 8;
    let micros = (49 * symbol_us) / 4 + payload_symbols * symbol_us;
    micros.div_ceil(1_000)
}
const TELEMETRY_AIRTIME: u64 = airtime_ms(TELEMETRY_BYTES, 10);
const ALARM_AIRTIME: u64 = airtime_ms(ALARM_BYTES, 9);

/// Alarms raised by the handler and not yet sent (a small ring).
struct Alarms {
    raised_at: [u64; 8],
    head: usize,
    len: usize,
    dropped: u32,
}

impl Alarms {
    fn push(&mut self, at: u64) {
        if self.len == self.raised_at.len() {
            self.dropped += 1;
        } else {
            self.raised_at[(self.head + self.len) % self.raised_at.len()] = at;
            self.len += 1;
        }
    }
    fn front(&self) -> Option<u64> {
        (self.len > 0).then(|| self.raised_at[self.head])
    }
    fn pop(&mut self) {
        self.head = (self.head + 1) % self.raised_at.len();
        self.len -= 1;
    }
}

static ALARMS: Mutex<RefCell<Alarms>> = Mutex::new(RefCell::new(Alarms {
    raised_at: [0; 8],
    head: 0,
    len: 0,
    dropped: 0,
}));
static NEXT_ALARM: Mutex<RefCell<usize>> = Mutex::new(RefCell::new(0));

#[exception]
fn SysTick() {
    let now = CLOCK.advance(TICK_MS);
    interrupt::free(|cs| {
        let mut next = NEXT_ALARM.borrow(cs).borrow_mut();
        while *next < ALARMS_AT_MS.len() && ALARMS_AT_MS[*next] <= now {
            ALARMS.borrow(cs).borrow_mut().push(now);
            *next += 1;
        }
    });
}

/// Sleeps until the clock reaches `deadline`, or (if `alarm_wakes`) until an
/// alarm is waiting.
fn sleep_until(deadline: u64, alarm_wakes: bool) {
    while CLOCK.now() < deadline {
        if alarm_wakes && interrupt::free(|cs| ALARMS.borrow(cs).borrow().len) > 0 {
            return;
        }
        cortex_m::asm::wfi();
    }
}

/// A `DelayNs` on the virtual clock: sleeps (`wfi`) until it has advanced
/// by the requested time, rounded up to whole milliseconds.
struct VirtualDelay;

impl DelayNs for VirtualDelay {
    fn delay_ns(&mut self, ns: u32) {
        let until = CLOCK.now() + u64::from(ns).div_ceil(1_000_000);
        while CLOCK.now() < until {
            cortex_m::asm::wfi();
        }
    }
}

/// A send the log keeps for the final check.
#[derive(Clone, Copy)]
struct Sent {
    at: u64,
    airtime: u64,
}

#[entry]
fn main() -> ! {
    let Some(mut core) = cortex_m::Peripherals::take() else {
        common::fail()
    };
    hprintln!(
        "radio on {}: 1 % duty cycle, burst {} ms of airtime; telemetry {} B = {} ms every {} s, alarms {} B = {} ms",
        common::cpu_name(),
        BURST_MS,
        TELEMETRY_BYTES,
        TELEMETRY_AIRTIME,
        TELEMETRY_EVERY_MS / 1_000,
        ALARM_BYTES,
        ALARM_AIRTIME
    );
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(RELOAD);
    core.SYST.clear_current();
    core.SYST.enable_counter();
    core.SYST.enable_interrupt();

    let mut log = [Sent { at: 0, airtime: 0 }; 128];
    let mut sends = 0usize;
    let (mut denials, mut alarms_sent, mut worst_alarm_latency) = (0u32, 0u32, 0u64);
    let mut skipped = 0u32;
    let mut telemetry_due = 0u64;

    loop {
        let now = CLOCK.now();
        if now >= RUN_MS {
            break;
        }
        let alarm = interrupt::free(|cs| ALARMS.borrow(cs).borrow().front());
        let (what, airtime) = match alarm {
            Some(_) => ("alarm", ALARM_AIRTIME),
            None if now >= telemetry_due => ("telemetry", TELEMETRY_AIRTIME),
            None => {
                sleep_until(telemetry_due, true);
                continue;
            }
        };
        match RADIO.check_n(now, airtime) {
            Ok(decision) => {
                let waited = match alarm {
                    Some(raised) => now - raised,
                    None => now - telemetry_due,
                };
                hprintln!(
                    "{:>7} ms  SEND  {:<9} {:>3} ms on air (queued {} ms); budget left {} ms",
                    now,
                    what,
                    airtime,
                    waited,
                    decision.remaining()
                );
                if sends == log.len() {
                    hprintln!("FAIL: log full");
                    common::fail();
                }
                log[sends] = Sent { at: now, airtime };
                sends += 1;
                match alarm {
                    Some(raised) => {
                        interrupt::free(|cs| ALARMS.borrow(cs).borrow_mut().pop());
                        alarms_sent += 1;
                        worst_alarm_latency = worst_alarm_latency.max(now - raised);
                    }
                    None => {
                        // Telemetry is a reading, not a backlog: readings
                        // that fell due while the budget was spent are
                        // replaced by the next one.
                        telemetry_due += TELEMETRY_EVERY_MS;
                        while telemetry_due + TELEMETRY_EVERY_MS <= now {
                            telemetry_due += TELEMETRY_EVERY_MS;
                            skipped += 1;
                        }
                    }
                }
                // The radio is busy until the frame is out (a blocking
                // DelayNs wait, as with a HAL's timer).
                sleep_ticks(&mut VirtualDelay, airtime, HZ);
            }
            Err(Denied::Limited(limited)) => {
                denials += 1;
                let retry_at = now + limited.retry_after();
                hprintln!(
                    "{:>7} ms  DENY  {:<9} {:>3} ms on air: duty cycle spent, WAIT {} ms",
                    now,
                    what,
                    airtime,
                    limited.retry_after()
                );
                // Telemetry gives way to an alarm raised meanwhile (it may
                // fit sooner); an alarm waits its turn.
                sleep_until(retry_at, alarm.is_none());
            }
            Err(denied @ Denied::CostTooLarge { .. }) => {
                hprintln!("FAIL: {} can never be sent: {}", what, denied);
                common::fail();
            }
        }
    }
    core.SYST.disable_interrupt();

    // The GCRA bound, checked on the log with nothing but sums:
    // 100 · Σ airtime(i..=j) ≤ 100 · burst + (t_j − t_i).
    let log = &log[..sends];
    for i in 0..log.len() {
        let mut airtime = 0;
        for j in i..log.len() {
            airtime += log[j].airtime;
            if 100 * airtime > 100 * BURST_MS + (log[j].at - log[i].at) {
                hprintln!(
                    "FAIL: {} ms on air between {} ms and {} ms exceeds 1 % plus the burst",
                    airtime,
                    log[i].at,
                    log[j].at
                );
                common::fail();
            }
        }
    }
    let on_air: u64 = log.iter().map(|s| s.airtime).sum();
    let dropped = interrupt::free(|cs| ALARMS.borrow(cs).borrow().dropped);
    let pending = interrupt::free(|cs| ALARMS.borrow(cs).borrow().len);
    hprintln!(
        "radio: {} sends, {} denials, {} stale readings skipped, {} ms on air in {} s ({}.{:02} % beyond the {} ms burst), {} of {} alarms sent, worst alarm latency {} ms",
        sends,
        denials,
        skipped,
        on_air,
        RUN_MS / 1_000,
        on_air.saturating_sub(BURST_MS) * 100 / RUN_MS,
        on_air.saturating_sub(BURST_MS) * 10_000 / RUN_MS % 100,
        BURST_MS,
        alarms_sent,
        ALARMS_AT_MS.len(),
        worst_alarm_latency
    );
    if alarms_sent as usize != ALARMS_AT_MS.len() || dropped != 0 || pending != 0 {
        hprintln!(
            "FAIL: alarms lost ({} dropped, {} pending)",
            dropped,
            pending
        );
        common::fail();
    }
    if denials == 0 {
        hprintln!("FAIL: the duty-cycle limit was never reached");
        common::fail();
    }
    hprintln!("radio ok: every window within 1 % plus the burst");
    common::pass()
}
