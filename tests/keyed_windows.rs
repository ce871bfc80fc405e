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
