//! Reconfiguration is monotone: what a client may take at the instant of a
//! change of quota.
//!
//! The model below is written for clarity: an ideal GCRA in exact rational
//! time (units of `1/cells` ticks, so `T = period` units), from which a
//! client's **cells used** at `now` are `max(0, TAT − now) / T`, a rational.
//! Under a quota of burst `B` the client may take `n` cells at once iff
//! `used + n ≤ B`, so the most it may take is `max(0, B − ⌈used⌉)`. A change
//! keeps the cells used (at most the new burst), so at its instant the new
//! rules allow
//! `max(0, B′ − ⌈used⌉)`: exactly the old allowance plus `B′ − B` (floored
//! at 0) whatever the rates. Hence:
//!
//! * a **raise** (rate and burst both at least the old) never refuses, at
//!   that instant, a cost the old rules admit;
//! * a **lower** (both at most the old) never admits a cost the old rules
//!   refuse;
//! * a **mixed** change moves the allowance by exactly the burst difference.
//!
//! Each case runs a random history on the limiter and the model, checks
//! that they agree, changes the quota at a random instant, and compares the
//! reconfigured limiter with a clone of the old one and with the model.
//! Every case runs at clock origins 0, Unix microseconds, near the top of
//! the `u64` range, and one drawn at random.
use cellrate::{Gcra, LocalGcra, Quota, SetQuotaError};
use proptest::prelude::*;

const HZ: u64 = 1_000_000;

/// A quota as the test draws it: `cells` per `period` ticks, `burst`.
#[derive(Clone, Copy, Debug)]
struct Rules {
    cells: u64,
    period: u64,
    burst: u64,
}

impl Rules {
    fn quota(self) -> Quota {
        Quota::per_ticks(self.cells, self.period)
            .with_burst(self.burst)
            .at_hz(HZ)
    }

    /// Whether `self`'s rate is at least `other`'s: `cells/period ≥ cells′/period′`.
    fn rate_at_least(self, other: Rules) -> bool {
        self.cells as u128 * other.period as u128 >= other.cells as u128 * self.period as u128
    }
}

/// The ideal GCRA, times in units of `1/cells` ticks (so `T = period`).
#[derive(Clone, Debug)]
struct Ideal {
    rules: Rules,
    /// The theoretical arrival time, in units; `None` for a new client.
    tat: Option<i128>,
}

impl Ideal {
    fn new(rules: Rules) -> Self {
        Ideal { rules, tat: None }
    }

    fn units(&self, now: i128) -> i128 {
        now * self.rules.cells as i128
    }

    /// `(numerator, denominator)` of the cells used at `now`.
    fn used(&self, now: i128) -> (i128, i128) {
        let owed = self.tat.map_or(0, |tat| (tat - self.units(now)).max(0));
        (owed, self.rules.period as i128)
    }

    /// The most cells a request at `now` may take: `max(0, B − ⌈used⌉)`.
    fn allowance(&self, now: i128) -> u64 {
        let (num, den) = self.used(now);
        let used = (num + den - 1) / den;
        (self.rules.burst as i128 - used).max(0) as u64
    }

    /// Admits `cost ≥ 1` cells at `now` iff `used + cost ≤ B`.
    fn check(&mut self, now: i128, cost: u64) -> bool {
        if cost > self.allowance(now) {
            return false;
        }
        let base = self.tat.unwrap_or(i128::MIN).max(self.units(now));
        self.tat = Some(base + (cost * self.rules.period) as i128);
        true
    }

    /// The model of a change: the cells used are kept, in the new units.
    fn change(&mut self, now: i128, rules: Rules) {
        let (num, den) = self.used(now);
        // used · T′ in the new units (T′ = period′), rounded up: never fewer
        // cells than were used; and never more than the new burst.
        let owed = (num * rules.period as i128 + den - 1) / den;
        let owed = owed.min((rules.burst * rules.period) as i128);
        let now_units = now * rules.cells as i128;
        self.rules = rules;
        self.tat = Some(now_units + owed);
    }
}

fn rules() -> impl Strategy<Value = Rules> {
    (1u64..=50, 1u64..=5_000, 1u64..=60).prop_map(|(cells, period, burst)| Rules {
        cells,
        period,
        burst,
    })
}

/// A raise, a lower or a mixed change of `old`, in roughly equal shares.
fn change_of(old: Rules) -> impl Strategy<Value = Rules> {
    let raise = (1u64..=4, 1u64..=4, 0u64..=60).prop_map(move |(c, p, b)| Rules {
        cells: old.cells * c,
        period: (old.period / p).max(1),
        burst: old.burst + b,
    });
    let lower = (1u64..=4, 1u64..=4, 0u64..=60).prop_map(move |(c, p, b)| Rules {
        cells: (old.cells / c).max(1),
        period: old.period * p,
        burst: old.burst.saturating_sub(b).max(1),
    });
    prop_oneof![raise, lower, rules()]
}

/// A history: (ticks since the previous request, cost).
fn history(max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..3_000, 1u64..=max_cost + 1), 0..30)
}

fn origin() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1_796_169_600u64 * 1_000_000),
        Just(u64::MAX - 999),
        any::<u64>(),
    ]
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Raise,
    Lower,
    Mixed,
}

fn kind(old: Rules, new: Rules) -> Kind {
    if new.burst >= old.burst && new.rate_at_least(old) {
        Kind::Raise
    } else if new.burst <= old.burst && old.rate_at_least(new) {
        Kind::Lower
    } else {
        Kind::Mixed
    }
}

/// The largest cost a `LocalGcra` admits at `now`, found by trying every
/// cost on a clone (nothing is consumed).
fn most_admitted(g: &LocalGcra, now: u64) -> u64 {
    let burst = g.quota().burst();
    (1..=burst)
        .rev()
        .find(|&n| g.clone().check_n(now, n).is_ok())
        .unwrap_or(0)
}

/// The properties at the instant of a change from `old` to `new`, given the
/// most the old rules admit (`before`), the new ones (`after`) and the model.
fn monotone(
    old: Rules,
    new: Rules,
    before: u64,
    after: u64,
    model: u64,
) -> Result<(), TestCaseError> {
    // The exact bound, for every kind of change.
    let moved = (before as i128 + new.burst as i128 - old.burst as i128).max(0) as u64;
    prop_assert_eq!(after, moved, "old allowance {} → {}", before, after);
    prop_assert_eq!(after, model, "the model allows {}", model);
    match kind(old, new) {
        Kind::Raise => prop_assert!(after >= before, "a raise refused what the old admitted"),
        Kind::Lower => prop_assert!(after <= before, "a lower admitted what the old refused"),
        Kind::Mixed => {}
    }
    Ok(())
}

/// Runs `steps` from `start` on the limiter (through `check`) and the model,
/// which must agree; returns the instant of the last request.
fn replay(
    start: u64,
    steps: &[(u64, u64)],
    ideal: &mut Ideal,
    mut check: impl FnMut(u64, u64) -> bool,
) -> Result<u64, TestCaseError> {
    let mut now = start;
    for &(dt, cost) in steps {
        now += dt;
        let want = ideal.check(now as i128, cost);
        prop_assert_eq!(check(now, cost), want, "cost {} at {}", cost, now);
    }
    Ok(now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// `LocalGcra::set_quota`: every quota that builds at the limiter's
    /// frequency is accepted, and the allowance at the instant moves by
    /// exactly the burst difference.
    #[test]
    fn local_gcra_changes_are_monotone(
        (old, new) in rules().prop_flat_map(|old| (Just(old), change_of(old))),
        steps in history(60),
        gap in 0u64..6_000,
        origin in origin(),
    ) {
        let mut ideal = Ideal::new(old);
        let mut g = LocalGcra::new(old.quota());
        let end = replay(0, &steps, &mut ideal, |now, cost| {
            g.check_n(origin.wrapping_add(now), cost).is_ok()
        })?;
        let (now, at) = (end + gap, origin.wrapping_add(end + gap));
        let before = most_admitted(&g, at);
        prop_assert_eq!(before, ideal.allowance(now as i128));
        prop_assert_eq!(g.set_quota(at, new.quota()), Ok(new.quota()));
        ideal.change(now as i128, new);
        let after = most_admitted(&g, at);
        monotone(old, new, before, after, ideal.allowance(now as i128))?;
        prop_assert_eq!(g.peek(at).remaining(), after);
        // And the limiter goes on as the model does.
        replay(now, &steps, &mut ideal, |t, cost| {
            g.check_n(origin.wrapping_add(t), cost).is_ok()
        }).map(|_| ())?;
    }

    /// `Gcra::set_quota_mut`: every quota that builds at the limiter's
    /// frequency is accepted, whatever its scale, with the properties of
    /// `LocalGcra::set_quota`.
    #[test]
    fn gcra_changes_through_mut_take_every_quota(
        (old, new) in rules().prop_flat_map(|old| (Just(old), change_of(old))),
        steps in history(60),
        gap in 0u64..6_000,
        origin in origin(),
    ) {
        let mut ideal = Ideal::new(old);
        let mut g = Gcra::new(old.quota());
        let end = replay(0, &steps, &mut ideal, |now, cost| {
            g.check_n(origin.wrapping_add(now), cost).is_ok()
        })?;
        let (now, at) = (end + gap, origin.wrapping_add(end + gap));
        let before = g.peek(at).remaining();
        prop_assert_eq!(before, ideal.allowance(now as i128));
        prop_assert_eq!(g.set_quota_mut(at, new.quota()), Ok(new.quota()));
        ideal.change(now as i128, new);
        let after = g.peek(at).remaining();
        monotone(old, new, before, after, ideal.allowance(now as i128))?;
        replay(now, &steps, &mut ideal, |t, cost| {
            g.check_n(origin.wrapping_add(t), cost).is_ok()
        }).map(|_| ())?;
    }

    /// `Gcra::set_quota` run alone: the same properties, for every quota it
    /// can express at its scale (the others are refused, changing nothing).
    #[test]
    fn gcra_changes_are_monotone(
        (old, new) in rules().prop_flat_map(|old| (Just(old), change_of(old))),
        steps in history(60),
        gap in 0u64..6_000,
        origin in origin(),
    ) {
        let mut ideal = Ideal::new(old);
        let g = Gcra::new(old.quota());
        let mut local = LocalGcra::new(old.quota());
        let end = replay(0, &steps, &mut ideal, |now, cost| {
            let at = origin.wrapping_add(now);
            let shared = g.check_n(at, cost).is_ok();
            assert_eq!(local.check_n(at, cost).is_ok(), shared);
            shared
        })?;
        let (now, at) = (end + gap, origin.wrapping_add(end + gap));
        let before = most_admitted(&local, at);
        prop_assert_eq!(g.peek(at).remaining(), before);
        match g.set_quota(at, new.quota()) {
            Ok(set) => prop_assert_eq!(set.burst(), new.burst),
            Err(e) => {
                prop_assert!(matches!(e, SetQuotaError::Quota(_)), "{:?}", e);
                prop_assert_eq!(g.quota(), old.quota());
                return Ok(());
            }
        }
        ideal.change(now as i128, new);
        let after = g.peek(at).remaining();
        monotone(old, new, before, after, ideal.allowance(now as i128))?;
        if after < new.burst {
            prop_assert!(g.check_n(at, after + 1).is_err());
        }
        if after > 0 {
            prop_assert_eq!(g.check_n(at, after).map(|d| d.remaining()), Ok(0));
        }
    }
}

/// 100/min with 90 left, raised to 100/s: the 10 used stay used, nothing
/// more (debt kept as time would refuse for about 5 s).
#[test]
fn a_raise_from_per_minute_to_per_second_keeps_what_was_left() {
    let hz = 1_000;
    for origin in [0, 1_796_169_600_000, u64::MAX - 10] {
        let mut g = LocalGcra::new(Quota::per_minute(100).at_hz(hz));
        let shared = Gcra::new(Quota::per_minute(100).at_hz(hz));
        g.check_n(origin, 10).unwrap();
        shared.check_n(origin, 10).unwrap();
        assert_eq!(g.peek(origin).remaining(), 90);
        g.set_quota(origin, Quota::per_second(100).at_hz(hz))
            .unwrap();
        shared
            .set_quota(origin, Quota::per_second(100).at_hz(hz))
            .unwrap();
        assert_eq!(g.check_n(origin, 90).unwrap().remaining(), 0);
        assert_eq!(shared.check_n(origin, 90).unwrap().remaining(), 0);
    }
}

/// 100/min (burst 250) with about 200 left, raised to 10⁹/s with a burst of
/// 10⁶: a finer scale than the limiter was made with, accepted, and the
/// client keeps what it had (plus the new burst's room).
#[test]
fn a_raise_to_a_finer_scale_is_accepted_and_keeps_what_was_left() {
    let hz = 1_000_000;
    let old = Quota::per_minute(100).with_burst(250).at_hz(hz);
    let new = Quota::per_second(1_000_000_000)
        .with_burst(1_000_000)
        .at_hz(hz);
    assert_ne!(old.scale(), new.scale());
    for origin in [0, 1_796_169_600_000_000, u64::MAX - 10] {
        let mut g = LocalGcra::new(old);
        g.check_n(origin, 50).unwrap();
        let now = origin.wrapping_add(1_000_000); // 1 s later: 1⅔ cells back
        let before = g.peek(now).remaining();
        assert_eq!(before, 201);
        assert_eq!(g.set_quota(now, new), Ok(new));
        assert_eq!(g.peek(now).remaining(), before + 1_000_000 - 250);
        assert!(g.check_n(now, 1_000_000 - 49).is_ok());
        assert!(g.check(now).is_err());
    }
}

/// 52/min (burst 42) with 40 left, lowered to 211/h (burst 42): it may take
/// 40, never 41.
#[test]
fn a_lower_never_admits_what_the_old_refused() {
    let hz = 1_000;
    let new = Quota::per_hour(211).with_burst(42).at_hz(hz);
    for origin in [0, 1_796_169_600_000, u64::MAX - 10] {
        let mut g = LocalGcra::new(Quota::per_minute(52).with_burst(42).at_hz(hz));
        let shared = Gcra::new(Quota::per_minute(52).with_burst(42).at_hz(hz));
        g.check_n(origin, 2).unwrap();
        shared.check_n(origin, 2).unwrap();
        assert!(g.clone().check_n(origin, 41).is_err());
        g.set_quota(origin, new).unwrap();
        shared.set_quota(origin, new).unwrap();
        assert!(g.clone().check_n(origin, 41).is_err());
        assert!(shared.check_n(origin, 41).is_err());
        assert!(g.check_n(origin, 40).is_ok());
        assert!(shared.check_n(origin, 40).is_ok());
    }
}

mod windows {
    //! The windows keep the cells they count at the change, at most the new
    //! limit: at that instant the allowance moves by exactly the limit
    //! difference (floored at 0), except where the sliding window's estimate
    //! keeps its weights (the same grid with a lower limit): there only in
    //! the safe direction.
    use cellrate::window::{
        BucketedWindow, BucketedWindowQuota, FixedWindow, FixedWindowQuota, SlidingLog,
        SlidingWindow, SlidingWindowQuota,
    };
    use cellrate::RateLimiter;
    use proptest::prelude::*;

    /// Origins that are multiples of both windows (a window grid starts at
    /// tick 0): 0, about Unix microseconds, and near the top of the range
    /// (a run stays below 2⁶⁴).
    fn origins(w: u64, w2: u64) -> [u64; 3] {
        let grid = w * w2;
        [
            0,
            1_796_169_600_000_000 / grid * grid,
            (u64::MAX / grid - (5_000 / grid + 2)) * grid,
        ]
    }

    /// The allowance after the change, against the one before: exact when
    /// `exact`, else only in the direction the change allows.
    fn moved(
        (limit, window): (u64, u64),
        (limit2, window2): (u64, u64),
        before: u64,
        after: u64,
        exact: bool,
    ) -> Result<(), TestCaseError> {
        let want = (before as i128 + limit2 as i128 - limit as i128).max(0) as u64;
        if exact {
            prop_assert_eq!(after, want);
        }
        // A raise (limit and rate both up) never refuses what the old
        // admitted; a lower never admits what it refused.
        let rate_up = limit2 as u128 * window as u128 >= limit as u128 * window2 as u128;
        let rate_down = limit2 as u128 * window as u128 <= limit as u128 * window2 as u128;
        if limit2 >= limit && rate_up {
            prop_assert!(after >= before, "raise: {} → {}", before, after);
        }
        if limit2 <= limit && rate_down {
            prop_assert!(after <= before, "lower: {} → {}", before, after);
        }
        Ok(())
    }

    /// The allowance a limiter reports is what it admits: `after` fits,
    /// one more does not (checked last, as it consumes).
    fn admits_exactly(
        l: &dyn RateLimiter,
        now: u64,
        after: u64,
        limit: u64,
    ) -> Result<(), TestCaseError> {
        if after < limit {
            prop_assert!(l.check_n(now, after + 1).is_err());
        }
        if after > 0 {
            prop_assert!(l.check_n(now, after).is_ok());
        }
        Ok(())
    }

    fn params() -> impl Strategy<Value = (u64, u64)> {
        (
            1u64..=12,
            prop::sample::select(vec![10u64, 20, 50, 100, 200, 400]),
        )
    }

    fn history() -> impl Strategy<Value = Vec<(u64, u64)>> {
        prop::collection::vec((0u64..150, 1u64..=13), 0..25)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        #[test]
        fn fixed_window_changes_are_monotone(
            old in params(), new in params(), steps in history(), gap in 0u64..400,
        ) {
            for origin in origins(old.1, new.1) {
                let mut l = FixedWindow::new(old.0, old.1);
                let mut now = origin;
                for &(dt, cost) in &steps { now += dt; let _ = l.check_n(now, cost); }
                now += gap;
                let before = l.peek(now).remaining();
                l.set_quota(now, FixedWindowQuota::new(new.0, new.1));
                let after = l.peek(now).remaining();
                moved(old, new, before, after, true)?;
                admits_exactly(&l, now, after, new.0)?;
            }
        }

        #[test]
        fn sliding_window_changes_are_monotone(
            old in params(), new in params(), steps in history(), gap in 0u64..400,
        ) {
            for origin in origins(old.1, new.1) {
                let mut l = SlidingWindow::new(old.0, old.1);
                let mut now = origin;
                for &(dt, cost) in &steps { now += dt; let _ = l.check_n(now, cost); }
                now += gap;
                let before = l.peek(now).remaining();
                l.set_quota(now, SlidingWindowQuota::new(new.0, new.1));
                let after = l.peek(now).remaining();
                // Exact across grids and on one grid when the limit rises.
                let exact = old.1 != new.1 || new.0 >= old.0;
                moved(old, new, before, after, exact)?;
                admits_exactly(&l, now, after, new.0)?;
            }
        }

        #[test]
        fn bucketed_window_changes_are_monotone(
            old in params(), new in params(), buckets in 1u32..=5, buckets2 in 1u32..=5,
            steps in history(), gap in 0u64..400,
        ) {
            let (w, w2) = (old.1 * buckets as u64, new.1 * buckets2 as u64);
            for origin in origins(w, w2) {
                let mut l = BucketedWindow::new(old.0, w, buckets);
                let mut now = origin;
                for &(dt, cost) in &steps { now += dt; let _ = l.check_n(now, cost); }
                now += gap;
                let before = l.peek(now).remaining();
                l.set_quota(now, BucketedWindowQuota::new(new.0, w2, buckets2));
                let after = l.peek(now).remaining();
                moved((old.0, w), (new.0, w2), before, after, true)?;
                admits_exactly(&l, now, after, new.0)?;
            }
        }

        #[test]
        fn sliding_log_changes_are_monotone(
            old in params(), new in params(), steps in history(), gap in 0u64..400,
        ) {
            for origin in origins(old.1, new.1) {
                let mut l = SlidingLog::<12>::new(old.0, old.1);
                let mut now = origin;
                for &(dt, cost) in &steps { now += dt; let _ = l.check_n(now, cost); }
                now += gap;
                let before = l.peek(now).remaining();
                l.set_limit(now, new.0, new.1).unwrap();
                let after = l.peek(now).remaining();
                moved(old, new, before, after, true)?;
                admits_exactly(&l, now, after, new.0)?;
            }
        }
    }
}

mod keyed {
    //! A keyed table's default quota and an override's, changed through
    //! the table: every client under the changed quota moves as the model
    //! says (the cells used kept, at most the new burst), every other
    //! client is untouched.
    use super::*;
    use cellrate::keyed::{KeyId, Keyed, LiveQuota, Seed, WhenFull};

    const VIP: u32 = 7;
    const KEYS: [u32; 4] = [1, 2, 3, VIP];

    type Table = Keyed<LiveQuota, 32, [(KeyId, LiveQuota); 1]>;

    fn vip() -> KeyId {
        KeyId::exact(u64::from(VIP), 32)
    }

    fn table(quota: Quota, when_full: WhenFull) -> Table {
        Keyed::with_overrides(
            LiveQuota::new(quota),
            [(vip(), LiveQuota::new(quota))],
            when_full,
            Seed::new(5, 6),
        )
    }

    /// A history over the keys: (ticks since the previous request, which
    /// key, cost).
    fn history() -> impl Strategy<Value = Vec<(u64, usize, u64)>> {
        prop::collection::vec((0u64..3_000, 0..KEYS.len(), 1u64..=61), 0..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// `set_quota` (the default) or `set_override_quota` (the VIP's)
        /// at a random instant after a random history of four clients.
        #[test]
        fn table_changes_are_monotone(
            (old, new) in rules().prop_flat_map(|old| (Just(old), change_of(old))),
            steps in history(),
            gap in 0u64..6_000,
            origin in origin(),
            change_vip in any::<bool>(),
        ) {
            let t = table(old.quota(), WhenFull::Deny);
            let mut ideals = [0; 4].map(|_| Ideal::new(old));
            let mut now = 0u64;
            for &(dt, k, cost) in &steps {
                now += dt;
                let want = ideals[k].check(now as i128, cost);
                let got = t.check_n(&KEYS[k], origin.wrapping_add(now), cost).is_ok();
                prop_assert_eq!(got, want, "key {} cost {} at {}", KEYS[k], cost, now);
            }
            now += gap;
            let at = origin.wrapping_add(now);
            let before = KEYS.map(|k| t.peek(&k, at).remaining());
            for (ideal, &b) in ideals.iter().zip(&before) {
                prop_assert_eq!(b, ideal.allowance(now as i128));
            }
            let set = if change_vip {
                t.set_override_quota(at, vip(), new.quota())
            } else {
                t.set_quota(at, new.quota())
            };
            match set {
                Ok(q) => prop_assert_eq!(q.burst(), new.burst),
                Err(e) => {
                    // Not expressible at the table's scale: nothing changed.
                    prop_assert!(matches!(e, SetQuotaError::Quota(_)), "{:?}", e);
                    prop_assert_eq!(KEYS.map(|k| t.peek(&k, at).remaining()), before);
                    return Ok(());
                }
            }
            for (i, &key) in KEYS.iter().enumerate() {
                let after = t.peek(&key, at).remaining();
                let changed = (key == VIP) == change_vip;
                if changed {
                    ideals[i].change(now as i128, new);
                    monotone(old, new, before[i], after, ideals[i].allowance(now as i128))?;
                } else {
                    prop_assert_eq!(after, before[i], "key {} under the other quota", key);
                }
                // What it reports is what it admits (checked last: it consumes).
                let burst = if changed { new.burst } else { old.burst };
                if after < burst {
                    prop_assert!(t.check_n(&key, at, after + 1).is_err());
                }
                if after > 0 {
                    prop_assert_eq!(t.check_n(&key, at, after).map(|d| d.remaining()), Ok(0));
                }
            }
        }
    }

    /// A client moves between the default and an override, published with
    /// `LiveQuota::set_quota` (debt as time), then `translate_states`
    /// re-expresses it from the quota it was under.
    #[test]
    fn translate_states_keeps_the_cells_used_across_publications() {
        let hz = 1_000;
        let old = Quota::per_minute(60).with_burst(10).at_hz(hz);
        let new = Quota::per_second(10).with_burst(20).at_hz(hz);
        for origin in [0, 1_796_169_600_000, u64::MAX - 10] {
            let t = table(old, WhenFull::Deny);
            t.check_n(&1u32, origin, 6).unwrap();
            t.check_n(&VIP, origin, 4).unwrap();
            t.algorithm().set_quota(new).unwrap();
            // Published only: 6 s of debt at 100 ms per cell is a full bucket.
            assert!(t.check(&1u32, origin).is_err());
            t.translate_states(origin, old, |_| None).unwrap();
            assert_eq!(t.peek(&1u32, origin).remaining(), 14);
            assert_eq!(t.peek(&VIP, origin).remaining(), 6); // its override did not change
            assert_eq!(t.peek(&2u32, origin).remaining(), 20);
        }
    }

    /// The shared overflow of `WhenFull::Shared` follows the default.
    #[test]
    fn the_shared_overflow_keeps_its_cells_used() {
        let hz = 1_000;
        let old = Quota::per_second(1).with_burst(5).at_hz(hz);
        let t: Keyed<LiveQuota, 1> =
            Keyed::new(LiveQuota::new(old), WhenFull::Shared, Seed::new(1, 2));
        t.check(&1u32, 0).unwrap(); // takes the only slot
        t.check_n(&2u32, 0, 3).unwrap(); // charged to the overflow: 2 left
                                         // As time, the overflow's 3 s of debt would be 30 cells at 10/s.
        t.set_quota(0, Quota::per_second(10).with_burst(8).at_hz(hz))
            .unwrap();
        assert!(t.check_n(&3u32, 0, 6).is_err());
        assert_eq!(t.check_n(&3u32, 0, 5).unwrap().remaining(), 0);
        assert_eq!(t.peek(&1u32, 0).remaining(), 7);
    }

    /// A key with no override is refused.
    #[test]
    fn an_override_change_needs_an_override() {
        let q = Quota::per_second(1).at_hz(1_000);
        let t = table(q, WhenFull::Deny);
        assert_eq!(
            t.set_override_quota(0, KeyId::exact(8, 32), q),
            Err(SetQuotaError::NoOverride)
        );
    }
}
