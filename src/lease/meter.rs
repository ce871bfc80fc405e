//! A worker's leased handle on a shared two-bucket meter.

use core::fmt;

use super::{LeasePolicy, Lot};
use crate::meter::{Color, Flow, TrTcm, TrTcm4115};

/// A two-bucket meter whose buckets can be leased from: [`TrTcm`] (RFC
/// 2698) and [`TrTcm4115`] (RFC 4115). [`SrTcm`](crate::meter::SrTcm) is not
/// one: its buckets are coupled (the excess bucket fills only from the
/// committed one's overflow), so bytes taken from one cannot be spent
/// without looking at the other.
pub trait LeasableMeter: sealed::Sealed {}

mod sealed {
    use crate::meter::{Flow, TrTcm, TrTcm4115};

    pub trait Sealed {
        /// Whether green needs both buckets (trTCM: peak then committed)
        /// or green and yellow come from one bucket each (RFC 4115).
        const BOTH: bool;
        /// Takes bytes from bucket `which` of `flow` (see `Flow::take_bytes`).
        fn take_bytes(
            &self,
            flow: &Flow,
            which: usize,
            now: u64,
            ask: (u64, u64, u64),
        ) -> Result<u64, u64>;
        /// Gives bytes back to bucket `which` of `flow`.
        fn give_back_bytes(&self, flow: &Flow, which: usize, now: u64, bytes: u64);
    }

    macro_rules! sealed {
        ($meter:ty, $both:expr) => {
            impl Sealed for $meter {
                const BOTH: bool = $both;
                fn take_bytes(
                    &self,
                    flow: &Flow,
                    which: usize,
                    now: u64,
                    ask: (u64, u64, u64),
                ) -> Result<u64, u64> {
                    flow.take_bytes(self.lease_buckets()[which & 1], which, now, ask)
                }
                fn give_back_bytes(&self, flow: &Flow, which: usize, now: u64, bytes: u64) {
                    flow.give_back_bytes(self.lease_buckets()[which & 1], which, now, bytes)
                }
            }
        };
    }
    sealed!(TrTcm, true);
    sealed!(TrTcm4115, false);
}

impl LeasableMeter for TrTcm {}
impl LeasableMeter for TrTcm4115 {}

/// A worker's leased handle on a shared [`Flow`]: bytes leased from each of
/// the flow's two buckets, packets coloured from those leases with no
/// atomic operation on the fast path.
///
/// * RFC 4115 ([`TrTcm4115`]): green if the committed lease covers the
///   packet (topping it up from the shared committed bucket if need be),
///   else yellow if the excess lease does, else red.
/// * trTCM ([`TrTcm`]): red unless the peak lease covers the packet; then
///   green if the committed lease does too, else yellow.
///
/// Each bucket obeys the bound of the [module docs](crate::lease) on its own: the
/// bytes coloured from bucket `i` over `Δ` ticks are at most
/// `Sᵢ + ⌊Δ·Rᵢ⌋ + Hᵢ(t₀)`, with `Hᵢ(t₀) ≤ n·k` bytes held in live leases
/// (`k` the policy's `max_cells`, here in bytes). Unspent bytes go back to
/// their bucket when a lease lapses, on [`release`](Self::release) and on
/// drop.
///
/// ```
/// use cellrate::lease::{LeasePolicy, LeasedMeter};
/// use cellrate::meter::{Color, Flow, TrTcm4115};
/// static FLOW: Flow = Flow::new();
/// // 1 000 B/s committed (3 000 B bursts), 1 000 B/s excess (1 500 B bursts), 1 kHz clock.
/// let profile = TrTcm4115::new(1_000, 3_000, 1_000, 1_500, 1_000).unwrap();
/// let policy = LeasePolicy::new(3_000, 100).with_min(1_500).with_share(2);
/// let mut a = LeasedMeter::new(&profile, &FLOW, policy);
/// let mut b = LeasedMeter::new(&profile, &FLOW, policy);
/// assert_eq!(a.mark(0, 1_500), Color::Green);
/// assert_eq!(b.mark(0, 1_500), Color::Green);
/// assert_eq!(a.mark(0, 1_500), Color::Yellow);
/// assert_eq!(b.mark(0, 1_500), Color::Red);
/// ```
pub struct LeasedMeter<'a, M: LeasableMeter> {
    profile: &'a M,
    flow: &'a Flow,
    policy: LeasePolicy,
    lots: [Lot; 2],
}

impl<'a, M: LeasableMeter> LeasedMeter<'a, M> {
    /// A handle holding no bytes yet.
    pub const fn new(profile: &'a M, flow: &'a Flow, policy: LeasePolicy) -> Self {
        LeasedMeter {
            profile,
            flow,
            lots: [Lot::new(&policy), Lot::new(&policy)],
            policy,
        }
    }

    /// Colour-blind: the colour of a `bytes`-byte packet at `now`.
    #[inline]
    pub fn mark(&mut self, now: u64, bytes: u64) -> Color {
        self.mark_aware(now, bytes, Color::Green)
    }

    /// Colour-aware: the colour of a `bytes`-byte packet pre-coloured `pre`.
    pub fn mark_aware(&mut self, now: u64, bytes: u64, pre: Color) -> Color {
        if pre == Color::Red {
            return Color::Red;
        }
        if M::BOTH {
            if !self.spend(0, now, bytes) {
                return Color::Red;
            }
            if pre == Color::Green && self.spend(1, now, bytes) {
                Color::Green
            } else {
                Color::Yellow
            }
        } else if pre == Color::Green && self.spend(0, now, bytes) {
            Color::Green
        } else if self.spend(1, now, bytes) {
            Color::Yellow
        } else {
            Color::Red
        }
    }

    /// Spends `bytes` from lease `which`, refilling it from the shared
    /// bucket if need be.
    #[inline(always)]
    fn spend(&mut self, which: usize, now: u64, bytes: u64) -> bool {
        if self.lots[which].spend(now, bytes, &self.policy) {
            return true;
        }
        self.refill(which, now, bytes)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, which: usize, now: u64, bytes: u64) -> bool {
        if bytes == 0 {
            return true;
        }
        let (flow, profile) = (self.flow, self.profile);
        self.lots[which]
            .refill(
                &self.policy,
                now,
                bytes,
                |least, most, share| {
                    profile
                        .take_bytes(flow, which, now, (least, most, share))
                        .map_err(|_wait| ())
                },
                |back| profile.give_back_bytes(flow, which, now, back),
            )
            .is_ok()
    }

    /// Gives back every byte in hand at `now`.
    pub fn release(&mut self, now: u64) {
        for which in 0..2 {
            let (flow, profile) = (self.flow, self.profile);
            self.lots[which].release(|back| profile.give_back_bytes(flow, which, now, back));
        }
    }

    /// Bytes in hand per bucket, in the flow's word order (RFC 4115:
    /// committed, excess; trTCM: peak, committed).
    pub fn held(&self) -> [u64; 2] {
        [self.lots[0].held, self.lots[1].held]
    }
    /// Bytes taken from each bucket.
    pub fn taken(&self) -> [u64; 2] {
        [self.lots[0].taken, self.lots[1].taken]
    }
    /// Bytes given back to each bucket.
    pub fn returned(&self) -> [u64; 2] {
        [self.lots[0].returned, self.lots[1].returned]
    }
    /// Bytes spent from each bucket's leases.
    pub fn spent(&self) -> [u64; 2] {
        [self.lots[0].spent(), self.lots[1].spent()]
    }
}

impl<M: LeasableMeter> Drop for LeasedMeter<'_, M> {
    fn drop(&mut self) {
        for which in 0..2 {
            let (flow, profile) = (self.flow, self.profile);
            let now = self.lots[which].last;
            self.lots[which].release(|back| profile.give_back_bytes(flow, which, now, back));
        }
    }
}

impl<M: LeasableMeter> fmt::Debug for LeasedMeter<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedMeter")
            .field("held", &self.held())
            .field("taken", &self.taken())
            .field("returned", &self.returned())
            .field("policy", &self.policy)
            .finish()
    }
}
