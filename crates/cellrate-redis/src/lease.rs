//! Leasing: take a slice of a hot client's budget from Redis in one call,
//! spend it locally, give back what was not used.
//!
//! [`LeasedRedisGcra::check`] spends one cell of the client's local lease
//! while it has cells left and is younger than the lease lifetime `L`.
//! Otherwise one script call gives back the old lease's unused cells
//! (`TAT ← max(now, TAT − unused·T)` on every tier, as
//! [`Gcra::refund_n`](cellrate::Gcra::refund_n) does) and then takes up to
//! `k` cells (the lease size) from every tier at once: the largest `g ≤ k`
//! with `baseᵢ + g·Tᵢ − now ≤ bᵢ·Tᵢ` for all tiers. The request is the
//! first of the `g` cells; `g = 0` is a denial, remembered and answered
//! locally until its `retry_after` has passed. Leases are GCRA cells: a
//! policy with a window tier takes none.
//!
//! Each client's lease has its own lock, held across its renewal's round
//! trip and nothing else: while one client waits on a slow server, every
//! other client keeps spending its live lease. The table keeps at most
//! [`max_clients`](LeasedRedisGcra::with_max_clients) clients (65 536
//! unless set); when it is full it forgets only entries that are neither in
//! use nor live, and a client that still finds no room is decided on Redis
//! without a lease ([`RedisGcra::check`]).
//!
//! **Bound.** Cells are consumed on the server when granted. With `n`
//! servers each holding at most one lease of at most `k` cells per client,
//! the fleet admits over any interval of length `Δ` at most
//! `b + ⌊Δ/T⌋ + n·k` cells, and at most `b + ⌈(Δ + L)/T⌉`: it lags the
//! ideal GCRA by at most `L`. Returning cells and forgetting entries never
//! admit more. The proofs are in docs/design/redis.md in the repository.

use std::collections::HashMap;
use std::string::{String, ToString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Error, Outcome, RedisGcra, Request, Source};

/// The most clients a [`LeasedRedisGcra`] keeps a lease for, unless set
/// with [`LeasedRedisGcra::with_max_clients`].
///
/// ```
/// assert_eq!(cellrate_redis::lease::DEFAULT_MAX_CLIENTS, 65_536);
/// ```
pub const DEFAULT_MAX_CLIENTS: usize = 1 << 16;
use cellrate::Decision;

#[derive(Clone, Debug)]
enum Lease {
    /// `left` cells granted at `granted_at`.
    Cells { left: u64, granted_at: Instant },
    /// The server said no cell fits before `until`: deny locally till then.
    Denied {
        until: Instant,
        outcome: Box<Outcome>,
    },
}

/// A [`RedisGcra`] that leases `k` cells at a time per client. The policy's
/// tiers must not be [`per_scope`](super::RedisTier::per_scope) (a lease is
/// per client); checks of such a policy return [`Error::ScopeMismatch`].
///
/// ```no_run
/// use std::time::Duration;
/// use cellrate_redis::lease::LeasedRedisGcra;
/// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
/// use cellrate::Quota;
///
/// let policy = RedisPolicy::single("rl", "hot", Quota::per_second(10_000).at_hz(1_000)).unwrap();
/// let redis = RedisGcra::new(Target::standalone("redis://127.0.0.1/").unwrap(), policy,
///     RedisConfig::new(FailurePolicy::Closed)).unwrap();
/// let leased = LeasedRedisGcra::new(redis, 50, Duration::from_millis(20));
/// assert!(leased.check("big-customer").unwrap().tiers().is_admitted());
/// ```
#[derive(Debug)]
pub struct LeasedRedisGcra {
    inner: RedisGcra,
    size: u64,
    lifetime: Duration,
    /// Each client's lease behind its own lock. The table's lock is held
    /// only to find or add a client's entry, never across a round trip; a
    /// client's own lock is held across its renewal, so a stalled server
    /// delays only the callers of the client being renewed, never a client
    /// spending a live lease.
    leases: Mutex<Table>,
    max_clients: usize,
    round_trips: AtomicU64,
}

/// One client's lease, behind the lock its renewal holds.
type Entry = Arc<Mutex<Option<Lease>>>;

/// The leases by client, at most `max_clients` of them.
#[derive(Debug, Default)]
struct Table {
    map: HashMap<String, Entry>,
    /// No sweep before this: the last one found every entry in use or live.
    next_sweep: Option<Instant>,
}

impl Table {
    /// `client`'s entry, added if there is room (after forgetting what is
    /// safe to forget: neither in use nor live); `None` if the table is full of
    /// entries in use or live.
    fn entry(&mut self, client: &str, max: usize, lifetime: Duration) -> Option<Entry> {
        if let Some(entry) = self.map.get(client) {
            return Some(Arc::clone(entry));
        }
        if self.map.len() >= max {
            let now = Instant::now();
            if self.next_sweep.is_none_or(|at| now >= at) {
                // An entry only this table holds is in no caller's hands
                // (entries are handed out under the table's lock), so its
                // lock is free and no caller can reach it once removed.
                self.map.retain(|_, entry| {
                    Arc::strong_count(entry) > 1
                        || lock(entry)
                            .as_ref()
                            .is_some_and(|l| l.is_live(now, lifetime))
                });
                self.next_sweep = (self.map.len() >= max).then(|| now + lifetime);
            }
            if self.map.len() >= max {
                return None;
            }
        }
        Some(Arc::clone(self.map.entry(client.to_string()).or_default()))
    }
}

impl Lease {
    /// Whether the lease still answers checks locally at `now`: cells
    /// left within the lifetime, or a denial not yet passed.
    fn is_live(&self, now: Instant, lifetime: Duration) -> bool {
        match self {
            Lease::Cells { left, granted_at } => {
                *left > 0 && now.saturating_duration_since(*granted_at) < lifetime
            }
            Lease::Denied { until, .. } => now < *until,
        }
    }
}

/// Locks `m`; a poisoned lock only means another thread panicked while
/// holding plain data, which is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LeasedRedisGcra {
    /// Leases of up to `size` cells (at least 1), each spent within
    /// `lifetime` of its grant or returned, for up to
    /// [`DEFAULT_MAX_CLIENTS`] clients at once.
    pub fn new(inner: RedisGcra, size: u64, lifetime: Duration) -> Self {
        LeasedRedisGcra {
            inner,
            size: size.max(1),
            lifetime,
            leases: Mutex::new(Table::default()),
            max_clients: DEFAULT_MAX_CLIENTS,
            round_trips: AtomicU64::new(0),
        }
    }

    /// Keeps leases for at most `clients` clients (at least 1); see
    /// the [module docs](self).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cellrate_redis::lease::LeasedRedisGcra;
    /// use cellrate_redis::{FailurePolicy, RedisConfig, RedisGcra, RedisPolicy, Target};
    /// use cellrate::Quota;
    ///
    /// let policy = RedisPolicy::single("rl", "hot", Quota::per_second(10_000).at_hz(1_000)).unwrap();
    /// let redis = RedisGcra::new(Target::standalone("redis://127.0.0.1/").unwrap(), policy,
    ///     RedisConfig::new(FailurePolicy::Closed)).unwrap();
    /// let leased = LeasedRedisGcra::new(redis, 50, Duration::from_millis(20)).with_max_clients(1_000);
    /// assert!(leased.clients() <= 1_000);
    /// ```
    pub fn with_max_clients(mut self, clients: usize) -> Self {
        self.max_clients = clients.max(1);
        self
    }

    /// How many clients the table keeps a lease (or a denial) for now.
    pub fn clients(&self) -> usize {
        lock(&self.leases).map.len()
    }

    /// Script calls made so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// The wrapped limiter.
    pub fn inner(&self) -> &RedisGcra {
        &self.inner
    }

    /// One cell for `client`: from the local lease if one is live, else one
    /// round trip (returning the old lease's unused cells and taking a new
    /// lease). Redis failures apply the inner limiter's failure policy.
    ///
    /// Leases are GCRA cells: a policy with a window tier
    /// ([`RedisTier::from_config`](super::RedisTier::from_config)) takes no
    /// lease, and each check is one round trip of the inner limiter.
    pub fn check(&self, client: &str) -> Result<Outcome, Error> {
        if !self.inner.policy().is_gcra() {
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            return self.inner.check(client);
        }
        let keys = self.inner.policy().keys(client, None)?;
        let entry = lock(&self.leases).entry(client, self.max_clients, self.lifetime);
        let Some(slot) = entry else {
            // The table is full of leases in use or live: decide this
            // client on Redis, without a lease.
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            return self.inner.check(client);
        };
        let mut lease = lock(&slot);
        let old = lease.take();
        let refund = match old {
            Some(Lease::Cells { left, granted_at })
                if left > 0 && granted_at.elapsed() < self.lifetime =>
            {
                *lease = Some(Lease::Cells {
                    left: left - 1,
                    granted_at,
                });
                let results: Vec<_> = self
                    .inner
                    .policy()
                    .tiers()
                    .iter()
                    .map(|t| Ok(Decision::new(t.quota().burst(), left - 1, 0)))
                    .collect();
                return Ok(Outcome::of(&results, Source::Lease));
            }
            Some(Lease::Denied { until, outcome }) if Instant::now() < until => {
                let answer = outcome.with_source(Source::Lease);
                *lease = Some(Lease::Denied { until, outcome });
                return Ok(answer);
            }
            Some(Lease::Cells { left, .. }) => left,
            _ => 0,
        };
        let request = Request {
            cost: self.size,
            up_to: true,
            refund,
        };
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match self.inner.run(&keys, request) {
            Ok((granted, outcome)) => {
                if granted > 0 {
                    *lease = Some(Lease::Cells {
                        left: granted - 1,
                        granted_at: Instant::now(),
                    });
                } else if let Some(until) = outcome
                    .tiers()
                    .denied()
                    .and_then(|d| d.retry_after())
                    .and_then(|wait| Instant::now().checked_add(Duration::from_micros(wait)))
                {
                    // No cell fits for `wait` µs of server time: answer the
                    // same locally until then (never admits more: the server
                    // would deny too, unless another server returns cells).
                    *lease = Some(Lease::Denied {
                        until,
                        outcome: Box::new(outcome),
                    });
                }
                Ok(outcome)
            }
            // Redis failed within this call's deadline: the failure policy
            // answers at once (no second round trip); a key that holds no
            // TAT is reported as it is.
            Err(e) => {
                drop(lease);
                self.inner.settle(Err(e), client, None, 1)
            }
        }
    }

    /// Returns every unused leased cell to Redis (for a graceful shutdown).
    /// Returns how many cells were given back.
    pub fn return_all(&self) -> u64 {
        let drained: std::vec::Vec<(String, Entry)> = lock(&self.leases).map.drain().collect();
        let mut returned = 0;
        for (client, slot) in drained {
            let Some(Lease::Cells { left, .. }) = lock(&slot).take() else {
                continue;
            };
            if left == 0 {
                continue;
            }
            let Ok(keys) = self.inner.policy().keys(&client, None) else {
                continue;
            };
            let request = Request {
                cost: 0,
                up_to: false,
                refund: left,
            };
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            if self.inner.run(&keys, request).is_ok() {
                returned += left;
            }
        }
        returned
    }
}
