//! The bucketed window of a store tier: per client the counts of its last
//! `N` buckets and the whole index of the newest, so a client silent for
//! any time is read as silent (the core's one-word form reads a silence
//! of a multiple of `2^tag_bits` buckets as none; the Redis script and the
//! core's `WideBucketedWindow` keep the whole index too).
//!
//! * Answers are the core's [`BucketedWindowQuota`]'s: buckets of `b =
//!   W / N` ticks; `cost` cells in bucket `j` are admitted iff the counts
//!   of buckets `j − N + 1 … j` plus `cost` are at most the limit; a
//!   denial waits until enough of the oldest buckets have left the
//!   window. A `now` before the newest bucket is judged at that bucket.
//! * Invariants: `counts[i]` is bucket `last − i`'s count (`i < N`), and
//!   they sum to at most the limit.
//! * A change of parameters ([`Buckets::translate`]) counts the cells in
//!   `now`'s window, at most the new limit, in `now`'s bucket of the new
//!   grid: the core's `BucketedWindowQuota::translate`.

use cellrate::window::BucketedWindowQuota;
use cellrate::{Decision, Denied, Limited, Snapshot};

/// A client's buckets: the newest's whole index and the counts, newest
/// first (empty: a new client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Buckets {
    last: u64,
    counts: Vec<u64>,
}

/// The buckets as seen at a `now`: the bucket judged, the ticks until the
/// next starts, and the stored counts still in its window. Its `N`
/// counts, newest first, are `shift` zeros (buckets since the newest
/// stored) then `kept`.
struct View<'a> {
    index: u64,
    until_next: u64,
    shift: usize,
    kept: &'a [u64],
}

impl View<'_> {
    /// The cells in the window once its `d` oldest buckets have left it.
    fn held_after(&self, n: usize, d: usize) -> u64 {
        let len = n.saturating_sub(d).saturating_sub(self.shift);
        self.kept[..len.min(self.kept.len())].iter().sum()
    }
}

/// What a bucketed quota's answers need of it.
struct Grid {
    limit: u64,
    n: usize,
    b: u64,
}

impl Grid {
    fn of(q: &BucketedWindowQuota) -> Self {
        Grid {
            limit: q.limit(),
            n: q.buckets() as usize,
            b: q.bucket_ticks(),
        }
    }

    fn view<'a>(&self, s: &'a Buckets, now: u64) -> View<'a> {
        let (j, until_next) = (now / self.b, self.b - now % self.b);
        if j < s.last {
            // A clock behind the newest bucket: judged at that bucket.
            return View {
                index: s.last,
                until_next: until_next + (s.last - j) * self.b,
                shift: 0,
                kept: &s.counts,
            };
        }
        let shift = ((j - s.last).min(self.n as u64)) as usize;
        let kept = &s.counts[..s.counts.len().min(self.n - shift)];
        View {
            index: j,
            until_next,
            shift,
            kept,
        }
    }

    /// The ticks until `room` more cells fit: the oldest buckets leave one
    /// by one, at the starts of the next ones.
    fn wait(&self, v: &View<'_>, room: u64) -> u64 {
        let mut d = 1;
        while d < self.n && v.held_after(self.n, d) + room > self.limit {
            d += 1;
        }
        v.until_next + (d as u64 - 1) * self.b
    }

    fn reset_after(&self, v: &View<'_>, total: u64) -> u64 {
        if total == 0 {
            0
        } else {
            self.wait(v, self.limit)
        }
    }
}

impl Buckets {
    /// Admits `cost` cells at `now` (written only if `write`): the decision
    /// and the bucket they are counted in (their mark), or the denial. A
    /// cost of 0 is a peek.
    pub(crate) fn check(
        &mut self,
        q: &BucketedWindowQuota,
        now: u64,
        cost: u64,
        write: bool,
    ) -> Result<(Decision, u64), Denied> {
        let g = Grid::of(q);
        if cost > g.limit {
            return Err(Denied::CostTooLarge {
                cost,
                limit: g.limit,
            });
        }
        let v = g.view(self, now);
        let total = v.held_after(g.n, 0);
        if cost == 0 {
            let reset = g.reset_after(&v, total);
            return Ok((Decision::new(g.limit, g.limit - total, reset), v.index));
        }
        if total + cost > g.limit {
            return Err(Denied::Limited(Limited::with_remaining(
                g.limit,
                g.limit - total,
                g.wait(&v, cost),
                g.reset_after(&v, total),
            )));
        }
        let reset = v.until_next + (g.n as u64 - 1) * g.b;
        let (index, shift) = (v.index, v.shift);
        if write {
            // The window's counts, newest first, stored in place.
            self.counts.resize(g.n, 0);
            self.counts.rotate_right(shift);
            self.counts[..shift].fill(0);
            self.counts[0] += cost;
            self.last = index;
        }
        Ok((Decision::new(g.limit, g.limit - total - cost, reset), index))
    }

    /// The buckets at `now`, writing nothing.
    pub(crate) fn peek(&self, q: &BucketedWindowQuota, now: u64) -> Snapshot {
        let g = Grid::of(q);
        let v = g.view(self, now);
        let total = v.held_after(g.n, 0);
        let retry = if total < g.limit { 0 } else { g.wait(&v, 1) };
        Snapshot::new(g.limit, g.limit - total, g.reset_after(&v, total), retry)
    }

    /// Whether no bucket in `now`'s window holds a cell.
    pub(crate) fn is_idle(&self, q: &BucketedWindowQuota, now: u64) -> bool {
        let g = Grid::of(q);
        g.view(self, now).held_after(g.n, 0) == 0
    }

    /// Takes back `cost` of the cells counted in bucket `mark`, if it is
    /// still one of the kept buckets.
    pub(crate) fn refund(&mut self, mark: u64, cost: u64) {
        let Some(i) = self.last.checked_sub(mark) else {
            return;
        };
        if let Some(c) = self.counts.get_mut(i as usize) {
            *c -= cost.min(*c);
        }
    }

    /// The buckets re-expressed at `now` for `new` (see the module docs).
    pub(crate) fn translate(
        &mut self,
        old: &BucketedWindowQuota,
        now: u64,
        new: &BucketedWindowQuota,
    ) {
        let g = Grid::of(old);
        let total = g.view(self, now).held_after(g.n, 0);
        let g = Grid::of(new);
        *self = if total == 0 {
            Buckets::default()
        } else {
            let mut counts = vec![0; g.n];
            counts[0] = total.min(g.limit);
            Buckets {
                last: now / g.b,
                counts,
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::Buckets;
    use cellrate::window::{BucketedWindowQuota, WideBucketedWindow};
    use cellrate::Algorithm;
    use proptest::prelude::*;

    /// One step of a history: a check of `cost` cells `gap` ticks after the
    /// last, or a refund of the last admission.
    #[derive(Clone, Debug)]
    enum Op {
        Check { gap: u64, cost: u64 },
        Refund { cost: u64 },
    }

    fn op(long: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..30, 0u64..4).prop_map(|(gap, cost)| Op::Check { gap, cost }),
            1 => (0u64..long, 0u64..4).prop_map(|(gap, cost)| Op::Check { gap, cost }),
            1 => (1u64..4).prop_map(|cost| Op::Refund { cost }),
        ]
    }

    /// A full window, then a silence of one lap of the one-word form's
    /// tag (2¹⁶ buckets at limit 255 in 6 buckets): the buckets read it as
    /// a silence, as the core's ring does, where the one-word form still
    /// reads the old cells.
    #[test]
    fn a_silence_of_a_lap_of_the_tag_is_a_silence() {
        let q = BucketedWindowQuota::new(255, 600, 6);
        let core = WideBucketedWindow::<8>::try_with_buckets(255, 600, 6).unwrap();
        let (mut ours, mut word) = (Buckets::default(), BucketedWindowQuota::NEW);
        let t0 = 1_796_525_042_889_588;
        for (t, cost) in [(t0, 200), (t0 + 150, 55)] {
            ours.check(&q, t, cost, true).unwrap();
            core.check_n(t, cost).unwrap();
            word = q.check(word, t, cost).unwrap().0;
        }
        let later = t0 + 150 + (1 << q.tag_bits()) * q.bucket_ticks();
        let got = ours.check(&q, later, 1, true).map(|(d, _)| d);
        assert_eq!(got, core.check_n(later, 1));
        assert_eq!(got.map(|d| d.remaining()), Ok(254));
        assert!(
            q.check(word, later, 1).is_err(),
            "the one-word form aliases"
        );
    }

    proptest! {
        /// Checks, peeks and refunds answer as the core's wide bucketed
        /// window (which keeps the whole index too), silences of any
        /// length included.
        #[test]
        fn buckets_answer_as_the_core_ring(
            start in 0u64..1 << 40,
            (limit, n) in (1u64..8, 1u32..6),
            ops in proptest::collection::vec(op(1 << 30), 1..100),
        ) {
            let window = 10 * u64::from(n);
            let q = BucketedWindowQuota::new(limit, window, n);
            let core = WideBucketedWindow::<8>::try_with_buckets(limit, window, n).unwrap();
            let mut ours = Buckets::default();
            let mut now = start;
            let mut last = None;
            for op in ops {
                match op {
                    Op::Check { gap, cost } => {
                        now += gap;
                        let got = ours.check(&q, now, cost, true);
                        let want = core.check_n(now, cost);
                        prop_assert_eq!(got.map(|(d, _)| d), want);
                        last = got.ok().filter(|_| cost > 0).map(|(_, mark)| (now, mark));
                    }
                    Op::Refund { cost } => {
                        // The core gives back cells counted at `now`'s bucket.
                        if let Some((at, mark)) = last.take().filter(|&(at, _)| at == now) {
                            ours.refund(mark, cost);
                            core.refund_n(at, cost);
                        }
                    }
                }
                prop_assert_eq!(ours.peek(&q, now), core.peek(now));
                prop_assert_eq!(ours.is_idle(&q, now), core.peek(now).remaining() == limit);
            }
        }

        /// A change of parameters after a short history is the one-word
        /// quota's `translate`, read at the same instant and after.
        #[test]
        fn buckets_translate_as_the_core_word(
            (limit, n) in (1u64..8, 1u32..6),
            (limit2, n2) in (1u64..8, 1u32..6),
            checks in proptest::collection::vec((0u64..30, 1u64..3), 0..12),
            gap in 0u64..40,
            after in 0u64..80,
        ) {
            let (old, new) = (
                BucketedWindowQuota::new(limit, 10 * u64::from(n), n),
                BucketedWindowQuota::new(limit2, 12 * u64::from(n2), n2),
            );
            let (mut ours, mut word, mut now) = (Buckets::default(), BucketedWindowQuota::NEW, 1_000);
            for (g, cost) in checks {
                now += g;
                let _ = ours.check(&old, now, cost, true);
                if let Ok((w, _)) = old.check(word, now, cost) {
                    word = w;
                }
            }
            now += gap;
            ours.translate(&old, now, &new);
            let word = old.translate(word, now, &new);
            prop_assert_eq!(ours.peek(&new, now), new.peek(word, now));
            prop_assert_eq!(ours.peek(&new, now + after), new.peek(word, now + after));
        }
    }
}
