//! Degraded service: what a check answers when Redis did not, and when to
//! try Redis again.
//!
//! [`Degrade`] applies the [`FailurePolicy`] to a call Redis failed (not to
//! a key error, nor to a key that holds no TAT: Redis answered those).
//! Fail-open admits with full tiers; fail-closed denies with `retry_after`
//! = the reconnect interval; the fallback decides per client on one table
//! per tier ([`fallback`](super::fallback)), keyed by the tier's Redis key,
//! all or nothing by the crate's one composition
//! ([`compose::check_all`](cellrate::compose::check_all)): a tier that
//! denies gives the earlier tiers their cells back, so a denied request
//! consumes from none, as on Redis. Its clock is the microseconds since the
//! policy was made (an `Instant`, taken modulo 2⁶⁴ like any clock: the
//! tables read differences, see [serial time](cellrate::Gcra#serial-time)).
//!
//! [`Backoff`] keeps when the last attempt failed: after a failure the
//! first caller once the reconnect interval has passed claims the next
//! attempt, every other caller gets [`Error::Backoff`] at once, so a dead or
//! stalled server costs one timeout per interval, not one per request. A
//! call Redis answers clears the failure.

use core::fmt;
use std::string::String;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use std::vec::Vec;

use super::fallback::{table_for, Fallback};
use super::{Error, FailurePolicy, Outcome, RedisConfig, RedisPolicy, RedisTier, Source};
use cellrate::compose::check_all;
use cellrate::keyed::Seed;
use cellrate::{Decision, Denied, Limited, Quota};

/// The failure policy in force, with the fallback's state.
pub(crate) struct Degrade {
    config: RedisConfig,
    /// One table per tier, keyed by the tier's Redis key, running the
    /// tier's algorithm (shared with the limiter this one was reconfigured
    /// from, for the tiers kept: see [`Degrade::carried`]).
    fallback: Option<Vec<Arc<Fallback>>>,
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
    pub(crate) fn new(config: RedisConfig, policy: &RedisPolicy) -> Result<Self, Error> {
        Self::with_tables(config, policy, Instant::now(), |_, _| None)
    }

    /// The failure policy `config` for `policy`, after `old` served
    /// `old_policy`: a tier of `policy` that `old_policy` has too (the same
    /// key layout: name and scope; the same algorithm) with the same
    /// fallback quota shares `old`'s table for it, so every client's
    /// fallback state (what it consumed while Redis was failing) is kept;
    /// any other tier gets a new, empty table. The fallback clock is
    /// `old`'s, which the kept tables read.
    pub(crate) fn carried(
        config: RedisConfig,
        policy: &RedisPolicy,
        old: &Degrade,
        old_policy: &RedisPolicy,
    ) -> Result<Self, Error> {
        let (Some(old_tables), FailurePolicy::Fallback(old_quotas)) =
            (&old.fallback, &old.config.failure)
        else {
            return Self::with_tables(config, policy, old.epoch, |_, _| None);
        };
        Self::with_tables(config, policy, old.epoch, |tier, q| {
            let j = old_policy.tiers().iter().position(|o| {
                o.name() == tier.name()
                    && o.is_per_scope() == tier.is_per_scope()
                    && o.algorithm() == tier.algorithm()
            })?;
            (old_quotas.get(j) == Some(q))
                .then(|| old_tables.get(j).map(Arc::clone))
                .flatten()
        })
    }

    /// A `Degrade` whose fallback table for a tier is `reuse`'s (given the
    /// tier and its fallback quota) or else a new one.
    fn with_tables(
        config: RedisConfig,
        policy: &RedisPolicy,
        epoch: Instant,
        reuse: impl Fn(&RedisTier, &Quota) -> Option<Arc<Fallback>>,
    ) -> Result<Self, Error> {
        let fallback = match &config.failure {
            FailurePolicy::Fallback(quotas) => {
                if quotas.len() != policy.tiers().len() {
                    return Err(Error::TierCount);
                }
                // A seed per process, so keys cannot be chosen to collide.
                let seed = Seed::random();
                let tables: Result<Vec<Arc<Fallback>>, Error> = policy
                    .tiers()
                    .iter()
                    .zip(quotas)
                    .map(|(t, q)| match reuse(t, q) {
                        Some(kept) => Ok(kept),
                        None => table_for(t, *q, &config, seed).map(|t| Arc::new(Fallback::new(t))),
                    })
                    .collect();
                Some(tables?)
            }
            _ => None,
        };
        Ok(Degrade {
            config,
            fallback,
            epoch,
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
            None if matches!(self.config.failure, FailurePolicy::Open) => Outcome::of(
                &tiers
                    .iter()
                    .map(|t| Ok(Decision::new(t.limit(), t.limit(), 0)))
                    .collect::<Vec<_>>(),
                Source::FailOpen,
            ),
            None => {
                let wait = self.config.reconnect_interval.as_micros().max(1) as u64;
                Outcome::of(
                    &tiers
                        .iter()
                        .map(|t| Err(Denied::Limited(Limited::new(t.limit(), wait, wait))))
                        .collect::<Vec<_>>(),
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
    fn local(&self, tables: &[Arc<Fallback>], keys: &[String], cost: u64) -> Outcome {
        // Microseconds modulo 2⁶⁴: the local tables read differences.
        let now = self.epoch.elapsed().as_micros() as u64;
        let mut results = std::vec![Ok(Decision::new(0, 0, 0)); tables.len().min(keys.len())];
        let entries = tables
            .iter()
            .zip(keys)
            .map(|(t, k)| t.table.entry(k.as_str()));
        let n = check_all(entries, now, cost, &mut results);
        results.truncate(n);
        #[cfg(feature = "metrics")]
        for t in tables {
            if let (Some(m), Some((stats, _))) = (t.metrics.get(), t.table.stats()) {
                m.record(stats);
            }
        }
        Outcome::of(&results, Source::Fallback)
    }

    /// Registers the `cellrate_keyed_*` series of each fallback table that
    /// has none yet, labelled `limiter` and the tier's name (a sliding-log
    /// table, not a keyed one, has none).
    #[cfg(feature = "metrics")]
    pub(crate) fn register_metrics(&self, limiter: &str, policy: &RedisPolicy) {
        let Some(tables) = &self.fallback else {
            return;
        };
        for (t, tier) in tables.iter().zip(policy.tiers()) {
            if let Some((_, capacity)) = t.table.stats() {
                t.metrics.get_or_init(|| {
                    cellrate_metrics::KeyedMetrics::new(limiter, tier.name(), capacity)
                });
            }
        }
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
    /// How many failures there have been: what the limiters' learned bases
    /// are tied to (a failure may be the server restarting empty).
    failures: AtomicU64,
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
        self.failures.fetch_add(1, Ordering::AcqRel);
    }
    /// How many failures there have been so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Acquire)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::policy;

    #[test]
    fn fallback_is_all_or_nothing_per_client() {
        let p = policy();
        let d = Degrade::new(
            RedisConfig::new(FailurePolicy::Fallback(std::vec![
                Quota::per_second(100).at_hz(1_000),
                Quota::per_minute(2).at_hz(1_000),
            ])),
            &p,
        )
        .unwrap();
        let keys = p.keys("c", Some("/x")).unwrap();
        assert!(d.decide(&p, &keys, 1).tiers().is_admitted());
        assert!(d.decide(&p, &keys, 1).tiers().is_admitted());
        let third = d.decide(&p, &keys, 1);
        assert_eq!(third.source(), Source::Fallback);
        assert!(third.tiers().results()[0].is_ok() && third.tiers().results()[1].is_err());
        // The first tier was not charged by the denial: 98 left of 100.
        assert_eq!(third.tiers().results()[0].unwrap().remaining(), 98);
        let other = p.keys("d", Some("/x")).unwrap();
        assert!(d.decide(&p, &other, 1).tiers().is_admitted());
    }

    #[test]
    fn a_reconfigured_fallback_keeps_the_kept_tiers_state() {
        let tier = |name: &str, per_min: u64| {
            RedisTier::new(name, Quota::per_minute(per_min).at_hz(1_000)).unwrap()
        };
        let fallback = |per_min: &[u64]| {
            RedisConfig::new(FailurePolicy::Fallback(
                per_min
                    .iter()
                    .map(|&n| Quota::per_minute(n).at_hz(1_000))
                    .collect(),
            ))
        };
        let old_p = RedisPolicy::new("rl", std::vec![tier("a", 60), tier("b", 60)]).unwrap();
        let old = Degrade::new(fallback(&[2, 3]), &old_p).unwrap();
        let keys = old_p.keys("c", None).unwrap();
        for _ in 0..2 {
            assert!(old.decide(&old_p, &keys, 1).tiers().is_admitted());
        }
        assert!(!old.decide(&old_p, &keys, 1).tiers().is_admitted());
        // "b" moves first and keeps its fallback quota: its 1 cell left is
        // kept; "a" changes its fallback quota (a new table, 5 cells); "n"
        // is new.
        let new_p =
            RedisPolicy::new("rl", std::vec![tier("b", 60), tier("a", 60), tier("n", 60)]).unwrap();
        let new = Degrade::carried(fallback(&[3, 5, 4]), &new_p, &old, &old_p).unwrap();
        let keys = new_p.keys("c", None).unwrap();
        let first = new.decide(&new_p, &keys, 1);
        assert!(first.tiers().is_admitted());
        let remaining: Vec<u64> = first
            .tiers()
            .results()
            .iter()
            .map(|r| r.unwrap().remaining())
            .collect();
        assert_eq!(remaining, [0, 4, 3]);
        assert!(!new.decide(&new_p, &keys, 1).tiers().is_admitted());
        // A tier whose algorithm changes under the same name is new too.
        let window = RedisTier::from_config(
            "b",
            &cellrate::compose::LimiterConfig::new(
                cellrate::compose::AlgorithmKind::FixedWindow,
                3,
                60_000,
                1_000,
            ),
        )
        .unwrap();
        let windowed = RedisPolicy::new("rl", std::vec![window]).unwrap();
        let w = Degrade::carried(fallback(&[3]), &windowed, &new, &new_p).unwrap();
        let keys = windowed.keys("c", None).unwrap();
        assert!(w.decide(&windowed, &keys, 1).tiers().is_admitted());
    }

    #[test]
    fn open_and_closed() {
        let p = policy();
        let keys = p.keys("c", Some("/x")).unwrap();
        let open = Degrade::new(RedisConfig::new(FailurePolicy::Open), &p).unwrap();
        assert!(open.decide(&p, &keys, 1).tiers().is_admitted());
        let closed = Degrade::new(RedisConfig::new(FailurePolicy::Closed), &p).unwrap();
        let o = closed.decide(&p, &keys, 1);
        assert_eq!(o.source(), Source::FailClosed);
        assert_eq!(o.tiers().denied().unwrap().retry_after(), Some(250_000));
    }
}
