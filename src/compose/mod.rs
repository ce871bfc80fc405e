//! Limiters built from limiters: tuples (all must admit), [`Metered`]
//! (counts), [`Adaptive`] (progressive penalty) and [`AnyLimiter`] (chosen by
//! configuration).
//!
//! # Tuples: all or nothing
//!
//! `(A, B)`, `(A, B, C)`, … up to six parts, are a limiter that admits a
//! request only if every part admits it, and then it has consumed from every
//! part. Parts are tried in order; when part `i` denies, the admissions
//! already made in parts `0..i` are **revoked** ([`Revocable::revoke`]) before
//! the denial is returned. The loom models below check, for every
//! interleaving of three threads:
//!
//! * **Net effect.** When every call has returned, each part has consumed
//!   exactly the cells of the requests the tuple admitted.
//! * **No over-admission.** The tuple never admits more than any part allows.
//! * **Transient.** Between a part's admission and its revocation (a few
//!   instructions, no waiting) a concurrent request can be denied spuriously;
//!   admissions never are.
//!
//! The returned [`Decision`] is the tightest part's (fewest `remaining`, ties:
//! the later `reset_after`); a denial is the first denying part's. How each
//! limiter revokes exactly is in docs/design/composition.md in the
//! repository.
//!
//! # Every tier's numbers: [`Tiers`]
//!
//! [`AllTiers::check_tiers`] decides exactly like `check_n` and returns one
//! result per part, in order: the same answer the Redis backend's `Outcome`
//! carries, so one function (`cellrate-headers`' `write_ratelimit` over
//! `results()`) fills the header fields for either backend. Parts before a denying one report their
//! state after the revocation; parts after it are asked too and given back at
//! once, so [`Tiers::refused`] can name the tier with the longest wait.
//!
//! ```
//! use cellrate::compose::AllTiers;
//! use cellrate::{Gcra, Quota, window::FixedWindow};
//! let burst = Gcra::new(Quota::per_second(5).at_hz(1_000));
//! let daily = FixedWindow::new(2, 86_400_000);
//! let pair = (&burst, &daily);
//! assert!(pair.check_tiers(0, 1).is_admitted());
//! assert!(pair.check_tiers(0, 1).is_admitted());
//! let refused = pair.check_tiers(0, 1);
//! assert_eq!(refused.refused(), Some(1)); // the daily tier said no
//! assert_eq!(refused.results()[0].unwrap().remaining(), 3); // burst: not charged
//! ```
//!
//! ```
//! use cellrate::{Gcra, Quota, RateLimiter, window::FixedWindow};
//! // Bursts of 5 per second, and 1 000 per day (on a 1 kHz clock).
//! let limiter = (
//!     Gcra::new(Quota::per_second(5).at_hz(1_000)),
//!     FixedWindow::new(1_000, 86_400_000),
//! );
//! assert_eq!(limiter.check(0).unwrap().remaining(), 4); // the burst is tighter
//! ```

mod adaptive;
pub(crate) mod any;
mod metered;
mod tiers;

pub use self::adaptive::{Adaptive, Penalty};
pub use self::any::{AlgorithmKind, AnyLimiter, LimiterConfig, LimiterConfigError};
pub use self::metered::{MeterStats, Metered};
pub use self::tiers::{check_all, refusing, tightest, AllTiers, Tiers};

use crate::window::{SlidingLog, WideBucketedWindow};
use crate::{Algorithm, Decision, Denied, Gcra, Limiter, RateLimiter, Snapshot};

/// A limiter whose admissions can be taken back exactly, which is what
/// all-or-nothing composition needs.
///
/// ```
/// use cellrate::compose::Revocable;
/// use cellrate::{RateLimiter, window::FixedWindow};
/// let w = FixedWindow::new(3, 1_000);
/// let (_, receipt) = w.admit_n(0, 2).unwrap();
/// assert_eq!(w.peek(0).remaining(), 1);
/// w.revoke(receipt);
/// assert_eq!(w.peek(0).remaining(), 3);
/// ```
pub trait Revocable: RateLimiter {
    /// What [`revoke`](Self::revoke) needs to undo one admission.
    type Receipt: Copy;

    /// Like [`check_n`](RateLimiter::check_n), also returning a receipt.
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied>;

    /// Gives back the cells of an admission, as if it had been denied
    /// (see the [module docs](self) for what "exactly" means per limiter).
    /// Revoke each receipt at most once.
    fn revoke(&self, receipt: Self::Receipt);

    /// The answer [`admit_n`](Self::admit_n) would give `cost` at `now`,
    /// leaving the limiter as it was: what a tier after the refusing one
    /// reports in [`AllTiers::check_tiers`]. By default the cells are
    /// charged and at once revoked, and the unchanged state is reported; a
    /// limiter that can answer without writing says so by overriding it (a
    /// keyed table's [`Entry`](crate::keyed::Entry), so that asking never
    /// inserts a key).
    ///
    /// ```
    /// use cellrate::compose::Revocable;
    /// use cellrate::{RateLimiter, window::FixedWindow};
    /// let w = FixedWindow::new(3, 1_000);
    /// assert_eq!(w.probe_n(0, 2).unwrap().remaining(), 3);
    /// assert!(w.probe_n(0, 4).is_err());
    /// assert_eq!(w.peek(0).remaining(), 3);
    /// ```
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        match self.admit_n(now, cost) {
            Ok((_, receipt)) => {
                self.revoke(receipt);
                Ok(self.peek(now).to_decision())
            }
            Err(denied) => Err(denied),
        }
    }
}

/// The receipt of one admission by a single limiter: where it was counted,
/// and how many cells.
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Receipt {
    at: u64,
    cost: u64,
}

impl Receipt {
    /// The cells admitted.
    ///
    /// ```
    /// use cellrate::compose::Revocable;
    /// use cellrate::window::SlidingWindow;
    /// let (_, r) = SlidingWindow::new(5, 10).admit_n(0, 4).unwrap();
    /// assert_eq!(r.cost(), 4);
    /// ```
    pub const fn cost(&self) -> u64 {
        self.cost
    }
}

impl<L: Revocable + ?Sized> Revocable for &L {
    type Receipt = L::Receipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied> {
        (**self).admit_n(now, cost)
    }
    fn revoke(&self, receipt: Self::Receipt) {
        (**self).revoke(receipt)
    }
    fn probe_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        (**self).probe_n(now, cost)
    }
}

impl Revocable for Gcra {
    type Receipt = Receipt;
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Receipt), Denied> {
        self.admit_marked(now, cost)
            .map(|(d, at)| (d, Receipt { at, cost }))
    }
    fn revoke(&self, receipt: Receipt) {
        if receipt.cost > 0 {
            self.refund_n(receipt.at, receipt.cost);
        }
    }
}

/// Every one-word limiter: the receipt holds its algorithm's
/// [`mark`](Algorithm::mark), the revocation is its
/// [`refund`](Algorithm::refund).
impl<A: Algorithm + Copy> Revocable for Limiter<A> {
    type Receipt = Receipt;
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Receipt), Denied> {
        self.admit_marked(now, cost)
            .map(|(d, at)| (d, Receipt { at, cost }))
    }
    fn revoke(&self, receipt: Receipt) {
        if receipt.cost > 0 {
            self.refund_marked(receipt.at, receipt.cost);
        }
    }
}

impl<const N: usize> Revocable for WideBucketedWindow<N> {
    type Receipt = Receipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Receipt), Denied> {
        WideBucketedWindow::admit_at(self, now, cost).map(|(d, at)| (d, Receipt { at, cost }))
    }
    fn revoke(&self, receipt: Receipt) {
        if receipt.cost > 0 {
            WideBucketedWindow::revoke_at(self, receipt.at, receipt.cost)
        }
    }
}

impl<const N: usize> Revocable for SlidingLog<N> {
    type Receipt = Receipt;
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Receipt), Denied> {
        SlidingLog::admit_at(self, now, cost).map(|(d, at)| (d, Receipt { at, cost }))
    }
    fn revoke(&self, receipt: Receipt) {
        if receipt.cost > 0 {
            SlidingLog::revoke_at(self, receipt.at, receipt.cost)
        }
    }
}

/// The tighter of two decisions: fewer remaining, then the later reset,
/// then the first (the one rule: [`tightest`] is its fold).
#[inline]
fn tighter(a: Decision, b: Decision) -> Decision {
    if (b.remaining(), core::cmp::Reverse(b.reset_after()))
        < (a.remaining(), core::cmp::Reverse(a.reset_after()))
    {
        b
    } else {
        a
    }
}

/// The tighter of two snapshots, with the later retry.
fn tighter_snapshot(a: Snapshot, b: Snapshot) -> Snapshot {
    let t = if (b.remaining(), core::cmp::Reverse(b.reset_after()))
        < (a.remaining(), core::cmp::Reverse(a.reset_after()))
    {
        b
    } else {
        a
    };
    Snapshot::new(
        t.limit(),
        t.remaining(),
        t.reset_after(),
        a.retry_after().max(b.retry_after()),
    )
}

impl<A: Revocable, B: Revocable> Revocable for (A, B) {
    type Receipt = (A::Receipt, B::Receipt);
    #[inline]
    fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied> {
        let (da, ra) = self.0.admit_n(now, cost)?;
        match self.1.admit_n(now, cost) {
            Ok((db, rb)) => Ok((tighter(da, db), (ra, rb))),
            Err(denied) => {
                self.0.revoke(ra);
                Err(denied)
            }
        }
    }
    fn revoke(&self, receipt: Self::Receipt) {
        self.1.revoke(receipt.1);
        self.0.revoke(receipt.0);
    }
}

impl<A: Revocable, B: Revocable> RateLimiter for (A, B) {
    #[inline]
    fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
        self.admit_n(now, cost).map(|(d, _)| d)
    }
    fn peek(&self, now: u64) -> Snapshot {
        tighter_snapshot(self.0.peek(now), self.1.peek(now))
    }
}

/// The receipt type of nested pairs `(A, (B, (C, …)))`.
macro_rules! nested_receipt {
    ($last:ident) => { <$last as Revocable>::Receipt };
    ($first:ident, $($rest:ident),+) => {
        (<$first as Revocable>::Receipt, nested_receipt!($($rest),+))
    };
}

/// Nested pairs of references to a tuple's parts.
macro_rules! nested_refs {
    ($s:ident; $last:tt) => { &$s.$last };
    ($s:ident; $first:tt, $($rest:tt),+) => {
        (&$s.$first, nested_refs!($s; $($rest),+))
    };
}

/// Tuples of three or more parts, as nested pairs of references:
/// `(A, B, C)` behaves as `(A, (B, C))`.
macro_rules! tuple_limiter {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Revocable),+> Revocable for ($($name,)+) {
            type Receipt = nested_receipt!($($name),+);
            #[inline]
            fn admit_n(&self, now: u64, cost: u64) -> Result<(Decision, Self::Receipt), Denied> {
                nested_refs!(self; $($idx),+).admit_n(now, cost)
            }
            fn revoke(&self, receipt: Self::Receipt) {
                nested_refs!(self; $($idx),+).revoke(receipt)
            }
        }
        impl<$($name: Revocable),+> RateLimiter for ($($name,)+) {
            #[inline]
            fn check_n(&self, now: u64, cost: u64) -> Result<Decision, Denied> {
                self.admit_n(now, cost).map(|(d, _)| d)
            }
            fn peek(&self, now: u64) -> Snapshot {
                nested_refs!(self; $($idx),+).peek(now)
            }
        }
    };
}

tuple_limiter!(A 0, B 1, C 2);
tuple_limiter!(A 0, B 1, C 2, D 3);
tuple_limiter!(A 0, B 1, C 2, D 3, E 4);
tuple_limiter!(A 0, B 1, C 2, D 3, E 4, F 5);

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    extern crate std;
    use crate::window::{FixedWindow, SlidingWindow};
    use crate::RateLimiter;
    use loom::sync::Arc;
    use loom::thread;
    use std::vec::Vec;

    /// Three threads check a two-part tuple. In every interleaving: no part
    /// admits beyond its limit, and when all are done each part has consumed
    /// exactly the cells of the requests the tuple admitted (a request denied
    /// by one part consumed from none).
    #[test]
    fn denied_requests_consume_from_no_part() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            // Part A allows 3 cells, part B 2: B denies after A admitted
            // in some interleavings, and A must then be given back.
            let tuple = Arc::new((FixedWindow::new(3, 100), SlidingWindow::new(2, 100)));
            let costs = [1u64, 1, 2];
            let handles: Vec<_> = costs
                .iter()
                .map(|&cost| {
                    let t = Arc::clone(&tuple);
                    thread::spawn(move || t.check_n(10, cost).is_ok().then_some(cost))
                })
                .collect();
            let admitted: u64 = handles.into_iter().filter_map(|h| h.join().unwrap()).sum();
            assert!(admitted <= 2);
            assert_eq!(tuple.0.peek(10).remaining(), 3 - admitted);
            assert_eq!(tuple.1.peek(10).remaining(), 2 - admitted);
        });
    }

    /// The run-time form ([`check_all`](super::check_all), here over an
    /// array): three threads, the same guarantee as the tuples'. No tier
    /// admits beyond its limit, and when all are done each tier has
    /// consumed exactly the cells of the requests admitted by all.
    #[test]
    fn check_all_denied_requests_consume_from_no_tier() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let tiers = Arc::new([FixedWindow::new(3, 100), FixedWindow::new(2, 100)]);
            let costs = [1u64, 1, 2];
            let handles: Vec<_> = costs
                .iter()
                .map(|&cost| {
                    let t = Arc::clone(&tiers);
                    thread::spawn(move || {
                        let mut results = [Ok(crate::Decision::new(0, 0, 0)); 2];
                        let n = super::check_all(t.iter(), 10, cost, &mut results);
                        assert_eq!(n, 2);
                        results.iter().all(Result::is_ok).then_some(cost)
                    })
                })
                .collect();
            let admitted: u64 = handles.into_iter().filter_map(|h| h.join().unwrap()).sum();
            assert!(admitted <= 2);
            assert_eq!(tiers[0].peek(10).remaining(), 3 - admitted);
            assert_eq!(tiers[1].peek(10).remaining(), 2 - admitted);
        });
    }

    /// Two parts of different limits: the second denies after the first
    /// admitted, under contention; the revocation restores the first.
    #[test]
    fn revocation_restores_the_earlier_part() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let tuple = Arc::new((SlidingWindow::new(3, 100), FixedWindow::new(1, 100)));
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let t = Arc::clone(&tuple);
                    thread::spawn(move || t.check(10).is_ok() as u64)
                })
                .collect();
            let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(admitted, 1);
            assert_eq!(tuple.0.peek(10).remaining(), 2);
            assert_eq!(tuple.1.peek(10).remaining(), 0);
        });
    }
}
