//! Tiers and policies: what a client's keys hold and how they are named.
//!
//! A [`RedisTier`] is a quota (or a window) re-expressed on the server's
//! microsecond clock ([`HZ`]) by the rounding rule of the crate docs: the
//! burst or limit asked, the interval or window rounded up if at all. A
//! [`RedisPolicy`] is 1 to [`MAX_TIERS`] tiers under a prefix, decided
//! together for one client, whose keys never collide
//! ([`Error::DuplicateTier`]).

use std::string::String;
use std::vec::Vec;

use super::{Error, HZ, MAX_LOG_LIMIT, MAX_SCALE, MAX_SPAN_SUB_TICKS, MAX_TIERS};
use cellrate::compose::{AlgorithmKind, LimiterConfig};
use cellrate::window::{BucketedWindowQuota, FixedWindowQuota, SlidingWindowQuota};
use cellrate::{Denied, Quota};

/// The algorithm a [`RedisTier`] decides by, with its parameters on the
/// server's microsecond clock ([`HZ`]): the in-process limiter built from
/// them decides exactly as the script at the same server times. The script
/// keeps whole window and bucket indices, as an
/// [`AnyLimiter`](cellrate::compose::AnyLimiter) built from the same
/// [`LimiterConfig`] does (its bucketed window is a
/// [`WideBucketedWindow`](cellrate::window::WideBucketedWindow)); the
/// one-word window limiters agree unless a client is silent for a multiple
/// of their `2^tag_bits` windows or buckets, where they deny more.
///
/// ```
/// use cellrate::compose::{AlgorithmKind, LimiterConfig};
/// use cellrate_redis::{RedisTier, TierAlgorithm};
/// use cellrate::window::FixedWindowQuota;
/// // 100 per window of 60 000 ticks of a 1 kHz clock: a one-minute window.
/// let c = LimiterConfig::new(AlgorithmKind::FixedWindow, 100, 60_000, 1_000);
/// let t = RedisTier::from_config("minute", &c).unwrap();
/// assert_eq!(t.algorithm(), TierAlgorithm::FixedWindow(FixedWindowQuota::new(100, 60_000_000)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TierAlgorithm {
    /// GCRA (also the token and leaky buckets): the quota of
    /// [`RedisTier::quota`].
    Gcra,
    /// [`FixedWindow`](cellrate::window::FixedWindow), window in µs.
    FixedWindow(FixedWindowQuota),
    /// [`SlidingWindow`](cellrate::window::SlidingWindow), window in µs.
    SlidingWindow(SlidingWindowQuota),
    /// [`BucketedWindow`](cellrate::window::BucketedWindow), buckets in µs.
    BucketedWindow(BucketedWindowQuota),
    /// [`SlidingLog`](cellrate::window::SlidingLog): `limit` cells in any
    /// `window` µs (`limit ≤` [`MAX_LOG_LIMIT`]).
    SlidingLog {
        /// Cells per window.
        limit: u64,
        /// The window in µs.
        window: u64,
    },
}

impl TierAlgorithm {
    /// The kind code the tiers script reads, and its three parameters.
    pub(crate) fn args(&self, quota: &Quota) -> [u64; 4] {
        match self {
            TierAlgorithm::Gcra => [0, quota.emission_interval(), quota.span(), quota.scale()],
            TierAlgorithm::FixedWindow(q) => [1, q.limit(), q.window(), 0],
            TierAlgorithm::SlidingWindow(q) => [2, q.limit(), q.window(), 0],
            TierAlgorithm::BucketedWindow(q) => {
                [3, q.limit(), q.bucket_ticks(), u64::from(q.buckets())]
            }
            TierAlgorithm::SlidingLog { limit, window } => [4, *limit, *window, 0],
        }
    }
}

/// `ticks` of a clock at `hz` in whole µs, rounded **up** (a longer window
/// admits less, never more), and whether that is exact. Refused when the
/// rounding lengthens it by over 1 % ([`Error::Imprecise`]) or when it is
/// longer than 2⁵² µs ([`Error::QuotaTooLong`]).
pub(crate) fn micros_up(ticks: u64, hz: u64) -> Result<(u64, bool), Error> {
    let scaled = ticks as u128 * HZ as u128;
    let hz = hz.max(1) as u128;
    let us = scaled.div_ceil(hz);
    if us == 0 || us > MAX_SPAN_SUB_TICKS as u128 {
        return Err(Error::QuotaTooLong);
    }
    // Lost share 1 − W/W′: refused above 1 %.
    let kept = us * hz;
    if (kept - scaled).saturating_mul(100) > kept {
        return Err(Error::Imprecise);
    }
    Ok((us as u64, kept == scaled))
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
/// use cellrate_redis::RedisTier;
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
    algorithm: TierAlgorithm,
}

/// `quota` on the server's µs clock: the asked burst, `T` exact when its
/// denominator in µs is at most [`MAX_SCALE`] and the span fits
/// [`MAX_SPAN_SUB_TICKS`], else rounded up at the finest scale that keeps
/// the span within it (refused if that loses over 1 % of the rate). Also
/// whether the result enforces exactly the asked rate.
///
/// ```
/// use cellrate::Quota;
/// use cellrate_redis::{on_server_clock, HZ};
/// let (q, exact) = on_server_clock(Quota::per_second(3).with_burst(5).at_hz(1_000)).unwrap();
/// assert_eq!((q.hz(), q.burst()), (HZ, 5));
/// assert!(exact); // 1/3 s is exact in sub-microseconds
/// ```
pub fn on_server_clock(quota: Quota) -> Result<(Quota, bool), Error> {
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
    // within the quota's scale bound), so its burst is the one given.
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
            algorithm: TierAlgorithm::Gcra,
        })
    }

    /// A tier named `name` running the algorithm of `config`, its window
    /// of `config.window` ticks at `config.hz` re-expressed in server µs.
    ///
    /// The token bucket, leaky bucket and GCRA are [`new`](Self::new)
    /// with the configuration's quota. A window of `W` ticks becomes
    /// `W′ = ⌈W·10⁶/hz⌉` µs (for the bucketed window each bucket of
    /// `W/N` ticks is rounded up so, and `W′ = N·b′`): exact when `W·10⁶`
    /// is a multiple of `hz` (any window of whole µs, ms or s), otherwise
    /// rounded **up**, so the tier admits less, never more, than asked
    /// ([`is_exact`](Self::is_exact) says which; over 1 % longer is
    /// refused with [`Error::Imprecise`]). The limit is the one asked. The
    /// script's integers bound what fits: every window at most 2⁵² µs, the
    /// sliding window's `limit·W′` below 2⁵³ and the log's limit at most
    /// [`MAX_LOG_LIMIT`] ([`Error::QuotaTooLong`]); a bucketed window's
    /// counts fit [`BucketedWindowQuota`]'s word. An invalid
    /// configuration is [`Error::Config`].
    ///
    /// ```
    /// use cellrate::compose::{AlgorithmKind, LimiterConfig};
    /// use cellrate_redis::{RedisTier, TierAlgorithm};
    /// let c = LimiterConfig::new(AlgorithmKind::BucketedWindow, 60, 60, 1).with_buckets(6);
    /// let t = RedisTier::from_config("minute", &c).unwrap();
    /// let TierAlgorithm::BucketedWindow(q) = t.algorithm() else { panic!() };
    /// assert_eq!((q.bucket_ticks(), q.buckets()), (10_000_000, 6));
    /// assert!(t.is_exact());
    /// // 10 per 3 ticks of a 7 Hz clock: 428 571.43 µs, rounded up to 428 572.
    /// let c = LimiterConfig::new(AlgorithmKind::FixedWindow, 10, 3, 7);
    /// assert!(!RedisTier::from_config("odd", &c).unwrap().is_exact());
    /// ```
    pub fn from_config(name: impl Into<String>, config: &LimiterConfig) -> Result<Self, Error> {
        config.validate().map_err(Error::Config)?;
        let (limit, window, hz) = (config.limit, config.window, config.hz);
        let window_err = |e| Error::Config(cellrate::compose::LimiterConfigError::Window(e));
        let (algorithm, window_us, exact) = match config.algorithm {
            AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket | AlgorithmKind::Gcra => {
                return Self::new(name, config.quota().map_err(Error::Config)?);
            }
            AlgorithmKind::FixedWindow => {
                let (w, exact) = micros_up(window, hz)?;
                let q = FixedWindowQuota::try_new(limit, w).map_err(window_err)?;
                (TierAlgorithm::FixedWindow(q), w, exact)
            }
            AlgorithmKind::SlidingWindow => {
                let (w, exact) = micros_up(window, hz)?;
                if limit as u128 * w as u128 >= 1 << 53 {
                    return Err(Error::QuotaTooLong);
                }
                let q = SlidingWindowQuota::try_new(limit, w).map_err(window_err)?;
                (TierAlgorithm::SlidingWindow(q), w, exact)
            }
            AlgorithmKind::BucketedWindow => {
                let n = config.buckets.unwrap_or(1).max(1);
                let (b, exact) = micros_up(window / u64::from(n), hz)?;
                let w = b
                    .checked_mul(u64::from(n))
                    .filter(|w| *w <= MAX_SPAN_SUB_TICKS)
                    .ok_or(Error::QuotaTooLong)?;
                let q = BucketedWindowQuota::try_new(limit, w, n).map_err(window_err)?;
                (TierAlgorithm::BucketedWindow(q), w, exact)
            }
            AlgorithmKind::SlidingLog => {
                if limit > MAX_LOG_LIMIT {
                    return Err(Error::QuotaTooLong);
                }
                let (w, exact) = micros_up(window, hz)?;
                (TierAlgorithm::SlidingLog { limit, window: w }, w, exact)
            }
            // An algorithm the core gains before this crate has a step for it.
            _ => {
                return Err(Error::Config(
                    cellrate::compose::LimiterConfigError::UnknownAlgorithm,
                ))
            }
        };
        let name = name.into();
        if !key_part_ok(&name) {
            return Err(Error::InvalidKey);
        }
        // The limit per window as a rate: what headers and the failure
        // policies' full answers announce.
        let quota = Quota::per_ticks(limit, window_us)
            .with_burst(limit)
            .try_at_hz(HZ)
            .map_err(|_| Error::QuotaTooLong)?;
        Ok(RedisTier {
            name,
            quota,
            exact,
            per_scope: false,
            algorithm,
        })
    }

    /// The algorithm and its parameters on the server's µs clock.
    pub fn algorithm(&self) -> TierAlgorithm {
        self.algorithm
    }

    /// The most cells the tier admits at once from full: the burst of a
    /// GCRA tier, the limit of a window tier.
    pub fn limit(&self) -> u64 {
        self.quota.burst()
    }
    /// This tier counts per (client, scope) — e.g. per endpoint — instead of
    /// per client.
    ///
    /// ```
    /// use cellrate_redis::RedisTier;
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
    /// [`Gcra`](cellrate::Gcra) with it decides the same at the same server
    /// times. Its burst is the one asked. For a window tier
    /// ([`algorithm`](Self::algorithm)), its limit per window as a rate
    /// (burst = limit, span = the window): what its headers announce.
    pub fn quota(&self) -> Quota {
        self.quota
    }
    /// Whether the script enforces exactly the rate asked (otherwise `T`,
    /// or a window, was rounded up, by less than 1 %).
    ///
    /// ```
    /// use cellrate_redis::RedisTier;
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
/// use cellrate_redis::{RedisPolicy, RedisTier};
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
    /// use cellrate_redis::RedisPolicy;
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
        self.validate(client, scope)?;
        let key = |t| {
            let mut key = String::new();
            self.key(t, client, scope, &mut key);
            key
        };
        Ok(self.tiers.iter().map(key).collect())
    }
    /// `Ok` if `client` and `scope` give valid keys for every tier (what
    /// [`keys`](Self::keys) checks, without building them).
    pub(crate) fn validate(&self, client: &str, scope: Option<&str>) -> Result<(), Error> {
        if !key_part_ok(client) || !scope.is_none_or(key_part_ok) {
            return Err(Error::InvalidKey);
        }
        if scope.is_none() && self.tiers.iter().any(|t| t.per_scope) {
            return Err(Error::ScopeMismatch);
        }
        Ok(())
    }
    /// `tier`'s key for `client` (and `scope`), written into `buf`.
    pub(super) fn key<'b>(
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
    /// Whether every tier is GCRA (the check and single scripts; else the
    /// tiers script).
    pub(crate) fn is_gcra(&self) -> bool {
        self.tiers
            .iter()
            .all(|t| t.algorithm == TierAlgorithm::Gcra)
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
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::Duration;

    /// Two tiers, the second per scope.
    pub(crate) fn policy() -> RedisPolicy {
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
        // Cases where whole-µs rounding would lose a cell each.
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

    /// The share of exact tiers, and of tiers that keep their burst, over a
    /// realistic set (1 to 10 000 cells per second, minute, hour and day;
    /// bursts 1 to 1 000): under plain whole-µs rounding (`T` rounded up and
    /// `τ` down), the simple alternative, and under this crate's sub-tick
    /// rule. Prints both; asserts the sub-tick rule's.
    #[test]
    fn exact_share_of_realistic_tiers() {
        let periods = [1_000_000u128, 60_000_000, 3_600_000_000, 86_400_000_000];
        let bursts = [1u64, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1_000];
        let (mut total, mut whole_exact, mut whole_kept, mut sub_exact, mut sub_kept) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        for cells in 1..=10_000u64 {
            for (p, period_us) in periods.iter().enumerate() {
                for &burst in &bursts {
                    total += 1;
                    // Whole µs: T′ = ⌈T⌉ µs, τ′ = ⌊(b − 1)·T⌋ µs, burst ⌊(T′ + τ′)/T′⌋.
                    let (num, den) = (*period_us, cells as u128);
                    let t_up = num.div_ceil(den);
                    let tau_down = (burst as u128 - 1) * num / den;
                    whole_exact += u64::from(num % den == 0);
                    whole_kept += u64::from((t_up + tau_down) / t_up == burst as u128);
                    let q = match p {
                        0 => Quota::per_second(cells),
                        1 => Quota::per_minute(cells),
                        2 => Quota::per_hour(cells),
                        _ => Quota::per_day(cells),
                    }
                    .with_burst(burst)
                    .at_hz(1_000);
                    let t = RedisTier::new("x", q).unwrap();
                    sub_exact += u64::from(t.is_exact());
                    sub_kept += u64::from(t.quota().burst() == burst);
                }
            }
        }
        let pct = |n: u64| 100.0 * n as f64 / total as f64;
        std::eprintln!(
            "realistic tiers: {total}; exact: whole µs {:.2} %, sub-ticks {:.2} %; burst kept: whole µs {:.2} %, sub-ticks {:.2} %",
            pct(whole_exact),
            pct(sub_exact),
            pct(whole_kept),
            pct(sub_kept)
        );
        assert_eq!(sub_exact, total);
        assert_eq!(sub_kept, total);
    }

    /// A window of W ticks at hz runs as ⌈W·10⁶/hz⌉ µs: exact when that is
    /// whole, else rounded up (never down), refused over 1 % or 2⁵² µs.
    #[test]
    fn windows_map_onto_server_microseconds_rounding_up() {
        // Reference: rational arithmetic, by brute force over small values.
        for hz in [1u64, 7, 1_000, 32_768, 1_000_000, 3_000_000_000] {
            for ticks in (1u64..200).chain([59_999, 60_000, 86_400_000]) {
                let exact_num = ticks as u128 * 1_000_000;
                match micros_up(ticks, hz) {
                    Ok((us, exact)) => {
                        let us = us as u128;
                        assert!(us * hz as u128 >= exact_num, "{ticks}@{hz}");
                        assert!(
                            (us - 1) * (hz as u128) < exact_num,
                            "{ticks}@{hz}: not the least"
                        );
                        assert_eq!(exact, us * hz as u128 == exact_num);
                        assert!(100 * (us * hz as u128 - exact_num) <= us * hz as u128);
                    }
                    Err(Error::Imprecise) => {
                        let us = exact_num.div_ceil(hz as u128);
                        assert!(100 * (us * hz as u128 - exact_num) > us * hz as u128 || us == 0);
                    }
                    Err(Error::QuotaTooLong) => {
                        assert_eq!(exact_num.div_ceil(hz as u128), 0, "{ticks}@{hz}");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert!(matches!(
            micros_up(1 << 53, 1_000_000),
            Err(Error::QuotaTooLong)
        ));
        let c = LimiterConfig::new(AlgorithmKind::SlidingWindow, 1 << 20, 1 << 34, 1_000_000);
        assert!(matches!(
            RedisTier::from_config("t", &c),
            Err(Error::QuotaTooLong)
        ));
        let c = LimiterConfig::new(AlgorithmKind::Gcra, 10, 1_000, 1_000);
        let t = RedisTier::from_config("t", &c).unwrap();
        assert_eq!(
            t,
            RedisTier::new("t", Quota::per_ticks(10, 1_000).at_hz(1_000)).unwrap()
        );
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
}
