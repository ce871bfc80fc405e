//! Who may use the admin endpoint: one bearer token ([`AdminToken`], its
//! answers documented there), compared in time that does not depend on
//! where a guess differs, and a budget of wrong tokens per peer IP in a
//! cellrate keyed table.
//!
//! Invariants: one wrong token is charged before the comparison and given
//! back unless the token was wrong, so concurrent guesses from one IP
//! never exceed its budget; an IP past its budget is refused before any
//! token is compared; the comparison folds every byte position up to the
//! longer length into one difference, with no early return.

use std::net::IpAddr;
use std::sync::RwLock;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use cellrate::compose::Revocable;
use cellrate::keyed::{Hashed, KeyedBox, Seed, WhenFull};
use cellrate::{Clock, Quota};
use tracing::warn;

use crate::TokioClock;

/// Wrong tokens allowed per peer IP: 5 per minute, 5 at once.
pub(super) const WRONG_TOKENS: Quota = Quota::per_minute(5).at_hz(TokioClock::HZ);
/// Peer IPs tracked at once; past them every untracked IP shares one
/// budget.
pub(super) const PEERS: usize = 4096;

/// The admin endpoint's bearer token: visible ASCII (no spaces, no control
/// characters: an `Authorization` header carries it), at least one byte.
///
/// [`Admin`](crate::Admin) refuses a request, in this order: 429 with
/// `Retry-After` when its peer IP is past its budget of wrong tokens (5 a
/// minute, 5 at once; 4096 IPs tracked, the others sharing one budget),
/// before any token is compared, so the right token does not help a
/// guesser either; 401 with a `WWW-Authenticate: Bearer realm="admin"`
/// challenge without a bearer token (the scheme is read
/// case-insensitively, RFC 9110 §11.1); 403 with a wrong one, which alone
/// counts against the IP.
///
/// Its `Debug` never shows it, and it has no `==` (the endpoint compares
/// it in constant time); it deserializes from a string, checked (the error
/// names the field that holds it).
///
/// ```
/// use cellrate_tower::AdminToken;
/// let token: AdminToken = "s3cret-token".parse().unwrap();
/// assert_eq!(format!("{token:?}"), "AdminToken(****)");
/// assert_eq!("".parse::<AdminToken>().unwrap_err().to_string(), "must not be empty");
/// assert!("two words".parse::<AdminToken>().is_err());
/// ```
#[derive(Clone)]
pub struct AdminToken(String);

/// Why a string is not an [`AdminToken`].
///
/// ```
/// use cellrate_tower::{AdminToken, TokenError};
/// assert_eq!(AdminToken::new("tab\there").unwrap_err(), TokenError::NotVisibleAscii);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is empty.
    Empty,
    /// The token has a byte that is not visible ASCII (a space, a control
    /// character, a non-ASCII character).
    NotVisibleAscii,
}

impl core::fmt::Display for TokenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TokenError::Empty => "must not be empty",
            TokenError::NotVisibleAscii => {
                "must be visible ASCII, without spaces (an Authorization header carries it)"
            }
        })
    }
}

impl std::error::Error for TokenError {}

impl AdminToken {
    /// `token`, checked.
    ///
    /// ```
    /// use cellrate_tower::AdminToken;
    /// assert!(AdminToken::new("change-me").is_ok());
    /// assert!(AdminToken::new("").is_err());
    /// ```
    pub fn new(token: impl Into<String>) -> Result<Self, TokenError> {
        let token = token.into();
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotVisibleAscii);
        }
        Ok(AdminToken(token))
    }
}

impl core::str::FromStr for AdminToken {
    type Err = TokenError;
    fn from_str(s: &str) -> Result<Self, TokenError> {
        AdminToken::new(s)
    }
}

impl core::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AdminToken(****)")
    }
}

impl<'de> serde::Deserialize<'de> for AdminToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        AdminToken::new(text).map_err(serde::de::Error::custom)
    }
}

/// The token of a `Bearer` credential; the scheme is read
/// case-insensitively (RFC 9110 §11.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether `given` equals `token`, in time that depends on their lengths
/// only: every byte position up to the longer length is compared and
/// folded into one difference, with no early return.
fn same(given: &[u8], token: &[u8]) -> bool {
    let mut diff = given.len() ^ token.len();
    for i in 0..given.len().max(token.len()) {
        let a = given.get(i).copied().unwrap_or(0);
        let b = token.get(i).copied().unwrap_or(0);
        diff |= usize::from(a ^ b);
    }
    std::hint::black_box(diff) == 0
}

/// The token in force and the wrong tokens of each peer IP.
pub(super) struct Guard {
    token: RwLock<AdminToken>,
    wrong: KeyedBox<Quota>,
    clock: TokioClock,
}

impl Guard {
    pub(super) fn new(token: AdminToken) -> Self {
        Guard {
            token: RwLock::new(token),
            wrong: KeyedBox::with_capacity(PEERS, WRONG_TOKENS, WhenFull::Shared, Seed::random()),
            clock: TokioClock::new(),
        }
    }

    pub(super) fn set_token(&self, token: AdminToken) {
        // A writer that panicked left a whole token: the poison is no state.
        *self.token.write().unwrap_or_else(|p| p.into_inner()) = token;
    }

    /// The refusal of a request from `peer` with `headers`, or `None` to
    /// serve it (see the module docs).
    pub(super) fn refusal(&self, peer: IpAddr, headers: &HeaderMap) -> Option<Response> {
        let ip = Hashed(peer);
        let wrong = self.wrong.entry(&ip);
        let charged = match wrong.admit_n(self.clock.now(), 1) {
            Ok((_, charged)) => charged,
            Err(denied) => {
                // One cell always fits the budget: the wait is finite.
                let seconds = denied
                    .retry_after()
                    .map_or(60, |ticks| ticks.div_ceil(TokioClock::HZ).max(1));
                warn!(%peer, "admin: too many wrong tokens from this address; refused for {seconds} s");
                return Some(
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(header::RETRY_AFTER, seconds.to_string())],
                        "too many wrong tokens\n",
                    )
                        .into_response(),
                );
            }
        };
        let Some(given) = bearer(headers) else {
            wrong.revoke(charged);
            return Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer realm=\"admin\"")],
                    "a bearer token is required\n",
                )
                    .into_response(),
            );
        };
        let right = {
            let token = self.token.read().unwrap_or_else(|p| p.into_inner());
            same(given.as_bytes(), token.0.as_bytes())
        };
        if right {
            wrong.revoke(charged);
            return None;
        }
        warn!(%peer, "admin: wrong token");
        Some((StatusCode::FORBIDDEN, "wrong token\n").into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparison against the plain one, on every pair of a few
    /// strings that differ at the start, the end, in length, or not at all.
    #[test]
    fn same_is_equality() {
        let words: [&[u8]; 7] = [b"", b"a", b"b", b"ab", b"abc", b"abd", b"xbc"];
        for a in words {
            for b in words {
                assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn bearer_reads_the_scheme_case_insensitively() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer(&headers).map(String::from)
        };
        assert_eq!(with("Bearer t0ken").as_deref(), Some("t0ken"));
        assert_eq!(with("bEaReR   t0ken").as_deref(), Some("t0ken"));
        assert_eq!(with("Basic t0ken"), None);
        assert_eq!(with("Bearer"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }
}
