//! Which rate-limit header families a response carries.

/// Which rate-limit header families a response carries.
///
/// `RateLimit-Policy` and `RateLimit` (IETF draft, see
/// [`cellrate_headers`](cellrate_headers#fields)) list every tier: `q` its burst,
/// `w` the time to refill it, `r` the cells left, `t` the seconds until it
/// is full again; a tier whose burst does not refill in whole seconds also
/// lists its rate policy `"<tier>/rate"`. `X-RateLimit-Limit`/`-Remaining`/
/// `-Reset` describe the tightest tier ([`cellrate::compose::tightest`]).
/// `Retry-After` is the refusing tier's wait
/// ([`cellrate::compose::refusing`]), in whole seconds rounded up, at
/// least 1. What they say under a Redis outage and in the delaying mode is
/// explained in `docs/design/tower.md`.
///
/// In a configuration (feature `serde`): `"ietf"`, `"legacy"`, `"both"`,
/// `"neither"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum Fields {
    /// `RateLimit-Policy` and `RateLimit` (IETF draft).
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    Legacy,
    /// Both families (the default).
    Both,
    /// None (a refusal still carries `Retry-After`).
    Neither,
}

impl Fields {
    pub(crate) fn ietf(self) -> bool {
        matches!(self, Fields::Ietf | Fields::Both)
    }
    pub(crate) fn legacy(self) -> bool {
        matches!(self, Fields::Legacy | Fields::Both)
    }
}
