//! The occupancy table in docs/design/keyed.md is this test's output.
//!
//! Placement is deterministic (fixed seed, keys `0..n` offered in steps,
//! as `benches/keyed.rs` offers them), so the figures are exact for this
//! build of the crate: a change to the hash, the probe window or the
//! eviction rules that moves them fails here until the docs say what the
//! table now does.
use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::Quota;

const SEED: Seed = Seed::new(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344);
/// Every key owes after one check at `NOW` (its TAT is past `NOW`), so no
/// slot is ever idle and nothing is evicted: the table only fills.
const NOW: u64 = 1_000;

static CURVE: Keyed<Quota, 131_072> = Keyed::new(
    Quota::per_ticks(1, 1)
        .with_burst(u32::MAX as u64)
        .at_hz(1_000_000_000),
    WhenFull::Admit,
    SEED,
);

#[test]
fn the_module_docs_show_this_occupancy_curve() {
    let capacity = CURVE.capacity();
    let mut table = String::from(
        "| keys offered per slot | keys tracked | slots used | bytes per tracked key |\n|---|---|---|---|\n",
    );
    let mut offered = 0u32;
    for percent in [50u64, 70, 76, 90, 100, 110] {
        let keys = (capacity as u64 * percent / 100) as u32;
        for key in offered..keys {
            let _ = CURVE.check(&key, NOW);
        }
        offered = keys;
        let tracked = (0..keys).filter(|k| CURVE.contains(k, NOW)).count();
        table.push_str(&format!(
            "| {:.2} | {:.2} % | {:.1} % | {:.1} |\n",
            percent as f64 / 100.0,
            100.0 * tracked as f64 / keys as f64,
            100.0 * tracked as f64 / capacity as f64,
            core::mem::size_of_val(&CURVE) as f64 / tracked as f64,
        ));
    }
    print!("{table}");
    let docs = include_str!("../docs/design/keyed.md");
    assert!(
        docs.contains(&table),
        "docs/design/keyed.md no longer shows the occupancy this table reaches:\n{table}"
    );
}
