//! Keys and the keyed hash that places them.
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
//! SipHash is the pseudo-random function of Aumasson and Bernstein,
//! "SipHash: a fast short-input PRF" (INDOCRYPT 2012); the 1-3 round variant
//! is the one Rust's standard `HashMap` uses. It is written here from the
//! paper's description (`sip_round`, 8-byte little-endian blocks, a last block
//! carrying the length in its top byte, the 128-bit output variant's `0xee` and
//! `0xdd` constants).
//!
//! Why the home hash of exact keys may be cheaper than SipHash: see the
//! flood argument in the keyed module's docs.
//!
//! # Invariants
//!
//! * `id` always has bit 61 clear for fingerprints and set for exact keys, so
//!   an exact key never equals a fingerprint.
//! * `id < 2⁶²`; the two top bits of a slot's key word are the table's tags.

use core::hash::{Hash, Hasher};

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

/// The SipHash state: four 64-bit words.
#[derive(Clone, Copy)]
struct Sip {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl Sip {
    #[inline(always)]
    const fn new(seed: &Seed, wide: bool) -> Self {
        Sip {
            v0: seed.k0 ^ 0x736f_6d65_7073_6575,
            v1: seed.k1 ^ 0x646f_7261_6e64_6f6d ^ if wide { 0xee } else { 0 },
            v2: seed.k0 ^ 0x6c79_6765_6e65_7261,
            v3: seed.k1 ^ 0x7465_6462_7974_6573,
        }
    }

    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13) ^ self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16) ^ self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21) ^ self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17) ^ self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline(always)]
    fn compress(&mut self, block: u64, rounds: u32) {
        self.v3 ^= block;
        for _ in 0..rounds {
            self.round();
        }
        self.v0 ^= block;
    }

    #[inline(always)]
    fn finish(&mut self, xor: u64, rounds: u32) -> u64 {
        self.v2 ^= xor;
        for _ in 0..rounds {
            self.round();
        }
        self.v0 ^ self.v1 ^ self.v2 ^ self.v3
    }

    #[inline(always)]
    fn finish128(mut self, rounds: u32) -> (u64, u64) {
        let first = self.finish(0xee, rounds);
        self.v1 ^= 0xdd;
        let second = self.finish(0, rounds);
        (first, second)
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

/// The home hash of an exact key: two rounds of a keyed folded multiply,
/// `h₁ = fold(x ⊕ a₀, m₀)`, `h = fold(h₁ ⊕ a₁, m₁)`, with keys derived from
/// the seed (odd multipliers). About 8 instructions instead of SipHash's ~90;
/// see the [module docs](self) for what this gives up and why it is enough.
#[inline(always)]
pub(crate) const fn home_word(seed: &Seed, word: u64) -> u64 {
    let [a0, m0, a1, m1] = seed.mix;
    fold(fold(word ^ a0, m0) ^ a1, m1)
}

/// SipHash-1-3 of one 8-byte block (the little-endian bytes of `word`).
#[cfg(all(test, not(feature = "loom")))]
#[inline(always)]
pub(crate) fn hash_word(seed: &Seed, word: u64) -> u64 {
    let mut s = Sip::new(seed, false);
    s.compress(word, 1);
    s.compress(8 << 56, 1);
    s.finish(0xff, 3)
}

/// A streaming SipHash over the bytes of a key, with `c` compression and `d`
/// finalization rounds (1 and 3 for the table; 2 and 4 in the tests, to check
/// the rounds against the standard library's SipHash-2-4).
///
/// [`Key::feed`] writes a key's bytes to it; it implements [`Hasher`], so
/// that any `Hash` type wrapped in [`Hashed`] writes itself.
#[derive(Clone, Copy)]
pub struct KeyHasher {
    state: Sip,
    tail: u64,
    tail_len: u32,
    length: u64,
    c: u32,
    d: u32,
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
    fn with_rounds(seed: &Seed, wide: bool, c: u32, d: u32) -> Self {
        KeyHasher {
            state: Sip::new(seed, wide),
            tail: 0,
            tail_len: 0,
            length: 0,
            c,
            d,
        }
    }

    fn last_block(&mut self) -> u64 {
        self.tail | ((self.length & 0xff) << 56)
    }

    /// The 128-bit SipHash of everything written.
    fn finish128(mut self) -> (u64, u64) {
        let b = self.last_block();
        self.state.compress(b, self.c);
        self.state.finish128(self.d)
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        let mut bytes = bytes;
        // Complete a pending partial block.
        while self.tail_len > 0 && !bytes.is_empty() {
            self.tail |= (bytes[0] as u64) << (8 * self.tail_len);
            self.tail_len += 1;
            bytes = &bytes[1..];
            if self.tail_len == 8 {
                self.state.compress(self.tail, self.c);
                self.tail = 0;
                self.tail_len = 0;
            }
        }
        if self.tail_len > 0 {
            // All of `bytes` went into the pending block, which is still
            // partial: keep it (and its length) for the next write.
            return;
        }
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            self.state.compress(u64::from_le_bytes(b), self.c);
        }
        for (i, &byte) in chunks.remainder().iter().enumerate() {
            self.tail |= (byte as u64) << (8 * i);
        }
        self.tail_len = chunks.remainder().len() as u32;
    }

    fn finish(&self) -> u64 {
        let mut copy = *self;
        let b = copy.last_block();
        copy.state.compress(b, copy.c);
        copy.state.finish(0xff, copy.d)
    }
}

/// The seal of [`Key`]: a public trait in a module private to the crate,
/// so that no type outside it can implement `Key`.
pub(crate) mod sealed {
    /// Implemented, with [`Key`](super::Key), only in this crate.
    pub trait Sealed {}
}

/// A key of a keyed table: a client, an endpoint, a `(client, endpoint)` pair.
///
/// Keys of at most 61 bits are stored exactly; wider keys as a 61-bit
/// fingerprint of a keyed hash (see [`Seed`] and the [keyed module](crate::keyed)). Implemented for
/// the integers, `char`, `bool`, strings, byte slices and arrays, references,
/// pairs and triples of keys, and any `Hash` type wrapped in [`Hashed`].
///
/// ```
/// use cellrate::keyed::Key;
/// assert_eq!(<u32 as Key>::EXACT_BITS, 32);
/// assert_eq!(<(u32, u16) as Key>::EXACT_BITS, 48); // a (client, endpoint) pair, exact
/// assert_eq!(<u64 as Key>::EXACT_BITS, 0);         // fingerprinted
/// assert_eq!((7u32, 3u16).exact(), (7 << 16) | 3);
/// ```
///
/// # Keying by your own type
///
/// Derive `Hash` and wrap the key in [`Hashed`], or key by the field that
/// identifies the client (an integer of at most 61 bits stays exact):
///
/// ```
/// use cellrate::keyed::{Hashed, Keyed, Seed, WhenFull};
/// use cellrate::Quota;
///
/// #[derive(Hash)]
/// struct UserId { tenant: u16, user: u64 }
///
/// let table: Keyed<Quota, 64> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
/// let alice = UserId { tenant: 1, user: 7 };
/// assert!(table.check(&Hashed(&alice), 0).is_ok());  // the one line
/// assert!(table.check(&Hashed(&alice), 0).is_err()); // alice's own limit
/// assert!(table.check(&Hashed(&UserId { tenant: 1, user: 8 }), 0).is_ok());
/// assert!(table.check(&(alice.tenant, alice.user as u32), 0).is_ok()); // exact, by fields
/// ```
///
/// # Sealed
///
/// Only this crate implements `Key`. A key's placement rests on promises
/// the compiler cannot check (an exact value below `2^EXACT_BITS` that
/// differs for different keys, or bytes that differ for different keys);
/// an implementation that kept none of them would merge every client into
/// one limiter without an error. So an implementation outside the crate
/// does not compile, however complete:
///
/// ```compile_fail,E0277
/// use cellrate::keyed::Key;
/// struct MyId(u32);
/// impl Key for MyId {} // error: `MyId: Sealed` is not satisfied
/// ```
///
/// ```compile_fail,E0277
/// use cellrate::keyed::{Key, KeyHasher};
/// struct MyId(u32);
/// impl Key for MyId {
///     const EXACT_BITS: u32 = 32;
///     fn exact(&self) -> u64 { self.0 as u64 }
///     fn feed(&self, _: &mut KeyHasher) {}
/// }
/// ```
pub trait Key: sealed::Sealed {
    /// How many bits the key needs when stored exactly (1 to 61), or 0 if it
    /// is stored as a fingerprint.
    const EXACT_BITS: u32;

    /// The key as a number below `2^EXACT_BITS`, different for different
    /// keys, when `EXACT_BITS > 0` (a fingerprinted key returns 0 and the
    /// table never reads it).
    fn exact(&self) -> u64;

    /// Writes the key's bytes to the hasher: equal keys write equal bytes,
    /// different keys different bytes (an exactly stored integer writes its
    /// value's 8 little-endian bytes; the table reads this only when
    /// `EXACT_BITS == 0`).
    fn feed(&self, hasher: &mut KeyHasher);
}

macro_rules! exact_key {
    ($($t:ty => $bits:expr, $as:ty;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Key for $t {
            const EXACT_BITS: u32 = $bits;
            #[inline(always)]
            fn exact(&self) -> u64 {
                *self as $as as u64
            }
            fn feed(&self, hasher: &mut KeyHasher) {
                hasher.write(&self.exact().to_le_bytes());
            }
        }
    )*};
}

exact_key! {
    u8 => 8, u8;
    u16 => 16, u16;
    u32 => 32, u32;
    i8 => 8, u8;
    i16 => 16, u16;
    i32 => 32, u32;
    bool => 1, u8;
}

impl sealed::Sealed for char {}
impl Key for char {
    const EXACT_BITS: u32 = 21;
    #[inline(always)]
    fn exact(&self) -> u64 {
        *self as u64
    }
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write(&self.exact().to_le_bytes());
    }
}

/// Fingerprinted keys: `EXACT_BITS = 0`, and `exact` is never read.
macro_rules! wide_key {
    ($(impl$([$($generics:tt)*])? for $t:ty => |$key:ident, $hasher:ident| $feed:expr;)*) => {$(
        impl$(<$($generics)*>)? sealed::Sealed for $t {}
        impl$(<$($generics)*>)? Key for $t {
            const EXACT_BITS: u32 = 0;
            fn exact(&self) -> u64 {
                0
            }
            #[inline(always)]
            fn feed(&self, $hasher: &mut KeyHasher) {
                let $key = self;
                $feed
            }
        }
    )*};
}

wide_key! {
    impl for u64 => |key, hasher| hasher.write(&key.to_le_bytes());
    impl for i64 => |key, hasher| hasher.write(&key.to_le_bytes());
    impl for u128 => |key, hasher| hasher.write(&key.to_le_bytes());
    impl for i128 => |key, hasher| hasher.write(&key.to_le_bytes());
    impl for [u8] => |key, hasher| hasher.write(key);
    impl[const N: usize] for [u8; N] => |key, hasher| hasher.write(key);
    impl for str => |key, hasher| hasher.write(key.as_bytes());
    impl[T: Hash] for Hashed<T> => |key, hasher| key.0.hash(hasher);
}

#[cfg(feature = "alloc")]
wide_key! {
    impl for alloc::string::String => |key, hasher| hasher.write(key.as_bytes());
    impl for alloc::vec::Vec<u8> => |key, hasher| hasher.write(key);
}

impl sealed::Sealed for usize {}
impl Key for usize {
    const EXACT_BITS: u32 = if usize::BITS <= 61 { usize::BITS } else { 0 };
    #[inline(always)]
    fn exact(&self) -> u64 {
        *self as u64
    }
    #[inline(always)]
    fn feed(&self, hasher: &mut KeyHasher) {
        hasher.write(&(*self as u64).to_le_bytes());
    }
}

impl<K: Key + ?Sized> sealed::Sealed for &K {}
impl<K: Key + ?Sized> Key for &K {
    const EXACT_BITS: u32 = K::EXACT_BITS;
    #[inline(always)]
    fn exact(&self) -> u64 {
        (**self).exact()
    }
    #[inline(always)]
    fn feed(&self, hasher: &mut KeyHasher) {
        (**self).feed(hasher)
    }
}

/// Writes one part of a composite key: its exact value as 8 bytes, or its
/// own bytes followed by their count (so that `("ab", "c")` and `("a", "bc")`
/// differ).
fn feed_part<K: Key + ?Sized>(part: &K, hasher: &mut KeyHasher) {
    if K::EXACT_BITS > 0 {
        hasher.write(&part.exact().to_le_bytes());
    } else {
        let before = hasher.length;
        part.feed(hasher);
        let written = hasher.length.wrapping_sub(before);
        hasher.write(&written.to_le_bytes());
    }
}

const fn pair_bits(a: u32, b: u32) -> u32 {
    if a > 0 && b > 0 && a + b <= 61 {
        a + b
    } else {
        0
    }
}

impl<A: Key, B: Key> sealed::Sealed for (A, B) {}
impl<A: Key, B: Key> Key for (A, B) {
    const EXACT_BITS: u32 = pair_bits(A::EXACT_BITS, B::EXACT_BITS);
    #[inline(always)]
    fn exact(&self) -> u64 {
        (self.0.exact() << B::EXACT_BITS) | self.1.exact()
    }
    fn feed(&self, hasher: &mut KeyHasher) {
        feed_part(&self.0, hasher);
        feed_part(&self.1, hasher);
    }
}

impl<A: Key, B: Key, C: Key> sealed::Sealed for (A, B, C) {}
impl<A: Key, B: Key, C: Key> Key for (A, B, C) {
    const EXACT_BITS: u32 = pair_bits(pair_bits(A::EXACT_BITS, B::EXACT_BITS), C::EXACT_BITS);
    #[inline(always)]
    fn exact(&self) -> u64 {
        (((self.0.exact() << B::EXACT_BITS) | self.1.exact()) << C::EXACT_BITS) | self.2.exact()
    }
    fn feed(&self, hasher: &mut KeyHasher) {
        feed_part(&self.0, hasher);
        feed_part(&self.1, hasher);
        feed_part(&self.2, hasher);
    }
}

/// Any [`Hash`] type as a (fingerprinted) [`Key`].
///
/// ```
/// use cellrate::keyed::{Hashed, Key};
/// #[derive(Hash)]
/// struct Route { method: u8, path: &'static str }
/// let key = Hashed(Route { method: 1, path: "/login" });
/// assert_eq!(<Hashed<Route> as Key>::EXACT_BITS, 0);
/// # let _ = key;
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hashed<T>(pub T);

/// The table's name for a key: what its slot stores.
///
/// Made by a table's [`key_id`](crate::keyed::KeyedTable::key_id) (which knows
/// the seed) or, for exactly stored keys, by [`KeyId::exact`] in `const`
/// context. Used to name keys in [`Overrides`](crate::keyed::Overrides).
///
/// ```
/// use cellrate::keyed::KeyId;
/// const PREMIUM: KeyId = KeyId::exact(42u32 as u64, 32);
/// assert_eq!(PREMIUM, KeyId::exact(42, 32));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) u64);

/// Marks an exactly stored identity.
pub(crate) const EXACT_FLAG: u64 = 1 << 61;
/// The bits of an identity's payload.
pub(crate) const PAYLOAD_MASK: u64 = EXACT_FLAG - 1;

impl KeyId {
    /// The identity of an exactly stored key whose [`Key::exact`] value is
    /// `value` and whose [`Key::EXACT_BITS`] is `bits` (1 to 61). A `value`
    /// wider than `bits` is truncated, as the table would never produce it.
    pub const fn exact(value: u64, bits: u32) -> Self {
        let mask = if bits >= 61 {
            PAYLOAD_MASK
        } else {
            (1u64 << bits) - 1
        };
        KeyId(EXACT_FLAG | (value & mask))
    }

    /// The raw 62-bit identity.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// The identity and home hash of `key` under `seed`.
#[inline(always)]
pub(crate) fn identify<K: Key + ?Sized>(key: &K, seed: &Seed) -> (KeyId, u64) {
    if K::EXACT_BITS > 0 && K::EXACT_BITS <= 61 {
        let value = key.exact() & PAYLOAD_MASK;
        (KeyId(EXACT_FLAG | value), home_word(seed, value))
    } else {
        let mut h = KeyHasher::with_rounds(seed, true, 1, 3);
        key.feed(&mut h);
        let (home, fingerprint) = h.finish128();
        (KeyId(fingerprint & PAYLOAD_MASK), home)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    extern crate std;
    use super::*;

    fn sip(seed: &Seed, bytes: &[u8], c: u32, d: u32) -> u64 {
        let mut h = KeyHasher::with_rounds(seed, false, c, d);
        h.write(bytes);
        h.finish()
    }

    /// The round function, padding and streaming agree with the standard
    /// library's SipHash-2-4 on every length 0..64 and every split point.
    #[test]
    #[allow(deprecated)]
    fn rounds_match_std_siphash_2_4() {
        let seed = Seed::new(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let data: std::vec::Vec<u8> = (0u8..64).collect();
        for len in 0..64 {
            let mut reference = std::hash::SipHasher::new_with_keys(seed.k0, seed.k1);
            reference.write(&data[..len]);
            let expected = reference.finish();
            assert_eq!(sip(&seed, &data[..len], 2, 4), expected, "len {len}");
            for split in 0..=len {
                let mut h = KeyHasher::with_rounds(&seed, false, 2, 4);
                h.write(&data[..split]);
                h.write(&data[split..len]);
                assert_eq!(h.finish(), expected, "len {len} split {split}");
                // Three writes: a short write that leaves the pending block
                // partial must keep it for the next one.
                for second in split..=len {
                    let mut h = KeyHasher::with_rounds(&seed, false, 2, 4);
                    h.write(&data[..split]);
                    h.write(&data[split..second]);
                    h.write(&data[second..len]);
                    assert_eq!(h.finish(), expected, "len {len} splits {split}, {second}");
                }
            }
        }
    }

    /// The paper's first 64-bit SipHash-2-4 vector (key 00..0f, empty input).
    #[test]
    fn paper_vector_64() {
        let seed = Seed::new(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(sip(&seed, &[], 2, 4), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn one_word_hash_is_the_streaming_hash_of_its_bytes() {
        let seed = Seed::new(1, 2);
        for word in [0u64, 1, 0xdead_beef, u64::MAX] {
            assert_eq!(
                hash_word(&seed, word),
                sip(&seed, &word.to_le_bytes(), 1, 3)
            );
        }
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

    #[test]
    fn identities_separate_exact_and_fingerprinted_keys() {
        let seed = Seed::new(3, 4);
        let (a, _) = identify(&5u32, &seed);
        assert_eq!(a, KeyId::exact(5, 32));
        let (b, _) = identify(&5u64, &seed);
        assert_eq!(b.0 & EXACT_FLAG, 0);
        let (c, _) = identify(&(1u32, 2u16), &seed);
        assert_eq!(c, KeyId::exact((1 << 16) | 2, 48));
        // Composite fingerprinted keys keep their parts apart.
        let (d, _) = identify(&("ab", "c"), &seed);
        let (e, _) = identify(&("a", "bc"), &seed);
        assert_ne!(d, e);
        // The seed changes fingerprints and homes.
        let (f, hf) = identify("client", &seed);
        let (g, hg) = identify("client", &Seed::new(5, 6));
        assert!(f != g && hf != hg);
    }
}
