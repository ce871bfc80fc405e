//! Firmware guide: features per target, what is lock-free, a limiter shared
//! with an interrupt handler, and the measured footprint.
//!
//! This module holds no code; it is the documentation a firmware author
//! reads first. Everything stated here is checked by
//! `scripts/stages/60-firmware.sh`: it builds the complete programs shown
//! below (included from `examples/firmware/quickstart`), runs the firmware
//! crate in `examples/firmware` under `qemu-system-arm` and
//! `qemu-system-riscv32`, and holds the footprint to the bounds stated at
//! the end.
//!
//! # What to enable, per target family
//!
//! cellrate enables no feature by default and chooses no critical-section
//! implementation: the **binary** does, exactly as it does for its HAL.
//!
//! | family | Rust target | the binary adds |
//! |---|---|---|
//! | Cortex-M0 / M0+ | `thumbv6m-none-eabi` | `cortex-m = { version = "0.7", features = ["critical-section-single-core"] }` |
//! | Cortex-M3 / M4 / M7 | `thumbv7m-none-eabi`, `thumbv7em-none-eabi(hf)` | the same |
//! | Cortex-M23 / M33 | `thumbv8m.base/main-none-eabi(hf)` | the same |
//! | RISC-V without atomics | `riscv32imc-unknown-none-elf` | `riscv = { version = "0.16", features = ["critical-section-single-hart"] }` |
//! | RISC-V 32-bit with atomics | `riscv32imac-unknown-none-elf` | the same |
//! | multi-core, e.g. RP2040 (2 × M0+) | `thumbv6m-none-eabi` | the HAL's multi-core implementation, e.g. `rp2040-hal = { version = "0.10", features = ["critical-section-impl"] }` (a hardware spinlock plus interrupts off); **never** `cortex-m`'s single-core one, which does not stop the other core |
//! | AArch64 bare metal (Cortex-A/R, hypervisors) | `aarch64-unknown-none` | nothing for `Gcra`, windows and keyed tables; a critical-section implementation for `SlidingLog` and `WideBucketedWindow` (the kernel's or HAL's, interrupts off) |
//! | x86_64 kernels, UEFI-adjacent code | `x86_64-unknown-none` (and `x86_64-unknown-uefi`, the same) | nothing for `Gcra` and windows; a critical-section implementation (interrupts off, plus a spinlock on several cores) for keyed tables, `SlidingLog` and `WideBucketedWindow`, or `-C target-feature=+cmpxchg16b` in `RUSTFLAGS` to make keyed tables lock-free (every x86_64 CPU since about 2006 has it) |
//! | WebAssembly | `wasm32-unknown-unknown` (no default features) | nothing for `Gcra` and windows; for keyed tables, `SlidingLog` and `WideBucketedWindow` a critical-section implementation, e.g. `critical-section = { version = "1.2", features = ["std"] }` (without one the module imports `_critical_section_1_0_acquire` and fails to instantiate) |
//!
//! What each target does with each kind of state (`scripts/stages/40-bare-metal.sh`
//! builds every row and links a small binary per row and column,
//! `examples/bare-metal`, checking which ones need a critical section):
//!
//! | Rust target | state word (`Gcra`, windows, meters) | keyed table slot (16 bytes) | `SlidingLog` ring, `WideBucketedWindow` counts |
//! |---|---|---|---|
//! | `thumbv6m-none-eabi` (no compare-and-swap) | critical section | critical section | critical section |
//! | `thumbv7em-none-eabihf`, `thumbv8m.main-none-eabihf` (32-bit CAS) | critical section | critical section | critical section |
//! | `riscv32imc-unknown-none-elf` (no A extension) | critical section | critical section | critical section |
//! | `riscv32imac-unknown-none-elf` (32-bit AMOs) | critical section | critical section | critical section |
//! | `aarch64-unknown-none` | `AtomicU64`: lock-free | `portable_atomic::AtomicU128` (`ldxp`/`stxp`, or `casp` with LSE): lock-free | critical section |
//! | `x86_64-unknown-none` (no SSE) | `AtomicU64`: lock-free | critical section; with `+cmpxchg16b`, `portable_atomic::AtomicU128` (`lock cmpxchg16b`): lock-free | critical section |
//! | `wasm32-unknown-unknown` | `AtomicU64` (single-threaded: plain loads and stores) | critical section | critical section |
//!
//! No target needs `portable-atomic`'s `critical-section` feature:
//! cellrate uses portable-atomic only for the 16-byte slot, and only where
//! that atomic is native. Its `fallback` (a global lock) is enabled only for
//! x86_64 under an operating system, for a CPU without `cmpxchg16b`; on
//! bare-metal and UEFI x86_64, where an interrupt handler could preempt the
//! lock's holder and spin on it forever, cellrate never depends on it and
//! shares the slots through a critical section unless `cmpxchg16b` is
//! enabled at compile time. The multi-core rule of the RP2040 row holds for every
//! target: the implementation must exclude the other cores too.
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
//! metal. On 32-bit MCUs cellrate does not depend on `portable-atomic`, and
//! no target needs its single-core assumption (`…-assume-single-core`),
//! which cellrate never enables.
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
//! unchecked code:
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
//! # A whole program: Cortex-M
//!
//! `examples/firmware/quickstart/cortex-m` is a complete firmware crate, and
//! what follows is its files, included here from the repository: CI builds
//! and links exactly these for `thumbv6m-none-eabi` and
//! `thumbv7em-none-eabihf`. Copy the directory, put your part's flash and
//! RAM into `memory.x`, and `cargo build --release`.
//!
//! Two lines matter beyond the limiter itself. The dependency on `cortex-m`
//! with `critical-section-single-core` provides the critical section, and
//! `use cortex_m as _;` makes sure it is linked: a binary that names
//! nothing from `cortex_m` would otherwise fail with `rust-lld: error:
//! undefined symbol: _critical_section_1_0_acquire` (the stage script
//! checks that such a binary indeed fails). On a multi-core part use the
//! HAL's implementation instead (see the table above).
//!
//! `Cargo.toml`:
//!
//! ```toml
#![doc = include_str!("firmware/cortex-m.Cargo.toml")]
//! ```
//!
//! `.cargo/config.toml`:
//!
//! ```toml
#![doc = include_str!("firmware/cortex-m.config.toml")]
//! ```
//!
//! `memory.x`:
//!
//! ```text
#![doc = include_str!("firmware/cortex-m.memory.x")]
//! ```
//!
//! `src/main.rs`:
//!
//! ```rust,ignore
#![doc = include_str!("firmware/cortex-m.main.rs")]
//! ```
//!
//! # A whole program: RISC-V
//!
//! `examples/firmware/quickstart/riscv` is the same program for a
//! single-hart `riscv32imc` (ESP32-C3 class), built and linked by CI for
//! `riscv32imc-unknown-none-elf`. The timer is a SiFive-style CLINT, as on
//! QEMU's `virt` board; on another chip, its HAL's timer interrupt takes
//! that place. `riscv` with `critical-section-single-hart` provides the
//! critical section.
//!
//! `Cargo.toml`:
//!
//! ```toml
#![doc = include_str!("firmware/riscv.Cargo.toml")]
//! ```
//!
//! `.cargo/config.toml`:
//!
//! ```toml
#![doc = include_str!("firmware/riscv.config.toml")]
//! ```
//!
//! `memory.x`:
//!
//! ```text
#![doc = include_str!("firmware/riscv.memory.x")]
//! ```
//!
//! `src/main.rs`:
//!
//! ```rust,ignore
#![doc = include_str!("firmware/riscv.main.rs")]
//! ```
//!
//! Until cellrate's first release, point the `cellrate = "0.1"` line at the
//! repository from the firmware crate's `Cargo.toml` (the line itself stays
//! as it will be):
//!
//! ```toml
//! [patch.crates-io]
//! cellrate = { path = "../cellrate" } # a clone; or { git = "<repository URL>" }
//! ```
//!
//! # Proven on emulated MCUs
//!
//! `examples/firmware` runs under `qemu-system-arm` on a Cortex-M3
//! (`thumbv7m`, `lm3s6965evb`), a Cortex-M0 (`thumbv6m`, the same board with
//! `-cpu cortex-m0`) and a Cortex-M4F (`thumbv7em-none-eabihf`,
//! `mps2-an386`), and under `qemu-system-riscv32` on a single-hart rv32imc
//! (`riscv32imc-unknown-none-elf`, the `virt` board, with `riscv`'s
//! `critical-section-single-hart`):
//!
//! * `hammer` (every core): thread mode and a timer interrupt (SysTick
//!   every 600 cycles on Cortex-M, the CLINT machine timer every 10 µs on
//!   RISC-V; at least 10 000 runs of 3 checks per limiter) check the same
//!   `static` limiters (two GCRAs, with an integer and a fractional emission
//!   interval, and a fixed window counter where the crate has one) over far
//!   more than 200 000 checks, with thousands of thread-mode checks
//!   preempted mid-call. Time is a counter the firmware drives in phases; at
//!   each phase boundary the admitted count must equal what a token bucket
//!   written independently admits for that many checks, or the run exits
//!   non-zero. A limiter with a deliberate lost-update race (feature
//!   `racy-control`) is caught on both architectures; the test script
//!   requires that failure.
//! * `radio` (Cortex-M): a LoRa-like transmitter on a 1 % duty cycle (cost =
//!   airtime in ms). Telemetry goes from the main loop with `check_n`; alarm
//!   frames are queued by an interrupt handler in a `heapless::spsc` queue
//!   (lock-free: the handler is its only producer, the main loop its only
//!   consumer) and shaped with `reserve_n`, each sent at the earliest slot
//!   the duty cycle allows. At the end it checks
//!   `Σ airtime(i..=j) ≤ burst + (t_j − t_i)/100` for every pair of sends.
//!
//! # Footprint and timing: the bounds CI enforces
//!
//! These are upper bounds, not typical values: `scripts/stages/60-firmware.sh`
//! measures each figure at four build settings, `opt-level = "s"` and
//! `opt-level = "z"`, each with `lto = true` and with `lto = "off"` (all with
//! `codegen-units = 1`, `panic = "abort"`), and fails if any measurement
//! exceeds the bound below. The table is `examples/firmware/BOUNDS.md`, which
//! the stage script reads, so the two cannot differ:
//!
#![doc = include_str!("firmware/BOUNDS.md")]
//!
//! * **Critical section**: the most instructions executed with interrupts
//!   masked by one critical section on the admit/deny path (`check_n`, up
//!   to the whole `Result<Decision, Denied>`), from the instruction that
//!   masks interrupts (`cpsid i`; `csrrci …, mstatus, 8`) to the one that
//!   restores them, along the longest path of the control-flow graph and
//!   counting the instructions of called routines (without LTO, the calls
//!   to the `critical-section` implementation's acquire and release). There
//!   are no loops inside. At one to three cycles per instruction, 90
//!   instructions add at most 270 cycles of interrupt latency (under 6 µs at
//!   48 MHz).
//! * **Flash**: the firmware's vector table, code, read-only data and data
//!   initialisers, minus those of the same loop without a limiter
//!   (`footprint_base`). "Constant quota": a `static Gcra` whose quota is a
//!   constant, checked from a loop (`footprint_static`); the compiler folds
//!   the quota's constants into the code. "Run-time quota": a `Gcra` built
//!   from a quota the compiler cannot see through, as if read from
//!   configuration (`footprint_gcra`). Both keep the full `Decision` or
//!   `Denied` result; a caller that only asks `is_ok()` gets less code.
//! * **RAM**: the size of the `static Gcra`. On these targets that is the
//!   state word (8 bytes), the quota fixed at construction (48) and the three
//!   quota words `set_quota` may replace (24).
//!
//! Only the update runs with interrupts masked, at every one of those build
//! settings: the admit/deny path calls no division, no floating-point
//! routine and no panic anywhere, and no memory-copy routine (`memcpy`,
//! `__aeabi_memcpy`, …) inside a critical section; the multiplications
//! (`now · scale`, `cost · T`, which on the M0 are `__aeabi_lmul` calls) run
//! before the state update's critical section, which only compares, adds,
//! subtracts and rotates (the serial reading of the state word, see
//! [`gcra`](crate::gcra#serial-time)). The stage script proves that each check would notice: it must
//! flag the division in [`Decision::remaining`](crate::Decision::remaining)
//! (which converts lazily), and a control that copies a table inside a
//! critical section.
