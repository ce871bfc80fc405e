//! A table keyed by (client, endpoint) whose overrides name clients, read
//! through `entry_ruled`: each (client, endpoint) keeps its own state and
//! is decided by its client's override (or the default), as a naive GCRA
//! per (client, endpoint) written from the definition says.
#![cfg(feature = "alloc")]

use std::collections::HashMap;

use cellrate::keyed::{KeyedBox, Seed, WhenFull};
use cellrate::{Quota, RateLimiter};
use proptest::prelude::*;

const HZ: u64 = 1_000;

/// GCRA by the book, in whole ticks: a cell every `interval`, `burst` at once.
#[derive(Clone, Copy, Debug)]
struct Reference {
    interval: u64,
    burst: u64,
}

impl Reference {
    /// `Some(remaining)` and the new TAT, or `None` (denied).
    fn check(&self, tat: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        let start = tat.max(now);
        let after = start + cost * self.interval;
        if after - now > self.burst * self.interval {
            return None;
        }
        let remaining = (self.burst * self.interval - (after - now)) / self.interval;
        Some((remaining, after))
    }
}

const DEFAULT: Reference = Reference {
    interval: 10,
    burst: 2,
};

/// Client 1 and client 2 have overrides; 0 and 3 do not.
fn own(client: u8) -> Reference {
    match client {
        1 => Reference {
            interval: 5,
            burst: 4,
        },
        2 => Reference {
            interval: 20,
            burst: 1,
        },
        _ => DEFAULT,
    }
}

fn quota(r: Reference) -> Quota {
    Quota::per_ticks(1, r.interval)
        .with_burst(r.burst)
        .at_hz(HZ)
}

proptest! {
    #[test]
    fn ruled_entries_follow_their_clients_override(
        steps in prop::collection::vec((0u8..4, 0u8..3, 0u64..30, 1u64..3), 1..80)
    ) {
        let seed = Seed::new(7, 11);
        let probe = KeyedBox::with_capacity(1, quota(DEFAULT), WhenFull::Deny, seed);
        let overrides = vec![
            (probe.key_id(&1u8), quota(own(1))),
            (probe.key_id(&2u8), quota(own(2))),
        ];
        let table = KeyedBox::with_capacity_and_overrides(
            256, quota(DEFAULT), overrides, WhenFull::Deny, seed);
        let mut model: HashMap<(u8, u8), u64> = HashMap::new();
        let mut now = 0;
        for (client, endpoint, dt, cost) in steps {
            now += dt;
            let got = table.entry_ruled(&(client, endpoint), &client).check_n(now, cost);
            let tat = model.get(&(client, endpoint)).copied().unwrap_or(0);
            match own(client).check(tat, now, cost) {
                Some((remaining, after)) => {
                    let d = got.map_err(|e| format!("{e:?}")).unwrap();
                    prop_assert_eq!(d.remaining(), remaining);
                    prop_assert_eq!(d.limit(), own(client).burst);
                    model.insert((client, endpoint), after);
                }
                None => prop_assert!(got.is_err(), "admitted: {:?}", got),
            }
        }
    }
}

/// A plain entry of the same (client, endpoint) key is decided by the
/// default: the override is found only through its rule.
#[test]
fn a_plain_entry_ignores_the_clients_override() {
    let seed = Seed::new(7, 11);
    let probe = KeyedBox::with_capacity(1, quota(DEFAULT), WhenFull::Deny, seed);
    let table = KeyedBox::with_capacity_and_overrides(
        16,
        quota(DEFAULT),
        vec![(probe.key_id(&1u8), quota(own(1)))],
        WhenFull::Deny,
        seed,
    );
    assert_eq!(table.entry(&(1u8, 0u8)).check(0).unwrap().limit(), 2);
    assert_eq!(
        table
            .entry_ruled(&(1u8, 1u8), &1u8)
            .check(0)
            .unwrap()
            .limit(),
        4
    );
}
