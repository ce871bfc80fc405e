//! What decides: in-process keyed tiers, one shared limiter, or Redis.

use std::future::Future;

use cellrate::compose::Tiers;
use cellrate::Quota;
use cellrate::{Decision, Denied};
use cellrate_headers::Policy;

#[cfg(feature = "redis")]
use super::key::Part;
use super::key::RequestKey;

mod buckets;
mod global;
pub(crate) mod keyed;
mod log;
mod overrides;
mod routes;
mod store;
mod tier;
mod window;

pub use global::{Global, Shaper};
pub use keyed::KeyedTiers;

/// What a keyed tier is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Client,
    ClientAndEndpoint,
}

/// The most tiers a backend may have (the Redis policy's limit too).
pub const MAX_TIERS: usize = 8;

/// How a verdict was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// By the backend's own policy.
    Normal,
    /// By the Redis backend's local fallback quotas (Redis unreachable).
    Fallback,
    /// Admitted because Redis was unreachable and the policy fails open.
    FailOpen,
    /// Refused because Redis was unreachable and the policy fails closed.
    FailClosed,
}

/// One request's answer: every tier's result, in the backend's tier order
/// (the core's [`Tiers`]), how it was reached, or why the backend could not
/// decide.
///
/// ```
/// use cellrate_tower::{Mode, Verdict};
/// use cellrate::compose::Tiers;
/// use cellrate::Decision;
/// let v = Verdict::decided(Tiers::from_slice(&[Ok(Decision::new(5, 4, 200))]).unwrap(), Mode::Normal);
/// assert!(v.is_admitted());
/// assert_eq!(v.tiers().results().len(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    tiers: Tiers<MAX_TIERS>,
    mode: Mode,
    fault: Option<Fault>,
    /// Per tier, `slot + 1` of the override that decided it, or 0.
    overrides: [u16; MAX_TIERS],
}

/// Why a backend could not decide (answered without internal detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// The key cannot be stored by the backend (400).
    InvalidKey,
    /// A misconfiguration or an internal failure (500).
    Internal,
}

impl Verdict {
    /// A verdict of these tiers' results.
    pub const fn decided(tiers: Tiers<MAX_TIERS>, mode: Mode) -> Self {
        Verdict {
            tiers,
            mode,
            fault: None,
            overrides: [0; MAX_TIERS],
        }
    }
    /// The verdict of one tier.
    pub(crate) fn single(result: Result<Decision, Denied>) -> Self {
        Verdict::decided(
            Tiers::from_slice(&[result]).unwrap_or_default(),
            Mode::Normal,
        )
    }
    /// A backend that could not decide.
    pub fn fault(fault: Fault) -> Self {
        Verdict {
            tiers: Tiers::default(),
            mode: Mode::Normal,
            fault: Some(fault),
            overrides: [0; MAX_TIERS],
        }
    }
    /// This verdict, its tier `tier` (an index into its results) decided
    /// by the quota of that tier's override slot `slot` (see
    /// [`Backend::override_slots`]): the fields then announce that quota.
    /// A slot past [`u16::MAX`] − 1 or a tier past the results is ignored.
    ///
    /// ```
    /// use cellrate_tower::{Mode, Verdict};
    /// use cellrate::compose::Tiers;
    /// use cellrate::Decision;
    /// let v = Verdict::decided(Tiers::from_slice(&[Ok(Decision::new(500, 499, 120))]).unwrap(), Mode::Normal);
    /// assert_eq!(v.override_slot(0), None);
    /// assert_eq!(v.with_override(0, 3).override_slot(0), Some(3));
    /// ```
    pub fn with_override(mut self, tier: usize, slot: usize) -> Self {
        if let (Some(mark), Ok(slot)) = (self.overrides.get_mut(tier), u16::try_from(slot)) {
            if tier < self.tiers.results().len() && slot < u16::MAX {
                *mark = slot + 1;
            }
        }
        self
    }
    /// The override slot whose quota decided tier `tier`, if an override did.
    pub fn override_slot(&self, tier: usize) -> Option<usize> {
        match self.overrides.get(tier) {
            Some(&mark) if mark > 0 => Some(usize::from(mark - 1)),
            _ => None,
        }
    }
    /// Whether an override decided some tier.
    pub(crate) fn is_overridden(&self) -> bool {
        self.overrides != [0; MAX_TIERS]
    }
    /// Every tier's result.
    pub const fn tiers(&self) -> &Tiers<MAX_TIERS> {
        &self.tiers
    }
    /// Whether every tier admitted (and the backend could decide).
    pub fn is_admitted(&self) -> bool {
        self.fault.is_none() && self.tiers.is_admitted()
    }
    /// How it was reached.
    pub const fn mode(&self) -> Mode {
        self.mode
    }
    /// Why the backend could not decide, if it could not.
    pub const fn fault_kind(&self) -> Option<Fault> {
        self.fault
    }
}

/// A backend's answer: now, or a future for backends that wait on I/O.
// The verdict is returned by value on every request; boxing it to even out
// the variants would allocate per request.
#[allow(clippy::large_enum_variant)]
pub enum Check<F> {
    /// Decided without waiting.
    Ready(Verdict),
    /// Decided when the future resolves.
    Pending(F),
}

/// One tier as the `RateLimit-Policy` field describes it.
///
/// ```
/// use cellrate_tower::TierInfo;
/// use cellrate::Quota;
/// let t = TierInfo::from_quota("api", &Quota::per_minute(10).at_hz(1_000));
/// assert_eq!((t.limit, t.window_ticks, t.hz), (10, 60_000, 1_000));
/// assert_eq!(t.rate, None); // 10 per 60 s is the rate too
/// let t = TierInfo::from_quota("api", &Quota::per_second(50).with_burst(10).at_hz(1_000));
/// assert_eq!(t.rate, Some((50, 1_000))); // announced as "api/rate";q=50;w=1
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierInfo {
    /// The policy name.
    pub name: String,
    /// `q`: cells per window.
    pub limit: u64,
    /// `w`, in ticks of `hz`.
    pub window_ticks: u64,
    /// Ticks per second of `window_ticks` and of the tier's results.
    pub hz: u64,
    /// The rate policy announced beside the burst one, `(q, w)` with `w` in
    /// ticks of `hz` (see [`headers::sustained`](cellrate_headers::sustained)),
    /// or `None` when `limit` per `window_ticks` is the rate.
    pub rate: Option<(u64, u64)>,
}

impl TierInfo {
    /// The tier of a GCRA quota (see [`Policy::from_quota`]).
    pub fn from_quota(name: &str, quota: &Quota) -> Self {
        let p = Policy::from_quota(name, quota);
        TierInfo {
            name: name.to_string(),
            limit: p.limit(),
            window_ticks: p.window_ticks(),
            hz: quota.hz(),
            rate: cellrate_headers::sustained(quota)
                .map(|(q, secs)| (q, secs.saturating_mul(quota.hz()))),
        }
    }
}

/// What the layer asks to decide. Implemented by [`KeyedTiers`],
/// [`Global`], and (feature `redis`) [`RedisBlocking`](super::RedisBlocking)
/// and [`RedisAsync`](super::RedisAsync).
pub trait Backend: Send + Sync + 'static {
    /// The future of a pending check (in-process backends never return one).
    type Future: Future<Output = Verdict> + Send + 'static;
    /// The tiers, in the order of every verdict's results. All share one
    /// `hz` (the layer checks).
    fn tiers(&self) -> Vec<TierInfo>;
    /// The tiers that decide in [`Mode::Fallback`], when the backend has
    /// such a mode.
    fn fallback_tiers(&self) -> Option<Vec<TierInfo>> {
        None
    }
    /// The lists of tiers a request may be decided by, when the tiers that
    /// apply depend on the request (tiers limited to some routes): group
    /// `g`'s verdicts have one result per tier of `groups()[g]`, in its
    /// order. One group, [`tiers`](Self::tiers), for a backend whose every
    /// tier decides every request.
    fn groups(&self) -> Vec<Vec<TierInfo>> {
        std::vec![self.tiers()]
    }
    /// Each tier's override slots, in the order of [`tiers`](Self::tiers):
    /// the quota each slot gives its client (`None`: a free slot), which a
    /// verdict that names the slot ([`Verdict::with_override`]) is
    /// announced with. None for a backend without per-client quotas.
    fn override_slots(&self) -> Vec<Vec<Option<TierInfo>>> {
        Vec::new()
    }
    /// The group of [`groups`](Self::groups) that decides `key`.
    fn group(&self, key: &RequestKey<'_>) -> usize {
        let _ = key;
        0
    }
    /// Decides `cost` cells for `key` at `now` (ticks of the layer's clock;
    /// a backend with its own clock, like Redis, ignores it).
    fn check(&self, key: &RequestKey<'_>, now: u64, cost: u64) -> Check<Self::Future>;
    /// For the delaying mode: books `cost` cells at the earliest time within
    /// `max_wait` ticks and returns the wait, or the refusal. `None`: this
    /// backend cannot shape.
    fn reserve(
        &self,
        key: &RequestKey<'_>,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Result<(u64, Verdict), Verdict>> {
        let _ = (key, now, cost, max_wait);
        None
    }
    /// Registers the backend's own series (feature `metrics`), labelled
    /// `limiter`: called once, by [`RateLimitBuilder::build`](super::RateLimitBuilder::build).
    /// [`KeyedTiers`] registers its tables' `cellrate_keyed_*` series and
    /// the Redis backends their `cellrate_redis_*` ones (see
    /// `cellrate-metrics`); a backend with nothing of its own to
    /// report keeps this default, and the layer still counts its decisions.
    #[cfg(feature = "metrics")]
    fn register_metrics(&mut self, limiter: &str) {
        let _ = limiter;
    }
}

/// The text of a key part for the Redis key layout, which reserves `{`
/// and `}` (the Cluster hash tag): they are written `%7B` and `%7D`, and
/// `%` itself `%25`, so distinct parts stay distinct (`/orders/{id}` is
/// `/orders/%7Bid%7D`).
#[cfg(feature = "redis")]
pub(crate) fn owned(part: Part<'_>) -> String {
    let mut buf = super::KeyText::new();
    let text = part.as_str(&mut buf);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}
