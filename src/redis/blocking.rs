//! The blocking client: a small pool of connections. A decision takes an
//! idle connection out (or opens one), makes its round trip without holding
//! any lock, and puts it back; so each caller waits at most its own timeout,
//! never behind another caller's. A connection that failed is dropped, and a
//! transport failure holds back new connects for the reconnect interval.

use std::boxed::Box;
use std::string::String;
use std::sync::{Arc, Mutex};
use std::vec::Vec;

use super::{
    script, Backoff, Degrade, Error, Outcome, RedisConfig, RedisPolicy, Request, Source, Target,
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
}

/// Most idle connections a [`RedisGcra`] keeps for reuse.
///
/// ```
/// assert_eq!(cellrate::redis::MAX_IDLE, 16);
/// ```
pub const MAX_IDLE: usize = 16;

/// A GCRA policy enforced on Redis, from blocking code.
///
/// Threads share a pool of connections (at most [`MAX_IDLE`] kept idle; one
/// per concurrent caller while busy). Make one per "server"; share it through
/// an `Arc`.
///
/// ```no_run
/// use cellrate::redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
/// use cellrate::Quota;
///
/// let policy = RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap();
/// let limiter = RedisGcra::new(
///     Target::standalone("redis://127.0.0.1:6379/").unwrap(),
///     policy,
///     RedisConfig::new(FailurePolicy::Open),
/// ).unwrap();
/// let outcome = limiter.check("alice").unwrap();
/// if !outcome.is_admitted() {
///     println!("retry after {:?} µs", outcome.denied().and_then(|d| d.retry_after()));
/// }
/// ```
pub struct RedisGcra {
    target: Target,
    policy: RedisPolicy,
    degrade: Degrade,
    backoff: Backoff,
    idle: Mutex<Vec<Conn>>,
    script: Arc<::redis::Script>,
}

impl RedisGcra {
    /// A limiter for `policy` on `target`. Connects lazily (the first check).
    pub fn new(target: Target, policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        let degrade = Degrade::new(config, policy.tiers().len())?;
        Ok(RedisGcra {
            target,
            policy,
            degrade,
            backoff: Backoff::default(),
            idle: Mutex::new(Vec::new()),
            script: script(),
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RedisPolicy {
        &self.policy
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
        let keys = self.policy.keys(client, scope)?;
        if let Some(d) = self.policy.too_large(cost) {
            return Ok(Outcome::new(
                std::vec![Err(d); self.policy.tiers().len()],
                Source::Redis,
            ));
        }
        Ok(match self.run(&keys, Request::check(cost)) {
            Ok((_, outcome)) => outcome,
            Err(_) => self.degrade.decide(&self.policy, &keys, cost),
        })
    }

    /// Like [`check_n`](Self::check_n) but returns Redis' failure instead of
    /// applying the failure policy.
    pub fn try_check_n(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        let keys = self.policy.keys(client, scope)?;
        if let Some(d) = self.policy.too_large(cost) {
            return Ok(Outcome::new(
                std::vec![Err(d); self.policy.tiers().len()],
                Source::Redis,
            ));
        }
        self.run(&keys, Request::check(cost)).map(|(_, o)| o)
    }

    /// Many checks in one round trip (pipelined `EVALSHA`s; one `SCRIPT
    /// LOAD` and a retry if the server lost the script). Each request is
    /// `(client, scope, cost)` and is decided on its own, in order, exactly
    /// as if sent one by one; an error fails the whole batch (no failure
    /// policy here: the caller decides).
    ///
    /// ```no_run
    /// use cellrate::redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
    /// use cellrate::Quota;
    /// let rl = RedisGcra::new(
    ///     Target::standalone("redis://127.0.0.1/").unwrap(),
    ///     RedisPolicy::single("rl", "api", Quota::per_second(10).at_hz(1_000)).unwrap(),
    ///     RedisConfig::new(FailurePolicy::Closed),
    /// ).unwrap();
    /// let outcomes = rl.try_check_batch(&[("a", None, 1), ("b", None, 1)]).unwrap();
    /// assert_eq!(outcomes.len(), 2);
    /// ```
    pub fn try_check_batch(
        &self,
        requests: &[(&str, Option<&str>, u64)],
    ) -> Result<Vec<Outcome>, Error> {
        let mut sent = Vec::with_capacity(requests.len());
        let mut pipe = ::redis::pipe();
        let mut out: Vec<Option<Outcome>> = Vec::with_capacity(requests.len());
        for &(client, scope, cost) in requests {
            let keys = self.policy.keys(client, scope)?;
            if let Some(d) = self.policy.too_large(cost) {
                out.push(Some(Outcome::new(
                    std::vec![Err(d); self.policy.tiers().len()],
                    Source::Redis,
                )));
                continue;
            }
            let mut cmd = ::redis::cmd("EVALSHA");
            cmd.arg(self.script.get_hash()).arg(keys.len()).arg(&keys);
            let request = Request::check(cost);
            cmd.arg(request.cost).arg(0).arg(0);
            for t in self.policy.tiers() {
                cmd.arg(t.quota().emission_interval()).arg(t.quota().span());
            }
            pipe.add_command(cmd);
            sent.push(cost);
            out.push(None);
        }
        if sent.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let mut conn = self.take()?;
        let mut replies: Result<Vec<Vec<i64>>, _> = pipe.query(conn.as_dyn());
        if let Err(e) = &replies {
            if e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript) {
                replies = self
                    .script
                    .load(conn.as_dyn())
                    .and_then(|_| pipe.query(conn.as_dyn()));
            }
        }
        let replies = match replies {
            Ok(r) => {
                self.put(conn);
                r
            }
            Err(e) => return Err(self.failed(conn, e)),
        };
        if replies.len() != sent.len() {
            return Err(Error::BadReply);
        }
        let mut decoded = replies.iter().zip(&sent);
        out.into_iter()
            .map(|slot| match slot {
                Some(o) => Ok(o),
                None => match decoded.next() {
                    Some((reply, &cost)) => self.policy.decode(reply, cost).map(|(_, o)| o),
                    None => Err(Error::BadReply),
                },
            })
            .collect()
    }

    /// Runs the script once: `(cells granted, outcome)`.
    pub(crate) fn run(&self, keys: &[String], request: Request) -> Result<(u64, Outcome), Error> {
        let mut conn = self.take()?;
        let inv = self.policy.invocation(&self.script, keys, request);
        match inv.invoke::<Vec<i64>>(conn.as_dyn()) {
            Ok(reply) => {
                self.put(conn);
                self.policy.decode(&reply, request.cost)
            }
            Err(e) => Err(self.failed(conn, e)),
        }
    }

    /// An idle connection, or a new one.
    fn take(&self) -> Result<Conn, Error> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match idle {
            Some(c) => Ok(c),
            None => self.connect(),
        }
    }

    fn put(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// After an error: keep the connection if the server answered (e.g. a
    /// script error), else drop it, drop the idle ones (they share the fate
    /// of the server) and hold back reconnects for the interval.
    fn failed(&self, conn: Conn, e: ::redis::RedisError) -> Error {
        let transport = e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal();
        if transport {
            drop(conn);
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
            self.backoff.failed();
        } else {
            self.put(conn);
        }
        if e.is_timeout() {
            Error::Timeout
        } else {
            Error::Redis(e)
        }
    }

    fn connect(&self) -> Result<Conn, Error> {
        let config = self.degrade.config();
        if !self.backoff.may_try(config.reconnect_interval) {
            return Err(Error::Backoff);
        }
        let timeout = config.timeout;
        let made = match &self.target {
            Target::Standalone(client) => {
                client.get_connection_with_timeout(timeout).and_then(|c| {
                    c.set_read_timeout(Some(timeout))?;
                    c.set_write_timeout(Some(timeout))?;
                    Ok(Conn::Single(c))
                })
            }
            Target::Cluster(client) => client.get_connection().and_then(|c| {
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))?;
                Ok(Conn::Cluster(Box::new(c)))
            }),
        };
        match made {
            Ok(c) => {
                self.backoff.succeeded();
                Ok(c)
            }
            Err(e) => {
                self.backoff.failed();
                Err(Error::Redis(e))
            }
        }
    }
}

impl core::fmt::Debug for RedisGcra {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RedisGcra")
            .field("target", &self.target)
            .field("policy", &self.policy)
            .finish()
    }
}
