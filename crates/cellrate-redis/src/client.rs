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
    /// Per tier, its *base*: the parameters its name (and scope) first had
    /// in this limiter's line (the limiter it was made from by
    /// `with_policy`, and so on), when they differ from its own and the
    /// algorithm is the same (`None` otherwise). The scripts read an
    /// untagged value as written under the base, and write a tagged one
    /// only while a tier runs on other parameters than its base.
    pub(crate) bases: Vec<Option<[u64; 3]>>,
    /// The first parameters of every tier the line has had under this
    /// prefix, removed ones included.
    origins: Vec<Origin>,
}

/// A tier's name, whether it counts per scope, its kind code and its three
/// parameters (`RedisTier::script_args`).
type Origin = (String, bool, u64, [u64; 3]);

/// What a tier is, as an origin.
fn origin_of(tier: &super::RedisTier) -> Origin {
    let (kind, args) = tier.script_args();
    (tier.name().into(), tier.is_per_scope(), kind, args)
}

impl Limits {
    pub(crate) fn new(policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        let degrade = Degrade::new(config, &policy)?;
        let bases = std::vec![None; policy.tiers().len()];
        let origins = policy.tiers().iter().map(origin_of).collect();
        Ok(Limits {
            policy,
            degrade,
            bases,
            origins,
        })
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
        // Another prefix names other keys: the line starts again.
        let mut origins = if policy.prefix() == self.policy.prefix() {
            self.origins.clone()
        } else {
            Vec::new()
        };
        let mut bases = Vec::with_capacity(policy.tiers().len());
        for t in policy.tiers() {
            let own = origin_of(t);
            let first = origins.iter().find(|o| o.0 == own.0 && o.1 == own.1);
            bases.push(match first {
                Some(o) => (o.2 == own.2 && o.3 != own.3).then_some(o.3),
                None => {
                    origins.push(own);
                    None
                }
            });
        }
        Ok(Limits {
            policy,
            degrade,
            bases,
            origins,
        })
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
