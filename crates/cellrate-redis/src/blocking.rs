//! The blocking client: a small pool of connections. A decision takes an
//! idle connection out (or opens one), makes its round trip without holding
//! any lock, and puts it back; so each caller waits at most its own timeout,
//! never behind another caller's. A connection that failed is dropped, and a
//! transport failure holds back new connects for the reconnect interval.

use std::boxed::Box;
use std::string::String;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use std::vec::Vec;

use super::client::{Check, Learned, Limits};
use super::degrade::{call_error, is_transport};
use super::scripts::lease_script;
use super::{
    config::Endpoint, is_noscript, Backoff, Error, FailurePolicy, Outcome, RedisConfig,
    RedisPolicy, Request, Target,
};

enum Conn {
    Single(::redis::Connection),
    Cluster(Box<::redis::cluster::ClusterConnection>),
}

impl Conn {
    fn as_dyn(&mut self) -> &mut dyn ::redis::ConnectionLike {
        match self {
            Conn::Single(c) => c,
            Conn::Cluster(c) => &mut **c,
        }
    }

    /// Bounds the next reads and writes by what is left until `deadline`;
    /// a timeout error if nothing is.
    fn arm(&mut self, deadline: Instant) -> ::redis::RedisResult<()> {
        // The Cluster connection retries a failed command once (e.g. after
        // a `MOVED`), waiting up to the socket timeout again: each attempt
        // gets half.
        let attempts = match self {
            Conn::Single(_) => 1,
            Conn::Cluster(_) => 2,
        };
        self.arm_split(deadline, attempts)
    }

    /// Like [`arm`](Self::arm) for an exchange of `replies` replies: the
    /// client crate waits up to the socket timeout for each reply (even
    /// after one has failed), so each gets `1/replies` of what is left.
    fn arm_split(&mut self, deadline: Instant, replies: usize) -> ::redis::RedisResult<()> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .map(|d| d / replies.max(1) as u32)
            .filter(|d| !d.is_zero())
            .ok_or_else(deadline_passed)?;
        match self {
            Conn::Single(c) => {
                c.set_read_timeout(Some(left))?;
                c.set_write_timeout(Some(left))
            }
            Conn::Cluster(c) => {
                c.set_read_timeout(Some(left))?;
                c.set_write_timeout(Some(left))
            }
        }
    }
}

/// The error of a call whose deadline passed before its next step.
fn deadline_passed() -> ::redis::RedisError {
    ::redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "deadline passed",
    ))
}

/// Most idle connections a [`RedisGcra`] keeps for reuse.
///
/// ```
/// assert_eq!(cellrate_redis::MAX_IDLE, 16);
/// ```
pub const MAX_IDLE: usize = 16;

/// A GCRA policy enforced on Redis, from blocking code.
///
/// Threads share a pool of connections (at most [`MAX_IDLE`] kept idle; one
/// per concurrent caller while busy). Make one per "server"; share it through
/// an `Arc`.
///
/// ```no_run
/// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
/// use cellrate::Quota;
///
/// let policy = RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap();
/// let limiter = RedisGcra::new(
///     Target::standalone("redis://127.0.0.1:6379/").unwrap(),
///     policy,
///     RedisConfig::new(FailurePolicy::Open),
/// ).unwrap();
/// let outcome = limiter.check("alice").unwrap();
/// if !outcome.tiers().is_admitted() {
///     println!("retry after {:?} µs", outcome.tiers().denied().and_then(|d| d.retry_after()));
/// }
/// ```
pub struct RedisGcra {
    link: Arc<Link>,
    limits: Limits,
}

/// The server and the idle connections to it: shared by a limiter and
/// those made from it by [`RedisGcra::with_policy`].
struct Link {
    target: Target,
    backoff: Backoff,
    idle: Mutex<Vec<Conn>>,
    /// For a standalone RESP2 server: how to connect with no handshake
    /// inside the client crate (whose pipelined handshake may wait its
    /// timeout once per command), then the handshake one command at a time.
    bare: Option<Bare>,
}

/// A client for the same server with no handshake of its own, and the
/// handshake (`AUTH`, `SELECT`) to send on each new connection.
struct Bare {
    client: ::redis::Client,
    handshake: Vec<::redis::Cmd>,
}

impl Bare {
    fn new(client: &::redis::Client) -> Option<Bare> {
        let info = client.get_connection_info().clone();
        let asked = info.redis_settings().clone();
        if asked.protocol() != ::redis::ProtocolVersion::RESP2 {
            return None;
        }
        let mut handshake = Vec::new();
        if let Some(password) = asked.password() {
            let mut auth = ::redis::cmd("AUTH");
            if let Some(user) = asked.username() {
                auth.arg(user);
            }
            auth.arg(password);
            handshake.push(auth);
        }
        if asked.db() != 0 {
            let mut select = ::redis::cmd("SELECT");
            select.arg(asked.db());
            handshake.push(select);
        }
        let plain = ::redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        let client = ::redis::Client::open(info.set_redis_settings(plain)).ok()?;
        Some(Bare { client, handshake })
    }
}

impl RedisGcra {
    /// A limiter for `policy` on `target`. Connects lazily (the first check).
    pub fn new(target: Target, policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        Ok(RedisGcra {
            limits: Limits::new(policy, config)?,
            link: Arc::new(Link {
                bare: match &target.endpoint {
                    Endpoint::Standalone(client) => Bare::new(client),
                    Endpoint::Cluster(_) => None,
                },
                target,
                backoff: Backoff::default(),
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// A limiter for `policy` with the failure policy `failure` (the other
    /// settings as this one's), over this one's server and idle
    /// connections: what a configuration reload makes. Every client's state
    /// on the server is kept for a tier kept by name, its cells used
    /// re-expressed under the new parameters at its first check (as the
    /// in-process `Algorithm::translate` does), and so is its fallback
    /// state when the tier's scope, algorithm and fallback quota are the
    /// same; see
    /// [`AsyncRedisGcra::with_policy`](super::AsyncRedisGcra::with_policy).
    ///
    /// ```no_run
    /// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let rl = RedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", Quota::per_minute(100).at_hz(1_000)).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Closed),
    /// ).unwrap();
    /// let raised = rl.with_policy(
    ///     RedisPolicy::single("rl", "api", Quota::per_minute(500).at_hz(1_000)).unwrap(),
    ///     FailurePolicy::Closed,
    /// ).unwrap();
    /// # let _ = raised;
    /// ```
    pub fn with_policy(&self, policy: RedisPolicy, failure: FailurePolicy) -> Result<Self, Error> {
        Ok(RedisGcra {
            link: Arc::clone(&self.link),
            limits: self.limits.with_policy(policy, failure)?,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RedisPolicy {
        &self.limits.policy
    }

    /// Registers the fallback tables' `cellrate_keyed_*` series (feature
    /// `metrics`), as
    /// [`AsyncRedisGcra::register_fallback_metrics`](super::AsyncRedisGcra::register_fallback_metrics)
    /// does.
    ///
    /// ```no_run
    /// use cellrate_redis::{RedisGcra, FailurePolicy, RedisConfig, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let q = Quota::per_minute(100).at_hz(1_000);
    /// let rl = RedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", q).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Fallback(vec![q])),
    /// ).unwrap();
    /// rl.register_fallback_metrics("worker");
    /// ```
    #[cfg(feature = "metrics")]
    pub fn register_fallback_metrics(&self, limiter: &str) {
        self.limits.register_fallback_metrics(limiter);
    }

    /// The connection settings and failure policy.
    pub fn config(&self) -> &RedisConfig {
        self.limits.config()
    }

    /// One cell for `client`, with the failure policy applied.
    pub fn check(&self, client: &str) -> Result<Outcome, Error> {
        self.check_n(client, None, 1)
    }

    /// `cost` cells for `client` (and `scope`, for per-scope tiers), with the
    /// failure policy applied: the only errors are a key that breaks the
    /// layout ([`Error::InvalidKey`], [`Error::ScopeMismatch`]). A cost that
    /// can never fit is a denial without a round trip. Never panics.
    pub fn check_n(&self, client: &str, scope: Option<&str>, cost: u64) -> Result<Outcome, Error> {
        self.settle(self.try_check_n(client, scope, cost), client, scope, cost)
    }

    /// Like [`check_n`](Self::check_n) but returns Redis' failure instead of
    /// applying the failure policy.
    pub fn try_check_n(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        let mut outcomes = self.try_check_batch(&[(client, scope, cost)])?;
        outcomes.pop().unwrap_or(Err(Error::BadReply))
    }

    /// Many checks in one round trip. Each request is `(client, scope,
    /// cost)`; they are decided in order, each exactly as if sent alone, and
    /// all at the same server time when they fit one script call. On a
    /// standalone server one call carries up to [`MAX_KEYS_PER_CALL`](crate::MAX_KEYS_PER_CALL) keys;
    /// more are split into calls pipelined in the same round trip, and a
    /// call the server answers `NOSCRIPT` is sent again once after `SCRIPT
    /// LOAD` (the calls that did run are not repeated). On a Cluster each
    /// request is its own call and its own round trip (a client's keys
    /// share a slot, different clients' need not; the blocking Cluster
    /// connection does not pipeline). A failure of Redis or of the
    /// connection fails the whole batch (the outer error; no failure policy
    /// here: the caller decides); a key that holds no TAT fails only the
    /// requests that use it ([`Error::CorruptKey`] in their place), and
    /// every other request is decided as if they were absent.
    ///
    /// ```no_run
    /// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let rl = RedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Closed),
    /// ).unwrap();
    /// let outcomes = rl.try_check_batch(&[("a", None, 1), ("b", None, 1)]).unwrap();
    /// assert_eq!(outcomes.len(), 2);
    /// assert!(outcomes.iter().all(|o| o.is_ok()));
    /// ```
    pub fn try_check_batch(
        &self,
        requests: &[(&str, Option<&str>, u64)],
    ) -> Result<Vec<Result<Outcome, Error>>, Error> {
        self.limits
            .batch(requests, |remote, out| self.decide(remote, out))
    }

    /// Decides `requests` (valid, each cost within every burst) on Redis,
    /// appending one outcome per request to `out`, in order.
    fn decide(
        &self,
        requests: &[Check<'_>],
        out: &mut Vec<Result<Outcome, Error>>,
    ) -> Result<(), Error> {
        let policy = &self.limits.policy;
        let per_call = match self.link.target.endpoint {
            Endpoint::Cluster(_) => 1,
            Endpoint::Standalone(_) => policy.requests_per_call(),
        };
        let deadline = self.deadline();
        let (mut conn, learned) = self.ready(deadline)?;
        let bases = learned.bases();
        let replies = if requests.len() <= per_call
            || matches!(self.link.target.endpoint, Endpoint::Cluster(_))
        {
            // One call, or a Cluster (whose blocking connection does not
            // pipeline): one round trip per call.
            requests
                .chunks(per_call)
                .map(|chunk| {
                    let (script, cmd) = policy.check_cmd(chunk, bases);
                    conn.arm(deadline)?;
                    let reply = cmd.query::<Vec<i64>>(conn.as_dyn());
                    match reply {
                        Err(e) if is_noscript(&e) => {
                            conn.arm(deadline)?;
                            script.load(conn.as_dyn())?;
                            conn.arm(deadline)?;
                            cmd.query(conn.as_dyn())
                        }
                        other => other,
                    }
                })
                .collect::<::redis::RedisResult<Vec<Vec<i64>>>>()
        } else {
            let cmds: Vec<(&::redis::Script, ::redis::Cmd)> = requests
                .chunks(per_call)
                .map(|chunk| policy.check_cmd(chunk, bases))
                .collect();
            self.pipelined(&mut conn, &cmds, deadline)
        };
        let replies = match replies {
            Ok(r) => {
                self.link.backoff.succeeded();
                self.put(conn);
                r
            }
            Err(e) => return Err(self.failed(conn, e)),
        };
        for (reply, chunk) in replies.iter().zip(requests.chunks(per_call)) {
            policy.decode_checks(reply, chunk, out)?;
        }
        Ok(())
    }

    /// Sends `cmds` in one pipeline; the calls answered `NOSCRIPT` are sent
    /// again once after loading the script. One reply per command, in order.
    fn pipelined(
        &self,
        conn: &mut Conn,
        cmds: &[(&::redis::Script, ::redis::Cmd)],
        deadline: Instant,
    ) -> ::redis::RedisResult<Vec<Vec<i64>>> {
        let mut replies: Vec<Option<Vec<i64>>> = std::vec![None; cmds.len()];
        let mut pending: Vec<usize> = (0..cmds.len()).collect();
        for attempt in 0..2 {
            let mut pipe = ::redis::pipe();
            pipe.ignore_errors();
            for &i in &pending {
                pipe.add_command(cmds[i].1.clone());
            }
            conn.arm_split(deadline, pending.len())?;
            let values: Vec<::redis::Value> = pipe.query(conn.as_dyn())?;
            if values.len() != pending.len() {
                return Err(bad_reply());
            }
            let mut again = Vec::new();
            for (&i, value) in pending.iter().zip(values) {
                match value {
                    ::redis::Value::ServerError(e) => {
                        let e = ::redis::RedisError::from(e);
                        if attempt == 0 && is_noscript(&e) {
                            again.push(i);
                        } else {
                            return Err(e);
                        }
                    }
                    ::redis::Value::Array(items) => {
                        let ints: Option<Vec<i64>> = items
                            .into_iter()
                            .map(|v| match v {
                                ::redis::Value::Int(n) => Some(n),
                                _ => None,
                            })
                            .collect();
                        replies[i] = Some(ints.ok_or_else(bad_reply)?);
                    }
                    _ => return Err(bad_reply()),
                }
            }
            if again.is_empty() {
                break;
            }
            let mut loaded: Vec<&str> = Vec::new();
            for &i in &again {
                let script = cmds[i].0;
                if !loaded.contains(&script.get_hash()) {
                    conn.arm(deadline)?;
                    script.load(conn.as_dyn())?;
                    loaded.push(script.get_hash());
                }
            }
            pending = again;
        }
        replies
            .into_iter()
            .map(|r| r.ok_or_else(bad_reply))
            .collect()
    }

    /// The failure policy's answer to `tried`, the result of a
    /// [`try_check_n`](Self::try_check_n) of the same request: what
    /// [`check_n`](Self::check_n) returns, for a caller that measures or
    /// logs the try itself first.
    ///
    /// ```no_run
    /// # async fn f(rl: cellrate_redis::RedisGcra) {
    /// let start = std::time::Instant::now();
    /// let tried = rl.try_check_n("client-42", None, 1);
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
        let limits = &self.limits;
        limits
            .degrade
            .settle(tried, &limits.policy, client, scope, cost)
    }

    /// Runs the lease script once: `(cells granted, outcome)`.
    pub(crate) fn run(&self, keys: &[String], request: Request) -> Result<(u64, Outcome), Error> {
        let deadline = self.deadline();
        let (mut conn, learned) = self.ready(deadline)?;
        let policy = &self.limits.policy;
        let inv = policy.invocation(lease_script(), keys, request, learned.bases());
        let reply = conn
            .arm(deadline)
            .and_then(|()| inv.invoke::<Vec<i64>>(conn.as_dyn()));
        match reply {
            Ok(reply) => {
                self.link.backoff.succeeded();
                self.put(conn);
                policy.decode(&reply, keys, request.cost)
            }
            Err(e) => Err(self.failed(conn, e)),
        }
    }

    /// When a call starting now must be answered: now + the timeout.
    fn deadline(&self) -> Instant {
        Instant::now() + self.limits.timeout()
    }

    /// A connection ([`take`](Self::take)) and this limiter's bases,
    /// learned on it first (one round trip) before the first script call
    /// and the first after each connection failure: no script runs before.
    fn ready(&self, deadline: Instant) -> Result<(Conn, Arc<Learned>), Error> {
        let mut conn = self.take(deadline)?;
        let failures = self.link.backoff.failures();
        if let Some(learned) = self.limits.bases(failures) {
            return Ok((conn, learned));
        }
        let reply = conn
            .arm(deadline)
            .and_then(|()| self.limits.record_cmd().query::<Vec<String>>(conn.as_dyn()));
        match reply {
            Ok(reply) => {
                self.link.backoff.succeeded();
                let learned = self.limits.learn(&reply, failures);
                match learned {
                    Ok(learned) => Ok((conn, learned)),
                    Err(e) => {
                        self.put(conn);
                        Err(e)
                    }
                }
            }
            Err(e) => Err(self.failed(conn, e)),
        }
    }

    /// An idle connection, or a new one made before `deadline`.
    fn take(&self, deadline: Instant) -> Result<Conn, Error> {
        let idle = self
            .link
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        match idle {
            Some(c) => Ok(c),
            None => self.connect(deadline),
        }
    }

    fn put(&self, conn: Conn) {
        let mut idle = self.link.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// After an error: keep the connection if the server answered (e.g. a
    /// script error), else drop it, drop the idle ones (they share the fate
    /// of the server) and hold back reconnects for the interval.
    fn failed(&self, conn: Conn, e: ::redis::RedisError) -> Error {
        if is_transport(&e) {
            drop(conn);
            self.link
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            self.link.backoff.failed();
        } else {
            self.put(conn);
        }
        call_error(e)
    }

    /// A new connection, made (handshake included) before `deadline`; at
    /// most one attempt per reconnect interval after a failure.
    fn connect(&self, deadline: Instant) -> Result<Conn, Error> {
        if !self.link.backoff.may_try(self.config().reconnect_interval) {
            return Err(Error::Backoff);
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero());
        let made = match (left, &self.link.target.endpoint, &self.link.bare) {
            (None, _, _) => Err(deadline_passed()),
            (Some(left), _, Some(bare)) => {
                bare.client.get_connection_with_timeout(left).and_then(|c| {
                    let mut conn = Conn::Single(c);
                    for cmd in &bare.handshake {
                        conn.arm(deadline)?;
                        cmd.query::<::redis::Value>(conn.as_dyn())?;
                    }
                    Ok(conn)
                })
            }
            (Some(left), Endpoint::Standalone(client), None) => {
                client.get_connection_with_timeout(left).map(Conn::Single)
            }
            // A node's connect (handshake included) and its answer to
            // `CLUSTER SLOTS` get half of what is left each (the cluster
            // client tries the nodes one after the other until one answers).
            (Some(left), Endpoint::Cluster(client), _) => client
                .get_connection_with_config(
                    ::redis::cluster::ClusterConfig::new()
                        .set_connection_timeout(left / 2)
                        .set_response_timeout(left / 2),
                )
                .map(|c| Conn::Cluster(Box::new(c))),
        };
        match made {
            Ok(c) => Ok(c),
            Err(e) => {
                self.link.backoff.failed();
                // The cluster client wraps a node's timeout in its own error.
                Err(if e.is_timeout() || Instant::now() >= deadline {
                    Error::Timeout
                } else {
                    Error::Redis(e)
                })
            }
        }
    }
}

/// A reply of a shape the check script never sends.
fn bad_reply() -> ::redis::RedisError {
    ::redis::RedisError::from((
        ::redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply from the rate-limit script",
    ))
}

impl core::fmt::Debug for RedisGcra {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RedisGcra")
            .field("target", &self.link.target)
            .field("policy", self.policy())
            .finish()
    }
}
