//! Real threads on the real 128-bit atomics (the loom models check the
//! protocol; this checks the build that ships): no over-admission on a hot
//! key, and racing inserts of the same new keys admit each key once.
use std::sync::atomic::{AtomicU64, Ordering};

use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::Quota;

const THREADS: usize = 4;

#[test]
fn hot_key_is_admitted_exactly_its_burst() {
    static TABLE: Keyed<Quota, 64> = Keyed::new(
        Quota::per_hour(1).with_burst(10_000).at_hz(1_000),
        WhenFull::Deny,
        Seed::new(1, 2),
    );
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..5_000 {
                    if TABLE.check(&7u32, 0).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.load(Ordering::Relaxed), 10_000);
}

#[test]
fn racing_inserts_admit_each_new_key_once() {
    static TABLE: Keyed<Quota, 8_192> = Keyed::new(
        Quota::per_hour(1).with_burst(1).at_hz(1_000),
        WhenFull::Deny,
        Seed::new(3, 4),
    );
    const KEYS: u32 = 3_000;
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let admitted = &admitted;
            s.spawn(move || {
                // Each thread walks the keys from a different start.
                for i in 0..KEYS {
                    let key = (i + t as u32 * 997) % KEYS;
                    if TABLE.check(&key, 0).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.load(Ordering::Relaxed), KEYS as u64);
    let o = TABLE.occupancy(0);
    assert_eq!((o.owing, o.claiming), (KEYS as usize, 0));
}
