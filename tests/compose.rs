//! Composition: tuples, `Metered`, `Adaptive`, `AnyLimiter` and its
//! reconfiguration.
use cellrate::compose::{
    Adaptive, AlgorithmKind, AnyLimiter, LimiterConfig, LimiterConfigError, Metered, Penalty,
    Revocable,
};
use cellrate::window::{BucketedWindow, FixedWindow, SlidingLog, SlidingWindow, WindowError};
use cellrate::{Denied, Gcra, Quota, QuotaError, RateLimiter};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{aligned_within, origins, with_zero};

const HZ: u64 = 1_000;

#[test]
fn tuple_returns_the_tightest_decision() {
    let burst = Gcra::new(Quota::per_second(5).at_hz(HZ));
    let daily = FixedWindow::new(3, 86_400_000);
    let both = (&burst, &daily);
    let d = both.check(0).unwrap();
    assert_eq!((d.limit(), d.remaining()), (3, 2)); // the daily part is tighter
    let d = (&burst, &daily).check(0).unwrap();
    assert_eq!((d.limit(), d.remaining()), (3, 1));
    // Three and four parts.
    let a = FixedWindow::new(10, 100);
    let b = SlidingWindow::new(4, 100);
    let c = SlidingLog::<8>::new(6, 100);
    let g = Gcra::new(Quota::per_ticks(7, 100).at_hz(HZ));
    let d = (&a, &b, &c, &g).check_n(0, 2).unwrap();
    assert_eq!((d.limit(), d.remaining()), (4, 2));
    assert!((&a, &b, &c, &g).check_n(0, 3).is_err());
    // Nothing consumed by the denied request of cost 3.
    assert_eq!(
        [
            a.peek(0).remaining(),
            b.peek(0).remaining(),
            c.peek(0).remaining(),
            g.peek(0).remaining()
        ],
        [8, 2, 4, 5]
    );
    let s = (&a, &b, &c, &g).peek(0);
    assert_eq!((s.limit(), s.remaining(), s.retry_after()), (4, 2, 0));
}

#[test]
fn tuple_peek_waits_for_every_part() {
    let a = FixedWindow::new(1, 100);
    let b = FixedWindow::new(1, 300);
    (&a, &b).check(0).unwrap();
    assert_eq!((&a, &b).peek(10).retry_after(), 290);
}

#[test]
fn cost_too_large_for_one_part_is_reported_as_such() {
    let a = FixedWindow::new(10, 100);
    let b = FixedWindow::new(3, 100);
    assert_eq!(
        (&a, &b).check_n(0, 5),
        Err(Denied::CostTooLarge { cost: 5, limit: 3 })
    );
    assert_eq!(a.peek(0).remaining(), 10);
}

/// Every part can take back exactly what it admitted.
#[test]
fn revocation_is_exact_for_every_limiter() {
    fn roundtrip<L: Revocable>(l: &L, now: u64) {
        let before = l.peek(now);
        let (_, r) = l.admit_n(now, 2).unwrap();
        // Someone else admitted meanwhile.
        l.check(now).unwrap();
        let with_other = l.peek(now).remaining();
        l.revoke(r);
        assert_eq!(l.peek(now).remaining(), with_other + 2);
        assert_eq!(l.peek(now).remaining() + 1, before.remaining());
    }
    roundtrip(&FixedWindow::new(5, 100), 7);
    roundtrip(&SlidingWindow::new(5, 100), 7);
    roundtrip(&SlidingLog::<5>::new(5, 100), 7);
    roundtrip(&Gcra::new(Quota::per_ticks(5, 100).at_hz(HZ)), 7);
    // A sliding window revoked after it rolled over: taken from the previous count.
    let s = SlidingWindow::new(4, 100);
    let (_, r) = s.admit_n(90, 4).unwrap();
    s.check_n(100, 0).unwrap();
    assert_eq!(s.peek(150).remaining(), 2);
    s.revoke(r);
    assert_eq!(s.peek(150).remaining(), 4);
}

#[test]
fn metered_counts_requests_and_cells() {
    let m = Metered::new(FixedWindow::new(5, 100));
    m.check_n(0, 3).unwrap();
    m.check_n(0, 3).unwrap_err();
    m.check_n(0, 2).unwrap();
    m.check_n(0, 9).unwrap_err(); // cost too large counts as denied
    m.check_n(0, 0).unwrap(); // a peek counts as nothing
    let s = m.stats();
    assert_eq!(
        (s.admitted, s.denied, s.admitted_cells, s.denied_cells),
        (2, 2, 5, 12)
    );
    // Inside a tuple: a part revoked is counted as denied.
    let a = Metered::new(FixedWindow::new(5, 100));
    let b = FixedWindow::new(1, 100);
    (&a, &b).check(0).unwrap();
    (&a, &b).check(0).unwrap_err();
    let s = a.stats();
    assert_eq!((s.admitted, s.denied), (1, 1));
    assert_eq!(a.inner().peek(0).remaining(), 4);
}

/// The adaptive policy written out plainly, driving its own inner limiter.
struct PenaltyModel {
    strikes_per_level: u32,
    max_level: u32,
    good_period: u64,
    level: u32,
    strikes: u32,
    last_denial: u64,
    inner: FixedWindow,
}

impl PenaltyModel {
    fn check(&mut self, now: u64, cost: u64) -> Result<(u64, u64), ()> {
        if (self.level, self.strikes) != (0, 0) && now >= self.last_denial + self.good_period {
            self.level = 0;
            self.strikes = 0;
        }
        let limit = self.inner.quota().limit();
        if cost > limit {
            return Err(());
        }
        let charged = (cost << self.level).min(limit);
        match self.inner.check_n(now, charged) {
            Ok(d) => Ok((
                (d.limit() >> self.level).max(1),
                d.remaining() >> self.level,
            )),
            Err(_) => {
                self.last_denial = now;
                self.strikes += 1;
                if self.strikes == self.strikes_per_level {
                    self.level = (self.level + 1).min(self.max_level);
                    self.strikes = 0;
                }
                Err(())
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn adaptive_follows_its_documented_policy(
        strikes in 1u32..4, max_level in 0u8..4, good_period in 1u64..500,
        limit in 1u64..20,
        steps in prop::collection::vec((0u64..120, 0u64..6), 1..80),
        drawn in origins(),
    ) {
        // At origin 0 and at two others (multiples of the inner window):
        // the adaptive limiter sees `origin + now`, the model `now`.
        let run: u64 = steps.iter().map(|s| s.0).sum::<u64>() + 100;
        for origin in with_zero(drawn).map(|o| aligned_within(o, 100, run)) {
            let adaptive = Adaptive::new(FixedWindow::new(limit, 100), Penalty::new(strikes, max_level, good_period));
            let mut model = PenaltyModel {
                strikes_per_level: strikes, max_level: max_level as u32, good_period,
                level: 0, strikes: 0, last_denial: 0, inner: FixedWindow::new(limit, 100),
            };
            let mut now = 0;
            for &(dt, cost) in &steps {
                now += dt;
                let got = adaptive.check_n(origin.wrapping_add(now), cost).map(|d| (d.limit(), d.remaining())).map_err(|_| ());
                prop_assert_eq!(got, model.check(now, cost), "origin {}", origin);
                prop_assert_eq!(adaptive.level() as u32, model.level);
            }
        }
    }

    #[test]
    fn any_limiter_decides_like_the_limiter_it_wraps(
        kind in prop::sample::select(AlgorithmKind::ALL.to_vec()),
        limit in 1u64..16, window in 1u64..500, burst in 1u64..16, n in 1u32..7,
        steps in prop::collection::vec((0u64..200, 0u64..6), 1..50),
    ) {
        let burst = matches!(kind, AlgorithmKind::TokenBucket | AlgorithmKind::Gcra).then_some(burst);
        let bucketed = kind == AlgorithmKind::BucketedWindow;
        let buckets = bucketed.then_some(n);
        let window = if bucketed { window * n as u64 } else { window };
        let mut config = LimiterConfig::new(kind, limit, window, HZ);
        (config.burst, config.buckets) = (burst, buckets);
        let any: AnyLimiter<16> = AnyLimiter::from_config(config).unwrap();
        let concrete: Box<dyn RateLimiter> = match kind {
            AlgorithmKind::FixedWindow => Box::new(FixedWindow::new(limit, window)),
            AlgorithmKind::SlidingWindow => Box::new(SlidingWindow::new(limit, window)),
            AlgorithmKind::SlidingLog => Box::new(SlidingLog::<16>::new(limit, window)),
            AlgorithmKind::BucketedWindow => Box::new(BucketedWindow::new(limit, window, n)),
            AlgorithmKind::TokenBucket => Box::new(Gcra::new(Quota::per_ticks(limit, window).with_burst(burst.unwrap_or(limit)).at_hz(HZ))),
            AlgorithmKind::LeakyBucket => Box::new(Gcra::new(Quota::per_ticks(limit, window).with_burst(1).at_hz(HZ))),
            AlgorithmKind::Gcra => Box::new(Gcra::new(Quota::per_ticks(limit, window).with_burst(burst.unwrap_or(limit)).at_hz(HZ))),
            other => panic!("no model for {other}"),
        };
        let mut now = 0;
        for (dt, cost) in steps {
            now += dt;
            prop_assert_eq!(any.check_n(now, cost), concrete.check_n(now, cost));
            prop_assert_eq!(any.peek(now), concrete.peek(now));
        }
    }

    /// Reconfiguring to anything keeps the cells in use at `now` in use (up
    /// to the new limit).
    #[test]
    fn reconfiguration_keeps_the_cells_in_use(
        from in prop::sample::select(AlgorithmKind::ALL.to_vec()),
        to in prop::sample::select(AlgorithmKind::ALL.to_vec()),
        limit in 2u64..16, new_limit in 1u64..16, used in 0u64..16, now in 0u64..10_000,
    ) {
        // The bucketed window in 4 buckets (a limit below 16 takes 4 bits each).
        let cfg = |k, limit| {
            let c = LimiterConfig::new(k, limit, 1_000, HZ);
            if k == AlgorithmKind::BucketedWindow { c.with_buckets(4) } else { c }
        };
        let mut l: AnyLimiter<16> = AnyLimiter::from_config(cfg(from, limit)).unwrap();
        let used = if from == AlgorithmKind::LeakyBucket { used.min(1) } else { used.min(limit) };
        if used > 0 { l.check_n(now, used).unwrap(); }
        let before = l.peek(now);
        let in_use = before.limit() - before.remaining();
        l.reconfigure(now, cfg(to, new_limit)).unwrap();
        prop_assert_eq!(l.config().algorithm, to);
        let s = l.peek(now);
        // Between buckets too: the debt is kept as cells used.
        prop_assert_eq!(s.limit() - s.remaining(), in_use.min(s.limit()));
    }
}

#[test]
fn invalid_configurations_are_clear_errors() {
    let cfg = |k, limit, window| LimiterConfig::new(k, limit, window, HZ);
    use AlgorithmKind::*;
    let err = |c| AnyLimiter::<8>::from_config(c).err();
    assert_eq!(
        err(cfg(FixedWindow, 0, 10)),
        Some(LimiterConfigError::Window(WindowError::ZeroLimit))
    );
    assert_eq!(
        err(cfg(SlidingWindow, 5, 0)),
        Some(LimiterConfigError::Window(WindowError::ZeroWindow))
    );
    assert_eq!(
        err(cfg(SlidingLog, 9, 10)),
        Some(LimiterConfigError::Window(WindowError::LimitTooLarge {
            max: 8
        }))
    );
    assert_eq!(
        err(cfg(Gcra, 0, 10)),
        Some(LimiterConfigError::Quota(QuotaError::ZeroRate))
    );
    assert_eq!(
        err(cfg(TokenBucket, 5, 10).with_burst(0)),
        Some(LimiterConfigError::Quota(QuotaError::ZeroBurst))
    );
    assert_eq!(
        err(cfg(LeakyBucket, 5, 10).with_burst(2)),
        Some(LimiterConfigError::BurstNotSupported(LeakyBucket))
    );
    assert_eq!(
        err(cfg(FixedWindow, 5, 10).with_burst(7)),
        Some(LimiterConfigError::BurstNotSupported(FixedWindow))
    );
    assert_eq!(
        err(LimiterConfig::new(Gcra, 5, 10, 0)),
        Some(LimiterConfigError::ZeroHz)
    );
    // The bucketed window: a bucket count, required, dividing the window,
    // and only for it.
    assert_eq!(
        err(cfg(BucketedWindow, 5, 60)),
        Some(LimiterConfigError::BucketsRequired)
    );
    assert_eq!(
        err(cfg(BucketedWindow, 5, 60).with_buckets(7)),
        Some(LimiterConfigError::Window(WindowError::UnevenBuckets))
    );
    assert_eq!(
        err(cfg(BucketedWindow, 5, 60).with_buckets(0)),
        Some(LimiterConfigError::Window(WindowError::ZeroBuckets))
    );
    assert_eq!(
        err(cfg(BucketedWindow, 256, 60).with_buckets(6)),
        Some(LimiterConfigError::Window(WindowError::LimitTooLarge {
            max: 255
        }))
    );
    assert_eq!(
        err(cfg(BucketedWindow, 5, 60).with_buckets(6).with_burst(6)),
        Some(LimiterConfigError::BurstNotSupported(BucketedWindow))
    );
    assert_eq!(
        err(cfg(FixedWindow, 5, 60).with_buckets(6)),
        Some(LimiterConfigError::BucketsNotSupported(FixedWindow))
    );
    assert_eq!(
        "bucketed_window".parse::<AlgorithmKind>(),
        Ok(BucketedWindow)
    );
    assert!(LimiterConfigError::BucketsRequired
        .to_string()
        .contains("bucket"));
    assert!(LimiterConfigError::BucketsNotSupported(Gcra)
        .to_string()
        .contains("gcra"));
    assert_eq!(
        "token-bucket".parse::<AlgorithmKind>(),
        Err(LimiterConfigError::UnknownAlgorithm)
    );
    // A failed reconfiguration changes nothing.
    let mut l = AnyLimiter::<8>::from_config(cfg(FixedWindow, 5, 100)).unwrap();
    l.check_n(0, 2).unwrap();
    assert!(l.reconfigure(0, cfg(SlidingLog, 50, 100)).is_err());
    assert_eq!(l.config().algorithm, FixedWindow);
    assert_eq!(l.peek(0).remaining(), 3);
    // Every error has a message.
    assert!(LimiterConfigError::UnknownAlgorithm
        .to_string()
        .contains("sliding_window"));
}

#[test]
fn reconfiguration_within_a_family_keeps_its_state() {
    use AlgorithmKind::*;
    let cfg = |k, limit, window| LimiterConfig::new(k, limit, window, HZ);
    // Sliding log: the times the old window still counts are kept and
    // judged by the new window.
    let mut log = AnyLimiter::<8>::from_config(cfg(SlidingLog, 4, 100)).unwrap();
    log.check_n(0, 2).unwrap();
    log.check_n(50, 2).unwrap();
    log.reconfigure(120, cfg(SlidingLog, 3, 200)).unwrap();
    // The times at 0 had expired at 120 (they do not come back under the
    // longer window); the two at 50 count until 250.
    assert_eq!(log.peek(120).remaining(), 1);
    assert_eq!(log.peek(249).remaining(), 1);
    assert_eq!(log.peek(250).remaining(), 3);
    // Buckets: the debt is kept as cells used.
    let mut g = AnyLimiter::<1>::from_config(cfg(Gcra, 10, 1_000)).unwrap();
    g.check_n(0, 5).unwrap(); // 5 cells used
    g.reconfigure(0, cfg(TokenBucket, 20, 1_000)).unwrap(); // still 5, at T = 50
    assert_eq!(g.peek(0).remaining(), 15);
    assert_eq!(g.peek(0).reset_after(), 250);
    // Sliding window: both counts carried over.
    let mut s = AnyLimiter::<1>::from_config(cfg(SlidingWindow, 10, 100)).unwrap();
    s.check_n(50, 6).unwrap();
    s.check_n(150, 2).unwrap();
    s.reconfigure(150, cfg(SlidingWindow, 20, 100)).unwrap();
    assert_eq!(s.peek(150).remaining(), 20 - 2 - 3);
    // Bucketed window: the cells of `now`'s window (3 + 4 at 450; bucket
    // 0's 2 have left), in the new grid's current bucket [400, 500): they
    // count for a whole new window, until 400 + 300 = 700.
    let mut b = AnyLimiter::<4>::from_config(cfg(BucketedWindow, 10, 400).with_buckets(4)).unwrap();
    b.check_n(50, 2).unwrap();
    b.check_n(150, 3).unwrap();
    b.check_n(450, 4).unwrap();
    assert_eq!(b.peek(450).remaining(), 3);
    b.reconfigure(450, cfg(BucketedWindow, 20, 300).with_buckets(3))
        .unwrap();
    assert_eq!(b.peek(450).remaining(), 13);
    assert_eq!(b.peek(699).remaining(), 13);
    assert_eq!(b.peek(700).remaining(), 20);
}

/// Admits like `L::admit_n`, revoking when asked, next to a twin that
/// never saw the revoked requests: both must answer alike forever after.
fn revoke_is_as_if_denied<L: Revocable>(
    make: impl Fn() -> L,
    ops: &[(u64, u64, bool)],
) -> Result<(), TestCaseError> {
    let (limiter, twin) = (make(), make());
    let mut now = 0;
    for &(dt, cost, revoke) in ops {
        now += dt;
        match limiter.admit_n(now, cost) {
            Ok((_, receipt)) if revoke => limiter.revoke(receipt),
            got => prop_assert_eq!(got.map(|(d, _)| d), twin.check_n(now, cost)),
        }
        prop_assert_eq!(limiter.peek(now), twin.peek(now));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn a_revoked_admission_is_as_if_denied(
        limit in 1u64..8, window in 1u64..60,
        ops in prop::collection::vec((0u64..30, 0u64..5, prop::bool::ANY), 1..60),
    ) {
        revoke_is_as_if_denied(|| FixedWindow::new(limit, window), &ops)?;
        revoke_is_as_if_denied(|| SlidingWindow::new(limit, window), &ops)?;
        revoke_is_as_if_denied(|| SlidingLog::<8>::new(limit, window), &ops)?;
        revoke_is_as_if_denied(|| Gcra::new(Quota::per_ticks(limit, window).at_hz(HZ)), &ops)?;
        revoke_is_as_if_denied(
            || (FixedWindow::new(limit, window), SlidingWindow::new(limit + 1, window * 2)),
            &ops,
        )?;
    }
}

/// The good period is a difference of `now`s, so it runs across the wrap
/// of the tick counter: penalised just before the wrap, forgiven a good
/// period after it.
#[test]
fn adaptive_forgives_across_the_wrap_of_the_counter() {
    let inner = cellrate::Gcra::new(cellrate::Quota::per_ticks(1, 10).with_burst(2).at_hz(1_000));
    let client = Adaptive::new(inner, Penalty::new(1, 3, 100));
    let start = u64::MAX - 10;
    client.check_n(start, 2).unwrap();
    assert!(client.check(start).is_err()); // one strike: level 1
    assert_eq!(client.level(), 1);
    let later = start.wrapping_add(99);
    assert_eq!(client.peek(later).limit(), 1); // still penalised (2 >> 1)
    let forgiven = start.wrapping_add(100);
    assert_eq!(client.peek(forgiven).limit(), 2);
    assert_eq!(client.check(forgiven).unwrap().limit(), 2);
    assert_eq!(client.level(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// One "tightest" rule: the decision a tuple returns is
    /// `compose::tightest` over its parts' decisions (fewest remaining,
    /// ties to the later reset, then the first), and the HTTP fields
    /// describe that same tier (the rule the header fields follow).
    #[test]
    fn a_tuple_returns_the_tightest_of_its_parts(
        a in 1u64..6, b in 1u64..6, wa in 1u64..40, wb in 1u64..40,
        ops in prop::collection::vec((0u64..20, 1u64..3), 1..40),
    ) {
        let pair = (FixedWindow::new(a, wa), FixedWindow::new(b, wb));
        let twins = (FixedWindow::new(a, wa), FixedWindow::new(b, wb));
        let mut now = 0;
        for (dt, cost) in ops {
            now += dt;
            let (pa, pb) = (twins.0.probe_n(now, cost), twins.1.probe_n(now, cost));
            let got = pair.check_n(now, cost);
            if let (Ok(_), Ok(_)) = (pa, pb) {
                let parts = [twins.0.check_n(now, cost), twins.1.check_n(now, cost)];
                prop_assert_eq!(Some(got), cellrate::compose::tightest(&parts));
                prop_assert_eq!(Some(got), cellrate::compose::tightest(&parts));
            } else {
                prop_assert!(got.is_err());
            }
        }
    }
}

#[test]
fn ties_in_remaining_go_to_the_later_reset_then_the_first() {
    use cellrate::compose::tightest;
    use cellrate::Decision;
    let (early, late) = (Decision::new(5, 2, 100), Decision::new(9, 2, 700));
    assert_eq!(tightest(&[Ok(early), Ok(late)]), Some(Ok(late)));
    assert_eq!(tightest(&[Ok(late), Ok(early)]), Some(Ok(late)));
    let twin = Decision::new(7, 2, 700);
    assert_eq!(tightest(&[Ok(late), Ok(twin)]), Some(Ok(late)));
    assert_eq!(
        tightest(&[Ok(Decision::new(9, 1, 0)), Ok(late)]),
        Some(Ok(Decision::new(9, 1, 0)))
    );
}

/// `Tiers`, `check_all` and tuples of tiers against a model of counters.
mod tiers {
    use cellrate::compose::{check_all, AllTiers};
    use cellrate::window::FixedWindow;
    use cellrate::{Decision, Denied, Gcra, Quota};
    use proptest::prelude::*;

    /// Reference: each tier alone, as the obvious sequential all-or-nothing
    /// rule over plain counters (fixed windows of one long window, so a
    /// tier's state is just "cells used").
    #[derive(Clone, Debug)]
    struct Model {
        limits: Vec<u64>,
        used: Vec<u64>,
    }

    impl Model {
        fn check(&mut self, cost: u64) -> (bool, Option<usize>) {
            let first_refusing =
                (0..self.limits.len()).find(|&i| self.used[i] + cost > self.limits[i]);
            match first_refusing {
                None => {
                    for u in &mut self.used {
                        *u += cost;
                    }
                    (true, None)
                }
                Some(i) => (false, Some(i)),
            }
        }

        /// Whether tier `i`'s answer to a request of `cost` reports the
        /// model's remaining, and a denial only where the cost cannot fit.
        fn agrees(
            &self,
            i: usize,
            result: &Result<Decision, Denied>,
            cost: u64,
        ) -> Result<(), TestCaseError> {
            let left = self.limits[i] - self.used[i];
            match result {
                Ok(d) => prop_assert_eq!(d.remaining(), left),
                Err(Denied::Limited(l)) => {
                    prop_assert_eq!(l.remaining(), left);
                    prop_assert!(left < cost);
                }
                Err(Denied::CostTooLarge { limit, .. }) => prop_assert!(cost > *limit),
            }
            Ok(())
        }
    }

    proptest! {
        /// Three fixed windows as a tuple and as an array agree with the
        /// model on admission, on every tier's remaining, and the refusing
        /// tier is one that cannot fit the cost.
        #[test]
        fn tiers_match_the_model(
            limits in prop::collection::vec(1u64..8, 3),
            costs in prop::collection::vec(1u64..5, 1..30),
        ) {
            let tuple = (
                FixedWindow::new(limits[0], 1_000_000),
                FixedWindow::new(limits[1], 1_000_000),
                FixedWindow::new(limits[2], 1_000_000),
            );
            let array = [
                FixedWindow::new(limits[0], 1_000_000),
                FixedWindow::new(limits[1], 1_000_000),
                FixedWindow::new(limits[2], 1_000_000),
            ];
            let mut model = Model { limits: limits.clone(), used: vec![0; 3] };
            for cost in costs {
                let (admit, first) = model.check(cost);
                for t in [tuple.check_tiers(0, cost), array.check_tiers(0, cost)] {
                    prop_assert_eq!(t.is_admitted(), admit);
                    prop_assert_eq!(t.refused().is_some(), !admit);
                    if let Some(i) = t.refused() {
                        prop_assert!(model.used[i] + cost > model.limits[i]);
                        prop_assert!(i >= first.unwrap());
                    }
                    for (i, r) in t.results().iter().enumerate() {
                        model.agrees(i, r, cost)?;
                    }
                }
            }
        }
    }

    proptest! {
        /// `check_all` over any number of tiers (fixed windows of one long
        /// window) against the model: admission, every tier's remaining,
        /// and a tier beyond `results` is neither asked nor charged.
        #[test]
        fn check_all_matches_the_model(
            limits in prop::collection::vec(1u64..8, 0..6),
            room in 0usize..7,
            costs in prop::collection::vec(1u64..5, 1..20),
        ) {
            let tiers: Vec<FixedWindow> =
                limits.iter().map(|&l| FixedWindow::new(l, 1_000_000)).collect();
            let checked = limits.len().min(room);
            let mut model = Model {
                limits: limits[..checked].to_vec(),
                used: vec![0; checked],
            };
            for cost in costs {
                let (admit, _) = model.check(cost);
                let mut results = vec![Ok(Decision::new(0, 0, 0)); room];
                prop_assert_eq!(check_all(&tiers, 0, cost, &mut results), checked);
                prop_assert_eq!(results[..checked].iter().all(Result::is_ok), admit);
                for (i, r) in results[..checked].iter().enumerate() {
                    model.agrees(i, r, cost)?;
                }
                for (i, t) in tiers.iter().enumerate().skip(checked) {
                    prop_assert_eq!(t.peek(0).remaining(), limits[i]);
                }
            }
        }
    }

    #[test]
    fn a_denied_request_charges_no_tier_and_reports_all() {
        let a = Gcra::new(Quota::per_second(10).at_hz(1_000));
        let b = FixedWindow::new(1, 1_000);
        let c = Gcra::new(Quota::per_second(2).at_hz(1_000));
        let tiers = (&a, &b, &c);
        assert!(tiers.check_tiers(0, 1).is_admitted());
        let t = tiers.check_tiers(0, 1);
        assert_eq!(t.refused(), Some(1));
        assert_eq!(t.results()[0].unwrap().remaining(), 9);
        // The third tier was asked and given back: one cell still fits.
        assert_eq!(t.results()[2].unwrap().remaining(), 1);
        assert_eq!(c.peek(0).remaining(), 1);
        assert_eq!(a.peek(0).remaining(), 9);
        assert_eq!(t.tightest(), Some(t.results()[1]));
        // A later tier that cannot fit either reports its own wait, and the
        // refusing tier is the one with the longest wait.
        c.check(0).unwrap();
        let t = tiers.check_tiers(100, 1);
        assert_eq!(t.refused(), Some(1));
        let Err(Denied::Limited(l)) = t.results()[2] else {
            panic!("{t:?}")
        };
        assert_eq!(l.retry_after(), 400);
        assert_eq!(t.denied().unwrap().retry_after(), Some(900));
    }
}
