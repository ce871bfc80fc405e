//! User scenarios for every limiter, on a manual clock (1 tick = 1 ms).
use cellrate::compose::{AlgorithmKind, AnyLimiter, LimiterConfig};
use cellrate::window::{FixedWindow, SlidingLog, SlidingWindow};
use cellrate::{Clock, Gcra, LeakyBucket, ManualClock, Quota, Rate, RateLimiter, TokenBucket};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{aligned_within, origins, same_at_every_origin};

const HZ: u64 = 1_000;

/// 20 requests in one second (every 50 ms), then 10 s idle, then 20 more.
fn burst_then_idle(clock: &ManualClock, mut request: impl FnMut(u64) -> bool) -> (u64, u64) {
    let mut first = 0;
    for _ in 0..20 {
        first += request(clock.now()) as u64;
        clock.advance(50);
    }
    clock.advance(10_000);
    let mut second = 0;
    for _ in 0..20 {
        second += request(clock.now()) as u64;
        clock.advance(50);
    }
    (first, second)
}

#[test]
fn token_bucket_admits_a_burst_within_its_capacity_and_refills_while_idle() {
    let clock = ManualClock::new(0);
    // Capacity 20, refilled at 5 per second.
    let bucket = TokenBucket::new(Quota::builder(Rate::per_second(5)).with_burst(20).at_hz(HZ));
    let (first, second) = burst_then_idle(&clock, |now| bucket.check(now).is_ok());
    assert_eq!((first, second), (20, 20));
}

#[test]
fn leaky_bucket_meter_passes_only_the_steady_rate() {
    let clock = ManualClock::new(0);
    // 5 per second, no burst: one every 200 ms.
    let meter = LeakyBucket::new(Quota::builder(Rate::per_second(5)).with_burst(1).at_hz(HZ));
    let mut admitted_at = Vec::new();
    let (first, second) = burst_then_idle(&clock, |now| {
        let ok = meter.check(now).is_ok();
        if ok {
            admitted_at.push(now);
        }
        ok
    });
    assert_eq!((first, second), (5, 5));
    assert_eq!(&admitted_at[..5], &[0, 200, 400, 600, 800]);
}

#[test]
fn leaky_bucket_shaper_gives_each_request_its_departure_at_the_steady_rate() {
    let clock = ManualClock::new(0);
    let shaper = LeakyBucket::new(Quota::builder(Rate::per_second(5)).with_burst(1).at_hz(HZ));
    let mut departures = Vec::new();
    for _ in 0..20 {
        let now = clock.now();
        let r = shaper.reserve_n(now, 1, 10_000).unwrap();
        departures.push(now + r.send_after());
        clock.advance(50);
    }
    let expected: Vec<u64> = (0..20).map(|i| i * 200).collect();
    assert_eq!(departures, expected);
}

/// Requests admitted when `limit` arrive in the last tick of a window and
/// `limit` more in the first tick of the next.
fn boundary_burst(limiter: &dyn RateLimiter, limit: u64, window: u64) -> u64 {
    let clock = ManualClock::new(window - 1);
    let mut admitted = 0;
    for _ in 0..limit {
        admitted += limiter.check(clock.now()).is_ok() as u64;
    }
    clock.advance(1);
    for _ in 0..limit {
        admitted += limiter.check(clock.now()).is_ok() as u64;
    }
    admitted
}

#[test]
fn only_the_fixed_window_admits_twice_its_limit_across_a_boundary() {
    let (limit, window) = (10, 1_000);
    let fixed = FixedWindow::new(limit, window);
    let sliding = SlidingWindow::new(limit, window);
    let log = SlidingLog::<10>::new(limit, window);
    let gcra = Gcra::new(Quota::per_ticks(limit, window).at_hz(HZ));
    assert_eq!(boundary_burst(&fixed, limit, window), 2 * limit);
    assert_eq!(boundary_burst(&sliding, limit, window), limit);
    assert_eq!(boundary_burst(&log, limit, window), limit);
    assert_eq!(boundary_burst(&gcra, limit, window), limit);
}

fn config() -> impl Strategy<Value = LimiterConfig> {
    (
        prop::sample::select(AlgorithmKind::ALL.to_vec()),
        1u64..64,
        1u64..100_000,
        prop::option::of(1u64..64),
        1u32..9,
    )
        .prop_map(|(algorithm, limit, window, burst, n)| {
            let burst = match algorithm {
                AlgorithmKind::TokenBucket | AlgorithmKind::Gcra => burst,
                _ => None,
            };
            // The bucketed window: `n` buckets dividing the window (a limit
            // below 64 takes 6 bits a bucket, so up to 8 fit).
            let bucketed = algorithm == AlgorithmKind::BucketedWindow;
            let buckets = bucketed.then_some(n);
            let window = if bucketed {
                (window / n as u64).max(1) * n as u64
            } else {
                window
            };
            let mut config = LimiterConfig::new(algorithm, limit, window, HZ);
            (config.burst, config.buckets) = (burst, buckets);
            config
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// At any time at all: from 0, Unix time, the top of the range.
    #[test]
    fn a_new_client_is_admitted_with_a_full_quota(
        config in config(),
        now in prop_oneof![0u64..(1 << 40), any::<u64>(), prop::sample::select(origin::FIXED.to_vec())],
    ) {
        let limiter: AnyLimiter = AnyLimiter::from_config(config).unwrap();
        let full = limiter.peek(now);
        prop_assert_eq!(full.remaining(), full.limit());
        prop_assert_eq!(full.retry_after(), 0);
        let d = limiter.check(now).unwrap();
        prop_assert_eq!(d.remaining(), d.limit() - 1);
    }

    /// `remaining` is never above the limit (never "negative" as a wrapped
    /// u64) and always tells the truth: exactly that many more cells of cost
    /// 1 are admitted at the same instant. Checked through sliding-window
    /// rollovers (and every other algorithm) on random traffic, and the
    /// same at every origin of the clock (for the window counters, origins
    /// are multiples of the window, and runs cross the wrap of the counter
    /// only where the window divides 2⁶⁴).
    #[test]
    fn remaining_is_never_negative_and_always_exact(
        config in config(),
        steps in prop::collection::vec((0u64..3_000, 0u64..8), 1..40),
        drawn in origins(),
    ) {
        let windowed = matches!(config.algorithm, AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindow | AlgorithmKind::BucketedWindow);
        let run: u64 = steps.iter().map(|s| s.0).sum();
        let drawn = drawn.map(|o| if windowed { aligned_within(o, config.window, run) } else { o });
        let mut failure = None;
        same_at_every_origin(drawn, |origin| {
            let trace = remaining_trace(config, &steps, origin);
            if let Err(e) = &trace {
                failure.get_or_insert_with(|| e.clone());
            }
            trace.ok()
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
    }
}

/// The run of [`remaining_is_never_negative_and_always_exact`] at `origin`:
/// every check's reported `remaining` and peek (the trace the origins must
/// agree on), or the first broken property.
fn remaining_trace(
    config: LimiterConfig,
    steps: &[(u64, u64)],
    origin: u64,
) -> Result<Vec<(u64, u64, u64, u64)>, TestCaseError> {
    let limiter: AnyLimiter = AnyLimiter::from_config(config).unwrap();
    let probe: AnyLimiter = AnyLimiter::from_config(config).unwrap();
    let at = |now: u64| origin.wrapping_add(now);
    let mut trace = Vec::new();
    let mut now = 0u64;
    let mut history = Vec::new();
    for &(dt, cost) in steps {
        now += dt;
        let now = at(now);
        let reported = match limiter.check_n(now, cost) {
            Ok(d) => {
                history.push((now, cost));
                d.remaining()
            }
            Err(denied) => match denied.limited() {
                Some(l) => l.remaining(),
                None => continue,
            },
        };
        let limit = limiter.peek(now).limit();
        prop_assert!(reported <= limit);
        prop_assert_eq!(limiter.peek(now).remaining(), reported);
        // Replay the history on a fresh twin, then count admissions.
        probe.reset();
        for &(t, c) in &history {
            prop_assert!(probe.check_n(t, c).is_ok());
        }
        let mut extra = 0;
        while probe.check(now).is_ok() {
            extra += 1;
            prop_assert!(extra <= limit);
        }
        prop_assert_eq!(extra, reported);
        let peek = limiter.peek(now);
        trace.push((
            reported,
            peek.remaining(),
            peek.reset_after(),
            peek.retry_after(),
        ));
    }
    Ok(trace)
}

#[test]
fn sliding_window_remaining_across_a_rollover() {
    let w = SlidingWindow::new(10, 1_000);
    w.check_n(999, 10).unwrap();
    // Just after the rollover the previous window weighs almost fully.
    for now in [1_000, 1_001, 1_100, 1_500, 1_999, 2_000, 2_999, 3_000] {
        let s = w.peek(now);
        assert!(s.remaining() <= 10, "{now}: {s:?}");
    }
    assert_eq!(w.peek(1_000).remaining(), 0);
    assert_eq!(w.peek(1_100).remaining(), 1);
    assert_eq!(w.peek(1_500).remaining(), 5);
    assert_eq!(w.peek(2_000).remaining(), 10);
}

#[test]
fn a_stricter_endpoint_limit_denies_without_consuming_the_global_one() {
    let global = FixedWindow::new(10, 1_000);
    let endpoint = Gcra::new(Quota::per_second(2).at_hz(HZ));
    let client = (&global, &endpoint);
    assert!(client.check(0).is_ok() && client.check(0).is_ok());
    // The endpoint fails: its denial is returned, the global quota untouched.
    let denied = client.check(0).unwrap_err();
    assert_eq!(denied.limit(), 2);
    assert_eq!(global.peek(0).remaining(), 8);
    // The global limit fails first (other endpoints used it): the endpoint
    // keeps its quota.
    let other = Gcra::new(Quota::per_second(100).at_hz(HZ));
    while (&global, &other).check(1).is_ok() {}
    assert_eq!(global.peek(1).remaining(), 0);
    let fresh_endpoint = Gcra::new(Quota::per_second(2).at_hz(HZ));
    let denied = (&global, &fresh_endpoint).check(1).unwrap_err();
    assert_eq!(denied.limit(), 10);
    assert_eq!(fresh_endpoint.peek(1).remaining(), 2);
    // Order does not matter for what is consumed.
    let denied = (&fresh_endpoint, &global).check(1).unwrap_err();
    assert_eq!(denied.limit(), 10);
    assert_eq!(fresh_endpoint.peek(1).remaining(), 2);
}
