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

#[cfg(feature = "serde")]
mod serial;

/// What a check answers while Redis cannot.
///
/// ```
/// use cellrate_redis::{FailurePolicy, RedisConfig};
/// use cellrate::Quota;
/// // While Redis is down, each server allows 2× the fleet-wide 100/min.
/// let cfg = RedisConfig::new(FailurePolicy::Fallback(vec![Quota::per_minute(200).at_hz(1_000)]));
/// assert!(matches!(cfg.failure(), FailurePolicy::Fallback(q) if q.len() == 1));
/// ```
///
/// With the `serde` feature it reads and writes `"open"`, `"closed"` or
/// `{ fallback = ["20/min", "6/min"] }`: each quota in either of the
/// [core's forms](cellrate::config#quotas-two-forms), at its own `hz` or
/// [`DEFAULT_HZ`](cellrate::config::DEFAULT_HZ) (the fallback re-expresses
/// it on its µs clock as a [`RedisTier`](crate::RedisTier) is), written
/// back in the human form:
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use cellrate_redis::FailurePolicy;
/// use cellrate::Quota;
/// let p: FailurePolicy = serde_json::from_str(r#"{"fallback": ["20/min"]}"#).unwrap();
/// assert_eq!(p, FailurePolicy::Fallback(vec![Quota::per_minute(20).at_hz(cellrate::config::DEFAULT_HZ)]));
/// assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"fallback":["20/min, burst 20, hz 1000000000"]}"#);
/// assert_eq!(serde_json::from_str::<FailurePolicy>(r#""closed""#).unwrap(), FailurePolicy::Closed);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
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
    Fallback(
        #[cfg_attr(feature = "serde", serde(serialize_with = "serial::human_quotas"))] Vec<Quota>,
    ),
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

/// Where to connect: one server or a Cluster, and the URLs it was made
/// from (what [`urls`](Self::urls) returns and serde writes back). Making
/// one only parses the URLs; nothing connects until the first check.
///
/// ```
/// use cellrate_redis::Target;
/// let t = Target::standalone("redis://127.0.0.1:6379/").unwrap();
/// let c = Target::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]).unwrap();
/// assert_eq!(c.urls(), ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
/// assert!(!t.is_cluster() && c.is_cluster());
/// ```
///
/// With the `serde` feature it reads and writes `{ standalone = "redis://…" }`
/// or `{ cluster = ["redis://…", …] }`; a URL the client cannot parse is
/// an error at its place:
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use cellrate_redis::Target;
/// let t: Target = serde_json::from_str(r#"{"standalone": "redis://127.0.0.1/"}"#).unwrap();
/// assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"standalone":"redis://127.0.0.1/"}"#);
/// assert!(serde_json::from_str::<Target>(r#"{"standalone": "http://x/"}"#).is_err());
/// # }
/// ```
#[derive(Clone)]
pub struct Target {
    urls: Vec<String>,
    pub(crate) endpoint: Endpoint,
}

/// The opened client of a [`Target`].
#[derive(Clone)]
pub(crate) enum Endpoint {
    /// A standalone server (or a primary).
    Standalone(::redis::Client),
    /// A Redis Cluster, from any of its nodes.
    Cluster(Box<::redis::cluster::ClusterClient>),
}

impl Target {
    /// A standalone server from a `redis://` URL.
    ///
    /// ```
    /// use cellrate_redis::Target;
    /// assert!(Target::standalone("redis://127.0.0.1/").is_ok());
    /// assert!(Target::standalone("http://127.0.0.1/").is_err());
    /// ```
    pub fn standalone(url: &str) -> Result<Self, Error> {
        Ok(Target {
            urls: std::vec![url.to_string()],
            endpoint: Endpoint::Standalone(::redis::Client::open(url)?),
        })
    }
    /// A Cluster from the URLs of some of its nodes. The limiters connect
    /// with the [`RedisConfig`] timeout (see [`RedisConfig::with_timeout`]);
    /// a failed command is retried once (e.g. after a `MOVED`).
    ///
    /// ```
    /// use cellrate_redis::Target;
    /// assert!(Target::cluster(["redis://127.0.0.1:7000/"]).is_ok());
    /// assert!(Target::cluster(Vec::<String>::new()).is_err());
    /// ```
    pub fn cluster<I, S>(nodes: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(|s| s.as_ref().to_string()).collect();
        let client = ::redis::cluster::ClusterClientBuilder::new(nodes.clone())
            .retries(1)
            .connection_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(1))
            .build()?;
        Ok(Target {
            urls: nodes,
            endpoint: Endpoint::Cluster(Box::new(client)),
        })
    }
    /// The URLs it was made from, as given: one for a standalone server,
    /// the nodes given for a Cluster. They may hold a password: mask it
    /// before showing them.
    ///
    /// ```
    /// use cellrate_redis::Target;
    /// let t = Target::standalone("redis://127.0.0.1:6379/").unwrap();
    /// assert_eq!(t.urls(), ["redis://127.0.0.1:6379/"]);
    /// ```
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
    /// Whether it is a Cluster.
    ///
    /// ```
    /// use cellrate_redis::Target;
    /// assert!(!Target::standalone("redis://127.0.0.1/").unwrap().is_cluster());
    /// ```
    pub fn is_cluster(&self) -> bool {
        matches!(self.endpoint, Endpoint::Cluster(_))
    }
}

/// Two targets are equal when they are of one kind and were made from the
/// same URLs.
impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.is_cluster() == other.is_cluster() && self.urls == other.urls
    }
}

impl Eq for Target {}

impl core::hash::Hash for Target {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.is_cluster().hash(state);
        self.urls.hash(state);
    }
}

/// The server's address only: the URLs may hold a password.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.endpoint {
            Endpoint::Standalone(c) => {
                write!(f, "Standalone({:?})", c.get_connection_info().addr())
            }
            Endpoint::Cluster(_) => f.write_str("Cluster"),
        }
    }
}
