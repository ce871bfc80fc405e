//! Keyed tables over the window limiters: the two landed separately, and a
//! table is generic over any `Algorithm`, so this pins that they compose.
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::window::{FixedWindow, FixedWindowQuota, SlidingWindow, SlidingWindowQuota};
use cellrate::RateLimiter;

#[test]
fn fixed_window_per_key_matches_a_lone_limiter() {
    let quota = FixedWindowQuota::new(3, 100);
    let table: Keyed<FixedWindowQuota, 64> = Keyed::new(quota, WhenFull::Deny, Seed::new(7, 9));
    let alone = [
        FixedWindow::with_quota(quota),
        FixedWindow::with_quota(quota),
    ];
    for now in (0..400).step_by(7) {
        for (key, lone) in [1u32, 2].iter().zip(&alone) {
            assert_eq!(
                table.check(key, now).is_ok(),
                lone.check(now).is_ok(),
                "key {key} at {now}"
            );
        }
    }
}

#[test]
fn sliding_window_keys_are_independent_and_idle_slots_are_reused() {
    let quota = SlidingWindowQuota::new(2, 100);
    // Two slots: a third key fits only once one of the first two is idle.
    let table: Keyed<SlidingWindowQuota, 2> = Keyed::new(quota, WhenFull::Deny, Seed::new(1, 2));
    let lone = SlidingWindow::with_quota(quota);
    for now in [0, 10, 20] {
        assert_eq!(table.check(&1u32, now).is_ok(), lone.check(now).is_ok());
    }
    assert!(table.check(&2u32, 20).is_ok());
    assert!(
        table.check(&3u32, 30).is_err(),
        "both slots owe: fail closed"
    );
    // Two windows later both clients are idle; the new key takes a slot and
    // starts with a full quota.
    assert!(table.check(&3u32, 300).is_ok());
    assert!(table.check(&3u32, 300).is_ok());
    assert!(table.check(&3u32, 300).is_err());
    assert!(table.stats().reused >= 1);
}

mod tiers {
    //! All-or-nothing tiers over keyed tables of every one-word algorithm:
    //! a keyed GCRA, a keyed fixed window and a keyed sliding window, one
    //! entry of each per request, against a model that says what "all or
    //! nothing" means: per key, one state per tier; a request is admitted
    //! iff every tier's step admits it from its state, and then every
    //! state moves, otherwise none does.
    use cellrate::compose::{AllTiers, Revocable};
    use cellrate::keyed::{Keyed, Seed, WhenFull};
    use cellrate::window::{FixedWindowQuota, SlidingWindowQuota};
    use cellrate::{Algorithm, Quota, RateLimiter};
    use proptest::prelude::*;

    const KEYS: usize = 3;

    struct Model {
        gcra: Quota,
        fixed: FixedWindowQuota,
        sliding: SlidingWindowQuota,
        states: [[u64; 3]; KEYS],
    }

    impl Model {
        /// Admitted or not; the states move only when every tier admits.
        fn check(&mut self, key: usize, now: u64, cost: u64) -> bool {
            let [g, f, s] = self.states[key];
            let next = (
                self.gcra.check(g, now, cost),
                self.fixed.check(f, now, cost),
                self.sliding.check(s, now, cost),
            );
            match next {
                (Ok((g, _)), Ok((f, _)), Ok((s, _))) => {
                    self.states[key] = [g, f, s];
                    true
                }
                _ => false,
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn mixed_keyed_tiers_are_all_or_nothing(
            limit in 1u64..6, window in 1u64..50, per in 1u64..50,
            ops in prop::collection::vec((0usize..KEYS, 0u64..30, 0u64..4, any::<bool>()), 1..80),
        ) {
            let gcra = Quota::per_ticks(limit, per).with_burst(limit).at_hz(1_000);
            let fixed = FixedWindowQuota::new(limit + 1, window);
            let sliding = SlidingWindowQuota::new(limit, window * 2);
            let tg: Keyed<Quota, 16> = Keyed::new(gcra, WhenFull::Deny, Seed::new(1, 2));
            let tf: Keyed<FixedWindowQuota, 16> = Keyed::new(fixed, WhenFull::Deny, Seed::new(3, 4));
            let ts: Keyed<SlidingWindowQuota, 16> = Keyed::new(sliding, WhenFull::Deny, Seed::new(5, 6));
            let mut model = Model { gcra, fixed, sliding, states: [[0; 3]; KEYS] };
            let mut now = 0;
            for (key, dt, cost, per_tier) in ops {
                now += dt;
                let k = key as u32;
                let tiers = (tg.entry(&k), tf.entry(&k), ts.entry(&k));
                let admitted = if per_tier {
                    tiers.check_tiers(now, cost).is_admitted()
                } else {
                    tiers.check_n(now, cost).is_ok()
                };
                prop_assert_eq!(admitted, model.check(key, now, cost), "key {} at {}", key, now);
                for (key, [g, f, s]) in model.states.iter().enumerate() {
                    let k = key as u32;
                    prop_assert_eq!(tg.peek(&k, now), gcra.peek(*g, now));
                    prop_assert_eq!(tf.peek(&k, now), fixed.peek(*f, now));
                    prop_assert_eq!(ts.peek(&k, now), sliding.peek(*s, now));
                }
            }
        }

        /// A window entry's receipt gives back exactly what it took: the
        /// table reads as if the admission had been denied.
        #[test]
        fn a_revoked_window_entry_is_as_if_denied(
            limit in 1u64..6, window in 1u64..50,
            ops in prop::collection::vec((0u64..30, 0u64..4, any::<bool>()), 1..60),
        ) {
            let fixed = FixedWindowQuota::new(limit, window);
            let sliding = SlidingWindowQuota::new(limit, window);
            let tf: Keyed<FixedWindowQuota, 4> = Keyed::new(fixed, WhenFull::Deny, Seed::new(3, 4));
            let ts: Keyed<SlidingWindowQuota, 4> = Keyed::new(sliding, WhenFull::Deny, Seed::new(5, 6));
            let (mut f, mut s, mut now) = (FixedWindowQuota::NEW, SlidingWindowQuota::NEW, 0);
            for (dt, cost, revoke) in ops {
                now += dt;
                match tf.entry(&1u32).admit_n(now, cost) {
                    Ok((_, r)) if revoke => tf.entry(&1u32).revoke(r),
                    got => {
                        let want = fixed.check(f, now, cost);
                        prop_assert_eq!(got.is_ok(), want.is_ok());
                        if let Ok((next, _)) = want { f = next; }
                    }
                }
                match ts.entry(&1u32).admit_n(now, cost) {
                    Ok((_, r)) if revoke => ts.entry(&1u32).revoke(r),
                    got => {
                        let want = sliding.check(s, now, cost);
                        prop_assert_eq!(got.is_ok(), want.is_ok());
                        if let Ok((next, _)) = want { s = next; }
                    }
                }
                prop_assert_eq!(tf.peek(&1u32, now), fixed.peek(f, now));
                prop_assert_eq!(ts.peek(&1u32, now), sliding.peek(s, now));
                prop_assert_eq!(tf.entry(&1u32).peek(now), tf.peek(&1u32, now));
            }
        }
    }
}

#[test]
fn refund_gives_window_cells_back_to_a_key() {
    let w: Keyed<FixedWindowQuota, 4> = Keyed::new(
        FixedWindowQuota::new(3, 100),
        WhenFull::Deny,
        Seed::new(1, 2),
    );
    w.check_n(&1u32, 10, 3).unwrap();
    assert_eq!(w.refund_n(&1u32, 20, 2).remaining(), 2);
}
