//! 100 000 clients checked in random order against one keyed table, as a
//! server's hot loop would: prints the time per check and the table's
//! counters.
//!
//! ```text
//! cargo run --release --features std --example keyed_loop [SLOTS]
//! ```
//!
//! Stage 20 of the test command runs it in release, where the table's
//! 16-byte atomics meet the optimizer: it fails on a crash, or if the
//! table admitted a check of a client without a slot or denied one with a
//! slot (the quota admits every check; the table holds the clients it
//! has room for and denies the others).

use cellrate::keyed::{KeyedBox, Seed, WhenFull};
use cellrate::Quota;

fn main() {
    let slots: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 131_072,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: keyed_loop [SLOTS]  (a positive number of slots)");
            std::process::exit(2);
        }
    };
    // A quota that admits throughout: the loop times lookups, not denials.
    let quota = Quota::per_ticks(1, 1)
        .with_burst(u32::MAX as u64)
        .at_hz(1_000_000_000);
    let seed = Seed::new(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344);
    let table = KeyedBox::with_capacity(slots, quota, WhenFull::Deny, seed);
    const NOW: u64 = 1 << 30;
    const CLIENTS: u32 = 100_000;
    for client in 0..CLIENTS {
        let _ = table.check(&client, NOW);
    }
    // A fixed pseudo-random order (xorshift64).
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let order: Vec<u32> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 32) * CLIENTS as u64) >> 32) as u32
        })
        .collect();
    let mut admitted = 0u64;
    let start = std::time::Instant::now();
    for _ in 0..4 {
        for client in &order {
            admitted += table.check(client, NOW).is_ok() as u64;
        }
    }
    let checks = 4 * order.len() as u64;
    let elapsed = start.elapsed();
    println!(
        "{slots} slots, {CLIENTS} clients: {:.1} ns per check, {admitted} of {checks} admitted",
        elapsed.as_nanos() as f64 / checks as f64
    );
    let stats = table.stats();
    println!("{stats:?}");
    // On a frozen clock no client is ever idle, so none is evicted: the
    // clients with a slot are those inserted at first sight, and each of
    // their checks is admitted; every other check is denied.
    let held = (0..CLIENTS).filter(|c| table.contains(c, NOW)).count();
    assert_eq!(stats.inserted, held, "one insertion per client with a slot");
    let expected = 4 * order.iter().filter(|c| table.contains(*c, NOW)).count() as u64;
    assert_eq!(
        admitted, expected,
        "admitted exactly the checks of clients with a slot"
    );
}
