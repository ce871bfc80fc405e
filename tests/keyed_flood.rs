//! A flood of a million new keys cannot reset an abuser's limit.
//!
//! The abusive key hammers the table after every new key; its decisions must
//! be exactly those of a lone limiter with the same quota (`LocalGcra`), so
//! it is never evicted while it owes and never gets a fresh burst.
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::{LocalGcra, Quota};

const HZ: u64 = 1_000;
const FLOOD: u32 = 1_000_000;
const ABUSER: u32 = u32::MAX;

fn flood<const N: usize>(table: &Keyed<Quota, N>, quota: Quota, new_key_cost: u64) -> (u64, u64) {
    let mut alone = LocalGcra::new(quota);
    let mut admitted = 0;
    // The abuser spends its burst first.
    while table.check(&ABUSER, 0).is_ok() {
        assert!(alone.check(0).is_ok());
        admitted += 1;
    }
    assert!(alone.check(0).is_err());
    let mut now = 0;
    for key in 0..FLOOD {
        now += 1; // one new key per tick
        let _ = table.check_n(&key, now, new_key_cost);
        let got = table.check(&ABUSER, now).is_ok();
        let expected = alone.check(now).is_ok();
        assert_eq!(got, expected, "abuser at tick {now} after {key} new keys");
        admitted += got as u64;
    }
    (admitted, now)
}

/// New keys that are idle again after 1 000 ticks: the table recycles their
/// slots all the time, but never the abuser's.
#[test]
fn a_million_new_keys_recycled_around_the_abuser() {
    // 10 per second, burst 10, on a 1 kHz clock: a cell every 100 ticks.
    let quota = Quota::per_second(10).at_hz(HZ);
    static TABLE: Keyed<Quota, 4096> = Keyed::new(
        Quota::per_second(10).at_hz(HZ),
        WhenFull::Deny,
        Seed::new(0xf100d, 0x5eed),
    );
    let (admitted, duration) = flood(&TABLE, quota, 1);
    // The GCRA bound over the run: the burst plus one cell per 100 ticks.
    assert!(admitted <= 10 + duration / 100 + 1, "admitted {admitted}");
    let stats = TABLE.stats();
    assert!(stats.reused > 900_000, "{stats:?}");
    assert!(TABLE.contains(&ABUSER, duration));
}

/// New keys that each spend their whole burst, so the table fills with
/// clients that owe: new keys are then denied (fail closed), and the abuser
/// is still held to its own limit, never reset.
#[test]
fn a_million_new_keys_against_a_full_table() {
    let quota = Quota::per_minute(10).at_hz(HZ); // a cell every 6 000 ticks
    static TABLE: Keyed<Quota, 1024> = Keyed::new(
        Quota::per_minute(10).at_hz(HZ),
        WhenFull::Deny,
        Seed::new(0xf100d, 0xf011),
    );
    let (admitted, duration) = flood(&TABLE, quota, 10);
    assert!(admitted <= 10 + duration / 6_000 + 1, "admitted {admitted}");
    let stats = TABLE.stats();
    assert!(stats.overflow_denied > 0, "{stats:?}");
    assert!(TABLE.contains(&ABUSER, duration));
}
