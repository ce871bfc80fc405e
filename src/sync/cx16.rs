//! How a hot path reads and swaps a [`PairWord`]: through its own methods
//! ([`Portable`]), or on x86_64 by `cmpxchg16b` (and `movdqa`) written
//! inline ([`Cx16`]) once the CPU is known to have it, chosen once by
//! [`PairPath::choose`] and then passed down as a [`PairOps`] value, so that
//! the caller's generic code is compiled once per kind of operations.
//!
//! Why: without `-C target-feature=+cmpxchg16b` (or `target-cpu=x86-64-v2`)
//! portable-atomic cannot inline its `AtomicU128` operations; it detects the
//! instruction at run time and calls each load and compare-and-swap through
//! a function pointer (a measurable share of a keyed check; see
//! `docs/design/keyed.md`). Here
//! detection runs once (CPUID leaf 1, ECX bit 13, cached in an `AtomicU8`),
//! and a caller branches once on the cached answer to a copy of its path
//! whose operations are inline:
//!
//! * compare-and-swap: `lock cmpxchg16b`;
//! * load, on Intel and AMD CPUs that report AVX: one `movdqa`, an atomic
//!   16-byte load on those CPUs (Intel SDM vol. 3A §9.1.1: "Processors
//!   that enumerate support for Intel® AVX (by setting the feature flag
//!   CPUID.01H:ECX.AVX\[bit 28\]) guarantee that the 16-byte memory
//!   operations performed by the following instructions will always be
//!   carried out atomically: MOVAPD, MOVAPS, and MOVDQA. ..."; AMD APM
//!   vol. 2 §7.3.2: processors that report AVX "extend the atomicity for
//!   cacheable, naturally-aligned single loads or stores from a quadword
//!   to a double quadword"). portable-atomic relies on the same guarantee
//!   for its detected load;
//! * load, elsewhere: `lock cmpxchg16b` of 0 by 0 (which never changes the
//!   value), the only 16-byte atomic load such a CPU has (also what
//!   portable-atomic's detected load does there). It is much slower than
//!   `movdqa` on an AVX CPU (`docs/design/keyed.md` has the measurement).
//!
//! | target / build | [`PairPath::choose`] |
//! |---|---|
//! | x86_64, `cmpxchg16b` not enabled at compile time (the default target) | [`Cx16`] (`movdqa` loads on Intel/AMD with AVX, else `cmpxchg16b` loads) when CPUID reports `cmpxchg16b`, else [`Portable`] |
//! | x86_64 with `cmpxchg16b` at compile time (`x86-64-v2` and later) | [`Portable`]: portable-atomic inlines the compare-and-swap itself, and that build measured slower with the dispatch |
//! | every other target, SGX enclaves, loom models | [`Portable`] ([`Cx16`] is an uninhabited type there) |
//!
//! # Invariants
//!
//! * Both kinds are atomic 16-byte accesses of the same 16 bytes (a
//!   `Cx16` exists only if portable-atomic's `AtomicU128` is lock-free,
//!   i.e. itself uses `cmpxchg16b`), so they may be mixed on one word:
//!   Rust's memory model forbids only mixed-*size* races.
//! * A `Cx16` value is a proof that detection found the instruction (and,
//!   for `Cx16<true>`, an Intel or AMD CPU reporting AVX); only
//!   [`PairPath::detect`] makes one.
//! * Orderings: the inline compare-and-swap is sequentially consistent
//!   (`lock` prefix), at least the AcqRel / Acquire of
//!   `PairWord::compare_exchange`; an x86 load is acquire.
//!
//! Why `asm!` and not `core::arch::x86_64::cmpxchg16b`: that intrinsic is a
//! generic 128-bit atomic instantiated in the calling crate without the
//! `cmpxchg16b` feature, so an unoptimized build (and, once LLVM inlines it
//! into a caller compiled without the feature, an optimized one) lowers it
//! to a call to `__atomic_compare_exchange_16`, which no Rust target links.
//! Miri cannot run `asm!` or CPUID; under miri the intrinsic stands in for
//! the compare-and-swap (same instruction), detection answers with the
//! compile-time target feature, and there is no `movdqa` path:
//! `RUSTFLAGS="-C target-feature=+cmpxchg16b" cargo +nightly miri test --lib cx16`.

use super::loom::{pair_inline, pair_portable_only};
use super::slot::PairWord;

/// A way to read and compare-and-swap a [`PairWord`], passed by value down a
/// hot path that is generic over it.
pub(crate) trait PairOps: Copy {
    /// The word's value (acquire), as [`PairWord::load`].
    fn load(self, pair: &PairWord) -> u128;
    /// As [`PairWord::compare_exchange`].
    fn compare_exchange(self, pair: &PairWord, current: u128, new: u128) -> Result<(), u128>;
}

/// The [`PairWord`] methods: portable-atomic (on x86_64 without
/// `cmpxchg16b` at compile time, a detected function per operation), a
/// critical section, or loom.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

impl PairOps for Portable {
    #[inline(always)]
    fn load(self, pair: &PairWord) -> u128 {
        pair.load()
    }

    #[inline(always)]
    fn compare_exchange(self, pair: &PairWord, current: u128, new: u128) -> Result<(), u128> {
        pair.compare_exchange(current, new)
    }
}

/// The operations a hot path runs with, chosen once (see the module docs).
/// Match on it and call the generic path in each arm.
#[derive(Clone, Copy)]
// Where there is no inline path (`pair_portable_only!`) the `Cx16`
// variants hold an uninhabited type and are never built.
#[allow(dead_code)]
pub(crate) enum PairPath {
    /// [`Portable`].
    Portable(Portable),
    /// `cmpxchg16b` for both operations.
    Cx16(Cx16<false>),
    /// `movdqa` loads, `cmpxchg16b` compare-and-swap.
    Movdqa(Cx16<true>),
}

impl PairPath {
    /// The operations for a hot path: [`detect`](Self::detect)'s answer
    /// (one relaxed load of a cached byte), except in builds with
    /// `cmpxchg16b` at compile time, where portable-atomic inlines the
    /// compare-and-swap already and the answer is [`Portable`] (that build
    /// measured slower with the dispatch: a hot key 5.11 → 4.56, 100 000
    /// random keys 2.11 → 1.48, governor ÷ cellrate).
    #[inline(always)]
    pub(crate) fn choose() -> Self {
        if cfg!(target_feature = "cmpxchg16b") {
            PairPath::Portable(Portable)
        } else {
            Self::detect()
        }
    }
}

pair_portable_only! {
    /// Uninhabited off x86_64 (and in loom models): no inline path there.
    #[derive(Clone, Copy)]
    pub(crate) struct Cx16<const MOVDQA: bool>(Never);

    /// No value.
    #[derive(Clone, Copy)]
    pub(crate) enum Never {}

    impl<const MOVDQA: bool> PairOps for Cx16<MOVDQA> {
        #[inline(always)]
        fn load(self, _: &PairWord) -> u128 {
            match self.0 {}
        }

        #[inline(always)]
        fn compare_exchange(self, _: &PairWord, _: u128, _: u128) -> Result<(), u128> {
            match self.0 {}
        }
    }

    impl PairPath {
        /// Always [`Portable`] here.
        #[inline(always)]
        pub(crate) fn detect() -> Self {
            PairPath::Portable(Portable)
        }
    }
}

pair_inline! {
    pub(crate) use self::x86::Cx16;

    mod x86 {
        use super::{PairOps, PairPath, PairWord, Portable};
        use core::sync::atomic::{AtomicU8, Ordering};

        // `cmpxchg16b` and `movdqa` need a 16-byte-aligned address; the
        // word is one `portable_atomic::AtomicU128`, `#[repr(C, align(16))]`.
        const _: () = assert!(core::mem::align_of::<PairWord>() == 16);
        const _: () = assert!(core::mem::size_of::<PairWord>() == 16);

        /// Proof that this CPU executes `cmpxchg16b` and that
        /// portable-atomic's `AtomicU128` is lock-free here, and, if
        /// `MOVDQA`, that it is an Intel or AMD CPU reporting AVX (so
        /// `movdqa` is an atomic 16-byte load); only [`PairPath::detect`]
        /// makes one.
        #[derive(Clone, Copy)]
        pub(crate) struct Cx16<const MOVDQA: bool>(());

        const UNKNOWN: u8 = 0;
        const NONE: u8 = 1;
        const CX16: u8 = 2;
        const MOVDQA: u8 = 3;
        /// Detection's answer. Relaxed is enough: every thread that detects
        /// stores the same answer, and the answer guards no other memory.
        static DETECTED: AtomicU8 = AtomicU8::new(UNKNOWN);

        impl PairPath {
            /// The fastest operations this CPU has: detected on first use,
            /// then one relaxed load of a cached byte.
            #[inline(always)]
            pub(crate) fn detect() -> Self {
                match DETECTED.load(Ordering::Relaxed) {
                    MOVDQA => PairPath::Movdqa(Cx16(())),
                    CX16 => PairPath::Cx16(Cx16(())),
                    NONE => PairPath::Portable(Portable),
                    _ => Self::detect_slow(),
                }
            }

            #[cold]
            #[inline(never)]
            fn detect_slow() -> Self {
                let cpu = Cpu::read();
                // The instruction must exist, and portable-atomic must use
                // atomic instructions for the same words, not its lock-based
                // fallback (for mixing the two).
                let found = if !(cpu.cmpxchg16b && portable_atomic::AtomicU128::is_lock_free()) {
                    NONE
                } else if cpu.atomic_movdqa {
                    MOVDQA
                } else {
                    CX16
                };
                DETECTED.store(found, Ordering::Relaxed);
                Self::detect()
            }
        }

        /// What detection needs to know of the CPU.
        struct Cpu {
            /// CPUID.01H:ECX.CMPXCHG16B\[bit 13\].
            cmpxchg16b: bool,
            /// CPUID.01H:ECX.AVX\[bit 28\] on a "GenuineIntel" or
            /// "AuthenticAMD" CPU (CPUID.00H: EBX, EDX, ECX).
            atomic_movdqa: bool,
        }

        impl Cpu {
            /// Miri cannot run CPUID: there the answer is the compile-time
            /// target feature, and no `movdqa` (miri cannot run `asm!`).
            #[cfg(miri)]
            fn read() -> Self {
                Cpu {
                    cmpxchg16b: cfg!(target_feature = "cmpxchg16b"),
                    atomic_movdqa: false,
                }
            }

            #[cfg(not(miri))]
            fn read() -> Self {
                use core::arch::x86_64::__cpuid;
                // `__cpuid` is an `unsafe fn` before Rust 1.87 and safe after.
                #[allow(unused_unsafe)]
                // SAFETY: CPUID exists on every x86_64 CPU (it is part of
                // the x86-64 baseline; SGX enclaves, which trap it, are
                // excluded by `pair_inline!`), and leaves 0 and 1 always
                // exist.
                let (vendor, features) = unsafe { (__cpuid(0), __cpuid(1)) };
                let name = |a: &[u8; 12]| {
                    let word = |i: usize| u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
                    (vendor.ebx, vendor.edx, vendor.ecx) == (word(0), word(4), word(8))
                };
                let intel_or_amd = name(b"GenuineIntel") || name(b"AuthenticAMD");
                Cpu {
                    cmpxchg16b: features.ecx & (1 << 13) != 0,
                    atomic_movdqa: intel_or_amd && features.ecx & (1 << 28) != 0,
                }
            }
        }

        #[cfg(test)]
        impl Cx16<true> {
            /// The same proof, for `cmpxchg16b` loads (so that tests on an
            /// AVX CPU can run both variants).
            pub(crate) fn without_movdqa(self) -> Cx16<false> {
                Cx16(())
            }
        }

        impl<const MOVDQA: bool> PairOps for Cx16<MOVDQA> {
            #[inline(always)]
            fn load(self, pair: &PairWord) -> u128 {
                let address = pair.0.as_ptr();
                debug_assert!(address as usize % 16 == 0);
                if MOVDQA {
                    // SAFETY: as for `compare_exchange` below, with `movdqa`
                    // an atomic 16-byte load on this CPU (a `Cx16<true>`
                    // exists only if `detect` found an Intel or AMD CPU
                    // reporting AVX; see the module docs), of at least
                    // acquire ordering (x86 loads are not reordered with
                    // later loads or stores).
                    unsafe { movdqa(address) }
                } else {
                    // SAFETY: as for `compare_exchange` below. Comparing
                    // with 0 and writing 0 leaves the word as it was.
                    unsafe { cmpxchg16b(address, 0, 0) }
                }
            }

            #[inline(always)]
            fn compare_exchange(self, pair: &PairWord, current: u128, new: u128) -> Result<(), u128> {
                let address = pair.0.as_ptr();
                debug_assert!(address as usize % 16 == 0);
                // SAFETY:
                // * the CPU feature: a `Cx16` exists only if `detect` found
                //   `cmpxchg16b` (CPUID; under miri the compile-time
                //   feature);
                // * the address: the word's own `AtomicU128`, valid for
                //   reads and writes for the borrow of `pair` (an atomic
                //   allows writes through `&`), and 16-byte aligned (the
                //   `const` assertions above), as `cmpxchg16b` requires;
                // * the memory model: every access to a `PairWord` is
                //   atomic and 16 bytes wide, whichever way it is made
                //   (portable-atomic's `AtomicU128` methods, lock-free since
                //   `detect` checked `is_lock_free`, or this instruction, a
                //   sequentially consistent 128-bit compare-and-swap, at
                //   least the AcqRel / Acquire that
                //   `PairWord::compare_exchange` asks). The
                //   std::sync::atomic docs ("Memory model for atomic
                //   accesses") forbid only mixed-size races: "every pair of
                //   non-synchronized atomic accesses must be either
                //   disjoint, access the exact same memory (including using
                //   the same access size), or both be reads". Ours access
                //   the exact same 16 bytes.
                let seen = unsafe { cmpxchg16b(address, current, new) };
                if seen == current {
                    Ok(())
                } else {
                    Err(seen)
                }
            }
        }

        /// `lock cmpxchg16b [address]`: if the 16 bytes at `address` are
        /// `current`, writes `new`; returns what they were.
        ///
        /// # Safety
        /// The CPU has `cmpxchg16b`; `address` is 16-byte aligned, valid
        /// for reads and writes, and accessed only atomically, 16 bytes at
        /// a time, by anyone else.
        #[cfg(not(miri))]
        #[inline(always)]
        unsafe fn cmpxchg16b(address: *mut u128, current: u128, new: u128) -> u128 {
            let (seen_low, seen_high): (u64, u64);
            // SAFETY: the caller's contract. The instruction compares
            // rdx:rax with the 16 bytes at `address` and, if equal, stores
            // rcx:rbx, else loads them into rdx:rax. `asm!` may not name
            // rbx as an operand (LLVM can reserve it), so the new low word
            // comes in another register, is swapped into rbx and swapped
            // back after. The address is pinned to rdi: as a `reg` operand
            // the register allocator may give it rbx (it is reserved only
            // in some frames), and after the swap the instruction would
            // then take the new low word for the address (a release build
            // of a plain check loop did exactly that and crashed;
            // `examples/keyed_loop.rs`, which stage 20 runs, is that loop).
            // The new low word's own register may be rbx: the swap is then
            // a no-op and rbx holds it, as the instruction needs.
            unsafe {
                core::arch::asm!(
                    "xchg {new_low}, rbx",
                    "lock cmpxchg16b xmmword ptr [rdi]",
                    "mov rbx, {new_low}",
                    in("rdi") address,
                    new_low = inout(reg) new as u64 => _,
                    in("rcx") (new >> 64) as u64,
                    inout("rax") current as u64 => seen_low,
                    inout("rdx") (current >> 64) as u64 => seen_high,
                    options(nostack),
                );
            }
            (seen_high as u128) << 64 | seen_low as u128
        }

        /// `movdqa xmm, [address]`: the 16 bytes at `address`.
        ///
        /// # Safety
        /// The CPU performs `movdqa` as one atomic access (Intel or AMD
        /// with AVX); `address` is 16-byte aligned, valid for reads, and
        /// accessed only atomically, 16 bytes at a time, by anyone else.
        #[cfg(not(miri))]
        #[inline(always)]
        unsafe fn movdqa(address: *mut u128) -> u128 {
            let value: core::arch::x86_64::__m128i;
            // SAFETY: the caller's contract; SSE2 (hence `movdqa`) is part
            // of the x86-64 baseline. No `readonly`: like an acquire load,
            // the compiler must not move later memory accesses above it.
            unsafe {
                core::arch::asm!(
                    "movdqa {value}, xmmword ptr [{address}]",
                    address = in(reg) address,
                    value = out(xmm_reg) value,
                    options(nostack, preserves_flags),
                );
            }
            // SAFETY: both are 16 bytes of plain data, every bit pattern
            // valid; little-endian, so the bytes mean the same `u128`.
            unsafe { core::mem::transmute::<core::arch::x86_64::__m128i, u128>(value) }
        }

        /// Never reached (miri detects no `movdqa`); the portable load.
        ///
        /// # Safety
        /// As the `asm!` version.
        #[cfg(miri)]
        #[inline(always)]
        unsafe fn movdqa(address: *mut u128) -> u128 {
            // SAFETY: the caller's contract: an atomic, aligned, valid word.
            unsafe { (*address.cast::<portable_atomic::AtomicU128>()).load(Ordering::Acquire) }
        }

        /// Under miri, the intrinsic for the same instruction (see the
        /// module docs; run miri with `-C target-feature=+cmpxchg16b`).
        ///
        /// # Safety
        /// As the `asm!` version.
        #[cfg(miri)]
        #[inline(always)]
        unsafe fn cmpxchg16b(address: *mut u128, current: u128, new: u128) -> u128 {
            // SAFETY: the caller's contract, which is the intrinsic's.
            unsafe {
                core::arch::x86_64::cmpxchg16b(
                    address,
                    current,
                    new,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            }
        }
    }
}

pair_inline! {
    /// The inline operations against portable-atomic's. Under miri (which
    /// cannot run CPUID or `asm!`) only the `cmpxchg16b` variant exists, only
    /// with the feature enabled at compile time, and its compare-and-swap is
    /// the intrinsic for the same instruction.
    #[cfg(test)]
    pub(crate) mod tests {
        extern crate std;

        use super::*;

        /// Runs the generic test `$body` with each inline variant this CPU has.
        macro_rules! each_inline_path {
            ($body:path) => {
                match $crate::sync::PairPath::detect() {
                    $crate::sync::PairPath::Movdqa(ops) => {
                        $body(ops);
                        $body(ops.without_movdqa());
                    }
                    $crate::sync::PairPath::Cx16(ops) => $body(ops),
                    $crate::sync::PairPath::Portable(_) => panic!(
                        "this CPU (or, under miri, the compile-time target features) lacks cmpxchg16b"
                    ),
                }
            };
        }
        pub(crate) use each_inline_path;

        #[cfg(not(miri))]
        #[test]
        fn cx16_detection_agrees_with_std() {
            use std::arch::x86_64::__cpuid;
            // `__cpuid` is an `unsafe fn` before Rust 1.87 and safe after.
            #[allow(unused_unsafe)]
            // SAFETY: leaf 0 exists on every x86_64 CPU.
            let vendor = unsafe { __cpuid(0) };
            let mut name = [0u8; 12];
            name[..4].copy_from_slice(&vendor.ebx.to_le_bytes());
            name[4..8].copy_from_slice(&vendor.edx.to_le_bytes());
            name[8..].copy_from_slice(&vendor.ecx.to_le_bytes());
            let intel_or_amd = &name == b"GenuineIntel" || &name == b"AuthenticAMD";
            let expected = match (
                std::is_x86_feature_detected!("cmpxchg16b"),
                std::is_x86_feature_detected!("avx") && intel_or_amd,
            ) {
                (false, _) => "portable",
                (true, false) => "cx16",
                (true, true) => "movdqa",
            };
            // The first call detects, the second reads the cached answer.
            for _ in 0..2 {
                let found = match PairPath::detect() {
                    PairPath::Portable(_) => "portable",
                    PairPath::Cx16(_) => "cx16",
                    PairPath::Movdqa(_) => "movdqa",
                };
                assert_eq!(found, expected);
            }
            // A hot path dispatches only where the build does not inline the
            // compare-and-swap already.
            let chosen = matches!(PairPath::choose(), PairPath::Portable(_));
            assert_eq!(
                chosen,
                cfg!(target_feature = "cmpxchg16b") || expected == "portable"
            );
        }

        /// Each operation gives what portable-atomic's gives on the same word,
        /// and each sees the other's writes.
        fn ops_match_portable<O: PairOps>(ops: O) {
            let values = [
                0,
                1,
                (1u128 << 127) | 7,
                (3u128 << 126) | 9,
                u128::MAX,
                1 << 64,
                u64::MAX as u128,
            ];
            for &old in &values {
                for &new in &values {
                    let pair = PairWord::new(old);
                    assert_eq!(ops.load(&pair), old);
                    assert_eq!(Portable.load(&pair), old, "a load changes nothing");
                    let wrong = old ^ (1 << 70);
                    assert_eq!(ops.compare_exchange(&pair, wrong, new), Err(old));
                    assert_eq!(Portable.load(&pair), old);
                    let wrong_low = old ^ 1;
                    assert_eq!(ops.compare_exchange(&pair, wrong_low, new), Err(old));
                    assert_eq!(Portable.load(&pair), old);
                    assert_eq!(ops.compare_exchange(&pair, old, new), Ok(()));
                    assert_eq!(Portable.load(&pair), new);
                    assert_eq!(Portable.compare_exchange(&pair, new, old), Ok(()));
                    assert_eq!(ops.load(&pair), old);
                }
            }
        }

        #[test]
        fn cx16_pair_ops_match_portable() {
            each_inline_path!(ops_match_portable);
        }
    }
}
