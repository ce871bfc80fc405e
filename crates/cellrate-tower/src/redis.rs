//! The Redis clients as layer backends (features `tower` and `redis`), and
//! the failure-mode counters and events.
//!
//! # Failure mode
//!
//! Each verdict carries where it came from ([`Mode`]). A backend counts the
//! transitions between deciding on Redis and deciding without it (fallback,
//! fail-open or fail-closed): [`FallbackCounters`] holds them for a metrics
//! exporter, and with the `tracing` feature each transition is an event
//! (target `cellrate::tower`: `warn` on entering, `info` on leaving). Under
//! concurrency the first verdict of the new mode reports the transition,
//! exactly once per transition.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cellrate_redis::{
    AsyncRedisGcra, Error, FailurePolicy, Outcome, RedisGcra, RedisPolicy, Source,
};

use super::backend::{owned, Backend, Check, Fault, Mode, TierInfo, Verdict};
use super::key::RequestKey;

/// Transitions into and out of the failure mode, and the verdicts given in
/// it; shared by a backend and whoever exports them.
///
/// ```
/// use cellrate_tower::FallbackCounters;
/// let c = FallbackCounters::default();
/// assert_eq!(c.stats().entered, 0);
/// assert!(!c.stats().degraded);
/// ```
#[derive(Debug, Default)]
pub struct FallbackCounters {
    degraded: AtomicBool,
    entered: AtomicU64,
    left: AtomicU64,
    degraded_verdicts: AtomicU64,
    /// The backend's `cellrate_redis_*` series, once registered.
    #[cfg(feature = "metrics")]
    metrics: std::sync::OnceLock<crate::metrics::redis::RedisMetrics>,
}

/// A reading of [`FallbackCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FallbackStats {
    /// Whether the last verdict was given without Redis.
    pub degraded: bool,
    /// Times the backend went from Redis to its failure policy.
    pub entered: u64,
    /// Times it came back to Redis.
    pub left: u64,
    /// Verdicts given by the failure policy.
    pub degraded_verdicts: u64,
}

impl FallbackCounters {
    /// The counters now.
    pub fn stats(&self) -> FallbackStats {
        FallbackStats {
            degraded: self.degraded.load(Ordering::Acquire),
            entered: self.entered.load(Ordering::Relaxed),
            left: self.left.load(Ordering::Relaxed),
            degraded_verdicts: self.degraded_verdicts.load(Ordering::Relaxed),
        }
    }

    /// Records one verdict's source, reporting a transition once.
    fn record(&self, source: Source) {
        let degraded = matches!(
            source,
            Source::Fallback | Source::FailOpen | Source::FailClosed
        );
        if degraded {
            self.degraded_verdicts.fetch_add(1, Ordering::Relaxed);
        }
        if self.degraded.swap(degraded, Ordering::AcqRel) != degraded {
            #[cfg(feature = "metrics")]
            if let Some(m) = self.metrics.get() {
                m.transition(degraded);
            }
            if degraded {
                self.entered.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "tracing")]
                tracing::warn!(target: "cellrate::tower", source = ?source, "rate limiter lost Redis: deciding by its failure policy");
            } else {
                self.left.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "tracing")]
                tracing::info!(target: "cellrate::tower", "rate limiter reached Redis again");
            }
        }
    }
}

fn verdict(counters: &FallbackCounters, result: Result<Outcome, Error>) -> Verdict {
    match result {
        Ok(outcome) => {
            counters.record(outcome.source());
            let mode = match outcome.source() {
                Source::Fallback => Mode::Fallback,
                Source::FailOpen => Mode::FailOpen,
                Source::FailClosed => Mode::FailClosed,
                // Redis itself, a lease, or a source added later.
                _ => Mode::Normal,
            };
            Verdict::decided(*outcome.tiers(), mode)
        }
        Err(Error::InvalidKey) => Verdict::fault(Fault::InvalidKey),
        Err(_) => Verdict::fault(Fault::Internal),
    }
}

fn tiers_of(policy: &RedisPolicy) -> Vec<TierInfo> {
    policy
        .tiers()
        .iter()
        .map(|t| TierInfo::from_quota(t.name(), &t.quota()))
        .collect()
}

/// The fallback quotas as the client applies them: named after the tiers,
/// re-expressed on the Redis clock (µs, with the tier's sub-µs scale)
/// exactly as the client's fallback table re-expresses them, so `q` and `w`
/// are those of the limiter that decides.
fn fallback_of(policy: &RedisPolicy, failure: &FailurePolicy) -> Option<Vec<TierInfo>> {
    let FailurePolicy::Fallback(quotas) = failure else {
        return None;
    };
    policy
        .tiers()
        .iter()
        .zip(quotas)
        .map(|(t, q)| {
            cellrate_redis::on_server_clock(*q)
                .ok()
                .map(|(applied, _)| TierInfo::from_quota(t.name(), &applied))
        })
        .collect()
}

/// What a configuration makes of a Redis layer's rules.
#[cfg(feature = "serde")]
pub(super) struct RedisPlan {
    /// Every tier, at its default quota.
    pub(super) policy: cellrate_redis::RedisPolicy,
    pub(super) failure: cellrate_redis::FailurePolicy,
    /// By client key (as the backend reads it from a request), the policy
    /// with that client's overrides, and its `(tier, slot)`s.
    pub(super) overrides: Vec<OwnPlan>,
    /// Each tier's override slots.
    pub(super) slots: Vec<Vec<Option<TierInfo>>>,
}

/// A client's key, its policy with its overrides, and its `(tier, slot)`s.
#[cfg(feature = "serde")]
pub(super) type OwnPlan = (String, cellrate_redis::RedisPolicy, Vec<(usize, usize)>);

type Pending = Pin<Box<dyn Future<Output = Verdict> + Send>>;

/// A Redis client a [`RedisBackend`] can drive: the blocking [`RedisGcra`]
/// (each check on tokio's blocking pool, `spawn_blocking`, never on the
/// runtime's worker threads) or the async [`AsyncRedisGcra`] (checks
/// coalesced into shared script calls). Sealed: implemented for these two
/// only.
pub trait RedisClient: sealed::Client {}

impl RedisClient for RedisGcra {}
impl RedisClient for AsyncRedisGcra {}

mod sealed {
    use super::*;

    /// What a backend needs of a client (not nameable outside the crate).
    pub trait Client: Send + Sync + 'static {
        /// The client's policy and failure policy.
        fn parts(&self) -> (&RedisPolicy, &FailurePolicy);
        /// Registers its fallback tables' series (feature `metrics`).
        #[cfg(feature = "metrics")]
        fn register_fallback(&self, limiter: &str);
        /// The client for `policy` over this one's connection.
        #[cfg_attr(not(feature = "serde"), allow(dead_code))]
        fn with_policy(&self, policy: RedisPolicy, failure: FailurePolicy) -> Result<Self, Error>
        where
            Self: Sized;
        /// One check of `cost` for `client` (and `scope`), with the failure
        /// policy applied, as a verdict recorded in `counters`.
        fn verdict(
            self: Arc<Self>,
            client: String,
            scope: Option<String>,
            cost: u64,
            counters: Arc<FallbackCounters>,
        ) -> Pending;
    }

    /// One check, timed into the backend's series (feature `metrics`) and
    /// settled by the failure policy, as a verdict recorded in `counters`;
    /// `$($await)*` is `.await` for the async client, nothing for the
    /// blocking one.
    macro_rules! check {
        ($limiter:ident, $client:ident, $scope:ident, $cost:ident, $counters:ident $($await:tt)*) => {{
            let scope = $scope.as_deref();
            #[cfg(not(feature = "metrics"))]
            let result = $limiter.check_n(&$client, scope, $cost)$($await)*;
            #[cfg(feature = "metrics")]
            let result = {
                let start = $counters.metrics.get().map(|m| (m, std::time::Instant::now()));
                let tried = $limiter.try_check_n(&$client, scope, $cost)$($await)*;
                if let Some((m, start)) = start {
                    m.call(&tried, start.elapsed());
                }
                $limiter.settle(tried, &$client, scope, $cost)
            };
            verdict(&$counters, result)
        }};
    }

    /// The client methods both clients share; `$pending` makes the check's
    /// future from `$limiter` (the `Arc` of the client) and the check's
    /// arguments.
    macro_rules! client {
        ($ty:ty, |$limiter:ident, $client:ident, $scope:ident, $cost:ident, $counters:ident| $pending:expr) => {
            impl Client for $ty {
                fn parts(&self) -> (&RedisPolicy, &FailurePolicy) {
                    (self.policy(), self.config().failure())
                }
                fn with_policy(
                    &self,
                    policy: RedisPolicy,
                    failure: FailurePolicy,
                ) -> Result<Self, Error> {
                    <$ty>::with_policy(self, policy, failure)
                }
                #[cfg(feature = "metrics")]
                fn register_fallback(&self, limiter: &str) {
                    self.register_fallback_metrics(limiter);
                }
                fn verdict(
                    self: Arc<Self>,
                    $client: String,
                    $scope: Option<String>,
                    $cost: u64,
                    $counters: Arc<FallbackCounters>,
                ) -> Pending {
                    let $limiter = self;
                    Box::pin($pending)
                }
            }
        };
    }

    client!(
        RedisGcra,
        |limiter, client, scope, cost, counters| async move {
            let joined =
                tokio::task::spawn_blocking(move || check!(limiter, client, scope, cost, counters))
                    .await;
            joined.unwrap_or(Verdict::fault(Fault::Internal))
        }
    );
    client!(
        AsyncRedisGcra,
        |limiter, client, scope, cost, counters| async move {
            check!(limiter, client, scope, cost, counters.await)
        }
    );
}

/// A Redis client as a layer backend: [`RedisBlocking`] or [`RedisAsync`].
/// The key is the request's client; the endpoint, if any, is the scope of
/// the policy's per-scope tiers. Needs a tokio runtime.
pub struct RedisBackend<L: RedisClient> {
    limiter: Arc<L>,
    /// The clients with quotas of their own (a configuration's overrides),
    /// by client key: a limiter each, over the same connection and
    /// fallback tables, for the same keys on the server, and its slot in
    /// each tier it overrides.
    overrides: HashMap<String, Own<L>>,
    /// Each tier's override slots.
    slots: Vec<Vec<Option<TierInfo>>>,
    counters: Arc<FallbackCounters>,
}

/// A client with quotas of its own: its limiter, and per tier `slot + 1`
/// of its override there (0: the tier's own quota).
struct Own<L> {
    limiter: Arc<L>,
    slots: [u16; super::MAX_TIERS],
}

/// `verdict` with the tiers of the client's overrides marked (`slots`),
/// when Redis decided it (in its failure mode the tiers' fallback quotas
/// decide every client).
fn own_verdict(verdict: Verdict, slots: &[u16; super::MAX_TIERS]) -> Verdict {
    if verdict.mode() != Mode::Normal || verdict.fault_kind().is_some() {
        return verdict;
    }
    let mut verdict = verdict;
    for (tier, &mark) in slots.iter().enumerate() {
        if mark > 0 {
            verdict = verdict.with_override(tier, usize::from(mark - 1));
        }
    }
    verdict
}

/// The blocking [`RedisGcra`] as a backend: each check runs on tokio's
/// blocking pool (`spawn_blocking`), never on the runtime's worker threads.
///
/// ```no_run
/// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
/// use cellrate_tower::RedisBlocking;
/// use cellrate::Quota;
/// let rl = RedisGcra::new(
///     Target::standalone("redis://127.0.0.1/").unwrap(),
///     RedisPolicy::single("rl", "api", Quota::per_minute(10).at_hz(1_000)).unwrap(),
///     RedisConfig::new(FailurePolicy::Closed),
/// ).unwrap();
/// let backend = RedisBlocking::new(rl);
/// # let _ = backend;
/// ```
pub type RedisBlocking = RedisBackend<RedisGcra>;

/// The async [`AsyncRedisGcra`] as a backend (checks coalesced into shared
/// script calls; see its docs).
///
/// ```no_run
/// use cellrate_redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
/// use cellrate_tower::RedisAsync;
/// use cellrate::Quota;
/// let rl = AsyncRedisGcra::new(
///     Target::standalone("redis://127.0.0.1/").unwrap(),
///     RedisPolicy::single("rl", "api", Quota::per_minute(10).at_hz(1_000)).unwrap(),
///     RedisConfig::new(FailurePolicy::Open),
/// ).unwrap();
/// let backend = RedisAsync::new(rl);
/// let counters = backend.counters(); // what the failure mode decided, for metrics
/// # let _ = (backend, counters);
/// ```
pub type RedisAsync = RedisBackend<AsyncRedisGcra>;

impl<L: RedisClient> RedisBackend<L> {
    /// A backend over `limiter`.
    pub fn new(limiter: L) -> Self {
        RedisBackend {
            limiter: Arc::new(limiter),
            overrides: HashMap::new(),
            slots: Vec::new(),
            counters: Arc::default(),
        }
    }

    /// This backend under `plan` (a reload): the same connection, failure
    /// counters and (for the tiers kept) fallback tables; see
    /// [`AsyncRedisGcra::with_policy`].
    #[cfg(feature = "serde")]
    pub(super) fn reconfigured(&self, plan: RedisPlan) -> Result<Self, Error> {
        let limiter = Arc::new(
            self.limiter
                .with_policy(plan.policy, plan.failure.clone())?,
        );
        let mut overrides = HashMap::with_capacity(plan.overrides.len());
        for (client, policy, marks) in plan.overrides {
            let own = limiter.with_policy(policy, plan.failure.clone())?;
            let mut slots = [0; super::MAX_TIERS];
            for (tier, slot) in marks {
                if let (Some(mark), Ok(slot)) = (slots.get_mut(tier), u16::try_from(slot + 1)) {
                    *mark = slot;
                }
            }
            let limiter = Arc::new(own);
            overrides.insert(client, Own { limiter, slots });
        }
        Ok(RedisBackend {
            limiter,
            overrides,
            slots: plan.slots,
            counters: Arc::clone(&self.counters),
        })
    }
    /// Registers the series of its fallback tables that have none yet
    /// (those a reload made).
    #[cfg(feature = "metrics")]
    pub(super) fn register_fallback_metrics(&self, limiter: &str) {
        // The override limiters share the main one's tables.
        self.limiter.register_fallback(limiter);
    }
    /// The failure-mode counters (keep the `Arc` to export them).
    pub fn counters(&self) -> Arc<FallbackCounters> {
        Arc::clone(&self.counters)
    }
}

impl<L: RedisClient> Backend for RedisBackend<L> {
    type Future = Pending;
    fn tiers(&self) -> Vec<TierInfo> {
        tiers_of(self.limiter.parts().0)
    }
    fn fallback_tiers(&self) -> Option<Vec<TierInfo>> {
        let (policy, failure) = self.limiter.parts();
        fallback_of(policy, failure)
    }
    fn check(&self, key: &RequestKey<'_>, _now: u64, cost: u64) -> Check<Pending> {
        let client: String = owned(key.client());
        let scope: Option<String> = key.scope().map(owned);
        let counters = Arc::clone(&self.counters);
        match self.overrides.get(&client) {
            None => {
                Check::Pending(Arc::clone(&self.limiter).verdict(client, scope, cost, counters))
            }
            Some(own) => {
                let slots = own.slots;
                let pending = Arc::clone(&own.limiter).verdict(client, scope, cost, counters);
                Check::Pending(Box::pin(async move { own_verdict(pending.await, &slots) }))
            }
        }
    }
    fn override_slots(&self) -> Vec<Vec<Option<TierInfo>>> {
        self.slots.clone()
    }
    #[cfg(feature = "metrics")]
    fn register_metrics(&mut self, limiter: &str) {
        let _ = self
            .counters
            .metrics
            .set(crate::metrics::redis::RedisMetrics::new(limiter));
        self.register_fallback_metrics(limiter);
    }
}
