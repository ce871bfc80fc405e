//! Bad input never panics, never corrupts and never over-admits: any `u64`
//! state word fed to any `Algorithm`, quotas at the edges of their ranges,
//! and the same wait reported for the same situation by every type.
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::window::{FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Algorithm, Denied, Gcra, LocalGcra, Quota, RateLimiter};
use proptest::prelude::*;

/// Cells admitted from `state` by checks of `cost` at one `now`, at most
/// `tries` of them; each decision must stay within `limit`.
fn admitted_at_once<A: Algorithm>(
    algorithm: &A,
    mut state: u64,
    now: u64,
    cost: u64,
    limit: u64,
    tries: u64,
) -> Result<u64, TestCaseError> {
    let _ = algorithm.is_idle(state, now);
    let mut total = 0u64;
    for _ in 0..tries {
        let peek = algorithm.peek(state, now);
        prop_assert!(peek.remaining() <= limit);
        match algorithm.check(state, now, cost) {
            Ok((next, d)) => {
                prop_assert!(d.remaining() <= limit);
                if cost == 0 {
                    prop_assert_eq!(next, state);
                    break;
                }
                total += cost;
                state = next;
            }
            Err(Denied::CostTooLarge { .. }) => {
                prop_assert!(cost > limit);
                break;
            }
            Err(Denied::Limited(l)) => {
                prop_assert!(l.remaining() <= limit);
                break;
            }
        }
    }
    Ok(total)
}

/// A window word tagged for `now`'s own window with arbitrary count bits
/// (the low `64 − tag_bits`), which may exceed the limit: the case a word
/// saved under another limit reaches.
fn in_window_of(now: u64, window: u64, tag_bits: u32, counts: u64) -> u64 {
    let count_bits = 64 - tag_bits;
    let tag = (now / window) & (u64::MAX >> count_bits);
    (tag << count_bits) | (counts & ((1 << count_bits) - 1))
}

fn any_now() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..=1_000_000, any::<u64>(), Just(u64::MAX)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Fixed windows: any state word, any time: at most `limit` cells at once.
    #[test]
    fn fixed_window_is_total_over_any_state(
        limit in prop_oneof![1u64..=20, 1u64..=FixedWindowQuota::MAX_LIMIT],
        window in 1u64..=1_000_000,
        state in any::<u64>(),
        same_window in any::<bool>(),
        now in any_now(),
        cost in 0u64..=24,
    ) {
        let q = FixedWindowQuota::new(limit, window);
        let state = if same_window { in_window_of(now, window, q.tag_bits(), state) } else { state };
        let total = admitted_at_once(&q, state, now, cost, limit, 30)?;
        prop_assert!(total <= limit, "{} admitted against a limit of {}", total, limit);
    }

    /// Sliding windows: the same.
    #[test]
    fn sliding_window_is_total_over_any_state(
        limit in prop_oneof![1u64..=20, 1u64..=SlidingWindowQuota::MAX_LIMIT],
        window in 1u64..=1_000_000,
        state in any::<u64>(),
        same_window in any::<bool>(),
        now in any_now(),
        cost in 0u64..=24,
    ) {
        let Ok(q) = SlidingWindowQuota::try_new(limit, window) else { return Ok(()) };
        let state = if same_window { in_window_of(now, window, q.tag_bits(), state) } else { state };
        let total = admitted_at_once(&q, state, now, cost, limit, 30)?;
        prop_assert!(total <= limit, "{} admitted against a limit of {}", total, limit);
    }

    /// GCRA: any TAT, any time: at most `burst` cells at once.
    #[test]
    fn gcra_is_total_over_any_state(
        cells in 1u64..=1_000,
        burst in 1u64..=20,
        hz in prop_oneof![Just(1_000u64), Just(1_000_000_000), 1u64..=u64::MAX],
        state in any::<u64>(),
        now in any_now(),
        cost in 0u64..=24,
    ) {
        let Ok(q) = Quota::per_second(cells).with_burst(burst).try_at_hz(hz) else { return Ok(()) };
        let total = admitted_at_once(&q, state, now, cost, burst, 30)?;
        prop_assert!(total <= burst, "{} admitted against a burst of {}", total, burst);
    }
}

#[test]
fn a_foreign_window_word_is_judged_full_not_over_admitted() {
    // 0xa is a count of 10 under tag 0 for a limit of 9 (4 count bits): a
    // word saved under another limit without `translate`.
    let q = FixedWindowQuota::new(9, 1);
    assert!(matches!(q.check(0xa, 0, 4), Err(Denied::Limited(_))));
    assert_eq!(q.peek(0xa, 0).remaining(), 0);
    // The next window starts afresh.
    assert_eq!(q.check(0xa, 1, 4).map(|(_, d)| d.remaining()), Ok(5));
    let s = SlidingWindowQuota::new(9, 10);
    let foreign = (15 << 4) | 15; // previous 15, current 15, limit 9
    assert!(matches!(s.check(foreign, 0, 1), Err(Denied::Limited(_))));
    assert_eq!(s.peek(foreign, 0).remaining(), 0);
}

#[test]
fn every_type_reports_the_same_wait_far_ahead() {
    // 1 a day with a burst of 20 000 on a nanosecond Unix clock: a span of
    // 1.7·10¹⁸ ns (55 years), near the largest a quota accepts (2⁶¹
    // sub-ticks); the waits used to saturate for all but `Gcra`.
    let q = Quota::per_day(1).with_burst(20_000).at_hz(1_000_000_000);
    assert!(q.is_exact());
    let now = 1_750_000_000_000_000_000u64;
    let span_ticks = q.span() / q.scale(); // 1.728·10¹⁸ ns
    let shared = Gcra::new(q);
    let local = LocalGcra::new(q);
    let keyed: Keyed<Quota, 4> = Keyed::new(q, WhenFull::Deny, Seed::new(1, 2));
    let mut word = Quota::NEW;
    assert!(shared.check_n(now, 20_000).is_ok());
    assert!(local.check_n(now, 20_000).is_ok());
    assert!(keyed.check_n(&7u32, now, 20_000).is_ok());
    word = q.check(word, now, 20_000).unwrap().0;
    let waits = [
        shared.check_n(now, 20_000).unwrap_err().retry_after(),
        local.check_n(now, 20_000).unwrap_err().retry_after(),
        keyed.check_n(&7u32, now, 20_000).unwrap_err().retry_after(),
        q.check(word, now, 20_000).unwrap_err().retry_after(),
    ];
    assert_eq!(waits, [Some(span_ticks); 4]);
    // A peek from a clock that stepped back: the wait for one cell is the
    // debt less the tolerance (TAT − back + T − span, TAT = now + span),
    // never a saturated number.
    assert_eq!(q.scale(), 1);
    let back = now - 1_000_000_000_000_000_000;
    let want = now - back + q.emission_interval_ticks();
    assert_eq!(shared.peek(back).retry_after(), want);
    assert_eq!(local.peek(back).retry_after(), want);
    assert_eq!(keyed.peek(&7u32, back).retry_after(), want);
    assert_eq!(q.peek(word, back).retry_after(), want);
    // And a shaper refuses with the same exact wait.
    assert!(shared.reserve_n(now, 20_000, 0).is_err());
}
