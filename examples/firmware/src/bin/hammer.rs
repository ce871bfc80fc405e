//! Interrupt safety on a real (emulated) MCU.
//!
//! Thread mode and a frequent timer interrupt (SysTick on Cortex-M, the
//! CLINT machine timer on RISC-V) hammer the same `static`
//! limiters. The firmware drives time itself: `NOW` is a tick counter that
//! only thread mode advances, in *phases*. Within a phase every check, from
//! either context, sees the same `now` and costs one cell, so the number a
//! limiter admits in the phase does not depend on how the checks interleave:
//! it is what a sequential limiter admits for `attempts` checks at `now`.
//! A lost update (an interrupt landing inside a read-modify-write of the
//! state word) would admit more than that; a deadlock would hang the run
//! (the test script runs it under `timeout`).
//!
//! At each phase boundary thread mode takes, inside a critical section of its
//! own (bookkeeping only, never around a limiter call), the handler's attempt
//! and admit counts of the phase, then advances `NOW`. It compares the
//! phase's admitted total with a reference written as a token bucket (a
//! formulation independent of the library's GCRA code) and exits non-zero on
//! the first difference.
//!
//! Adding a limiter means one more `static`, one more entry in `CASES` and,
//! if it is neither a token bucket nor a fixed window, one more `Reference`
//! variant. The fixed window counter (`cellrate::FixedWindow`) is in when
//! feature `window` is on.
#![no_std]
#![no_main]

#[macro_use]
#[path = "../common.rs"]
mod common;

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use cellrate::{Gcra, Quota, RateLimiter};
#[cfg(target_arch = "arm")]
use cortex_m_rt::{entry, exception};
#[cfg(target_arch = "riscv32")]
use riscv_rt::{core_interrupt, entry};

/// Clock frequency the quotas declare (it only bounds their scale here).
const HZ: u64 = 1_000;

/// 1 cell per tick, bursts of 4: T an integer number of ticks.
#[cfg_attr(feature = "racy-control", allow(dead_code))]
static WHOLE: Gcra = Gcra::new(Quota::per_ticks(1, 1).with_burst(4).at_hz(HZ));
/// 3 cells per 10 ticks, bursts of 5: T = 10/3 ticks, exercising sub-ticks.
static THIRDS: Gcra = Gcra::new(Quota::per_ticks(3, 10).with_burst(5).at_hz(HZ));

/// A limiter under test and how to model it sequentially.
struct Case {
    name: &'static str,
    limiter: &'static (dyn RateLimiter + Sync),
    reference: Reference,
}

/// What a limiter must admit when the same checks run one after another.
#[derive(Clone, Copy)]
enum Reference {
    /// A token bucket of `burst` cells refilled with `cells` per `ticks`:
    /// tokens are counted in units of `1/ticks` cell, so all is integer.
    TokenBucket { cells: u64, ticks: u64, burst: u64 },
    /// At most `limit` cells in each aligned window `[k·window, (k+1)·window)`.
    #[cfg_attr(not(feature = "window"), allow(dead_code))]
    FixedWindow { limit: u64, window: u64 },
}

impl Reference {
    fn model(self) -> Model {
        match self {
            Reference::TokenBucket {
                cells,
                ticks,
                burst,
            } => Model::TokenBucket {
                cells,
                ticks,
                capacity: burst * ticks,
                tokens: burst * ticks,
                last: 0,
            },
            Reference::FixedWindow { limit, window } => Model::FixedWindow {
                limit,
                window,
                index: 0,
                count: 0,
            },
        }
    }
}

enum Model {
    TokenBucket {
        cells: u64,
        ticks: u64,
        capacity: u64,
        tokens: u64,
        last: u64,
    },
    FixedWindow {
        limit: u64,
        window: u64,
        index: u64,
        count: u64,
    },
}

impl Model {
    /// One check of cost 1 at `now` (never earlier than the last one).
    fn admit(&mut self, now: u64) -> bool {
        match self {
            Model::TokenBucket {
                cells,
                ticks,
                capacity,
                tokens,
                last,
            } => {
                let refill = (now - *last) * *cells;
                *tokens = (*tokens + refill).min(*capacity);
                *last = now;
                if *tokens >= *ticks {
                    *tokens -= *ticks;
                    true
                } else {
                    false
                }
            }
            Model::FixedWindow {
                limit,
                window,
                index,
                count,
            } => {
                if now / *window != *index {
                    *index = now / *window;
                    *count = 0;
                }
                if *count < *limit {
                    *count += 1;
                    true
                } else {
                    false
                }
            }
        }
    }
}

/// A negative control (feature `racy-control`): a GCRA of 1 cell per tick,
/// burst 4, whose read-modify-write of its state is *not* atomic. The run
/// must catch it over-admitting; the test script requires this build to fail.
#[cfg(feature = "racy-control")]
struct Racy {
    tat: AtomicU32,
}

#[cfg(feature = "racy-control")]
impl RateLimiter for Racy {
    fn check_n(&self, now: u64, cost: u64) -> Result<cellrate::Decision, cellrate::Denied> {
        let tat = u64::from(self.tat.load(Relaxed));
        let start = tat.max(now);
        let new_tat = start + cost;
        if new_tat - now <= 4 {
            // The window a correct limiter closes: an interrupt here is lost.
            common::nop();
            self.tat.store(new_tat as u32, Relaxed);
            Ok(cellrate::Decision::new(
                4,
                4 - (new_tat - now),
                new_tat - now,
            ))
        } else {
            Err(cellrate::Denied::Limited(cellrate::Limited::new(
                4,
                new_tat - now - 4,
                start - now,
            )))
        }
    }
    fn peek(&self, _now: u64) -> cellrate::Snapshot {
        cellrate::Snapshot::new(4, 0, 0, 0)
    }
}

#[cfg(feature = "racy-control")]
static RACY: Racy = Racy {
    tat: AtomicU32::new(0),
};

/// The limiters under test. With feature `window` (for a cellrate that has
/// `cellrate::window`; the test script turns it on when it does) a fixed
/// window counter joins them.
static CASES: [Case; N] = [
    #[cfg(not(feature = "racy-control"))]
    Case {
        name: "gcra 1/tick burst 4",
        limiter: &WHOLE,
        reference: Reference::TokenBucket {
            cells: 1,
            ticks: 1,
            burst: 4,
        },
    },
    #[cfg(feature = "racy-control")]
    Case {
        name: "racy 1/tick burst 4",
        limiter: &RACY,
        reference: Reference::TokenBucket {
            cells: 1,
            ticks: 1,
            burst: 4,
        },
    },
    Case {
        name: "gcra 3/10 ticks burst 5",
        limiter: &THIRDS,
        reference: Reference::TokenBucket {
            cells: 3,
            ticks: 10,
            burst: 5,
        },
    },
    #[cfg(feature = "window")]
    Case {
        name: "fixed window 5 per 4 ticks",
        limiter: &WINDOW,
        reference: Reference::FixedWindow {
            limit: 5,
            window: 4,
        },
    },
];
const N: usize = 2 + cfg!(feature = "window") as usize;

/// 5 cells per aligned window of 4 ticks.
#[cfg(feature = "window")]
static WINDOW: cellrate::FixedWindow = cellrate::FixedWindow::new(5, 4);

/// The tick counter: written by thread mode only, read by both.
static NOW: AtomicU32 = AtomicU32::new(0);
/// Set by thread mode around each limiter call, so the handler can count
/// how often it preempted one.
static IN_CHECK: AtomicBool = AtomicBool::new(false);
/// Written by the handler only (thumbv6m has no atomic read-modify-write:
/// single writers use load + store).
static ISR_ATTEMPTS: [AtomicU32; N] = [const { AtomicU32::new(0) }; N];
static ISR_ADMITS: [AtomicU32; N] = [const { AtomicU32::new(0) }; N];
static ISR_RUNS: AtomicU32 = AtomicU32::new(0);
static PREEMPTED: AtomicU32 = AtomicU32::new(0);

/// Checks per limiter in each run of the handler.
const ISR_CHECKS: u32 = 3;
/// Timer period: SysTick reload (core clock cycles) on Cortex-M, machine
/// timer ticks (10 MHz) on RISC-V.
#[cfg(target_arch = "arm")]
const PERIOD: u32 = 600;
#[cfg(target_arch = "riscv32")]
const PERIOD: u32 = 100;
/// Operations (both contexts, all limiters) before the run may end; the
/// racy control runs ten times longer, so that it is caught in one or two
/// runs.
const MIN_OPERATIONS: u64 = if cfg!(feature = "racy-control") {
    2_000_000
} else {
    200_000
};
/// Handler runs before the run may end, and preempted limiter calls.
const MIN_ISR_RUNS: u32 = 10_000;
const MIN_PREEMPTED: u32 = 1_000;
/// Give up (and fail) after this many phases.
const MAX_PHASES: u32 = 20_000_000;

fn bump(counter: &AtomicU32) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

#[cfg(target_arch = "arm")]
#[exception]
fn SysTick() {
    on_timer();
}

#[cfg(target_arch = "riscv32")]
#[core_interrupt(riscv::interrupt::Interrupt::MachineTimer)]
fn machine_timer() {
    common::rearm_timer();
    on_timer();
}

/// The interrupt handler's share: a few checks on every limiter at `NOW`.
fn on_timer() {
    bump(&ISR_RUNS);
    if IN_CHECK.load(Relaxed) {
        bump(&PREEMPTED);
    }
    let now = u64::from(NOW.load(Relaxed));
    for (i, case) in CASES.iter().enumerate() {
        for _ in 0..ISR_CHECKS {
            bump(&ISR_ATTEMPTS[i]);
            if case.limiter.check(now).is_ok() {
                bump(&ISR_ADMITS[i]);
            }
        }
    }
}

#[entry]
fn main() -> ! {
    let mut models: [Model; N] = core::array::from_fn(|i| CASES[i].reference.model());
    let mut attempts = [0u32; N];
    let mut admits = [0u32; N];
    let mut seen_isr = [(0u32, 0u32); N];
    let mut total_admitted = [0u64; N];
    let mut operations = 0u64;
    let mut rng = common::XorShift32::new(0x00C0_FFEE);

    common::start_timer(PERIOD);

    say!("hammer on {}", common::cpu_name());
    let mut now = 0u32;
    let mut phase = 0u32;
    loop {
        // The phase: a few checks from thread mode, the handler adding its own.
        let checks = 1 + rng.below(6);
        for _ in 0..checks {
            for (i, case) in CASES.iter().enumerate() {
                IN_CHECK.store(true, Relaxed);
                let admitted = case.limiter.check(u64::from(now)).is_ok();
                IN_CHECK.store(false, Relaxed);
                attempts[i] += 1;
                admits[i] += u32::from(admitted);
            }
        }
        // The boundary: take the handler's counts and move time, with the
        // handler held off so that no check falls between the two.
        let step = rng.below(4);
        let isr = critical_section::with(|_| {
            let counts: [(u32, u32); N] = core::array::from_fn(|i| {
                (ISR_ATTEMPTS[i].load(Relaxed), ISR_ADMITS[i].load(Relaxed))
            });
            NOW.store(now + step, Relaxed);
            counts
        });
        for i in 0..N {
            let isr_attempts = isr[i].0.wrapping_sub(seen_isr[i].0);
            let isr_admits = isr[i].1.wrapping_sub(seen_isr[i].1);
            seen_isr[i] = isr[i];
            let total = attempts[i] + isr_attempts;
            let expected = (0..total)
                .filter(|_| models[i].admit(u64::from(now)))
                .count() as u32;
            let got = admits[i] + isr_admits;
            if got != expected {
                say!(
                    "FAIL {}: phase {} at tick {}: {} checks ({} in the handler) admitted {}, a sequential limiter admits {}",
                    CASES[i].name, phase, now, total, isr_attempts, got, expected
                );
                common::fail();
            }
            operations += u64::from(total);
            total_admitted[i] += u64::from(got);
            attempts[i] = 0;
            admits[i] = 0;
        }
        now += step;
        phase += 1;
        let runs = ISR_RUNS.load(Relaxed);
        let preempted = PREEMPTED.load(Relaxed);
        if operations >= MIN_OPERATIONS && runs >= MIN_ISR_RUNS && preempted >= MIN_PREEMPTED {
            common::stop_timer();
            say!(
                "hammer ok: {} phases, {} ticks, {} operations, {} handler runs, {} limiter calls preempted",
                phase, now, operations, runs, preempted
            );
            for i in 0..N {
                say!(
                    "  {}: {} admitted, as a sequential limiter would",
                    CASES[i].name,
                    total_admitted[i]
                );
            }
            common::pass();
        }
        if phase >= MAX_PHASES {
            say!(
                "FAIL: too few handler runs ({}) or preemptions ({}) after {} phases",
                runs,
                preempted,
                phase
            );
            common::fail();
        }
    }
}
