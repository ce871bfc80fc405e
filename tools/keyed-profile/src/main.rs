//! One keyed check, repeated: `keyed-profile <table|step16|slot16> <checks>`.
//!
//! The same 1 000 random keys in 2 048 slots as `benches/keyed.rs`, on a
//! frozen clock with an admitting quota. `run.sh` counts the instructions
//! of two runs under cachegrind and prints their difference per check, so
//! the setup cancels out. `slot16` and `step16` are the bench's floors: a
//! bare table of 16-byte slots (mix, probe from home, one 16-byte load and
//! compare-and-swap) with a bare increment, and with the GCRA step a
//! table's check runs.

use std::hint::black_box;

use cellrate::keyed::{Keyed, Seed, WhenFull};
use cellrate::Quota;

const HZ: u64 = 1_000_000_000;
const NOW: u64 = 1_000_000;
const KEYS: u32 = 1_000;

const fn admitting() -> Quota {
    Quota::per_ticks(1, 1).with_burst(u32::MAX as u64).at_hz(HZ)
}

static TABLE: Keyed<Quota, 2_048> = Keyed::new(
    admitting(),
    WhenFull::Admit,
    Seed::new(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344),
);
static STEP_QUOTA: Quota = admitting();

#[path = "../../../benches/common/keyed_floor.rs"]
mod keyed_floor;
use keyed_floor::{random_keys, Floor};

#[inline(never)]
fn slot16(floor: &Floor, key: u32) -> bool {
    floor.slot16(key, NOW)
}

#[inline(never)]
fn step16(floor: &Floor, key: u32) -> bool {
    floor.step16(key, NOW, &STEP_QUOTA)
}

#[inline(never)]
fn table(key: u32) -> bool {
    TABLE.check(&key, NOW).is_ok()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(which), Some(checks)) = (args.next(), args.next()) else {
        eprintln!("usage: keyed-profile <table|step16|slot16> <checks>");
        std::process::exit(2);
    };
    let Ok(checks) = checks.parse::<usize>() else {
        eprintln!("keyed-profile: <checks> must be a number, not {checks:?}");
        std::process::exit(2);
    };
    let keys = random_keys(KEYS);
    let floor = Floor::new(TABLE.capacity(), KEYS);
    for key in 0..KEYS {
        let _ = TABLE.check(&key, NOW);
    }
    let check: &dyn Fn(u32) -> bool = match which.as_str() {
        "table" => &table,
        "step16" => &|k| step16(&floor, k),
        "slot16" => &|k| slot16(&floor, k),
        other => {
            eprintln!("keyed-profile: no case {other:?} (table, step16, slot16)");
            std::process::exit(2);
        }
    };
    let mut admitted = 0u64;
    for i in 0..checks {
        admitted += u64::from(check(black_box(keys[i & (keys.len() - 1)])));
    }
    println!("{admitted}");
}
