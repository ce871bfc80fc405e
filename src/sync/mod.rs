//! How a limiter's state is shared: the place that chooses native atomics,
//! critical sections or loom for one 64-bit word (`StateWord`), a quota
//! under `set_quota` (`QuotaCell`), state larger than a word (`Guarded`)
//! and the keyed tables' 128-bit slot word (`PairWord`). Each file opens
//! with its own contract.
//!
//! | target | state word | quota under `set_quota` |
//! |---|---|---|
//! | has 64-bit CAS (`target_has_atomic = "64"`: x86_64, aarch64, riscv64, wasm32…) | one `AtomicU64`, compare-and-swap loop: **lock-free** | two seqlocked copies, readers never wait for a writer |
//! | no 64-bit CAS (thumbv6m, thumbv7m/7em, thumbv8m, riscv32) | `u64` in a [`critical_section::Mutex`] | the same mutex |
//! | this crate's unit tests with `--features loom` | loom's `AtomicU64` | loom's atomics |
//!
//! State larger than a word (the sliding log's ring) is a `Guarded`: a
//! sequence lock (the one `Seq`) where the `std` feature is on and the
//! target has 64-bit atomics, and a critical section everywhere else.
//!
//! # Why not `portable-atomic`'s `AtomicU64` on Cortex-M3/M4/M7?
//!
//! There it falls back to a global spin lock (also with its
//! `critical-section` feature), which an interrupt handler touching the same
//! atomic spins on forever. A `critical_section` masks interrupts for the
//! update's few instructions (a load, adds, compares, one multiply, a
//! store). The binary chooses its implementation; this crate never enables
//! portable-atomic's `…-assume-single-core`.
//!
//! # Invariants
//!
//! * `StateWord::compare_exchange` and `StateWord::fetch_add` are single
//!   atomic steps on both paths (one instruction sequence, or one critical
//!   section); `fetch_add` wraps.
//! * `StateWord::update` applies `f` to the current value and stores its
//!   result atomically with respect to every other access of the word: on the
//!   atomic path by compare-and-swap (retrying `f` on a fresh value), on the
//!   critical-section path by holding the section. When `f` declines (`Err`)
//!   nothing is stored; on `Ok` its result is stored (even when unchanged).
//! * `QuotaCell::load` returns a quota that some `store` wrote whole (or the
//!   initial one), never a mix of two, and never waits for a writer (see
//!   `quota_cell.rs`).

mod loom;
mod pair;
mod quota_cell;
#[cfg(any(target_has_atomic = "64", all(feature = "loom", test)))]
mod seq;
mod seqlock;
mod word;

pub(crate) use self::loom::atomic;
#[allow(unused_imports)]
pub(crate) use self::loom::{loom_const_fn, repeat_const, word_atomic, word_section};
pub(crate) use self::pair::{Counter, PairWord};
pub(crate) use self::quota_cell::QuotaCell;
pub(crate) use self::seqlock::{guarded_zeros, Guarded, GuardedU64};
pub(crate) use self::word::StateWord;
