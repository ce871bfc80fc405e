//! `FixedGcra` against `Gcra` with the same quota: over random histories
//! of every operation (`check`, `check_n`, `peek`, `reserve_n`,
//! `refund_n`, `reset`) at random `now`s (forward, back, far ahead, across
//! the wrap of the clock) and random costs, both give the same answer to
//! every call and hold the same state word after it.
//!
//! `Gcra` is the reference here: `tests/gcra_model.rs` holds it to an
//! ideal GCRA in exact rational arithmetic, so this test carries that
//! model over to `FixedGcra`.
use core::time::Duration;

use cellrate::{FixedGcra, Gcra, Quota, RateLimiter};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{origins, with_zero};

/// One operation of a history.
#[derive(Clone, Debug)]
enum Op {
    Check,
    CheckN(u64),
    /// `check` through the `RateLimiter` trait (the path generic code takes).
    TraitCheck,
    Peek,
    Reserve {
        cost: u64,
        max_wait: u64,
    },
    Refund(u64),
    Reset,
}

/// The time step before an operation, in 64ths of `T` (negative: the
/// clock steps back), plus raw ticks.
#[derive(Clone, Debug)]
struct Step {
    frac: i64,
    jitter: u64,
    op: Op,
}

fn quota() -> impl Strategy<Value = Quota> {
    let hz = prop_oneof![
        Just(1_000u64),
        Just(32_768),
        Just(1_000_000),
        Just(1_000_000_000),
        1_000u64..=3_000_000_000,
    ];
    let period_ns = prop_oneof![
        Just(1_000_000_000u64),
        Just(60_000_000_000),
        (1u64..=100_000).prop_map(|ms| ms * 1_000_000),
    ];
    let cells = prop_oneof![1u64..=10, 1u64..=1_000_000, 1u64..=1_000_000_000];
    let burst = prop_oneof![1u64..=10, 1u64..=1_000_000];
    (hz, period_ns, cells, burst).prop_filter_map("quota out of range", |(hz, p, cells, b)| {
        Quota::per_duration(cells, Duration::from_nanos(p))
            .with_burst(b)
            .try_at_hz(hz)
            .ok()
    })
}

fn op(burst: u64) -> impl Strategy<Value = Op> {
    let cost = prop_oneof![
        4 => Just(1u64),
        3 => 0u64..=burst.min(8),
        1 => Just(0u64),
        1 => 0u64..=burst.saturating_add(2),
        1 => Just(u64::MAX),
    ];
    let max_wait = prop_oneof![Just(0u64), 0u64..=1_000_000_000, Just(u64::MAX)];
    prop_oneof![
        6 => Just(Op::Check),
        4 => cost.clone().prop_map(Op::CheckN),
        1 => Just(Op::TraitCheck),
        1 => Just(Op::Peek),
        2 => (cost.clone(), max_wait).prop_map(|(cost, max_wait)| Op::Reserve { cost, max_wait }),
        1 => cost.prop_map(Op::Refund),
        1 => Just(Op::Reset),
    ]
}

fn history() -> impl Strategy<Value = (Quota, u64, Vec<Step>, [u64; 2])> {
    quota().prop_flat_map(|q| {
        let step = (
            prop_oneof![8 => 0i64..=192, 1 => -128i64..0, 1 => Just(i64::MAX)],
            0u64..=3,
            op(q.burst()),
        )
            .prop_map(|(frac, jitter, op)| Step { frac, jitter, op });
        (
            Just(q),
            0u64..=1_000_000_000_000,
            prop::collection::vec(step, 1..120),
            origins(),
        )
    })
}

/// The next `now`: `frac/64` of `T` on from `now` (or back), plus
/// `jitter`; `i64::MAX` jumps a quarter of the clock's range ahead (far
/// beyond the longest gap the answers are exact for: both must still
/// agree).
fn advance(quota: &Quota, now: u64, step: &Step) -> u64 {
    if step.frac == i64::MAX {
        return now.wrapping_add(1 << 62);
    }
    let t = quota.emission_interval() as u128 * step.frac.unsigned_abs() as u128
        / (64 * quota.scale() as u128);
    let delta = (t.min(1 << 40) as u64).wrapping_add(step.jitter);
    if step.frac < 0 {
        now.wrapping_sub(delta)
    } else {
        now.wrapping_add(delta)
    }
}

/// The state word, as each limiter's `Debug` prints it.
fn state(debug: String) -> String {
    debug
        .split_once(" {")
        .map(|(_, rest)| rest.to_owned())
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn answers_exactly_as_gcra((quota, start, steps, drawn) in history()) {
        for origin in with_zero(drawn) {
            let (fixed, shared) = (FixedGcra::new(quota), Gcra::new(quota));
            prop_assert_eq!(fixed.quota(), shared.quota());
            let mut now = origin.wrapping_add(start);
            for step in &steps {
                now = advance(&quota, now, step);
                match step.op {
                    Op::Check => prop_assert_eq!(fixed.check(now), shared.check(now), "check at {}", now),
                    Op::CheckN(cost) => prop_assert_eq!(fixed.check_n(now, cost), shared.check_n(now, cost), "check_n({}) at {}", cost, now),
                    Op::TraitCheck => prop_assert_eq!(
                        RateLimiter::check(&fixed, now),
                        RateLimiter::check(&shared, now),
                        "RateLimiter::check at {}", now
                    ),
                    Op::Peek => prop_assert_eq!(fixed.peek(now), shared.peek(now), "peek at {}", now),
                    Op::Reserve { cost, max_wait } => prop_assert_eq!(
                        fixed.reserve_n(now, cost, max_wait),
                        shared.reserve_n(now, cost, max_wait),
                        "reserve_n({}, {}) at {}", cost, max_wait, now
                    ),
                    Op::Refund(cost) => prop_assert_eq!(fixed.refund_n(now, cost), shared.refund_n(now, cost), "refund_n({}) at {}", cost, now),
                    Op::Reset => {
                        fixed.reset();
                        shared.reset();
                    }
                }
                prop_assert_eq!(state(format!("{fixed:?}")), state(format!("{shared:?}")), "after {:?} at {}", step.op, now);
            }
        }
    }
}

/// The limiter in a `static`, as firmware keeps it.
#[test]
fn lives_in_a_static() {
    static LIMITER: FixedGcra =
        FixedGcra::new(Quota::per_second(100).with_burst(20).at_hz(1_000_000));
    assert!((0..20).all(|_| LIMITER.check(0).is_ok()));
    assert_eq!(LIMITER.check(0).unwrap_err().retry_after(), Some(10_000));
    assert!(LIMITER.check(10_000).is_ok());
}
