//! Leases: one limit shared by many workers (threads, cores, tasks) that
//! scales with them.
//!
//! A [`Leased`] handle **takes `g` cells from a shared [`Gcra`] in one
//! compare-and-swap and spends them locally**, with no atomic operation on
//! its fast path. What it has not spent goes back ([`Gcra::refund_n`]) when
//! the lease lapses (older than the policy's `lifetime`, or idle longer than
//! the lease lapses (older than the policy's `lifetime`, or idle longer than
//! `idle`), on [`release`](Leased::release), and on drop. [`LeasedMeter`]
//! does the same for the packet meters' buckets. Handles are plain values
//! (no allocation, no thread-local, no clock); deadlines are serial, so any
//! clock works.
//!
//! # Lease size and denials
//!
//! A handle's target size starts at [`min_cells`](LeasePolicy::with_min),
//! doubles when a lease is used up before its deadline and falls to what was
//! used when one lapses, never above [`max_cells`](LeasePolicy::new). One
//! take is at most `⌊room / share⌋` of the shared room (never less than the
//! cost at hand), so near the limit leases shrink to the cost. A handle is
//! denied when its cells and the shared room together fall short; it keeps
//! its cells.
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
//!   [`reset`](Gcra::reset) inside the interval adds `b`; across a
//!   [`set_quota`](Gcra::set_quota), see docs/design/reconfigure.md.
//! * **Stalls**: a worker that stops holding `h ≤ k` cells costs the others at
//!   most those `h` cells, once; their sustained rate is never lower.
//!
//! The proofs and the stall analysis are in docs/design/lease.md.
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

use crate::decision::Denied;
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
#[non_exhaustive]
pub struct LeasePolicy {
    min_cells: u64,
    max_cells: u64,
    lifetime: u64,
    idle: u64,
    share: u64,
}

/// The longest `lifetime` and `idle` a [`LeasePolicy`] keeps: 2⁶² ticks
/// (146 years at 1 GHz), so that serial comparison of deadlines is exact.
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

    /// One take claims at most `⌊room / share⌋` of the shared room (never
    /// less than the cost at hand); about the number of workers.
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

mod handle;
mod lot;
mod meter;

pub use self::handle::Leased;
use self::lot::Lot;
pub use self::meter::{LeasableMeter, LeasedMeter};

#[cfg(all(test, feature = "loom"))]
mod loom_tests;
