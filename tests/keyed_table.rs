//! Keyed tables through their public API: limits per key, eviction,
//! full policies, overrides, fingerprints, entries and threads.

use cellrate::keyed::*;
use cellrate::{Denied, Quota};

const HZ: u64 = 1_000;

fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::per_second(per_second).with_burst(burst).at_hz(HZ)
}

#[test]
fn each_key_has_its_own_limit() {
    let t: Keyed<Quota, 64> = Keyed::new(quota(1, 2), WhenFull::Deny, Seed::new(1, 2));
    for key in 0u32..20 {
        assert!(t.check(&key, 0).is_ok());
        assert!(t.check(&key, 0).is_ok());
        assert!(t.check(&key, 0).is_err(), "key {key}");
    }
    assert_eq!(t.occupancy(0).owing, 20);
    assert_eq!(t.stats().inserted, 20);
}

#[test]
fn a_debtor_is_never_evicted_and_an_idle_slot_is_reused() {
    // One slot: the second key can only get it once the first is idle.
    let t: Keyed<Quota, 1> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(1, 2));
    assert!(t.check(&1u32, 0).is_ok());
    let denied = t.check(&2u32, 400).unwrap_err();
    assert_eq!(denied.retry_after(), Some(600)); // when key 1 is idle
    assert!(t.contains(&1u32, 400));
    assert!(t.check(&2u32, 1_000).is_ok()); // key 1 idle at 1 000: reused
    assert!(!t.contains(&1u32, 1_000));
    assert_eq!(t.stats().reused, 1);
    // Key 2 owes now; key 1 comes back and is denied (full), key 2 kept.
    assert!(t.check(&1u32, 1_500).is_err());
    assert!(t.contains(&2u32, 1_500));
    assert!(t.check(&2u32, 1_500).is_err());
}

#[test]
fn full_policies() {
    let q = quota(1, 1);
    let open: Keyed<Quota, 2> = Keyed::new(q, WhenFull::Admit, Seed::new(1, 2));
    let shared: Keyed<Quota, 2> = Keyed::new(q, WhenFull::Shared, Seed::new(1, 2));
    for t in [&open, &shared] {
        assert!(t.check(&1u32, 0).is_ok());
        assert!(t.check(&2u32, 0).is_ok());
    }
    // Untracked keys: open admits every time, shared admits one for all.
    for key in 3u32..10 {
        assert!(open.check(&key, 0).is_ok());
    }
    assert_eq!(open.stats().overflow_admitted, 7);
    assert!(shared.check(&3u32, 0).is_ok());
    assert!(shared.check(&4u32, 0).is_err());
    assert!(shared.check(&3u32, 0).is_err());
    let s = shared.stats();
    assert_eq!((s.shared_admitted, s.shared_denied), (1, 2));
    // Tracked keys are unaffected.
    assert!(shared.check(&1u32, 0).is_err());
    assert!(shared.check(&1u32, 1_000).is_ok());
}

#[test]
fn zero_capacity_applies_the_policy_to_every_key() {
    let t: Keyed<Quota, 0> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(1, 2));
    assert_eq!(t.check(&1u32, 0).unwrap_err().retry_after(), Some(u64::MAX));
    let t: Keyed<Quota, 0> = Keyed::new(quota(1, 1), WhenFull::Admit, Seed::new(1, 2));
    assert!(t.check(&1u32, 0).is_ok());
    assert_eq!(t.peek(&1u32, 0).remaining(), 1);
}

#[test]
fn cost_zero_and_oversized_costs_never_insert() {
    let t: Keyed<Quota, 4> = Keyed::new(quota(1, 3), WhenFull::Deny, Seed::new(1, 2));
    assert_eq!(t.check_n(&1u32, 0, 0).unwrap().remaining(), 3);
    assert_eq!(
        t.check_n(&1u32, 0, 4),
        Err(Denied::CostTooLarge { cost: 4, limit: 3 })
    );
    assert_eq!(t.occupancy(0).free, 4);
    assert_eq!(t.stats().inserted, 0);
}

#[test]
fn overrides_apply_to_their_key_and_to_its_eviction() {
    let basic = quota(1, 1);
    let premium = quota(1, 10);
    let t: Keyed<Quota, 1, [(KeyId, Quota); 1]> = Keyed::with_overrides(
        basic,
        [(KeyId::exact(7, 32), premium)],
        WhenFull::Deny,
        Seed::new(1, 2),
    );
    assert_eq!(t.check_n(&7u32, 0, 10).unwrap().remaining(), 0);
    // Under the basic quota key 7 would be idle at 1 000; under its own
    // (premium) quota it owes until 10 000, so it keeps its slot.
    assert!(t.check(&8u32, 1_000).is_err());
    assert!(t.check(&8u32, 10_000).is_ok());
}

#[test]
fn fingerprinted_keys() {
    let t: Keyed<Quota, 512> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(5, 6));
    let names: std::vec::Vec<std::string::String> =
        (0..50).map(|i| std::format!("client-{i}")).collect();
    for name in &names {
        assert!(t.check(name.as_str(), 0).is_ok());
    }
    for name in &names {
        assert!(t.check(name.as_str(), 0).is_err());
        assert!(t.check(&Hashed(name), 0).is_ok()); // another key type, another id
    }
    assert!(t.check(&u64::MAX, 0).is_ok());
    assert!(t.check(&u64::MAX, 0).is_err());
}

#[test]
fn small_tables_are_one_window() {
    // With capacity 3 the window is the whole table, whatever the homes.
    let t: Keyed<Quota, 3> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(7, 8));
    for key in 0u32..3 {
        assert!(t.check(&key, 0).is_ok());
    }
    assert!(t.check(&3u32, 0).is_err());
    assert_eq!(t.occupancy(0).owing, 3);
}

#[test]
fn entries_compose_all_or_nothing() {
    use cellrate::compose::AllTiers;
    let global: Keyed<Quota, 8> = Keyed::new(quota(10, 3), WhenFull::Deny, Seed::new(1, 2));
    let endpoint: Keyed<Quota, 8> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(3, 4));
    let both = |route: u16| (global.entry(&1u32), endpoint.entry(&(1u32, route)));
    assert!(both(1).check_tiers(0, 1).is_admitted());
    for _ in 0..5 {
        assert!(both(1).check_tiers(0, 1).refused().is_some());
    }
    assert_eq!(global.peek(&1u32, 0).remaining(), 2);
    // Denied by the first tier: the second is not charged.
    assert!(both(2).check_tiers(0, 1).is_admitted());
    assert!(both(3).check_tiers(0, 1).is_admitted());
    assert_eq!(global.peek(&1u32, 0).remaining(), 0);
    assert!(both(4).check_tiers(0, 1).refused().is_some());
    assert_eq!(endpoint.peek(&(1u32, 4u16), 0).remaining(), 1);
    assert!(!endpoint.contains(&(1u32, 4u16), 0));
}

#[cfg(feature = "alloc")]
#[test]
fn boxed_table() {
    let t = KeyedBox::with_capacity(1_000, quota(1, 1), WhenFull::Deny, Seed::new(1, 2));
    for key in 0u32..500 {
        assert!(t.check(&key, 0).is_ok());
    }
    for key in 0u32..500 {
        assert!(t.check(&key, 0).is_err());
    }
    assert_eq!(t.occupancy(0).owing, 500);
}

/// A key is counted once by `inserted` and charged by its insertion: a
/// second key that needs the only slot at the same tick finds its owner
/// owing, not idle.
#[test]
fn an_inserted_key_is_charged_at_once() {
    let t: Keyed<Quota, 1> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(1, 2));
    assert_eq!(t.check(&1u32, 0).map(|d| d.remaining()), Ok(0));
    assert_eq!(t.peek(&1u32, 0).remaining(), 0);
    assert!(t.check(&2u32, 0).is_err());
    let s = t.stats();
    assert_eq!((s.inserted, s.reused, s.overflow_denied), (1, 0, 1));
}

/// An entry is a part like any other: beside a shared `Gcra`, a request the
/// `Gcra` refuses consumes nothing from the key, and a key the table has
/// never seen is answered without being inserted.
#[test]
fn an_entry_composes_with_other_limiters() {
    use cellrate::compose::AllTiers;
    use cellrate::{Gcra, RateLimiter};
    let gate = Gcra::new(quota(1, 1));
    let table: Keyed<Quota, 8> = Keyed::new(quota(1, 2), WhenFull::Deny, Seed::new(1, 2));
    assert!((&gate, table.entry(&7u32)).check(0).is_ok());
    assert_eq!(table.peek(&7u32, 0).remaining(), 1);
    let refused = (&gate, table.entry(&7u32)).check_tiers(0, 1);
    assert_eq!(refused.refused(), Some(0));
    assert_eq!(refused.results()[1].unwrap().remaining(), 1);
    assert_eq!(table.peek(&7u32, 0).remaining(), 1);
    let refused = (&gate, table.entry(&8u32)).check_tiers(0, 1);
    assert_eq!(refused.results()[1].unwrap().remaining(), 2);
    assert!(!table.contains(&8u32, 0));
    // The table's own view and the entry's agree.
    assert_eq!(table.entry(&7u32).peek(0), table.peek(&7u32, 0));
}

/// Threads checking the same keys of one table on a frozen clock (contended
/// 16-byte compare-and-swaps on the same slots): every key admits exactly
/// its burst, whatever the interleaving, and is inserted once.
#[test]
fn threads_on_shared_keys_admit_exactly_the_burst() {
    const KEYS: u32 = 8;
    let threads: u64 = if cfg!(miri) { 2 } else { 4 };
    let rounds: u64 = if cfg!(miri) { 30 } else { 4_000 };
    // About 3/8 of the attempts admitted, so that most of the run is
    // contended compare-and-swaps, not denials (which write nothing).
    let burst = threads * rounds * 3 / 8;
    let table: Keyed<Quota, 64> = Keyed::new(quota(1, burst), WhenFull::Deny, Seed::new(5, 6));
    let admitted: std::vec::Vec<std::vec::Vec<u64>> = std::thread::scope(|s| {
        let handles: std::vec::Vec<_> = (0..threads)
            .map(|_| {
                let table = &table;
                s.spawn(move || {
                    let mut admitted = std::vec![0u64; KEYS as usize];
                    for _ in 0..rounds {
                        for key in 0..KEYS {
                            admitted[key as usize] += table.check(&key, 0).is_ok() as u64;
                        }
                    }
                    admitted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for key in 0..KEYS as usize {
        let total: u64 = admitted.iter().map(|per_thread| per_thread[key]).sum();
        assert_eq!(total, burst, "key {key}");
    }
    assert_eq!(table.stats().inserted, KEYS as usize);
    assert_eq!(table.occupancy(0).owing, KEYS as usize);
}

/// A request that a later tier refuses gives its cells back wherever the
/// table charged them: to the shared overflow limiter too, when the key
/// had no slot. Otherwise every such refusal would spend cells of the
/// budget all untracked clients share.
#[test]
fn a_revoked_entry_gives_the_overflow_limiter_its_cells_back() {
    use cellrate::compose::AllTiers;
    let first: Keyed<Quota, 1> = Keyed::new(quota(1, 2), WhenFull::Shared, Seed::new(1, 2));
    let second: Keyed<Quota, 8> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(3, 4));
    assert!(first.check(&1u32, 0).is_ok()); // the one slot, owing
    assert!(second.check(&2u32, 0).is_ok()); // key 2 has spent its second tier
    let refused = (first.entry(&2u32), second.entry(&2u32)).check_tiers(0, 1);
    assert_eq!(refused.refused(), Some(1));
    // The overflow limiter (burst 2) is whole again: two untracked keys fit.
    assert!(first.check(&3u32, 0).is_ok());
    assert!(first.check(&4u32, 0).is_ok());
    assert!(first.check(&5u32, 0).is_err());
}
