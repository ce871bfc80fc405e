//! Degraded service: what a check answers when Redis did not, and when to
//! try Redis again.
//!
//! [`Degrade`] applies the [`FailurePolicy`] to a call Redis failed (not to
//! a key error, nor to a key that holds no TAT: Redis answered those). The
//! fallback decides per client with one [`KeyedBox`] per tier, keyed by
//! the tier's Redis key, on the tier's fallback quota re-expressed on the
//! µs clock as a [`RedisTier`](super::RedisTier) would be: bounded memory
//! with the keyed tables' lossless eviction (a client that owes is never
//! forgotten) and their full-table policies. Its clock is the microseconds
//! since the policy was made (an `Instant`, taken modulo 2⁶⁴ like any
//! clock: the tables read differences, see
//! [`gcra`](crate::gcra#serial-time)). Its tiers are all or nothing,
//! by the crate's one all-or-nothing composition
//! ([`compose::check_all`](crate::compose::check_all) over each table's
//! entry): a tier that denies gives the earlier tiers their cells back, so
//! a denied request consumes from none, as on Redis. Fail-open admits with full
//! tiers; fail-closed denies with `retry_after` = the reconnect interval.
//!
//! [`Backoff`] keeps when the last attempt failed: after a failure the
//! first caller once the reconnect interval has passed claims the next
//! attempt, every other caller gets [`Error::Backoff`] at once, so a dead or
//! stalled server costs one timeout per interval, not one per request. A
//! call Redis answers clears the failure.

use core::fmt;
use std::string::String;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::vec::Vec;

use super::policy::on_server_clock;
use super::{Error, FailurePolicy, Outcome, RedisConfig, RedisPolicy, Source};
use crate::compose::check_all;
use crate::decision::{Decision, Denied, Limited};
use crate::keyed::{KeyedBox, Seed};
use crate::quota::Quota;

/// The failure policy in force, with the fallback's state.
pub(crate) struct Degrade {
    config: RedisConfig,
    /// One keyed table per tier, keyed by the tier's Redis key.
    fallback: Option<Vec<KeyedBox<Quota>>>,
    epoch: Instant,
}

impl fmt::Debug for Degrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Degrade")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Degrade {
    pub(crate) fn new(config: RedisConfig, tiers: usize) -> Result<Self, Error> {
        let fallback = match &config.failure {
            FailurePolicy::Fallback(quotas) => {
                if quotas.len() != tiers {
                    return Err(Error::TierCount);
                }
                // A seed per process, so keys cannot be chosen to collide.
                let seed = Seed::random();
                let tables: Result<Vec<KeyedBox<Quota>>, Error> = quotas
                    .iter()
                    .map(|q| {
                        let (q, _) = on_server_clock(*q)?;
                        Ok(KeyedBox::with_capacity(
                            config.fallback_capacity,
                            q,
                            config.fallback_when_full,
                            seed,
                        ))
                    })
                    .collect();
                Some(tables?)
            }
            _ => None,
        };
        Ok(Degrade {
            config,
            fallback,
            epoch: Instant::now(),
        })
    }

    pub(crate) fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// What a check of `cost` for (`client`, `scope`) answers after trying
    /// Redis: its outcome; a key-layout error or a key that holds no TAT as
    /// it is; for a failure of Redis, the failure policy's
    /// [`decide`](Self::decide).
    pub(crate) fn settle(
        &self,
        tried: Result<Outcome, Error>,
        policy: &RedisPolicy,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        match tried {
            Err(Error::InvalidKey) => Err(Error::InvalidKey),
            Err(Error::ScopeMismatch) => Err(Error::ScopeMismatch),
            Err(Error::CorruptKey(key)) => Err(Error::CorruptKey(key)),
            Ok(outcome) => Ok(outcome),
            Err(_) => {
                let keys = policy.keys(client, scope)?;
                Ok(self.decide(policy, &keys, cost))
            }
        }
    }

    /// The answer while Redis is failing.
    pub(crate) fn decide(&self, policy: &RedisPolicy, keys: &[String], cost: u64) -> Outcome {
        let tiers = policy.tiers();
        match &self.fallback {
            None if matches!(self.config.failure, FailurePolicy::Open) => Outcome::new(
                tiers
                    .iter()
                    .map(|t| Ok(Decision::new(t.quota().burst(), t.quota().burst(), 0)))
                    .collect(),
                Source::FailOpen,
            ),
            None => {
                let wait = self.config.reconnect_interval.as_micros().max(1) as u64;
                Outcome::new(
                    tiers
                        .iter()
                        .map(|t| Err(Denied::Limited(Limited::new(t.quota().burst(), wait, wait))))
                        .collect(),
                    Source::FailClosed,
                )
            }
            Some(tables) => self.local(tables, keys, cost),
        }
    }

    /// All or nothing over the tiers' tables
    /// ([`check_all`] over each table's entry for its key): each tier is
    /// charged in turn; a tier that denies gives the earlier ones their
    /// cells back (so a denied request consumes from none), and the tiers
    /// not yet tried are asked without being charged (their state, or their
    /// own denial if they would deny too).
    fn local(&self, tables: &[KeyedBox<Quota>], keys: &[String], cost: u64) -> Outcome {
        // Microseconds modulo 2⁶⁴: the local tables read differences.
        let now = self.epoch.elapsed().as_micros() as u64;
        let mut results = std::vec![Ok(Decision::new(0, 0, 0)); tables.len().min(keys.len())];
        let entries = tables.iter().zip(keys).map(|(t, k)| t.entry(k.as_str()));
        let n = check_all(entries, now, cost, &mut results);
        results.truncate(n);
        Outcome::new(results, Source::Fallback)
    }
}

/// Reconnection bookkeeping: when the last attempt failed. A failure is
/// cleared by a call Redis answered, not by a connect (a stalled server
/// still accepts connections).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failed_at: Mutex<Option<Instant>>,
    /// Whether `failed_at` is set (read without the lock on every answer).
    failing: AtomicBool,
}

impl Backoff {
    /// Whether a reconnect may be tried now. After a failure, the first
    /// caller once the interval has passed claims the attempt (the next one
    /// is then due an interval later, unless a call succeeds): a dead or
    /// stalled server costs one caller per interval, not every caller.
    pub(crate) fn may_try(&self, interval: Duration) -> bool {
        let mut guard = self.failed_at.lock().unwrap_or_else(|e| e.into_inner());
        match *guard {
            None => true,
            Some(t) if t.elapsed() >= interval => {
                *guard = Some(Instant::now());
                true
            }
            Some(_) => false,
        }
    }
    pub(crate) fn failed(&self) {
        *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.failing.store(true, Ordering::Relaxed);
    }
    /// Redis answered a call.
    pub(crate) fn succeeded(&self) {
        if self.failing.load(Ordering::Relaxed) {
            *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = None;
            self.failing.store(false, Ordering::Relaxed);
        }
    }
}

/// Whether a failed call says the connection is gone or stuck (drop it and
/// hold back reconnects for the interval), rather than that the server
/// answered with an error (the connection is still good).
pub(crate) fn is_transport(e: &::redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// A failed call as this crate's error: [`Error::Timeout`] when the client
/// gave up waiting, else the client's error as it is.
pub(crate) fn call_error(e: ::redis::RedisError) -> Error {
    if e.is_timeout() {
        Error::Timeout
    } else {
        Error::Redis(e)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::redis::policy::tests::policy;

    #[test]
    fn fallback_is_all_or_nothing_per_client() {
        let p = policy();
        let d = Degrade::new(
            RedisConfig::new(FailurePolicy::Fallback(std::vec![
                Quota::per_second(100).at_hz(1_000),
                Quota::per_minute(2).at_hz(1_000),
            ])),
            2,
        )
        .unwrap();
        let keys = p.keys("c", Some("/x")).unwrap();
        assert!(d.decide(&p, &keys, 1).is_admitted());
        assert!(d.decide(&p, &keys, 1).is_admitted());
        let third = d.decide(&p, &keys, 1);
        assert_eq!(third.source(), Source::Fallback);
        assert!(third.results()[0].is_ok() && third.results()[1].is_err());
        // The first tier was not charged by the denial: 98 left of 100.
        assert_eq!(third.results()[0].unwrap().remaining(), 98);
        let other = p.keys("d", Some("/x")).unwrap();
        assert!(d.decide(&p, &other, 1).is_admitted());
    }

    #[test]
    fn open_and_closed() {
        let p = policy();
        let keys = p.keys("c", Some("/x")).unwrap();
        let open = Degrade::new(RedisConfig::new(FailurePolicy::Open), 2).unwrap();
        assert!(open.decide(&p, &keys, 1).is_admitted());
        let closed = Degrade::new(RedisConfig::new(FailurePolicy::Closed), 2).unwrap();
        let o = closed.decide(&p, &keys, 1);
        assert_eq!(o.source(), Source::FailClosed);
        assert_eq!(o.denied().unwrap().retry_after(), Some(250_000));
    }
}
