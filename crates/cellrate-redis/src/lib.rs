//! Rate limits on a shared Redis (standalone or Cluster), so a fleet of
//! servers enforces one limit per client instead of one per process. Every
//! algorithm of the crate runs there — GCRA (and the token and leaky
//! buckets), the fixed window, the sliding window, the bucketed window and
//! the sliding log — chosen per tier ([`RedisTier::new`] for GCRA,
//! [`RedisTier::from_config`] for any [`LimiterConfig`](cellrate::LimiterConfig)),
//! so one call checks tiers of different algorithms all or nothing (see
//! *Every algorithm, per tier* below).
//!
//! Feature `redis` (implies `std`). Built on the `redis` client
//! crate; needs Redis ≥ 5 (scripts replicated by effects, so a script may read
//! `TIME` before it writes) and the Rust version that crate asks for (1.88).
//!
//! # The math
//!
//! The same inequality as [`gcra`](cellrate::gcra), evaluated inside Redis by a
//! Lua script (`EVALSHA`, reloaded with `SCRIPT LOAD` when the server answers
//! `NOSCRIPT`, e.g. after a restart). One call decides one request, or a
//! batch of requests in order ([`RedisGcra::try_check_batch`]), all at the
//! server's own time `now = TIME` in integer microseconds, read once per
//! call. For each request and each tier `i` with emission interval `Tᵢ` and
//! span `bᵢ·Tᵢ` (µs):
//!
//! ```text
//! baseᵢ = max(TATᵢ, now)
//! admit ⇔ ∀i: baseᵢ + cost·Tᵢ − now ≤ bᵢ·Tᵢ
//! if admitted: TATᵢ ← baseᵢ + cost·Tᵢ  (for every i), expiry ⌊(TATᵢ − now)/1000⌋ + 1 ms
//! ```
//!
//! Every tier of a request is checked before any is charged, and nothing is
//! written to Redis before every request of the call is decided (the script
//! reads all its keys with one `MGET`, decides in memory — a later request
//! of the same call sees the earlier ones' charges — and then writes each
//! changed key once); Redis runs a script atomically, so a request denied
//! by one tier consumes from none. A batch decided at one `now` is what the
//! in-process GCRA answers to the same requests arriving in the same
//! microsecond, in that order. The key expires (`SET … PX`) within a
//! millisecond after its TAT has passed, i.e. once the bucket is full again
//! (never before: an expired key reads as full), so idle clients cost no
//! memory. A cost of 0 writes nothing (a peek).
//!
//! The answers are the crate's own [`Decision`] and [`Denied`], computed by
//! the same code as in-process (the script returns `TAT − now` and the wait,
//! the crate turns them into cells and ticks): a [`RedisTier`]'s quota is
//! re-expressed on the server's 1 MHz clock with the tier's own number of
//! sub-ticks per µs (its [`scale`](cellrate::Quota::scale)), and a local
//! [`Gcra`](cellrate::Gcra) with [`RedisTier::quota`] gives the same decisions
//! at the same server times (the fleet test checks exactly that).
//!
//! # Rounding: the burst is what was asked
//!
//! A tier keeps the burst `b` that was asked ([`Quota::burst`](cellrate::Quota::burst)): `b` cells
//! at once from full are always admitted, and a cost up to `b` is never
//! "too large". Only the emission interval may be rounded, **up**: `T` in
//! µs is a fraction `num/den`; when `den ≤` [`MAX_SCALE`] (2¹⁴) the tier runs
//! at `den` sub-ticks per µs and `T` is exact; otherwise `T′ = ⌈T·2¹⁴⌉/2¹⁴`
//! µs (at most 61 ps more per cell, refused with [`Error::Imprecise`] if
//! that loses over 1 % of the rate). The span is `b·T′`. Every request
//! stream such a tier admits for a non-decreasing `now` conforms to the
//! exact quota: its GCRA is a token bucket of the same capacity `b` that
//! refills no faster, so it never holds more tokens than the exact one.
//! [`RedisTier::is_exact`] says whether `T′ = T`. Every rate of 1 to
//! 10 000 cells per second, minute, hour or day with bursts of 1 to 1 000
//! is exact (the unit test `exact_share_of_realistic_tiers` checks them
//! all).
//!
//! `TIME` is the server's wall clock. If it steps back, `max(TAT, now) − now`
//! only grows: the limiter denies more for a while, never admits more than
//! the rounded GCRA would for that `now` (the same rule as the in-process
//! GCRA for a `now` that goes back). Keys live
//! on the server only: a restart without persistence forgets the debts
//! (every client starts full), which is Redis' durability, not the script's.
//!
//! # Integer bounds (Lua numbers are doubles)
//!
//! Redis' Lua 5.1 has only IEEE doubles, exact for integers below 2⁵³. So:
//!
//! * time is `TIME` in whole microseconds since 1970: about 2⁵⁰·⁷ now, below
//!   2⁵² until the year 2112;
//! * a tier's `T` and span are integers of its sub-ticks (`scale ≤ 2¹⁴` per
//!   µs), and the span `b·T` is at most 2⁵² sub-ticks
//!   ([`MAX_SPAN_SUB_TICKS`]; a long span with a fine `T` gets a coarser
//!   scale, within the same 1 %), checked by [`RedisTier::new`];
//! * a TAT is stored as whole microseconds plus a fraction: `"<µs>"`, or
//!   `"<µs>+<f>/<scale>"` for `µs + f/scale` when it falls between two
//!   microseconds (`0 < f < scale`). So the script never multiplies an
//!   absolute time by the scale: `TAT − now` in sub-ticks is
//!   `(µs − now)·scale + f ≤ span ≤ 2⁵²` for a TAT it wrote (larger only
//!   after the clock stepped back, then capped at 2⁵³, where every request
//!   is denied), `now + ⌊ahead/scale⌋ < 2⁵³`, and every product and sum is
//!   an exact integer; a quotient is corrected to the exact one (`split`).
//!   A fraction written at another scale (the quota changed) is read
//!   rounded up to the new scale. Numbers are written with
//!   `string.format('%d')`, exact below 2⁶³ where Lua's integer format is
//!   64-bit (the script checks that on each call that writes, and uses
//!   `'%.0f'` where it is not); never Lua's `tostring` (`%.14g`), which
//!   would round them. The reply is an array of integers, exact as well.
//!
//! The scripts live in `src/redis/lua/` (`common.lua` is prepended to each).
//!
//! # Every algorithm, per tier
//!
//! A policy whose tiers are all GCRA runs the check and single scripts
//! above. A policy with any window tier runs the *tiers* script: the same
//! reads (one `MGET`), the same all-or-nothing rule (every tier of a
//! request is judged before any is charged; a refusal by one charges none)
//! and the same single write per changed key, but each tier decides by its
//! own algorithm's step, one Lua file per step (`lua/step_fixed.lua`,
//! `step_sliding.lua`, `step_bucketed.lua`, `step_log.lua`, beside GCRA's
//! in `common.lua`), each the in-process rule of its type in
//! [`window`](cellrate::window) at `now = TIME` in µs:
//!
//! | tier | admits `cost` at `now` iff | stored value (one string per key) | expires |
//! |---|---|---|---|
//! | fixed window `W` | `c_k + cost ≤ limit`, `k = ⌊now/W⌋` | `F<k>:<c_k>` | at the end of window `k` |
//! | sliding window `W` | `c + cost ≤ limit` and `p·(W − e) ≤ (limit − c − cost)·W` | `S<k>:<p>:<c>` | at the end of window `k + 1` |
//! | bucketed window, `N` buckets of `b` | `c_(j−N+1) + … + c_j + cost ≤ limit`, `j = ⌊now/b⌋` | `B<s>:<c_s>,<c_(s−1)>,…` (`N` counts, newest first) | when bucket `s + N` starts |
//! | sliding log `W` | `cost ≤ limit − P`, `P` the recorded expiries after `now` | `L<e₁>,<e₂>,…` (pending expiries, oldest first, at most `limit`) | at the newest expiry |
//!
//! and the numbers each reports (`remaining`, `reset_after`,
//! `retry_after`) are those of its type's module docs, computed by the
//! script in µs: the in-process limiter built from
//! [`RedisTier::algorithm`] (a [`TierAlgorithm`]) answers the same at the
//! same server times (`tests/redis_algorithms.rs` checks every algorithm
//! so, on a standalone server and on a Cluster). Every stored field is an
//! integer below 2⁵³ written with the same formatter as the TATs; the
//! leading letter makes a value of another algorithm (or a TAT) unreadable
//! rather than misread, so changing a tier's algorithm under the same name
//! reports [`Error::CorruptKey`] until the old key expires (or is deleted).
//!
//! **Time.** A window of `W` ticks of a clock at `hz` becomes
//! `W′ = ⌈W·10⁶/hz⌉` µs (the bucketed window rounds each bucket `W/N` so,
//! and `W′ = N·b′`), as a GCRA tier's `T` becomes sub-ticks of the µs
//! clock: exact when `W·10⁶` is a multiple of `hz` (every window of whole
//! µs, ms or s at any of the usual frequencies), otherwise rounded **up**,
//! so the tier admits no more than asked ([`RedisTier::is_exact`] says
//! which; lengthening by over 1 % is [`Error::Imprecise`]). Windows are
//! aligned to multiples of `W′` since the Unix epoch, as the in-process
//! windows are to multiples of `W` on their clock. **Integers**: windows
//! of at most 2⁵² µs, the sliding window's `limit·W′ < 2⁵³`, the log's
//! limit at most [`MAX_LOG_LIMIT`] (its value holds one expiry per cell),
//! all checked when the tier is made ([`Error::QuotaTooLong`]).
//!
//! **Fallback and leases.** [`FailurePolicy::Fallback`]'s quota for a window
//! tier is read as `burst` cells per window of its span `τ + T` (what
//! `Quota::per_duration(limit, window)` states), and the fallback runs the
//! tier's own algorithm with it (a keyed table per tier, a bounded table of
//! logs for the log). Leases ([`lease`]) are GCRA cells: a policy with a
//! window tier takes none and decides every check on Redis.
//!
//! # Keys cellrate cannot read
//!
//! A key where a TAT belongs that holds something else — a value of
//! another type, or a string that is not a TAT (not an integer in
//! `[0, 2⁵³)` nor a well-formed fraction) — is **reported, not repaired**:
//! the script decides no request that uses it and returns the key's index;
//! that check alone fails with [`Error::CorruptKey`] naming the key, in
//! every client (blocking, async with coalesced batches, Cluster, leasing),
//! whatever the failure policy (Redis answered; the policy is for when it
//! does not). Every other request of the same call is decided as if that
//! one were absent, and the key is never written: it may belong to someone
//! else under a colliding prefix, so cellrate does not overwrite it. Delete
//! it (or let its expiry pass) and the client starts full. Detecting a key
//! of another type costs one `EXISTS` per call that finds absent keys
//! (`MGET` reads other types as absent), and a `TYPE` per absent key only
//! if one of them exists.
//!
//! # Cost
//!
//! One round trip and one script call per check, or per batch of up to
//! [`MAX_KEYS_PER_CALL`] keys ([`RedisGcra::try_check_batch`]; concurrent
//! [`AsyncRedisGcra`] checks coalesce into such batches), and one `SET … PX`
//! per changed key. Against `INCR` + `EXPIRE` on the same server: the
//! `redis` table of `docs/benchmarks.md`; where the time goes:
//! `docs/design/redis.md`.
//!
//! # Keys
//!
//! `<prefix>:{<client>}:<tier>` and, for a tier made
//! [`per_scope`](RedisTier::per_scope), `<prefix>:{<client>}:<tier>:<scope>`.
//! The `{client}` hash tag puts every key of one client in one Cluster slot,
//! so one script may touch all of them; different clients spread over the
//! nodes. Prefix and client may not contain `{` or `}` ([`Error::InvalidKey`]).
//!
//! # Failures
//!
//! [`FailurePolicy`] says what a check answers while Redis is unreachable or
//! slower than the timeout: admit ([`FailurePolicy::Open`]), deny
//! ([`FailurePolicy::Closed`]), or decide with a local in-process GCRA per
//! client with its own (usually looser, since every server applies it
//! separately) quotas ([`FailurePolicy::Fallback`]). The fallback keeps its
//! clients in one [`KeyedBox`](cellrate::keyed::KeyedBox) per tier: bounded memory
//! ([`RedisConfig::with_fallback_capacity`]) with the keyed tables'
//! lossless eviction — a client that still owes is never forgotten, however
//! many new clients arrive during the outage — and their full-table
//! policies ([`RedisConfig::with_fallback_when_full`]). The [`Outcome`] says which
//! ([`Source`]). The timeout is a deadline for each call, connect included
//! ([`RedisConfig::with_timeout`]). A lost or stuck connection is dropped
//! and rebuilt by a later call; after a failure, one caller per
//! [`RedisConfig::with_reconnect_interval`] tries again (the others get
//! [`Error::Backoff`] at once, and the failure policy), until a call is
//! answered: a dead or stalled server costs the calls in flight when it
//! failed and then one timeout per interval, not one per request. No path
//! panics.
//!
//! # Leasing
//!
//! [`lease`] takes a slice of a hot client's budget in one call and spends it
//! locally; see its docs for the bound on over-admission.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

use core::fmt;
use std::string::String;
use std::vec::Vec;

use cellrate::decision::{Decision, Denied};

mod blocking;
mod client;
mod config;
pub(crate) mod degrade;
mod fallback;
pub mod lease;
mod policy;
mod protocol;
mod scripts;
mod tokio;

pub use self::tokio::AsyncRedisGcra;
pub use blocking::{RedisGcra, MAX_IDLE};
pub use config::{FailurePolicy, RedisConfig, Target};
pub use policy::{RedisPolicy, RedisTier, TierAlgorithm};
pub use protocol::MAX_KEYS_PER_CALL;

pub(crate) use degrade::{Backoff, Degrade};
pub use policy::on_server_clock;
pub(crate) use protocol::Request;
pub(crate) use scripts::is_noscript;

/// Ticks per second of every quota used with Redis: server time is in µs.
/// Every tick count in a Redis [`Outcome`] is in these units.
///
/// ```
/// use cellrate_redis::{RedisTier, HZ};
/// use cellrate::Quota;
/// let t = RedisTier::new("t", Quota::per_second(10).at_hz(1_000)).unwrap();
/// assert_eq!(t.quota().hz(), HZ);
/// ```
pub const HZ: u64 = 1_000_000;

/// The largest span `b·T` a tier may have, in µs (2⁵², see the module
/// docs). A tier with sub-microsecond steps has the tighter bound
/// [`MAX_SPAN_SUB_TICKS`] on its span in sub-ticks.
///
/// ```
/// use cellrate_redis::MAX_SPAN_MICROS;
/// // About 142 years.
/// assert_eq!(MAX_SPAN_MICROS / 1_000_000 / 86_400 / 365, 142);
/// ```
pub const MAX_SPAN_MICROS: u64 = 1 << 52;

/// The largest span `b·T` a tier may have in its own sub-ticks (2⁵²): what
/// keeps every sum and product in the scripts an exact integer of Lua's
/// doubles.
///
/// ```
/// use cellrate_redis::{RedisTier, MAX_SPAN_SUB_TICKS};
/// use cellrate::Quota;
/// let t = RedisTier::new("t", Quota::per_second(3).with_burst(1_000).at_hz(1_000)).unwrap();
/// assert!(t.quota().span() <= MAX_SPAN_SUB_TICKS);
/// ```
pub const MAX_SPAN_SUB_TICKS: u64 = 1 << 52;

/// The most sub-ticks per microsecond a tier uses (2¹⁴): a tier whose
/// emission interval is a fraction of a microsecond with a denominator up
/// to this is kept exactly; any other is rounded up to a multiple of
/// `1/MAX_SCALE` µs (at most 61 ps slower per cell).
///
/// ```
/// use cellrate_redis::{RedisTier, MAX_SCALE};
/// use cellrate::Quota;
/// // 3 per second: T = 1 000 000/3 µs, kept exactly at 3 sub-ticks per µs.
/// let t = RedisTier::new("t", Quota::per_second(3).at_hz(1_000)).unwrap();
/// assert!(t.is_exact() && t.quota().scale() == 3 && t.quota().scale() <= MAX_SCALE);
/// ```
pub const MAX_SCALE: u64 = 1 << 14;

/// The largest limit of a sliding-log tier on Redis: its value holds one
/// expiry time per cell of the window (at most 17 digits each), read and
/// written whole by every check of the client.
///
/// ```
/// use cellrate::compose::{AlgorithmKind, LimiterConfig};
/// use cellrate_redis::{Error, RedisTier, MAX_LOG_LIMIT};
/// let c = LimiterConfig::new(AlgorithmKind::SlidingLog, MAX_LOG_LIMIT + 1, 1_000, 1_000);
/// assert!(matches!(RedisTier::from_config("t", &c), Err(Error::QuotaTooLong)));
/// ```
pub const MAX_LOG_LIMIT: u64 = 4_096;

/// The most tiers one policy may have.
///
/// ```
/// use cellrate_redis::{Error, RedisPolicy, RedisTier, MAX_TIERS};
/// use cellrate::Quota;
/// let tier = RedisTier::new("t", Quota::per_second(1).at_hz(1)).unwrap();
/// let too_many = vec![tier; MAX_TIERS + 1];
/// assert!(matches!(RedisPolicy::new("p", too_many), Err(Error::TierCount)));
/// ```
pub const MAX_TIERS: usize = 8;

/// Why a Redis operation failed (before a [`FailurePolicy`] applies).
///
/// ```
/// use cellrate_redis::{Error, RedisPolicy};
/// use cellrate::Quota;
/// let p = RedisPolicy::single("rl", "api", Quota::per_second(1).at_hz(1)).unwrap();
/// let err = p.keys("bad{client}", None).unwrap_err();
/// assert!(matches!(err, Error::InvalidKey));
/// assert_eq!(err.to_string(), "prefix, client and scope may not contain '{' or '}'");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The server or the connection failed; the message says how.
    Redis(::redis::RedisError),
    /// No answer within the configured timeout.
    Timeout,
    /// A reconnect was attempted less than `reconnect_interval` ago.
    Backoff,
    /// The server answered something the script never returns.
    BadReply,
    /// A prefix, client or scope that would break the key layout.
    InvalidKey,
    /// A quota that cannot be kept exactly in the script's integers.
    QuotaTooLong,
    /// Rounding `T` up to a multiple of `1/`[`MAX_SCALE`] µs would lose
    /// more than 1 % of the rate (only rates above about 1.6·10⁸ cells per
    /// second per key whose interval is no such multiple).
    Imprecise,
    /// More than [`MAX_TIERS`] tiers, or none.
    TierCount,
    /// Scopes given do not match the tiers made `per_scope`.
    ScopeMismatch,
    /// A tier's configuration is invalid.
    Config(cellrate::compose::ConfigError),
    /// Two tiers of a policy could share a key (the same name, or a
    /// per-scope tier `n` and a tier named `n:…`).
    DuplicateTier,
    /// This key holds something that is not a TAT cellrate wrote: a value
    /// of another type, or a string that is not a TAT. Only the checks that
    /// use this key fail (every other check, in the same batch included, is
    /// decided normally), and the key is left as it is: cellrate never
    /// overwrites a key it cannot read. Delete it (or let its expiry pass)
    /// and the client starts full. The failure policy does not apply: Redis
    /// answered.
    CorruptKey(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Redis(e) => write!(f, "redis: {e}"),
            Error::Timeout => f.write_str("redis did not answer within the timeout"),
            Error::Backoff => f.write_str("redis unreachable; waiting before reconnecting"),
            Error::BadReply => f.write_str("unexpected reply from the rate-limit script"),
            Error::InvalidKey => f.write_str("prefix, client and scope may not contain '{' or '}'"),
            Error::QuotaTooLong => f.write_str(
                "quota too large for the script's exact integers (a span or window over 2^52 µs, a sliding window's limit × window over 2^53, or a log over MAX_LOG_LIMIT)",
            ),
            Error::Config(e) => write!(f, "tier configuration: {e}"),
            Error::Imprecise => {
                f.write_str("rate too fine for the script's sub-microseconds (would lose over 1 %)")
            }
            Error::TierCount => f.write_str("a policy needs 1 to 8 tiers"),
            Error::ScopeMismatch => f.write_str("a per-scope tier was checked without a scope"),
            Error::CorruptKey(key) => write!(f, "key holds no TAT (left untouched): {key}"),
            Error::DuplicateTier => f.write_str("two tiers of a policy would share a key"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Whether the connection is gone, stuck or refused (it is dropped and
    /// reconnects are held back for the interval), rather than the server
    /// answering with an error on a connection that is still good.
    ///
    /// ```
    /// use cellrate_redis::Error;
    /// assert!(!Error::BadReply.is_connection());
    /// assert!(!Error::Timeout.is_connection()); // its own kind
    /// ```
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Redis(e) if degrade::is_transport(e))
    }
}

impl From<::redis::RedisError> for Error {
    fn from(e: ::redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

/// Where an [`Outcome`] came from.
///
/// ```
/// use cellrate_redis::{Outcome, Source};
/// let o = Outcome::new(vec![], Source::FailOpen);
/// assert_eq!(o.source(), Source::FailOpen);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Decided by the script on the Redis server.
    Redis,
    /// Redis failed; admitted by [`FailurePolicy::Open`].
    FailOpen,
    /// Redis failed; denied by [`FailurePolicy::Closed`].
    FailClosed,
    /// Redis failed; decided by the local limiter of
    /// [`FailurePolicy::Fallback`].
    Fallback,
    /// Spent from a local lease ([`lease`]).
    Lease,
}

/// The answer to one check: one result per tier, in the policy's order.
///
/// Admitted iff every tier admitted. When denied, the tiers that would have
/// admitted hold a [`Decision`] of their unchanged state (nothing was
/// consumed) and the others a [`Denied`].
///
/// ```
/// use cellrate_redis::{Outcome, Source};
/// use cellrate::{Decision, Denied, Limited};
/// let o = Outcome::new(vec![
///     Ok(Decision::new(10, 3, 700)),
///     Err(Denied::Limited(Limited::new(1_000, 5_000, 9_000))),
/// ], Source::Redis);
/// assert!(!o.is_admitted());
/// assert_eq!(o.denied().unwrap().retry_after(), Some(5_000));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    results: Vec<Result<Decision, Denied>>,
    source: Source,
    server_time: Option<u64>,
}

impl Outcome {
    /// An outcome from parts (for tests and adapters).
    pub fn new(results: Vec<Result<Decision, Denied>>, source: Source) -> Self {
        Outcome {
            results,
            source,
            server_time: None,
        }
    }
    /// The same results, marked as coming from `source`.
    pub(crate) fn with_source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }
    /// Whether every tier admitted.
    pub fn is_admitted(&self) -> bool {
        self.results.iter().all(Result::is_ok)
    }
    /// One result per tier.
    pub fn results(&self) -> &[Result<Decision, Denied>] {
        &self.results
    }
    /// The denial that asks for the longest wait (a request must wait for
    /// every tier that denied it); `None` if admitted.
    pub fn denied(&self) -> Option<Denied> {
        self.results
            .iter()
            .filter_map(|r| r.err())
            .max_by_key(|d| d.retry_after().unwrap_or(u64::MAX))
    }
    /// Where the answer came from.
    pub fn source(&self) -> Source {
        self.source
    }
    /// The server's time of the decision in µs, when Redis decided.
    pub fn server_time(&self) -> Option<u64> {
        self.server_time
    }
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
