//! [`LayerConfig::build`]: a layer through the public builder
//! ([`RateLimitLayer::builder`]), so a configured layer is exactly one
//! written in code.

use super::key::ConfigKey;
use super::plan::Applied;
use super::LayerConfig;
use crate::error::check_name;
use crate::{Backend, BuildError, KeyedTiers, RateLimitLayer};
use cellrate::Clock;
use cellrate_config::ConfigError as Error;

impl LayerConfig {
    /// The layer, its quotas at `hz` (the frequency of `clock`; a tier
    /// quota's own `hz` must equal it). Errors name the field:
    /// `tiers[1].quota: …`, `keyless: …`.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::config::LayerConfig;
    /// let c: LayerConfig = serde_json::from_str(r#"{
    ///     "key": {"client": "peer_ip"},
    ///     "tiers": [{"name": "ip", "quota": "10/s", "scope": "client_and_endpoint", "capacity": 10}]
    /// }"#).unwrap();
    /// assert_eq!(
    ///     c.build(StdClock::new(), StdClock::HZ).unwrap_err().to_string(),
    ///     "tiers[0].scope: client_and_endpoint needs key.endpoint"
    /// );
    /// ```
    pub fn build<C: Clock + Send + Sync + 'static>(
        &self,
        clock: C,
        hz: u64,
    ) -> Result<RateLimitLayer<ConfigKey, KeyedTiers, C>, Error> {
        if self.on_redis() {
            return Err(Error::new(
                "redis",
                "a Redis backend is built by LayerConfig::build_redis (feature redis)",
            ));
        }
        let key = self.checked_key()?;
        let plan = self.plan_tiers(hz, None, Default::default())?;
        let routes = self.routes()?;
        // New tables: no client's state to re-express.
        let tiers = KeyedTiers::committed(plan, self.when_full, routes, 0);
        self.layer(key, tiers, clock, hz)
    }

    /// The extractor, once the tiers are known not to be empty.
    pub(super) fn checked_key(&self) -> Result<ConfigKey, Error> {
        let key = self.key.build()?;
        if self.tiers.is_empty() {
            return Err(Error::new("tiers", BuildError::NoTiers));
        }
        Ok(key)
    }

    /// The layer of `backend` with this configuration's header families,
    /// keyless answer, series' label and challenge, the configuration
    /// (read at `hz`) kept for its reloads.
    pub(super) fn layer<B: Backend, C: Clock + Send + Sync + 'static>(
        &self,
        key: ConfigKey,
        backend: B,
        clock: C,
        hz: u64,
    ) -> Result<RateLimitLayer<ConfigKey, B, C>, Error> {
        let builder = RateLimitLayer::builder(key, backend, clock)
            .fields(self.fields)
            .keyless(self.keyless);
        // The label is checked with or without the `metrics` feature: a
        // file is valid or not whatever the build.
        let builder = match &self.metrics_name {
            None => builder,
            Some(name) => {
                check_name(name).map_err(|e| Error::new("metrics_name", e))?;
                #[cfg(feature = "metrics")]
                let builder = builder.metrics_name(name);
                builder
            }
        };
        let builder = match &self.challenge {
            Some(c) => builder.challenge(&c.scheme, &c.realm),
            None => builder,
        };
        // Where a refusal of the builder belongs in the file.
        let layer = builder.build().map_err(|e| match e {
            BuildError::Keyless => Error::new("keyless.reject", e),
            BuildError::Challenge => Error::new("challenge", e),
            _ => Error::new("tiers", e),
        })?;
        if let Ok(mut applied) = layer.shared.applied.lock() {
            *applied = Some(Box::new(Applied::new(self.clone(), hz)));
        }
        Ok(layer)
    }
}
