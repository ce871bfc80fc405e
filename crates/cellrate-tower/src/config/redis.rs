//! A layer whose tiers live in Redis: the policies and failure policy a
//! configuration makes, and [`LayerConfig::build_redis`].

use std::collections::BTreeMap;

use super::ConfigKey;
use super::{LayerConfig, TierScope};
use crate::RateLimitLayer;
use cellrate::Clock;
use cellrate_config::ConfigError as Error;

impl LayerConfig {
    /// The Redis policy, failure policy and per-client policies of the
    /// tiers at `hz` (`redis` must be set): what
    /// [`build_redis`](Self::build_redis) and a reload of a Redis layer
    /// check and make.
    #[cfg(feature = "redis")]
    pub(crate) fn redis_policy(&self, hz: u64) -> Result<crate::redis::RedisPlan, Error> {
        use cellrate_redis::{FailurePolicy, RedisPolicy, RedisTier};
        let Some(rules) = &self.redis else {
            return Err(Error::new("redis", "no Redis backend is configured"));
        };
        if self.tiers.is_empty() {
            return Err(Error::new("tiers", crate::BuildError::NoTiers));
        }
        if self.tiers.len() > crate::MAX_TIERS {
            return Err(Error::new("tiers", crate::BuildError::TooManyTiers));
        }
        let mut tiers = Vec::with_capacity(self.tiers.len());
        for (i, t) in self.tiers.iter().enumerate() {
            let quota = self.tier_quota(i, hz)?;
            if t.routes.is_some() {
                return Err(Error::new(
                    format!("tiers[{i}].routes"),
                    "on Redis every tier decides every route: give each group of \
                     routes a layer of its own (an axum route_layer); tiers of one name \
                     under one prefix share their clients' state on the server",
                ));
            }
            let kind = self.tier_algorithm(i)?;
            let tier = self.redis_tier(i, kind, quota, &format!("tiers[{i}]"))?;
            tiers.push(match t.scope {
                TierScope::Client => tier,
                TierScope::ClientAndEndpoint => tier.per_scope(),
            });
        }
        let policy = RedisPolicy::new(rules.prefix.as_str(), tiers.clone()).map_err(|e| {
            let place = match e {
                cellrate_redis::Error::InvalidKey => "redis.prefix",
                _ => "tiers",
            };
            Error::new(place, e)
        })?;
        // A client with an override in some tier: the policy with its own
        // quota in those tiers (the same keys, so the same state on the
        // server), decided apart from the others, and its slot in each of
        // them (the clients of a tier's overrides in key order).
        let mut own: BTreeMap<String, (&str, Vec<RedisTier>, Vec<usize>)> = BTreeMap::new();
        for (i, t) in self.tiers.iter().enumerate() {
            self.check_overrides(i)?;
            for (client, spec) in &t.overrides {
                let at = format!("tiers[{i}].overrides.{client}");
                let q = self.override_quota(spec, hz, &at)?;
                let key = crate::backend::owned(self.client_part(client, &at)?);
                let kind = self.tier_algorithm(i)?;
                let tier = self.redis_tier(i, kind, q, &at)?;
                // A client_and_endpoint tier's override: that client's own
                // quota on each of its endpoints (its keys per endpoint).
                let tier = match t.scope {
                    TierScope::Client => tier,
                    TierScope::ClientAndEndpoint => tier.per_scope(),
                };
                let entry = own
                    .entry(key)
                    .or_insert_with(|| (client.as_str(), tiers.clone(), Vec::new()));
                entry.1[i] = tier;
                entry.2.push(i);
            }
        }
        let mut slots: Vec<Vec<Option<crate::TierInfo>>> = vec![Vec::new(); self.tiers.len()];
        let mut overrides = Vec::with_capacity(own.len());
        for (key, (client, tiers, overridden)) in own {
            let mut marks = Vec::with_capacity(overridden.len());
            for &i in &overridden {
                let t = &tiers[i];
                marks.push((i, slots[i].len()));
                slots[i].push(Some(crate::TierInfo::from_quota(t.name(), &t.quota())));
            }
            let p = RedisPolicy::new(rules.prefix.as_str(), tiers)
                .map_err(|e| Error::new(format!("tiers.overrides.{client}"), e))?;
            overrides.push((key, p, marks));
        }
        // The fallback's quotas as read: the client re-expresses each on
        // its own µs clock, whatever frequency it was read at.
        let failure = rules.failure.clone();
        if let FailurePolicy::Fallback(quotas) = &failure {
            if quotas.len() != self.tiers.len() {
                let plural = |n: usize| if n == 1 { "" } else { "s" };
                return Err(Error::new(
                    "redis.failure.fallback",
                    format_args!(
                        "one quota per tier: {} tier{}, {} quota{}",
                        self.tiers.len(),
                        plural(self.tiers.len()),
                        quotas.len(),
                        plural(quotas.len())
                    ),
                ));
            }
            for (j, q) in quotas.iter().enumerate() {
                cellrate_redis::on_server_clock(*q)
                    .map_err(|e| Error::new(format!("redis.failure.fallback[{j}]"), e))?;
            }
        }
        Ok(crate::redis::RedisPlan {
            policy,
            failure,
            overrides,
            slots,
        })
    }

    /// The layer over Redis (`redis` must be set): the tiers' quotas at
    /// `hz`, in a policy under `redis.prefix`, and the failure policy's
    /// fallback quotas, one per tier (each re-expressed on the client's µs
    /// clock). Connects lazily, at the first request. Errors name the
    /// field (`redis.failure.fallback[1]`, `redis.prefix`).
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = toml::from_str(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "10/min", capacity = 1 }]
    ///     [redis]
    ///     target = { standalone = "redis://127.0.0.1:6379/" }
    ///     failure = { fallback = ["20/min", "5/s"] }
    /// "#).unwrap();
    /// assert_eq!(
    ///     c.build_redis(StdClock::new(), StdClock::HZ).unwrap_err().to_string(),
    ///     "redis.failure.fallback: one quota per tier: 1 tier, 2 quotas"
    /// );
    /// ```
    #[cfg(feature = "redis")]
    pub fn build_redis<C: Clock + Send + Sync + 'static>(
        &self,
        clock: C,
        hz: u64,
    ) -> Result<RateLimitLayer<ConfigKey, crate::RedisAsync, C>, Error> {
        use cellrate_redis::{AsyncRedisGcra, RedisConfig};
        let Some(rules) = &self.redis else {
            return Err(Error::new("redis", "no Redis backend is configured"));
        };
        let key = self.checked_key()?;
        let plan = self.redis_policy(hz)?;
        let mut config =
            RedisConfig::new(plan.failure.clone()).with_fallback_when_full(self.when_full);
        if let Some(ms) = rules.timeout_ms {
            config = config.with_timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(ms) = rules.reconnect_ms {
            config = config.with_reconnect_interval(std::time::Duration::from_millis(ms));
        }
        if let Some(c) = rules.fallback_capacity {
            // Its tables are allocated when Redis first fails: a size no
            // allocator grants must fail here, while the file is read.
            cellrate_config::check_capacity(c)
                .map_err(|e| Error::new("redis.fallback_capacity", e.message()))?;
            config = config.with_fallback_capacity(c);
        }
        let limiter = AsyncRedisGcra::new(rules.target.clone(), plan.policy.clone(), config)
            .map_err(|e| Error::new("redis", e))?;
        let backend = crate::RedisAsync::new(limiter)
            .reconfigured(plan)
            .map_err(|e| Error::new("redis", e))?;
        self.layer(key, backend, clock, hz)
    }
}
