//! The async (tokio) client: a multiplexed connection (or an async Cluster
//! connection) cloned per call, rebuilt after a failure.

use std::sync::Mutex;
use std::vec::Vec;

use super::{
    is_noscript, Backoff, Degrade, Error, Outcome, RedisConfig, RedisPolicy, Source, Target,
};

#[derive(Clone)]
enum Conn {
    Single(::redis::aio::MultiplexedConnection),
    Cluster(::redis::cluster_async::ClusterConnection),
}

/// A GCRA policy enforced on Redis, from async (tokio) code.
///
/// Many concurrent checks share one multiplexed connection (requests are
/// pipelined on it by the `redis` crate). Cheap to share behind an `Arc`.
///
/// ```no_run
/// # async fn demo() {
/// use cellrate::redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
/// use cellrate::Quota;
///
/// let policy = RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap();
/// let limiter = AsyncRedisGcra::new(
///     Target::standalone("redis://127.0.0.1:6379/").unwrap(),
///     policy,
///     RedisConfig::new(FailurePolicy::Closed),
/// ).unwrap();
/// let outcome = limiter.check_n("alice", None, 1).await.unwrap();
/// println!("admitted: {}", outcome.is_admitted());
/// # }
/// ```
pub struct AsyncRedisGcra {
    target: Target,
    policy: RedisPolicy,
    degrade: Degrade,
    backoff: Backoff,
    conn: Mutex<Option<Conn>>,
    connecting: tokio::sync::Mutex<()>,
}

impl AsyncRedisGcra {
    /// A limiter for `policy` on `target`. Connects lazily (the first check).
    pub fn new(target: Target, policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        let degrade = Degrade::new(config, policy.tiers().len())?;
        Ok(AsyncRedisGcra {
            target,
            policy,
            degrade,
            backoff: Backoff::default(),
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RedisPolicy {
        &self.policy
    }

    /// `cost` cells for `client` (and `scope`), with the failure policy
    /// applied; errors only for a bad key. See [`RedisGcra::check_n`](super::RedisGcra::check_n).
    pub async fn check_n(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        let tried = self.try_check_n(client, scope, cost).await;
        self.degrade
            .settle(tried, &self.policy, client, scope, cost)
    }

    /// Like [`check_n`](Self::check_n) but returns Redis' failure instead of
    /// applying the failure policy.
    pub async fn try_check_n(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        self.policy.validate(client, scope)?;
        if let Some(d) = self.policy.too_large(cost) {
            return Ok(Outcome::new(
                std::vec![Err(d); self.policy.tiers().len()],
                Source::Redis,
            ));
        }
        let mut out = Vec::with_capacity(1);
        self.run(client, scope, cost, &mut out).await?;
        out.pop().ok_or(Error::BadReply)
    }

    fn current(&self) -> Option<Conn> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, conn: Option<Conn>) {
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = conn;
    }

    async fn connection(&self) -> Result<Conn, Error> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        // One task connects; the others wait for it and reuse the result.
        let _one = self.connecting.lock().await;
        if let Some(c) = self.current() {
            return Ok(c);
        }
        let config = self.degrade.config();
        if !self.backoff.may_try(config.reconnect_interval) {
            return Err(Error::Backoff);
        }
        let timeout = config.timeout;
        let made = tokio::time::timeout(timeout, async {
            match &self.target {
                Target::Standalone(client) => {
                    let cfg = ::redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout));
                    client
                        .get_multiplexed_async_connection_with_config(&cfg)
                        .await
                        .map(Conn::Single)
                }
                Target::Cluster(client) => client.get_async_connection().await.map(Conn::Cluster),
            }
        })
        .await;
        match made {
            Ok(Ok(c)) => {
                self.backoff.succeeded();
                self.set(Some(c.clone()));
                Ok(c)
            }
            Ok(Err(e)) => {
                self.backoff.failed();
                Err(Error::Redis(e))
            }
            Err(_) => {
                self.backoff.failed();
                Err(Error::Timeout)
            }
        }
    }

    /// One check-script call for one request (reloading the script once
    /// after `NOSCRIPT`), within the timeout.
    async fn run(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
        out: &mut Vec<Outcome>,
    ) -> Result<(), Error> {
        let mut conn = self.connection().await?;
        let (script, cmd) = self.policy.check_cmd(&[(client, scope, cost)]);
        let timeout = self.degrade.config().timeout;
        let reply = tokio::time::timeout(timeout, async {
            let first = match &mut conn {
                Conn::Single(c) => cmd.query_async::<Vec<i64>>(c).await,
                Conn::Cluster(c) => cmd.query_async::<Vec<i64>>(c).await,
            };
            match first {
                Err(e) if is_noscript(&e) => match &mut conn {
                    Conn::Single(c) => {
                        script.load_async(c).await?;
                        cmd.query_async::<Vec<i64>>(c).await
                    }
                    Conn::Cluster(c) => {
                        script.load_async(c).await?;
                        cmd.query_async::<Vec<i64>>(c).await
                    }
                },
                other => other,
            }
        })
        .await;
        match reply {
            Ok(Ok(reply)) => self
                .policy
                .decode_checks(&reply, core::iter::once(cost), out),
            Ok(Err(e)) => {
                self.set(None);
                Err(Error::Redis(e))
            }
            Err(_) => {
                self.set(None);
                Err(Error::Timeout)
            }
        }
    }
}

impl core::fmt::Debug for AsyncRedisGcra {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AsyncRedisGcra")
            .field("target", &self.target)
            .field("policy", &self.policy)
            .finish()
    }
}
