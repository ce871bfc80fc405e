//! A burst of packets of one flow at one `now`: its colours decided on the
//! buckets' rooms, and the state stored once.
//!
//! # The math
//!
//! At one `now` nothing refills, so once `now` is in sub-ticks (one multiply
//! per rate) each bucket's state reduces to its slack
//! `S·T − (max(TAT, now) − now)`, and to its room in whole bytes
//! `room = ⌊slack / T⌋` (one multiply by a reciprocal of `T` kept in the
//! profile, exact for every 64-bit slack, see `crate::divisor`; no
//! division). A take of `B` bytes
//! is then exactly `B ≤ room`, leaving `room − B` (`B·T ≤ slack` iff
//! `B ≤ ⌊slack / T⌋`, and `⌊(slack − B·T) / T⌋ = ⌊slack / T⌋ − B`), and the
//! RFC rules at one `now` become, for the two buckets of each profile:
//!
//! | profile | first bucket | second bucket |
//! |---|---|---|
//! | srTCM | committed: green if it holds a green-coloured packet | excess (slack `EBS·T − (max(A, now) − max(C, now))`): yellow if it holds a packet that is neither green nor red-coloured |
//! | RFC 4115 | committed: as srTCM | excess: as srTCM |
//! | trTCM | peak: red unless it holds a packet not red-coloured | committed: green if it holds a green-coloured peak passer, else yellow |
//!
//! (srTCM's two slacks add up to A's, so A's own test is implied, and a
//! green leaves the excess slack as it is.) Within a burst each bucket's
//! asks form prefix sums that only grow, so a run of packets whose asks a
//! bucket holds in total all pass: the burst goes in blocks of eight with
//! one compare per bucket each, the first block that does not fit is
//! scanned for the run's end, and the packets after it are decided one at
//! a time with compares and subtractions. The state is written once: each
//! bucket's TAT becomes `max(TAT, now) + taken·T` (one multiply) if any
//! packet took from it, and stays as it was if none did. Sizes above
//! `u32::MAX` (whose sums could wrap), and states a batch cannot reduce to
//! slacks (a clock that stepped back past a span), go packet by packet.
//!
//!
//! # Invariants
//!
//! * The colours and the state are exactly those of one per-packet step
//!   per packet, in order, at the batch's `now` (`tests/meter.rs` checks it
//!   against per-packet calls and the reference models).
//! * Each bucket's room is `⌊slack / T⌋ ≤ S` and only ever decreases by
//!   bytes it holds, so `taken ≤ room` and `max(TAT, now) + taken·T ≤
//!   now + S·T` fits (the slack is only formed when `now + S·T` does).
//! * A shared batch stores each changed word by one compare-and-swap
//!   against the value it was decided on, so the bucket's inequality holds
//!   on the value replaced; if the first swap fails nothing is stored (see
//!   the [module docs](super) for the second).

use super::Color;

/// A flow's two buckets seen by a batch at one `now`: `max(TAT, now)` and
/// the slack in sub-ticks of each, in the order of [`Steps::BOTH`](super::steps::Steps::BOTH)'s rules
/// (srTCM: committed, excess; trTCM: peak, committed; RFC 4115:
/// committed, excess).
pub struct Slack {
    pub(crate) base: [u64; 2],
    pub(crate) slack: [u64; 2],
}

/// The colours a batch's packets arrived with: all green (colour-blind
/// marking) or one per packet, at least as many as there are packets.
#[derive(Clone, Copy)]
pub struct Arrivals<'a>(Option<&'a [Color]>);

impl<'a> Arrivals<'a> {
    /// Colour-blind: every packet arrived green.
    pub(crate) const BLIND: Arrivals<'static> = Arrivals(None);

    /// Colour-aware: packet `i` arrived coloured `colors[i]`.
    #[inline(always)]
    pub(crate) fn of(colors: &'a [Color]) -> Self {
        Arrivals(Some(colors))
    }

    /// The colour packet `i` arrived with.
    #[inline(always)]
    pub(crate) fn at(self, i: usize) -> Color {
        match self.0 {
            None => Color::Green,
            Some(colors) => colors[i],
        }
    }

    /// Whether any of the first `n` packets arrived coloured for each
    /// bucket of `both`'s rules (see [`Steps::BOTH`](super::steps::Steps::BOTH)).
    #[inline(always)]
    pub(crate) fn any_ask(self, both: bool, n: usize) -> [bool; 2] {
        let Some(colors) = self.0 else {
            return [n > 0, both & (n > 0)];
        };
        let (mut green, mut yellow) = (false, false);
        for &color in &colors[..n] {
            green |= color == Color::Green;
            yellow |= color == Color::Yellow;
        }
        if both {
            [green | yellow, green]
        } else {
            [green, yellow]
        }
    }

    /// The arrival colours of packets `start..start + out.len()` into
    /// `out`: one store of a whole block.
    #[inline(always)]
    pub(crate) fn copy_block(self, start: usize, out: &mut [Color]) {
        if let Ok(block) = <&mut [Color; BLOCK]>::try_from(&mut *out) {
            *block = match self.0 {
                None => [Color::Green; BLOCK],
                Some(colors) => match colors[start..].first_chunk() {
                    Some(&arrived) => arrived,
                    None => return,
                },
            };
        } else {
            for (k, color) in out.iter_mut().enumerate() {
                *color = self.at(start + k);
            }
        }
    }
}

/// Packets per block in [`decide`]'s search for the leading run.
const BLOCK: usize = 8;

/// What a packet that keeps its arrival colour asks of each bucket, in
/// bytes, under the rules `both` selects.
#[inline(always)]
fn ask(both: bool, bytes: u64, arrived: Color) -> [u64; 2] {
    let green = bytes & ((arrived == Color::Green) as u64).wrapping_neg();
    let yellow = bytes & ((arrived == Color::Yellow) as u64).wrapping_neg();
    if both {
        // trTCM: green and yellow take from the peak bucket, green also from
        // the committed one.
        [green | yellow, green]
    } else {
        // srTCM, RFC 4115: green from the first bucket, yellow from the
        // second.
        [green, yellow]
    }
}

/// The colours of a burst at one `now` (into `out`) given the whole bytes
/// each bucket holds, `room = ⌊slack / T⌋`, under the rules `both` selects
/// (see [`Steps::BOTH`](super::steps::Steps::BOTH)); returns the bytes taken from
/// each bucket and whether each was taken from at all (a 0-byte packet
/// counts: its take moves a TAT in the past up to `now`). At one `now`
/// nothing refills, so a bucket's take of `B` bytes is exactly the test
/// `B ≤ room` and the step `room ← room − B` (`B·T ≤ slack` iff
/// `B ≤ ⌊slack / T⌋`, and `⌊(slack − B·T) / T⌋ = ⌊slack / T⌋ − B`): the
/// sequential per-packet rules with no clock, TAT or multiply. Two stages:
///
/// 1. the leading run of packets that keep their arrival colours. Each
///    bucket's asks form prefix sums that only grow, so packet `i` is in
///    the run iff the sums up to `i` fit the rooms: whole blocks of
///    [`BLOCK`] are tested with one compare per bucket, then the first
///    block that does not fit packet by packet;
/// 2. from the first packet that does not keep its colour on, the rules a
///    packet at a time on what the rooms have left.
///
/// Sizes above `u32::MAX` skip stage 1 (its sums could wrap); stage 2
/// takes any size.
#[inline(always)]
pub(super) fn decide(
    both: bool,
    room: [u64; 2],
    sizes: &[u64],
    pre: Arrivals,
    out: &mut [Color],
) -> ([u64; 2], [bool; 2]) {
    let n = sizes.len().min(out.len());
    let (sizes, out) = (&sizes[..n], &mut out[..n]);
    let fits = |asked: [u64; 2]| (asked[0] <= room[0]) & (asked[1] <= room[1]);
    let bits = sizes.iter().fold(0, |bits, &bytes| bits | bytes);
    let (mut start, mut asked) = (0, [0u64; 2]);
    if bits <= u32::MAX as u64 && n <= u32::MAX as usize {
        // n · (2³² − 1) < 2⁶⁴: the sums do not wrap.
        let blocks = sizes.chunks(BLOCK).zip(out.chunks_mut(BLOCK));
        for (block, colors) in blocks {
            let mut total = asked;
            for (k, &bytes) in block.iter().enumerate() {
                let [ask0, ask1] = ask(both, bytes, pre.at(start + k));
                total = [total[0] + ask0, total[1] + ask1];
            }
            if fits(total) {
                pre.copy_block(start, colors);
                asked = total;
                start += block.len();
                continue;
            }
            for (&bytes, color) in block.iter().zip(colors.iter_mut()) {
                let arrived = pre.at(start);
                let [ask0, ask1] = ask(both, bytes, arrived);
                let total = [asked[0] + ask0, asked[1] + ask1];
                if !fits(total) {
                    break;
                }
                *color = arrived;
                asked = total;
                start += 1;
            }
            break;
        }
    }
    let mut touched = pre.any_ask(both, start);
    let mut left = [room[0] - asked[0], room[1] - asked[1]];
    let rest = sizes[start..].iter().zip(&mut out[start..]);
    for (k, (&bytes, color)) in rest.enumerate() {
        *color = take(both, &mut left, &mut touched, bytes, pre.at(start + k));
    }
    ([room[0] - left[0], room[1] - left[1]], touched)
}

/// One packet of stage 2 of [`decide`]: its colour under the rules `both`
/// selects, given the whole bytes `left` in each bucket, which it takes
/// from (marking the bucket `touched`). Plain branches and an early return
/// per colour, as the per-packet step has: the stage's cost is the few
/// packets after the run's end, and in this form they ran faster than as
/// masked subtractions and a colour table (`benches/meter.rs`, most of all
/// in RFC 4115 over-rate local batches).
#[inline(always)]
fn take(
    both: bool,
    left: &mut [u64; 2],
    touched: &mut [bool; 2],
    bytes: u64,
    arrived: Color,
) -> Color {
    if both {
        // trTCM: the peak bucket, then the committed one for green.
        if arrived == Color::Red || bytes > left[0] {
            return Color::Red;
        }
        left[0] -= bytes;
        touched[0] = true;
        if arrived == Color::Green && bytes <= left[1] {
            left[1] -= bytes;
            touched[1] = true;
            return Color::Green;
        }
        Color::Yellow
    } else {
        // srTCM, RFC 4115: green from the first bucket, else yellow from
        // the second.
        if arrived == Color::Green && bytes <= left[0] {
            left[0] -= bytes;
            touched[0] = true;
            return Color::Green;
        }
        if arrived != Color::Red && bytes <= left[1] {
            left[1] -= bytes;
            touched[1] = true;
            return Color::Yellow;
        }
        Color::Red
    }
}
