//! loom models of the slot protocol. Each slot is one loom mutex around its
//! 128-bit value, so every load and compare-and-swap is one atomic step, as
//! on the real 128-bit atomic; loom explores every interleaving of those
//! steps (bounded preemptions).

extern crate std;

use super::*;
use crate::Quota;
use loom::sync::Arc;
use loom::thread;
use std::vec::Vec;

const HZ: u64 = 1_000;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

fn quota(burst: u64) -> Quota {
    // One cell per 1 000 ticks.
    Quota::per_second(1).with_burst(burst).at_hz(HZ)
}

/// Every LIVE key in the table, with its state.
fn live<S: Storage>(t: &KeyedTable<Quota, S>) -> Vec<(u64, u64)> {
    t.slots
        .slots()
        .iter()
        .map(|s| s.load())
        .filter(|v| key_of(*v) & TAG_MASK == LIVE)
        .map(|v| (key_of(v) & !TAG_MASK, state_of(v)))
        .collect()
}

fn assert_no_claims<S: Storage>(t: &KeyedTable<Quota, S>) {
    for s in t.slots.slots() {
        assert_ne!(
            key_of(s.load()) & TAG_MASK,
            CLAIMING,
            "a claim was left behind"
        );
    }
}

/// Two checks of one new key at once, burst 1: exactly one is admitted and
/// the key ends with exactly one slot.
#[test]
fn same_new_key_from_two_threads() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(1, 2)));
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&5u32, 0).is_ok());
        let a = t.check(&5u32, 0).is_ok();
        let b = h.join().unwrap();
        assert!(a ^ b, "admitted {a} {b}");
        let l = live(&t);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].0, KeyId::exact(5, 32).0);
        assert_no_claims(&t);
    });
}

/// Two keys at once: each is admitted against its own state only.
#[test]
fn different_keys_do_not_touch_each_other() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(2), WhenFull::Deny, Seed::new(1, 2)));
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&1u32, 0).map(|d| d.remaining()));
        let a = t.check(&2u32, 0).map(|d| d.remaining());
        let b = h.join().unwrap();
        assert_eq!((a, b), (Ok(1), Ok(1)));
        let mut l = live(&t);
        l.sort();
        assert_eq!(
            l,
            [
                (KeyId::exact(1, 32).0, 1_000),
                (KeyId::exact(2, 32).0, 1_000)
            ]
        );
    });
}

/// Two inserts of one key race while their clocks disagree on whether the
/// first slot of the window is idle, so they pick *different* slots: the
/// resolution must still leave one copy and admit once (burst 1).
#[test]
fn inserts_racing_for_different_slots_leave_one_copy() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(3, 4)));
        let (id, hash) = identify(&5u32, &t.seed);
        let first = home(hash, 2);
        // Another key at the head of the window, idle from tick 1 000 on.
        let other = LIVE | KeyId::exact(9, 32).0;
        t.slots[first]
            .compare_exchange(0, pack(other, 1_000))
            .unwrap();
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&5u32, 1_000).is_ok()); // may evict key 9
        let a = t.check(&5u32, 999).is_ok(); // sees key 9 owing: takes the second slot
        let b = h.join().unwrap();
        assert!(a ^ b, "admitted {a} {b}");
        let copies = live(&t).iter().filter(|(k, _)| *k == id.0).count();
        assert_eq!(copies, 1);
        assert_no_claims(&t);
    });
}

/// An eviction races a check of the evicted key. Key A has spent its burst
/// of 2 at tick 0 and is idle again at 2 000, when A checks again and a new
/// key B needs A's slot (the only one). Exactly one of them is admitted, the
/// slot ends with the admitted key owing, and B never sees A's state (B's
/// decision is a fresh client's: 1 of 2 left).
#[test]
fn eviction_races_a_check_of_the_evicted_key() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(2), WhenFull::Deny, Seed::new(1, 2)));
        t.check_n(&1u32, 0, 2).unwrap();
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 2_000).map(|d| d.remaining()));
        let a = t.check(&1u32, 2_000).map(|d| d.remaining());
        let b = h.join().unwrap();
        assert!(a.is_ok() ^ b.is_ok(), "admitted {a:?} {b:?}");
        let winner = if a.is_ok() { 1 } else { 2 };
        assert_eq!(a.unwrap_or(1), 1);
        assert_eq!(b.unwrap_or(1), 1);
        // The winner owes (TAT 3 000 > 2 000) and holds the slot.
        assert_eq!(live(&t), [(KeyId::exact(winner, 32).0, 3_000)]);
    });
}

/// A debtor is never evicted: key A owes until 2 000 while B tries to insert
/// at 1 000 and A checks at 1 000 at the same time (burst 2, so A's check is
/// admitted). B is denied in every interleaving and A's debt stays.
#[test]
fn a_debtor_keeps_its_slot() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(2), WhenFull::Deny, Seed::new(1, 2)));
        t.check_n(&1u32, 0, 2).unwrap(); // TAT 2 000
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 1_000).is_ok());
        let a = t.check(&1u32, 1_000).map(|d| d.remaining());
        let b = h.join().unwrap();
        assert_eq!(a, Ok(0));
        assert!(!b);
        assert_eq!(live(&t), [(KeyId::exact(1, 32).0, 3_000)]);
    });
}

/// No over-admission on one hot key: two threads each try two checks with a
/// burst of 3 at the same tick; exactly 3 are admitted.
#[test]
fn hot_key_is_not_over_admitted() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(3), WhenFull::Deny, Seed::new(1, 2)));
        t.check(&1u32, 0).unwrap();
        let t2 = t.clone();
        let h = thread::spawn(move || (0..2).filter(|_| t2.check(&1u32, 0).is_ok()).count());
        let a = (0..2).filter(|_| t.check(&1u32, 0).is_ok()).count();
        let b = h.join().unwrap();
        assert_eq!(1 + a + b, 3);
    });
}

/// Three threads: two inserts of one key with disagreeing clocks and an
/// insert of another key, all competing for two slots (one held by an idle
/// key). Key 5 is admitted once and has one copy; key 6, if it got a slot,
/// holds exactly its own charge; nothing is left half-claimed.
#[test]
fn three_inserts_compete_for_two_slots() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(3, 4)));
        let (id, hash) = identify(&5u32, &t.seed);
        let first = home(hash, 2);
        let other = LIVE | KeyId::exact(9, 32).0;
        t.slots[first]
            .compare_exchange(0, pack(other, 1_000))
            .unwrap();
        let (t2, t3) = (t.clone(), t.clone());
        let h2 = thread::spawn(move || t2.check(&5u32, 1_000).is_ok());
        let h3 = thread::spawn(move || t3.check(&6u32, 1_000).is_ok());
        let a = t.check(&5u32, 999).is_ok();
        let b = h2.join().unwrap();
        let c = h3.join().unwrap();
        assert!(a ^ b, "key 5 admitted {a} {b}");
        let l = live(&t);
        assert_eq!(l.iter().filter(|(k, _)| *k == id.0).count(), 1);
        let six = KeyId::exact(6, 32).0;
        match l.iter().find(|(k, _)| *k == six) {
            Some((_, state)) => {
                assert!(c);
                assert_eq!(*state, 2_000);
            }
            None => assert!(!c),
        }
        assert_no_claims(&t);
    });
}
