//! Rate limits on a shared Redis (standalone or Cluster), so a fleet of
//! servers enforces one limit per client instead of one per process. Every
//! algorithm of cellrate runs there — GCRA (and the token and leaky
//! buckets), the fixed, sliding and bucketed windows and the sliding log —
//! chosen per tier ([`RedisTier::new`] for GCRA, [`RedisTier::from_config`]
//! for any [`LimiterConfig`](cellrate::LimiterConfig)); one call checks a
//! client's tiers all or nothing. Clients: [`RedisGcra`] (blocking),
//! [`AsyncRedisGcra`] (tokio; concurrent checks coalesced) and
//! [`lease::LeasedRedisGcra`]. Needs Redis ≥ 5 (scripts replicated by
//! effects, so a script may read `TIME` before it writes) and Rust 1.88.
//!
//! # Contract
//!
//! * **One Lua step per algorithm, at the server's time.** Each call runs
//!   one script (`EVALSHA`, loaded again after `NOSCRIPT`) that reads
//!   `TIME` once (`now`, integer µs) and decides every request of the call
//!   in order at that `now` by each tier's in-process rule; for GCRA
//!   `admit ⇔ ∀i: max(TATᵢ, now) + cost·Tᵢ − now ≤ bᵢ·Tᵢ`. The answers are
//!   the crate's own [`Decision`] and [`Denied`]: a local limiter with
//!   [`RedisTier::quota`] (GCRA) or built from [`RedisTier::algorithm`]
//!   answers the same at the same server times.
//! * **All or nothing.** Every tier of a request is judged before any is
//!   charged: a request denied by one tier consumes from none. Nothing is
//!   written before every request of the call is decided; each changed key
//!   is written once (`SET`, its expiry set or kept; a log's changed slots
//!   and header by offset, then `PEXPIRE`) and expires within a millisecond after its
//!   state stops mattering (an expired key reads as full). A cost of 0
//!   writes nothing (a peek) but a re-expressed state (below); a cost that
//!   can never fit is a denial without a round trip.
//! * **Never more than asked.** A tier keeps the burst (or limit) asked;
//!   only `T`, or a window, may be rounded, **up**, by at most 1 %
//!   ([`Error::Imprecise`] beyond; [`RedisTier::is_exact`] says whether it
//!   was); `T` is exact when it is a fraction of a µs whose denominator is
//!   at most [`MAX_SCALE`]. A server clock stepping back only denies more.
//! * **Exact integers.** Every stored field, sum and product in the Lua
//!   stays an integer below 2⁵³ (Lua numbers are doubles): spans up to
//!   [`MAX_SPAN_SUB_TICKS`], windows up to [`MAX_SPAN_MICROS`], logs up to
//!   [`MAX_LOG_LIMIT`] cells ([`Error::QuotaTooLong`] beyond).
//! * **Keys.** `<prefix>:{<client>}:<tier>[:<scope>]` (a
//!   [`per_scope`](RedisTier::per_scope) tier): one Cluster slot per client;
//!   no part may hold `{` or `}` ([`Error::InvalidKey`]). A key its tier
//!   cannot read is never overwritten: its checks fail with
//!   [`Error::CorruptKey`] whatever the failure policy.
//! * **Stored state.** Internal, but never misread: a GCRA key holds its
//!   TAT, a window key a string led by its algorithm's letter, a sliding
//!   log a ring of fixed-width expiries read and written by offset. A
//!   state written under other parameters than a tier's first (recorded
//!   in `<prefix>:bases`) is re-expressed at its first read as the
//!   in-process `translate` does (the cells used kept) and written back.
//! * **Failures.** Each call has a deadline, connect included
//!   ([`RedisConfig::with_timeout`]). While Redis fails, the
//!   [`FailurePolicy`] answers: admit, deny, or decide per client on
//!   bounded local tables with their own quotas; the [`Outcome`]'s
//!   [`Source`] says which. After a failure one caller per
//!   [`RedisConfig::with_reconnect_interval`] reconnects, the others get
//!   [`Error::Backoff`] (and the failure policy) at once. No path panics.
//! * **Cost.** One round trip and one script call per check, or per batch
//!   of up to [`MAX_KEYS_PER_CALL`] keys ([`RedisGcra::try_check_batch`];
//!   concurrent [`AsyncRedisGcra`] checks coalesce into such batches), and
//!   one for `<prefix>:bases` before a new limiter's first and after failures.
//!
//! Proofs, the scripts' shape and measured costs: docs/design/redis.md.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

use core::fmt;
use std::string::String;

use cellrate::compose::Tiers;
use cellrate::{Decision, Denied};

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

/// The largest limit of a sliding-log tier on Redis: its ring holds one
/// 16-digit expiry per cell (64 KiB at this limit). A check reads the
/// ring's header and only the slots it needs, so its cost does not grow
/// with the limit; an admission of `cost` cells writes `cost` slots.
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
    Config(cellrate::compose::LimiterConfigError),
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
/// let o = Outcome::new(Default::default(), Source::FailOpen);
/// assert_eq!(o.source(), Source::FailOpen);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

/// The answer to one check: one result per tier, in the policy's order
/// ([`Tiers`], the same answer the in-process tiers give), where it came
/// from, and the server's time when Redis decided.
///
/// ```
/// use cellrate_redis::{Outcome, Source};
/// use cellrate::compose::Tiers;
/// use cellrate::{Decision, Denied, Limited};
/// let o = Outcome::new(
///     Tiers::from_slice(&[
///         Ok(Decision::new(10, 3, 700)),
///         Err(Denied::Limited(Limited::new(1_000, 5_000, 9_000))),
///     ])
///     .unwrap(),
///     Source::Redis,
/// );
/// assert!(!o.tiers().is_admitted());
/// assert_eq!(o.tiers().denied().unwrap().retry_after(), Some(5_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    tiers: Tiers<MAX_TIERS>,
    source: Source,
    server_time: Option<u64>,
}

impl Outcome {
    /// An outcome from parts (for tests and adapters).
    pub fn new(tiers: Tiers<MAX_TIERS>, source: Source) -> Self {
        Outcome {
            tiers,
            source,
            server_time: None,
        }
    }
    /// An outcome from the results of a policy's tiers (at most
    /// [`MAX_TIERS`], which every policy keeps).
    pub(crate) fn of(results: &[Result<Decision, Denied>], source: Source) -> Self {
        let kept = &results[..results.len().min(MAX_TIERS)];
        Outcome::new(Tiers::from_slice(kept).unwrap_or_default(), source)
    }
    /// Redis's answer at server time `now` (µs).
    pub(crate) fn from_redis(results: &[Result<Decision, Denied>], now: u64) -> Self {
        Outcome {
            server_time: Some(now),
            ..Outcome::of(results, Source::Redis)
        }
    }
    /// The same results, marked as coming from `source`.
    pub(crate) fn with_source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }
    /// Every tier's result.
    pub fn tiers(&self) -> &Tiers<MAX_TIERS> {
        &self.tiers
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
