//! The local side of one lease, shared by both handles.

use super::{not_after, LeasePolicy};

/// The local side of one lease: cells in hand, deadline, adaptive size and
/// the books. No atomics; shared by [`Leased`] and [`LeasedMeter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Lot {
    /// Cells in hand.
    pub(super) held: u64,
    /// Spendable while `now ≤ deadline` (`min(expires, last use + idle)`;
    /// both compared in serial order, see [`not_after`]).
    pub(super) deadline: u64,
    /// The take's `now` plus `lifetime`.
    pub(super) expires: u64,
    /// The `now` of the last take or denial (a drop gives back at it: a
    /// give-back at an earlier `now` leaves the same state as at a later
    /// one, or one that is full either way).
    pub(super) last: u64,
    /// What the lease held right after its last take (for adaptation).
    pub(super) granted: u64,
    /// Target lease size.
    pub(super) size: u64,
    /// Cells charged by takes, and given back.
    pub(super) taken: u64,
    pub(super) returned: u64,
}

impl Lot {
    pub(super) const fn new(policy: &LeasePolicy) -> Self {
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
    pub(super) fn spend(&mut self, now: u64, cost: u64, policy: &LeasePolicy) -> bool {
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
    pub(super) fn refill<E>(
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

    pub(super) fn give_back_all(&mut self, give_back: &mut impl FnMut(u64)) {
        if self.held > 0 {
            give_back(self.held);
            self.returned += self.held;
            self.held = 0;
        }
    }

    /// Gives back everything in hand.
    pub(super) fn release(&mut self, mut give_back: impl FnMut(u64)) {
        self.give_back_all(&mut give_back);
        self.granted = 0;
        self.deadline = 0;
        self.expires = 0;
    }

    pub(super) fn spent(&self) -> u64 {
        self.taken - self.returned - self.held
    }

    pub(super) fn spendable(&self, now: u64) -> u64 {
        if not_after(now, self.deadline) {
            self.held
        } else {
            0
        }
    }
}
