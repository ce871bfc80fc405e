//! Leases: one limit shared by many workers (threads, cores, tasks) that
//! scales with them.
//!
//! A [`Leased`] handle **takes `g` cells from a shared [`Gcra`] in one
//! compare-and-swap and spends them locally**, with no atomic operation on
//! its fast path. What it has not spent goes back ([`Gcra::refund_n`]) when
//! the lease lapses (older than the policy's `lifetime`, or idle longer than
//! `idle`), on [`release`](Leased::release), and on drop. [`LeasedMeter`]
//! does the same for the packet meters: bytes leased from each shared bucket
//! of a [`Flow`]. Handles are plain values (no allocation, no thread-local,
//! no clock); any clock works, as states and deadlines are compared in
//! serial order.
//!
//! # Lease size and denials
//!
//! A handle's target size starts at the policy's
//! [`min_cells`](LeasePolicy::with_min), doubles when a lease is used up
//! before its deadline, and falls to what was used when one lapses, never
//! above [`max_cells`](LeasePolicy::new). One take is at most
//! `⌊room / share⌋` of the `room` cells the shared limiter holds (never less
//! than the cost at hand; [`with_share`](LeasePolicy::with_share), about the
//! number of workers), so near the limit leases shrink to the cost. A handle
//! is denied when the cells in hand and the shared room together fall short
//! of the cost; it keeps its cells, and every denial asks the shared limiter.
//!
//! # The bound
//!
//! With `T` and `b` the shared quota's emission interval and burst, `n`
//! handles, `k` the policy's `max_cells` and `H(t)` the cells held at `t`:
//!
//! * **Conservation**: for every handle, `taken = spent + returned + held`
//!   ([`taken`](Leased::taken), [`spent`](Leased::spent),
//!   [`returned`](Leased::returned), [`held`](Leased::held)).
//! * **Workers**: when every worker's `now` is non-decreasing, the cells `A`
//!   the handles admit with `now ∈ [t₀, t₀ + Δ]` satisfy
//!   `A ≤ b + ⌊Δ/T⌋ + H(t₀) ≤ b + ⌊Δ/T⌋ + n·k`. Each
//!   [`reset`](Gcra::reset) inside the interval adds `b`.
//! * **Stalls**: a worker that stops holding `h ≤ k` cells costs the others at
//!   most those `h` cells, once; their sustained rate is never lower.
//!
//! The proofs and the stall analysis are in docs/design/lease.md in the
//! repository.
//!
//! # Example
//!
//! ```
//! use cellrate::lease::{LeasePolicy, Leased};
//! use cellrate::{Gcra, Quota};
//!
//! // 1 000 cells per second, bursts of 100, on a 1 MHz clock, for two workers.
//! static LIMIT: Gcra = Gcra::new(Quota::per_second(1_000).with_burst(100).at_hz(1_000_000));
//! let policy = LeasePolicy::new(16, 10_000).with_share(2);
//! let mut core0 = Leased::new(&LIMIT, policy);
//! let mut core1 = Leased::new(&LIMIT, policy);
//!
//! let admitted = (0..200).filter(|i| {
//!     let worker = if i % 2 == 0 { &mut core0 } else { &mut core1 };
//!     worker.check(0).is_ok()
//! }).count();
//! assert_eq!(admitted, 100); // at one instant: the burst, no more
//! assert_eq!(core0.spent() + core1.spent(), 100);
//! ```

use core::fmt;

use crate::decision::Denied;
use crate::meter::{Color, Flow, TrTcm, TrTcm4115};
use crate::Gcra;

/// A shared limiter that grants cells in bulk: the source of a [`Leased`]
/// handle. Implemented by [`Gcra`] and by references and (with `alloc`)
/// `Arc`s of a source.
pub trait CellSource {
    /// Takes `g` cells at `now` in one atomic step and returns `g`: the
    /// largest `g ≤ most` with `g ≤ max(least, ⌊room / share⌋)`, where
    /// `room` is what the limiter holds. Takes nothing and denies when it
    /// holds fewer than `least`. `least ≥ 1` and `share ≥ 1`.
    ///
    /// ```
    /// use cellrate::lease::CellSource;
    /// use cellrate::{Gcra, Quota};
    /// let g = Gcra::new(Quota::per_second(10).with_burst(10).at_hz(1_000));
    /// assert_eq!(g.take(0, 1, 8, 2).unwrap(), 5); // half the room of 10
    /// assert_eq!(g.take(0, 1, 8, 1).unwrap(), 5); // all that is left
    /// assert!(g.take(0, 1, 8, 1).is_err());
    /// ```
    fn take(&self, now: u64, least: u64, most: u64, share: u64) -> Result<u64, Denied>;

    /// Gives `cells` back at `now` ([`Gcra::refund_n`]).
    fn give_back(&self, now: u64, cells: u64);
}

impl CellSource for Gcra {
    #[inline]
    fn take(&self, now: u64, least: u64, most: u64, share: u64) -> Result<u64, Denied> {
        self.take_up_to(now, least, most, share)
            .map(|(taken, _room)| taken)
    }

    fn give_back(&self, now: u64, cells: u64) {
        self.refund_n(now, cells);
    }
}

impl<S: CellSource + ?Sized> CellSource for &S {
    #[inline]
    fn take(&self, now: u64, least: u64, most: u64, share: u64) -> Result<u64, Denied> {
        (**self).take(now, least, most, share)
    }
    fn give_back(&self, now: u64, cells: u64) {
        (**self).give_back(now, cells)
    }
}

#[cfg(feature = "alloc")]
impl<S: CellSource + ?Sized> CellSource for alloc::sync::Arc<S> {
    #[inline]
    fn take(&self, now: u64, least: u64, most: u64, share: u64) -> Result<u64, Denied> {
        (**self).take(now, least, most, share)
    }
    fn give_back(&self, now: u64, cells: u64) {
        (**self).give_back(now, cells)
    }
}

/// How a handle leases: the largest lease `max_cells` (the `k` of the
/// bound), the smallest target `min_cells`, the `lifetime` and `idle`
/// bounds in ticks, and the `share` of the shared room one take may claim.
/// Every value is accepted: sizes are clamped to `1 ≤ min ≤ max`, `share`
/// to at least 1, `lifetime` and `idle` to at most [`MAX_LEASE_TICKS`]
/// (deadlines are compared in serial order, so any clock works).
///
/// ```
/// use cellrate::lease::LeasePolicy;
/// let p = LeasePolicy::new(64, 1_000).with_min(4).with_idle(100).with_share(4);
/// assert_eq!((p.min_cells(), p.max_cells(), p.lifetime(), p.idle(), p.share()), (4, 64, 1_000, 100, 4));
/// assert_eq!(LeasePolicy::new(0, 10).max_cells(), 1);
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeasePolicy {
    min_cells: u64,
    max_cells: u64,
    lifetime: u64,
    idle: u64,
    share: u64,
}

/// The longest `lifetime` and `idle` a [`LeasePolicy`] keeps: 2⁶² ticks
/// (146 years at 1 GHz). A lease's deadline is compared with `now` in
/// serial order (`deadline − now` as a signed number), which is exact for
/// deadlines less than 2⁶³ ticks ahead, so `now` may come from any clock,
/// Unix time or a counter that wraps past `2⁶⁴` included.
///
/// ```
/// use cellrate::lease::{LeasePolicy, MAX_LEASE_TICKS};
/// assert_eq!(LeasePolicy::new(8, u64::MAX).lifetime(), MAX_LEASE_TICKS);
/// ```
pub const MAX_LEASE_TICKS: u64 = 1 << 62;

/// `ticks`, at most [`MAX_LEASE_TICKS`].
const fn lease_ticks(ticks: u64) -> u64 {
    if ticks > MAX_LEASE_TICKS {
        MAX_LEASE_TICKS
    } else {
        ticks
    }
}

/// Whether `now` is not after `deadline`, in serial order: `deadline − now`
/// (wrapping) read as a signed number is not negative.
#[inline(always)]
const fn not_after(now: u64, deadline: u64) -> bool {
    deadline.wrapping_sub(now) < 1 << 63
}

impl LeasePolicy {
    /// Leases of at most `max_cells` cells, each spent within `lifetime`
    /// ticks of its take (and within `lifetime` ticks of the last use:
    /// `idle` defaults to `lifetime`). Starts at leases of 1 cell and a
    /// `share` of 1.
    pub const fn new(max_cells: u64, lifetime: u64) -> Self {
        let max_cells = if max_cells == 0 { 1 } else { max_cells };
        let lifetime = lease_ticks(lifetime);
        LeasePolicy {
            min_cells: 1,
            max_cells,
            lifetime,
            idle: lifetime,
            share: 1,
        }
    }

    /// The smallest lease size the adaptation goes down to (clamped to
    /// `1..=max_cells`). A single take can still be smaller, near the limit.
    pub const fn with_min(mut self, min_cells: u64) -> Self {
        self.min_cells = if min_cells == 0 {
            1
        } else if min_cells > self.max_cells {
            self.max_cells
        } else {
            min_cells
        };
        self
    }

    /// A lease not used for more than `idle` ticks lapses (its cells go
    /// back at the next call).
    pub const fn with_idle(mut self, idle: u64) -> Self {
        self.idle = lease_ticks(idle);
        self
    }

    /// One take claims at most `⌊room / share⌋` of the `room` cells the
    /// shared limiter holds (never less than the cost at hand). About the
    /// number of workers is a good value.
    pub const fn with_share(mut self, share: u64) -> Self {
        self.share = if share == 0 { 1 } else { share };
        self
    }

    /// The smallest target lease size.
    pub const fn min_cells(&self) -> u64 {
        self.min_cells
    }
    /// The largest lease, `k`.
    pub const fn max_cells(&self) -> u64 {
        self.max_cells
    }
    /// Ticks a lease may be spent after its take.
    pub const fn lifetime(&self) -> u64 {
        self.lifetime
    }
    /// Ticks a lease may sit unused.
    pub const fn idle(&self) -> u64 {
        self.idle
    }
    /// The divisor of the shared room for one take.
    pub const fn share(&self) -> u64 {
        self.share
    }
}

/// The local side of one lease: cells in hand, deadline, adaptive size and
/// the books. No atomics; shared by [`Leased`] and [`LeasedMeter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lot {
    /// Cells in hand.
    held: u64,
    /// Spendable while `now ≤ deadline` (`min(expires, last use + idle)`;
    /// both compared in serial order, see [`not_after`]).
    deadline: u64,
    /// The take's `now` plus `lifetime`.
    expires: u64,
    /// The `now` of the last take or denial (a drop gives back at it: a
    /// give-back at an earlier `now` leaves the same state as at a later
    /// one, or one that is full either way).
    last: u64,
    /// What the lease held right after its last take (for adaptation).
    granted: u64,
    /// Target lease size.
    size: u64,
    /// Cells charged by takes, and given back.
    taken: u64,
    returned: u64,
}

impl Lot {
    const fn new(policy: &LeasePolicy) -> Self {
        Lot {
            held: 0,
            deadline: 0,
            expires: 0,
            last: 0,
            granted: 0,
            size: policy.min_cells,
            taken: 0,
            returned: 0,
        }
    }

    /// The fast path: spends `cost` from the cells in hand if the lease is
    /// live at `now`.
    #[inline(always)]
    fn spend(&mut self, now: u64, cost: u64, policy: &LeasePolicy) -> bool {
        if cost <= self.held && not_after(now, self.deadline) {
            self.held -= cost;
            // The idle bound moves the deadline only when it is shorter than
            // the lifetime (a branch on the policy, the same every call).
            if policy.idle < policy.lifetime {
                let until = now.wrapping_add(policy.idle);
                self.deadline = if not_after(until, self.expires) {
                    until
                } else {
                    self.expires
                };
            }
            true
        } else {
            false
        }
    }

    /// The slow path: gives back a lapsed lease, adapts the size, takes
    /// what `cost` needs (topping up a live lease), and spends `cost`.
    /// `take` answers the cells taken or, on a denial, the error.
    #[cold]
    fn refill<E>(
        &mut self,
        policy: &LeasePolicy,
        now: u64,
        cost: u64,
        take: impl FnOnce(u64, u64, u64) -> Result<u64, E>,
        mut give_back: impl FnMut(u64),
    ) -> Result<(), E> {
        let used = self.granted - self.held.min(self.granted);
        let live = self.granted > 0 && not_after(now, self.deadline);
        if live {
            // Used up before the deadline: busy, lease more next time.
            self.size = self.size.saturating_mul(2).min(policy.max_cells);
        } else {
            // Lapsed: whatever is left goes back; lease about what was used.
            self.give_back_all(&mut give_back);
            self.granted = 0;
            if self.taken > 0 {
                self.size = used
                    .max(self.size / 2)
                    .clamp(policy.min_cells, policy.max_cells);
            }
        }
        let least = cost - self.held; // held < cost here
        let most = self.size.saturating_sub(self.held).max(least);
        let got = match take(least, most, policy.share) {
            Ok(got) => got,
            Err(e) => {
                // What is in hand is less than the cost and the shared
                // limiter has less than the rest. The cells in hand stay
                // (a smaller request may use them; giving them back and
                // taking them again would cost two swaps per denial).
                // The denial is not remembered: another worker may give
                // cells back before `wait` passes, and a handle cannot see
                // that without asking, so the next check asks again (the
                // shared limiter's answer is exact; a remembered denial
                // refused cells that were there, found by tests/lease_model.rs).
                if not_after(self.last, now) {
                    self.last = now;
                }
                return Err(e);
            }
        };
        self.taken += got;
        self.held += got;
        self.granted = self.held;
        self.expires = now.wrapping_add(policy.lifetime);
        self.last = now;
        self.held -= cost;
        let until = now.wrapping_add(policy.idle);
        self.deadline = if not_after(until, self.expires) {
            until
        } else {
            self.expires
        };
        Ok(())
    }

    fn give_back_all(&mut self, give_back: &mut impl FnMut(u64)) {
        if self.held > 0 {
            give_back(self.held);
            self.returned += self.held;
            self.held = 0;
        }
    }

    /// Gives back everything in hand.
    fn release(&mut self, mut give_back: impl FnMut(u64)) {
        self.give_back_all(&mut give_back);
        self.granted = 0;
        self.deadline = 0;
        self.expires = 0;
    }

    fn spent(&self) -> u64 {
        self.taken - self.returned - self.held
    }

    fn spendable(&self, now: u64) -> u64 {
        if not_after(now, self.deadline) {
            self.held
        } else {
            0
        }
    }
}

/// A worker's leased handle on a shared limiter: spends cells leased from
/// the shared `S` (a [`Gcra`], `&Gcra`, `Arc<Gcra>`) with no atomic
/// operation on its fast path. See the [module docs](self) for the policy
/// and the bound. Gives back what it holds when dropped (at the last `now`
/// it saw).
///
/// ```
/// use cellrate::lease::{LeasePolicy, Leased};
/// use cellrate::{Gcra, Quota};
/// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
/// let mut worker = Leased::new(&shared, LeasePolicy::new(4, 50));
/// assert!(worker.check(0).is_ok());
/// assert_eq!(worker.taken(), 1); // the first lease is the minimum size
/// worker.release(0);
/// assert_eq!(shared.peek(0).remaining(), 9);
/// ```
pub struct Leased<S: CellSource> {
    source: S,
    policy: LeasePolicy,
    lot: Lot,
}

impl<S: CellSource> Leased<S> {
    /// A handle holding nothing yet.
    pub const fn new(source: S, policy: LeasePolicy) -> Self {
        Leased {
            lot: Lot::new(&policy),
            source,
            policy,
        }
    }

    /// Admits one cell at `now`; see [`check_n`](Self::check_n).
    #[inline(always)]
    pub fn check(&mut self, now: u64) -> Result<(), Denied> {
        self.check_n(now, 1)
    }

    /// Admits `cost` cells at `now` from the lease in hand, taking a new
    /// lease (or topping this one up) from the shared limiter only when the
    /// cells in hand do not cover `cost` or the lease has lapsed. Denied
    /// when the shared limiter cannot provide the rest; a cost above the
    /// shared burst is [`Denied::CostTooLarge`]. A cost of 0 is always
    /// admitted and takes nothing.
    ///
    /// ```
    /// use cellrate::lease::{LeasePolicy, Leased};
    /// use cellrate::{Gcra, Quota};
    /// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
    /// let mut worker = Leased::new(&shared, LeasePolicy::new(8, 50));
    /// assert!(worker.check_n(0, 10).is_ok());
    /// assert!(worker.check_n(0, 1).is_err());
    /// assert!(worker.check_n(0, 11).unwrap_err().retry_after().is_none()); // can never fit
    /// ```
    #[inline(always)]
    pub fn check_n(&mut self, now: u64, cost: u64) -> Result<(), Denied> {
        if self.lot.spend(now, cost, &self.policy) {
            return Ok(());
        }
        self.refill(now, cost)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, now: u64, cost: u64) -> Result<(), Denied> {
        if cost == 0 {
            return Ok(());
        }
        let source = &self.source;
        self.lot.refill(
            &self.policy,
            now,
            cost,
            |least, most, share| source.take(now, least, most, share),
            |cells| source.give_back(now, cells),
        )
    }

    /// Gives back every cell in hand at `now` (the worker stops or pauses).
    /// The next check takes a new lease.
    pub fn release(&mut self, now: u64) {
        let source = &self.source;
        self.lot.release(|cells| source.give_back(now, cells));
    }

    /// Cells in hand (the handle's part of `H(t)` in the bound).
    pub fn held(&self) -> u64 {
        self.lot.held
    }
    /// Cells this handle could still spend at `now`: those in hand if its
    /// lease is live then, else 0 (a lapsed lease is given back at the next
    /// call, never spent).
    ///
    /// ```
    /// use cellrate::lease::{LeasePolicy, Leased};
    /// use cellrate::{Gcra, Quota};
    /// let shared = Gcra::new(Quota::per_second(100).with_burst(10).at_hz(1_000));
    /// let mut worker = Leased::new(&shared, LeasePolicy::new(4, 50).with_min(4));
    /// worker.check(0).unwrap();
    /// assert_eq!((worker.spendable(50), worker.spendable(51)), (3, 0));
    /// ```
    pub fn spendable(&self, now: u64) -> u64 {
        self.lot.spendable(now)
    }
    /// Cells this handle's takes charged to the shared limiter.
    pub fn taken(&self) -> u64 {
        self.lot.taken
    }
    /// Cells this handle gave back.
    pub fn returned(&self) -> u64 {
        self.lot.returned
    }
    /// Cells this handle admitted: `taken − returned − held`.
    pub fn spent(&self) -> u64 {
        self.lot.spent()
    }
    /// The size the next lease aims for (it adapts; see the module docs).
    pub fn lease_size(&self) -> u64 {
        self.lot.size
    }
    /// The policy.
    pub fn policy(&self) -> LeasePolicy {
        self.policy
    }
    /// The shared source.
    pub fn source(&self) -> &S {
        &self.source
    }
}

impl<S: CellSource> Drop for Leased<S> {
    fn drop(&mut self) {
        let (source, now) = (&self.source, self.lot.last);
        self.lot.release(|cells| source.give_back(now, cells));
    }
}

impl<S: CellSource> fmt::Debug for Leased<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leased")
            .field("held", &self.lot.held)
            .field("taken", &self.lot.taken)
            .field("returned", &self.lot.returned)
            .field("lease_size", &self.lot.size)
            .field("policy", &self.policy)
            .finish()
    }
}

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
/// Each bucket obeys the bound of the [module docs](self) on its own: the
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

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
