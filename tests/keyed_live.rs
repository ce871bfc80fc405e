//! A keyed table whose quotas change at run time ([`LiveQuota`]) against a
//! model written for clarity: one TAT per client in plain ticks, GCRA's
//! rule `max(TAT, now) + cost·T − now ≤ burst·T`, and a quota change that
//! keeps every TAT (`LiveQuota::set_quota` alone: a publication, which
//! `KeyedTable::translate_states` would follow to keep the cells used). Any interleaving of checks,
//! default-quota changes and one client's override changes: the table
//! admits exactly what the model admits, so no change over-admits, resets
//! a client or touches another client's quota.

use std::collections::HashMap;

use cellrate::keyed::{KeyId, Keyed, LiveQuota, Seed, WhenFull};
use cellrate::Quota;
use proptest::prelude::*;

const HZ: u64 = 1_000;
const VIP: u32 = 7;

/// Emission intervals in whole ticks (scale 1 at 1 kHz: exact).
const INTERVALS: [u64; 6] = [1, 2, 5, 10, 50, 100];

#[derive(Clone, Copy, Debug)]
enum Op {
    Check { key: u32, dt: u64, cost: u64 },
    SetDefault { interval: u64, burst: u64 },
    SetVip { interval: u64, burst: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let quota = (prop::sample::select(INTERVALS.to_vec()), 1u64..=5);
    prop_oneof![
        6 => (prop::sample::select(vec![0u32, 1, 2, 3, VIP]), 0u64..120, 0u64..=6)
            .prop_map(|(key, dt, cost)| Op::Check { key, dt, cost }),
        1 => quota.clone().prop_map(|(interval, burst)| Op::SetDefault { interval, burst }),
        1 => quota.prop_map(|(interval, burst)| Op::SetVip { interval, burst }),
    ]
}

fn quota(interval: u64, burst: u64) -> Quota {
    Quota::per_ticks(1, interval).with_burst(burst).at_hz(HZ)
}

/// The model: (T, burst) per quota, a TAT per client, nothing else.
struct Model {
    default: (u64, u64),
    vip: (u64, u64),
    tat: HashMap<u32, u64>,
}

impl Model {
    fn check(&mut self, key: u32, now: u64, cost: u64) -> bool {
        let (t, burst) = if key == VIP { self.vip } else { self.default };
        let tat = self.tat.get(&key).copied().unwrap_or(0).max(now);
        if cost > burst || tat + cost * t - now > burst * t {
            return false;
        }
        self.tat.insert(key, tat + cost * t);
        true
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn live_quotas_keep_every_clients_state(
        start in (prop::sample::select(INTERVALS.to_vec()), 1u64..=5),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let table: Keyed<LiveQuota, 64, [(KeyId, LiveQuota); 1]> = Keyed::with_overrides(
            LiveQuota::new(quota(start.0, start.1)),
            [(KeyId::exact(u64::from(VIP), 32), LiveQuota::new(quota(start.0, start.1)))],
            WhenFull::Deny,
            Seed::new(3, 4),
        );
        let mut model = Model { default: start, vip: start, tat: HashMap::new() };
        let mut now = 0;
        for op in ops {
            match op {
                Op::Check { key, dt, cost } => {
                    now += dt;
                    let got = table.check_n(&key, now, cost);
                    let want = model.check(key, now, cost);
                    // A cost of 0 is a peek: always Ok, charges nothing.
                    prop_assert_eq!(got.is_ok(), want || cost == 0, "{:?} at {}", op, now);
                }
                Op::SetDefault { interval, burst } => {
                    table.algorithm().set_quota(quota(interval, burst)).unwrap();
                    model.default = (interval, burst);
                }
                Op::SetVip { interval, burst } => {
                    table.overrides()[0].1.set_quota(quota(interval, burst)).unwrap();
                    model.vip = (interval, burst);
                }
            }
        }
    }
}
