//! Keying a table by a type of the user's own, the documented way
//! (`#[derive(Hash)]` and `Hashed`): distinct values are distinct clients,
//! each with its own limiter. `Key` itself cannot be implemented outside the
//! crate (its docs hold the `compile_fail` examples), so an implementation
//! that writes nothing, and merges every client into one limiter, cannot
//! exist.

use cellrate::keyed::{Hashed, Keyed, Seed, WhenFull};
use cellrate::Quota;

#[derive(Hash, Clone, Copy, Debug, PartialEq, Eq)]
struct UserId {
    tenant: u16,
    user: u64,
}

#[derive(Hash, Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    Anonymous,
    Api(u32),
    User(UserId),
}

fn quota(burst: u64) -> Quota {
    Quota::per_second(1).with_burst(burst).at_hz(1_000)
}

#[test]
fn two_user_keys_get_two_limiters() {
    let table: Keyed<Quota, 64> = Keyed::new(quota(2), WhenFull::Deny, Seed::new(1, 2));
    let alice = UserId { tenant: 1, user: 7 };
    let bob = UserId { tenant: 1, user: 8 };
    assert_ne!(table.key_id(&Hashed(alice)), table.key_id(&Hashed(bob)));
    // Alice spends her burst of 2; Bob still has his whole burst.
    assert_eq!(table.check(&Hashed(alice), 0).unwrap().remaining(), 1);
    assert_eq!(table.check(&Hashed(alice), 0).unwrap().remaining(), 0);
    assert!(table.check(&Hashed(alice), 0).is_err());
    assert_eq!(table.check(&Hashed(bob), 0).unwrap().remaining(), 1);
    assert_eq!(table.peek(&Hashed(alice), 0).remaining(), 0);
    assert_eq!(table.peek(&Hashed(bob), 0).remaining(), 1);
    // A reference to the key is the same key.
    assert!(table.check(&Hashed(&bob), 0).is_ok());
    assert!(table.check(&Hashed(bob), 0).is_err());
    assert_eq!(table.stats().inserted, 2);
}

/// Many values of a user enum (variants that differ only in their tag, and
/// fields that differ in one bit): each is admitted once, then denied once,
/// and each took a slot of its own. If any two merged, the second's first
/// check would be denied and the table would hold fewer keys.
#[test]
fn every_distinct_user_key_is_a_client_of_its_own() {
    let mut callers = vec![Caller::Anonymous];
    for i in 0..300u32 {
        callers.push(Caller::Api(i));
        callers.push(Caller::User(UserId {
            tenant: (i % 3) as u16,
            user: 1 << (i % 64),
        }));
    }
    callers.sort_by_key(|c| format!("{c:?}"));
    callers.dedup();
    let distinct = callers.len();
    // Anonymous, 300 Api values, and 192 users (tenant i mod 3, bit i mod 64).
    assert_eq!(distinct, 1 + 300 + 192);
    let table: Keyed<Quota, 2048> = Keyed::new(quota(1), WhenFull::Deny, Seed::new(3, 4));
    for caller in &callers {
        assert!(
            table.check(&Hashed(caller), 0).is_ok(),
            "{caller:?} denied on first sight"
        );
    }
    for caller in &callers {
        assert!(
            table.check(&Hashed(caller), 0).is_err(),
            "{caller:?} admitted twice"
        );
    }
    assert_eq!(table.stats().inserted, distinct);
    let mut ids: Vec<_> = callers
        .iter()
        .map(|c| table.key_id(&Hashed(c)).get())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), distinct);
}

#[test]
fn narrow_keys_and_pairs_are_exact_and_wide_ones_fingerprinted() {
    use cellrate::keyed::Key;
    assert_eq!(<u32 as Key>::EXACT_BITS, 32);
    assert_eq!(<(u32, u16) as Key>::EXACT_BITS, 48);
    assert_eq!(<u64 as Key>::EXACT_BITS, 0);
    assert_eq!((7u32, 3u16).exact(), (7 << 16) | 3);
}
