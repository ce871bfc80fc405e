//! The steps a meter profile is made of, sealed: only this crate's
//! profiles implement them, and [`Meter`](super::Meter) is built on them.
//!
//! [`Steps::times`] turns `now` into each word's sub-ticks before any state
//! is read; [`Steps::step`] and [`Steps::step_shared`] colour one packet
//! (one compare-and-swap per bucket taken from, shared); a burst at one
//! `now` is decided on the buckets' slacks and rooms and stored by
//! [`Steps::commit`]. trTCM and RFC 4115 are two buckets that share nothing
//! ([`Pair`], whose batch steps `pair_steps!` writes once); srTCM's buckets
//! are coupled and it has its own.
//!
//! # Invariants
//!
//! * `slack` answers `None` for a state that cannot be reduced to slacks
//!   (a clock that stepped back past a span): batches then go packet by
//!   packet, never approximately.
//! * `commit` is given `spent ≤ slack` for each bucket and leaves a word
//!   no packet took from as it was.

use super::batch::{decide, Arrivals, Slack};
use super::{Bucket, Color, Flow};

/// The per-profile steps [`Meter`](super::Meter) is built from. Sealed:
/// only this crate's profiles implement it.
pub trait Steps {
    /// The batch rules of the profile's two buckets at one `now`:
    /// `false` for srTCM and RFC 4115 (green from the first bucket if
    /// green-coloured and it holds the packet, else yellow from the
    /// second if not red-coloured and it holds it, else red); `true`
    /// for trTCM (red unless not red-coloured and the first, peak,
    /// bucket holds it; then green if green-coloured and the second,
    /// committed, bucket holds it too, else yellow).
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
    /// The two buckets' bases and slacks for the state `words` at
    /// `t`, or `None` for a state that batches step through packet by
    /// packet (past a span).
    fn slack(&self, words: [u64; 2], t: [u64; 2]) -> Option<Slack>;
    /// The state words after a batch spent `spent ≤ slack` sub-ticks
    /// of each bucket's slack (`touched`: whether each was taken from at all).
    fn commit(
        &self,
        words: [u64; 2],
        slack: &Slack,
        spent: [u64; 2],
        touched: [bool; 2],
    ) -> [u64; 2];

    /// A burst at one `now` decided on the state `words` (nothing
    /// stored): its colours into `out` and the state after it, exactly
    /// what one [`step`](Self::step) per packet gives; `None` (and
    /// `out` untouched) for a state that needs the packet-by-packet
    /// path.
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
    /// Exactly the colours and state of one [`step`](Self::step) per
    /// packet: one read and one write of the words.
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
            None => self.batch_local_slow(words, t, sizes, pre, out),
        }
    }

    /// The packet-by-packet path of a local batch.
    #[inline(never)]
    #[cold]
    fn batch_local_slow(
        &self,
        words: &mut [u64; 2],
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) {
        for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
            *color = self.step(words, t, bytes, pre.at(i));
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

    /// The packet-by-packet path of a shared batch.
    #[inline(never)]
    #[cold]
    fn batch_shared_slow(
        &self,
        flow: &Flow,
        t: [u64; 2],
        sizes: &[u64],
        pre: Arrivals,
        out: &mut [Color],
    ) {
        for (i, (&bytes, color)) in sizes.iter().zip(out.iter_mut()).enumerate() {
            *color = self.step_shared(flow, t, bytes, pre.at(i));
        }
    }

    /// Whole bytes in each bucket.
    fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2];
}

/// The batch steps of a profile made of two independent buckets, in its
/// rules' order (trTCM: peak, committed; RFC 4115: committed, excess):
/// each bucket's slack, room and state are its own. srTCM's buckets are not
/// independent (the excess bucket fills from the committed one's overflow)
/// and has its own.
#[derive(Clone, Copy)]
pub(crate) struct Pair<'a>(pub(crate) [&'a Bucket; 2]);

impl Pair<'_> {
    /// Whether both rates are represented exactly.
    pub(crate) const fn is_exact(self) -> bool {
        self.0[0].quota.is_exact() && self.0[1].quota.is_exact()
    }

    #[inline(always)]
    pub(crate) fn times(self, now: u64) -> [u64; 2] {
        [self.0[0].now(now), self.0[1].now(now)]
    }

    #[inline(always)]
    pub(crate) fn intervals(self) -> [u64; 2] {
        self.0.map(|b| b.quota.emission_interval())
    }

    #[inline(always)]
    pub(crate) fn rooms(self, slack: [u64; 2]) -> [u64; 2] {
        [
            self.0[0].whole_bytes(slack[0]),
            self.0[1].whole_bytes(slack[1]),
        ]
    }

    #[inline(always)]
    pub(crate) fn slack(self, [w0, w1]: [u64; 2], t: [u64; 2]) -> Option<Slack> {
        let (base0, slack0) = self.0[0].slack(w0, t[0])?;
        let (base1, slack1) = self.0[1].slack(w1, t[1])?;
        Some(Slack {
            base: [base0, base1],
            slack: [slack0, slack1],
        })
    }

    #[inline(always)]
    pub(crate) fn commit(
        [w0, w1]: [u64; 2],
        slack: &Slack,
        spent: [u64; 2],
        touched: [bool; 2],
    ) -> [u64; 2] {
        [
            Bucket::after(w0, slack.base[0], spent[0], touched[0]),
            Bucket::after(w1, slack.base[1], spent[1], touched[1]),
        ]
    }

    pub(crate) fn tokens(self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
        [
            self.0[0].tokens(words[0], t[0]),
            self.0[1].tokens(words[1], t[1]),
        ]
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
            self.pair().times(now)
        }
        #[inline(always)]
        fn intervals(&self) -> [u64; 2] {
            self.pair().intervals()
        }
        #[inline(always)]
        fn rooms(&self, slack: [u64; 2]) -> [u64; 2] {
            self.pair().rooms(slack)
        }
        #[inline(always)]
        fn slack(&self, words: [u64; 2], t: [u64; 2]) -> Option<Slack> {
            self.pair().slack(words, t)
        }
        #[inline(always)]
        fn commit(
            &self,
            words: [u64; 2],
            slack: &Slack,
            spent: [u64; 2],
            touched: [bool; 2],
        ) -> [u64; 2] {
            Pair::commit(words, slack, spent, touched)
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
            batch_shared_pair(self, flow, t, sizes, pre, out, |out| {
                let second = self.pair().0[1];
                lost_second(second, flow, t[1], sizes, pre, out, $candidate, $colors)
            });
        }
        fn tokens_at(&self, words: [u64; 2], t: [u64; 2]) -> [u64; 2] {
            self.pair().tokens(words, t)
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

/// A shared batch for a profile of two independent buckets: decided on
/// both words, then one compare-and-swap per changed word in the rules'
/// order. If the first swap fails nothing was stored and the batch starts
/// again; if the second fails, `lost_second` redoes the second bucket's
/// decisions on the value it holds now.
#[inline(always)]
pub(crate) fn batch_shared_pair<S: Steps>(
    profile: &S,
    flow: &Flow,
    t: [u64; 2],
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
    lost_second: impl FnOnce(&mut [Color]),
) {
    let [first, second] = &flow.words;
    loop {
        let [w0, w1] = [first.load(), second.load()];
        let Some([next0, next1]) = profile.decide_batch([w0, w1], t, sizes, pre, out) else {
            return profile.batch_shared_slow(flow, t, sizes, pre, out);
        };
        if next0 != w0 && first.compare_exchange(w0, next0).is_err() {
            continue; // nothing stored: start again
        }
        if next1 != w1 && second.compare_exchange(w1, next1).is_err() {
            lost_second(out);
        }
        return;
    }
}
