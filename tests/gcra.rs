//! Edge cases of the core, each named after the behaviour it pins down.
use core::time::Duration;

use cellrate::{
    duration_to_ticks, ticks_to_duration, Algorithm, Clock, Denied, Gcra, LeakyBucket, LocalGcra,
    ManualClock, Quota, QuotaError, Rate, RateLimiter, SetQuotaError, TokenBucket,
};

const KHZ: u64 = 1_000;

fn limited(result: Result<cellrate::Decision, Denied>) -> cellrate::Limited {
    match result {
        Err(Denied::Limited(l)) => l,
        other => panic!("expected a rate-limited denial, got {other:?}"),
    }
}

#[test]
fn a_new_client_starts_full() {
    for now in [0, 1, 12_345, u64::MAX / 4] {
        let g = Gcra::new(Quota::per_second(10).with_burst(4).at_hz(KHZ));
        let d = g.check(now).unwrap();
        assert_eq!((d.limit(), d.remaining()), (4, 3), "at {now}");
        let s = Gcra::new(Quota::per_second(10).with_burst(4).at_hz(KHZ)).peek(now);
        assert_eq!((s.remaining(), s.reset_after(), s.retry_after()), (4, 0, 0));
    }
}

#[test]
fn the_burst_is_admitted_at_once_then_the_rate() {
    let g = Gcra::new(Quota::per_second(10).with_burst(3).at_hz(KHZ));
    let admitted = (0..10).filter(|_| g.check(0).is_ok()).count();
    assert_eq!(admitted, 3);
    // Then one cell every 100 ms.
    assert!(g.check(99).is_err());
    assert!(g.check(100).is_ok());
    assert!(g.check(199).is_err());
    assert!(g.check(200).is_ok());
}

#[test]
fn retry_after_is_exact() {
    let g = Gcra::new(
        Quota::per_duration(3, Duration::from_secs(10))
            .with_burst(2)
            .at_hz(1_000_000),
    );
    g.check_n(0, 2).unwrap();
    let l = limited(g.check(5));
    // T = 10/3 s: the next cell conforms at 3 333 334 µs (rounded up to a tick).
    assert_eq!(l.retry_after(), 3_333_334 - 5);
    assert!(g.check(5 + l.retry_after() - 1).is_err());
    assert!(g.check(5 + l.retry_after()).is_ok());
}

#[test]
fn a_denied_check_stores_nothing() {
    let g = Gcra::new(Quota::per_second(1).at_hz(KHZ));
    g.check(0).unwrap();
    let before = g.peek(10);
    for _ in 0..100 {
        assert!(g.check(10).is_err());
    }
    assert_eq!(g.peek(10), before);
}

#[test]
fn a_clock_stepping_back_never_admits_more() {
    let g = Gcra::new(Quota::per_second(10).with_burst(5).at_hz(KHZ));
    let at_1000 = (0..5).filter(|_| g.check(1_000).is_ok()).count();
    assert_eq!(at_1000, 5);
    // Stepping back 900 ms does not refill anything.
    for back in [999, 500, 100, 0] {
        assert!(
            g.check(back).is_err(),
            "admitted at {back} after a full burst at 1000"
        );
    }
    // The limiter resumes from the latest time it has seen.
    assert!(g.check(1_099).is_err());
    assert!(g.check(1_100).is_ok());
}

#[test]
fn any_now_works_and_a_longer_gap_never_admits_more() {
    // 3 per 10 s on a 1 MHz clock has scale 3: the longest gap between two
    // checks is 2⁶²/3 ticks.
    let q = Quota::per_duration(3, Duration::from_secs(10)).at_hz(1_000_000);
    assert_eq!(q.horizon_ticks(), (1u64 << 62) / 3);
    let t = q.emission_interval_ticks(); // ⌈10⁷/3⌉ ticks
                                         // Any `now` is a time like 0: past the old horizon, at the top of the
                                         // range, and across the wrap of the counter.
    for start in [0, q.horizon_ticks() + 1, 1 << 63, u64::MAX - 1, u64::MAX] {
        let g = Gcra::new(q);
        assert_eq!(
            (0..5).filter(|_| g.check(start).is_ok()).count(),
            3,
            "at {start}"
        );
        assert!(g.check(start.wrapping_add(t - 1)).is_err(), "at {start}");
        assert!(g.check(start.wrapping_add(t)).is_ok(), "at {start}");
    }
    // Two checks further apart than the gap may find a full client owing;
    // at one instant it is never given more than the burst.
    for gap in [
        q.horizon_ticks() + 1,
        2 * q.horizon_ticks(),
        u64::MAX / 2,
        u64::MAX,
    ] {
        let g = Gcra::new(q);
        g.check_n(7, 3).unwrap();
        let later = 7u64.wrapping_add(gap);
        let admitted = (0..10).filter(|_| g.check(later).is_ok()).count() as u64;
        assert!(
            admitted <= q.burst(),
            "{admitted} admitted after a gap of {gap}"
        );
    }
}

#[test]
fn cost_zero_is_a_peek() {
    let g = Gcra::new(Quota::per_second(2).at_hz(KHZ));
    g.check_n(0, 2).unwrap();
    let peek = g.peek(10);
    let d = g.check_n(10, 0).expect("a cost of 0 is always answered");
    assert_eq!(
        (d.remaining(), d.reset_after()),
        (peek.remaining(), peek.reset_after())
    );
    assert_eq!(g.peek(10), peek);
    // Even after a backwards step that would deny any real cost.
    let g = Gcra::new(Quota::per_second(2).at_hz(KHZ));
    g.check_n(1_000, 2).unwrap();
    assert!(g.check_n(0, 0).is_ok());
    assert!(g.check(1_000).is_err());
}

#[test]
fn a_cost_above_the_burst_is_its_own_error() {
    let g = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(KHZ));
    assert_eq!(
        g.check_n(0, 11),
        Err(Denied::CostTooLarge {
            cost: 11,
            limit: 10
        })
    );
    assert_eq!(g.check_n(0, u64::MAX).unwrap_err().retry_after(), None);
    // And it consumed nothing.
    assert_eq!(g.peek(0).remaining(), 10);
    let local = LocalGcra::new(Quota::per_second(100).with_burst(10).at_hz(KHZ));
    assert_eq!(
        local.check_n(0, 11),
        Err(Denied::CostTooLarge {
            cost: 11,
            limit: 10
        })
    );
}

#[test]
fn remaining_and_reset_after_follow_the_state() {
    let g = Gcra::new(Quota::per_second(10).at_hz(KHZ));
    let d = g.check_n(0, 4).unwrap();
    assert_eq!((d.remaining(), d.reset_after()), (6, 400));
    let d = g.check_n(250, 1).unwrap();
    // 400 − 250 + 100 = 250 ms of debt: 7 cells of room left, rounded down.
    assert_eq!((d.remaining(), d.reset_after()), (7, 250));
    let l = limited(g.check_n(250, 8));
    assert_eq!(
        (l.remaining(), l.reset_after(), l.retry_after()),
        (7, 250, 50)
    );
}

#[test]
fn refund_gives_back_but_never_overfills() {
    let g = Gcra::new(Quota::per_second(10).at_hz(KHZ));
    g.check_n(0, 10).unwrap();
    assert_eq!(g.refund_n(0, 4).remaining(), 4);
    assert_eq!(g.refund_n(0, 1_000).remaining(), 10);
    assert!(g.check_n(0, 10).is_ok());
    // A full limiter stays as it is.
    let g = Gcra::new(Quota::per_second(10).at_hz(KHZ));
    assert_eq!(g.refund_n(500, 3).remaining(), 10);
    assert_eq!(g.check_n(500, 10).unwrap().remaining(), 0);
}

#[test]
fn reset_makes_it_new() {
    let g = Gcra::new(Quota::per_minute(1).at_hz(KHZ));
    g.check(0).unwrap();
    assert!(g.check(1).is_err());
    g.reset();
    assert!(g.check(1).is_ok());
}

#[test]
fn set_quota_keeps_debt_as_cells_used() {
    let g = Gcra::new(Quota::per_second(10).with_burst(10).at_hz(KHZ));
    g.check_n(0, 10).unwrap(); // 10 cells used
                               // A slower quota of burst 4: at most 4 of the 10 cells stay used.
    let q = g
        .set_quota(0, Quota::per_second(2).with_burst(4).at_hz(KHZ))
        .unwrap();
    assert_eq!(q.burst(), 4);
    assert_eq!(g.peek(0).remaining(), 0);
    assert_eq!(g.peek(0).reset_after(), 2_000);
    // Half a second later one cell is back (2 per second).
    assert_eq!(g.peek(500).remaining(), 1);
    // A quota at another frequency is re-expressed in this limiter's ticks.
    let q = g
        .set_quota(500, Quota::per_second(4).with_burst(4).at_hz(1_000_000))
        .unwrap();
    assert_eq!((q.hz(), q.emission_interval_ticks()), (KHZ, 250));
    assert!(q.is_exact());
    assert_eq!(g.peek(500).remaining(), 1);
}

#[test]
fn set_quota_rounds_toward_admitting_less_at_a_coarser_scale() {
    let g = Gcra::new(Quota::per_second(100).at_hz(KHZ)); // scale 1
                                                          // 3 per second needs a scale of 3: at scale 1, T rounds up to 334 ms.
    let q = g.set_quota(0, Quota::per_second(3).at_hz(KHZ)).unwrap();
    assert!(!q.is_exact());
    assert_eq!(q.emission_interval(), 334);
    assert_eq!(q.burst(), 3); // the burst is kept; only T is rounded
    let admitted = (0..=10_000u64)
        .step_by(1)
        .filter(|&t| g.check(t).is_ok())
        .count() as u64;
    // Over 10 s the ideal admits 3 + 30 = 33; never more.
    assert!(admitted <= 33, "{admitted}");
}

#[test]
fn set_quota_reports_a_bad_quota() {
    let g = Gcra::new(Quota::per_second(1).at_hz(1));
    // 1 cell per u64::MAX/2 seconds at 10¹⁸ ticks per second cannot fit 64 bits.
    let huge = Quota::per_duration(1, Duration::from_secs(u64::MAX / 2)).try_at_hz(1_000_000_000);
    assert!(huge.is_err());
    let slow = Quota::per_ticks(1, 1 << 40).at_hz(1);
    let fast_clock = Gcra::new(Quota::per_second(1).at_hz(1 << 40));
    assert_eq!(
        fast_clock.set_quota(0, slow),
        Err(SetQuotaError::Quota(QuotaError::Overflow))
    );
    assert!(g.set_quota(0, slow).is_ok());
}

#[test]
fn reserve_shapes_a_burst_into_the_rate() {
    // The leaky bucket as a queue: 20 requests at once leave one per 100 ms.
    let shaper = LeakyBucket::new(
        Quota::builder(Rate::per_second(10))
            .with_burst(1)
            .at_hz(KHZ),
    );
    let departures: Vec<u64> = (0..20)
        .map(|_| shaper.reserve_n(0, 1, 10_000).unwrap().send_after())
        .collect();
    let expected: Vec<u64> = (0..20).map(|i| i * 100).collect();
    assert_eq!(departures, expected);
    // A reservation that would wait longer than allowed is refused, and stores nothing.
    let before = shaper.peek(0);
    let l = match shaper.reserve_n(0, 1, 1_000) {
        Err(Denied::Limited(l)) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(shaper.peek(0), before);
    // 2 000 ms of queue ahead: it fits a 1 000 ms limit after 1 000 ms.
    assert_eq!(l.retry_after(), 1_000);
    assert!(shaper.reserve_n(1_000, 1, 1_000).is_ok());
}

#[test]
fn reserve_sends_on_whole_ticks() {
    // T = 10/3 ticks with no burst: departures are rounded up to whole ticks
    // and the state follows the rounded departures, as a policer would see them.
    let q = Quota::per_ticks(3, 10).with_burst(1).at_hz(KHZ);
    let shaper = Gcra::new(q);
    let departures: Vec<u64> = (0..6)
        .map(|_| shaper.reserve_n(0, 1, 1_000).unwrap().send_after())
        .collect();
    assert_eq!(departures, [0, 4, 8, 12, 16, 20]);
    let policer = Gcra::new(q);
    assert!(departures.iter().all(|&t| policer.check(t).is_ok()));
    // Sending the third at 7 (⌈2·10/3⌉) instead would be policed: the rounding
    // of the second departure is not recoverable without a burst.
    let policer = Gcra::new(q);
    assert!(policer.check(0).is_ok() && policer.check(4).is_ok());
    assert!(policer.check(7).is_err());
    // With a burst of 2 the tolerance absorbs the rounding.
    let shaper = Gcra::new(Quota::per_ticks(3, 10).with_burst(2).at_hz(KHZ));
    let departures: Vec<u64> = (0..6)
        .map(|_| shaper.reserve_n(0, 1, 1_000).unwrap().send_after())
        .collect();
    assert_eq!(departures, [0, 0, 4, 7, 10, 14]);
}

#[test]
fn token_and_leaky_buckets_are_gcra() {
    // A token bucket of capacity 20 refilled at 5/s.
    let bucket = TokenBucket::new(
        Quota::builder(Rate::per_second(5))
            .with_burst(20)
            .at_hz(KHZ),
    );
    assert_eq!(
        bucket.quota(),
        Quota::per_second(5).with_burst(20).at_hz(KHZ)
    );
    assert!((0..20).all(|_| bucket.check(0).is_ok()));
    assert!(bucket.check(0).is_err());
    // A leaky bucket meter: no burst at all.
    let meter = LeakyBucket::new(Quota::builder(Rate::per_second(5)).with_burst(1).at_hz(KHZ));
    assert_eq!(meter.quota().burst(), 1);
    assert_eq!(meter.quota().tolerance(), 0);
    // Without `with_burst(1)` the builder's burst is the rate's cells.
    assert_eq!(Quota::builder(Rate::per_second(5)).at_hz(KHZ).burst(), 5);
    let zero_capacity = Quota::builder(Rate::per_second(5))
        .with_burst(0)
        .try_at_hz(KHZ);
    assert!(zero_capacity.map(TokenBucket::new).is_err());
    assert_eq!(
        Quota::builder(Rate::per_second(0))
            .with_burst(1)
            .try_at_hz(KHZ)
            .map(LeakyBucket::new)
            .err(),
        Some(QuotaError::ZeroRate)
    );
}

#[test]
fn quotas_are_exact_where_the_issue_says() {
    // 3 per 10 s on 1 MHz.
    let q = Quota::per_duration(3, Duration::from_secs(10)).at_hz(1_000_000);
    assert!(q.is_exact());
    assert_eq!((q.scale(), q.emission_interval()), (3, 10_000_000));
    // 100/s on a 32 768 Hz RTC.
    let q = Quota::per_second(100).at_hz(32_768);
    assert!(q.is_exact());
    assert_eq!((q.scale(), q.emission_interval()), (25, 8_192));
    // 1.25·10⁹ bytes/s on a 3 GHz counter.
    let q = Quota::per_second(1_250_000_000).at_hz(3_000_000_000);
    assert!(q.is_exact());
    assert_eq!((q.scale(), q.emission_interval()), (5, 12));
    // 1 per day at 1 GHz and 10⁹ per second at 1 kHz.
    assert!(Quota::per_day(1).at_hz(1_000_000_000).is_exact());
    assert!(Quota::per_second(1_000_000_000).at_hz(KHZ).is_exact());
}

#[test]
fn quota_errors_say_what_is_wrong() {
    assert_eq!(
        Quota::per_second(0).try_at_hz(KHZ),
        Err(QuotaError::ZeroRate)
    );
    assert_eq!(
        Quota::per_duration(1, Duration::ZERO).try_at_hz(KHZ),
        Err(QuotaError::ZeroPeriod)
    );
    assert_eq!(
        Quota::per_ticks(1, 0).try_at_hz(KHZ),
        Err(QuotaError::ZeroPeriod)
    );
    assert_eq!(
        Quota::per_second(1).with_burst(0).try_at_hz(KHZ),
        Err(QuotaError::ZeroBurst)
    );
    assert_eq!(Quota::per_second(1).try_at_hz(0), Err(QuotaError::ZeroHz));
    assert_eq!(
        Quota::per_second(1).with_burst(u64::MAX).try_at_hz(KHZ),
        Err(QuotaError::Overflow)
    );
    assert_eq!(
        Quota::per_second(999_999_937).try_at_hz(1_000_000_000),
        Err(QuotaError::Unrepresentable)
    );
    let message = QuotaError::ZeroBurst.to_string();
    assert!(message.contains("burst"), "{message}");
}

#[test]
fn algorithm_steps_match_the_shared_limiter() {
    let q = Quota::per_second(5).with_burst(2).at_hz(KHZ);
    let g = Gcra::new(q);
    let mut state = Quota::NEW;
    for now in [0, 0, 0, 150, 199, 200, 600, 600, 601] {
        let stepped = q.check(state, now, 1).map(|(s, d)| {
            state = s;
            d
        });
        assert_eq!(stepped, g.check(now), "at {now}");
    }
    assert!(!q.is_idle(state, 600));
    assert!(q.is_idle(state, 1_000));
}

#[test]
fn manual_clock_and_conversions() {
    let clock = ManualClock::new(7);
    assert_eq!(clock.advance(3), 10);
    assert_eq!(clock.advance(u64::MAX), 9); // wraps, as a counter does
    clock.set(5);
    assert_eq!(clock.now(), 5);
    assert_eq!(ticks_to_duration(1_500, KHZ), Duration::from_millis(1_500));
    assert_eq!(ticks_to_duration(1, 0), Duration::MAX);
    assert_eq!(
        ticks_to_duration(u64::MAX, 1),
        Duration::from_secs(u64::MAX)
    );
    assert_eq!(duration_to_ticks(Duration::from_nanos(1), KHZ), 1);
    assert_eq!(duration_to_ticks(Duration::from_micros(1_500), KHZ), 2);
    assert_eq!(duration_to_ticks(Duration::from_secs(3), 0), 0);
    // Exact round trips where the durations are whole nanoseconds
    // (multiples of 512 ticks at 32 768 Hz, anything at 1 MHz)…
    for ticks in [0u64, 512, 32_768, 1 << 40] {
        assert_eq!(
            duration_to_ticks(ticks_to_duration(ticks, 32_768), 32_768),
            ticks
        );
        assert_eq!(
            duration_to_ticks(ticks_to_duration(ticks + 1, 1_000_000), 1_000_000),
            ticks + 1
        );
    }
    // …and never shorter otherwise (both directions round up).
    for ticks in [1u64, 3, 32_767, 99_999] {
        let back = duration_to_ticks(ticks_to_duration(ticks, 32_768), 32_768);
        assert!(back == ticks || back == ticks + 1, "{ticks} → {back}");
    }
}

#[test]
fn limiters_work_through_the_trait_and_references() {
    fn drain(l: &impl RateLimiter, now: u64) -> usize {
        (0..100).take_while(|_| l.check(now).is_ok()).count()
    }
    let q = Quota::per_second(3).at_hz(KHZ);
    assert_eq!(drain(&Gcra::new(q), 0), 3);
    assert_eq!(drain(&LocalGcra::new(q), 0), 3);
    let shared = Gcra::new(q);
    assert_eq!(drain(&&shared, 0), 3);
}

#[cfg(feature = "std")]
#[test]
fn std_clock_is_monotonic_nanoseconds() {
    let clock = cellrate::StdClock::new();
    let a = clock.now();
    std::thread::sleep(Duration::from_millis(2));
    let b = clock.now();
    assert!(b >= a + 2_000_000, "{a} → {b}");
}

#[test]
fn concurrent_checks_never_over_admit() {
    // Real threads on a frozen clock: exactly the burst is admitted in total.
    let g = std::sync::Arc::new(Gcra::new(
        Quota::per_second(1).with_burst(10_000).at_hz(KHZ),
    ));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let g = g.clone();
            std::thread::spawn(move || (0..5_000).filter(|_| g.check(42).is_ok()).count())
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(admitted, 10_000);
}

#[test]
fn rounded_quotas_keep_the_burst_asked_for() {
    const GHZ: u64 = 1_000_000_000;
    // 19 per second is not exact on a nanosecond clock within the horizon.
    let q = Quota::per_second(19).with_burst(2).at_hz(GHZ);
    assert!(!q.is_exact());
    assert_eq!(q.burst(), 2);
    let g = Gcra::new(q);
    assert_eq!(g.check_n(5, 2).map(|d| d.remaining()), Ok(0));
    assert!(matches!(g.check_n(5, 2), Err(Denied::Limited(_))));
    assert_eq!(Quota::per_second(19).at_hz(GHZ).burst(), 19);
    let q = Quota::per_second(505_025_997).with_burst(111).at_hz(GHZ);
    assert_eq!(q.burst(), 111);
    assert!(Gcra::new(q).check_n(0, 111).is_ok());
    // Only T is rounded, up: the span is the burst times the rounded T.
    assert_eq!(q.span(), 111 * q.emission_interval());
}

#[test]
fn set_quota_keeps_the_burst_or_refuses_a_lossy_rounding() {
    // 2 per 511 ticks at 61.76 MHz is 8.27 µs a cell: on a 10 Hz limiter
    // (scale 1) it cannot be expressed within 1 %, so it is refused rather
    // than taken 121× slower.
    let g = Gcra::new(Quota::per_second(1).at_hz(10));
    let q = Quota::per_ticks(2, 511).with_burst(28).at_hz(61_760_000);
    assert_eq!(
        g.set_quota(0, q),
        Err(SetQuotaError::Quota(QuotaError::Unrepresentable))
    );
    // A rounding within 1 % keeps the burst.
    let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
    let q = g
        .set_quota(0, Quota::per_second(7).with_burst(9).at_hz(1_000_000))
        .unwrap();
    assert!(!q.is_exact());
    assert_eq!((q.burst(), q.emission_interval()), (9, 143));
    assert!(g.check_n(0, 9).is_ok());
    // A single-owner limiter takes the quota at the scale it needs on its
    // own clock, exactly.
    let mut local = LocalGcra::new(Quota::per_second(1).at_hz(10));
    let q = local
        .set_quota(0, Quota::per_ticks(2, 511).with_burst(28).at_hz(61_760_000))
        .unwrap();
    assert!(q.is_exact());
    assert_eq!((q.hz(), q.burst(), q.scale()), (10, 28, 12_352_000));
}

#[test]
fn a_burst_of_two_to_the_61_is_kept_whole() {
    // The largest span a quota accepts (MAX_SPAN = 2⁶¹ sub-ticks), all burst.
    let q = Quota::per_ticks(1 << 61, 1 << 61).at_hz(1_000);
    assert_eq!(q.burst(), 1 << 61);
    assert_eq!(q.span(), cellrate::MAX_SPAN);
    let g = Gcra::new(q);
    assert_eq!(g.check(0).map(|d| d.limit()), Ok(1 << 61));
    // A whole burst again one gap (2⁶² ticks) later.
    assert_eq!(g.check_n(1 << 62, 1 << 61).map(|d| d.remaining()), Ok(0));
    let local = LocalGcra::new(q);
    assert_eq!(local.check(0).map(|d| d.limit()), Ok(1 << 61));
    // Through runtime reconfiguration too (the stored word keeps the flag apart).
    let g = Gcra::new(Quota::per_second(1).at_hz(1_000));
    g.set_quota(0, q).unwrap();
    assert_eq!(g.check(0).map(|d| d.limit()), Ok(1 << 61));
    // One more cell of span is refused.
    assert_eq!(
        Quota::per_ticks(1, 1)
            .with_burst((1 << 61) + 1)
            .try_at_hz(1_000),
        Err(QuotaError::Overflow)
    );
}

#[test]
fn quota_construction_never_overflows() {
    // interval + tolerance used to overflow 128 bits: a wrong "exact" quota in
    // release builds, a panic in debug builds.
    let q = Quota::per_duration(1, Duration::from_secs((1 << 63) + (1 << 31)))
        .with_burst(u64::MAX - (1 << 32) + 2)
        .try_at_hz(2);
    assert_eq!(q, Err(QuotaError::Overflow));
    let q = Quota::per_hour(2)
        .with_burst(10_248_191_152_060_863)
        .try_at_hz(u64::MAX);
    assert!(matches!(
        q,
        Err(QuotaError::Overflow | QuotaError::Unrepresentable)
    ));
    for burst in [1, 2, 1 << 32, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        for hz in [1, 1_000, 1 << 34, (1 << 34) + 1, u64::MAX] {
            for rate in [
                Quota::per_second(1),
                Quota::per_day(u64::MAX),
                Quota::per_ticks(u64::MAX, 1),
                Quota::per_ticks(1, u64::MAX),
                Quota::per_duration(3, Duration::MAX),
            ] {
                if let Ok(q) = rate.with_burst(burst).try_at_hz(hz) {
                    assert_eq!(q.burst(), burst);
                    assert_eq!(q.span() / q.emission_interval(), burst);
                }
            }
        }
    }
}

#[test]
fn the_horizon_is_guaranteed_below_two_to_the_34_hz() {
    // Below 2³⁴ Hz every quota keeps at least 2²⁸ s of ticks between checks.
    for hz in [
        1_000,
        32_768,
        1_000_000,
        1_000_000_000,
        3_000_000_000,
        (1 << 34) - 1,
    ] {
        for q in [
            Quota::per_second(1).try_at_hz(hz),
            Quota::per_second(999_983).try_at_hz(hz),
            Quota::per_minute(7).try_at_hz(hz),
        ]
        .into_iter()
        .flatten()
        {
            assert!(
                q.horizon_ticks() as u128 >= (cellrate::HORIZON_SECS as u128) * hz as u128,
                "{hz} Hz"
            );
        }
    }
    // Beyond it only scale 1 fits, and the documented gap is 2⁶² ticks.
    let q = Quota::per_second(7).at_hz(1_000_000_000_000);
    assert_eq!(q.horizon_ticks(), 1 << 62);
    assert_eq!(q.horizon_ticks() / 1_000_000_000_000 / 86_400, 53); // 53.4 days
}

/// A limiter fed Unix-epoch time (nanoseconds on a 1 GHz clock,
/// microseconds on a 1 MHz one), with quotas whose scale pushes
/// `now · scale` far past `2⁶⁴`: in `Gcra`, `LocalGcra` and a keyed table,
/// each gives a full burst at once and then one cell per emission
/// interval, exactly as from tick 0.
#[test]
fn unix_time_is_a_clock() {
    use cellrate::keyed::{Keyed, Seed, WhenFull};
    const NS: u64 = 1_000_000_000;
    // 2026-12-02 in ns and µs since the Unix epoch.
    let unix_ns = 1_796_169_600 * NS;
    let cases = [
        (Quota::per_second(7), NS, unix_ns),
        (Quota::per_second(11), NS, unix_ns),
        (Quota::per_second(13), NS, unix_ns),
        (Quota::per_second(997), NS, unix_ns),
        (Quota::per_second(35_162), NS, unix_ns),
        (Quota::per_minute(35_162), 1_000_000, unix_ns / 1_000),
    ];
    for (builder, hz, now) in cases {
        for burst in [1, 5] {
            let q = builder.with_burst(burst).at_hz(hz);
            assert!(q.scale() > 1, "{q:?}");
            let t = q.emission_interval_ticks();
            let g = Gcra::new(q);
            let local = LocalGcra::new(q);
            let keyed: Keyed<Quota, 4> = Keyed::new(q, WhenFull::Deny, Seed::new(1, 2));
            let mut answers = Vec::new();
            for now in [now, now, now, now, now, now, now + t, now + 1_000 * t] {
                answers.push((
                    g.check(now).map(|d| d.remaining()).ok(),
                    local.check(now).map(|d| d.remaining()).ok(),
                    keyed.check(&1u32, now).map(|d| d.remaining()).ok(),
                ));
            }
            // The same traffic from tick 0.
            let zero = Gcra::new(q);
            let from_zero: Vec<_> = [0, 0, 0, 0, 0, 0, t, 1_000 * t]
                .iter()
                .map(|&t0| zero.check(t0).map(|d| d.remaining()).ok())
                .collect();
            for (i, (a, b, c)) in answers.iter().enumerate() {
                assert_eq!(
                    (a, b, c),
                    (&from_zero[i], &from_zero[i], &from_zero[i]),
                    "{q:?} check {i}"
                );
            }
            assert_eq!(
                answers.iter().filter(|a| a.0.is_some()).count() as u64,
                burst + 2
            );
            // The wait the first denial reports is the emission interval's
            // rest, never a saturated number.
            let fresh = Gcra::new(q);
            fresh.check_n(now, burst).unwrap();
            assert!(fresh.check(now).unwrap_err().retry_after().unwrap() <= t);
        }
    }
}

/// `Algorithm::translate` at another scale: the debt is kept as cells used
/// (at most the new burst), re-expressed in the new sub-ticks (rounded up),
/// and an idle word stays full.
#[test]
fn translate_keeps_the_cells_used_across_scales() {
    use cellrate::Limiter;
    let old = Quota::per_second(1).at_hz(1_000);
    let new = Quota::per_second(3).with_burst(1).at_hz(1_000);
    assert_ne!(old.scale(), new.scale());
    let mut l = Limiter::with_quota(old);
    l.check_n(7, 1).unwrap(); // one cell of one used
    assert_eq!(l.set_quota(7, new), new);
    // That cell comes back after T′ = 333⅓ ticks, at 340⅓: not a tick before.
    assert_eq!(l.check(340).unwrap_err().retry_after(), Some(1));
    assert!(l.check(341).is_ok());
    // An idle limiter is full under the new quota.
    let mut idle = Limiter::with_quota(old);
    idle.set_quota(5_000, new);
    assert_eq!(idle.peek(5_000).remaining(), 1);
}
