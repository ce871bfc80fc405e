extern crate std;

use super::key::identify;
use super::probe::home;
use super::slot::*;
use super::*;
use crate::Quota;

const HZ: u64 = 1_000;

fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::per_second(per_second).with_burst(burst).at_hz(HZ)
}

/// Claims left by a thread that lost a race are withdrawn, and a claim is
/// committed by whoever resolves first (here: set up by hand).
#[test]
fn stray_claims_are_resolved() {
    let t: Keyed<Quota, 4> = Keyed::new(quota(1, 1), WhenFull::Deny, Seed::new(1, 2));
    let (id, hash) = identify(&1u32, &t.seed);
    let first = home(hash, 4);
    // Two claims for key 1 at window positions 0 and 2, as two racing
    // inserters would leave them.
    let slots = t.slots.slots();
    slots[first]
        .compare_exchange(0, pack(CLAIMING | id.0, 100))
        .unwrap();
    slots[first + 1]
        .compare_exchange(0, pack(pack_key_other(), 0))
        .unwrap();
    slots[first + 2]
        .compare_exchange(0, pack(CLAIMING | id.0, 101))
        .unwrap();
    assert!(t.check(&1u32, 0).is_ok());
    let o = t.occupancy(0);
    assert_eq!((o.owing, o.claiming), (1, 0));
    assert_eq!(key_of(slots[first].load()), LIVE | id.0);
    assert_eq!(key_of(slots[first + 2].load()), TOMB);
    assert!(t.check(&1u32, 0).is_err());
}

fn pack_key_other() -> u64 {
    LIVE | KeyId::exact(99, 32).0
}

/// Windows never run past the end of the table, for every capacity and the
/// extreme hashes, and the homes still reach both ends.
#[test]
fn windows_stay_inside_the_table() {
    for n in 1usize..200 {
        let w = n.min(PROBE_WINDOW);
        for hash in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
            assert!(home(hash, n) + w <= n, "n {n} hash {hash}");
        }
        assert_eq!(home(0, n), 0);
        assert_eq!(home(u64::MAX, n), n - w);
    }
}

/// A rewrite reaches every live key (with its own id) and the shared
/// overflow word, and nothing else: a key never checked stays new.
#[test]
fn rewrite_reaches_every_live_key_and_the_overflow() {
    use crate::window::FixedWindowQuota;
    use crate::Algorithm;
    let old = FixedWindowQuota::new(4, 1_000);
    let new = FixedWindowQuota::new(2, 1_000);
    // Two slots: keys 1 and 2 take them, key 3 is charged to the overflow.
    let t: Keyed<FixedWindowQuota, 2> = Keyed::new(old, WhenFull::Shared, Seed::new(1, 2));
    let mut expected = std::vec::Vec::new();
    for (key, cost) in [(1u32, 3), (2, 1), (3, 2)] {
        t.check_n(&key, 10, cost).unwrap();
        if t.contains(&key, 10) {
            expected.push(Some(t.key_id(&key)));
        }
    }
    expected.push(None);
    let seen = std::sync::Mutex::new(std::vec::Vec::new());
    t.rewrite_states(|id, state| {
        seen.lock().unwrap().push(id);
        old.translate(state, 10, &new)
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    // Read under the new limit: key 1's 3 cells are clamped to 2, key 2
    // keeps its 1; the overflow's 2 cells are kept.
    let peek = |key: u32| new.peek(t.state_id(t.key_id(&key), identify(&key, &t.seed).1), 10);
    assert_eq!(peek(1).remaining(), 0);
    assert_eq!(peek(2).remaining(), 1);
    assert_eq!(new.peek(t.overflow.load(), 10).remaining(), 0);
    assert!(!t.contains(&3u32, 10));
}
