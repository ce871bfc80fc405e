//! A tier's algorithm: its quota read as `limit` cells per `window` (the
//! quota's rate and period) of the algorithm the tier names, GCRA by
//! default. In process a tier's table runs the GCRA family (GCRA, token
//! bucket, leaky bucket); on Redis every algorithm runs, each the same
//! step as in process.

use cellrate::compose::{AlgorithmKind, LimiterConfig};
use cellrate::Quota;
use cellrate_config::ConfigError as Error;

use super::LayerConfig;

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
    /// GCRA and the token bucket, one cell at a time for the leaky bucket;
    /// another algorithm is an error at `tiers[i].algorithm` (it runs on
    /// Redis only).
    pub(super) fn in_process_quota(
        &self,
        i: usize,
        kind: AlgorithmKind,
        q: Quota,
        at: &str,
    ) -> Result<Quota, Error> {
        match kind {
            AlgorithmKind::LeakyBucket => self
                .limiter_config(i, kind, q)
                .quota()
                .map_err(|e| Error::new(at, e)),
            k if is_gcra_family(k) => Ok(q),
            k => Err(Error::new(
                format!("tiers[{i}].algorithm"),
                format_args!(
                    "{} runs on Redis (LayerConfig::build_redis); a tier in process runs \
                     gcra, token_bucket or leaky_bucket",
                    k.as_str()
                ),
            )),
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
