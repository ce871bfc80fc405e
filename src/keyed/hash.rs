//! The keyed hash that places keys: the seed, the home mix of exact keys
//! and the SipHash of wide ones. The keys themselves, their identities and
//! how each kind is hashed are in [`key`](super::key).
//!
//! # The math
//!
//! Every key becomes two numbers: a **home hash** `h` (64 bits) that picks the
//! first slot of its probe window, and an **identity** `id` (62 bits) that is
//! what a slot stores.
//!
//! * A key that fits in 61 bits ([`Key::EXACT_BITS`] ≥ 1: `u32`, `(u32, u16)`,
//!   …) is stored **exactly**: `id = 2⁶¹ | key`. Two different keys never share
//!   a slot. `h` = [`home_word`]: two rounds of a keyed folded multiply,
//!   `fold(fold(key ⊕ a₀, m₀) ⊕ a₁, m₁)` where `fold(a, b)` is the xor of
//!   the two halves of the 128-bit product `a·b`, and `a₀, m₀, a₁, m₁` are
//!   derived from the seed by SplitMix64 (the multipliers forced odd).
//! * A wider key (`u64`, strings, byte slices, [`Hashed`]) is stored as a
//!   **fingerprint**: `(h, f) = SipHash-1-3-128(seed, bytes)` and
//!   `id = f mod 2⁶¹`. Two keys share a slot only if their 61-bit
//!   fingerprints collide *and* their windows overlap: about `W / 2⁶¹` per
//!   pair of live keys (W = 16 slots), and since the seed is secret (random
//!   per table, or chosen by the caller) a client cannot search for a
//!   collision offline.
//!
//! SipHash-1-3 (Aumasson and Bernstein, INDOCRYPT 2012, as in Rust's
//! `HashMap`) comes from `siphasher`; the tests pin it to the paper's vectors
//! and 1 024 recorded outputs (`siphash_vectors.txt`). Why exact keys may use
//! the cheaper home hash is argued in docs/design/keyed.md.
//!
//! # Invariants
//!
//! * `id` always has bit 61 clear for fingerprints and set for exact keys, so
//!   an exact key never equals a fingerprint.
//! * `id < 2⁶²`; the two top bits of a slot's key word are the table's tags.

use core::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher13};

/// The 128-bit secret of a table's keyed hash.
///
/// Pick it at random per table (with the `std` feature:
/// [`Seed::random`]) so that clients cannot predict which keys collide. A
/// fixed seed makes the placement of keys reproducible (tests, or several
/// processes that must agree).
///
/// ```
/// use cellrate::keyed::Seed;
/// const SEED: Seed = Seed::new(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
/// assert_ne!(SEED, Seed::new(0, 0));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seed {
    k0: u64,
    k1: u64,
    /// Keys of the home mix of exact keys, derived from `k0, k1` (see
    /// [`home_word`]): two xor keys and two odd multipliers.
    mix: [u64; 4],
}

impl core::fmt::Debug for Seed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // A secret: never printed.
        f.write_str("Seed(..)")
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Seed {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "Seed(..)")
    }
}

impl Seed {
    /// A seed from two 64-bit halves.
    pub const fn new(k0: u64, k1: u64) -> Self {
        Seed {
            k0,
            k1,
            mix: [
                splitmix(k0 ^ 0x243f_6a88_85a3_08d3),
                splitmix(k1 ^ 0x1319_8a2e_0370_7344) | 1,
                splitmix(k0.rotate_left(32) ^ k1 ^ 0xa409_3822_299f_31d0),
                splitmix(k1.rotate_left(32) ^ k0 ^ 0x082e_fa98_ec4e_6c89) | 1,
            ],
        }
    }

    /// A seed from the operating system's randomness (through the standard
    /// library's per-process random hash keys).
    ///
    /// ```
    /// use cellrate::keyed::Seed;
    /// assert_ne!(Seed::random(), Seed::random());
    /// ```
    #[cfg(feature = "std")]
    pub fn random() -> Self {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        Seed::new(state.hash_one(0x5eed_u64), state.hash_one(0xc0ffee_u64))
    }
}

/// The SplitMix64 finalizer (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a bijection of `u64` with
/// full avalanche, used only to spread a caller's seed (even `0, 0`) into the
/// home mix's keys.
const fn splitmix(x: u64) -> u64 {
    let x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `lo ⊕ hi` of a 128-bit product: the "folded multiply".
#[inline(always)]
const fn fold(a: u64, b: u64) -> u64 {
    let m = a as u128 * b as u128;
    m as u64 ^ (m >> 64) as u64
}

/// The home hash of an exact key (see the [module docs](self)): about 8
/// instructions instead of SipHash's ~90.
#[inline(always)]
pub(crate) const fn home_word(seed: &Seed, word: u64) -> u64 {
    let [a0, m0, a1, m1] = seed.mix;
    fold(fold(word ^ a0, m0) ^ a1, m1)
}

/// The streaming SipHash-1-3-128 of a key's bytes, counting the bytes
/// written; a [`Hasher`], so a `Hash` type in [`Hashed`](super::Hashed)
/// writes itself.
#[derive(Clone, Copy)]
pub struct KeyHasher {
    sip: SipHasher13,
    length: u64,
}

#[cfg(feature = "defmt")]
impl defmt::Format for KeyHasher {
    fn format(&self, f: defmt::Formatter) {
        // The state is derived from the secret seed: never printed.
        defmt::write!(f, "KeyHasher {{ .. }}")
    }
}

impl core::fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyHasher")
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

impl KeyHasher {
    /// A hasher keyed by `seed`.
    pub(crate) fn new(seed: &Seed) -> Self {
        KeyHasher {
            sip: SipHasher13::new_with_keys(seed.k0, seed.k1),
            length: 0,
        }
    }

    /// The bytes written so far (wrapping).
    pub(crate) fn written(&self) -> u64 {
        self.length
    }

    /// The 128-bit SipHash of everything written, as its two words.
    pub(crate) fn finish128(self) -> (u64, u64) {
        let h = self.sip.finish128();
        (h.h1, h.h2)
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        self.sip.write(bytes);
    }

    /// The 64 bits `siphasher` gives for a 128-bit state (a table uses
    /// both words of its 128-bit output, never this).
    fn finish(&self) -> u64 {
        self.sip.finish()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    extern crate std;
    use super::*;
    use core::hash::Hasher;

    /// The inputs of `siphash_vectors.txt`, line `i`: a seed, up to 66
    /// bytes, written in two parts.
    fn vector_input(i: u64) -> (Seed, std::vec::Vec<u8>, usize) {
        let seed = Seed::new(splitmix(i), splitmix(i + 1000));
        let len = i % 67;
        let bytes = (0..len).map(|j| splitmix(i * 131 + j) as u8).collect();
        (seed, bytes, (i % (len + 1)) as usize)
    }

    /// Every key is hashed to the recorded SipHash-1-3-128 outputs on
    /// 1 024 inputs: placement and fingerprints are pinned.
    #[test]
    fn outputs_match_the_recorded_vectors() {
        let table = include_str!("siphash_vectors.txt");
        let mut lines = 0;
        for (i, line) in table.lines().enumerate() {
            let (seed, bytes, split) = vector_input(i as u64);
            let mut h = KeyHasher::new(&seed);
            h.write(&bytes[..split]);
            h.write(&bytes[split..]);
            let (a, b) = h.finish128();
            assert_eq!(std::format!("{a:016x} {b:016x}"), line, "vector {i}");
            assert_eq!(h.written(), bytes.len() as u64);
            lines += 1;
        }
        assert_eq!(lines, 1_024);
    }

    /// The reference vectors (key 00..0f, empty input) of SipHash-2-4, in
    /// its 64-bit (the paper's appendix) and 128-bit forms: the crate the
    /// hash comes from computes SipHash as specified.
    #[test]
    fn paper_vectors() {
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let h64 = siphasher::sip::SipHasher24::new_with_keys(k0, k1);
        assert_eq!(h64.finish(), 0x726f_db47_dd0e_0e31);
        let h128 = siphasher::sip128::SipHasher24::new_with_keys(k0, k1).finish128();
        assert_eq!(
            (h128.h1, h128.h2),
            (0xe6a8_25ba_047f_81a3, 0x9302_55c7_1472_f66d)
        );
    }

    /// The home mix spreads structured keys (consecutive integers, one bit
    /// set) evenly over 4 096 buckets of the hash space, for ordinary seeds
    /// and degenerate ones alike; a mix that ignored its keys or collapsed
    /// small inputs would pile them into a few buckets.
    #[test]
    fn home_mix_spreads_structured_keys() {
        let seeds = [
            Seed::new(0, 0),
            Seed::new(1, 2),
            Seed::new(u64::MAX, u64::MAX),
            Seed::new(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344),
        ];
        for seed in &seeds {
            for keys in [
                (0u64..65_536).collect::<std::vec::Vec<_>>(),
                (0u64..65_536).map(|k| k << 16).collect(),
                (0u64..65_536).map(|k| (k << 32) | 7).collect(),
            ] {
                let mut buckets = [0u32; 4096];
                for &k in &keys {
                    buckets[(home_word(seed, k) >> 52) as usize] += 1;
                }
                // 16 expected per bucket; Poisson tails are far inside these.
                let (min, max) = (buckets.iter().min(), buckets.iter().max());
                assert!(min >= Some(&1) && max <= Some(&48), "{min:?} {max:?}");
            }
            for bit in 0..64 {
                let a = home_word(seed, 0);
                let b = home_word(seed, 1 << bit);
                assert!((a ^ b).count_ones() >= 8, "bit {bit}");
            }
        }
        assert_ne!(home_word(&seeds[1], 5), home_word(&seeds[2], 5));
    }
}
