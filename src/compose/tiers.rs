//! Every tier's numbers from an all-or-nothing check; see the
//! [module docs](super#every-tiers-numbers-tiers).

use crate::decision::{Decision, Denied};

use super::Revocable;

/// One result per tier of an all-or-nothing check, in the tiers' order (at
/// most `N`): what tuples, arrays, the Redis backend and the HTTP layer
/// report. Admitted iff every result is `Ok`; when denied, the tiers that
/// would have admitted hold a [`Decision`] of their unchanged state.
///
/// ```
/// use cellrate::compose::Tiers;
/// use cellrate::{Decision, Denied, Limited};
/// let t = Tiers::new([
///     Ok(Decision::new(10, 3, 700)),
///     Err(Denied::Limited(Limited::new(1_000, 5_000, 9_000))),
/// ]);
/// assert!(!t.is_admitted());
/// assert_eq!(t.refused(), Some(1));
/// assert_eq!(t.denied().unwrap().retry_after(), Some(5_000));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiers<const N: usize> {
    /// The results; those past `len` are [`UNUSED`], so the derived
    /// comparisons see only the results that were given.
    results: [Result<Decision, Denied>; N],
    len: usize,
}

/// No tiers.
///
/// ```
/// use cellrate::compose::Tiers;
/// assert!(Tiers::<4>::default().results().is_empty());
/// ```
impl<const N: usize> Default for Tiers<N> {
    fn default() -> Self {
        Tiers {
            results: [UNUSED; N],
            len: 0,
        }
    }
}

/// What fills the places past a [`Tiers`]'s length.
const UNUSED: Result<Decision, Denied> = Ok(Decision::new(0, 0, 0));

impl<const N: usize> Tiers<N> {
    /// Tiers from exactly `N` results.
    pub const fn new(results: [Result<Decision, Denied>; N]) -> Self {
        Tiers { results, len: N }
    }
    /// Tiers from the results of a run-time number of tiers, or `None` if
    /// there are more than `N`.
    ///
    /// ```
    /// use cellrate::compose::Tiers;
    /// use cellrate::Decision;
    /// let t = Tiers::<8>::from_slice(&[Ok(Decision::new(5, 4, 200))]).unwrap();
    /// assert_eq!(t.results().len(), 1);
    /// assert!(Tiers::<1>::from_slice(&[Ok(Decision::new(5, 4, 200)); 2]).is_none());
    /// ```
    pub fn from_slice(results: &[Result<Decision, Denied>]) -> Option<Self> {
        let mut tiers = Tiers {
            results: [UNUSED; N],
            len: results.len(),
        };
        tiers
            .results
            .get_mut(..results.len())?
            .copy_from_slice(results);
        Some(tiers)
    }
    /// Whether every tier admitted.
    ///
    /// ```
    /// use cellrate::compose::Tiers;
    /// use cellrate::Decision;
    /// assert!(Tiers::new([Ok(Decision::new(1, 0, 5))]).is_admitted());
    /// ```
    pub fn is_admitted(&self) -> bool {
        self.results().iter().all(Result::is_ok)
    }
    /// One result per tier.
    pub fn results(&self) -> &[Result<Decision, Denied>] {
        &self.results[..self.len]
    }
    /// The index of the tier that refused: among the tiers that denied, the
    /// one asking for the longest wait ([`refusing`]); `None` if
    /// admitted.
    pub fn refused(&self) -> Option<usize> {
        refusing(self.results())
    }
    /// The refusing tier's denial; `None` if admitted.
    pub fn denied(&self) -> Option<Denied> {
        self.refused().and_then(|i| self.results[i].err())
    }
    /// The tightest tier's result ([`tightest`]): the refusing
    /// tier's denial, or the admission with the fewest cells left.
    pub fn tightest(&self) -> Option<Result<Decision, Denied>> {
        tightest(self.results())
    }
    /// [`check_all`] over at most `N` of `tiers`, its results kept in the
    /// returned value (a tier beyond the `N`th is not asked).
    ///
    /// ```
    /// use cellrate::compose::Tiers;
    /// use cellrate::{Gcra, Quota};
    /// let tiers = [Gcra::new(Quota::per_second(5).at_hz(1_000)), Gcra::new(Quota::per_second(1).at_hz(1_000))];
    /// assert!(Tiers::<8>::check_all(&tiers, 0, 1).is_admitted());
    /// let t = Tiers::<8>::check_all(&tiers, 0, 1);
    /// assert_eq!((t.results().len(), t.refused()), (2, Some(1)));
    /// ```
    pub fn check_all<I>(tiers: I, now: u64, cost: u64) -> Self
    where
        I: IntoIterator,
        I::Item: Revocable,
    {
        let mut checked = Tiers::default();
        checked.len = check_all(tiers, now, cost, &mut checked.results);
        checked
    }
}

/// An all-or-nothing limiter that reports every tier: tuples of
/// [`Revocable`] limiters and arrays of them.
///
/// ```
/// use cellrate::compose::AllTiers;
/// use cellrate::{Gcra, Quota};
/// let tiers = [
///     Gcra::new(Quota::per_second(1).at_hz(1_000)),
///     Gcra::new(Quota::per_minute(10).at_hz(1_000)),
/// ];
/// let t = tiers.check_tiers(0, 1);
/// assert_eq!(t.results()[1].unwrap().remaining(), 9);
/// assert_eq!(tiers.check_tiers(0, 1).refused(), Some(0));
/// ```
pub trait AllTiers<const N: usize> {
    /// Decides `cost` at `now` like `check_n` and reports every tier.
    fn check_tiers(&self, now: u64, cost: u64) -> Tiers<N>;
}

impl<L: Revocable, const N: usize> AllTiers<N> for [L; N] {
    fn check_tiers(&self, now: u64, cost: u64) -> Tiers<N> {
        Tiers::check_all(self, now, cost)
    }
}

/// All or nothing over a run-time number of tiers (arrays of tiers, the
/// HTTP layer's keyed tiers, the Redis fallback): decides `cost` at `now`
/// like a tuple's `check_n`, writes one result per tier into `results` (see
/// the [module docs](super#every-tiers-numbers-tiers)) and returns how many
/// it wrote (a tier beyond `results` is not asked). Each tier is made when
/// reached, so a keyed [`Entry`](crate::keyed::Entry) hashes its key once.
///
/// ```
/// use cellrate::compose::check_all;
/// use cellrate::keyed::{Keyed, Seed, WhenFull};
/// use cellrate::{Decision, Quota};
/// let per_client: Keyed<Quota, 16> = Keyed::new(Quota::per_second(5).at_hz(1_000), WhenFull::Deny, Seed::new(1, 2));
/// let per_route: Keyed<Quota, 16> = Keyed::new(Quota::per_second(1).at_hz(1_000), WhenFull::Deny, Seed::new(3, 4));
/// let tiers = || [per_client.entry("alice"), per_route.entry(&("alice", "/orders"))];
/// let mut results = [Ok(Decision::new(0, 0, 0)); 2];
/// assert_eq!(check_all(tiers(), 0, 1, &mut results), 2);
/// assert!(results.iter().all(Result::is_ok));
/// check_all(tiers(), 0, 1, &mut results);
/// assert!(results[1].is_err()); // the route tier refused…
/// assert_eq!(results[0].unwrap().remaining(), 4); // …and the client tier was not charged
/// ```
pub fn check_all<I>(
    tiers: I,
    now: u64,
    cost: u64,
    results: &mut [Result<Decision, Denied>],
) -> usize
where
    I: IntoIterator,
    I::Item: Revocable,
{
    all_or_nothing(&mut tiers.into_iter(), now, cost, results)
}

/// The index of the refusing result: of the denials, the one with the
/// longest wait (a cost that can never fit counts as longest), the first on
/// ties; `None` if every tier admitted. [`Tiers::refused`] answers with it,
/// in process and on Redis alike.
///
/// ```
/// use cellrate::compose::refusing;
/// use cellrate::{Decision, Denied, Limited};
/// let results = [
///     Err(Denied::Limited(Limited::new(5, 100, 400))),
///     Ok(Decision::new(10, 3, 700)),
///     Err(Denied::Limited(Limited::new(1_000, 5_000, 9_000))),
/// ];
/// assert_eq!(refusing(&results), Some(2));
/// assert_eq!(refusing(&results[1..2]), None);
/// ```
pub fn refusing(results: &[Result<Decision, Denied>]) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, r) in results.iter().enumerate() {
        if let Err(d) = r {
            let wait = d.retry_after().unwrap_or(u64::MAX);
            let longer = match best {
                None => true,
                Some((_, w)) => wait > w,
            };
            if longer {
                best = Some((i, wait));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// The tightest of several tiers' results, the one the single-policy
/// `X-RateLimit-*` fields describe: the refusing tier's denial
/// ([`refusing`]), else the admission a tuple's `check_n` returns: the
/// fewest cells left, ties to the later `reset_after`, then the first.
/// `None` for no tiers.
///
/// ```
/// use cellrate::compose::tightest;
/// use cellrate::Decision;
/// let results = [Ok(Decision::new(10, 3, 700)), Ok(Decision::new(100, 2, 50))];
/// assert_eq!(tightest(&results), Some(results[1]));
/// ```
pub fn tightest(results: &[Result<Decision, Denied>]) -> Option<Result<Decision, Denied>> {
    if let Some(i) = refusing(results) {
        return Some(results[i]);
    }
    results
        .iter()
        .flatten()
        .copied()
        .reduce(super::tighter)
        .map(Ok)
}

/// The one all-or-nothing loop behind [`check_all`] and the tuples'
/// [`AllTiers`]: charge the tiers of `chain` in order into `results`,
/// and at a refusal give back what was charged (last first, each then
/// reporting its state) and ask the tiers after it without charging them.
/// Returns how many results it wrote.
fn all_or_nothing<C: Chain>(
    chain: &mut C,
    now: u64,
    cost: u64,
    results: &mut [Result<Decision, Denied>],
) -> usize {
    match chain.charge(now, cost, results, 0) {
        Charged::All(n) => n,
        Charged::Refused(at) => chain.probe(now, cost, results, at + 1),
    }
}

/// How [`Chain::charge`] ended.
enum Charged {
    /// Every tier admitted: this many.
    All(usize),
    /// The tier at this index refused; the ones before it were revoked.
    Refused(usize),
}

/// Where the tiers of an all-or-nothing check come from: an iterator of
/// one limiter type ([`check_all`]), or a tuple's parts, each its own type
/// (a [`Link`] per part).
trait Chain {
    /// Charges the tiers from index `i` on into `results[i..]` (one
    /// [`charge_one`] per tier, recursively).
    fn charge(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        i: usize,
    ) -> Charged;
    /// Asks the tiers from index `from` on (after a refusal) without
    /// charging them; returns the index after the last result written.
    fn probe(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        from: usize,
    ) -> usize;
}

impl<I> Chain for I
where
    I: Iterator,
    I::Item: Revocable,
{
    fn charge(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        i: usize,
    ) -> Charged {
        // A tier beyond `results` is not made (an entry hashes its key).
        if i >= results.len() {
            return Charged::All(i);
        }
        match self.next() {
            Some(tier) => charge_one(&tier, self, now, cost, results, i),
            None => Charged::All(i),
        }
    }
    fn probe(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        from: usize,
    ) -> usize {
        // The iterator stands just after the refusing tier.
        let mut n = from;
        for (result, tier) in results[from..].iter_mut().zip(self) {
            *result = tier.probe_n(now, cost);
            n += 1;
        }
        n
    }
}

/// One part of a tuple and the parts after it.
struct Link<L, R>(L, R);
/// After a tuple's last part.
struct End;

impl<L: Revocable, R: Chain + ProbeAt> Chain for Link<L, R> {
    fn charge(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        i: usize,
    ) -> Charged {
        charge_one(&self.0, &mut self.1, now, cost, results, i)
    }
    fn probe(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        from: usize,
    ) -> usize {
        self.probe_at(now, cost, results, from, 0)
    }
}

impl Chain for End {
    fn charge(&mut self, _: u64, _: u64, _: &mut [Result<Decision, Denied>], i: usize) -> Charged {
        Charged::All(i)
    }
    fn probe(&mut self, _: u64, _: u64, _: &mut [Result<Decision, Denied>], from: usize) -> usize {
        from
    }
}

/// A tuple's chain asked from `from` on: part `i` answers if `i ≥ from`.
trait ProbeAt {
    fn probe_at(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        from: usize,
        i: usize,
    ) -> usize;
}

impl<L: Revocable, R: ProbeAt> ProbeAt for Link<L, R> {
    fn probe_at(
        &mut self,
        now: u64,
        cost: u64,
        results: &mut [Result<Decision, Denied>],
        from: usize,
        i: usize,
    ) -> usize {
        if i >= from {
            results[i] = self.0.probe_n(now, cost);
        }
        self.1.probe_at(now, cost, results, from, i + 1)
    }
}

impl ProbeAt for End {
    fn probe_at(
        &mut self,
        _: u64,
        _: u64,
        _: &mut [Result<Decision, Denied>],
        from: usize,
        i: usize,
    ) -> usize {
        i.max(from)
    }
}

/// Charges `tier` into `results[i]`, then the rest of the chain; revokes
/// it if a later tier refused (it then reports its unchanged state).
fn charge_one<T: Revocable, C: Chain + ?Sized>(
    tier: &T,
    rest: &mut C,
    now: u64,
    cost: u64,
    results: &mut [Result<Decision, Denied>],
    i: usize,
) -> Charged {
    match tier.admit_n(now, cost) {
        Err(denied) => {
            results[i] = Err(denied);
            Charged::Refused(i)
        }
        Ok((decision, receipt)) => {
            results[i] = Ok(decision);
            let rest = rest.charge(now, cost, results, i + 1);
            if let Charged::Refused(_) = rest {
                tier.revoke(receipt);
                results[i] = Ok(tier.peek(now).to_decision());
            }
            rest
        }
    }
}

/// Nested [`Link`]s over a tuple's parts, ending in [`End`].
macro_rules! chain {
    ($s:ident;) => { End };
    ($s:ident; $first:tt $(, $rest:tt)*) => { Link(&$s.$first, chain!($s; $($rest),*)) };
}

/// `AllTiers` for a tuple: the one all-or-nothing loop over its parts.
macro_rules! tuple_tiers {
    ($n:literal; $($name:ident $idx:tt),+) => {
        impl<$($name: Revocable),+> AllTiers<$n> for ($($name,)+) {
            fn check_tiers(&self, now: u64, cost: u64) -> Tiers<$n> {
                let mut results = [Ok(Decision::new(0, 0, 0)); $n];
                all_or_nothing(&mut chain!(self; $($idx),+), now, cost, &mut results);
                Tiers::new(results)
            }
        }
    };
}

tuple_tiers!(2; A 0, B 1);
tuple_tiers!(3; A 0, B 1, C 2);
tuple_tiers!(4; A 0, B 1, C 2, D 3);
tuple_tiers!(5; A 0, B 1, C 2, D 3, E 4);
tuple_tiers!(6; A 0, B 1, C 2, D 3, E 4, F 5);
