//! A tier's algorithm: its quota read as `limit` cells per `window` (the
//! quota's rate and period) of the algorithm the tier names, GCRA by
//! default. Every algorithm runs in process (the GCRA family in a live
//! GCRA table; the fixed, sliding and bucketed windows and the sliding
//! log in a store) and on Redis, each the same step in both.

use cellrate::compose::{AlgorithmKind, LimiterConfig};
use cellrate::Quota;
use cellrate_config::ConfigError as Error;

use super::LayerConfig;
use crate::backend::keyed::{TierQuota, WindowQuota};

/// Whether `kind` is of the GCRA family (one quota: a table of the layer
/// runs it in process).
pub(super) fn is_gcra_family(kind: AlgorithmKind) -> bool {
    matches!(
        kind,
        AlgorithmKind::Gcra | AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket
    )
}

impl LayerConfig {
    /// Tier `i`'s algorithm (default GCRA), its `buckets` and the burst of
    /// its quota and overrides checked against it.
    pub(super) fn tier_algorithm(&self, i: usize) -> Result<AlgorithmKind, Error> {
        let t = &self.tiers[i];
        let kind = t.algorithm.unwrap_or(AlgorithmKind::Gcra);
        let place = |field: &str| format!("tiers[{i}].{field}");
        match (kind, t.buckets) {
            (AlgorithmKind::BucketedWindow, None) => {
                return Err(Error::new(
                    place("buckets"),
                    "a bucketed_window tier needs its number of buckets",
                ))
            }
            (AlgorithmKind::BucketedWindow, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(Error::new(
                    place("buckets"),
                    "only a bucketed_window tier has buckets",
                ))
            }
        }
        let windowed = !matches!(kind, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket);
        let specs = std::iter::once((place("quota"), &t.quota)).chain(
            t.overrides
                .iter()
                .map(|(client, spec)| (format!("tiers[{i}].overrides.{client}"), spec)),
        );
        for (at, spec) in specs {
            if windowed && spec.burst.is_some() {
                return Err(Error::new(
                    at,
                    format_args!(
                        "a {} tier admits its rate's count per period: it takes no burst",
                        kind.as_str()
                    ),
                ));
            }
        }
        Ok(kind)
    }

    /// Tier `i`'s quota `q` (at the clock's `hz`) as its algorithm's
    /// configuration: `limit` = the quota's burst (its rate's count unless
    /// a GCRA or token bucket tier sets one), `window` = its span `τ + T`
    /// in ticks (the period when no burst is set).
    pub(super) fn limiter_config(&self, i: usize, kind: AlgorithmKind, q: Quota) -> LimiterConfig {
        let window = q.span().div_ceil(q.scale().max(1));
        let config = LimiterConfig::new(kind, q.burst(), window, q.hz());
        match self.tiers[i].buckets {
            Some(n) if kind == AlgorithmKind::BucketedWindow => config.with_buckets(n),
            _ => config,
        }
    }

    /// Tier `i`'s quota `q` as its table runs it in process: itself for
    /// GCRA and the token bucket, one cell at a time for the leaky bucket,
    /// the window quota of its limiter configuration for the fixed,
    /// sliding and bucketed windows and the sliding log (errors at `at`).
    pub(super) fn in_process_quota(
        &self,
        i: usize,
        kind: AlgorithmKind,
        q: Quota,
        at: &str,
    ) -> Result<TierQuota, Error> {
        match kind {
            AlgorithmKind::LeakyBucket => self
                .limiter_config(i, kind, q)
                .quota()
                .map(TierQuota::Gcra)
                .map_err(|e| Error::new(at, e)),
            k if is_gcra_family(k) => Ok(TierQuota::Gcra(q)),
            k => match WindowQuota::from_config(&self.limiter_config(i, k, q)) {
                Some(Ok(quota)) => Ok(TierQuota::Window { quota, hz: q.hz() }),
                Some(Err(e)) => Err(Error::new(at, e)),
                None => Err(Error::new(
                    format!("tiers[{i}].algorithm"),
                    format_args!("{} does not run in process", k.as_str()),
                )),
            },
        }
    }

    /// Tier `i` on Redis with quota `q`: a GCRA tier of `q`, or a tier of
    /// its algorithm (`RedisTier::from_config`).
    #[cfg(feature = "redis")]
    pub(super) fn redis_tier(
        &self,
        i: usize,
        kind: AlgorithmKind,
        q: Quota,
        at: &str,
    ) -> Result<cellrate_redis::RedisTier, Error> {
        let name = self.tiers[i].name.as_str();
        let tier = if matches!(kind, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket) {
            cellrate_redis::RedisTier::new(name, q)
        } else {
            cellrate_redis::RedisTier::from_config(name, &self.limiter_config(i, kind, q))
        };
        tier.map_err(|e| Error::new(at, e))
    }
}
