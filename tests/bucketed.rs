//! The bucketed sliding windows (one word and one `u64` per bucket) against
//! a reference written for clarity: the list of admitted cells with their
//! times, and the rule "the cells of the `N` buckets ending with `now`'s,
//! plus the cost, at most the limit", re-counted from scratch at every step.
//! `retry_after` and `reset_after` are checked by brute force (the reference
//! asked tick by tick), and the limiter's own pure step is asked at
//! `now + retry_after` (admits) and one tick earlier (denies).
//!
//! Each case runs at origin 0 and at two other origins of the clock
//! (`support/origin.rs`, rounded to multiples of the bucket, crossing the
//! wrap of the counter only where the bucket divides 2⁶⁴); the limiters see
//! `origin + now`, the reference `now`. `wrap_*` checks what holds across
//! the wrap itself.
use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig, Revocable};
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::window::{BucketedWindow, BucketedWindowQuota, WideBucketedWindow, WindowError};
use cellrate::{Algorithm, Decision, Denied, RateLimiter};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{aligned_within, origins, with_zero};

/// The reference: admitted `(time, cost)` and the rule, counted afresh.
struct Model {
    limit: u64,
    bucket: u64,
    buckets: u64,
    admitted: Vec<(u64, u64)>,
}

impl Model {
    /// Cells in the `N` buckets ending with `now`'s.
    fn used(&self, now: u64) -> u64 {
        let j = now / self.bucket;
        self.admitted
            .iter()
            .filter(|(t, _)| t / self.bucket <= j && j - t / self.bucket < self.buckets)
            .map(|(_, c)| c)
            .sum()
    }
    fn fits(&self, now: u64, cost: u64) -> bool {
        cost <= self.limit && self.used(now) + cost <= self.limit
    }
    /// Cells admitted in ticks `[from, to]`.
    fn in_ticks(&self, from: u64, to: u64) -> u64 {
        self.admitted
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|(_, c)| c)
            .sum()
    }
}

fn first_tick(now: u64, horizon: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    (0..=horizon).find(|d| pred(now + d))
}

/// The `u64`-per-bucket form for `n` buckets (a const parameter).
fn wide(n: u32, limit: u64, window: u64) -> Box<dyn RateLimiter> {
    match n {
        1 => Box::new(WideBucketedWindow::<1>::new(limit, window)),
        2 => Box::new(WideBucketedWindow::<2>::new(limit, window)),
        3 => Box::new(WideBucketedWindow::<3>::new(limit, window)),
        4 => Box::new(WideBucketedWindow::<4>::new(limit, window)),
        5 => Box::new(WideBucketedWindow::<5>::new(limit, window)),
        6 => Box::new(WideBucketedWindow::<6>::new(limit, window)),
        _ => unreachable!(),
    }
}

fn ops() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..12, 0u64..7), 1..60)
}

/// The decision's numbers, comparable across forms.
fn numbers(r: &Result<Decision, Denied>) -> (bool, u64, u64, Option<u64>) {
    match r {
        Ok(d) => (true, d.remaining(), d.reset_after(), None),
        Err(Denied::Limited(l)) => (false, l.remaining(), l.reset_after(), Some(l.retry_after())),
        Err(other) => (false, 0, 0, other.retry_after()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(250))]

    #[test]
    fn bucketed_window_matches_reference(
        limit in 1u64..8,
        buckets in 1u32..7,
        bucket in 1u64..10,
        start in 0u64..200,
        ops in ops(),
        drawn in origins(),
    ) {
        let window = bucket * buckets as u64;
        let run: u64 = start + ops.iter().map(|o| o.0).sum::<u64>() + 3 * window;
        for origin in with_zero(drawn).map(|o| aligned_within(o, bucket, run)) {
            let at = |now: u64| origin.wrapping_add(now);
            let quota = BucketedWindowQuota::new(limit, window, buckets);
            let shared = BucketedWindow::with_quota(quota);
            let wide = wide(buckets, limit, window);
            let sized = WideBucketedWindow::<8>::try_with_buckets(limit, window, buckets).unwrap();
            let mut state = BucketedWindowQuota::NEW;
            let mut model = Model { limit, bucket, buckets: buckets as u64, admitted: vec![] };
            let mut now = start;
            for &(dt, cost) in &ops {
                now += dt;
                let got = quota.check(state, at(now), cost);
                let as_decision = got.map(|(_, d)| d);
                prop_assert_eq!(as_decision, shared.check_n(at(now), cost));
                prop_assert_eq!(numbers(&as_decision), numbers(&wide.check_n(at(now), cost)));
                prop_assert_eq!(numbers(&as_decision), numbers(&sized.check_n(at(now), cost)));
                match got {
                    Ok((next, d)) => {
                        prop_assert!(model.fits(now, cost), "admitted {} at {}", cost, now);
                        if cost > 0 { model.admitted.push((now, cost)); }
                        state = next;
                        prop_assert_eq!(d.remaining(), limit - model.used(now));
                        let empty = first_tick(now, 2 * window, |t| model.used(t) == 0).unwrap();
                        prop_assert_eq!(d.reset_after(), empty);
                    }
                    Err(denied) if cost > limit => prop_assert_eq!(denied.retry_after(), None),
                    Err(denied) => {
                        prop_assert!(!model.fits(now, cost), "denied {} at {}", cost, now);
                        let retry = denied.retry_after().unwrap();
                        let expect = first_tick(now, 2 * window, |t| model.fits(t, cost)).unwrap();
                        prop_assert_eq!(retry, expect);
                        prop_assert!(quota.check(state, at(now + retry), cost).is_ok());
                        prop_assert!(quota.check(state, at(now + retry - 1), cost).is_err());
                        let empty = first_tick(now, 2 * window, |t| model.used(t) == 0).unwrap();
                        prop_assert_eq!(denied.reset_after(), Some(empty));
                    }
                }
                let peek = quota.peek(state, at(now));
                prop_assert_eq!(peek.remaining(), limit - model.used(now));
                prop_assert_eq!(peek.retry_after(), first_tick(now, 2 * window, |t| model.fits(t, 1)).unwrap());
                prop_assert_eq!(peek.reset_after(), first_tick(now, 2 * window, |t| model.used(t) == 0).unwrap());
                prop_assert_eq!(peek, wide.peek(at(now)));
                prop_assert_eq!(peek, sized.peek(at(now)));
                prop_assert_eq!(quota.is_idle(state, at(now)), model.used(now) == 0);
            }
            // The bounds of the module docs, on what was admitted: any
            // W − b + 1 ticks at most the limit, any W ticks at most the
            // limit plus the first bucket touched.
            for &(t, _) in &model.admitted {
                let from = t.saturating_sub(window - bucket);
                prop_assert!(model.in_ticks(from, t) <= limit);
                let from = t.saturating_sub(window - 1);
                let first = from / bucket * bucket;
                let first_bucket = model.in_ticks(first, first + bucket - 1);
                let aligned = from % bucket == 0;
                let extra = if aligned { 0 } else { first_bucket };
                prop_assert!(model.in_ticks(from, t) <= limit + extra);
            }
        }
    }

    /// The wide form with counts the one word cannot hold.
    #[test]
    fn wide_bucketed_window_matches_reference_for_large_counts(
        limit in 1u64..(1 << 40),
        bucket in 1u64..10,
        start in 0u64..200,
        ops in prop::collection::vec((0u64..12, 0u64..(1 << 39)), 1..50),
        drawn in origins(),
    ) {
        const N: u64 = 4;
        let window = bucket * N;
        let run: u64 = start + ops.iter().map(|o| o.0).sum::<u64>() + 3 * window;
        for origin in with_zero(drawn).map(|o| aligned_within(o, bucket, run)) {
            let at = |now: u64| origin.wrapping_add(now);
            let wide = WideBucketedWindow::<4>::new(limit, window);
            let mut model = Model { limit, bucket, buckets: N, admitted: vec![] };
            let mut now = start;
            for &(dt, cost) in &ops {
                now += dt;
                match wide.check_n(at(now), cost) {
                    Ok(d) => {
                        prop_assert!(model.fits(now, cost));
                        if cost > 0 { model.admitted.push((now, cost)); }
                        prop_assert_eq!(d.remaining(), limit - model.used(now));
                    }
                    Err(denied) if cost > limit => prop_assert_eq!(denied.retry_after(), None),
                    Err(denied) => {
                        prop_assert!(!model.fits(now, cost));
                        let retry = denied.retry_after().unwrap();
                        prop_assert_eq!(Some(retry), first_tick(now, 2 * window, |t| model.fits(t, cost)));
                    }
                }
                let peek = wide.peek(at(now));
                prop_assert_eq!(peek.remaining(), limit - model.used(now));
                prop_assert_eq!(peek.reset_after(), first_tick(now, 2 * window, |t| model.used(t) == 0).unwrap());
            }
        }
    }

    /// `refund_n` gives back what `check_n` took at the same `now` (both
    /// forms), and a refund of more never makes them fuller than full.
    #[test]
    fn a_refund_undoes_an_admission_at_the_same_now(
        limit in 1u64..40,
        bucket in 1u64..100,
        steps in prop::collection::vec((0u64..60, 1u64..50, any::<bool>()), 1..40),
    ) {
        let one = BucketedWindow::new(limit, 5 * bucket, 5);
        let wide = WideBucketedWindow::<5>::new(limit, 5 * bucket);
        let mut now = 0;
        for (advance, cost, keep) in steps {
            now += advance;
            let cost = cost.min(limit);
            let before = [one.peek(now), wide.peek(now)];
            let admitted = [one.check_n(now, cost).is_ok(), wide.check_n(now, cost).is_ok()];
            prop_assert_eq!(admitted[0], admitted[1]);
            if keep {
                continue;
            }
            let after = [
                if admitted[0] { one.refund_n(now, cost) } else { one.peek(now) },
                if admitted[1] { wide.refund_n(now, cost) } else { wide.peek(now) },
            ];
            prop_assert_eq!(before, after);
            prop_assert!(one.refund_n(now, limit + 1).remaining() <= limit);
            prop_assert!(wide.refund_n(now, limit + 1).remaining() <= limit);
            prop_assert_eq!(one.peek(now), wide.peek(now));
        }
    }

    /// A receipt revoked later (other admissions in between, buckets
    /// moved on) gives back exactly its own cells while they count: the
    /// limiter then reads as a twin that saw only the other admissions.
    #[test]
    fn a_receipt_revoked_later_gives_back_its_own_cells(
        limit in 2u64..40,
        first in 1u64..20,
        later in prop::collection::vec((0u64..8, 0u64..5), 0..10),
        wait in 0u64..50,
    ) {
        let bucket = 10;
        let one = BucketedWindow::new(limit, 4 * bucket, 4);
        let wide = WideBucketedWindow::<4>::new(limit, 4 * bucket);
        let twin = BucketedWindow::new(limit, 4 * bucket, 4);
        let cost = first.min(limit);
        let (_, r1) = one.admit_n(3, cost).unwrap();
        let (_, r2) = wide.admit_n(3, cost).unwrap();
        let mut now = 3;
        for (dt, c) in later {
            now += dt;
            let admitted = one.check_n(now, c).is_ok();
            prop_assert_eq!(admitted, wide.check_n(now, c).is_ok());
            if admitted && c > 0 {
                prop_assert!(twin.check_n(now, c).is_ok());
            }
        }
        now += wait;
        one.revoke(r1);
        wide.revoke(r2);
        prop_assert_eq!(one.peek(now), twin.peek(now));
        prop_assert_eq!(wide.peek(now), twin.peek(now));
    }

    /// Any state word, even one this quota did not write: no panic, and an
    /// admission never leaves the window over its limit.
    #[test]
    fn any_state_word_is_safe(state in any::<u64>(), now in any::<u64>(), cost in 0u64..20, limit in 1u64..16, buckets in 1u32..8) {
        let quota = BucketedWindowQuota::new(limit, 60 * 7 * 8, buckets.min(48 / (64 - limit.leading_zeros())).max(1));
        let _ = quota.peek(state, now);
        let _ = quota.is_idle(state, now);
        let _ = quota.revoke(state, now, cost);
        if let Ok((next, d)) = quota.check(state, now, cost) {
            prop_assert!(d.remaining() <= limit);
            let after = quota.peek(next, now);
            prop_assert_eq!(after.remaining(), d.remaining());
            prop_assert!(quota.check(next, now, after.remaining() + 1).is_err());
        }
    }
}

/// Window bucket `k` of a run that may wrap past 2⁶⁴ once, numbered on
/// across the wrap (the last bucket of the first lap is short unless `b`
/// divides 2⁶⁴). `t` is the unwrapped time.
fn lap_bucket(t: u128, bucket: u64) -> u128 {
    let lap_one = (u64::MAX / bucket) as u128 + 1;
    if t <= u64::MAX as u128 {
        t / bucket as u128
    } else {
        lap_one + (t - (1u128 << 64)) / bucket as u128
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Across the wrap of the tick counter both forms count buckets
    /// numbered across it: their decisions are the rule's on those
    /// buckets, so any N consecutive buckets hold at most the limit.
    #[test]
    fn wrap_both_forms_count_buckets_across_the_wrap(
        limit in 1u64..8,
        bucket in 1u64..40,
        before in 0u64..200,
        ops in ops(),
    ) {
        const N: u32 = 3;
        let quota = BucketedWindowQuota::new(limit, bucket * N as u64, N);
        let wide = WideBucketedWindow::<3>::new(limit, bucket * N as u64);
        let mut state = BucketedWindowQuota::NEW;
        let mut log: Vec<(u128, u64)> = Vec::new();
        let mut t = (u64::MAX - before) as u128;
        for &(dt, cost) in &ops {
            t += dt as u128;
            let k = lap_bucket(t, bucket);
            let used: u64 = log.iter().filter(|(j, _)| k - j < N as u128).map(|(_, c)| c).sum();
            let fits = cost <= limit && used + cost <= limit;
            prop_assert_eq!(wide.check_n(t as u64, cost).is_ok(), fits, "wide, {} at {}", cost, t);
            match quota.check(state, t as u64, cost) {
                Ok((next, _)) => {
                    prop_assert!(fits, "admitted {} at {} (bucket {})", cost, t, k);
                    log.push((k, cost));
                    state = next;
                }
                Err(_) => prop_assert!(!fits, "denied {} at {} (bucket {})", cost, t, k),
            }
        }
    }
}

#[test]
fn the_seeds_example_six_buckets_of_ten_seconds() {
    // 100 per minute, 6 buckets of 10 s, ms ticks.
    let w = BucketedWindow::new(100, 60_000, 6);
    assert!(w.check_n(5_000, 70).is_ok()); // bucket 0
    assert!(w.check_n(35_000, 30).is_ok()); // bucket 3
    let denied = w.check(59_999).unwrap_err();
    // Bucket 0's 70 leave when bucket 6 starts.
    assert_eq!(denied.retry_after(), Some(1));
    // Bucket 3's 30 leave when bucket 9 starts, at 90 000.
    assert_eq!(denied.reset_after(), Some(90_000 - 59_999));
    assert_eq!(w.peek(60_000).remaining(), 70);
    // The bounds: 100 in bucket 5's last tick and 100 more right after
    // bucket 0 leaves is 2 × 100 within W ticks only if they straddle the
    // first bucket, exactly as the docs allow.
    let w = BucketedWindow::new(10, 60, 6);
    assert!(w.check_n(9, 10).is_ok()); // bucket 0, last tick
    assert!(w.check_n(59, 1).is_err());
    assert!(w.check_n(60, 10).is_ok()); // 20 within ticks 9..=60 (52 ticks > W − b + 1 = 51)
}

#[test]
fn lagging_clock_is_judged_at_the_later_bucket() {
    let q = BucketedWindowQuota::new(3, 30, 3);
    let (s, _) = q.check(BucketedWindowQuota::NEW, 25, 3).unwrap(); // bucket 2
                                                                    // A thread still in bucket 1 sees bucket 2's counts: denied, waiting
                                                                    // until bucket 2 leaves the window (bucket 5, tick 50).
    let d = q.check(s, 15, 1).unwrap_err();
    assert_eq!(d.retry_after(), Some(35));
    assert_eq!(q.peek(s, 15).remaining(), 0);
    assert!(!q.is_idle(s, 15));
    // Its cells are counted in bucket 2 too (later: only denies more).
    let (s, _) = q.check(BucketedWindowQuota::NEW, 25, 1).unwrap();
    let (s, _) = q.check(s, 15, 2).unwrap();
    assert_eq!(q.peek(s, 49).remaining(), 0);
    assert_eq!(q.peek(s, 50).remaining(), 3);
    // The wide form does the same.
    let w = WideBucketedWindow::<3>::new(3, 30);
    w.check_n(25, 3).unwrap();
    assert_eq!(w.check(15).unwrap_err().retry_after(), Some(35));
}

#[test]
fn wrap_a_lagging_clock_across_the_wrap_is_judged_conservatively() {
    // b = 1 000 does not divide 2⁶⁴: the last bucket is 616 ticks long.
    let last = u64::MAX - 615;
    let q = BucketedWindowQuota::new(3, 3_000, 3);
    let (s, _) = q.check(BucketedWindowQuota::NEW, 5, 3).unwrap();
    assert!(q.check(s, last + 10, 1).is_err());
    let w = WideBucketedWindow::<3>::new(3, 3_000);
    w.check_n(5, 3).unwrap();
    assert!(w.check(last + 10).is_err());
    // And after the wrap the buckets before it still count.
    let (s, _) = q.check(BucketedWindowQuota::NEW, last + 10, 3).unwrap();
    assert!(q.check(s, 1_500, 1).is_err());
    assert!(q.check(s, 2_000, 1).is_ok()); // bucket 2 after the wrap: 3 on
}

#[test]
fn tags_alias_only_toward_denying() {
    // 1 cell in 48 buckets: 16 tag bits. A silence of exactly 2¹⁶ buckets
    // reads the old count as current: a denial, never an extra admission.
    let q = BucketedWindowQuota::new(1, 48, 48);
    assert_eq!(q.tag_bits(), 16);
    let (s, _) = q.check(BucketedWindowQuota::NEW, 0, 1).unwrap();
    assert!(q.check(s, 1 << 16, 1).is_err());
    assert!(q.check(s, (1 << 16) + 48, 1).is_ok());
}

#[test]
fn bad_parameters_are_clear_errors() {
    use WindowError::*;
    assert_eq!(BucketedWindowQuota::try_new(0, 60, 6), Err(ZeroLimit));
    assert_eq!(BucketedWindowQuota::try_new(6, 0, 6), Err(ZeroWindow));
    assert_eq!(BucketedWindowQuota::try_new(6, 60, 0), Err(ZeroBuckets));
    assert_eq!(BucketedWindowQuota::try_new(6, 61, 6), Err(UnevenBuckets));
    assert_eq!(
        BucketedWindowQuota::try_new(1, 490, 49),
        Err(TooManyBuckets { max: 48 })
    );
    assert_eq!(
        BucketedWindowQuota::try_new(256, 60, 6),
        Err(LimitTooLarge { max: 255 })
    );
    assert_eq!(
        BucketedWindowQuota::try_new(1 << 48, 60, 1),
        Err(LimitTooLarge { max: (1 << 48) - 1 })
    );
    assert!(BucketedWindowQuota::try_new((1 << 48) - 1, 60, 1).is_ok());
    assert_eq!(
        BucketedWindowQuota::try_new(1, 6 << 48 | 6, 6),
        Err(WindowTooLong { max: 6 << 48 })
    );
    assert_eq!(
        WideBucketedWindow::<5000>::try_new(1, 5000).err(),
        Some(TooManyBuckets { max: 4096 })
    );
    assert_eq!(
        WideBucketedWindow::<6>::try_new(1, 61).err(),
        Some(UnevenBuckets)
    );
    assert!(WideBucketedWindow::<6>::try_new(u64::MAX, 60).is_ok());
    // A cost above the limit is its own error, never a finite wait.
    let w = BucketedWindow::new(5, 50, 5);
    assert!(matches!(
        w.check_n(0, 6),
        Err(Denied::CostTooLarge { cost: 6, limit: 5 })
    ));
    let w = WideBucketedWindow::<5>::new(5, 50);
    assert_eq!(w.check_n(0, 6).unwrap_err().retry_after(), None);
    // Every message says what is wrong.
    assert!(UnevenBuckets.to_string().contains("buckets"));
    assert!(TooManyBuckets { max: 48 }.to_string().contains("48"));
}

#[test]
fn huge_times_do_not_overflow() {
    let q = BucketedWindowQuota::new(7, 6 << 48, 6);
    let (s, _) = q.check(BucketedWindowQuota::NEW, u64::MAX, 7).unwrap();
    let d = q.check(s, u64::MAX, 1).unwrap_err();
    assert!(d.retry_after().unwrap() <= 6 << 48);
    let w = WideBucketedWindow::<6>::new(u64::MAX, 6 << 48);
    w.check_n(u64::MAX, u64::MAX).unwrap();
    assert!(w.check_n(u64::MAX, 1).is_err());
}

#[test]
fn static_limiters_are_const() {
    static ONE: BucketedWindow = BucketedWindow::new(10, 60, 6);
    static WIDE: WideBucketedWindow<6> = WideBucketedWindow::new(1 << 40, 60);
    const Q: BucketedWindowQuota = BucketedWindowQuota::new(10, 60, 6);
    assert!(ONE.check(0).is_ok() && WIDE.check(0).is_ok());
    assert_eq!(Q.bucket_ticks(), 10);
}

/// Real threads on one limiter within one window: exactly `limit`
/// admissions (a smoke test beside the loom models).
#[test]
fn threads_never_over_admit() {
    let one = BucketedWindow::new(200, 6 << 40, 6);
    let wide = WideBucketedWindow::<6>::new(1_000, 6 << 40);
    let limiters: [(&(dyn RateLimiter + Sync), usize); 2] = [(&one, 200), (&wide, 1_000)];
    for (limiter, limit) in limiters {
        let admitted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    s.spawn(move || {
                        (0..2_000u64)
                            .filter(|i| limiter.check(t * 10 + i % 7).is_ok())
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, limit);
    }
}

#[test]
fn keyed_table_of_bucketed_windows_matches_lone_limiters() {
    let quota = BucketedWindowQuota::new(3, 60, 6);
    let table: Keyed<BucketedWindowQuota, 64> = Keyed::new(quota, WhenFull::Deny, Seed::new(7, 9));
    let alone = [
        BucketedWindow::with_quota(quota),
        BucketedWindow::with_quota(quota),
    ];
    for now in (0..400).step_by(7) {
        for (key, lone) in [1u32, 2].iter().zip(&alone) {
            assert_eq!(table.check(key, now), lone.check(now), "key {key} at {now}");
        }
    }
    // Idle slots are reused: two slots, a third key fits once one is idle.
    let table: Keyed<BucketedWindowQuota, 2> = Keyed::new(quota, WhenFull::Deny, Seed::new(1, 2));
    assert!(table.check(&1u32, 0).is_ok() && table.check(&2u32, 0).is_ok());
    assert!(table.check(&3u32, 30).is_err());
    assert!(table.check(&3u32, 60).is_ok());
}

#[test]
fn tiers_of_bucketed_windows_are_all_or_nothing() {
    let per_second = BucketedWindow::new(5, 1_000, 4);
    let per_minute = WideBucketedWindow::<6>::new(7, 60_000);
    let tiers = (&per_second, &per_minute);
    assert!(tiers.check_n(0, 5).is_ok());
    assert!(tiers.check_n(2_000, 3).is_err()); // the minute has 2 left
    assert_eq!(per_second.peek(2_000).remaining(), 5); // charged nothing
    assert!(tiers.check_n(2_000, 2).is_ok());
}

#[test]
fn memory_is_as_documented() {
    use std::mem::size_of;
    // The window module's table: one state word beside the parameters, as
    // the fixed window; the wide form's ring with its head, index, sum,
    // sequence word (with `std`), parameters and bucket count: 8·N + 80
    // bytes with `std`, 8·N + 72 without.
    let word = size_of::<BucketedWindow>() - size_of::<BucketedWindowQuota>();
    assert_eq!(word, 8);
    let fixed = if cfg!(feature = "std") { 80 } else { 72 };
    assert_eq!(size_of::<WideBucketedWindow<1>>(), 8 + fixed);
    assert_eq!(size_of::<WideBucketedWindow<8>>(), 8 * 8 + fixed);
    // AnyLimiter's docs: about 8·N + 144 bytes (the ring of N buckets).
    let any = size_of::<AnyLimiter<8>>();
    assert!((8 * 8 + 128..=8 * 8 + 144).contains(&any), "{any}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Silences near multiples of `2^tag_bits` buckets (tags of 16 to 40
    /// bits), where the one word's tag repeats: the ring a configuration builds
    /// ([`AnyLimiter`]) and a ring of more buckets than it uses answer as
    /// the reference, which keeps every admitted time.
    #[test]
    fn configured_bucketed_windows_are_exact_after_gaps_past_the_tag(
        (buckets, bits) in (1u32..7).prop_flat_map(|n| (Just(n), 24u32.div_ceil(n)..=48 / n)),
        bucket in 1u64..200,
        steps in prop::collection::vec((0u64..4, -8i64..8, 0u64..300, 0u64..4), 1..12),
    ) {
        let limit = (1u64 << bits) - 1;
        let window = bucket * u64::from(buckets);
        let quota = BucketedWindowQuota::new(limit, window, buckets);
        let lap = bucket << quota.tag_bits();
        let config = LimiterConfig::new(AlgorithmKind::BucketedWindow, limit, window, 1_000_000)
            .with_buckets(buckets);
        let any: AnyLimiter<8> = AnyLimiter::from_config(config).unwrap();
        let ring = WideBucketedWindow::<8>::try_with_buckets(limit, window, buckets).unwrap();
        let mut model = Model { limit, bucket, buckets: u64::from(buckets), admitted: vec![] };
        let mut now = 0u64;
        for &(laps, buckets_off, ticks, scale) in &steps {
            // A silence of `laps` laps give or take a few buckets, or a
            // short one.
            let gap = (laps * lap).saturating_add_signed(buckets_off * bucket as i64) + ticks;
            now += gap;
            let cost = (limit >> scale).max(1);
            let want = model.fits(now, cost);
            let got = any.check_n(now, cost);
            prop_assert_eq!(numbers(&got), numbers(&ring.check_n(now, cost)));
            prop_assert_eq!(got.is_ok(), want, "cost {} at {}", cost, now);
            if want {
                model.admitted.push((now, cost));
                prop_assert_eq!(got.unwrap().remaining(), limit - model.used(now));
            }
        }
    }
}

/// A full window, then a silence that lands one bucket short of a lap of
/// the one word's tag (1 MHz clock, 6 buckets of 100 µs, limit 255: a
/// 16-bit tag, so 65 535 buckets on): the configured limiter finds the
/// window empty and admits, as Redis does; the one-word form reads the old
/// counts as a state one bucket ahead, its documented aliasing.
#[test]
fn a_silence_of_a_lap_of_the_tag_is_a_silence() {
    let config =
        LimiterConfig::new(AlgorithmKind::BucketedWindow, 255, 600, 1_000_000).with_buckets(6);
    let quota = BucketedWindowQuota::new(255, 600, 6);
    assert_eq!(quota.tag_bits(), 16);
    let any: AnyLimiter = AnyLimiter::from_config(config).unwrap();
    let word = BucketedWindow::with_quota(quota);
    let t0 = 1_796_525_042_889_588;
    let t1 = t0 + 6_553_470;
    assert!(any.check_n(t0, 255).is_ok() && word.check_n(t0, 255).is_ok());
    let d = any.check_n(t1, 1).unwrap();
    // Bucket ⌊t1 / 100⌋ ends 42 µs after t1; the window 5 buckets later.
    assert_eq!((d.remaining(), d.reset_after()), (254, 42 + 500));
    assert_eq!(numbers(&word.check_n(t1, 1)), (false, 0, 642, Some(642)));
}
