//! The packets the meter benches mark: a fixed mix of sizes, one every
//! 400 ns (`benches/meter.rs`, and `tools/ab/ab.rs`, which times the same
//! marks across two versions of the crate).
// Each includer uses part of it.
#![allow(dead_code)]

/// Packet sizes: a 64..1 500 byte mix.
pub const SIZES: [u64; 16] = [
    64, 1_500, 576, 64, 1_500, 128, 1_500, 64, 256, 1_500, 64, 1_024, 1_500, 64, 512, 1_500,
];

/// A packet generator shared by all variants: size and `now` per call.
pub struct Traffic {
    i: usize,
    now: u64,
}

impl Traffic {
    pub fn new() -> Self {
        Traffic { i: 0, now: 1 }
    }
    #[inline(always)]
    pub fn next(&mut self) -> (u64, u64) {
        self.i = self.i.wrapping_add(1);
        self.now += 400;
        (self.now, SIZES[self.i % SIZES.len()])
    }
}
