//! The async (tokio) client: a multiplexed connection (or an async Cluster
//! connection) cloned per call, rebuilt after a failure; concurrent checks coalesced into shared script
//! calls (see [`AsyncRedisGcra`]).

use std::collections::VecDeque;
use std::string::{String, ToString};
use std::sync::{Arc, Mutex};
use std::vec::Vec;

use super::client::{Check, Limits};
use super::degrade::{call_error, is_transport};
use super::{
    config::Endpoint, is_noscript, Backoff, Error, FailurePolicy, Outcome, RedisConfig,
    RedisPolicy, Target,
};

#[derive(Clone)]
enum Conn {
    Single(::redis::aio::MultiplexedConnection),
    Cluster(::redis::cluster_async::ClusterConnection),
}

/// A GCRA policy enforced on Redis, from async (tokio) code.
///
/// Many concurrent checks share one multiplexed connection, and on a
/// standalone server they share script calls too (see *Coalescing* below).
/// Cheap to share behind an `Arc`; needs a tokio runtime.
///
/// # Coalescing
///
/// On a standalone server, concurrent checks ride together: a check joins a
/// queue, and one task at a time (spawned by the check that finds no task
/// running) takes everything queued, up to [`MAX_KEYS_PER_CALL`](super::MAX_KEYS_PER_CALL) keys, and
/// decides it in **one** check-script call, in queue order at one server
/// time, exactly as [`RedisGcra::try_check_batch`](super::RedisGcra::try_check_batch)
/// would; then it takes what queued meanwhile, until the queue is empty. A
/// check alone goes alone (one request, the single script), so nothing waits
/// for company; under load, checks that would have been pipelined one
/// script call each share calls instead, and the server runs one script per
/// batch rather than one per check (the figures are in docs/design/redis.md
/// in the repository). The task is
/// spawned on the caller's tokio runtime and answers every request it
/// takes; a check whose answer is lost (the runtime shutting down) reports
/// [`Error::Timeout`], which the failure policy then decides. On a Cluster
/// each check is its own call (different clients' keys live on different
/// nodes).
///
/// ```no_run
/// # async fn demo() {
/// use cellrate_redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
/// use cellrate::Quota;
///
/// let policy = RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap();
/// let limiter = AsyncRedisGcra::new(
///     Target::standalone("redis://127.0.0.1:6379/").unwrap(),
///     policy,
///     RedisConfig::new(FailurePolicy::Closed),
/// ).unwrap();
/// let outcome = limiter.check_n("alice", None, 1).await.unwrap();
/// println!("admitted: {}", outcome.tiers().is_admitted());
/// # }
/// ```
pub struct AsyncRedisGcra {
    inner: Arc<Inner>,
}

/// What the checks and the coalescing task share.
struct Inner {
    link: Arc<Link>,
    limits: Limits,
    queue: Mutex<Queue>,
}

/// The server and the connection to it: shared by a limiter and those
/// made from it by [`AsyncRedisGcra::with_policy`].
struct Link {
    target: Target,
    backoff: Backoff,
    conn: Mutex<Option<Conn>>,
    connecting: tokio::sync::Mutex<()>,
}

/// Checks waiting for the coalescing task, and whether it runs.
#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    running: bool,
}

/// One queued check and where its answer goes.
struct Waiting {
    client: String,
    scope: Option<String>,
    cost: u64,
    answer: tokio::sync::oneshot::Sender<Result<Outcome, Error>>,
}

impl AsyncRedisGcra {
    /// A limiter for `policy` on `target`. Connects lazily (the first check).
    pub fn new(target: Target, policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        Ok(AsyncRedisGcra {
            inner: Arc::new(Inner {
                link: Arc::new(Link {
                    target,
                    backoff: Backoff::default(),
                    conn: Mutex::new(None),
                    connecting: tokio::sync::Mutex::new(()),
                }),
                limits: Limits::new(policy, config)?,
                queue: Mutex::new(Queue::default()),
            }),
        })
    }

    /// A limiter for `policy` with the failure policy `failure` (the other
    /// settings as this one's), over this one's server and connection (no
    /// new connection, and a failing server stays in its reconnect
    /// backoff): what a configuration reload makes. The keys of a tier are
    /// named by the prefix, the client and the tier's **name**, so a tier
    /// kept by name keeps every client's state on the server. A state says
    /// which parameters it was written under (when they are not the tier's
    /// first ones under the prefix, which the fleet records on the server,
    /// so a limiter made fresh with new parameters reads them alike), and
    /// the first call that reads it under others re-expresses it and
    /// writes it back, as the
    /// in-process `Algorithm::translate` does at that call's server time:
    /// the **cells used are kept** (at most the new burst or limit), so a
    /// raise never refuses, at that instant, what the old quota would
    /// admit, a lower never admits what it would refuse, and a mixed change
    /// moves the allowance by exactly the change of burst, floored at 0
    /// (docs/design/reconfigure.md in the repository). With a
    /// [`Fallback`](FailurePolicy::Fallback), a tier kept by name, scope
    /// and algorithm with the same fallback quota shares this limiter's
    /// fallback table; the others start empty. Checks already queued on
    /// this limiter are decided by it.
    ///
    /// ```no_run
    /// use cellrate_redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let rl = AsyncRedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", Quota::per_minute(100).at_hz(1_000)).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Open),
    /// ).unwrap();
    /// let raised = rl.with_policy(
    ///     RedisPolicy::single("rl", "api", Quota::per_minute(500).at_hz(1_000)).unwrap(),
    ///     FailurePolicy::Open,
    /// ).unwrap();
    /// # let _ = raised;
    /// ```
    pub fn with_policy(&self, policy: RedisPolicy, failure: FailurePolicy) -> Result<Self, Error> {
        Ok(AsyncRedisGcra {
            inner: Arc::new(Inner {
                link: Arc::clone(&self.inner.link),
                limits: self.inner.limits.with_policy(policy, failure)?,
                queue: Mutex::new(Queue::default()),
            }),
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RedisPolicy {
        &self.inner.limits.policy
    }

    /// Registers the `cellrate_keyed_*` series (feature `metrics`; see
    /// [`cellrate_metrics`]) of each fallback table that has none
    /// yet, labelled `limiter` and the tier's name, with the recorder
    /// installed now; the tables publish them as they decide. The tower
    /// layer does this when it is built. A limiter made by `with_policy`
    /// shares the tables it kept, and their series.
    ///
    /// ```no_run
    /// use cellrate_redis::{AsyncRedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let q = Quota::per_minute(100).at_hz(1_000);
    /// let rl = AsyncRedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", q).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Fallback(vec![q])),
    /// ).unwrap();
    /// rl.register_fallback_metrics("worker");
    /// ```
    #[cfg(feature = "metrics")]
    pub fn register_fallback_metrics(&self, limiter: &str) {
        self.inner.limits.register_fallback_metrics(limiter);
    }

    /// The connection settings and failure policy.
    pub fn config(&self) -> &RedisConfig {
        self.inner.limits.config()
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
        self.settle(tried, client, scope, cost)
    }

    /// The failure policy's answer to `tried`, the result of a
    /// [`try_check_n`](Self::try_check_n) of the same request: what
    /// [`check_n`](Self::check_n) returns, for a caller that measures or
    /// logs the try itself first.
    ///
    /// ```no_run
    /// # async fn f(rl: cellrate_redis::AsyncRedisGcra) {
    /// let start = std::time::Instant::now();
    /// let tried = rl.try_check_n("client-42", None, 1).await;
    /// println!("redis took {:?}", start.elapsed());
    /// let outcome = rl.settle(tried, "client-42", None, 1);
    /// # let _ = outcome;
    /// # }
    /// ```
    pub fn settle(
        &self,
        tried: Result<Outcome, Error>,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        let limits = &self.inner.limits;
        limits
            .degrade
            .settle(tried, &limits.policy, client, scope, cost)
    }

    /// Like [`check_n`](Self::check_n) but returns Redis' failure instead of
    /// applying the failure policy.
    pub async fn try_check_n(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        let inner = &self.inner;
        if let Some(early) = inner.limits.precheck(client, scope, cost)? {
            return Ok(early);
        }
        let deadline = inner.deadline();
        if let Endpoint::Cluster(_) = inner.link.target.endpoint {
            let mut out = Vec::with_capacity(1);
            inner
                .run(&[(client, scope, cost)], &mut out, deadline)
                .await?;
            return out.pop().unwrap_or(Err(Error::BadReply));
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let start = {
            let mut queue = inner.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.waiting.push_back(Waiting {
                client: client.to_string(),
                scope: scope.map(str::to_string),
                cost,
                answer,
            });
            !core::mem::replace(&mut queue.running, true)
        };
        if start {
            tokio::spawn(Inner::coalesce(Arc::clone(inner)));
        }
        // This check's own deadline, whatever the batch ahead of it does: a
        // check that gives up is dropped from the queue (its closed channel)
        // or, if already in a call, its answer is discarded.
        match tokio::time::timeout_at(deadline, answered).await {
            Ok(answer) => answer.unwrap_or(Err(Error::Timeout)),
            Err(_) => Err(Error::Timeout),
        }
    }
}

impl Inner {
    /// The coalescing task: decides what is queued, a script call at a time,
    /// until the queue is empty.
    async fn coalesce(self: Arc<Self>) {
        /// Marks the task stopped if it is dropped mid-call (the runtime
        /// shutting down): the checks still queued then get no answer (their
        /// channels close: `Error::Timeout`), so none waits for a task that
        /// is gone, and a later check starts a new one.
        struct Stopped<'a> {
            queue: &'a Mutex<Queue>,
            /// Set when the task ends normally (it has then stopped itself).
            done: bool,
        }
        impl Drop for Stopped<'_> {
            fn drop(&mut self) {
                if !self.done {
                    let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                    queue.running = false;
                    queue.waiting.clear();
                }
            }
        }
        let mut stopped = Stopped {
            queue: &self.queue,
            done: false,
        };
        let per_call = self.limits.policy.requests_per_call();
        loop {
            let batch: Vec<Waiting> = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.waiting.is_empty() {
                    // Checked and stopped under the same lock a check
                    // queues under: a check either is taken here or starts
                    // a new task (whose queue the guard must then not touch).
                    queue.running = false;
                    stopped.done = true;
                    return;
                }
                // Checks whose caller gave up (its deadline passed) are
                // dropped, never charged.
                queue.waiting.retain(|w| !w.answer.is_closed());
                let n = queue.waiting.len().min(per_call);
                queue.waiting.drain(..n).collect()
            };
            if batch.is_empty() {
                continue;
            }
            let requests: Vec<Check<'_>> = batch
                .iter()
                .map(|w| (w.client.as_str(), w.scope.as_deref(), w.cost))
                .collect();
            let mut out = Vec::with_capacity(batch.len());
            match self.run(&requests, &mut out, self.deadline()).await {
                Ok(()) if out.len() == batch.len() => {
                    for (w, outcome) in batch.into_iter().zip(out) {
                        let _ = w.answer.send(outcome);
                    }
                }
                Ok(()) => {
                    for w in batch {
                        let _ = w.answer.send(Err(Error::BadReply));
                    }
                }
                Err(e) => {
                    for w in batch {
                        let _ = w.answer.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// When a call starting now must be answered: now + the timeout.
    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.limits.timeout()
    }

    fn current(&self) -> Option<Conn> {
        self.link
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, conn: Option<Conn>) {
        *self.link.conn.lock().unwrap_or_else(|e| e.into_inner()) = conn;
    }

    /// The shared connection, or a new one made (handshake included)
    /// before `deadline`; at most one attempt per reconnect interval after a
    /// failure.
    async fn connection(&self, deadline: tokio::time::Instant) -> Result<Conn, Error> {
        if let Some(c) = self.current() {
            return Ok(c);
        }
        // One task connects; the others wait for it (within their own
        // deadline) and reuse the result.
        let Ok(_one) = tokio::time::timeout_at(deadline, self.link.connecting.lock()).await else {
            return Err(Error::Timeout);
        };
        if let Some(c) = self.current() {
            return Ok(c);
        }
        if !self
            .link
            .backoff
            .may_try(self.limits.config().reconnect_interval)
        {
            return Err(Error::Backoff);
        }
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        if timeout.is_zero() {
            return Err(Error::Timeout);
        }
        let made = tokio::time::timeout_at(deadline, async {
            match &self.link.target.endpoint {
                Endpoint::Standalone(client) => {
                    let cfg = ::redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(timeout))
                        .set_response_timeout(Some(timeout));
                    client
                        .get_multiplexed_async_connection_with_config(&cfg)
                        .await
                        .map(Conn::Single)
                }
                Endpoint::Cluster(client) => client
                    .get_async_connection_with_config(
                        ::redis::cluster::ClusterConfig::new()
                            .set_connection_timeout(timeout)
                            .set_response_timeout(timeout),
                    )
                    .await
                    .map(Conn::Cluster),
            }
        })
        .await;
        match made {
            Ok(Ok(c)) => {
                self.set(Some(c.clone()));
                Ok(c)
            }
            Ok(Err(e)) => {
                self.link.backoff.failed();
                Err(call_error(e))
            }
            Err(_) => {
                self.link.backoff.failed();
                Err(Error::Timeout)
            }
        }
    }

    /// One check-script call for `requests` (reloading the script once
    /// after `NOSCRIPT`), within the timeout; their outcomes into `out`.
    async fn run(
        &self,
        requests: &[Check<'_>],
        out: &mut Vec<Result<Outcome, Error>>,
        deadline: tokio::time::Instant,
    ) -> Result<(), Error> {
        let failures = self.link.backoff.failures();
        let mut conn = self.connection(deadline).await?;
        let learned = match self.limits.bases(failures) {
            Some(learned) => learned,
            None => {
                // This limiter's bases, learned before its first script
                // call and its first after each connection failure (one
                // round trip).
                let record = self.limits.record_cmd();
                let reply = tokio::time::timeout_at(deadline, async {
                    match &mut conn {
                        Conn::Single(c) => record.query_async::<Vec<String>>(c).await,
                        Conn::Cluster(c) => record.query_async::<Vec<String>>(c).await,
                    }
                })
                .await;
                self.limits.learn(&self.answered(reply)?, failures)?
            }
        };
        let (script, cmd) = self.limits.policy.check_cmd(requests, learned.bases());
        let reply = tokio::time::timeout_at(deadline, async {
            match &mut conn {
                Conn::Single(c) => eval(c, script, &cmd).await,
                Conn::Cluster(c) => eval(c, script, &cmd).await,
            }
        })
        .await;
        self.limits
            .policy
            .decode_checks(&self.answered(reply)?, requests, out)
    }

    /// A reply within the deadline, or the error it is; a connection that
    /// failed or timed out is dropped, and reconnects held back for the
    /// interval.
    fn answered<T>(
        &self,
        reply: Result<::redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, Error> {
        match reply {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => {
                if is_transport(&e) {
                    // The connection is gone or stuck: drop it, and hold
                    // back reconnects for the interval.
                    self.set(None);
                    self.link.backoff.failed();
                }
                Err(call_error(e))
            }
            Err(_) => {
                self.set(None);
                self.link.backoff.failed();
                Err(Error::Timeout)
            }
        }
    }
}

/// `cmd`, a call of `script`, sent again once after loading the script if
/// the server answers `NOSCRIPT`.
async fn eval(
    conn: &mut impl ::redis::aio::ConnectionLike,
    script: &::redis::Script,
    cmd: &::redis::Cmd,
) -> ::redis::RedisResult<Vec<i64>> {
    match cmd.query_async(conn).await {
        Err(e) if is_noscript(&e) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        other => other,
    }
}

impl core::fmt::Debug for AsyncRedisGcra {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AsyncRedisGcra")
            .field("target", &self.inner.link.target)
            .field("policy", self.policy())
            .finish()
    }
}
