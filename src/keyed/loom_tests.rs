//! loom models of the slot protocol: each slot is one loom mutex around
//! its 128-bit value, so every load and compare-and-swap is one atomic step.

extern crate std;

use super::key::identify;
use super::probe::home;
use super::slot::*;
use super::*;
use crate::Algorithm;
use crate::Quota;
use loom::sync::Arc;
use loom::thread;
use std::vec::Vec;

const HZ: u64 = 1_000;

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_with(2, f)
}

/// [`model`] with at least `bound` preemptions.
fn model_with(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(0).max(bound));
    builder.check(f);
}

fn quota(burst: u64) -> Quota {
    Quota::per_second(1).with_burst(burst).at_hz(HZ)
}

/// The state word of a TAT (scale 1: sub-ticks are ticks).
fn tat(t: u64) -> u64 {
    crate::gcra::step::word(t)
}

/// Every LIVE key in the table with its TAT (scale 1).
fn live<S: Storage>(t: &KeyedTable<Quota, S>) -> Vec<(u64, u64)> {
    t.slots
        .slots()
        .iter()
        .map(|s| s.load())
        .filter(|v| key_of(*v) & TAG_MASK == LIVE)
        .map(|v| (key_of(v) & !TAG_MASK, state_of(v) >> 1))
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

/// Two checks of one new key at once, burst 1: one admitted, one slot.
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

/// Two inserts of one key whose clocks disagree on which slot is idle:
/// one copy, one admission (burst 1).
#[test]
fn inserts_racing_for_different_slots_leave_one_copy() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(3, 4)));
        let (id, hash) = identify(&5u32, &t.seed);
        let first = home(hash, 2);
        // Another key at the head of the window, idle from tick 1 000 on.
        let other = LIVE | KeyId::exact(9, 32).0;
        t.slots.slots()[first]
            .compare_exchange(0, pack(other, tat(1_000)))
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

/// An eviction races a check of the evicted, idle key A: exactly one is
/// admitted, and B never sees A's state.
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

/// The same across the wrap of the tick counter: A's debt stays, B is denied.
#[test]
fn a_debtor_keeps_its_slot_across_the_wrap() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(2), WhenFull::Deny, Seed::new(1, 2)));
        let start = u64::MAX - 499;
        t.check_n(&1u32, start, 2).unwrap();
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 500).is_ok());
        let a = t.check(&1u32, 500).map(|d| d.remaining());
        let b = h.join().unwrap();
        assert_eq!(a, Ok(0));
        assert!(!b);
        assert_eq!(live(&t), [(KeyId::exact(1, 32).0, 2_500)]);
        // Once the debt has drained the slot is reused.
        assert!(t.check(&2u32, 2_500).is_ok());
    });
}

/// A debtor is never evicted.
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

/// No over-admission on one hot key: 4 checks, burst 3, 3 admitted.
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

/// Two inserts of one key with disagreeing clocks and an insert of another
/// key compete for two slots: one copy each, own charges only, no claim left.
#[test]
fn three_inserts_compete_for_two_slots() {
    model(|| {
        let t: Arc<Keyed<Quota, 2>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(3, 4)));
        let (id, hash) = identify(&5u32, &t.seed);
        let first = home(hash, 2);
        let other = LIVE | KeyId::exact(9, 32).0;
        t.slots.slots()[first]
            .compare_exchange(0, pack(other, tat(1_000)))
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

/// The ABA race that rules out updating the state word alone (docs/design/keyed.md,
/// "Why one 128-bit compare-and-swap"): A's check never lands in B's state.
#[test]
fn a_check_of_an_evicted_key_never_writes_the_new_keys_state() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(1, 2)));
        let a = KeyId::exact(1, 32).0;
        t.slots.slots()[0]
            .compare_exchange(0, pack(LIVE | a, Quota::NEW))
            .unwrap();
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 0).is_ok());
        let admitted_a = t.check(&1u32, 0).is_ok();
        let admitted_b = h.join().unwrap();
        assert!(
            admitted_a ^ admitted_b,
            "admitted {admitted_a} {admitted_b}"
        );
        let winner = if admitted_a { 1 } else { 2 };
        assert_eq!(live(&t), [(KeyId::exact(winner, 32).0, 1_000)]);
    });
}

/// An insert races an eviction: `inserted` counts distinct keys, no reuse.
#[test]
fn inserted_counts_each_key_once_when_an_insert_races_an_eviction() {
    model(|| {
        let t: Arc<Keyed<Quota, 1>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(1, 2)));
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 0).is_ok());
        let a = t.check(&1u32, 0).is_ok();
        let b = h.join().unwrap();
        assert!(a ^ b, "admitted {a} {b}");
        let s = t.stats();
        assert_eq!((s.inserted, s.reused), (1, 0), "{s:?}");
        assert_eq!(s.overflow_denied, 1);
        assert_eq!(live(&t).len(), 1);
    });
}

/// A lookup races the eviction of the key it found (walked past the home
/// slot): one copy per key, own charges only, `inserted − reused` held keys.
#[test]
fn a_lookup_races_the_eviction_of_its_key() {
    model(|| {
        let t: Arc<Keyed<Quota, 4>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(1, 2)));
        assert_eq!(home(identify(&1u32, &t.seed).1, 4), 0);
        t.check(&3u32, 0).unwrap(); // C: slot 0
        t.check(&1u32, 0).unwrap(); // A: slot 1, idle from 1 000
        t.slots.slots()[0]
            .compare_exchange(
                pack(LIVE | KeyId::exact(3, 32).0, tat(1_000)),
                pack(LIVE | KeyId::exact(3, 32).0, tat(5_000)),
            )
            .unwrap(); // C owes until 5 000: not evictable
        let t2 = t.clone();
        let h = thread::spawn(move || t2.check(&2u32, 1_000).map(|d| d.remaining()));
        let a = t.check(&1u32, 1_000).map(|d| d.remaining());
        let b = h.join().unwrap();
        assert_eq!((a, b), (Ok(0), Ok(0)));
        let mut l = live(&t);
        l.sort();
        assert_eq!(
            l,
            [
                (KeyId::exact(1, 32).0, 2_000),
                (KeyId::exact(2, 32).0, 2_000),
                (KeyId::exact(3, 32).0, 5_000),
            ]
        );
        assert_no_claims(&t);
        let s = t.stats();
        assert_eq!(s.inserted - s.reused, 3, "{s:?}");
    });
}

/// A slot is reused twice while a stale lookup of its first owner is in
/// flight: A ends with one copy and TAT 3 000; B holds its own charge.
#[test]
fn a_lookup_races_the_reuse_of_the_same_slot() {
    model(|| {
        let t: Arc<Keyed<Quota, 4>> =
            Arc::new(Keyed::new(quota(1), WhenFull::Deny, Seed::new(1, 2)));
        t.check(&1u32, 0).unwrap(); // A: slot 0, idle from 1 000
        let t2 = t.clone();
        let h = thread::spawn(move || {
            let b = t2.check(&2u32, 1_000).map(|d| d.remaining());
            let a = t2.check(&1u32, 2_000).map(|d| d.remaining());
            (b, a)
        });
        let stale = t.check(&1u32, 1_000).map(|d| d.remaining());
        let (b, later) = h.join().unwrap();
        assert_eq!((b, later), (Ok(0), Ok(0)));
        let l = live(&t);
        let a_id = KeyId::exact(1, 32).0;
        let b_id = KeyId::exact(2, 32).0;
        let a_copies: Vec<_> = l.iter().filter(|(k, _)| *k == a_id).collect();
        assert_eq!(a_copies.len(), 1, "{l:?}");
        assert_eq!(a_copies[0].1, 3_000, "{l:?} stale {stale:?}");
        for (k, state) in &l {
            if *k == b_id {
                assert_eq!(*state, 2_000, "{l:?}");
            }
        }
        assert!(l.iter().filter(|(k, _)| *k == b_id).count() <= 1);
        assert_no_claims(&t);
    });
}

/// The rejected split design (docs/design/keyed.md, "Why one 128-bit
/// compare-and-swap"): loom must find A's charge landing in B's state.
#[test]
#[should_panic(expected = "stale check wrote another key's state")]
fn rejected_split_words_protocol_lets_a_stale_check_write_another_keys_state() {
    use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
    const A: u64 = 1;
    const B: u64 = 2;
    const POISON: u64 = u64::MAX;
    struct Split {
        key: AtomicU64,
        state: AtomicU64,
    }
    model(|| {
        let q = quota(1);
        let slot = Arc::new(Split {
            key: AtomicU64::new(A),
            state: AtomicU64::new(Quota::NEW),
        });
        let s2 = slot.clone();
        // Evict A (idle at 0) and install B with a new client's state.
        let evictor = thread::spawn(move || {
            let state = s2.state.load(SeqCst);
            if state != POISON
                && q.is_idle(state, 0)
                && s2
                    .state
                    .compare_exchange(state, POISON, SeqCst, SeqCst)
                    .is_ok()
            {
                s2.key.store(B, SeqCst);
                s2.state.store(Quota::NEW, SeqCst);
                true
            } else {
                false
            }
        });
        let mut charged_a = false;
        loop {
            if slot.key.load(SeqCst) != A {
                break; // evicted: A would be inserted elsewhere
            }
            let state = slot.state.load(SeqCst);
            if state == POISON {
                thread::yield_now();
                continue;
            }
            if slot.key.load(SeqCst) != A {
                break;
            }
            let Ok((new_state, _)) = q.check(state, 0, 1) else {
                break;
            };
            if slot
                .state
                .compare_exchange(state, new_state, SeqCst, SeqCst)
                .is_ok()
            {
                charged_a = true;
                break;
            }
        }
        let evicted = evictor.join().unwrap();
        if evicted && charged_a {
            // B was never checked: its state must still be a new client's.
            assert_eq!(
                slot.state.load(SeqCst),
                Quota::NEW,
                "stale check wrote another key's state"
            );
        }
    });
}

/// The monotone 8-byte protocol of docs/design/keyed.md ("Why one 128-bit
/// compare-and-swap").
mod monotone_split {
    use super::*;
    use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

    pub(super) const A: u64 = 1;
    pub(super) const B: u64 = 2;
    const BUSY: u64 = 1 << 63;

    pub(super) struct Split {
        pub(super) key: AtomicU64,
        pub(super) state: AtomicU64,
        /// Ghost: set by the evictor right after it took the state word.
        pub(super) evicted: AtomicBool,
    }

    impl Split {
        pub(super) fn new(key: u64, state: u64) -> Self {
            Split {
                key: AtomicU64::new(key),
                state: AtomicU64::new(state),
                evicted: AtomicBool::new(false),
            }
        }

        /// Applies `step` if the slot is `key`'s; whether the CAS landed.
        pub(super) fn update(&self, key: u64, step: impl Fn(u64) -> Option<u64>) -> bool {
            loop {
                if self.key.load(SeqCst) != key {
                    return false;
                }
                let state = self.state.load(SeqCst);
                if state & BUSY != 0 || self.key.load(SeqCst) != key {
                    return false;
                }
                let Some(new) = step(state) else {
                    return false;
                };
                if self
                    .state
                    .compare_exchange(state, new, SeqCst, SeqCst)
                    .is_ok()
                {
                    return true;
                }
            }
        }

        pub(super) fn evict(&self, q: &Quota, now: u64, key: u64) -> bool {
            let state = self.state.load(SeqCst);
            if state & BUSY != 0 || !q.is_idle(state + 2, now) {
                return false;
            }
            if self
                .state
                .compare_exchange(state, BUSY, SeqCst, SeqCst)
                .is_err()
            {
                return false;
            }
            self.evicted.store(true, SeqCst);
            self.key.store(key, SeqCst);
            self.state.store(state + 2, SeqCst);
            true
        }
    }

    pub(super) fn charge(q: Quota, now: u64) -> impl Fn(u64) -> Option<u64> {
        move |state| q.check(state, now, 1).ok().map(|(s, _)| s)
    }

    pub(super) fn refund(q: Quota, now: u64) -> impl Fn(u64) -> Option<u64> {
        move |state| Some(crate::gcra::refund(&q, state, q.now_word(now), 1))
    }
}

/// The monotone protocol without refunds keeps keys apart.
#[test]
fn monotone_split_protocol_without_refunds_keeps_keys_apart() {
    use monotone_split::*;
    model_with(3, || {
        let q = quota(2);
        let slot = Arc::new(Split::new(A, tat(1_000)));
        let s2 = slot.clone();
        let evictor = thread::spawn(move || {
            if s2.evict(&q, 1_001, B) {
                s2.update(B, charge(q, 0));
                s2.update(B, charge(q, 1_000));
            }
        });
        let charged_a = slot.update(A, charge(q, 0));
        let landed_after_eviction =
            charged_a && slot.evicted.load(loom::sync::atomic::Ordering::SeqCst);
        evictor.join().unwrap();
        assert!(
            !landed_after_eviction,
            "stale check wrote another key's state"
        );
    });
}

/// The monotone protocol once a refund lowers a state: loom must find A's
/// stale compare-and-swap landing in B's state.
#[test]
#[should_panic(expected = "stale check wrote another key's state")]
fn monotone_split_protocol_with_a_refund_lets_a_stale_check_write_another_keys_state() {
    use monotone_split::*;
    // Needs three preemptions.
    model_with(3, || {
        let q = quota(2);
        let slot = Arc::new(Split::new(A, Quota::NEW));
        let s1 = slot.clone();
        let refunder = thread::spawn(move || {
            s1.update(A, charge(q, 0));
            s1.update(A, refund(q, 0));
        });
        let s2 = slot.clone();
        let checker = thread::spawn(move || {
            let charged_a = s2.update(A, charge(q, 0));
            charged_a && s2.evicted.load(loom::sync::atomic::Ordering::SeqCst)
        });
        let s3 = slot.clone();
        let evictor = thread::spawn(move || {
            if s3.evict(&q, 1, B) {
                s3.update(B, charge(q, 1_000));
                s3.update(B, refund(q, 1_000));
            }
        });
        refunder.join().unwrap();
        let landed_after_eviction = checker.join().unwrap();
        evictor.join().unwrap();
        assert!(
            !landed_after_eviction,
            "stale check wrote another key's state"
        );
    });
}

/// Two threads check a tuple of two tables' entries, second tier room for
/// one: one admitted, the first tier charged for exactly that one.
#[test]
fn a_tuple_of_entries_charges_only_what_it_admitted() {
    model(|| {
        let global = Arc::new(Keyed::<Quota, 4>::new(
            quota(4),
            WhenFull::Deny,
            Seed::new(1, 2),
        ));
        let endpoint = Arc::new(Keyed::<Quota, 4>::new(
            quota(2),
            WhenFull::Deny,
            Seed::new(3, 4),
        ));
        global.check(&1u32, 0).unwrap();
        endpoint.check(&(1u32, 1u16), 0).unwrap();
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (g, e) = (Arc::clone(&global), Arc::clone(&endpoint));
                thread::spawn(move || {
                    crate::RateLimiter::check(&(g.entry(&1u32), e.entry(&(1u32, 1u16))), 0).is_ok()
                        as u64
                })
            })
            .collect();
        let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(admitted, 1);
        assert_eq!(global.peek(&1u32, 0).remaining(), 3 - admitted);
        assert_eq!(endpoint.peek(&(1u32, 1u16), 0).remaining(), 0);
    });
}

/// A table-level `set_quota` (10/s burst 3 to 1/s burst 2) races a check
/// of a key that owes 2 cells and the insertion of a new key: each key's
/// answer and final state are those of one of the orders the bound in
/// docs/design/reconfigure.md allows (the check by the old quota before
/// or after the walk re-expresses its slot, or by the new quota on the
/// state before or after it).
const NOW: u64 = 1_000;

/// Every (admitted, final state) a check of one cell on `state` may give
/// while a change from `old` to `new` re-expresses it: by the old quota
/// before or after the translation, or by the new one before or after it.
fn orders(old: &Quota, new: &Quota, state: u64) -> Vec<(bool, u64)> {
    let check = |q: &Quota, s: u64| match q.check(s, NOW, 1) {
        Ok((next, _)) => (true, next),
        Err(_) => (false, s),
    };
    let translate = |(ok, s): (bool, u64)| (ok, old.translate(s, NOW, new));
    std::vec![
        translate(check(old, state)),
        check(old, old.translate(state, NOW, new)),
        translate(check(new, state)),
        check(new, old.translate(state, NOW, new)),
    ]
}

#[test]
fn checks_race_a_table_reconfiguration() {
    let old = Quota::per_second(10).with_burst(3).at_hz(HZ);
    let new = Quota::per_second(1).with_burst(2).at_hz(HZ);
    model(move || {
        let t: Arc<Keyed<LiveQuota, 4>> = Arc::new(Keyed::new(
            LiveQuota::new(old),
            WhenFull::Deny,
            Seed::new(1, 2),
        ));
        t.check_n(&1u32, NOW, 2).unwrap();
        let owed = t.state_id(KeyId::exact(1, 32), identify(&1u32, &t.seed).1);
        let t2 = t.clone();
        let h = thread::spawn(move || [t2.check(&1u32, NOW).is_ok(), t2.check(&2u32, NOW).is_ok()]);
        assert_eq!(t.set_quota(NOW, new), Ok(new));
        let admitted = h.join().unwrap();
        for (i, (key, start)) in [(1u32, owed), (2u32, Quota::NEW)].into_iter().enumerate() {
            let end = t.state_id(KeyId::exact(key.into(), 32), identify(&key, &t.seed).1);
            assert!(
                orders(&old, &new, start).contains(&(admitted[i], end)),
                "key {key}: admitted {} ending in {end}",
                admitted[i]
            );
        }
        assert_eq!(t.algorithm().quota(), new);
    });
}

/// An override's change (1/s burst 2 to 10/s burst 3) races a check of its
/// key, which owes 2 cells, and a check of a key under the default: the
/// first ends in one of the four orders, the second is judged by the
/// default alone and its state is never touched by the walk.
#[test]
fn checks_race_an_override_change() {
    let default = Quota::per_second(1).with_burst(2).at_hz(HZ);
    let (old, new) = (default, Quota::per_second(10).with_burst(3).at_hz(HZ));
    let vip = KeyId::exact(7, 32);
    model(move || {
        let t: Arc<Keyed<LiveQuota, 4, [(KeyId, LiveQuota); 1]>> = Arc::new(Keyed::with_overrides(
            LiveQuota::new(default),
            [(vip, LiveQuota::new(old))],
            WhenFull::Deny,
            Seed::new(1, 2),
        ));
        t.check_n(&7u32, NOW, 2).unwrap();
        t.check(&1u32, NOW).unwrap();
        let state = |t: &Keyed<LiveQuota, 4, [(KeyId, LiveQuota); 1]>, key: u32| {
            t.state_id(KeyId::exact(key.into(), 32), identify(&key, &t.seed).1)
        };
        let (owed, other) = (state(&t, 7), state(&t, 1));
        let t2 = t.clone();
        let h = thread::spawn(move || [t2.check(&7u32, NOW).is_ok(), t2.check(&1u32, NOW).is_ok()]);
        assert_eq!(t.set_override_quota(NOW, vip, new), Ok(new));
        let [seven, one] = h.join().unwrap();
        let end = state(&t, 7);
        assert!(
            orders(&old, &new, owed).contains(&(seven, end)),
            "key 7: admitted {seven} ending in {end}"
        );
        let want = match default.check(other, NOW, 1) {
            Ok((next, _)) => (true, next),
            Err(_) => (false, other),
        };
        assert_eq!((one, state(&t, 1)), want, "key 1 follows the default alone");
    });
}
