//! Division of 64-bit numbers by a divisor fixed at construction, with no
//! division instruction: one multiply, a subtraction, an addition and two
//! shifts. The windows turn their window length into one (`⌊now / W⌋` and
//! the elapsed time in the window); the meters turn each bucket's emission
//! interval `T` into one (a bucket's room in whole bytes, `⌊slack / T⌋`).
//!
//! # The math
//!
//! For a divisor `1 ≤ d < 2⁶⁴` let `l = ⌈log₂ d⌉` and
//!
//! ```text
//! m = ⌊2⁶⁴ · (2^l − d) / d⌋ + 1                  (m < 2⁶⁴, since 2^l < 2d)
//! t = ⌊m · n / 2⁶⁴⌋
//! ⌊n / d⌋ = (t + ((n − t) >> s₁)) >> s₂,   s₁ = min(l, 1),  s₂ = max(l − 1, 0)
//! ```
//!
//! for every 64-bit `n` (T. Granlund and P. L. Montgomery, "Division by
//! invariant integers using multiplication", PLDI 1994, figure 4.1): `m` is
//! the reciprocal `2^(64+l) / d` less its leading bit, which the shifts
//! restore without a 65-bit product. `d = 1` gives `m = 1`, `t = 0` and the
//! quotient `n`, with no special case.
//!
//! # Invariants
//!
//! * Exact for every `n` and every `d ≥ 1`: the tests below compare it with
//!   `/` at the edges and on random divisors and numerators.
//! * `n − t` cannot wrap (`t ≤ n`), and `t + ((n − t) >> 1) < 2⁶⁴`.
//! * The constructor is `const` and the only place that divides (in 128
//!   bits): construction happens once, in a profile's or a quota's `const`
//!   constructor, never on a packet or admission path.
//! * A divisor of 0 is taken as 1 (callers check their own parameters
//!   first; nothing here panics).

/// Division by a divisor fixed at construction (see the
/// [module docs](self)).
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Divisor {
    d: u64,
    m: u64,
    sh1: u32,
    sh2: u32,
}

impl Divisor {
    /// Division by `d` (at least 1; 0 is taken as 1).
    pub(crate) const fn new(d: u64) -> Self {
        // l = ⌈log₂ d⌉
        let l = if d <= 1 {
            0
        } else {
            64 - (d - 1).leading_zeros()
        };
        // m = ⌊2⁶⁴ · (2^l − d) / d⌋ + 1 < 2⁶⁴ since 2^l < 2d.
        let d128 = if d == 0 { 1 } else { d as u128 };
        let m = ((((1u128 << l) - d128) << 64) / d128 + 1) as u64;
        Divisor {
            d: if d == 0 { 1 } else { d },
            m,
            sh1: if l < 1 { l } else { 1 },
            sh2: l.saturating_sub(1),
        }
    }

    /// The divisor.
    #[inline(always)]
    pub(crate) const fn get(&self) -> u64 {
        self.d
    }

    /// `⌊n / d⌋`.
    #[inline(always)]
    pub(crate) const fn quotient(&self, n: u64) -> u64 {
        let t = ((self.m as u128 * n as u128) >> 64) as u64;
        (t + ((n - t) >> self.sh1)) >> self.sh2
    }

    /// `(⌊n / d⌋, n mod d)`.
    #[inline(always)]
    pub(crate) const fn div_rem(&self, n: u64) -> (u64, u64) {
        let q = self.quotient(n);
        (q, n - q * self.d)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    #[test]
    fn divisor_edges() {
        for d in [
            1u64,
            2,
            3,
            7,
            10,
            1 << 32,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX,
        ] {
            let div = Divisor::new(d);
            for n in [0u64, 1, d - 1, d, d.wrapping_add(1), u64::MAX - 1, u64::MAX] {
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
        }
    }

    /// The edges of the meters' buckets' divisions (emission intervals of 1, small and around 2³², numerators up to
    /// `u64::MAX`).
    #[test]
    fn quotient_at_the_edges() {
        let ds = [
            1,
            2,
            3,
            4,
            5,
            7,
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let ns = [
            0,
            1,
            2,
            3,
            4,
            u32::MAX as u64,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in ds {
            for n in ns
                .into_iter()
                .chain([d - 1, d, d.wrapping_add(1), d.wrapping_mul(3)])
            {
                assert_eq!(Divisor::new(d).quotient(n), n / d, "{n} / {d}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        #[test]
        fn divisor_matches_division(d in 1u64.., n: u64, small_d in 1u64..100_000, small_n in 0u64..10_000_000) {
            prop_assert_eq!(Divisor::new(d).div_rem(n), (n / d, n % d));
            prop_assert_eq!(Divisor::new(small_d).div_rem(n), (n / small_d, n % small_d));
            prop_assert_eq!(Divisor::new(small_d).div_rem(small_n), (small_n / small_d, small_n % small_d));
        }
    }

    proptest! {
        #[test]
        fn quotient_is_division(n: u64, d in 1u64.., small in 1u64..100_000) {
            prop_assert_eq!(Divisor::new(d).quotient(n), n / d);
            prop_assert_eq!(Divisor::new(small).quotient(n), n / small);
            let multiple = (n / small).wrapping_mul(small);
            prop_assert_eq!(Divisor::new(small).quotient(multiple), multiple / small);
        }
    }
}
