//! The `cellrate_redis_*` series of a Redis backend of the tower layer
//! (feature `metrics` with `redis`; listed in `cellrate_metrics`):
//! its failure mode, the errors of its calls and their latency.

use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram};

use cellrate_metrics::{
    describe, REDIS_CHECK_SECONDS, REDIS_DEGRADED, REDIS_ERRORS, REDIS_TRANSITIONS,
};
use std::borrow::ToOwned;

use cellrate_redis::{Error, Outcome};

/// A Redis backend's handles, registered when its layer is built.
#[derive(Debug)]
pub(crate) struct RedisMetrics {
    degraded: Gauge,
    to_degraded: Counter,
    to_redis: Counter,
    timeout: Counter,
    backoff: Counter,
    connection: Counter,
    server: Counter,
    corrupt_key: Counter,
    latency: Histogram,
}

impl RedisMetrics {
    pub(crate) fn new(limiter: &str) -> Self {
        describe();
        let l: String = limiter.to_owned();
        let error = |kind: &'static str| ::metrics::counter!(REDIS_ERRORS, "limiter" => l.clone(), "kind" => kind);
        let degraded = ::metrics::gauge!(REDIS_DEGRADED, "limiter" => l.clone());
        degraded.set(0.0);
        RedisMetrics {
            degraded,
            to_degraded: ::metrics::counter!(
                REDIS_TRANSITIONS, "limiter" => l.clone(), "to" => "degraded"
            ),
            to_redis: ::metrics::counter!(
                REDIS_TRANSITIONS, "limiter" => l.clone(), "to" => "redis"
            ),
            timeout: error("timeout"),
            backoff: error("backoff"),
            connection: error("connection"),
            server: error("server"),
            corrupt_key: error("corrupt_key"),
            latency: ::metrics::histogram!(REDIS_CHECK_SECONDS, "limiter" => l),
        }
    }

    /// A transition into (`true`) or out of the failure mode.
    pub(crate) fn transition(&self, degraded: bool) {
        if degraded {
            self.degraded.set(1.0);
            self.to_degraded.increment(1);
        } else {
            self.degraded.set(0.0);
            self.to_redis.increment(1);
        }
    }

    /// One call of the client (before the failure policy), `took` long.
    pub(crate) fn call(&self, tried: &Result<Outcome, Error>, took: Duration) {
        let counter = match tried {
            Ok(_) => {
                self.latency.record(took.as_secs_f64());
                return;
            }
            Err(Error::Timeout) => &self.timeout,
            Err(Error::Backoff) => &self.backoff,
            Err(e @ Error::Redis(_)) if e.is_connection() => &self.connection,
            Err(Error::Redis(_)) | Err(Error::BadReply) => &self.server,
            Err(Error::CorruptKey(_)) => &self.corrupt_key,
            // The request's own key or the policy, not Redis.
            Err(_) => return,
        };
        counter.increment(1);
    }
}
