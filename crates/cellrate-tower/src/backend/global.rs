//! One limiter that every request shares ([`Global`]), and the GCRA that
//! can also shape ([`Shaper`]).

use cellrate::{Decision, Denied};
use cellrate::{Quota, RateLimiter};

use super::{Backend, Check, TierInfo, Verdict};
use crate::key::RequestKey;
use crate::BuildError;

/// One limiter that every request shares, whatever its key: any
/// [`RateLimiter`] (a [`Gcra`](cellrate::Gcra), a window, a tuple of tiers…),
/// described by one policy. With a [`Gcra`](cellrate::Gcra) it can also shape
/// (the layer's delaying mode).
///
/// ```
/// use cellrate_tower::Global;
/// use cellrate::window::FixedWindow;
/// // 1 000 requests per minute for the whole service, on a 1 kHz clock.
/// let all = Global::new("all", FixedWindow::new(1_000, 60_000), 1_000, 60_000, 1_000).unwrap();
/// # let _ = all;
/// ```
pub struct Global<L> {
    limiter: L,
    info: TierInfo,
}

impl<L: RateLimiter> Global<L> {
    /// `limiter`, announced as a policy of `limit` cells per `window_ticks`
    /// ticks of a clock of `hz` ticks per second.
    pub fn new(
        name: &str,
        limiter: L,
        limit: u64,
        window_ticks: u64,
        hz: u64,
    ) -> Result<Self, BuildError> {
        crate::error::check_name(name)?;
        if hz == 0 {
            return Err(BuildError::MixedHz);
        }
        Ok(Global {
            limiter,
            info: TierInfo {
                name: name.to_string(),
                limit,
                window_ticks,
                hz,
                rate: None,
            },
        })
    }
    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }
}

impl Global<cellrate::Gcra> {
    /// A shared GCRA, announced exactly by its quota.
    ///
    /// ```
    /// use cellrate_tower::Global;
    /// use cellrate::Quota;
    /// let g = Global::gcra("all", Quota::per_second(5).at_hz(1_000)).unwrap();
    /// # let _ = g;
    /// ```
    pub fn gcra(name: &str, quota: Quota) -> Result<Self, BuildError> {
        crate::error::check_name(name)?;
        Ok(Global {
            limiter: cellrate::Gcra::new(quota),
            info: TierInfo::from_quota(name, &quota),
        })
    }
}

impl<L: RateLimiter + Send + Sync + 'static> Backend for Global<L> {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        std::vec![self.info.clone()]
    }
    fn check(&self, _key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future> {
        Check::Ready(Verdict::single(self.limiter.check_n(now, cost)))
    }
}

/// One GCRA that every request shares, which can also *shape*: in the
/// layer's delaying mode ([`RateLimitBuilder::delay`](crate::RateLimitBuilder::delay))
/// a request over the rate is held until its turn
/// ([`Gcra::reserve_n`](cellrate::Gcra::reserve_n)), in arrival order, instead
/// of refused. In the default mode it limits like [`Global`].
///
/// ```
/// use cellrate_tower::Shaper;
/// use cellrate::Quota;
/// let upstream = Shaper::new("upstream", Quota::per_second(50).at_hz(1_000)).unwrap();
/// # let _ = upstream;
/// ```
pub struct Shaper {
    global: Global<cellrate::Gcra>,
}

impl Shaper {
    /// A shaper at `quota`.
    pub fn new(name: &str, quota: Quota) -> Result<Self, BuildError> {
        Global::gcra(name, quota).map(|global| Shaper { global })
    }
    /// The limiter.
    pub fn gcra(&self) -> &cellrate::Gcra {
        self.global.limiter()
    }
    /// A refusal of the delaying mode as seen from the end of its queue,
    /// `max_wait` ticks ahead: the wait is past `max_wait` there, so the
    /// limiter refuses `cost` at `now + max_wait` too (its debt only grows),
    /// and that denial is exact: its `retry_after` is how much later a
    /// retry would be held at most `max_wait`, its `reset_after` the debt
    /// left beyond the queue (at most the burst's span, so `t ≤ w`).
    fn queue_edge(&self, now: u64, cost: u64, max_wait: u64, denied: Denied) -> Denied {
        if max_wait == 0 || denied.retry_after().is_none() {
            return denied;
        }
        let edge = now.wrapping_add(max_wait);
        match self.gcra().check_n(edge, cost) {
            Err(at_edge) => at_edge,
            Ok(_) => {
                // Only a quota raised meanwhile can admit there: give the
                // cells back and keep the first answer.
                self.gcra().refund_n(edge, cost);
                denied
            }
        }
    }
}

impl Backend for Shaper {
    type Future = core::future::Ready<Verdict>;
    fn tiers(&self) -> Vec<TierInfo> {
        self.global.tiers()
    }
    fn check(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future> {
        self.global.check(key, now, cost)
    }
    fn reserve(
        &self,
        _key: &RequestKey<'_>,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Result<(u64, Verdict), Verdict>> {
        Some(match self.gcra().reserve_n(now, cost, max_wait) {
            Ok(r) => {
                // The response leaves when the hold ends: the fields describe
                // the limiter then (the booked cells spent, the debt less the
                // wait), so `t` never exceeds the policy's `w`.
                let wait = r.send_after();
                let decision = if wait == 0 {
                    Decision::new(r.limit(), r.remaining(), r.reset_after())
                } else {
                    Decision::new(r.limit(), 0, r.reset_after().saturating_sub(wait))
                };
                Ok((wait, Verdict::single(Ok(decision))))
            }
            Err(d) => Err(Verdict::single(
                Err(self.queue_edge(now, cost, max_wait, d)),
            )),
        })
    }
}
