//! The window limiters against reference models written for clarity: a list
//! of admitted cells and the textbook rule, re-counted from scratch at every
//! step. `retry_after` and `reset_after` are checked by brute force: the
//! reference is asked tick by tick when the request would fit (or the
//! limiter be full), and the limiter's own pure step (`Algorithm`) is asked
//! at `now + retry_after` (admits) and one tick earlier (denies).
//!
//! Each case runs at origin 0 and at two other origins of the clock
//! (`support/origin.rs`; for the window counters, multiples of the window,
//! and runs that cross the wrap of the counter only where the window
//! divides 2⁶⁴): the limiters see `origin + now`, the references `now`.
//! Across the wrap itself, `wrap_*` below check what holds there.
use cellrate::window::{
    FixedWindow, FixedWindowQuota, SlidingLog, SlidingWindow, SlidingWindowQuota,
};
use cellrate::{Algorithm, RateLimiter};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{aligned_within, origins, with_zero};

/// Admitted cells, with their times.
#[derive(Clone, Default)]
struct Admitted(Vec<(u64, u64)>);

impl Admitted {
    fn cells_where(&self, pred: impl Fn(u64) -> bool) -> u64 {
        self.0
            .iter()
            .filter(|(t, _)| pred(*t))
            .map(|(_, c)| c)
            .sum()
    }
}

/// Fixed window: cells in `now`'s aligned window plus cost ≤ limit.
struct FixedRef {
    limit: u64,
    window: u64,
    log: Admitted,
}

impl FixedRef {
    fn used(&self, now: u64) -> u64 {
        let k = now / self.window;
        self.log.cells_where(|t| t / self.window == k)
    }
    fn fits(&self, now: u64, cost: u64) -> bool {
        self.used(now) + cost <= self.limit
    }
}

/// Sliding window counter: previous window weighted by its overlap.
struct SlidingRef {
    limit: u64,
    window: u64,
    log: Admitted,
}

impl SlidingRef {
    /// (previous count, current count, elapsed)
    fn parts(&self, now: u64) -> (u64, u64, u64) {
        let w = self.window;
        let k = now / w;
        let cur = self.log.cells_where(|t| t / w == k);
        let prev = if k == 0 {
            0
        } else {
            self.log.cells_where(|t| t / w == k - 1)
        };
        (prev, cur, now % w)
    }
    /// estimate · W, exactly.
    fn estimate_w(&self, now: u64) -> u128 {
        let (p, c, e) = self.parts(now);
        let w = self.window as u128;
        p as u128 * (w - e as u128) + c as u128 * w
    }
    fn fits(&self, now: u64, cost: u64) -> bool {
        self.estimate_w(now) + cost as u128 * self.window as u128
            <= self.limit as u128 * self.window as u128
    }
    fn remaining(&self, now: u64) -> u64 {
        let free = self.limit as u128 * self.window as u128 - self.estimate_w(now);
        (free / self.window as u128) as u64
    }
}

/// Exact sliding log: cells at t with t > now − W, plus cost ≤ limit.
struct LogRef {
    limit: u64,
    window: u64,
    log: Admitted,
}

impl LogRef {
    fn used(&self, now: u64) -> u64 {
        self.log.cells_where(|t| t + self.window > now)
    }
    fn fits(&self, now: u64, cost: u64) -> bool {
        self.used(now) + cost <= self.limit
    }
}

/// The first Δ ≥ 0 at which `pred(now + Δ)` holds, scanning up to `horizon`.
fn first_tick(now: u64, horizon: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    (0..=horizon).find(|d| pred(now + d))
}

fn ops() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..25, 0u64..7), 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn fixed_window_matches_reference(limit in 1u64..8, window in 1u64..40, start in 0u64..1_000, ops in ops(), drawn in origins()) {
        // The run, and the retries and scans up to three windows past it.
        let run: u64 = start + ops.iter().map(|o| o.0).sum::<u64>() + 3 * window;
        for origin in with_zero(drawn).map(|o| aligned_within(o, window, run)) {
        let at = |now: u64| origin.wrapping_add(now);
        let quota = FixedWindowQuota::new(limit, window);
        let shared = FixedWindow::with_quota(quota);
        let mut state = FixedWindowQuota::NEW;
        let mut reference = FixedRef { limit, window, log: Admitted::default() };
        let mut now = start;
        for &(dt, cost) in &ops {
            now += dt;
            let got = quota.check(state, at(now), cost);
            prop_assert_eq!(got.map(|(_, d)| d), shared.check_n(at(now), cost));
            match got {
                Ok((next, d)) => {
                    prop_assert!(cost <= limit && reference.fits(now, cost));
                    if cost > 0 { reference.log.0.push((now, cost)); }
                    state = next;
                    prop_assert_eq!(d.remaining(), limit - reference.used(now));
                    let full = first_tick(now, 2 * window, |t| reference.used(t) == 0).unwrap();
                    prop_assert_eq!(d.reset_after(), full);
                }
                Err(denied) if cost > limit => prop_assert_eq!(denied.retry_after(), None),
                Err(denied) => {
                    prop_assert!(!reference.fits(now, cost));
                    let retry = denied.retry_after().unwrap();
                    let expect = first_tick(now, 2 * window, |t| reference.fits(t, cost)).unwrap();
                    prop_assert_eq!(retry, expect);
                    prop_assert!(quota.check(state, at(now + retry), cost).is_ok());
                    prop_assert!(quota.check(state, at(now + retry - 1), cost).is_err());
                }
            }
            let peek = quota.peek(state, at(now));
            prop_assert_eq!(peek.remaining(), limit - reference.used(now));
            prop_assert_eq!(peek.retry_after(), first_tick(now, 2 * window, |t| reference.fits(t, 1)).unwrap());
            prop_assert_eq!(quota.is_idle(state, at(now)), reference.used(now) == 0);
        }
        }
    }

    #[test]
    fn sliding_window_matches_reference(limit in 1u64..8, window in 1u64..40, start in 0u64..1_000, ops in ops(), drawn in origins()) {
        // The run, and the retries and scans up to three windows past it.
        let run: u64 = start + ops.iter().map(|o| o.0).sum::<u64>() + 3 * window;
        for origin in with_zero(drawn).map(|o| aligned_within(o, window, run)) {
        let at = |now: u64| origin.wrapping_add(now);
        let quota = SlidingWindowQuota::new(limit, window);
        let shared = SlidingWindow::with_quota(quota);
        let mut state = SlidingWindowQuota::NEW;
        let mut reference = SlidingRef { limit, window, log: Admitted::default() };
        let mut now = start;
        for &(dt, cost) in &ops {
            now += dt;
            let got = quota.check(state, at(now), cost);
            prop_assert_eq!(got.map(|(_, d)| d), shared.check_n(at(now), cost));
            match got {
                Ok((next, d)) => {
                    prop_assert!(cost <= limit && reference.fits(now, cost));
                    if cost > 0 { reference.log.0.push((now, cost)); }
                    state = next;
                    prop_assert_eq!(d.remaining(), reference.remaining(now));
                    let full = first_tick(now, 3 * window, |t| reference.estimate_w(t) == 0).unwrap();
                    prop_assert_eq!(d.reset_after(), full);
                }
                Err(denied) if cost > limit => prop_assert_eq!(denied.retry_after(), None),
                Err(denied) => {
                    prop_assert!(!reference.fits(now, cost));
                    let retry = denied.retry_after().unwrap();
                    let expect = first_tick(now, 3 * window, |t| reference.fits(t, cost)).unwrap();
                    prop_assert_eq!(retry, expect);
                    prop_assert!(quota.check(state, at(now + retry), cost).is_ok());
                    prop_assert!(quota.check(state, at(now + retry - 1), cost).is_err());
                    prop_assert_eq!(denied.limited().unwrap().remaining(), reference.remaining(now));
                }
            }
            let peek = quota.peek(state, at(now));
            prop_assert_eq!(peek.remaining(), reference.remaining(now));
            prop_assert_eq!(peek.retry_after(), first_tick(now, 3 * window, |t| reference.fits(t, 1)).unwrap());
            prop_assert_eq!(quota.is_idle(state, at(now)), reference.estimate_w(now) == 0);
        }
        }
    }

    #[test]
    fn sliding_log_matches_reference(limit in 1u64..8, window in 1u64..40, start in 0u64..1_000, ops in ops(), drawn in origins()) {
        for origin in with_zero(drawn) {
        let at = |now: u64| origin.wrapping_add(now);
        let log = SlidingLog::<8>::new(limit, window);
        let mut reference = LogRef { limit, window, log: Admitted::default() };
        let mut now = start;
        for &(dt, cost) in &ops {
            now += dt;
            let before = log.peek(at(now));
            prop_assert_eq!(before.remaining(), limit - reference.used(now));
            prop_assert_eq!(before.retry_after(), first_tick(now, window, |t| reference.fits(t, 1)).unwrap());
            match log.check_n(at(now), cost) {
                Ok(d) => {
                    prop_assert!(cost <= limit && reference.fits(now, cost));
                    if cost > 0 { reference.log.0.push((now, cost)); }
                    prop_assert_eq!(d.remaining(), limit - reference.used(now));
                    let full = first_tick(now, window, |t| reference.used(t) == 0).unwrap();
                    prop_assert_eq!(d.reset_after(), full);
                }
                Err(denied) if cost > limit => prop_assert_eq!(denied.retry_after(), None),
                Err(denied) => {
                    prop_assert!(!reference.fits(now, cost));
                    let expect = first_tick(now, window, |t| reference.fits(t, cost)).unwrap();
                    prop_assert_eq!(denied.retry_after(), Some(expect));
                    let limited = denied.limited().unwrap();
                    prop_assert_eq!(limited.remaining(), limit - reference.used(now));
                    let full = first_tick(now, window, |t| reference.used(t) == 0).unwrap();
                    prop_assert_eq!(limited.reset_after(), full);
                }
            }
        }
        }
    }
}

#[test]
fn fixed_window_boundary_burst_is_two_limits() {
    let w = FixedWindow::new(5, 100);
    assert!((0..5).all(|_| w.check(99).is_ok()));
    assert!((0..5).all(|_| w.check(100).is_ok()));
    assert!(w.check(100).is_err());
}

#[test]
fn tags_alias_only_toward_denying() {
    // The largest sliding limit leaves a 16-bit tag; a silence of exactly
    // 2^16 windows reads the old count as current (denies), any other long
    // silence reads as empty.
    let quota = SlidingWindowQuota::new(SlidingWindowQuota::MAX_LIMIT, 1);
    assert_eq!(quota.tag_bits(), 16);
    let (s, _) = quota
        .check(SlidingWindowQuota::NEW, 5, quota.limit())
        .unwrap();
    assert!(quota.check(s, 5 + (1 << 16), 1).is_err());
    assert!(quota.check(s, 5 + (1 << 16) + 7, quota.limit()).is_ok());
}

#[test]
fn lagging_clock_by_one_window_is_judged_conservatively() {
    let quota = FixedWindowQuota::new(3, 100);
    let (s, _) = quota.check(FixedWindowQuota::NEW, 250, 3).unwrap();
    // A thread whose `now` lags into the previous window sees the newer count.
    let denied = quota.check(s, 180, 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(120)); // until 300, the end of window 2
    let quota = SlidingWindowQuota::new(3, 100);
    let (s, _) = quota.check(SlidingWindowQuota::NEW, 250, 3).unwrap();
    assert!(quota.check(s, 180, 1).is_err());
}

#[test]
fn huge_times_do_not_overflow() {
    for now in [u64::MAX - 1, u64::MAX] {
        let f = FixedWindow::new(2, 1_000);
        assert!(f.check_n(now, 2).is_ok());
        assert!(f.check(now).unwrap_err().retry_after().is_some());
        let s = SlidingWindow::new(2, 1_000);
        assert!(s.check_n(now, 2).is_ok());
        assert!(s.check(now).unwrap_err().retry_after().is_some());
        let l = SlidingLog::<2>::new(2, 1_000);
        assert!(l.check_n(now, 2).is_ok());
        assert!(l.check(now).unwrap_err().retry_after().is_some());
    }
}

#[test]
fn static_limiters_are_const() {
    static F: FixedWindow = FixedWindow::new(1, 10);
    static S: SlidingWindow = SlidingWindow::new(1, 10);
    static L: SlidingLog<1> = SlidingLog::new(1, 10);
    assert!(F.check(0).is_ok() && F.check(0).is_err());
    assert!(S.check(0).is_ok() && S.check(0).is_err());
    assert!(L.check(0).is_ok() && L.check(0).is_err());
}

/// Real threads hammering one limiter within one window: exactly `limit`
/// admissions in total (a smoke test beside the loom models).
#[test]
fn threads_never_over_admit() {
    let fixed = FixedWindow::new(1_000, 1 << 40);
    let sliding = SlidingWindow::new(1_000, 1 << 40);
    let log = SlidingLog::<1_000>::new(1_000, 1 << 40);
    let limiters: [&(dyn RateLimiter + Sync); 3] = [&fixed, &sliding, &log];
    for limiter in limiters {
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
        assert_eq!(admitted, 1_000);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `refund_n` gives back what `check_n` took at the same `now`, in every
    /// window limiter and in GCRA: the reference is the limiter's own state
    /// before the admission (a peek), which the refund must restore whole,
    /// and a refund of more than was taken never makes it fuller than full.
    #[test]
    fn a_refund_undoes_an_admission_at_the_same_now(
        limit in 1u64..50,
        window in 1u64..1_000,
        steps in proptest::collection::vec((0u64..300, 1u64..60, any::<bool>()), 1..40),
    ) {
        let fixed = FixedWindow::new(limit, window);
        let sliding = SlidingWindow::new(limit, window);
        let log = SlidingLog::<64>::new(limit, window);
        let gcra = cellrate::Gcra::new(
            cellrate::Quota::per_ticks(limit, window).with_burst(limit).at_hz(1_000),
        );
        let mut now = 0;
        for (advance, cost, keep) in steps {
            now += advance;
            let cost = cost.min(limit);
            let before = [fixed.peek(now), sliding.peek(now), log.peek(now), gcra.peek(now)];
            let admitted = [
                fixed.check_n(now, cost).is_ok(),
                sliding.check_n(now, cost).is_ok(),
                log.check_n(now, cost).is_ok(),
                gcra.check_n(now, cost).is_ok(),
            ];
            if keep {
                continue;
            }
            let after = [
                if admitted[0] { fixed.refund_n(now, cost) } else { fixed.peek(now) },
                if admitted[1] { sliding.refund_n(now, cost) } else { sliding.peek(now) },
                if admitted[2] { log.refund_n(now, cost) } else { log.peek(now) },
                if admitted[3] { gcra.refund_n(now, cost) } else { gcra.peek(now) },
            ];
            for (i, (b, a)) in before.iter().zip(after.iter()).enumerate() {
                prop_assert_eq!(b.remaining(), a.remaining(), "limiter {} at {}", i, now);
                prop_assert_eq!(b.retry_after(), a.retry_after(), "limiter {} at {}", i, now);
            }
            // More than was taken: never fuller than full.
            prop_assert!(fixed.refund_n(now, limit + 1).remaining() <= limit);
            prop_assert!(sliding.refund_n(now, limit + 1).remaining() <= limit);
            prop_assert!(log.refund_n(now, limit + 1).remaining() <= limit);
            prop_assert!(gcra.refund_n(now, limit + 1).remaining() <= limit);
        }
    }
}

/// Window `k` of a run that may wrap past 2⁶⁴ once: the windows of the
/// first lap, then those after the wrap, numbered on (the last window of the
/// first lap is short unless `W` divides 2⁶⁴). `t` is the unwrapped time.
fn lap_window(t: u128, window: u64) -> u128 {
    let lap_one = (u64::MAX / window) as u128 + 1; // windows in the first lap
    if t <= u64::MAX as u128 {
        t / window as u128
    } else {
        lap_one + (t - (1u128 << 64)) / window as u128
    }
}

fn wrap_case() -> impl Strategy<Value = (u64, u64, u64, Vec<(u64, u64)>)> {
    (1u64..8, 1u64..40)
        .prop_flat_map(|(limit, window)| (Just(limit), Just(window), 0..4 * window, ops()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Across the wrap of the tick counter a fixed window counts each
    /// window apart, the short one before the wrap included: its decisions
    /// are those of the textbook rule on windows numbered across the wrap,
    /// so no window admits more than its limit.
    #[test]
    fn wrap_fixed_window_admits_at_most_its_limit_per_window(
        (limit, window, before, ops) in wrap_case(),
    ) {
        let quota = FixedWindowQuota::new(limit, window);
        let mut state = FixedWindowQuota::NEW;
        let mut admitted: std::collections::HashMap<u128, u64> = Default::default();
        let mut t = (u64::MAX - before) as u128;
        for &(dt, cost) in &ops {
            t += dt as u128;
            let k = lap_window(t, window);
            let fits = cost <= limit && admitted.get(&k).copied().unwrap_or(0) + cost <= limit;
            match quota.check(state, t as u64, cost) {
                Ok((next, _)) => {
                    prop_assert!(fits, "admitted {} at {} (window {})", cost, t, k);
                    *admitted.entry(k).or_default() += cost;
                    state = next;
                }
                Err(_) => prop_assert!(!fits, "denied {} at {} (window {})", cost, t, k),
            }
        }
        prop_assert!(admitted.values().all(|&n| n <= limit));
    }

    /// Across the wrap a sliding window counts the short window before the
    /// wrap as window 0's previous one (conservative: never "too old"), and
    /// its decisions are the estimate's on windows numbered across the wrap.
    #[test]
    fn wrap_sliding_window_counts_the_short_window_as_previous(
        (limit, window, before, ops) in wrap_case(),
    ) {
        let quota = SlidingWindowQuota::new(limit, window);
        let mut state = SlidingWindowQuota::NEW;
        let mut log: Vec<(u128, u64)> = Vec::new();
        let mut t = (u64::MAX - before) as u128;
        for &(dt, cost) in &ops {
            t += dt as u128;
            let k = lap_window(t, window);
            let count = |j: u128| log.iter().filter(|(w, _)| *w == j).map(|(_, c)| c).sum::<u64>();
            let (cur, prev) = (count(k), if k == 0 { 0 } else { count(k - 1) });
            let elapsed = (t as u64 % window) as u128;
            let w = window as u128;
            let estimate_w = prev as u128 * (w - elapsed) + cur as u128 * w;
            let fits = cost <= limit && estimate_w + cost as u128 * w <= limit as u128 * w;
            match quota.check(state, t as u64, cost) {
                Ok((next, _)) => {
                    prop_assert!(fits, "admitted {} at {} (window {})", cost, t, k);
                    log.push((k, cost));
                    state = next;
                }
                Err(_) => prop_assert!(!fits, "denied {} at {} (window {})", cost, t, k),
            }
        }
    }
}

#[test]
fn wrap_a_lagging_clock_is_still_judged_conservatively() {
    // W = 1 000 does not divide 2⁶⁴: the last window before the wrap is
    // [2⁶⁴ − 616, 2⁶⁴), 616 ticks long, and window 0 follows it.
    let last = u64::MAX - 615;
    let fixed = FixedWindowQuota::new(3, 1_000);
    let (s, _) = fixed.check(FixedWindowQuota::NEW, 5, 3).unwrap();
    // A thread whose `now` lags into the last window sees window 0's count.
    assert!(fixed.check(s, last + 10, 1).is_err());
    let sliding = SlidingWindowQuota::new(3, 1_000);
    let (s, _) = sliding.check(SlidingWindowQuota::NEW, 5, 3).unwrap();
    assert!(sliding.check(s, last + 10, 1).is_err());
    // And window 0 counts the short last window as its previous one.
    let (s, _) = sliding
        .check(SlidingWindowQuota::NEW, u64::MAX - 5, 3)
        .unwrap();
    assert!(sliding.check(s, 10, 1).is_err());
    // (1 000 − e)/1 000 · 3 ≤ 2 from e = 334 on.
    assert_eq!(sliding.peek(s, 10).retry_after(), 324);
    assert!(sliding.check(s, 333, 1).is_err());
    assert!(sliding.check(s, 334, 1).is_ok());
}
