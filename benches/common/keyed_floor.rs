//! The keyed bench's key walk and its floors, shared with
//! `tools/keyed-profile`: what a keyed check with 16-byte slots could reach
//! over `slots` slots holding keys `0..n`, without the table.

use cellrate::{Algorithm, Quota};
use portable_atomic::{AtomicU128, Ordering};

/// A fixed pseudo-random sequence of keys below `n` (xorshift64).
pub fn random_keys(n: u32) -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 32) * n as u64) >> 32) as u32
        })
        .collect()
}

/// Two folded multiplies, as the table's home mix of exact keys.
fn mix(x: u64) -> u64 {
    let fold = |a: u64, b: u64| {
        let m = a as u128 * b as u128;
        m as u64 ^ (m >> 64) as u64
    };
    fold(
        fold(x ^ 0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7345) ^ 0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    )
}

/// Mix the key, find its slot by linear probing from its home (each key
/// at the first free slot from its home, as the real table places them),
/// one 16-byte load and compare-and-swap. No policies, no insert path: a
/// bound, not a limiter.
pub struct Floor {
    slots: usize,
    wide: Vec<AtomicU128>,
}

impl Floor {
    pub fn new(slots: usize, n: u32) -> Self {
        let f = Floor {
            slots,
            wide: (0..slots).map(|_| AtomicU128::new(0)).collect(),
        };
        for key in 0..n {
            let mut at = f.home(key);
            while f.wide[at].load(Ordering::Relaxed) != 0 {
                at += 1;
            }
            f.wide[at].store(((key as u128 + 1) << 64) | 1, Ordering::Relaxed);
        }
        f
    }

    #[inline(always)]
    fn home(&self, key: u32) -> usize {
        ((mix(key as u64) as u128 * (self.slots - 15) as u128) >> 64) as usize
    }

    /// Swaps the key's state half for `next(state)`, or answers `false`
    /// (storing nothing) where `next` denies.
    #[inline(always)]
    fn swap(&self, key: u32, next: impl Fn(u64) -> Option<u64>) -> bool {
        let mut at = self.home(key);
        loop {
            let slot = &self.wide[at];
            let value = slot.load(Ordering::Acquire);
            if (value >> 64) as u64 == key as u64 + 1 {
                let Some(state) = next(value as u64) else {
                    return false;
                };
                let new = (value & !(u64::MAX as u128)) | state as u128;
                return slot
                    .compare_exchange(value, new, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
            }
            at += 1;
        }
    }

    /// The layout's floor: a bare increment of the state half at `now`.
    #[inline(always)]
    pub fn slot16(&self, key: u32, now: u64) -> bool {
        self.swap(key, |state| Some(state.max(now) + 1))
    }

    /// The same slots deciding as `Keyed<Quota>` does: the GCRA step
    /// ([`Algorithm::check`] of `quota`, the step a table's check runs),
    /// with the quota read from memory as a table reads its own (not
    /// folded into constants by the compiler).
    #[inline(always)]
    pub fn step16(&self, key: u32, now: u64, quota: &Quota) -> bool {
        let quota = std::hint::black_box(quota);
        self.swap(key, |state| quota.check(state, now, 1).ok().map(|(s, _)| s))
    }
}
