//! GCRA on a shared Redis (standalone or Cluster), so a fleet of servers
//! enforces one limit per client instead of one per process.
//!
//! Feature `redis` (implies `std`). Built on the `redis` client
//! crate; needs Redis ≥ 5 (scripts replicated by effects, so a script may read
//! `TIME` before it writes) and the Rust version that crate asks for (1.88).
//!
//! # The math
//!
//! The same inequality as [`gcra`](crate::gcra), evaluated inside Redis by a
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
//! sub-ticks per µs (its [`scale`](Quota::scale)), and a local
//! [`Gcra`](crate::Gcra) with [`RedisTier::quota`] gives the same decisions
//! at the same server times (the fleet test checks exactly that).
//!
//! # Rounding: the burst is what was asked
//!
//! A tier keeps the burst `b` that was asked ([`Quota::burst`]): `b` cells
//! at once from full are always admitted, and a cost up to `b` is never
//! "too large". Only the emission interval may be rounded, **up**: `T` in
//! µs is a fraction `num/den`; when `den ≤` [`MAX_SCALE`] (2¹⁴) the tier runs
//! at `den` sub-ticks per µs and `T` is exact; otherwise `T′ = ⌈T·2¹⁴⌉/2¹⁴`
//! µs (at most 61 ps more per cell, refused with [`Error::Imprecise`] if
//! that loses over 1 % of the rate). The span is `b·T′`. Every request
//! stream such a tier admits for a non-decreasing `now` conforms to the
//! exact quota: its GCRA is a token bucket of the same capacity `b` that
//! refills no faster, so it never holds more tokens than the exact one.
//! [`RedisTier::is_exact`] says whether `T′ = T`. Over every rate of 1 to
//! 10 000 cells per second, minute, hour or day with bursts of 1 to 1 000
//! all tiers are exact (whole microseconds kept 0.9 % of them exact and
//! lost burst cells on 90 %; the unit test `exact_share_of_realistic_tiers`
//! computes both).
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
//! # Speed
//!
//! Three scripts: the *single* check script (one request of a one-tier
//! policy: `TIME`, `GET`, `SET … PX`, no tables), the *check* script (any
//! number of requests and tiers: `TIME`, one `MGET`, one `SET … PX` per
//! changed key) and the lease script. Measured on the development machine
//! (Redis 7.0.15, client and server sharing 2 busy cores, `benches/redis.rs`),
//! as ratios to a plain fixed window (`INCR` + `EXPIRE … NX`) on the same
//! server in the same run, over one connection (medians of interleaved
//! rounds; criterion's groups, run one after the other while the load
//! moves, spread wider):
//!
//! | mode | ours ÷ INCR+EXPIRE |
//! |---|---|
//! | one decision per round trip (single script) | 0.75–0.77 |
//! | 64 per round trip (one check-script call), baseline built per call | 0.67–0.70 |
//! | 64 per round trip, baseline pipeline prebuilt (no client work at all) | 0.55–0.65 |
//! | 64 concurrent async checks, coalesced, against 64 concurrent `INCR`+`EXPIRE` tasks on a multiplexed connection | 0.97 |
//! | 64 script calls pipelined, one per decision (any script tried) | 0.16–0.25 |
//!
//! Where the time goes, in `redis-server` CPU time per decision: `INCR` +
//! `EXPIRE` about 0.9 µs; any script call about 1.5 µs before it does
//! anything (`EVALSHA` of `return 1` with one key and three arguments); each
//! `redis.call` from Lua 0.5–2 µs, mostly the Lua ↔ command bridge (`INFO
//! commandstats` puts `TIME`, `GET`, `SET` themselves at 0.1–0.5 µs); an
//! array reply about 0.5 µs. So one script call per decision costs 5.5–8 µs
//! however it is written (single script about 5.6, the general lease script
//! about 7, the check script for one request about 8), and such calls
//! pipelined one per decision stay far below the baseline (last row; this is
//! what a Cluster batch does, one call per client). The async client
//! therefore coalesces concurrent checks into shared check-script calls
//! ([`AsyncRedisGcra`], one call per batch queued while the previous call
//! was in flight) rather than pipelining one call per check. A
//! check-script call for 64 requests pays the call, `TIME`, `MGET` and the
//! reply once: about 2 µs per decision, of which about 1.4 µs is the one
//! `SET … PX` per changed key that the expiry rule needs.
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
//! clients in one [`KeyedBox`] per tier: bounded memory
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

use core::fmt;
use std::boxed::Box;
use std::string::{String, ToString};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::decision::{Decision, Denied, Limited, Usage};
use crate::keyed::{KeyedBox, Seed, WhenFull};
use crate::quota::Quota;

mod asynch;
mod blocking;
pub mod lease;

pub use asynch::AsyncRedisGcra;
pub use blocking::{RedisGcra, MAX_IDLE};

/// Ticks per second of every quota used with Redis: server time is in µs.
/// Every tick count in a Redis [`Outcome`] is in these units.
///
/// ```
/// use cellrate::redis::{RedisTier, HZ};
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
/// use cellrate::redis::MAX_SPAN_MICROS;
/// // About 142 years.
/// assert_eq!(MAX_SPAN_MICROS / 1_000_000 / 86_400 / 365, 142);
/// ```
pub const MAX_SPAN_MICROS: u64 = 1 << 52;

/// The largest span `b·T` a tier may have in its own sub-ticks (2⁵²): what
/// keeps every sum and product in the scripts an exact integer of Lua's
/// doubles.
///
/// ```
/// use cellrate::redis::{RedisTier, MAX_SPAN_SUB_TICKS};
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
/// use cellrate::redis::{RedisTier, MAX_SCALE};
/// use cellrate::Quota;
/// // 3 per second: T = 1 000 000/3 µs, kept exactly at 3 sub-ticks per µs.
/// let t = RedisTier::new("t", Quota::per_second(3).at_hz(1_000)).unwrap();
/// assert!(t.is_exact() && t.quota().scale() == 3 && t.quota().scale() <= MAX_SCALE);
/// ```
pub const MAX_SCALE: u64 = 1 << 14;

/// The most tiers one policy may have.
///
/// ```
/// use cellrate::redis::{Error, RedisPolicy, RedisTier, MAX_TIERS};
/// use cellrate::Quota;
/// let tier = RedisTier::new("t", Quota::per_second(1).at_hz(1)).unwrap();
/// let too_many = vec![tier; MAX_TIERS + 1];
/// assert!(matches!(RedisPolicy::new("p", too_many), Err(Error::TierCount)));
/// ```
pub const MAX_TIERS: usize = 8;

/// The single check script: one request of a one-tier policy, the common
/// case of [`RedisGcra::check_n`] and the async client, with no tables and no
/// loops. KEYS: the key. ARGV: cost, `T`, span, scale. Returns `[now, v]`,
/// `v` as in the check script, or `[now, 0, 1]` when the key holds no TAT.
pub(crate) const SINGLE_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/single.lua")
);

/// The check script: `n ≥ 1` requests of one policy decided in order at one
/// server time. KEYS: `m` per request (request `r`'s tier `i` is key
/// `(r − 1)·m + i`). ARGV: `m`, then `Tᵢ`, `spanᵢ`, `scaleᵢ` per tier, then
/// one cost per request, or a single cost for all of them. Returns
/// `[now, vᵣᵢ …, bad …]`, one value per key: `TAT − now` (sub-ticks) after
/// the request if it was admitted (or is a peek that fits), else
/// `−1 − (TAT − now)` before it; then the 1-based index of every key that
/// holds no TAT (see *Keys cellrate cannot read* in the module docs).
pub(crate) const CHECK_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/check.lua")
);

/// The most keys one check-script call carries (requests × tiers). A
/// batch with more is split into several calls in one pipeline, so one
/// call holds the server for at most a few hundred key updates.
///
/// ```
/// assert_eq!(cellrate::redis::MAX_KEYS_PER_CALL, 256);
/// ```
pub const MAX_KEYS_PER_CALL: usize = 256;

/// The lease script (one request; [`lease`] only). KEYS: one per tier.
/// ARGV: cost, mode (0: all or nothing; 1: up to `cost`, at least 1 — a
/// lease), refund (cells given back to each tier first), then `Tᵢ`,
/// `spanᵢ`, `scaleᵢ` per tier. Returns `[granted, now, aheadᵢ, waitᵢ, …]`:
/// cells granted (0 = denied), server µs, and per tier `TAT − now`
/// (sub-ticks) after the call and, when nothing was granted, the wait for
/// the request (for a lease: for one cell); or `[−1, now, i]` when key `i`
/// holds no TAT (nothing is written then).
pub(crate) const LEASE_SCRIPT: &str = concat!(
    include_str!("lua/common.lua"),
    include_str!("lua/lease.lua")
);

/// Why a Redis operation failed (before a [`FailurePolicy`] applies).
///
/// ```
/// use cellrate::redis::{Error, RedisPolicy};
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
            Error::QuotaTooLong => f.write_str("quota span exceeds 2^52 µs"),
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

impl From<::redis::RedisError> for Error {
    fn from(e: ::redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

/// One limit of a policy: a name (part of the key, and the policy name in
/// HTTP headers) and a quota.
///
/// The quota is re-expressed on the server's microsecond clock with the
/// burst that was asked (`b` cells at once from full, whatever the rate)
/// and its emission interval `T` exact whenever `T` in µs is a fraction
/// whose denominator is at most [`MAX_SCALE`] (the tier then runs at that
/// many sub-ticks per µs); otherwise only `T` is rounded **up**, to a
/// multiple of `1/MAX_SCALE` µs, within 1 %, and the span is `b·T′`.
///
/// ```
/// use cellrate::redis::RedisTier;
/// use cellrate::Quota;
/// let tier = RedisTier::new("burst", Quota::per_second(3).at_hz(1_000)).unwrap();
/// // 1/3 s is 333 333⅓ µs: kept exactly, at 3 sub-ticks per µs, burst 3.
/// assert_eq!((tier.quota().emission_interval(), tier.quota().scale()), (1_000_000, 3));
/// assert_eq!(tier.quota().burst(), 3);
/// assert!(tier.is_exact());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTier {
    name: String,
    quota: Quota,
    exact: bool,
    per_scope: bool,
}

/// `quota` on the server's µs clock: the asked burst, `T` exact when its
/// denominator in µs is at most [`MAX_SCALE`] and the span fits
/// [`MAX_SPAN_SUB_TICKS`], else rounded up at the finest scale that keeps
/// the span within it (refused if that loses over 1 % of the rate). Also
/// whether the result enforces exactly the asked rate.
pub(crate) fn on_server_clock(quota: Quota) -> Result<(Quota, bool), Error> {
    let burst = quota.burst() as u128;
    // Asked T in µs = e·HZ / (scale·hz), in lowest terms num/den.
    let mut num = quota.emission_interval() as u128 * HZ as u128;
    let mut den = quota.scale() as u128 * quota.hz() as u128;
    let g = gcd(num, den);
    num /= g;
    den /= g;
    let max_span = MAX_SPAN_SUB_TICKS as u128;
    let (scale, interval) = if den <= MAX_SCALE as u128 && num.saturating_mul(burst) <= max_span {
        (den, num)
    } else {
        // The finest scale s ≤ MAX_SCALE with burst·⌈num·s/den⌉ ≤ 2⁵²:
        // start from the estimate max_span·den/(burst·num), step down.
        let estimate = max_span
            .saturating_mul(den)
            .checked_div(num.saturating_mul(burst))
            .unwrap_or(0);
        let mut s = estimate.min(MAX_SCALE as u128).min(den);
        loop {
            if s == 0 {
                return Err(Error::QuotaTooLong);
            }
            let n = num.saturating_mul(s).div_ceil(den);
            if n.saturating_mul(burst) <= max_span {
                break (s, n);
            }
            s -= 1;
        }
    };
    // Kept T′ = interval/scale ≥ asked T = num/den. Refuse when the rate
    // lost, 1 − T/T′, exceeds 1 %: 100·(interval·den − num·scale) > interval·den.
    let kept = interval * den;
    let lost = kept - num * scale;
    if lost.saturating_mul(100) > kept {
        return Err(Error::Imprecise);
    }
    let exact = lost == 0 && quota.is_exact();
    // T′ = interval/scale ticks of 1 µs: exact at HZ (scale ≤ MAX_SCALE is
    // within the quota horizon's bound), so its burst is the one given.
    let q = Quota::per_ticks(scale as u64, interval as u64)
        .with_burst(burst as u64)
        .try_at_hz(HZ)
        .map_err(|_| Error::QuotaTooLong)?;
    if q.burst() != burst as u64 || !q.is_exact() {
        return Err(Error::QuotaTooLong);
    }
    Ok((q, exact))
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

impl RedisTier {
    /// A tier named `name` enforcing `quota` (at any tick frequency: it is
    /// re-expressed on the server's µs clock, keeping its burst, see
    /// [`RedisTier`]).
    pub fn new(name: impl Into<String>, quota: Quota) -> Result<Self, Error> {
        let name = name.into();
        if !key_part_ok(&name) {
            return Err(Error::InvalidKey);
        }
        let (quota, exact) = on_server_clock(quota)?;
        Ok(RedisTier {
            name,
            quota,
            exact,
            per_scope: false,
        })
    }
    /// This tier counts per (client, scope) — e.g. per endpoint — instead of
    /// per client.
    ///
    /// ```
    /// use cellrate::redis::RedisTier;
    /// use cellrate::Quota;
    /// let t = RedisTier::new("endpoint", Quota::per_second(5).at_hz(1_000)).unwrap().per_scope();
    /// assert!(t.is_per_scope());
    /// ```
    pub fn per_scope(mut self) -> Self {
        self.per_scope = true;
        self
    }
    /// Whether the tier counts per scope.
    pub fn is_per_scope(&self) -> bool {
        self.per_scope
    }
    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The quota the script enforces, at [`HZ`] (server µs) with
    /// [`scale`](Quota::scale) sub-ticks per µs: a local
    /// [`Gcra`](crate::Gcra) with it decides the same at the same server
    /// times. Its burst is the one asked.
    pub fn quota(&self) -> Quota {
        self.quota
    }
    /// Whether the script enforces exactly the rate asked (otherwise `T`
    /// was rounded up, by less than 1 %).
    ///
    /// ```
    /// use cellrate::redis::RedisTier;
    /// use cellrate::Quota;
    /// assert!(RedisTier::new("t", Quota::per_minute(7).at_hz(1_000)).unwrap().is_exact());
    /// // 1/99 991 s: a prime denominator above MAX_SCALE, rounded up.
    /// let t = RedisTier::new("t", Quota::per_second(99_991).at_hz(1)).unwrap();
    /// assert!(!t.is_exact());
    /// ```
    pub fn is_exact(&self) -> bool {
        self.exact
    }
}

fn key_part_ok(s: &str) -> bool {
    !s.contains(['{', '}'])
}

/// The tiers decided together for one client, and the key prefix.
///
/// ```
/// use cellrate::redis::{RedisPolicy, RedisTier};
/// use cellrate::Quota;
/// let policy = RedisPolicy::new("rl", vec![
///     RedisTier::new("second", Quota::per_second(10).at_hz(1_000)).unwrap(),
///     RedisTier::new("day", Quota::per_day(10_000).at_hz(1_000)).unwrap(),
/// ]).unwrap();
/// assert_eq!(policy.keys("alice", None).unwrap(), ["rl:{alice}:second", "rl:{alice}:day"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisPolicy {
    prefix: String,
    tiers: Vec<RedisTier>,
}

impl RedisPolicy {
    /// A policy of 1 to [`MAX_TIERS`] tiers under `prefix`.
    pub fn new(prefix: impl Into<String>, tiers: Vec<RedisTier>) -> Result<Self, Error> {
        let prefix = prefix.into();
        if !key_part_ok(&prefix) {
            return Err(Error::InvalidKey);
        }
        if tiers.is_empty() || tiers.len() > MAX_TIERS {
            return Err(Error::TierCount);
        }
        // Two tiers must never share a key: each key holds one tier's TAT,
        // in that tier's sub-ticks. A per-scope tier `n` with scope `s:t`
        // and a tier named `n:s` (with scope `t` if per scope) would.
        for (i, a) in tiers.iter().enumerate() {
            for b in &tiers[i + 1..] {
                let shared = |x: &RedisTier, y: &RedisTier| {
                    x.per_scope
                        && y.name.len() > x.name.len()
                        && y.name.starts_with(&x.name)
                        && y.name[x.name.len()..].starts_with(':')
                };
                if (a.name == b.name && a.per_scope == b.per_scope) || shared(a, b) || shared(b, a)
                {
                    return Err(Error::DuplicateTier);
                }
            }
        }
        Ok(RedisPolicy { prefix, tiers })
    }
    /// A policy of one tier.
    ///
    /// ```
    /// use cellrate::redis::RedisPolicy;
    /// use cellrate::Quota;
    /// let p = RedisPolicy::single("rl", "api", Quota::per_minute(60).at_hz(1_000)).unwrap();
    /// assert_eq!(p.tiers().len(), 1);
    /// ```
    pub fn single(
        prefix: impl Into<String>,
        name: impl Into<String>,
        quota: Quota,
    ) -> Result<Self, Error> {
        Self::new(prefix, std::vec![RedisTier::new(name, quota)?])
    }
    /// The tiers, in order.
    pub fn tiers(&self) -> &[RedisTier] {
        &self.tiers
    }
    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// The keys of `client` (and `scope`, for per-scope tiers), in tier order.
    pub fn keys(&self, client: &str, scope: Option<&str>) -> Result<Vec<String>, Error> {
        if !key_part_ok(client) || !scope.map_or(true, key_part_ok) {
            return Err(Error::InvalidKey);
        }
        self.tiers
            .iter()
            .map(|t| match (t.per_scope, scope) {
                (false, _) => Ok(std::format!("{}:{{{}}}:{}", self.prefix, client, t.name)),
                (true, Some(s)) => Ok(std::format!(
                    "{}:{{{}}}:{}:{}",
                    self.prefix,
                    client,
                    t.name,
                    s
                )),
                (true, None) => Err(Error::ScopeMismatch),
            })
            .collect()
    }
    /// `Ok` if `client` and `scope` give valid keys for every tier (what
    /// [`keys`](Self::keys) checks, without building them).
    pub(crate) fn validate(&self, client: &str, scope: Option<&str>) -> Result<(), Error> {
        if !key_part_ok(client) || !scope.map_or(true, key_part_ok) {
            return Err(Error::InvalidKey);
        }
        if scope.is_none() && self.tiers.iter().any(|t| t.per_scope) {
            return Err(Error::ScopeMismatch);
        }
        Ok(())
    }
    /// One script call deciding `requests` (already validated, each cost
    /// within every burst) in order, and the script it needs: the single
    /// check script for one request of a one-tier policy, else the check
    /// script with the keys written straight into the command through one
    /// reused buffer, then the policy's arguments and the costs.
    pub(crate) fn check_cmd(
        &self,
        requests: &[(&str, Option<&str>, u64)],
    ) -> (&'static ::redis::Script, ::redis::Cmd) {
        let mut cmd = ::redis::cmd("EVALSHA");
        if let ([(client, scope, cost)], [tier]) = (requests, &self.tiers[..]) {
            let script = single_script();
            cmd.arg(script.get_hash()).arg(1);
            cmd.arg(self.key(tier, client, *scope, &mut String::with_capacity(64)));
            cmd.arg(*cost)
                .arg(tier.quota.emission_interval())
                .arg(tier.quota.span())
                .arg(tier.quota.scale());
            return (script, cmd);
        }
        let script = check_script();
        cmd.arg(script.get_hash())
            .arg(requests.len() * self.tiers.len());
        let mut key = String::with_capacity(64);
        for &(client, scope, _) in requests {
            for t in &self.tiers {
                cmd.arg(self.key(t, client, scope, &mut key));
            }
        }
        cmd.arg(self.tiers.len());
        for t in &self.tiers {
            cmd.arg(t.quota.emission_interval())
                .arg(t.quota.span())
                .arg(t.quota.scale());
        }
        match requests.first() {
            // One cost stands for all when they are equal (the usual case).
            Some(&(_, _, cost)) if requests.iter().all(|r| r.2 == cost) => {
                cmd.arg(cost);
            }
            _ => {
                for &(_, _, cost) in requests {
                    cmd.arg(cost);
                }
            }
        }
        (script, cmd)
    }
    /// `tier`'s key for `client` (and `scope`), written into `buf`.
    fn key<'b>(
        &self,
        tier: &RedisTier,
        client: &str,
        scope: Option<&str>,
        buf: &'b mut String,
    ) -> &'b str {
        buf.clear();
        buf.push_str(&self.prefix);
        buf.push_str(":{");
        buf.push_str(client);
        buf.push_str("}:");
        buf.push_str(&tier.name);
        if let (true, Some(s)) = (tier.per_scope, scope) {
            buf.push(':');
            buf.push_str(s);
        }
        buf
    }
    /// Turns a check-script reply for `requests` into one result each,
    /// appended to `out`: an [`Outcome`], or [`Error::CorruptKey`] for a
    /// request with a key that holds no TAT (that request alone).
    pub(crate) fn decode_checks(
        &self,
        reply: &[i64],
        requests: &[(&str, Option<&str>, u64)],
        out: &mut Vec<Result<Outcome, Error>>,
    ) -> Result<(), Error> {
        let m = self.tiers.len();
        let values = requests.len() * m;
        if reply.len() < 1 + values || reply[0] < 0 {
            return Err(Error::BadReply);
        }
        let now = reply[0] as u64;
        // The keys that hold no TAT, by index (1-based in the reply).
        let mut bad: Vec<Option<usize>> = std::vec![None; requests.len()];
        for &j in &reply[1 + values..] {
            let j = usize::try_from(j).ok().and_then(|j| j.checked_sub(1));
            match j {
                Some(j) if j < values => bad[j / m] = Some(j % m),
                _ => return Err(Error::BadReply),
            }
        }
        let start = out.len();
        for ((values, &(client, scope, cost)), bad) in
            reply[1..1 + values].chunks_exact(m).zip(requests).zip(bad)
        {
            if let Some(tier) = bad {
                let mut key = String::new();
                self.key(&self.tiers[tier], client, scope, &mut key);
                out.push(Err(Error::CorruptKey(key)));
                continue;
            }
            let admitted = values[0] >= 0;
            if values.iter().any(|&v| (v >= 0) != admitted) {
                out.truncate(start);
                return Err(Error::BadReply);
            }
            let results = self
                .tiers
                .iter()
                .zip(values)
                .map(|(t, &v)| {
                    // v ≥ 0: TAT − now after the request; else −1 − (TAT − now).
                    let ahead = if admitted { v as u64 } else { (-1 - v) as u64 };
                    let usage = Usage::gcra(&t.quota, ahead);
                    // The wait for this tier alone, as the in-process GCRA
                    // computes it: how far ahead + cost·T overshoots the span.
                    let wait = (cost * t.quota.emission_interval())
                        .saturating_add(ahead)
                        .saturating_sub(t.quota.span());
                    if !admitted && cost > 0 && wait > 0 {
                        Err(Denied::Limited(Limited::from_usage(usage, wait)))
                    } else {
                        Ok(Decision::from_usage(usage))
                    }
                })
                .collect();
            out.push(Ok(Outcome {
                results,
                source: Source::Redis,
                server_time: Some(now),
            }));
        }
        Ok(())
    }
    /// The denial for a cost that can never fit some tier, if any.
    pub(crate) fn too_large(&self, cost: u64) -> Option<Denied> {
        self.tiers
            .iter()
            .find(|t| cost > t.quota.burst())
            .map(|t| Denied::CostTooLarge {
                cost,
                limit: t.quota.burst(),
            })
    }
    /// The script invocation for one request.
    pub(crate) fn invocation<'a>(
        &self,
        script: &'a ::redis::Script,
        keys: &[String],
        request: Request,
    ) -> ::redis::ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(k);
        }
        inv.arg(request.cost)
            .arg(if request.up_to { 1 } else { 0 })
            .arg(request.refund);
        for t in &self.tiers {
            inv.arg(t.quota.emission_interval())
                .arg(t.quota.span())
                .arg(t.quota.scale());
        }
        inv
    }
    /// Turns the lease script's reply for `keys` into an [`Outcome`].
    pub(crate) fn decode(
        &self,
        reply: &[i64],
        keys: &[String],
        cost: u64,
    ) -> Result<(u64, Outcome), Error> {
        if let [-1, _, i] = reply {
            let key = usize::try_from(*i)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| keys.get(i));
            return match key {
                Some(k) => Err(Error::CorruptKey(k.clone())),
                None => Err(Error::BadReply),
            };
        }
        if reply.len() != 2 + 2 * self.tiers.len() || reply.iter().any(|&v| v < 0) {
            return Err(Error::BadReply);
        }
        let granted = reply[0] as u64;
        let now = reply[1] as u64;
        let results = self
            .tiers
            .iter()
            .zip(reply[2..].chunks_exact(2))
            .map(|(t, pair)| {
                let (ahead, wait) = (pair[0] as u64, pair[1] as u64);
                let usage = Usage::gcra(&t.quota, ahead);
                if granted == 0 && cost > 0 && wait > 0 {
                    Err(Denied::Limited(Limited::from_usage(usage, wait)))
                } else {
                    Ok(Decision::from_usage(usage))
                }
            })
            .collect();
        Ok((
            granted,
            Outcome {
                results,
                source: Source::Redis,
                server_time: Some(now),
            },
        ))
    }
}

/// What the lease script is asked to do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub(crate) cost: u64,
    pub(crate) up_to: bool,
    pub(crate) refund: u64,
}

/// Where an [`Outcome`] came from.
///
/// ```
/// use cellrate::redis::{Outcome, Source};
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
/// use cellrate::redis::{Outcome, Source};
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

/// What a check answers while Redis cannot.
///
/// ```
/// use cellrate::redis::{FailurePolicy, RedisConfig};
/// use cellrate::Quota;
/// // While Redis is down, each server allows 2× the fleet-wide 100/min.
/// let cfg = RedisConfig::new(FailurePolicy::Fallback(vec![Quota::per_minute(200).at_hz(1_000)]));
/// assert!(matches!(cfg.failure(), FailurePolicy::Fallback(q) if q.len() == 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
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
/// use cellrate::redis::{FailurePolicy, RedisConfig};
/// use std::time::Duration;
/// let cfg = RedisConfig::new(FailurePolicy::Closed).with_timeout(Duration::from_millis(50));
/// assert_eq!(cfg.timeout(), Duration::from_millis(50));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    failure: FailurePolicy,
    timeout: Duration,
    reconnect_interval: Duration,
    fallback_capacity: usize,
    fallback_when_full: WhenFull,
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
    /// [`KeyedBox`] per tier, so memory is bounded and eviction is
    /// lossless: a client that still owes is never forgotten, whatever the
    /// flood of new keys; only clients back to full make room (see
    /// [`keyed`](crate::keyed)).
    ///
    /// ```
    /// use cellrate::redis::{FailurePolicy, RedisConfig};
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
    /// use cellrate::redis::{FailurePolicy, RedisConfig};
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

/// The failure policy in force, with the fallback's state.
pub(crate) struct Degrade {
    config: RedisConfig,
    /// One keyed table per tier, keyed by the tier's Redis key.
    fallback: Option<Vec<KeyedBox<Quota>>>,
    epoch: Instant,
}

impl fmt::Debug for Degrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Degrade")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Degrade {
    pub(crate) fn new(config: RedisConfig, tiers: usize) -> Result<Self, Error> {
        let fallback = match &config.failure {
            FailurePolicy::Fallback(quotas) => {
                if quotas.len() != tiers {
                    return Err(Error::TierCount);
                }
                // A seed per process, so keys cannot be chosen to collide.
                let seed = {
                    use std::hash::{BuildHasher, Hasher};
                    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                    h.write_u64(0x6365_6c6c_7261_7465);
                    let k0 = h.finish();
                    h.write_u64(k0);
                    Seed::new(k0, h.finish())
                };
                let tables: Result<Vec<KeyedBox<Quota>>, Error> = quotas
                    .iter()
                    .map(|q| {
                        let (q, _) = on_server_clock(*q)?;
                        Ok(KeyedBox::with_capacity(
                            config.fallback_capacity,
                            q,
                            config.fallback_when_full,
                            seed,
                        ))
                    })
                    .collect();
                Some(tables?)
            }
            _ => None,
        };
        Ok(Degrade {
            config,
            fallback,
            epoch: Instant::now(),
        })
    }

    pub(crate) fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// What a check of `cost` for (`client`, `scope`) answers after trying
    /// Redis: its outcome; a key-layout error or a key that holds no TAT as
    /// it is; for a failure of Redis, the failure policy's
    /// [`decide`](Self::decide).
    pub(crate) fn settle(
        &self,
        tried: Result<Outcome, Error>,
        policy: &RedisPolicy,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Outcome, Error> {
        match tried {
            Err(Error::InvalidKey) => Err(Error::InvalidKey),
            Err(Error::ScopeMismatch) => Err(Error::ScopeMismatch),
            Err(Error::CorruptKey(key)) => Err(Error::CorruptKey(key)),
            Ok(outcome) => Ok(outcome),
            Err(_) => {
                let keys = policy.keys(client, scope)?;
                Ok(self.decide(policy, &keys, cost))
            }
        }
    }

    /// The answer while Redis is failing.
    pub(crate) fn decide(&self, policy: &RedisPolicy, keys: &[String], cost: u64) -> Outcome {
        let tiers = policy.tiers();
        match &self.fallback {
            None if matches!(self.config.failure, FailurePolicy::Open) => Outcome::new(
                tiers
                    .iter()
                    .map(|t| Ok(Decision::new(t.quota.burst(), t.quota.burst(), 0)))
                    .collect(),
                Source::FailOpen,
            ),
            None => {
                let wait = self.config.reconnect_interval.as_micros().max(1) as u64;
                Outcome::new(
                    tiers
                        .iter()
                        .map(|t| Err(Denied::Limited(Limited::new(t.quota.burst(), wait, wait))))
                        .collect(),
                    Source::FailClosed,
                )
            }
            Some(tables) => self.local(tables, keys, cost),
        }
    }

    /// All or nothing over the tiers' tables: each tier is charged in turn;
    /// a tier that denies gives the earlier ones their cells back (so a
    /// denied request consumes from none), and the tiers not yet tried
    /// report their state (their own denial, if they would deny too).
    fn local(&self, tables: &[KeyedBox<Quota>], keys: &[String], cost: u64) -> Outcome {
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let mut results: Vec<Result<Decision, Denied>> = Vec::with_capacity(tables.len());
        let mut denied_at = None;
        for (i, (table, key)) in tables.iter().zip(keys).enumerate() {
            let r = table.check_n(key.as_str(), now, cost);
            if r.is_err() {
                denied_at = Some(i);
                results.push(r);
                break;
            }
            results.push(r);
        }
        if let Some(j) = denied_at {
            for (i, (table, key)) in tables.iter().zip(keys).enumerate() {
                if i < j {
                    results[i] = Ok(table.refund_n(key.as_str(), now, cost).to_decision());
                } else if i > j {
                    // Would this tier admit? Its state, or its own denial.
                    let s = table.peek(key.as_str(), now);
                    if s.remaining() >= cost {
                        results.push(Ok(s.to_decision()));
                    } else {
                        let r = table.check_n(key.as_str(), now, cost);
                        if r.is_ok() {
                            // Freed meanwhile by another thread: undo.
                            results.push(Ok(table.refund_n(key.as_str(), now, cost).to_decision()));
                        } else {
                            results.push(r);
                        }
                    }
                }
            }
        }
        Outcome::new(results, Source::Fallback)
    }
}

/// Reconnection bookkeeping: when the last attempt failed. A failure is
/// cleared by a call Redis answered, not by a connect (a stalled server
/// still accepts connections).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failed_at: Mutex<Option<Instant>>,
    /// Whether `failed_at` is set (read without the lock on every answer).
    failing: std::sync::atomic::AtomicBool,
}

impl Backoff {
    /// Whether a reconnect may be tried now. After a failure, the first
    /// caller once the interval has passed claims the attempt (the next one
    /// is then due an interval later, unless a call succeeds): a dead or
    /// stalled server costs one caller per interval, not every caller.
    pub(crate) fn may_try(&self, interval: Duration) -> bool {
        let mut guard = self.failed_at.lock().unwrap_or_else(|e| e.into_inner());
        match *guard {
            None => true,
            Some(t) if t.elapsed() >= interval => {
                *guard = Some(Instant::now());
                true
            }
            Some(_) => false,
        }
    }
    pub(crate) fn failed(&self) {
        *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.failing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    /// Redis answered a call.
    pub(crate) fn succeeded(&self) {
        if self.failing.load(std::sync::atomic::Ordering::Relaxed) {
            *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = None;
            self.failing
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Where to connect: one server or a Cluster.
///
/// ```
/// use cellrate::redis::Target;
/// let t = Target::standalone("redis://127.0.0.1:6379/").unwrap();
/// let c = Target::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]).unwrap();
/// # let _ = (t, c);
/// ```
#[derive(Clone)]
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

/// The check script, hashed once for the process.
pub(crate) fn check_script() -> &'static ::redis::Script {
    static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
    CELL.get_or_init(|| ::redis::Script::new(CHECK_SCRIPT))
}

/// The single check script, hashed once for the process.
pub(crate) fn single_script() -> &'static ::redis::Script {
    static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
    CELL.get_or_init(|| ::redis::Script::new(SINGLE_SCRIPT))
}

/// The lease script, hashed once for the process.
pub(crate) fn lease_script() -> &'static ::redis::Script {
    static CELL: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
    CELL.get_or_init(|| ::redis::Script::new(LEASE_SCRIPT))
}

/// Whether a failed reply is the server saying it does not know the script.
pub(crate) fn is_noscript(e: &::redis::RedisError) -> bool {
    e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript)
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn policy() -> RedisPolicy {
        RedisPolicy::new(
            "p",
            std::vec![
                RedisTier::new("s", Quota::per_second(10).at_hz(1_000)).unwrap(),
                RedisTier::new("e", Quota::per_minute(5).at_hz(1_000))
                    .unwrap()
                    .per_scope(),
            ],
        )
        .unwrap()
    }

    #[test]
    fn tiers_never_share_a_key() {
        let q = Quota::per_second(1).at_hz(1);
        let t = |name: &str| RedisTier::new(name, q).unwrap();
        let dup = RedisPolicy::new("p", std::vec![t("a"), t("a")]);
        assert!(matches!(dup, Err(Error::DuplicateTier)));
        let dup = RedisPolicy::new("p", std::vec![t("a").per_scope(), t("a:/x")]);
        assert!(matches!(dup, Err(Error::DuplicateTier)));
        let dup = RedisPolicy::new("p", std::vec![t("a:/x"), t("a").per_scope()]);
        assert!(matches!(dup, Err(Error::DuplicateTier)));
        // The same name once per client and once per scope: distinct keys.
        assert!(RedisPolicy::new("p", std::vec![t("a"), t("a").per_scope()]).is_ok());
        let dup = RedisPolicy::new("p", std::vec![t("a").per_scope(), t("a:x").per_scope()]);
        assert!(matches!(dup, Err(Error::DuplicateTier)));
        assert!(RedisPolicy::new("p", std::vec![t("a"), t("ab").per_scope(), t("a:x")]).is_ok());
    }

    #[test]
    fn keys_share_the_client_hash_tag() {
        let p = policy();
        assert_eq!(
            p.keys("k1", Some("/a")).unwrap(),
            ["p:{k1}:s", "p:{k1}:e:/a"]
        );
        assert!(matches!(p.keys("k1", None), Err(Error::ScopeMismatch)));
        assert!(matches!(p.keys("k}1", Some("/a")), Err(Error::InvalidKey)));
        assert!(matches!(p.keys("k1", Some("{x")), Err(Error::InvalidKey)));
    }

    #[test]
    fn tiers_keep_the_burst_and_round_only_t_up() {
        // The cases of issue #14: whole-µs rounding lost a cell each.
        for (q, burst) in [
            (Quota::per_second(3).at_hz(1_000), 3),
            (Quota::per_minute(7).at_hz(1_000), 7),
            (
                Quota::per_second(9_999).with_burst(1_000).at_hz(1_000),
                1_000,
            ),
        ] {
            let t = RedisTier::new("x", q).unwrap();
            assert_eq!(t.quota().burst(), burst, "{q:?}");
            assert!(t.is_exact(), "{q:?}");
            assert_eq!(t.quota().span(), burst * t.quota().emission_interval());
        }
        // 3 per second: T = 10⁶/3 µs exactly, 3 sub-ticks per µs.
        let t = RedisTier::new("x", Quota::per_second(3).at_hz(1_000)).unwrap();
        assert_eq!(
            (t.quota().scale(), t.quota().emission_interval()),
            (3, 1_000_000)
        );
        // A prime denominator above MAX_SCALE: T rounded up to a multiple of
        // 1/MAX_SCALE µs, never down, and the burst kept.
        let asked = Quota::per_second(99_991).with_burst(50).at_hz(1);
        let t = RedisTier::new("x", asked).unwrap();
        assert!(!t.is_exact());
        let q = t.quota();
        assert_eq!((q.scale(), q.burst()), (MAX_SCALE, 50));
        // T′ = e/MAX_SCALE µs ≥ 10⁶/99 991 µs, by less than 1/MAX_SCALE µs.
        let kept = q.emission_interval() as u128 * 99_991;
        let want = 1_000_000u128 * MAX_SCALE as u128;
        assert!(kept >= want && kept - want < 99_991);
        // 125 000/s is exactly 8 µs.
        let t = RedisTier::new("x", Quota::per_second(125_000).at_hz(1_000)).unwrap();
        assert!(t.is_exact() && t.quota().scale() == 1);
    }

    /// Issue #14's figure: the share of exact tiers, and of tiers that keep
    /// their burst, over a realistic set (1 to 10 000 cells per second,
    /// minute, hour and day; bursts 1 to 1 000), before (whole µs, `T`
    /// rounded up and `τ` down) and now. Prints both; asserts the new rule.
    #[test]
    fn exact_share_of_realistic_tiers() {
        let periods = [1_000_000u128, 60_000_000, 3_600_000_000, 86_400_000_000];
        let bursts = [1u64, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1_000];
        let (mut total, mut before_exact, mut before_kept, mut after_exact, mut after_kept) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        for cells in 1..=10_000u64 {
            for (p, period_us) in periods.iter().enumerate() {
                for &burst in &bursts {
                    total += 1;
                    // Before: T′ = ⌈T⌉ µs, τ′ = ⌊(b − 1)·T⌋ µs, burst ⌊(T′ + τ′)/T′⌋.
                    let (num, den) = (*period_us, cells as u128);
                    let t_up = num.div_ceil(den);
                    let tau_down = (burst as u128 - 1) * num / den;
                    before_exact += u64::from(num % den == 0);
                    before_kept += u64::from((t_up + tau_down) / t_up == burst as u128);
                    let q = match p {
                        0 => Quota::per_second(cells),
                        1 => Quota::per_minute(cells),
                        2 => Quota::per_hour(cells),
                        _ => Quota::per_day(cells),
                    }
                    .with_burst(burst)
                    .at_hz(1_000);
                    let t = RedisTier::new("x", q).unwrap();
                    after_exact += u64::from(t.is_exact());
                    after_kept += u64::from(t.quota().burst() == burst);
                }
            }
        }
        let pct = |n: u64| 100.0 * n as f64 / total as f64;
        std::eprintln!(
            "realistic tiers: {total}; exact before {:.2} %, now {:.2} %; burst kept before {:.2} %, now {:.2} %",
            pct(before_exact),
            pct(after_exact),
            pct(before_kept),
            pct(after_kept)
        );
        assert_eq!(after_exact, total);
        assert_eq!(after_kept, total);
    }

    #[test]
    fn rates_too_fine_for_the_scale_are_refused() {
        // 999 999 999/s: T = 10⁶/999 999 999 µs ≈ 16.4/MAX_SCALE µs → 17: 3.6 % lost.
        let q = Quota::per_second(999_999_999).at_hz(1);
        assert!(matches!(RedisTier::new("x", q), Err(Error::Imprecise)));
        // 2·10⁸/s: T = 1/200 µs, exactly 5 ns: fine.
        assert!(RedisTier::new("x", Quota::per_second(200_000_000).at_hz(1))
            .unwrap()
            .is_exact());
    }

    #[test]
    fn spans_beyond_2_pow_52_are_refused() {
        // 1 cell per 200 years: span 6.3e15 µs > 2^52.
        let q = Quota::per_duration(1, Duration::from_secs(200 * 365 * 86_400)).at_hz(1);
        assert!(matches!(RedisTier::new("x", q), Err(Error::QuotaTooLong)));
        let q = Quota::per_duration(1, Duration::from_secs(100 * 365 * 86_400)).at_hz(1);
        assert!(RedisTier::new("x", q).is_ok());
        // A long span with a fine T: the scale shrinks to keep the span
        // within 2^52 sub-ticks, T rounded up within 1 %.
        let q = Quota::per_duration(7, Duration::from_secs(70 * 365 * 86_400))
            .with_burst(7)
            .at_hz(1);
        let t = RedisTier::new("x", q).unwrap();
        assert!(t.quota().span() <= MAX_SPAN_SUB_TICKS);
        assert_eq!(t.quota().burst(), 7);
    }

    fn args(cmd: &::redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                ::redis::Arg::Simple(b) => String::from_utf8(b.to_vec()).unwrap(),
                _ => String::from("<not a plain argument>"),
            })
            .collect()
    }

    #[test]
    fn check_cmd_carries_the_policys_keys_and_costs() {
        let p = policy();
        let (t0, t1) = (p.tiers()[0].quota(), p.tiers()[1].quota());
        let tiers: Vec<String> = std::vec![
            "2".into(),
            t0.emission_interval().to_string(),
            t0.span().to_string(),
            t0.scale().to_string(),
            t1.emission_interval().to_string(),
            t1.span().to_string(),
            t1.scale().to_string(),
        ];
        let (script, cmd) = p.check_cmd(&[("k1", Some("/a"), 1), ("k2", Some("/b"), 2)]);
        let sha = check_script().get_hash();
        assert_eq!(script.get_hash(), sha);
        let mut want: Vec<String> = std::vec!["EVALSHA".into(), sha.into(), "4".into()];
        want.extend(p.keys("k1", Some("/a")).unwrap());
        want.extend(p.keys("k2", Some("/b")).unwrap());
        want.extend(tiers.iter().cloned());
        want.extend(["1".into(), "2".into()]);
        assert_eq!(args(&cmd), want);
        // Equal costs travel as one.
        let (_, cmd) = p.check_cmd(&[("k1", Some("/a"), 3), ("k1", Some("/a"), 3)]);
        assert_eq!(args(&cmd).last().map(String::as_str), Some("3"));
        assert_eq!(args(&cmd).len(), 3 + 4 + tiers.len() + 1);
        // One request of a one-tier policy: the single script.
        let one = RedisPolicy::single("p", "t", Quota::per_second(10).at_hz(1)).unwrap();
        let q = one.tiers()[0].quota();
        let (script, cmd) = one.check_cmd(&[("k1", None, 2)]);
        let sha = single_script().get_hash();
        assert_eq!(script.get_hash(), sha);
        let mut want: Vec<String> = std::vec!["EVALSHA".into(), sha.into(), "1".into()];
        want.extend(one.keys("k1", None).unwrap());
        want.extend([
            "2".into(),
            q.emission_interval().to_string(),
            q.span().to_string(),
            q.scale().to_string(),
        ]);
        assert_eq!(args(&cmd), want);
        assert!(p.validate("k1", Some("/a")).is_ok());
        assert!(matches!(p.validate("k1", None), Err(Error::ScopeMismatch)));
        assert!(matches!(
            p.validate("k{1", Some("/a")),
            Err(Error::InvalidKey)
        ));
    }

    #[test]
    fn decode_checks_matches_in_process_gcra() {
        let p = policy();
        let (q0, q1) = (p.tiers()[0].quota(), p.tiers()[1].quota());
        let mut out = Vec::new();
        // Request 1 admitted (both tiers ahead after it), request 2 denied
        // by the second tier only (values before it, as −1 − ahead).
        let reply = [
            5_000_000,
            100_000,
            12_000_000,
            -1 - 100_000,
            -1 - 60_000_000,
        ];
        let requests = [("k1", Some("/a"), 1), ("k1", Some("/b"), 1)];
        p.decode_checks(&reply, &requests, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        let out: Vec<Outcome> = out.into_iter().map(Result::unwrap).collect();
        let (a, b) = (crate::Gcra::new(q0), crate::Gcra::new(q1));
        assert_eq!(out[0].results(), &[a.check(5_000_000), b.check(5_000_000)]);
        assert_eq!(out[0].server_time(), Some(5_000_000));
        assert!(out[1].results()[0].is_ok());
        assert_eq!(out[1].results()[0], Ok(a.peek(5_000_000).to_decision()));
        for _ in 0..4 {
            b.check(5_000_000).unwrap();
        }
        assert_eq!(out[1].results()[1], b.check(5_000_000));
        // A key that holds no TAT (index 4: request 2, tier 2) fails that
        // request alone, naming the key.
        let mut out = Vec::new();
        let reply = [5_000_000, 100_000, 12_000_000, 0, 0, 4];
        p.decode_checks(&reply, &requests, &mut out).unwrap();
        assert!(out[0].as_ref().unwrap().is_admitted());
        assert!(
            matches!(&out[1], Err(Error::CorruptKey(k)) if k == "p:{k1}:e:/b"),
            "{:?}",
            out[1]
        );
        // Wrong length, mixed signs within a request, negative time, a bad
        // index out of range.
        let one = [("k1", Some("/a"), 1)];
        for bad in [
            &[1, 2][..],
            &[1, 2, -3],
            &[-1, 2, 3],
            &[1, 2, 3, 3],
            &[1, 2, 3, 0],
        ] {
            let r = p.decode_checks(bad, &one, &mut out);
            assert!(matches!(r, Err(Error::BadReply)), "{bad:?}");
        }
    }

    #[test]
    fn decode_matches_in_process_gcra() {
        let p = policy();
        let q0 = p.tiers()[0].quota();
        // Admitted: both tiers 100 ms / 12 s ahead after the request.
        let keys = p.keys("c", Some("/x")).unwrap();
        let (g, o) = p
            .decode(&[1, 5_000_000, 100_000, 0, 12_000_000, 0], &keys, 1)
            .unwrap();
        assert_eq!(g, 1);
        assert!(o.is_admitted());
        let local = crate::Gcra::new(q0);
        assert_eq!(o.results()[0], local.check(5_000_000));
        assert_eq!(o.server_time(), Some(5_000_000));
        // Denied by the second tier only: the first keeps a Decision.
        let (_, o) = p
            .decode(&[0, 9, 0, 0, 60_000_000, 12_000_000], &keys, 1)
            .unwrap();
        assert!(o.results()[0].is_ok());
        assert_eq!(o.denied().unwrap().retry_after(), Some(12_000_000));
        assert!(matches!(
            p.decode(&[1, 2, 3], &keys, 1),
            Err(Error::BadReply)
        ));
        assert!(matches!(
            p.decode(&[1, -2, 3, 4, 5, 6], &keys, 1),
            Err(Error::BadReply)
        ));
        assert!(matches!(
            p.decode(&[-1, 9, 2], &keys, 1),
            Err(Error::CorruptKey(k)) if k == keys[1]
        ));
        assert!(matches!(
            p.decode(&[-1, 9, 3], &keys, 1),
            Err(Error::BadReply)
        ));
    }

    #[test]
    fn fallback_is_all_or_nothing_per_client() {
        let p = policy();
        let d = Degrade::new(
            RedisConfig::new(FailurePolicy::Fallback(std::vec![
                Quota::per_second(100).at_hz(1_000),
                Quota::per_minute(2).at_hz(1_000),
            ])),
            2,
        )
        .unwrap();
        let keys = p.keys("c", Some("/x")).unwrap();
        assert!(d.decide(&p, &keys, 1).is_admitted());
        assert!(d.decide(&p, &keys, 1).is_admitted());
        let third = d.decide(&p, &keys, 1);
        assert_eq!(third.source(), Source::Fallback);
        assert!(third.results()[0].is_ok() && third.results()[1].is_err());
        // The first tier was not charged by the denial: 98 left of 100.
        assert_eq!(third.results()[0].unwrap().remaining(), 98);
        let other = p.keys("d", Some("/x")).unwrap();
        assert!(d.decide(&p, &other, 1).is_admitted());
    }

    #[test]
    fn open_and_closed() {
        let p = policy();
        let keys = p.keys("c", Some("/x")).unwrap();
        let open = Degrade::new(RedisConfig::new(FailurePolicy::Open), 2).unwrap();
        assert!(open.decide(&p, &keys, 1).is_admitted());
        let closed = Degrade::new(RedisConfig::new(FailurePolicy::Closed), 2).unwrap();
        let o = closed.decide(&p, &keys, 1);
        assert_eq!(o.source(), Source::FailClosed);
        assert_eq!(o.denied().unwrap().retry_after(), Some(250_000));
    }
}
