//! Firmware guide: features per target, what is lock-free, a limiter shared
//! with an interrupt handler, and the measured footprint.
//!
//! This module holds no code; it is the documentation a firmware author
//! reads first. Everything stated here is checked by
//! `scripts/stages/60-firmware.sh`, which builds the firmware crate in
//! `examples/firmware` and runs it under `qemu-system-arm`.
//!
//! # What to enable, per target family
//!
//! cellrate enables no feature by default and chooses no critical-section
//! implementation: the **binary** does, exactly as it does for its HAL.
//!
//! | family | Rust target | state word | the binary adds |
//! |---|---|---|---|
//! | Cortex-M0 / M0+ | `thumbv6m-none-eabi` | critical section | `cortex-m = { version = "0.7", features = ["critical-section-single-core"] }` |
//! | Cortex-M3 / M4 / M7 | `thumbv7m-none-eabi`, `thumbv7em-none-eabi(hf)` | critical section (32-bit CAS only; the state is 64-bit) | the same |
//! | Cortex-M23 / M33 | `thumbv8m.base/main-none-eabi(hf)` | critical section | the same |
//! | RISC-V without atomics | `riscv32imc-unknown-none-elf` | critical section | `riscv = { version = "0.12", features = ["critical-section-single-hart"] }` |
//! | RISC-V 32-bit with atomics | `riscv32imac-unknown-none-elf` | critical section (no 64-bit CAS) | the same |
//! | multi-core, e.g. RP2040 (2 × M0+) | `thumbv6m-none-eabi` | critical section across both cores | the HAL's multi-core implementation, e.g. `rp2040-hal = { version = "0.10", features = ["critical-section-impl"] }` (a hardware spinlock plus interrupts off); **never** `cortex-m`'s single-core one, which does not stop the other core |
//! | 64-bit (x86_64, aarch64, riscv64) | any | `AtomicU64` compare-and-swap: lock-free | nothing |
//!
//! Crate features a firmware typically turns on:
//!
//! | feature | adds | for |
//! |---|---|---|
//! | `embedded-hal` | `hal::Throttled` (rate-limited `SpiDevice` / `I2c` that refuses), `hal::Paced` (the same, waiting with a `DelayNs`), `hal::wait_n` (blocking wait) | blocking firmware on any HAL |
//! | `embassy-time` | `embassy::EmbassyClock`, async `embassy::wait_n` | embassy applications |
//! | `defmt` | `defmt::Format` for every public type | logging over RTT |
//!
//! Never `loom` (it is for this crate's own tests) and never `std` on bare
//! metal. cellrate does not depend on `portable-atomic`, so no
//! `unsafe-assume-single-core` is needed, or enabled, anywhere.
//!
//! # What is lock-free, and what takes a critical section
//!
//! On targets with 64-bit compare-and-swap every [`Gcra`](crate::Gcra)
//! operation is lock-free: a load and a CAS loop that retries only when
//! another core changed the word. On every target in the table above that
//! lacks it (all 32-bit MCUs), each operation takes **two short critical
//! sections**, one to read the quota and one for the read-modify-write of the
//! state word, with interrupts masked in between only for those
//! instructions:
//!
//! | operation | 64-bit CAS targets | 32-bit MCUs |
//! |---|---|---|
//! | `check`, `check_n`, `reserve_n`, `refund_n` | lock-free | 2 critical sections |
//! | `peek`, `quota`, `reset` | lock-free (a quota read retries only while two `set_quota` calls overlap it) | 1–2 critical sections |
//! | `set_quota` | lock-free; a second concurrent call returns `Busy` instead of waiting | 1 critical section |
//! | [`ManualClock`](crate::ManualClock) | lock-free | 1 critical section |
//! | [`LocalGcra`](crate::LocalGcra) | no synchronisation at all: one owner (one context) only | the same |
//! | `hal::Throttled`, `hal::Paced` | owned by one driver (`&mut self`); its limiter may be a shared `&'static Gcra` | the same |
//!
//! A critical section never waits: it cannot deadlock with an interrupt
//! handler, and it bounds the interrupt latency a limiter adds (measured
//! below). This is why cellrate does not use `portable-atomic`'s `AtomicU64`
//! on Cortex-M3/M4/M7: its fallback there is a spin lock, which an interrupt
//! handler that preempts the lock holder spins on forever.
//!
//! # A `static` limiter shared with an interrupt handler
//!
//! The limiter is `const`-constructible, so it lives in a `static` and both
//! contexts call it through `&self`, with no `Mutex`, no `RefCell` and no
//! `unsafe`:
//!
//! ```
//! use cellrate::{Gcra, Quota};
//!
//! /// 10 frames per second, bursts of 3, on a 32 768 Hz RTC counter.
//! static TX_BUDGET: Gcra = Gcra::new(Quota::per_second(10).with_burst(3).at_hz(32_768));
//!
//! /// Called from thread mode and from the interrupt handler alike.
//! fn try_send(now: u64, frame: &[u8]) -> bool {
//!     match TX_BUDGET.check(now) {
//!         Ok(_) => {
//!             // radio.transmit(frame);
//!             let _ = frame;
//!             true
//!         }
//!         Err(denied) => {
//!             // Reschedule after `denied.retry_after()` ticks, or drop.
//!             let _ = denied.retry_after();
//!             false
//!         }
//!     }
//! }
//! # assert!(try_send(0, b"a") && try_send(0, b"b") && try_send(0, b"c"));
//! # assert!(!try_send(0, b"d"));
//! # assert!(try_send(3_277, b"e"));
//! ```
//!
//! In a Cortex-M binary (this is what `examples/firmware` does; it needs
//! `cortex-m`, `cortex-m-rt` and a board, so it is not compiled here):
//!
//! ```ignore
//! #![no_std]
//! #![no_main]
//! use cellrate::{Gcra, Quota};
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use cortex_m_rt::{entry, exception};
//! use panic_halt as _;
//!
//! static TX_BUDGET: Gcra = Gcra::new(Quota::per_second(10).with_burst(3).at_hz(1_000));
//! static MILLIS: AtomicU32 = AtomicU32::new(0); // advanced by a timer interrupt
//!
//! #[exception]
//! fn SysTick() {
//!     let now = u64::from(MILLIS.load(Ordering::Relaxed));
//!     if TX_BUDGET.check(now).is_ok() {
//!         // send the urgent frame
//!     }
//! }
//!
//! #[entry]
//! fn main() -> ! {
//!     loop {
//!         let now = u64::from(MILLIS.load(Ordering::Relaxed));
//!         match TX_BUDGET.check(now) {
//!             Ok(_) => { /* send */ }
//!             Err(denied) => { /* sleep denied.retry_after() ms */ let _ = denied; }
//!         }
//!     }
//! }
//! ```
//!
//! The `Cargo.toml` of that binary:
//!
//! ```toml
//! [dependencies]
//! cellrate = { version = "0.1", features = ["embedded-hal"] }
//! cortex-m = { version = "0.7", features = ["critical-section-single-core"] }
//! cortex-m-rt = "0.7"
//! ```
//!
//! # Proven on an emulated MCU
//!
//! `examples/firmware` runs under `qemu-system-arm` on a Cortex-M3
//! (`thumbv7m`, `lm3s6965evb`), a Cortex-M0 (`thumbv6m`, the same board with
//! `-cpu cortex-m0`) and a Cortex-M4F (`thumbv7em-none-eabihf`,
//! `mps2-an386`):
//!
//! * `hammer`: thread mode and a SysTick handler (reload 600 cycles, at
//!   least 10 000 runs of 3 checks per limiter) check the same `static`
//!   limiters (two GCRAs, with an integer and a fractional emission
//!   interval, and a fixed window counter where the crate has one) over far
//!   more than 200 000 checks, with thousands of thread-mode checks
//!   preempted mid-call. Time is a counter the firmware drives in
//!   phases; at each phase boundary the admitted count must equal what a
//!   token bucket written independently admits for that many checks, or the
//!   run exits non-zero. A limiter with a deliberate lost-update race
//!   (feature `racy-control`) is caught within a few thousand phases; the
//!   test script requires that failure.
//! * `radio`: a LoRa-like transmitter on a 1 % duty cycle (cost = airtime in
//!   ms), telemetry from the main loop and alarms queued by an interrupt,
//!   with a log of sends, denials and waits. At the end it checks
//!   `Σ airtime(i..=j) ≤ burst + (t_j − t_i)/100` for every pair of sends.
//!
//! # Footprint and timing
//!
//! Measured by `scripts/stages/60-firmware.sh` with the toolchain's
//! `llvm-size` and `llvm-objdump` (release, `opt-level = "s"`, LTO), on a
//! minimal firmware (`footprint_base`: a loop storing a constant) and the
//! same loop calling `Gcra::check_n` on a quota the compiler cannot
//! constant-fold (`footprint_gcra`):
//!
//! | target | minimal firmware | with a `Gcra` check | the check costs |
//! |---|---|---|---|
//! | `thumbv6m-none-eabi` (M0) | 340 B | 1 768 B | 1 428 B |
//! | `thumbv7em-none-eabihf` (M4F) | 1 196 B | 2 728 B | 1 532 B |
//!
//! (flash: vector table, text, read-only data and initialised data; the
//! limiter itself is 120 B of RAM on these targets.)
//!
//! The admit/deny path (`check_n`, up to the full `Result<Decision,
//! Denied>`) calls no division and no floating-point routine, and has no
//! panic branch, on thumbv6m, thumbv7m and thumbv7em; the stage script fails
//! if one appears, and proves it would notice by finding the division in
//! [`Decision::remaining`](crate::Decision::remaining), which converts
//! lazily. On thumbv6m the only call is `__aeabi_lmul` (the M0 has no
//! 64-bit multiply).
//!
//! Worst-case instructions inside one critical section (`cpsid i` to the
//! `msr primask` that ends it, along the longest path of the control-flow
//! graph, counting the instructions of called routines; no loops):
//!
//! | target | quota read | state update (`check_n`) | state read (cost 0) |
//! |---|---|---|---|
//! | `thumbv6m-none-eabi` (M0) | 20 | 69 | 5 |
//! | `thumbv7m-none-eabi` (M3) | 10 | 43 | 6 |
//! | `thumbv7em-none-eabihf` (M4F) | 10 | 41 | 4 |
//!
//! The multiplications (`now · scale`, `cost · T`, which on the M0 are
//! `__aeabi_lmul` calls) run before the state update's critical section, which
//! only compares, adds and subtracts. At one to three cycles per instruction
//! that is under 210 cycles of added interrupt latency on an M0 (4.4 µs at
//! 48 MHz) and under 130 on an M3/M4.
