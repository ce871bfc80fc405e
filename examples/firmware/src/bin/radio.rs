//! A LoRa-like transmitter held to a 1 % duty cycle.
//!
//! The regulatory rule (e.g. ETSI EN 300 220 sub-bands in Europe) is that a
//! device may be on the air at most 1 % of the time. With a millisecond tick
//! and **cost = airtime in ms**, that is a GCRA of one cell per 100 ticks:
//! after a frame of airtime `A`, the budget comes back after `99·A` of
//! silence; a burst allowance lets a few frames go back to back after a quiet
//! spell. The main loop sends telemetry every 30 s, which alone would be
//! 1.2 % of the time, while the SysTick handler (standing in for a sensor
//! interrupt) queues urgent alarm frames in a `heapless::spsc` queue: the
//! handler is its only producer, the main loop its only consumer, and
//! neither ever masks interrupts for it. Alarms jump ahead of telemetry and
//! are *shaped*, not refused: `Gcra::reserve_n` books each one the earliest
//! slot the duty cycle allows and the main loop sends it then. A telemetry
//! reading that could not go out before the next one fell due is replaced
//! by it. Every send, denial and wait is logged over semihosting.
//!
//! Time is virtual so the run is short: each SysTick adds `TICK_MS` to the
//! clock, and the main loop sleeps (`wfi`) until the clock reaches its next
//! deadline. At the end the firmware checks the log against the GCRA bound
//! `Σ airtime(i..=j) ≤ burst + (t_j − t_i)/100` for every pair of sends
//! (`t`: the slot the limiter granted; an alarm goes on the air at the first
//! clock tick at or after its slot, never before), that every alarm went
//! out, that some had to wait for their slot, and that the limit was
//! actually reached; it exits non-zero otherwise.
#![no_std]
#![no_main]

#[macro_use]
#[path = "../common.rs"]
mod common;

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use cellrate::hal::sleep_ticks;
use cellrate::{Clock, Denied, Gcra, ManualClock, Quota};
use cortex_m_rt::{entry, exception};
use critical_section::Mutex;
use embedded_hal::delay::DelayNs;
use heapless::spsc::{Consumer, Producer, Queue};

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

/// An outbound alarm frame, as the sensor interrupt queues it.
#[derive(Clone, Copy)]
struct Frame {
    raised_at: u64,
    bytes: u32,
}

/// Frames the handler raised and the main loop has not taken yet.
const QUEUE: usize = 8;
/// The queue's two ends, each handed once to its one user: the producer to
/// the SysTick handler, the consumer to the main loop. (Taking an end is the
/// only time either touches a critical section for the queue.)
type Ends = (
    Mutex<RefCell<Option<Producer<'static, Frame>>>>,
    Mutex<RefCell<Option<Consumer<'static, Frame>>>>,
);
static ENDS: Ends = {
    static mut FRAMES: Queue<Frame, QUEUE> = Queue::new();
    // SAFETY: `FRAMES` is visible in this block only and split once, here;
    // from then on it is reached only through its two ends.
    #[allow(static_mut_refs)]
    let (producer, consumer) = unsafe { FRAMES.split_const() };
    (
        Mutex::new(RefCell::new(Some(producer))),
        Mutex::new(RefCell::new(Some(consumer))),
    )
};
/// Alarms the handler could not queue (the queue was full).
static DROPPED: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // cortex-m-rt turns a handler's `static mut` into a `&'static mut` that
    // only this handler sees.
    static mut PRODUCER: Option<Producer<'static, Frame>> = None;
    static mut NEXT_ALARM: usize = 0;
    let now = CLOCK.advance(TICK_MS);
    if PRODUCER.is_none() {
        *PRODUCER = critical_section::with(|cs| ENDS.0.borrow_ref_mut(cs).take());
    }
    let Some(producer) = PRODUCER.as_mut() else {
        return;
    };
    while *NEXT_ALARM < ALARMS_AT_MS.len() && ALARMS_AT_MS[*NEXT_ALARM] <= now {
        let frame = Frame {
            raised_at: now,
            bytes: ALARM_BYTES,
        };
        if producer.enqueue(frame).is_err() {
            DROPPED.store(DROPPED.load(Relaxed) + 1, Relaxed);
        }
        *NEXT_ALARM += 1;
    }
}

/// Sleeps until the clock reaches `deadline`, or (if `alarms` is given)
/// until an alarm is waiting in it.
fn sleep_until(deadline: u64, alarms: Option<&Consumer<'static, Frame>>) {
    while CLOCK.now() < deadline {
        if alarms.is_some_and(|queue| queue.ready()) {
            return;
        }
        common::wait_for_interrupt();
    }
}

/// A `DelayNs` on the virtual clock: sleeps (`wfi`) until it has advanced
/// by the requested time, rounded up to whole milliseconds.
struct VirtualDelay;

impl DelayNs for VirtualDelay {
    fn delay_ns(&mut self, ns: u32) {
        let until = CLOCK.now() + u64::from(ns).div_ceil(1_000_000);
        while CLOCK.now() < until {
            common::wait_for_interrupt();
        }
    }
}

/// A send the log keeps for the final check: the slot the limiter granted.
#[derive(Clone, Copy)]
struct Sent {
    at: u64,
    airtime: u64,
}

/// The longest an alarm may be booked ahead; none comes near it here.
const MAX_ALARM_WAIT_MS: u64 = 60_000;

#[entry]
fn main() -> ! {
    let Some(mut alarms) = critical_section::with(|cs| ENDS.1.borrow_ref_mut(cs).take()) else {
        common::fail()
    };
    say!(
        "radio on {}: 1 % duty cycle, burst {} ms of airtime; telemetry {} B = {} ms every {} s, alarms {} B = {} ms",
        common::cpu_name(),
        BURST_MS,
        TELEMETRY_BYTES,
        TELEMETRY_AIRTIME,
        TELEMETRY_EVERY_MS / 1_000,
        ALARM_BYTES,
        ALARM_AIRTIME
    );
    common::start_timer(RELOAD);

    // Every send of the run, for the final check (fixed capacity, no heap).
    let mut log: heapless::Vec<Sent, 128> = heapless::Vec::new();
    let (mut denials, mut alarms_sent, mut worst_alarm_latency) = (0u32, 0u32, 0u64);
    let (mut skipped, mut shaped) = (0u32, 0u32);
    let mut telemetry_due = 0u64;
    let mut record = |at: u64, airtime: u64| {
        if log.push(Sent { at, airtime }).is_err() {
            say!("FAIL: log full");
            common::fail();
        }
    };

    loop {
        let now = CLOCK.now();
        if now >= RUN_MS {
            break;
        }
        // Alarms first, each at the earliest slot the duty cycle allows.
        if let Some(frame) = alarms.dequeue() {
            let airtime = airtime_ms(frame.bytes, 9);
            match RADIO.reserve_n(now, airtime, MAX_ALARM_WAIT_MS) {
                Ok(reservation) => {
                    let slot = now + reservation.send_after();
                    if reservation.send_after() > 0 {
                        shaped += 1;
                        say!(
                            "{:>7} ms  BOOK  alarm     {:>3} ms on air: duty cycle spent, slot at {} ms",
                            now,
                            airtime,
                            slot
                        );
                        sleep_until(slot, None);
                    }
                    let sent = CLOCK.now();
                    say!(
                        "{:>7} ms  SEND  alarm     {:>3} ms on air (raised {} ms ago, slot {} ms)",
                        sent,
                        airtime,
                        sent - frame.raised_at,
                        slot
                    );
                    record(slot, airtime);
                    alarms_sent += 1;
                    worst_alarm_latency = worst_alarm_latency.max(sent - frame.raised_at);
                    sleep_ticks(&mut VirtualDelay, airtime, HZ);
                }
                Err(denied) => {
                    say!("FAIL: an alarm could not be booked: {}", denied);
                    common::fail();
                }
            }
            continue;
        }
        if now < telemetry_due {
            sleep_until(telemetry_due, Some(&alarms));
            continue;
        }
        let (what, airtime) = ("telemetry", TELEMETRY_AIRTIME);
        match RADIO.check_n(now, airtime) {
            Ok(decision) => {
                say!(
                    "{:>7} ms  SEND  {:<9} {:>3} ms on air (queued {} ms); budget left {} ms",
                    now,
                    what,
                    airtime,
                    now - telemetry_due,
                    decision.remaining()
                );
                record(now, airtime);
                // Telemetry is a reading, not a backlog: readings that fell
                // due while the budget was spent are replaced by the next one.
                telemetry_due += TELEMETRY_EVERY_MS;
                while telemetry_due + TELEMETRY_EVERY_MS <= now {
                    telemetry_due += TELEMETRY_EVERY_MS;
                    skipped += 1;
                }
                // The radio is busy until the frame is out (a blocking
                // DelayNs wait, as with a HAL's timer).
                sleep_ticks(&mut VirtualDelay, airtime, HZ);
            }
            Err(Denied::Limited(limited)) => {
                denials += 1;
                let retry_at = now + limited.retry_after();
                say!(
                    "{:>7} ms  DENY  {:<9} {:>3} ms on air: duty cycle spent, WAIT {} ms",
                    now,
                    what,
                    airtime,
                    limited.retry_after()
                );
                // Telemetry gives way to an alarm raised meanwhile.
                sleep_until(retry_at, Some(&alarms));
            }
            Err(denied @ Denied::CostTooLarge { .. }) => {
                say!("FAIL: {} can never be sent: {}", what, denied);
                common::fail();
            }
        }
    }
    common::stop_timer();

    // The GCRA bound, checked on the log with nothing but sums:
    // 100 · Σ airtime(i..=j) ≤ 100 · burst + (t_j − t_i).
    let sends = log.len();
    for i in 0..log.len() {
        let mut airtime = 0;
        for j in i..log.len() {
            airtime += log[j].airtime;
            if 100 * airtime > 100 * BURST_MS + (log[j].at - log[i].at) {
                say!(
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
    let dropped = DROPPED.load(Relaxed);
    let pending = alarms.len();
    say!(
        "radio: {} sends, {} denials, {} stale readings skipped, {} alarms shaped, {} ms on air in {} s ({}.{:02} % beyond the {} ms burst), {} of {} alarms sent, worst alarm latency {} ms",
        sends,
        denials,
        skipped,
        shaped,
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
        say!(
            "FAIL: alarms lost ({} dropped, {} pending)",
            dropped,
            pending
        );
        common::fail();
    }
    if shaped == 0 {
        say!("FAIL: no alarm ever waited for its slot (nothing was shaped)");
        common::fail();
    }
    if denials == 0 {
        say!("FAIL: the duty-cycle limit was never reached");
        common::fail();
    }
    say!("radio ok: every window within 1 % plus the burst");
    common::pass()
}
