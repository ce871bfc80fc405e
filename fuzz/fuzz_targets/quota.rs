//! Quota construction over any rate, period, burst and frequency: never a
//! panic (overflow checks are on), and every quota built keeps the crate's
//! invariants: the burst asked for, `span = burst · T ≤ 2⁶¹`, a rate never
//! faster than asked and at most 1 % slower, and a longest gap between
//! checks of `2⁶² / scale` ticks, at least 2²⁸ s below 2³⁴ Hz. A full burst
//! is admitted at once from any `now`.
#![no_main]

use arbitrary::Arbitrary;
use cellrate::{Gcra, Quota, HORIZON_SECS, MAX_SPAN};
use core::time::Duration;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Period {
    Nanos(u64, u32),
    Ticks(u64),
}

#[derive(Arbitrary, Debug)]
struct Input {
    cells: u64,
    period: Period,
    burst: Option<u64>,
    hz: u64,
    /// A second quota set on the first at run time.
    other: Option<(u64, u64, u64, u64)>,
    /// When the first check happens: any tick at all.
    now: u64,
}

fuzz_target!(|input: Input| {
    let builder = match input.period {
        Period::Nanos(secs, nanos) => {
            Quota::per_duration(input.cells, Duration::new(secs, nanos % 1_000_000_000))
        }
        Period::Ticks(t) => Quota::per_ticks(input.cells, t),
    };
    let builder = match input.burst {
        Some(b) => builder.with_burst(b),
        None => builder,
    };
    let asked_burst = input.burst.unwrap_or(input.cells);
    // Every refusal is an error value (never a panic); which one is checked
    // by the unit tests.
    let Ok(quota) = builder.try_at_hz(input.hz) else {
        return;
    };
    assert_eq!(quota.burst(), asked_burst);
    assert!(quota.emission_interval() >= 1 && quota.scale() >= 1);
    assert_eq!(
        quota.span() as u128,
        quota.burst() as u128 * quota.emission_interval() as u128
    );
    assert!(quota.span() <= MAX_SPAN);
    assert_eq!(quota.horizon_ticks(), (1 << 62) / quota.scale());
    if input.hz < 1 << 34 {
        assert!(quota.horizon_ticks() as u128 >= HORIZON_SECS as u128 * input.hz as u128);
    }
    // A quota is usable at any `now`: a full burst is admitted at once, and
    // not one cell more.
    let g = Gcra::new(quota);
    assert!(g.check_n(input.now, quota.burst()).is_ok());
    assert!(g.check(input.now).is_err());
    if let Some((cells, ticks, burst, hz)) = input.other {
        if let Ok(other) = Quota::per_ticks(cells, ticks).with_burst(burst).try_at_hz(hz) {
            if let Ok(set) = g.set_quota(input.now, other) {
                let _ = g.check(input.now);
                assert_eq!(set.burst(), other.burst());
                assert_eq!((set.scale(), set.hz()), (quota.scale(), quota.hz()));
                // T′ in set's sub-ticks ≥ other's T, converted exactly.
                let lhs = set.emission_interval() as u128 * other.scale() as u128 * other.hz() as u128;
                let rhs = other.emission_interval() as u128 * set.scale() as u128 * set.hz() as u128;
                assert!(lhs >= rhs);
                assert!((lhs - rhs) * 100 <= lhs);
            }
        }
    }
});
