//! One scenario at many origins of the clock.
//!
//! A limiter's answers depend only on the differences between the `now`s
//! it sees (any clock works), so a run whose every `now` is
//! shifted by an origin must give exactly the answers of the same run from
//! tick 0: the decisions, `remaining`, `reset_after`, `retry_after`, the
//! peeks. A model test feeds the limiter `origin + now` (wrapping) and the
//! model `now`; a test without a model compares the traces of the shifted
//! runs with the trace at 0 ([`same_at_every_origin`]).
//!
//! The origins: Unix-epoch nanoseconds, microseconds and milliseconds of
//! 2026-12-02 and of 2100-01-01, `2⁶²`, `2⁶³ + 1`, origins just below
//! `2⁶⁴` that make a run wrap past it early, late or in its middle, and a
//! random one per case. Window limiters are aligned to multiples of their
//! window ([`aligned`]), which is their definition.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// 2026-12-02T00:00:00Z and 2100-01-01T00:00:00Z, seconds since the Unix epoch.
pub const UNIX_2026_12_02: u64 = 1_796_169_600;
pub const UNIX_2100_01_01: u64 = 4_102_444_800;

/// The fixed origins (0 excluded).
pub const FIXED: [u64; 16] = [
    UNIX_2026_12_02 * 1_000_000_000,
    UNIX_2026_12_02 * 1_000_000,
    UNIX_2026_12_02 * 1_000,
    UNIX_2100_01_01 * 1_000_000_000,
    UNIX_2100_01_01 * 1_000_000,
    UNIX_2100_01_01 * 1_000,
    1 << 62,
    (1 << 63) + 1,
    // Runs that wrap past 2⁶⁴: at once, after a few ticks, and part way
    // through runs of every length the tests make.
    u64::MAX,
    u64::MAX - 1,
    u64::MAX - 999,
    u64::MAX - (1 << 20),
    u64::MAX - (1 << 32),
    u64::MAX - 1_000_000_000_000,
    u64::MAX - (1 << 50),
    u64::MAX - (1 << 56),
];

/// Two origins for one case: one of [`FIXED`] and a random one. With the
/// run at 0, each case runs three times; over a test's cases every fixed
/// origin is drawn many times.
pub fn origins() -> impl Strategy<Value = [u64; 2]> {
    (prop::sample::select(FIXED.to_vec()), any::<u64>()).prop_map(|(a, b)| [a, b])
}

/// The origins a case runs at: 0 first, then `drawn`.
pub fn with_zero(drawn: [u64; 2]) -> [u64; 3] {
    [0, drawn[0], drawn[1]]
}

/// `origin` rounded down to a multiple of `window`: the origin shifts a
/// window limiter's runs by (windows are aligned to multiples of `W` on
/// the caller's clock).
pub fn aligned(origin: u64, window: u64) -> u64 {
    origin - origin % window
}

/// [`aligned`] for a run of at most `run` ticks that must not cross the
/// wrap of the counter unless `window` divides 2⁶⁴ (where the window at
/// the wrap is short, so the answers there differ; `tests/windows.rs`
/// checks the bound that holds across it).
pub fn aligned_within(origin: u64, window: u64, run: u64) -> u64 {
    if window.is_power_of_two() {
        aligned(origin, window)
    } else {
        aligned(origin.min(u64::MAX - run), window)
    }
}

/// Runs `scenario` at origin 0 and at each of `drawn`, and requires every
/// shifted run to give the trace of the run at 0, which it returns.
pub fn same_at_every_origin<T: PartialEq + core::fmt::Debug>(
    drawn: [u64; 2],
    mut scenario: impl FnMut(u64) -> T,
) -> Result<T, TestCaseError> {
    let at_zero = scenario(0);
    for origin in drawn {
        let shifted = scenario(origin);
        prop_assert_eq!(
            &shifted,
            &at_zero,
            "the run at origin {} differs from the run at 0",
            origin
        );
    }
    Ok(at_zero)
}
