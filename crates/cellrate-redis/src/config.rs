//! Settings: where to connect ([`Target`]), each call's deadline and the
//! reconnect interval ([`RedisConfig`]), and what a check answers while
//! Redis cannot ([`FailurePolicy`]).
//!
//! The timeout is a deadline for a whole call, connect, handshake, script
//! and a `NOSCRIPT` reload included. After a failure one caller per
//! reconnect interval tries Redis again; the others get the failure policy
//! at once. The fallback's table is bounded by
//! [`RedisConfig::with_fallback_capacity`] clients per tier.

use core::fmt;
use std::boxed::Box;
use std::string::{String, ToString};
use std::time::Duration;
use std::vec::Vec;

use super::Error;
use cellrate::keyed::WhenFull;
use cellrate::Quota;

/// What a check answers while Redis cannot.
///
/// ```
/// use cellrate_redis::{FailurePolicy, RedisConfig};
/// use cellrate::Quota;
/// // While Redis is down, each server allows 2× the fleet-wide 100/min.
/// let cfg = RedisConfig::new(FailurePolicy::Fallback(vec![Quota::per_minute(200).at_hz(1_000)]));
/// assert!(matches!(cfg.failure(), FailurePolicy::Fallback(q) if q.len() == 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Admit everything (availability over protection).
    Open,
    /// Deny everything, with `retry_after` = the reconnect interval.
    Closed,
    /// Decide per client with local in-process GCRAs, one quota per tier of
    /// the policy (in the same order). Each server applies them on its own,
    /// so a fleet of `n` servers admits up to `n` times these quotas: choose
    /// them for that.
    Fallback(Vec<Quota>),
}

/// Connection settings shared by the blocking and async clients.
///
/// ```
/// use cellrate_redis::{FailurePolicy, RedisConfig};
/// use std::time::Duration;
/// let cfg = RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_millis(50));
/// assert_eq!(cfg.timeout(), Duration::from_millis(50));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisConfig {
    pub(super) failure: FailurePolicy,
    pub(super) timeout: Duration,
    pub(super) reconnect_interval: Duration,
    pub(super) fallback_capacity: usize,
    pub(super) fallback_when_full: WhenFull,
}

impl RedisConfig {
    /// Timeout 100 ms, reconnect at most every 250 ms, up to 65 536 clients
    /// in the fallback table, new clients admitted untracked when their
    /// window of it is full ([`WhenFull::Admit`]).
    pub fn new(failure: FailurePolicy) -> Self {
        RedisConfig {
            failure,
            timeout: Duration::from_millis(100),
            reconnect_interval: Duration::from_millis(250),
            fallback_capacity: 1 << 16,
            fallback_when_full: WhenFull::Admit,
        }
    }
    /// Each call's deadline: a check (or batch, or lease call) returns
    /// within `timeout` of its start, connecting, the handshake, the script
    /// and a `NOSCRIPT` reload included, plus a small slack for waking up
    /// and scheduling (a few ms; the stall test allows 60 ms on a loaded
    /// machine), with [`Error::Timeout`] (which the failure policy then
    /// decides). An async check waiting behind a batch keeps its own
    /// deadline. Exceptions: a new blocking Cluster connection bounds each
    /// node's connect by what is left of the deadline, one node after the
    /// other; a standalone server asked for RESP3 in its URL may take one
    /// timeout per handshake command.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Least time between two reconnect attempts after a failure.
    pub fn with_reconnect_interval(mut self, interval: Duration) -> Self {
        self.reconnect_interval = interval;
        self
    }
    /// Most clients (per tier) the fallback keeps. It keeps them in a
    /// [`KeyedBox`](cellrate::keyed::KeyedBox) per tier, so memory is bounded and eviction is
    /// lossless: a client that still owes is never forgotten, whatever the
    /// flood of new keys; only clients back to full make room (see
    /// [`keyed`](cellrate::keyed)).
    ///
    /// ```
    /// use cellrate_redis::{FailurePolicy, RedisConfig};
    /// use cellrate::Quota;
    /// let cfg = RedisConfig::new(FailurePolicy::Fallback(vec![Quota::per_minute(20).at_hz(1_000)]))
    ///     .with_fallback_capacity(100_000);
    /// # let _ = cfg;
    /// ```
    pub fn with_fallback_capacity(mut self, clients: usize) -> Self {
        self.fallback_capacity = clients.max(1);
        self
    }
    /// What the fallback does with a new client when its window of the
    /// table holds only clients that still owe: the keyed tables'
    /// [`WhenFull`] policies (deny it, admit it untracked, or charge every
    /// such client to one shared limiter).
    ///
    /// ```
    /// use cellrate::keyed::WhenFull;
    /// use cellrate_redis::{FailurePolicy, RedisConfig};
    /// use cellrate::Quota;
    /// let cfg = RedisConfig::new(FailurePolicy::Fallback(vec![Quota::per_minute(20).at_hz(1_000)]))
    ///     .with_fallback_when_full(WhenFull::Shared);
    /// # let _ = cfg;
    /// ```
    pub fn with_fallback_when_full(mut self, when_full: WhenFull) -> Self {
        self.fallback_when_full = when_full;
        self
    }
    /// The timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// The failure policy.
    pub fn failure(&self) -> &FailurePolicy {
        &self.failure
    }
}

/// Where to connect: one server or a Cluster.
///
/// ```
/// use cellrate_redis::Target;
/// let t = Target::standalone("redis://127.0.0.1:6379/").unwrap();
/// let c = Target::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]).unwrap();
/// # let _ = (t, c);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Target {
    /// A standalone server (or a primary).
    Standalone(::redis::Client),
    /// A Redis Cluster, from any of its nodes.
    Cluster(Box<::redis::cluster::ClusterClient>),
}

impl Target {
    /// A standalone server from a `redis://` URL.
    pub fn standalone(url: &str) -> Result<Self, Error> {
        Ok(Target::Standalone(::redis::Client::open(url)?))
    }
    /// A Cluster from the URLs of some of its nodes. The limiters connect
    /// with the [`RedisConfig`] timeout (see [`RedisConfig::with_timeout`]);
    /// a failed command is retried once (e.g. after a `MOVED`).
    pub fn cluster<I, S>(nodes: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(|s| s.as_ref().to_string()).collect();
        Ok(Target::Cluster(Box::new(
            ::redis::cluster::ClusterClientBuilder::new(nodes)
                .retries(1)
                .connection_timeout(Duration::from_secs(1))
                .response_timeout(Duration::from_secs(1))
                .build()?,
        )))
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Standalone(c) => write!(f, "Standalone({:?})", c.get_connection_info().addr()),
            Target::Cluster(_) => f.write_str("Cluster"),
        }
    }
}
