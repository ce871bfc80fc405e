//! Keyed tables against a reference model: a `HashMap` from key to a naive
//! GCRA written straight from the definition (integer ticks, no sub-ticks),
//! with the same capacity policy (a new key takes a free place, or the place
//! of any idle key, or meets the `WhenFull` policy).
//!
//! With a capacity of at most 16 slots the probe window is the whole table,
//! so "full" means the same thing in both; the second property uses a large
//! table with few keys, where no window fills.
//!
//! Every case runs at origin 0 and at two other origins of the clock
//! (`support/origin.rs`): the table sees `origin + now` (wrapping), the
//! model `now`, and every answer (eviction of idle keys included) must be
//! the same.
use std::collections::HashMap;

use cellrate::keyed::{KeyId, Keyed, Seed, WhenFull};
use cellrate::{Denied, Quota};
use proptest::prelude::*;

#[path = "support/origin.rs"]
mod origin;
use origin::{origins, with_zero};

const HZ: u64 = 1_000;

/// GCRA by the book: a cell every `interval` ticks, `burst` at once.
#[derive(Clone, Copy, Debug)]
struct Reference {
    interval: u64,
    burst: u64,
}

/// What a check answers, in plain numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Admit { remaining: u64, reset_after: u64 },
    Limited { retry_after: u64 },
    TooLarge,
}

impl Reference {
    fn quota(&self) -> Quota {
        Quota::per_ticks(1, self.interval)
            .with_burst(self.burst)
            .at_hz(HZ)
    }
    fn is_idle(&self, tat: u64, now: u64) -> bool {
        tat <= now
    }
    /// Admits `cost` cells at `now` given the TAT `tat`.
    fn check(&self, tat: &mut u64, now: u64, cost: u64) -> Answer {
        if cost > self.burst {
            return Answer::TooLarge;
        }
        let start = (*tat).max(now);
        let new_tat = start + cost * self.interval;
        let span = self.burst * self.interval;
        if cost == 0 {
            let ahead = tat.saturating_sub(now);
            return Answer::Admit {
                remaining: (span - ahead) / self.interval,
                reset_after: ahead,
            };
        }
        if new_tat - now <= span {
            *tat = new_tat;
            Answer::Admit {
                remaining: (span - (new_tat - now)) / self.interval,
                reset_after: new_tat - now,
            }
        } else {
            Answer::Limited {
                retry_after: new_tat - now - span,
            }
        }
    }
}

fn answer(r: Result<cellrate::Decision, Denied>) -> Answer {
    match r {
        Ok(d) => Answer::Admit {
            remaining: d.remaining(),
            reset_after: d.reset_after(),
        },
        Err(Denied::Limited(l)) => Answer::Limited {
            retry_after: l.retry_after(),
        },
        Err(Denied::CostTooLarge { .. }) => Answer::TooLarge,
    }
}

/// The reference table.
struct Model {
    default: Reference,
    premium: Reference, // key 0's override
    capacity: usize,
    policy: WhenFull,
    tats: HashMap<u32, u64>,
    shared: u64,
}

impl Model {
    fn limiter(&self, key: u32) -> Reference {
        if key == 0 {
            self.premium
        } else {
            self.default
        }
    }

    fn check(&mut self, key: u32, now: u64, cost: u64) -> Answer {
        let limiter = self.limiter(key);
        if let Some(tat) = self.tats.get_mut(&key) {
            return limiter.check(tat, now, cost);
        }
        let mut fresh = 0;
        if cost == 0 || cost > limiter.burst {
            return limiter.check(&mut fresh, now, cost);
        }
        if self.tats.len() >= self.capacity {
            let idle = self
                .tats
                .iter()
                .find(|(k, tat)| self.limiter(**k).is_idle(**tat, now))
                .map(|(k, _)| *k);
            match idle {
                Some(k) => {
                    self.tats.remove(&k);
                }
                None => {
                    return match self.policy {
                        WhenFull::Deny => Answer::Limited {
                            retry_after: self
                                .tats
                                .values()
                                .map(|tat| tat - now)
                                .min()
                                .unwrap_or(u64::MAX),
                        },
                        WhenFull::Admit => limiter.check(&mut fresh, now, cost),
                        WhenFull::Shared => {
                            let mut shared = self.shared;
                            let a = self.default.check(&mut shared, now, cost);
                            self.shared = shared;
                            a
                        }
                    };
                }
            }
        }
        let tat = self.tats.entry(key).or_insert(0);
        limiter.check(tat, now, cost)
    }
}

#[derive(Clone, Debug)]
struct Op {
    key: u32,
    advance: u64,
    cost: u64,
}

fn ops(keys: u32) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (
            0..keys,
            prop_oneof![Just(0u64), 0..50u64, 0..3_000u64],
            0..5u64,
        )
            .prop_map(|(key, advance, cost)| Op { key, advance, cost }),
        1..300,
    )
}

fn policy() -> impl Strategy<Value = WhenFull> {
    prop_oneof![
        Just(WhenFull::Deny),
        Just(WhenFull::Admit),
        Just(WhenFull::Shared)
    ]
}

fn run<const N: usize>(
    interval: u64,
    burst: u64,
    policy: WhenFull,
    seed: (u64, u64),
    ops: &[Op],
    capacity_in_model: usize,
    origin: u64,
) -> Result<(), TestCaseError> {
    let at = |now: u64| origin.wrapping_add(now);
    let default = Reference { interval, burst };
    let premium = Reference {
        interval,
        burst: burst + 3,
    };
    let table: Keyed<Quota, N, [(KeyId, Quota); 1]> = Keyed::with_overrides(
        default.quota(),
        [(KeyId::exact(0, 32), premium.quota())],
        policy,
        Seed::new(seed.0, seed.1),
    );
    let mut model = Model {
        default,
        premium,
        capacity: capacity_in_model,
        policy,
        tats: HashMap::new(),
        shared: 0,
    };
    let mut now = 0;
    for (i, op) in ops.iter().enumerate() {
        now += op.advance;
        let expected = model.check(op.key, now, op.cost);
        let got = answer(table.check_n(&op.key, at(now), op.cost));
        prop_assert_eq!(
            got,
            expected,
            "op {} {:?} at {} origin {}",
            i,
            op,
            now,
            origin
        );
        // Peeking agrees too, and never inserts.
        let mut tat = model.tats.get(&op.key).copied().unwrap_or(0);
        let peeked = model.limiter(op.key).check(&mut tat, now, 0);
        let snapshot = table.peek(&op.key, at(now));
        prop_assert_eq!(
            peeked,
            Answer::Admit {
                remaining: snapshot.remaining(),
                reset_after: snapshot.reset_after()
            }
        );
    }
    let occupancy = table.occupancy(at(now));
    prop_assert!(occupancy.owing + occupancy.idle <= N);
    prop_assert_eq!(occupancy.claiming, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Small tables (the window is the whole table), full ones included.
    #[test]
    fn small_tables_match_the_model(
        interval in prop_oneof![Just(100u64), Just(1_000u64)],
        burst in 1..4u64,
        policy in policy(),
        seed in (any::<u64>(), any::<u64>()),
        ops in ops(12),
        drawn in origins(),
    ) {
        for origin in with_zero(drawn) {
            run::<1>(interval, burst, policy, seed, &ops, 1, origin)?;
            run::<4>(interval, burst, policy, seed, &ops, 4, origin)?;
            run::<9>(interval, burst, policy, seed, &ops, 9, origin)?;
            run::<16>(interval, burst, policy, seed, &ops, 16, origin)?;
        }
    }

    /// A large table with few keys never fills: it is an unbounded map.
    #[test]
    fn large_tables_match_an_unbounded_map(
        interval in prop_oneof![Just(100u64), Just(1_000u64)],
        burst in 1..4u64,
        seed in (any::<u64>(), any::<u64>()),
        ops in ops(40),
        drawn in origins(),
    ) {
        for origin in with_zero(drawn) {
            run::<4096>(interval, burst, WhenFull::Deny, seed, &ops, usize::MAX, origin)?;
        }
    }
}
