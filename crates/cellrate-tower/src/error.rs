//! Why a layer could not be built, and the rule for tier names.

use core::fmt;

/// Why a layer could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuildError {
    /// The backend has no tiers.
    NoTiers,
    /// More than [`MAX_TIERS`](crate::MAX_TIERS) tiers.
    TooManyTiers,
    /// Tiers count ticks at different frequencies, or at 0 Hz.
    MixedHz,
    /// A tier name is empty, longer than 32 bytes, or not printable ASCII.
    InvalidName,
    /// A keyed table of capacity 0.
    ZeroCapacity,
    /// The Redis client's fallback quotas do not match its tiers.
    Fallback,
    /// [`Keyless::Reject`](crate::Keyless::Reject) with a status that is not 4xx, 407, or 401
    /// without a [challenge](crate::RateLimitBuilder::challenge).
    Keyless,
    /// A challenge whose scheme is not an HTTP token or whose realm is not
    /// printable ASCII (or holds `"` or `\`).
    Challenge,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BuildError::NoTiers => "the backend has no tiers",
            BuildError::TooManyTiers => "more than 8 tiers",
            BuildError::MixedHz => "the tiers count ticks at different (or zero) frequencies",
            BuildError::InvalidName => "tier names are 1 to 32 printable ASCII characters",
            BuildError::ZeroCapacity => "a keyed table needs a capacity of at least 1",
            BuildError::Fallback => "the fallback quotas do not match the tiers",
            BuildError::Keyless => {
                "a keyless request is rejected with a 4xx status other than 407, and 401 needs a challenge"
            }
            BuildError::Challenge => {
                "a challenge's scheme is an HTTP token and its realm printable ASCII without quotes or backslashes"
            }
        })
    }
}

impl std::error::Error for BuildError {}

/// A tier name: what a header can carry ([`headers`]' one rule), 1 to 32
/// bytes long.
pub(crate) fn check_name(name: &str) -> Result<(), BuildError> {
    if cellrate_headers::valid_tier_name(name) {
        Ok(())
    } else {
        Err(BuildError::InvalidName)
    }
}
