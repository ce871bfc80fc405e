//! `Gcra` and `LocalGcra` against an ideal GCRA in exact rational arithmetic.
//!
//! The reference below is written for clarity, not speed: every time is an
//! integer count of `1/den` ticks, where `T = interval/den` is the emission
//! interval exactly as asked (never reduced, never rounded), and `retry_after`
//! is found by searching for the first tick that conforms rather than by a
//! formula.
//!
//! Every case runs at origin 0 and again at two other origins of the clock
//! (`support/origin.rs`): the limiters see `origin + now` (wrapping), the
//! reference `now`, and every answer must be the same.
use core::time::Duration;

use cellrate::{Decision, Denied, Gcra, LocalGcra, Quota, QuotaError};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{origins, with_zero};

/// The ideal GCRA of ITU-T I.371's virtual scheduling algorithm.
#[derive(Clone, Debug)]
struct Ideal {
    /// Units per tick.
    den: u128,
    /// T in units.
    interval: u128,
    burst: u128,
    /// Extra tolerance in units, beyond `(burst − 1)·T` (0 for the ideal
    /// quota as asked; see `never_admits_more_than_the_ideal`).
    extra: u128,
    /// Theoretical arrival time in units.
    tat: u128,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Admitted {
        remaining: u128,
        reset_after: u128,
    },
    Denied {
        retry_after: u128,
        reset_after: u128,
    },
    TooLarge,
}

impl Ideal {
    /// `cells` per `period_ns` nanoseconds on a clock of `hz`:
    /// T = period_ns · hz / (10⁹ · cells) ticks.
    fn new(cells: u64, period_ns: u64, hz: u64, burst: u64) -> Self {
        Ideal {
            den: 1_000_000_000 * cells as u128,
            interval: period_ns as u128 * hz as u128,
            burst: burst as u128,
            extra: 0,
            tat: 0,
        }
    }

    /// The GCRA a quota really enforces: `T = emission_interval / scale`
    /// ticks, with the quota's burst.
    fn effective(quota: &Quota) -> Self {
        Ideal {
            den: quota.scale() as u128,
            interval: quota.emission_interval() as u128,
            burst: quota.burst() as u128,
            extra: 0,
            tat: 0,
        }
    }

    fn units(&self, now: u64) -> u128 {
        now as u128 * self.den
    }

    /// The GCRA test: does `cost` conform at `now`?
    fn conforms(&self, now: u64, cost: u64) -> bool {
        let now = self.units(now);
        let start = self.tat.max(now);
        start + cost as u128 * self.interval - now <= self.burst * self.interval + self.extra
    }

    /// Units of debt: how far the TAT is ahead of now.
    fn debt(&self, now: u64) -> u128 {
        self.tat.saturating_sub(self.units(now))
    }

    fn remaining(&self, now: u64) -> u128 {
        let room = (self.burst * self.interval).saturating_sub(self.debt(now));
        room / self.interval
    }

    fn reset_after(&self, now: u64) -> u128 {
        self.debt(now).div_ceil(self.den)
    }

    /// The first whole tick at or after `now` at which `cost` conforms,
    /// found by binary search (conformance only improves as time passes).
    fn retry_after(&self, now: u64, cost: u64) -> u128 {
        let (mut lo, mut hi) = (0u128, 1u128);
        while !self.conforms(now + hi as u64, cost) {
            hi *= 2;
        }
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.conforms(now + mid as u64, cost) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// Gives back `cost` cells at `now`: the TAT moves back by `cost·T`,
    /// never before `now`; a full limiter stays as it is.
    fn refund(&mut self, now: u64, cost: u64) {
        let now = self.units(now);
        if self.tat > now {
            self.tat = self
                .tat
                .saturating_sub(cost as u128 * self.interval)
                .max(now);
        }
    }

    fn check(&mut self, now: u64, cost: u64) -> Outcome {
        if cost as u128 > self.burst {
            return Outcome::TooLarge;
        }
        // The crate's contract: a cost of 0 is a peek, answered as admitted.
        if cost == 0 || self.conforms(now, cost) {
            if cost > 0 {
                self.tat = self.tat.max(self.units(now)) + cost as u128 * self.interval;
            }
            Outcome::Admitted {
                remaining: self.remaining(now),
                reset_after: self.reset_after(now),
            }
        } else {
            Outcome::Denied {
                retry_after: self.retry_after(now, cost),
                reset_after: self.reset_after(now),
            }
        }
    }
}

fn observed(result: Result<Decision, Denied>) -> Outcome {
    match result {
        Ok(d) => Outcome::Admitted {
            remaining: d.remaining() as u128,
            reset_after: d.reset_after() as u128,
        },
        Err(Denied::Limited(l)) => Outcome::Denied {
            retry_after: l.retry_after() as u128,
            reset_after: l.reset_after() as u128,
        },
        Err(Denied::CostTooLarge { .. }) => Outcome::TooLarge,
    }
}

#[derive(Clone, Debug)]
struct Spec {
    cells: u64,
    period_ns: u64,
    hz: u64,
    burst: u64,
}

impl Spec {
    fn quota(&self) -> Result<Quota, QuotaError> {
        Quota::per_duration(self.cells, Duration::from_nanos(self.period_ns))
            .with_burst(self.burst)
            .try_at_hz(self.hz)
    }
    /// `frac/64` of an emission interval, in whole ticks (rounded down).
    fn ticks(&self, frac: u64) -> u64 {
        let t = self.period_ns as u128 * self.hz as u128 * frac as u128
            / (1_000_000_000 * self.cells as u128 * 64);
        t.min(u64::MAX as u128 / 4) as u64
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    let hz = prop_oneof![
        Just(1_000u64),
        Just(32_768),
        Just(1_000_000),
        Just(1_000_000_000),
        Just(3_000_000_000),
        1_000u64..=1_000_000_000,
    ];
    let period_ns = prop_oneof![
        Just(1_000_000_000u64),
        Just(60_000_000_000),
        Just(3_600_000_000_000),
        Just(86_400_000_000_000),
        (1u64..=100_000).prop_map(|ms| ms * 1_000_000),
    ];
    let cells = prop_oneof![1u64..=10, 1u64..=1_000_000, 1u64..=1_000_000_000];
    let burst = prop_oneof![1u64..=10, 1u64..=1_000_000];
    (hz, period_ns, cells, burst).prop_map(|(hz, period_ns, cells, burst)| Spec {
        cells,
        period_ns,
        hz,
        burst,
    })
}

#[derive(Clone, Debug)]
struct Step {
    /// Signed time step in 64ths of T (negative: the clock steps back).
    frac: i64,
    /// Extra raw ticks, to land between multiples of T.
    jitter: u64,
    cost: u64,
    /// Give `cost` cells back instead of checking them (where a test
    /// refunds).
    refund: bool,
}

fn steps(burst_hint: u64) -> impl Strategy<Value = Vec<Step>> {
    let step = (
        prop_oneof![8 => 0i64..=192, 1 => -128i64..0],
        0u64..=3,
        prop_oneof![
            6 => Just(1u64),
            2 => 0u64..=burst_hint.min(8),
            1 => Just(0u64),
            1 => 0u64..=burst_hint.saturating_add(2),
        ],
        prop_oneof![7 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(frac, jitter, cost, refund)| Step {
            frac,
            jitter,
            cost,
            refund,
        });
    prop::collection::vec(step, 1..80)
}

fn case() -> impl Strategy<Value = (Spec, u64, Vec<Step>, [u64; 2])> {
    spec().prop_flat_map(|s| {
        let b = s.burst;
        (Just(s), 0u64..=1_000_000_000_000, steps(b), origins())
    })
}

/// The next `now` of the reference (from 0; the limiters see it shifted by
/// the origin). Steps are at most three emission intervals, far below the
/// longest gap between checks ([`Quota::horizon_ticks`]), and the clock
/// steps back by at most two.
fn advance(spec: &Spec, now: u64, step: &Step) -> u64 {
    let delta = spec
        .ticks(step.frac.unsigned_abs())
        .saturating_add(step.jitter);
    if step.frac < 0 {
        now.saturating_sub(delta)
    } else {
        now.saturating_add(delta)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// Exact quotas: every decision, every peek and every refund is the
    /// ideal one, at every origin, and `retry_after` is exact (admits at
    /// `now + retry_after`, denies a tick earlier).
    #[test]
    fn exact_quotas_match_the_ideal((spec, start, steps, drawn) in case()) {
        let quota = spec.quota();
        prop_assume!(matches!(quota, Ok(q) if q.is_exact()));
        let quota = quota.unwrap();
        for origin in with_zero(drawn) {
            let at = |now: u64| origin.wrapping_add(now);
            let shared = Gcra::new(quota);
            let mut local = LocalGcra::new(quota);
            let mut ideal = Ideal::new(spec.cells, spec.period_ns, spec.hz, spec.burst);
            let mut now = start;
            for step in &steps {
                now = advance(&spec, now, step);
                let peek = shared.peek(at(now));
                prop_assert_eq!(peek.remaining() as u128, ideal.remaining(now), "origin {}", origin);
                prop_assert_eq!(peek.reset_after() as u128, ideal.reset_after(now), "origin {}", origin);
                prop_assert_eq!(peek.retry_after() as u128, ideal.retry_after(now, 1), "origin {}", origin);
                prop_assert_eq!(local.peek(at(now)), peek);

                if step.refund {
                    ideal.refund(now, step.cost);
                    let back = shared.refund_n(at(now), step.cost);
                    prop_assert_eq!(local.refund_n(at(now), step.cost), back);
                    prop_assert_eq!(back.remaining() as u128, ideal.remaining(now), "refund, origin {}", origin);
                    prop_assert_eq!(back.reset_after() as u128, ideal.reset_after(now), "refund, origin {}", origin);
                    prop_assert_eq!(back.retry_after() as u128, ideal.retry_after(now, 1), "refund, origin {}", origin);
                    continue;
                }
                let before = ideal.clone();
                let want = ideal.check(now, step.cost);
                let got = shared.check_n(at(now), step.cost);
                prop_assert_eq!(&observed(got), &want, "shared at now={} cost={} origin {}", now, step.cost, origin);
                prop_assert_eq!(&observed(LocalGcra::check_n(&mut local, at(now), step.cost)), &want, "local, origin {}", origin);
                if let Outcome::Denied { retry_after, .. } = want {
                    // Exactness of retry_after, on the reference itself.
                    let at = now + retry_after as u64;
                    prop_assert!(before.conforms(at, step.cost));
                    prop_assert!(retry_after == 0 || !before.conforms(at - 1, step.cost));
                }
            }
        }
    }

    /// Every quota, exact or rounded, on a clock that never steps back: what
    /// the limiter admits is a stream the ideal GCRA of the quota *as asked*
    /// also admits, request by request.
    #[test]
    fn never_admits_more_than_the_ideal_on_a_forward_clock((spec, start, steps, drawn) in case()) {
        let Ok(quota) = spec.quota() else { return Ok(()) };
        for origin in with_zero(drawn) {
            let shared = Gcra::new(quota);
            let mut ideal = Ideal::new(spec.cells, spec.period_ns, spec.hz, spec.burst);
            let mut now = start;
            for step in &steps {
                now = advance(&spec, now, step).max(now);
                if step.cost > 0 && shared.check_n(origin.wrapping_add(now), step.cost).is_ok() {
                    prop_assert!(ideal.conforms(now, step.cost), "over-admission at now={} cost={} origin {}", now, step.cost, origin);
                    ideal.check(now, step.cost);
                }
            }
        }
    }

    /// Every quota, with a clock that steps back: the admitted stream conforms
    /// to the ideal GCRA as asked with its tolerance enlarged by the stated
    /// bound `E = (1 − T/T′)·δ`, `δ` the largest step behind the latest
    /// admitted `now` (zero for exact quotas, so they never over-admit).
    #[test]
    fn never_admits_more_than_the_ideal((spec, start, steps, drawn) in case()) {
        let Ok(quota) = spec.quota() else { return Ok(()) };
        for origin in with_zero(drawn) {
        let shared = Gcra::new(quota);
        let mut ideal = Ideal::new(spec.cells, spec.period_ns, spec.hz, spec.burst);
        // 1 − T/T′ in the ideal's units: E = δ·(den·T′ − T·scale)/T′ units,
        // with T = interval/den ticks and T′ = emission_interval/scale ticks.
        let rounded = quota.emission_interval() as u128;
        let gap = ideal.den * rounded - ideal.interval * quota.scale() as u128;
        prop_assert_eq!(gap == 0, quota.is_exact());
        let mut now = start;
        let mut latest: Option<u64> = None;
        let mut largest_step_back = 0u64;
        for step in &steps {
            now = advance(&spec, now, step);
            if step.cost > 0 && shared.check_n(origin.wrapping_add(now), step.cost).is_ok() {
                let behind = latest.map_or(0, |l| l.saturating_sub(now));
                largest_step_back = largest_step_back.max(behind);
                ideal.extra = (largest_step_back as u128 * gap).div_ceil(rounded);
                prop_assert!(ideal.conforms(now, step.cost), "over-admission beyond the bound at now={} cost={} E={}", now, step.cost, ideal.extra);
                ideal.check(now, step.cost);
                latest = Some(latest.map_or(now, |l| l.max(now)));
            }
        }
        // Under one cell of extra tolerance while the steps back stay under 100·T.
        if (largest_step_back as u128) * ideal.den < 100 * ideal.interval {
            prop_assert!(ideal.extra < ideal.interval || ideal.extra == 0);
        }
        }
    }

    /// Every quota: the requested burst is the quota's burst, `b` cells at
    /// once from full are admitted (one call or `b` calls at one `now`), and
    /// no cost up to the burst is ever "too large".
    #[test]
    fn the_burst_is_what_was_asked((spec, start, steps, drawn) in case()) {
        let Ok(quota) = spec.quota() else { return Ok(()) };
        prop_assert_eq!(quota.burst(), spec.burst);
        // Any `now` will do: the first check of a new limiter, at any origin.
        let now = start.wrapping_add(drawn[1]);
        prop_assert!(Gcra::new(quota).check_n(now, spec.burst).is_ok());
        prop_assert!(LocalGcra::new(quota).check_n(now, spec.burst).is_ok());
        if spec.burst <= 1_000 {
            let one_by_one = Gcra::new(quota);
            for i in 0..spec.burst {
                prop_assert!(one_by_one.check(now).is_ok(), "cell {} of {}", i + 1, spec.burst);
            }
            prop_assert!(one_by_one.check(now).is_err());
        }
        let g = Gcra::new(quota);
        let mut t = now;
        for step in &steps {
            t = advance(&spec, t, step);
            if step.cost <= spec.burst {
                let too_large = matches!(g.check_n(t, step.cost), Err(Denied::CostTooLarge { .. }));
                prop_assert!(!too_large, "cost {} of burst {} called too large", step.cost, spec.burst);
            }
        }
    }

    /// Rounded quotas are an exact GCRA at their effective rate: every
    /// decision and number matches the rational model of `T′`, and
    /// `retry_after` is exact (admits at `now + retry_after`, denies a tick
    /// earlier).
    #[test]
    fn rounded_quotas_match_their_effective_gcra((spec, start, steps, drawn) in case()) {
        let quota = spec.quota();
        prop_assume!(matches!(quota, Ok(q) if !q.is_exact()));
        let quota = quota.unwrap();
        for origin in with_zero(drawn) {
            let at = |now: u64| origin.wrapping_add(now);
            let shared = Gcra::new(quota);
            let mut local = LocalGcra::new(quota);
            let mut model = Ideal::effective(&quota);
            let mut now = start;
            for step in &steps {
                now = advance(&spec, now, step);
                let before = model.clone();
                let want = model.check(now, step.cost);
                prop_assert_eq!(&observed(shared.check_n(at(now), step.cost)), &want, "shared at now={} cost={} origin {}", now, step.cost, origin);
                prop_assert_eq!(&observed(LocalGcra::check_n(&mut local, at(now), step.cost)), &want, "local, origin {}", origin);
                if let Outcome::Denied { retry_after, .. } = want {
                    let at = now + retry_after as u64;
                    prop_assert!(before.conforms(at, step.cost));
                    prop_assert!(retry_after == 0 || !before.conforms(at - 1, step.cost));
                }
            }
        }
    }

    /// A rounded quota never enforces a faster rate than asked, and loses at
    /// most 1 %.
    #[test]
    fn rounding_is_toward_admitting_less(spec in spec()) {
        match spec.quota() {
            Ok(q) => {
                let rate = q.effective_rate();
                // rate.cells()/rate ticks ≤ cells/(period·hz): cross-multiplied.
                let effective = rate.cells() as u128 * spec.period_ns as u128 * spec.hz as u128;
                let asked = spec.cells as u128 * rate.period_ticks(0).unwrap() as u128 * 1_000_000_000;
                prop_assert!(effective <= asked);
                prop_assert!(effective * 100 >= asked * 99);
                prop_assert_eq!(q.is_exact(), effective == asked);
            }
            Err(e) => prop_assert!(matches!(e, QuotaError::Unrepresentable | QuotaError::Overflow), "{:?}", e),
        }
    }

    /// `reserve_n` (the leaky bucket as a queue) hands out departure ticks that
    /// a policer with the same quota, seeing each send at its departure tick,
    /// admits — and never later than needed — at every origin. A
    /// reservation is refused only if it could not leave within `max_wait`
    /// or its queue would reach more than `MAX_SPAN` sub-ticks ahead (then
    /// with no finite wait).
    #[test]
    fn shaped_departures_pass_a_policer((spec, start, steps, drawn) in case()) {
        let Ok(quota) = spec.quota() else { return Ok(()) };
        prop_assume!(quota.is_exact());
        for origin in with_zero(drawn) {
            let shaper = Gcra::new(quota);
            let mut policer = Ideal::new(spec.cells, spec.period_ns, spec.hz, spec.burst);
            // Sub-ticks to the policer's units: for an exact quota, T is
            // `interval/den` ticks and `emission_interval/scale` ticks alike.
            let reach = cellrate::MAX_SPAN as u128 * policer.den / quota.scale() as u128;
            let mut now = start;
            let mut last_departure = 0u64;
            for step in &steps {
                now = advance(&spec, now, step).max(now); // a shaper's clock goes forward
                if step.cost == 0 {
                    continue;
                }
                // Waits without a bound, or up to four emission intervals.
                let max_wait = if step.jitter % 2 == 0 { u64::MAX } else { spec.ticks(256) };
                match shaper.reserve_n(origin.wrapping_add(now), step.cost, max_wait) {
                    Ok(r) => {
                        let departure = now + r.send_after();
                        // Sends leave in order of reservation.
                        prop_assert!(departure >= last_departure);
                        last_departure = departure;
                        prop_assert!(policer.conforms(departure, step.cost));
                        prop_assert!(r.send_after() == 0 || !policer.conforms(departure - 1, step.cost));
                        policer.tat = policer.tat.max(policer.units(departure)) + step.cost as u128 * policer.interval;
                        prop_assert!(policer.tat - policer.units(now) <= reach);
                    }
                    Err(Denied::CostTooLarge { .. }) => prop_assert!(step.cost > spec.burst),
                    Err(Denied::Limited(l)) => {
                        let wait = policer.retry_after(now, step.cost);
                        let departure = policer.units(now + wait as u64);
                        let queued = policer.tat.max(departure) + step.cost as u128 * policer.interval - policer.units(now);
                        let in_time = policer.conforms(now.saturating_add(max_wait), step.cost);
                        prop_assert!(queued > reach || !in_time);
                        if in_time {
                            // Refused for its reach alone: never.
                            prop_assert_eq!(l.retry_after(), u64::MAX.div_ceil(quota.scale()));
                        }
                    }
                }
            }
        }
    }
}
