//! HTTP rate-limit header values from a cellrate [`Decision`] or
//! [`Denied`], for any server, `no_std` included.
//!
//! Every function here writes a header **value** (not the name) into any
//! [`core::fmt::Write`]: a `heapless::String`, a `std::string::String`, or a
//! fixed buffer. Nothing allocates and nothing panics; `no_std`.
//!
//! # Fields
//!
//! * `RateLimit-Policy` and `RateLimit`, as in the IETF draft
//!   *RateLimit header fields for HTTP* (draft-ietf-httpapi-ratelimit-headers,
//!   revision -10 syntax): Structured Field Lists (RFC 9651) of policy names
//!   with `q` (cells per window) and `w` (window, seconds) for the policy, `r`
//!   (remaining) and `t` (seconds until reset) for its state:
//!
//!   ```text
//!   RateLimit-Policy: "burst";q=20;w=1, "day";q=5000;w=86400
//!   RateLimit: "burst";r=19;t=1, "day";r=4999;t=18
//!   ```
//! * the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//!   `X-RateLimit-Reset` (delta seconds until full, not an epoch time);
//! * `Retry-After` (RFC 9110 §10.2.3) in delay-seconds.
//!
//! Every duration is converted to whole seconds **rounded up**
//! (`⌈ticks / hz⌉`), so a client that waits the advertised time has waited
//! at least the real one.
//!
//! # Policies a client can pace by
//!
//! A GCRA of rate `1/T` and burst `b` announces its **burst policy**
//! `q = b, w = ⌈b·T⌉` and, when that does not carry the rate exactly, a
//! **rate policy** ([`sustained`]) named `"<tier>/rate"` whose `q/w` is the
//! real rate:
//!
//! ```text
//! RateLimit-Policy: "api";q=10;w=1, "api/rate";q=50;w=1
//! RateLimit: "api";r=7;t=1, "api/rate";r=47;t=1
//! ```
//!
//! A client that honours every policy as a window, or paces as a token bucket
//! of the burst policy's depth at the rate policy's rate, is never refused.
//! Why one `q;w` pair cannot say both, and the proofs, are in
//! docs/design/headers.md in the repository.
//!
//! # Invariants
//!
//! * Every number written is an unsigned integer: never negative.
//! * `Retry-After` for a [`Denied::Limited`] is `max(1, ⌈retry_after / hz⌉)`:
//!   never 0 and never less than the wait the limiter computed.
//! * `t` in `RateLimit` is the time until the limiter is full again
//!   (`reset_after`); for a GCRA denial it is at least `Retry-After`.
//! * A [`Denied::CostTooLarge`] has no retry time and no state: the functions
//!   that would need one return [`HeaderError::NoRetry`] and write nothing.
//! * A policy name is written as an RFC 9651 sf-string: `"` and `\` are
//!   escaped; other characters outside printable ASCII are refused with
//!   [`HeaderError::InvalidName`] before anything is written.

#![no_std]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use core::fmt::{self, Write};

use cellrate::{Decision, Denied, Quota};

/// Why a header value was not written.
///
/// ```
/// use cellrate_headers::{write_retry_after, HeaderError};
/// use cellrate::Denied;
/// let mut s = String::new();
/// let never = Denied::CostTooLarge { cost: 5, limit: 2 };
/// assert_eq!(write_retry_after(&mut s, &never, 1_000), Err(HeaderError::NoRetry));
/// assert!(s.is_empty());
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderError {
    /// The writer refused the text (for example a full fixed buffer).
    Fmt,
    /// The tick frequency was 0.
    ZeroHz,
    /// The denial was [`Denied::CostTooLarge`]: there is no time to announce.
    NoRetry,
    /// A policy name holds a character that an sf-string cannot carry
    /// (only printable ASCII, `0x20..=0x7e`, is allowed).
    InvalidName,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeaderError::Fmt => "the writer refused the header text",
            HeaderError::ZeroHz => "the tick frequency is 0",
            HeaderError::NoRetry => "the cost can never fit: no retry time to announce",
            HeaderError::InvalidName => "policy names must be printable ASCII",
        })
    }
}

impl core::error::Error for HeaderError {}

impl From<fmt::Error> for HeaderError {
    fn from(_: fmt::Error) -> Self {
        HeaderError::Fmt
    }
}

/// `⌈ticks / hz⌉` seconds.
///
/// ```
/// use cellrate_headers::seconds_ceil;
/// assert_eq!(seconds_ceil(0, 1_000), Ok(0));
/// assert_eq!(seconds_ceil(1, 1_000), Ok(1));
/// assert_eq!(seconds_ceil(1_000, 1_000), Ok(1));
/// assert_eq!(seconds_ceil(1_001, 1_000), Ok(2));
/// ```
pub const fn seconds_ceil(ticks: u64, hz: u64) -> Result<u64, HeaderError> {
    if hz == 0 {
        return Err(HeaderError::ZeroHz);
    }
    Ok(ticks.div_ceil(hz))
}

/// The `Retry-After` delay in whole seconds for a denial: at least 1, and
/// never less than the limiter's `retry_after`.
///
/// ```
/// use cellrate::{Gcra, Quota};
/// use cellrate_headers::retry_after_secs;
/// let g = Gcra::new(Quota::per_minute(1).at_hz(1_000));
/// g.check(0).unwrap();
/// let denied = g.check(59_999).unwrap_err(); // 1 tick to wait
/// assert_eq!(retry_after_secs(&denied, 1_000), Ok(1));
/// let denied = g.check(100).unwrap_err(); // 59.9 s to wait
/// assert_eq!(retry_after_secs(&denied, 1_000), Ok(60));
/// ```
pub const fn retry_after_secs(denied: &Denied, hz: u64) -> Result<u64, HeaderError> {
    let Some(ticks) = denied.retry_after() else {
        return Err(HeaderError::NoRetry);
    };
    match seconds_ceil(ticks, hz) {
        Ok(0) => Ok(1),
        other => other,
    }
}

/// Writes the `Retry-After` value for a denial.
///
/// ```
/// use cellrate_headers::write_retry_after;
/// use cellrate::{Denied, Limited};
/// let mut s = String::new();
/// // 1.5 s on a 1 kHz clock rounds up to 2 s.
/// write_retry_after(&mut s, &Denied::Limited(Limited::new(10, 1_500, 9_000)), 1_000).unwrap();
/// assert_eq!(s, "2");
/// ```
pub fn write_retry_after<W: Write + ?Sized>(
    w: &mut W,
    denied: &Denied,
    hz: u64,
) -> Result<(), HeaderError> {
    let secs = retry_after_secs(denied, hz)?;
    write!(w, "{secs}")?;
    Ok(())
}

/// One quota policy as `RateLimit-Policy` announces it: a name, a quota of
/// `limit` cells, and a window in ticks.
///
/// ```
/// use cellrate_headers::Policy;
/// use cellrate::Quota;
/// let p = Policy::from_quota("api", &Quota::per_minute(100).at_hz(1_000));
/// assert_eq!((p.limit(), p.window_ticks()), (100, 60_000));
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy<'a> {
    name: &'a str,
    limit: u64,
    window_ticks: u64,
}

impl<'a> Policy<'a> {
    /// A policy of `limit` cells per `window_ticks` ticks.
    ///
    /// ```
    /// use cellrate_headers::Policy;
    /// let p = Policy::new("day", 5_000, 86_400_000);
    /// assert_eq!(p.name(), "day");
    /// ```
    pub const fn new(name: &'a str, limit: u64, window_ticks: u64) -> Self {
        Policy {
            name,
            limit,
            window_ticks,
        }
    }
    /// The policy of a GCRA quota: `q` is the burst and `w` the time to refill
    /// it from empty (`burst · T`, rounded up to whole ticks).
    ///
    /// ```
    /// use cellrate_headers::Policy;
    /// use cellrate::Quota;
    /// // 10 per second with bursts of 20: the burst refills in 2 s.
    /// let q = Quota::per_second(10).with_burst(20).at_hz(1_000);
    /// assert_eq!(Policy::from_quota("b", &q).window_ticks(), 2_000);
    /// ```
    pub const fn from_quota(name: &'a str, quota: &Quota) -> Self {
        Policy {
            name,
            limit: quota.burst(),
            window_ticks: quota.span().div_ceil(quota.scale()),
        }
    }
    /// The name.
    pub const fn name(&self) -> &'a str {
        self.name
    }
    /// The quota (cells per window).
    pub const fn limit(&self) -> u64 {
        self.limit
    }
    /// The window, in ticks.
    pub const fn window_ticks(&self) -> u64 {
        self.window_ticks
    }
}

/// The rate policy of a GCRA quota (see [the module docs](self#policies-a-client-can-pace-by)):
/// `(q, W)`, `q` cells per `W` whole seconds, the quota's real rate, with
/// `W` at least the burst policy's window and `q` above the burst. `None`
/// when the burst policy already says the rate (the burst refills in whole
/// seconds) or no whole-second window adds to it.
///
/// ```
/// use cellrate_headers::sustained;
/// use cellrate::Quota;
/// let q = Quota::per_second(50).with_burst(10).at_hz(1_000_000_000);
/// assert_eq!(sustained(&q), Some((50, 1))); // beside the burst policy q=10;w=1
/// let q = Quota::per_minute(7).with_burst(2).at_hz(1_000);
/// assert_eq!(sustained(&q), Some((7, 60))); // burst policy q=2;w=18
/// assert_eq!(sustained(&Quota::per_minute(10).at_hz(1_000)), None); // q=10;w=60 says it all
/// ```
pub fn sustained(quota: &Quota) -> Option<(u64, u64)> {
    /// The longest window searched for an exact rate: a day.
    const MAX_EXACT: u128 = 86_400;
    /// The largest sf-integer.
    const MAX_INT: u128 = 999_999_999_999_999;
    let second = quota.hz() as u128 * quota.scale() as u128; // sub-ticks
    let (span, ei) = (quota.span() as u128, quota.emission_interval() as u128);
    if second == 0 || ei == 0 {
        return None;
    }
    let w = span.div_ceil(second).max(1);
    if span == w * second {
        return None;
    }
    let (mut a, mut b) = (ei, second);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let exact = ei / a; // the smallest whole-second window of whole cells
    let window = if exact <= MAX_EXACT {
        w.div_ceil(exact) * exact
    } else {
        w
    };
    let cells = window.checked_mul(second)? / ei;
    if cells <= quota.burst() as u128 || cells > MAX_INT || window > MAX_INT {
        return None;
    }
    Some((cells as u64, window as u64))
}

/// A policy's name with the result of checking it, for the `RateLimit` field.
///
/// ```
/// use cellrate_headers::PolicyState;
/// use cellrate::Decision;
/// let s = PolicyState::new("api", Ok(Decision::new(100, 42, 7)));
/// assert_eq!(s.name(), "api");
/// ```
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyState<'a> {
    name: &'a str,
    result: Result<Decision, Denied>,
}

impl<'a> PolicyState<'a> {
    /// `result` is what the policy's limiter answered.
    pub const fn new(name: &'a str, result: Result<Decision, Denied>) -> Self {
        PolicyState { name, result }
    }
    /// The name.
    pub const fn name(&self) -> &'a str {
        self.name
    }
    /// The limiter's answer.
    pub const fn result(&self) -> &Result<Decision, Denied> {
        &self.result
    }
}

/// Whether a policy name can be written as a structured-field string
/// (RFC 8941 §3.3.3: printable ASCII, `"` and `\\` escaped): the one
/// header-name rule, which the tower layer's configuration also applies.
pub(crate) fn valid_name(name: &str) -> bool {
    name.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

/// Whether `name` can name a tier: a name the writers can carry (printable
/// ASCII), 1 to 32 bytes long. Configurations and HTTP layers accept
/// exactly these names, so every tier they build can be announced.
///
/// ```
/// use cellrate_headers::valid_tier_name;
/// assert!(valid_tier_name("per-client"));
/// assert!(!valid_tier_name(""));
/// assert!(!valid_tier_name("tab\there"));
/// assert!(!valid_tier_name(&"x".repeat(33)));
/// ```
pub fn valid_tier_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 32 && valid_name(name)
}

fn check_name(name: &str) -> Result<(), HeaderError> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(HeaderError::InvalidName)
    }
}

fn write_sf_string<W: Write + ?Sized>(w: &mut W, name: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in name.chars() {
        if c == '"' || c == '\\' {
            w.write_char('\\')?;
        }
        w.write_char(c)?;
    }
    w.write_char('"')
}

/// `(remaining, reset_after)` of an answer, in cells and ticks.
fn state_of(result: &Result<Decision, Denied>) -> Result<(u64, u64), HeaderError> {
    match result {
        Ok(d) => Ok((d.remaining(), d.reset_after())),
        Err(Denied::Limited(l)) => Ok((l.remaining(), l.reset_after())),
        Err(Denied::CostTooLarge { .. }) => Err(HeaderError::NoRetry),
    }
}

/// Writes the `RateLimit-Policy` value for several policies.
///
/// ```
/// use cellrate_headers::{write_ratelimit_policy, Policy};
/// use cellrate::Quota;
/// let burst = Quota::per_second(20).at_hz(1_000);
/// let day = Quota::per_day(5_000).at_hz(1_000);
/// let mut s = String::new();
/// write_ratelimit_policy(&mut s, &[Policy::from_quota("burst", &burst), Policy::from_quota("day", &day)], 1_000).unwrap();
/// assert_eq!(s, r#""burst";q=20;w=1, "day";q=5000;w=86400"#);
/// ```
pub fn write_ratelimit_policy<W: Write + ?Sized>(
    w: &mut W,
    policies: &[Policy<'_>],
    hz: u64,
) -> Result<(), HeaderError> {
    seconds_ceil(0, hz)?;
    for p in policies {
        check_name(p.name)?;
    }
    for (i, p) in policies.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write_sf_string(w, p.name)?;
        write!(w, ";q={};w={}", p.limit, seconds_ceil(p.window_ticks, hz)?)?;
    }
    Ok(())
}

/// Writes the `RateLimit` value (remaining `r`, seconds until full `t`) for
/// several policies. A [`Denied::CostTooLarge`] among them is refused with
/// [`HeaderError::NoRetry`] before anything is written.
///
/// ```
/// use cellrate_headers::{write_ratelimit, PolicyState};
/// use cellrate::{Gcra, Quota};
/// let burst = Gcra::new(Quota::per_second(10).at_hz(1_000));
/// let hour = Gcra::new(Quota::per_hour(100).at_hz(1_000));
/// let states = [
///     PolicyState::new("burst", burst.check_n(0, 5)),
///     PolicyState::new("hour", hour.check_n(0, 5)),
/// ];
/// let mut s = String::new();
/// write_ratelimit(&mut s, &states, 1_000).unwrap();
/// assert_eq!(s, r#""burst";r=5;t=1, "hour";r=95;t=180"#);
/// ```
pub fn write_ratelimit<W: Write + ?Sized>(
    w: &mut W,
    states: &[PolicyState<'_>],
    hz: u64,
) -> Result<(), HeaderError> {
    seconds_ceil(0, hz)?;
    for s in states {
        check_name(s.name)?;
        state_of(&s.result)?;
    }
    for (i, s) in states.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        let (remaining, reset) = state_of(&s.result)?;
        write_sf_string(w, s.name)?;
        write!(w, ";r={};t={}", remaining, seconds_ceil(reset, hz)?)?;
    }
    Ok(())
}

/// The three legacy values `(X-RateLimit-Limit, X-RateLimit-Remaining,
/// X-RateLimit-Reset)`, the last in seconds until full, rounded up.
///
/// ```
/// use cellrate_headers::x_ratelimit;
/// use cellrate::Decision;
/// assert_eq!(x_ratelimit(&Ok(Decision::new(100, 42, 1_500)), 1_000), Ok((100, 42, 2)));
/// ```
pub fn x_ratelimit(
    result: &Result<Decision, Denied>,
    hz: u64,
) -> Result<(u64, u64, u64), HeaderError> {
    let limit = match result {
        Ok(d) => d.limit(),
        Err(d) => d.limit(),
    };
    let (remaining, reset) = state_of(result)?;
    Ok((limit, remaining, seconds_ceil(reset, hz)?))
}

/// Writes `X-RateLimit-Limit`.
///
/// ```
/// use cellrate_headers::write_x_ratelimit_limit;
/// use cellrate::Decision;
/// let mut s = String::new();
/// write_x_ratelimit_limit(&mut s, &Ok(Decision::new(100, 42, 1_500))).unwrap();
/// assert_eq!(s, "100");
/// ```
pub fn write_x_ratelimit_limit<W: Write + ?Sized>(
    w: &mut W,
    result: &Result<Decision, Denied>,
) -> Result<(), HeaderError> {
    let limit = match result {
        Ok(d) => d.limit(),
        Err(d) => d.limit(),
    };
    write!(w, "{limit}")?;
    Ok(())
}

/// Writes `X-RateLimit-Remaining`.
///
/// ```
/// use cellrate_headers::write_x_ratelimit_remaining;
/// use cellrate::Decision;
/// let mut s = String::new();
/// write_x_ratelimit_remaining(&mut s, &Ok(Decision::new(100, 42, 1_500))).unwrap();
/// assert_eq!(s, "42");
/// ```
pub fn write_x_ratelimit_remaining<W: Write + ?Sized>(
    w: &mut W,
    result: &Result<Decision, Denied>,
) -> Result<(), HeaderError> {
    let (remaining, _) = state_of(result)?;
    write!(w, "{remaining}")?;
    Ok(())
}

/// Writes `X-RateLimit-Reset`: seconds until full, rounded up.
///
/// ```
/// use cellrate_headers::write_x_ratelimit_reset;
/// use cellrate::Decision;
/// let mut s = String::new();
/// write_x_ratelimit_reset(&mut s, &Ok(Decision::new(100, 42, 1_500)), 1_000).unwrap();
/// assert_eq!(s, "2");
/// ```
pub fn write_x_ratelimit_reset<W: Write + ?Sized>(
    w: &mut W,
    result: &Result<Decision, Denied>,
    hz: u64,
) -> Result<(), HeaderError> {
    let (_, reset) = state_of(result)?;
    write!(w, "{}", seconds_ceil(reset, hz)?)?;
    Ok(())
}

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
