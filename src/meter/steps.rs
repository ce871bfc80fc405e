//! The sealed steps a profile is made of, on which [`Meter`](super::Meter)
//! is built: one packet on plain words or a shared flow, and a burst at one
//! `now` decided on the buckets' slacks and stored by `commit`.
//!
//! * `slack` answers `None` for a state that cannot be reduced to slacks (a
//!   clock that stepped back past a span): batches then go packet by packet.
//! * `commit` is given `spent ≤ slack` for each bucket and leaves a word no
//!   packet took from as it was.

use super::batch::{decide, Arrivals, Slack};
use super::{Bucket, Color, Flow};

/// The per-profile steps [`Meter`](super::Meter) is built from. Sealed:
/// only this crate's profiles implement it.
pub trait Steps {
    /// The batch rules: `false` (srTCM, RFC 4115): green from the first
    /// bucket, else yellow from the second, else red; `true` (trTCM): red
    /// unless the first (peak) bucket holds it, then green if the second
    /// (committed) holds it too, else yellow.
    const BOTH: bool;

    /// `now` in the sub-ticks of each of the profile's two words.
    fn times(&self, now: u64) -> [u64; 2];
    /// One packet on plain words (the sequential RFC algorithm).
    fn step(&self, words: &mut [u64; 2], t: [u64; 2], bytes: u64, pre: Color) -> Color;
    /// One packet on a shared flow.
    fn step_shared(&self, flow: &Flow, t: [u64; 2], bytes: u64, pre: Color) -> Color;

    /// The two buckets' emission intervals `T` (sub-ticks per byte),
    /// in [`BOTH`](Self::BOTH)'s order.
    fn intervals(&self) -> [u64; 2];
    /// The whole bytes in each bucket's slack, `⌊slack / T⌋`.
    fn rooms(&self, slack: [u64; 2]) -> [u64; 2];
    /// The two buckets' bases and slacks, `None` past a span.
    fn slack(&self, words: [u64; 2], t: [u64; 2]) -> Option<Slack>;
    /// The words after a batch spent `spent ≤ slack` of each bucket
    /// (`touched`: whether each was taken from at all).
    fn commit(
        &self,
        words: [u64; 2],
        slack: &Slack,
        spent: [u64; 2],
        touched: [bool; 2],
    ) -> [u64; 2];

    /// A burst at one `now` decided on `words` (nothing stored): its
    /// colours and the state after it, or `None` (`out` untouched) for a
    /// state that needs the packet-by-packet path.
    #[inline(always)]
    fn decide_batch(
        &self,
        words: [u64; 2],
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) -> Option<[u64; 2]> {
        let slack = self.slack(words, t)?;
        let [t0, t1] = self.intervals();
        let room = self.rooms(slack.slack);
        let (taken, touched) = decide(Self::BOTH, room, sizes, pre, out);
        // taken ≤ room, so taken·T ≤ slack fits.
        let spent = [taken[0] * t0, taken[1] * t1];
        Some(self.commit(words, &slack, spent, touched))
    }

    /// A burst at one `now` on plain words; slices have equal lengths.
    #[inline(always)]
    fn batch_local(
        &self,
        words: &mut [u64; 2],
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) {
        match self.decide_batch(*words, t, sizes, pre, out) {
            Some(next) => *words = next,
            None => one_by_one(sizes, pre, out, |bytes, pre| {
                self.step(words, t, bytes, pre)
            }),
        }
    }

    /// A burst at one `now` on a shared flow; slices have equal lengths.
    fn batch_shared(
        &self,
        flow: &Flow,
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    );

    /// Whole bytes in each bucket.
    fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2];
}

/// Two independent buckets in the rules' order (trTCM: peak, committed;
/// RFC 4115: committed, excess).
#[derive(Clone, Copy)]
pub(crate) struct Pair<'a>(pub(crate) [&'a Bucket; 2]);

impl Pair<'_> {
    /// Whether both rates are represented exactly.
    pub(crate) const fn is_exact(self) -> bool {
        self.0[0].quota.is_exact() && self.0[1].quota.is_exact()
    }
}

/// The batch steps of [`Steps`] for a profile of two independent
/// buckets with a `pair()` method, written once for trTCM and RFC 4115.
/// `$candidate` and `$colors` say how a shared batch that lost the swap on
/// the second bucket redoes it (see [`lost_second`]).
macro_rules! pair_steps {
    ($candidate:expr, $colors:expr) => {
        #[inline(always)]
        fn times(&self, now: u64) -> [u64; 2] {
            self.pair().0.map(|b| b.now(now))
        }
        #[inline(always)]
        fn intervals(&self) -> [u64; 2] {
            self.pair().0.map(|b| b.quota.emission_interval())
        }
        #[inline(always)]
        fn rooms(&self, slack: [u64; 2]) -> [u64; 2] {
            let [b0, b1] = self.pair().0;
            [b0.whole_bytes(slack[0]), b1.whole_bytes(slack[1])]
        }
        #[inline(always)]
        fn slack(&self, [w0, w1]: [u64; 2], t: [u64; 2]) -> Option<Slack> {
            let [b0, b1] = self.pair().0;
            let ((base0, slack0), (base1, slack1)) = (b0.slack(w0, t[0])?, b1.slack(w1, t[1])?);
            Some(Slack {
                base: [base0, base1],
                slack: [slack0, slack1],
            })
        }
        #[inline(always)]
        fn commit(
            &self,
            [w0, w1]: [u64; 2],
            s: &Slack,
            spent: [u64; 2],
            touched: [bool; 2],
        ) -> [u64; 2] {
            [
                Bucket::after(w0, s.base[0], spent[0], touched[0]),
                Bucket::after(w1, s.base[1], spent[1], touched[1]),
            ]
        }
        #[inline]
        fn batch_shared(
            &self,
            flow: &Flow,
            t: [u64; 2],
            sizes: &[u64],
            pre: Arrivals,
            out: &mut [Color],
        ) {
            shared_batch(self, flow, t, sizes, pre, out, 0, |out, _, _| {
                let second = self.pair().0[1];
                lost_second(second, flow, t[1], sizes, pre, out, $candidate, $colors);
                false
            });
        }
        fn tokens_at(&self, [w0, w1]: [u64; 2], t: [u64; 2]) -> [u64; 2] {
            let [b0, b1] = self.pair().0;
            [b0.tokens(w0, t[0]), b1.tokens(w1, t[1])]
        }
    };
}

pub(super) use pair_steps;

/// A shared batch of a [`Pair`] that took from its first bucket but lost
/// the compare-and-swap on the `second`: that bucket's decisions redone, one
/// take each from the TAT there is now (as packet by packet would), for the
/// packets `candidate` picks (`pass` if the bucket holds them, else `fail`;
/// a rerun picks the same packets), until the swap succeeds.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lost_second(
    second: &Bucket,
    flow: &Flow,
    now: u64,
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
    candidate: fn(Arrivals, usize, Color) -> bool,
    colors: (Color, Color),
) {
    let candidate = |i: usize, color: Color| candidate(pre, i, color);
    let _ = flow.words[1].update(|tat| -> Result<(u64, ()), ()> {
        Ok((second.pass(tat, now, sizes, out, candidate, colors), ()))
    });
}

/// A burst packet by packet: `step(bytes, arrival colour)` for each, in
/// order, its colour into `out`.
#[cold]
#[inline(never)]
pub(crate) fn one_by_one(
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
    mut step: impl FnMut(u64, Color) -> Color,
) {
    for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
        *color = step(bytes, pre.at(i));
    }
}

/// A shared batch: decided on both words, then one compare-and-swap per
/// changed word, word `first` first. If that swap fails nothing was stored
/// and the batch starts again; if the other fails, `lost(out, old, new)`
/// (`first`'s value before and after the batch) resolves it, and the batch
/// starts again if it answers `true`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn shared_batch<S: Steps>(
    profile: &S,
    flow: &Flow,
    t: [u64; 2],
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
    first: usize,
    mut lost: impl FnMut(&mut [Color], u64, u64) -> bool,
) {
    let (words, second) = (&flow.words, 1 - first);
    loop {
        let w = [words[0].load(), words[1].load()];
        let Some(next) = profile.decide_batch(w, t, sizes, pre, out) else {
            return one_by_one(sizes, pre, out, |bytes, pre| {
                profile.step_shared(flow, t, bytes, pre)
            });
        };
        if next[first] != w[first]
            && words[first]
                .compare_exchange(w[first], next[first])
                .is_err()
        {
            continue; // nothing stored: start again
        }
        if next[second] == w[second]
            || words[second]
                .compare_exchange(w[second], next[second])
                .is_ok()
            || !lost(out, w[first], next[first])
        {
            return;
        }
    }
}
