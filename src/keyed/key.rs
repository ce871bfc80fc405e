//! Keys: what a table is keyed by ([`Key`], sealed), the table's name for
//! a key ([`KeyId`]) and how each kind becomes an identity and a home hash
//! ([`identify`]; the hash itself is [`hash`](super::hash)'s).

use core::hash::{Hash, Hasher};

use super::hash::{home_word, KeyHasher, Seed};

/// The seal of [`Key`]: a public trait in a module private to the crate,
/// so that no type outside it can implement `Key`.
pub(crate) mod sealed {
    /// Implemented, with [`Key`](super::Key), only in this crate.
    pub trait Sealed {}
}

/// A key of a keyed table: a client, an endpoint, a `(client, endpoint)` pair.
///
/// Keys of at most 61 bits are stored exactly; wider keys as a 61-bit
/// fingerprint of a keyed hash (see [`Seed`]). Implemented for the integers,
/// `char`, `bool`, strings, byte slices and arrays, references, pairs and
/// triples of keys, and any `Hash` type wrapped in [`Hashed`]: derive `Hash`
/// on your own type and wrap it, or key by the field that identifies the
/// client (an integer of at most 61 bits stays exact):
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
/// Only this crate implements `Key`: a key's placement rests on promises
/// the compiler cannot check, and a wrong implementation would merge
/// clients silently. An implementation outside the crate does not compile,
/// however complete:
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
        let before = hasher.written();
        part.feed(hasher);
        let written = hasher.written().wrapping_sub(before);
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
        let mut h = KeyHasher::new(seed);
        key.feed(&mut h);
        let (home, fingerprint) = h.finish128();
        (KeyId(fingerprint & PAYLOAD_MASK), home)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

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
