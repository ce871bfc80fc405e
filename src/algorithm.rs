//! A limiter as a pure function of one `u64` state word.
//!
//! Every algorithm in the crate keeps one client's state in one `u64` and
//! shares its parameters (a [`Quota`], a window length…) between many such
//! words. [`Algorithm`] is that split: the parameters implement it, and the
//! containers (keyed tables, [`LocalGcra`](crate::LocalGcra), the Redis
//! fallback, …) own the words and apply the steps with a compare-and-swap or
//! inside a critical section. [`Gcra`](crate::Gcra) runs the same GCRA step
//! through its own inlined path (see the [`gcra`](crate::gcra#the-math) module); the tests check
//! that both decide alike, number for number.
//!
//! # Contract
//!
//! * [`NEW`](Algorithm::NEW) is the state of a client never seen: full quota.
//! * [`check`](Algorithm::check) with `cost > 0` either admits and returns the
//!   state to store, or denies and the caller stores nothing. With `cost == 0`
//!   it returns the state unchanged (a peek).
//! * [`is_idle`](Algorithm::is_idle) is true only when the state is
//!   indistinguishable from `NEW` at `now` and at every later time: a table may
//!   then reuse the slot without giving the client anything back.
//! * None of these panic, allocate or divide on the admit/deny path.
//! * Every method is total over any `u64` state, including a word the
//!   parameters did not write (say, saved under another limit without
//!   `translate`): it never panics and never admits more than the quota
//!   from it. GCRA reads any word as a TAT; the window quotas judge a count
//!   above their limit as a full window, which the next window clears.

use crate::gcra;
use crate::{Decision, Denied, Quota, Snapshot};

/// The steps of a one-word rate limiter; see the [module docs](self).
///
/// ```
/// use cellrate::{Algorithm, Quota};
/// let quota = Quota::per_second(2).at_hz(1_000);
/// let (state, d) = quota.check(Quota::NEW, 0, 1).unwrap();
/// assert_eq!(d.remaining(), 1);
/// assert!(!quota.is_idle(state, 0));
/// assert!(quota.is_idle(state, 500));
/// ```
pub trait Algorithm {
    /// The state of a client never seen.
    const NEW: u64 = 0;

    /// Admits `cost` cells at `now` given `state`: the new state and the
    /// decision, or the denial (store nothing).
    fn check(&self, state: u64, now: u64, cost: u64) -> Result<(u64, Decision), Denied>;

    /// The state at `now`, consuming nothing.
    fn peek(&self, state: u64, now: u64) -> Snapshot;

    /// Whether `state` is, at `now` and ever after, the same as [`NEW`](Self::NEW).
    fn is_idle(&self, state: u64, now: u64) -> bool;
}

impl Algorithm for Quota {
    #[inline(always)]
    fn check(&self, state: u64, now: u64, cost: u64) -> Result<(u64, Decision), Denied> {
        let now = self.sub_ticks(now);
        if cost == 0 {
            return Ok((state, gcra::snapshot(self, state, now).to_decision()));
        }
        gcra::admit(self, state, now, cost)
    }

    fn peek(&self, state: u64, now: u64) -> Snapshot {
        gcra::snapshot(self, state, self.sub_ticks(now))
    }

    #[inline]
    fn is_idle(&self, state: u64, now: u64) -> bool {
        state <= self.sub_ticks(now)
    }
}
