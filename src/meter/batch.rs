//! A burst of one flow at one `now`, decided on the buckets' rooms in
//! whole bytes (`⌊slack / T⌋`, nothing refills): the leading run that keeps
//! its arrival colours in blocks of eight, the rest one at a time.
//!
//! * The colours and state are exactly one per-packet step per packet.
//! * A room only decreases by bytes it holds, so `max(TAT, now) + taken·T ≤
//!   now + S·T` fits. Sizes above `u32::MAX` skip the blocks.

use super::Color;

/// A flow's two buckets at one `now`: `max(TAT, now)` and the slack of
/// each, in the order of [`Steps::BOTH`](super::steps::Steps::BOTH)'s rules.
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

/// The colours of a burst (into `out`) given each bucket's room, under the
/// rules `both` selects; returns the bytes taken from each bucket and
/// whether each was taken from (a 0-byte packet counts). Stage 1 finds the
/// leading run that keeps its arrival colours by prefix sums, [`BLOCK`]
/// packets a compare; stage 2 applies the rules a packet at a time.
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

/// One packet of stage 2 of [`decide`]: its colour, taken from `left`.
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
