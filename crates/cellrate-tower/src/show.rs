//! The rules as an operator sees them: [`LayerConfig::summary`] in one
//! line, [`LayerConfig::redacted`] with every secret masked, and
//! [`redact_url`] for one URL.
//!
//! A secret is what a Redis URL carries to log in: its user information
//! (`redis://user:password@host/`) and the `user`, `username`, `pass` and
//! `password` parameters of its query (a Unix-socket URL). Nothing that
//! either function returns holds one: the user information is taken to
//! end at the URL's last `@`, so a password with a raw `/`, `?` or `@` is
//! masked whole (a `@` further on masks more, never less). Every other
//! part (scheme, host, port, path, other parameters, fragment) is kept as
//! written, so an operator can still tell the servers apart.

use crate::config::{LayerConfig, TierScope};

/// The query parameters that carry a secret, compared case-insensitively.
const SECRET_PARAMETERS: [&str; 4] = ["pass", "password", "user", "username"];

/// `url` with its user information (user and password) masked, and the
/// user and password query parameters of a Unix-socket URL too; a string
/// that is not a URL (no `://`) is returned as it is.
///
/// ```
/// use cellrate_tower::redact_url;
/// assert_eq!(redact_url("redis://ops:s3cret@10.0.0.5:6379/0"), "redis://:****@10.0.0.5:6379/0");
/// assert_eq!(
///     redact_url("redis+unix:///run/redis.sock?db=1&pass=s3cret"),
///     "redis+unix:///run/redis.sock?db=1&pass=****"
/// );
/// assert_eq!(redact_url("redis://10.0.0.5:6379/"), "redis://10.0.0.5:6379/");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The user information ends at the last `@`: a password written with
    // a raw `/`, `?` or `@` in it is masked whole (a `@` elsewhere masks
    // what comes before it: more, never less).
    let (user, rest) = match rest.rfind('@') {
        Some(at) => (":****@", &rest[at + 1..]),
        None => ("", rest),
    };
    let rest = match rest.split_once('?') {
        None => rest.to_string(),
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, format!("#{f}")),
                None => (query, String::new()),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _))
                        if SECRET_PARAMETERS
                            .iter()
                            .any(|secret| name.eq_ignore_ascii_case(secret)) =>
                    {
                        format!("{name}=****")
                    }
                    _ => param.to_string(),
                })
                .collect();
            format!("{path}?{}{fragment}", params.join("&"))
        }
    };
    format!("{scheme}://{user}{rest}")
}

/// `target` with every URL passed through [`redact_url`] (one that no
/// longer opens after masking shows as `redis://redacted.invalid/`, so no
/// secret can remain).
#[cfg(feature = "redis")]
fn redacted_target(target: &cellrate_redis::Target) -> cellrate_redis::Target {
    use cellrate_redis::Target;
    let urls: Vec<String> = target.urls().iter().map(|u| redact_url(u)).collect();
    let masked = if target.is_cluster() {
        Target::cluster(&urls)
    } else {
        urls.first()
            .map_or_else(|| Target::cluster(&urls), |url| Target::standalone(url))
    };
    masked.unwrap_or_else(|_| {
        Target::standalone("redis://redacted.invalid/")
            .expect("a constant URL without secrets opens")
    })
}

impl LayerConfig {
    /// These rules with every Redis URL passed through [`redact_url`]:
    /// what an admin endpoint or a log may show.
    ///
    /// ```
    /// # #[cfg(feature = "redis")]
    /// # fn main() {
    /// use cellrate_tower::config::LayerConfig;
    /// let rules: LayerConfig = toml::from_str(r#"
    ///     key = { client = { header = "x-api-key" } }
    ///     tiers = [{ name = "key", quota = "10/min", capacity = 64 }]
    ///     redis = { target = { standalone = "redis://ops:s3cret@10.0.0.5:6379/" }, failure = "open" }
    /// "#).unwrap();
    /// let shown = toml::to_string(&rules.redacted()).unwrap();
    /// assert!(shown.contains("redis://:****@10.0.0.5:6379/"), "{shown}");
    /// assert!(!shown.contains("s3cret"));
    /// # }
    /// # #[cfg(not(feature = "redis"))]
    /// # fn main() {}
    /// ```
    pub fn redacted(&self) -> LayerConfig {
        #[allow(unused_mut)]
        let mut shown = self.clone();
        #[cfg(feature = "redis")]
        if let Some(rules) = &mut shown.redis {
            rules.target = redacted_target(&rules.target);
        }
        shown
    }

    /// These rules in one line, for a log or a command's answer: each
    /// tier's name, quota, scope and number of overrides, and where the
    /// state lives (Redis URLs masked by [`redact_url`]).
    ///
    /// ```
    /// use cellrate_tower::config::LayerConfig;
    /// let rules: LayerConfig = toml::from_str(r#"
    ///     key = { client = { header = "x-api-key" }, endpoint = "route" }
    ///     [[tiers]]
    ///     name = "key"
    ///     quota = "100/min"
    ///     capacity = 1000
    ///     overrides = { acct_123 = "500/min" }
    ///     [[tiers]]
    ///     name = "endpoint"
    ///     quota = "3/min"
    ///     scope = "client_and_endpoint"
    ///     capacity = 1000
    /// "#).unwrap();
    /// assert_eq!(
    ///     rules.summary(),
    ///     "2 tiers: key 100/min per client (1 override), endpoint 3/min per client and endpoint; in process"
    /// );
    /// ```
    pub fn summary(&self) -> String {
        let tiers: Vec<String> = self
            .tiers
            .iter()
            .map(|t| {
                let scope = match t.scope {
                    TierScope::Client => "per client",
                    TierScope::ClientAndEndpoint => "per client and endpoint",
                };
                let overrides = match t.overrides.len() {
                    0 => String::new(),
                    1 => " (1 override)".into(),
                    n => format!(" ({n} overrides)"),
                };
                format!("{} {} {scope}{overrides}", t.name, t.quota)
            })
            .collect();
        #[cfg(feature = "redis")]
        let place = match &self.redis {
            None => "in process".to_string(),
            Some(rules) => format!(
                "on Redis {} (prefix {:?})",
                rules
                    .target
                    .urls()
                    .iter()
                    .map(|u| redact_url(u))
                    .collect::<Vec<_>>()
                    .join(", "),
                rules.prefix
            ),
        };
        #[cfg(not(feature = "redis"))]
        let place = "in process";
        let s = if tiers.len() == 1 { "" } else { "s" };
        format!("{} tier{s}: {}; {place}", tiers.len(), tiers.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn every_secret_is_masked_and_the_rest_kept() {
        for (url, shown) in [
            (
                "redis://ops:s3cret@10.0.0.5:6379/2",
                "redis://:****@10.0.0.5:6379/2",
            ),
            ("redis://ops@10.0.0.5/", "redis://:****@10.0.0.5/"),
            ("redis://:s3cret@h", "redis://:****@h"),
            ("rediss://u:p@h:1/0?x=1#top", "rediss://:****@h:1/0?x=1#top"),
            ("redis://u:s3/cr@et@h:1/0", "redis://:****@h:1/0"),
            ("redis://u:s3cr?t@h/", "redis://:****@h/"),
            ("redis://u:s3cr#t@h/", "redis://:****@h/"),
            (
                "redis+unix:///run/r.sock?db=0&PASSWORD=x&User=y&keep=1#f",
                "redis+unix:///run/r.sock?db=0&PASSWORD=****&User=****&keep=1#f",
            ),
            ("redis://10.0.0.5:6379/", "redis://10.0.0.5:6379/"),
            ("not a url", "not a url"),
            ("", ""),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
