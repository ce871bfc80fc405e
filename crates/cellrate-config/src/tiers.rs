//! Named tiers of quotas.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use cellrate::config::QuotaSpec;

use crate::ConfigError;
use cellrate::{Gcra, Quota};

/// One named tier: `{ name = "hour", quota = "5000/h, burst 100" }`.
///
/// ```
/// use cellrate_config::TierSpec;
/// let t: TierSpec = toml::from_str("name = \"hour\"\nquota = \"5000/h, burst 100\"").unwrap();
/// assert_eq!(t.quota.burst, Some(100));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TierSpec {
    /// The tier's name: 1 to 32 printable ASCII characters, unique among
    /// its tiers (it names the tier in headers and logs).
    pub name: String,
    /// Its quota.
    pub quota: QuotaSpec,
}

impl TierSpec {
    /// The tier `name` with `quota`.
    ///
    /// ```
    /// use cellrate_config::TierSpec;
    /// let t = TierSpec::new("hour", "5000/h".parse().unwrap());
    /// assert_eq!(t.name, "hour");
    /// ```
    pub fn new(name: impl Into<String>, quota: QuotaSpec) -> Self {
        TierSpec {
            name: name.into(),
            quota,
        }
    }
}

/// Checks a tier name (the rule of the HTTP layer's `RateLimit-Policy`).
fn check_name(name: &str) -> Result<(), &'static str> {
    if cellrate_headers::valid_tier_name(name) {
        Ok(())
    } else {
        Err("tier names are 1 to 32 printable ASCII characters")
    }
}

/// Checks names and quotas of `tiers` at `hz` (each spec's own `hz` wins),
/// with errors at `prefix[i].name` / `prefix[i].quota`.
pub(crate) fn tier_quotas(
    tiers: &[TierSpec],
    hz: u64,
    prefix: &str,
) -> Result<Vec<Quota>, ConfigError> {
    let mut out = Vec::with_capacity(tiers.len());
    for (i, t) in tiers.iter().enumerate() {
        check_name(&t.name).map_err(|m| ConfigError::new(format!("{prefix}[{i}].name"), m))?;
        if tiers[..i].iter().any(|u| u.name == t.name) {
            return Err(ConfigError::new(
                format!("{prefix}[{i}].name"),
                format_args!("tier name {:?} is used twice", t.name),
            ));
        }
        let q = t
            .quota
            .quota(hz)
            .map_err(|e| ConfigError::new(format!("{prefix}[{i}].quota"), e))?;
        out.push(q);
    }
    Ok(out)
}

/// Builds one [`Gcra`] per tier at `hz`, in order, with their names: the
/// tiers of an all-or-nothing check ([`cellrate::compose::check_all`]).
/// Errors name the tier: `tiers[1].quota: …`.
///
/// ```
/// use cellrate_config::{build_tiers, TierSpec};
/// let tiers: Vec<TierSpec> = serde_json::from_str(
///     r#"[{"name": "s", "quota": "10/s"}, {"name": "s", "quota": "100/min"}]"#,
/// ).unwrap();
/// assert_eq!(
///     build_tiers(&tiers, 1_000).unwrap_err().to_string(),
///     "tiers[1].name: tier name \"s\" is used twice"
/// );
/// ```
pub fn build_tiers(tiers: &[TierSpec], hz: u64) -> Result<Vec<(String, Gcra)>, ConfigError> {
    let quotas = tier_quotas(tiers, hz, "tiers")?;
    Ok(tiers
        .iter()
        .zip(quotas)
        .map(|(t, q)| (t.name.clone(), Gcra::new(q)))
        .collect())
}
