//! What a request without a key gets, and the challenge of a keyless 401.

use http::{HeaderValue, StatusCode};

use crate::BuildError;

/// What a request without a key gets.
///
/// The default is `Reject(400 Bad Request)`: the request lacks a field the
/// server requires, and 400 needs nothing else. `401 Unauthorized` fits a
/// key that is a credential, but RFC 9110 §15.5.2 requires every 401 to
/// carry a `WWW-Authenticate` challenge, so the layer answers 401 only with
/// one ([`RateLimitBuilder::challenge`](crate::RateLimitBuilder::challenge)): building `Reject(401)` without a
/// challenge is [`BuildError::Keyless`], as is any status outside 4xx and
/// 407 (a proxy's challenge is not the layer's to send).
///
/// ```
/// use cellrate::StdClock;
/// use cellrate_tower::{BuildError, Global, HeaderKey, Keyless, RateLimitLayer};
/// use cellrate::Quota;
/// use http::StatusCode;
/// let backend = || Global::gcra("all", Quota::per_second(5).at_hz(StdClock::HZ)).unwrap();
/// let unchallenged = RateLimitLayer::builder(HeaderKey::new("x-api-key"), backend(), StdClock::new())
///     .keyless(Keyless::Reject(StatusCode::UNAUTHORIZED))
///     .build();
/// assert_eq!(unchallenged.unwrap_err(), BuildError::Keyless);
/// let challenged = RateLimitLayer::builder(HeaderKey::new("x-api-key"), backend(), StdClock::new())
///     .keyless(Keyless::Reject(StatusCode::UNAUTHORIZED))
///     .challenge("ApiKey", "orders")
///     .build();
/// assert!(challenged.is_ok()); // 401 with `WWW-Authenticate: ApiKey realm="orders"`
/// ```
///
/// In a configuration (feature `serde`): `{ reject = 401 }` (the status as
/// a number) or `"shared"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum Keyless {
    /// This status (a 4xx; 401 only with a challenge) with the fixed body
    /// `missing rate-limit key`; nothing is charged.
    Reject(#[cfg_attr(feature = "serde", serde(with = "status_code"))] StatusCode),
    /// Charged to one client that every keyless request shares (and, with a
    /// `(client, endpoint)` extractor, to its endpoint).
    Shared,
}

/// A status as its number (`http` has no serde support).
#[cfg(feature = "serde")]
mod status_code {
    use http::StatusCode;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(status: &StatusCode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u16(status.as_u16())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StatusCode, D::Error> {
        StatusCode::from_u16(u16::deserialize(d)?)
            .map_err(|_| D::Error::custom("not an HTTP status code"))
    }
}

/// The `WWW-Authenticate` value `scheme realm="realm"`, if both are valid.
pub(crate) fn challenge_value(scheme: &str, realm: &str) -> Result<HeaderValue, BuildError> {
    const TCHAR: &[u8] = b"!#$%&'*+-.^_`|~";
    let token = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || TCHAR.contains(&b));
    let quotable = realm
        .bytes()
        .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\');
    if !token || !quotable {
        return Err(BuildError::Challenge);
    }
    HeaderValue::try_from(std::format!("{scheme} realm=\"{realm}\""))
        .map_err(|_| BuildError::Challenge)
}
