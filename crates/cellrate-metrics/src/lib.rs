//! The metric series of cellrate's adapters, through the `metrics` facade
//! crate: what the `cellrate-tower` layer decided, per limiter and tier; its
//! keyed tables' occupancy, evictions and full-table answers; its Redis
//! backend's failure mode, errors and latency. The crate picks no
//! exporter: install any `metrics` recorder (Prometheus, StatsD,
//! OpenTelemetry…) and these series appear in it.
//!
//! # Registered once, recorded without look-ups
//!
//! A layer registers its handles ([`::metrics::Counter`], `Gauge`,
//! `Histogram`) when it is **built** (`RateLimitBuilder::build` in `cellrate-tower`), with
//! the recorder installed then: install the recorder first (e.g.
//! `PrometheusBuilder::install_recorder`), or build the layer inside
//! `metrics::with_local_recorder`. A request then only increments handles
//! it already holds: no name is looked up, no label formatted, nothing
//! allocated per request. Without the feature none of this is compiled in.
//!
//! # Cardinality
//!
//! Every label value is a configured name: `limiter` (the layer's
//! `metrics_name`,
//! `"default"` unless set), `tier` (a tier's name) and fixed words
//! (`outcome`, `kind`, `to`). No client key, route text or error message
//! ever becomes a label, so a flood of keys cannot grow the series.
//! Counts per route come from naming the layer of each route (or group of
//! routes, e.g. an axum `route_layer`) with its own `metrics_name`: the
//! route's configured name is the `limiter` label, never the request path.
//!
//! # The series
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `cellrate_requests_total` | counter | `limiter`, `outcome` | requests the layer answered or passed on, one `outcome` each: `admitted` (passed to the service: 2xx from a handler that succeeds; includes held and fail-open requests), `denied` (429), `too_large` (413: a cost above a tier's burst), `unavailable` (503: Redis down and failing closed), `queue_full` (503: the delaying queue was full), `no_key` (the `Keyless` rejection), `invalid_key` (400), `error` (500: a server misconfiguration or a backend fault), `body_denied` (admitted, then refused mid-body by `charge_body`; it also counted once as `admitted`) |
//! | `cellrate_decisions_total` | counter | `limiter`, `tier`, `outcome` | per tier, each request a tier decided (by Redis, in process, or by the Redis fallback's local tiers): `admitted` (the request was admitted and charged to this tier), `denied` (this tier refused it), `too_large` (its cost can never fit this tier). A request refused by two tiers counts in both; a tier that would have admitted a request another tier refused counts nothing (it was not charged) |
//! | `cellrate_held_total` | counter | `limiter` | requests the delaying mode held before passing them on (each is also `admitted`) |
//! | `cellrate_keyed_capacity` | gauge | `limiter`, `tier` | slots of a keyed tier's table (set when the layer is built) |
//! | `cellrate_keyed_keys` | gauge | `limiter`, `tier` | keys holding a slot: `inserted − evicted` (owing or idle; an idle key's slot is reusable). ÷ capacity is the occupancy |
//! | `cellrate_keyed_inserted_total` | counter | `limiter`, `tier` | keys given a slot ([`KeyedStats::inserted`]) |
//! | `cellrate_keyed_evictions_total` | counter | `limiter`, `tier` | idle keys evicted to make room for a new one ([`KeyedStats::reused`]) |
//! | `cellrate_keyed_full_total` | counter | `limiter`, `tier`, `outcome` | new keys that found their probe window full of owing keys, by what [`WhenFull`](cellrate::keyed::WhenFull) did: `denied` (`Deny`, or the shared overflow limiter refused) or `admitted` (`Admit`, or the shared overflow limiter admitted) |
//! | `cellrate_redis_degraded` | gauge | `limiter` | 1 while the Redis backend decides by its failure policy (fallback, fail-open or fail-closed), 0 once Redis answers again |
//! | `cellrate_redis_transitions_total` | counter | `limiter`, `to` | transitions of that state: `to="degraded"` (Redis lost), `to="redis"` (Redis back); each counted once, by the first verdict of the new state |
//! | `cellrate_redis_errors_total` | counter | `limiter`, `kind` | checks Redis did not decide: `timeout` (no answer within the timeout), `backoff` (not tried: a reconnect is held back for the interval after a failure), `connection` (the connection failed or was refused), `server` (the server answered an error or an unexpected reply), `corrupt_key` (a key holds something that is not a TAT) |
//! | `cellrate_redis_check_seconds` | histogram | `limiter` | time from asking the Redis client to its answer, for checks Redis decided (queueing for a shared script call and reconnecting included) |
//!
//! Counters are exact: each request adds to `cellrate_requests_total` once,
//! when its answer is decided. The keyed series are read from the tables'
//! own counters ([`KeyedStats`]) after each check and published as they
//! change (counters by the difference, so they stay exact under
//! concurrency; the `keys` gauge is the last reading, exact when quiet).
//! A Redis backend's fallback tables (the failure policy
//! `Fallback` of `cellrate-redis`) publish the same
//! `cellrate_keyed_*` series under the layer's `limiter` and each tier's
//! name, as they decide while Redis fails (a sliding-log tier's table is
//! not a keyed one and has none).
//!
//! A table used directly publishes the same `cellrate_keyed_*` series
//! with [`KeyedMetrics`]; the adapters register the rest when they are built.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

use std::borrow::ToOwned;
use std::sync::atomic::{AtomicUsize, Ordering};

use ::metrics::{Counter, Gauge};

use cellrate::keyed::KeyedStats;

/// `cellrate_requests_total`.
pub const REQUESTS: &str = "cellrate_requests_total";
/// `cellrate_decisions_total`.
pub const DECISIONS: &str = "cellrate_decisions_total";
/// `cellrate_held_total`.
pub const HELD: &str = "cellrate_held_total";
/// `cellrate_keyed_capacity`.
pub const KEYED_CAPACITY: &str = "cellrate_keyed_capacity";
/// `cellrate_keyed_keys`.
pub const KEYED_KEYS: &str = "cellrate_keyed_keys";
/// `cellrate_keyed_inserted_total`.
pub const KEYED_INSERTED: &str = "cellrate_keyed_inserted_total";
/// `cellrate_keyed_evictions_total`.
pub const KEYED_EVICTIONS: &str = "cellrate_keyed_evictions_total";
/// `cellrate_keyed_full_total`.
pub const KEYED_FULL: &str = "cellrate_keyed_full_total";
/// `cellrate_redis_degraded`.
pub const REDIS_DEGRADED: &str = "cellrate_redis_degraded";
/// `cellrate_redis_transitions_total`.
pub const REDIS_TRANSITIONS: &str = "cellrate_redis_transitions_total";
/// `cellrate_redis_errors_total`.
pub const REDIS_ERRORS: &str = "cellrate_redis_errors_total";
/// `cellrate_redis_check_seconds`.
pub const REDIS_CHECK_SECONDS: &str = "cellrate_redis_check_seconds";

/// A counter published from a running total read elsewhere (a table's own
/// counter): each reading adds what the total grew by since the last
/// reading, once, whichever thread reads it.
#[derive(Debug)]
struct Published {
    seen: AtomicUsize,
    counter: Counter,
}

impl Published {
    fn new(counter: Counter) -> Self {
        Published {
            seen: AtomicUsize::new(0),
            counter,
        }
    }

    /// Publishes `total` (a wrapping running count): true if it grew.
    #[inline]
    fn to(&self, total: usize) -> bool {
        let mut seen = self.seen.load(Ordering::Relaxed);
        loop {
            let grown = total.wrapping_sub(seen);
            // Unchanged, or a reading older than one already published.
            if grown == 0 || grown > usize::MAX / 2 {
                return false;
            }
            match self
                .seen
                .compare_exchange_weak(seen, total, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.counter.increment(grown as u64);
                    return true;
                }
                Err(now) => seen = now,
            }
        }
    }
}

/// A keyed table's figures as metrics, labelled `limiter` and `tier`: the
/// `cellrate_keyed_*` series of the [crate docs](crate). The tower layer's
/// keyed tiers publish their tables with it;
/// a table used directly can be published the same way.
///
/// ```
/// use cellrate::keyed::{KeyedBox, Seed, WhenFull};
/// use cellrate_metrics::KeyedMetrics;
/// use cellrate::Quota;
/// let table = KeyedBox::with_capacity(1_024, Quota::per_second(5).at_hz(1_000), WhenFull::Deny, Seed::random());
/// // Registered once (with the recorder installed now), e.g. at start-up.
/// let metrics = KeyedMetrics::new("worker", "peers", table.capacity());
/// table.check(&"alice", 0).unwrap();
/// metrics.record(table.stats()); // after checks, or on a timer
/// ```
#[derive(Debug)]
pub struct KeyedMetrics {
    keys: Gauge,
    inserted: Published,
    evicted: Published,
    full_denied: Published,
    full_admitted: Published,
}

impl KeyedMetrics {
    /// Registers the series for the table `tier` of `limiter`, and sets its
    /// capacity gauge.
    pub fn new(limiter: &str, tier: &str, capacity: usize) -> Self {
        describe();
        let (l, t) = (limiter.to_owned(), tier.to_owned());
        ::metrics::gauge!(KEYED_CAPACITY, "limiter" => l.clone(), "tier" => t.clone())
            .set(capacity as f64);
        let full = |outcome: &'static str| {
            Published::new(::metrics::counter!(
                KEYED_FULL, "limiter" => l.clone(), "tier" => t.clone(), "outcome" => outcome
            ))
        };
        KeyedMetrics {
            keys: ::metrics::gauge!(KEYED_KEYS, "limiter" => l.clone(), "tier" => t.clone()),
            inserted: Published::new(::metrics::counter!(
                KEYED_INSERTED, "limiter" => l.clone(), "tier" => t.clone()
            )),
            evicted: Published::new(::metrics::counter!(
                KEYED_EVICTIONS, "limiter" => l.clone(), "tier" => t.clone()
            )),
            full_denied: full("denied"),
            full_admitted: full("admitted"),
        }
    }

    /// Publishes what changed since the last reading of the table's
    /// [`KeyedStats`]: a few loads and compares when nothing did.
    #[inline]
    pub fn record(&self, stats: KeyedStats) {
        let inserted = self.inserted.to(stats.inserted);
        let evicted = self.evicted.to(stats.reused);
        if inserted || evicted {
            self.keys
                .set(stats.inserted.wrapping_sub(stats.reused) as f64);
        }
        self.full_denied
            .to(stats.overflow_denied.wrapping_add(stats.shared_denied));
        self.full_admitted
            .to(stats.overflow_admitted.wrapping_add(stats.shared_admitted));
    }
}

/// Describes every series to the recorder (units and help texts). Called
/// at every registration: cheap, and a recorder installed late still gets
/// them.
///
/// ```
/// cellrate_metrics::describe(); // with no recorder installed, a no-op
/// ```
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        REQUESTS,
        "Requests the rate-limit layer answered or passed on, by outcome."
    );
    describe_counter!(DECISIONS, "Requests each tier decided, by outcome.");
    describe_counter!(
        HELD,
        "Requests the delaying mode held before passing them on."
    );
    describe_gauge!(KEYED_CAPACITY, "Slots of a keyed tier's table.");
    describe_gauge!(KEYED_KEYS, "Keys holding a slot of a keyed tier's table.");
    describe_counter!(KEYED_INSERTED, "Keys given a slot of a keyed tier's table.");
    describe_counter!(
        KEYED_EVICTIONS,
        "Idle keys evicted to make room for a new key."
    );
    describe_counter!(
        KEYED_FULL,
        "New keys that found their table window full, by what the table did."
    );
    describe_gauge!(
        REDIS_DEGRADED,
        "1 while the Redis backend decides by its failure policy."
    );
    describe_counter!(
        REDIS_TRANSITIONS,
        "Transitions between deciding on Redis and by the failure policy."
    );
    describe_counter!(REDIS_ERRORS, "Checks Redis did not decide, by kind.");
    describe_histogram!(
        REDIS_CHECK_SECONDS,
        Unit::Seconds,
        "Time of the checks Redis decided."
    );
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
