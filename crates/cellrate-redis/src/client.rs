//! What the blocking and the async client share: the policy, the failure
//! policy in force, the checks a request passes before any round trip, and
//! a call's deadline. Each client adds only its connections and I/O.

use std::time::Duration;
use std::vec::Vec;

use super::{Degrade, Error, FailurePolicy, Outcome, RedisConfig, RedisPolicy, Source};

/// A request of a batch: `(client, scope, cost)`.
pub(crate) type Check<'a> = (&'a str, Option<&'a str>, u64);

/// A client's policy and failure policy.
pub(crate) struct Limits {
    pub(crate) policy: RedisPolicy,
    pub(crate) degrade: Degrade,
}

impl Limits {
    pub(crate) fn new(policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        let degrade = Degrade::new(config, &policy)?;
        Ok(Limits { policy, degrade })
    }

    /// These limits reconfigured to `policy` and `failure` (the other
    /// settings kept), carrying the fallback tables of the tiers kept.
    pub(crate) fn with_policy(
        &self,
        policy: RedisPolicy,
        failure: FailurePolicy,
    ) -> Result<Self, Error> {
        let mut config = self.config().clone();
        config.failure = failure;
        let degrade = Degrade::carried(config, &policy, &self.degrade, &self.policy)?;
        Ok(Limits { policy, degrade })
    }

    pub(crate) fn config(&self) -> &RedisConfig {
        self.degrade.config()
    }

    /// The longest a call may take: the timeout, capped at a year so that
    /// adding it to a clock reading cannot overflow.
    pub(crate) fn timeout(&self) -> Duration {
        self.config().timeout.min(Duration::from_secs(86_400 * 365))
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn register_fallback_metrics(&self, limiter: &str) {
        self.degrade.register_metrics(limiter, &self.policy);
    }

    /// What a request gets without a round trip: a key error, or the denial
    /// of a cost that can never fit; `None` when Redis must decide it.
    pub(crate) fn precheck(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Option<Outcome>, Error> {
        self.policy.validate(client, scope)?;
        Ok(self
            .policy
            .too_large(cost)
            .map(|d| Outcome::of(&std::vec![Err(d); self.policy.tiers().len()], Source::Redis)))
    }

    /// A batch's outcomes: each request's [`precheck`](Self::precheck)
    /// answer, the others from `decide` (given them in order, answering
    /// one outcome each, in order).
    pub(crate) fn batch(
        &self,
        requests: &[Check<'_>],
        decide: impl FnOnce(&[Check<'_>], &mut Vec<Result<Outcome, Error>>) -> Result<(), Error>,
    ) -> Result<Vec<Result<Outcome, Error>>, Error> {
        let mut remote = Vec::with_capacity(requests.len());
        let mut local = Vec::with_capacity(requests.len());
        for &(client, scope, cost) in requests {
            let early = self.precheck(client, scope, cost)?;
            if early.is_none() {
                remote.push((client, scope, cost));
            }
            local.push(early.map(Ok));
        }
        let mut decided = Vec::with_capacity(remote.len());
        if !remote.is_empty() {
            decide(&remote, &mut decided)?;
        }
        let mut decided = decided.into_iter();
        local
            .into_iter()
            .map(|slot| slot.or_else(|| decided.next()).ok_or(Error::BadReply))
            .collect()
    }
}
