// The guide is prose kept in docs/firmware/ (linked here from src/firmware/
// so the package carries it); the quick-start files and the bounds table are
// included from examples/firmware, which CI builds, links and measures.
#![doc = include_str!("firmware/guide.md")]
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
#![doc = include_str!("firmware/emulated.md")]
//!
#![doc = include_str!("firmware/BOUNDS.md")]
//!
#![doc = include_str!("firmware/bounds.md")]
