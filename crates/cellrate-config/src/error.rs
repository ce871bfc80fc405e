//! Configuration errors that name the place of the bad value.

use alloc::format;
use alloc::string::{String, ToString};
use core::fmt;

use serde::{Deserialize, Deserializer};

/// A configuration error and where it is: `tiers[2].quota: quota: the
/// burst is zero`.
///
/// ```
/// use cellrate_config::ConfigError;
/// let e = ConfigError::new("tiers[2].quota", "quota: the burst is zero");
/// assert_eq!(e.path(), "tiers[2].quota");
/// assert_eq!(e.to_string(), "tiers[2].quota: quota: the burst is zero");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigError {
    path: String,
    message: String,
}

impl ConfigError {
    /// `message` at `path` (`"."`-separated fields, `[i]` for elements;
    /// empty for the whole document).
    pub fn new(path: impl Into<String>, message: impl fmt::Display) -> Self {
        let mut message = message.to_string();
        message.truncate(message.trim_end().len());
        ConfigError {
            path: path.into(),
            message,
        }
    }
    /// Where: `tiers[2].quota`, or empty for the whole document.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// What.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error placed inside `outer`, the field (or element) that
    /// holds the spec it came from: the builders name places from their own
    /// spec (`capacity`, `overrides.acct_123`, `tiers[1].quota`), and the
    /// caller that knows where that spec sits in its file adds the rest.
    ///
    /// ```
    /// use cellrate_config::KeyedSpec;
    /// use cellrate::keyed::Seed;
    /// let spec: KeyedSpec = toml::from_str("quota = \"10/s\"\ncapacity = 0").unwrap();
    /// let err = spec.build(1_000, Seed::new(1, 2)).err().unwrap().within("tables[2]");
    /// assert_eq!(err.to_string(), "tables[2].capacity: a keyed table needs a capacity of at least 1");
    /// // An element path joins without a dot; an empty path takes `outer`.
    /// assert_eq!(cellrate_config::ConfigError::new("[0].name", "bad").within("tiers").path(), "tiers[0].name");
    /// assert_eq!(cellrate_config::ConfigError::new("", "bad").within("limits").path(), "limits");
    /// ```
    pub fn within(self, outer: &str) -> ConfigError {
        let path = if outer.is_empty() || outer == "." {
            self.path
        } else if self.path.is_empty() || self.path == "." {
            String::from(outer)
        } else if self.path.starts_with('[') {
            format!("{outer}{}", self.path)
        } else {
            format!("{outer}.{}", self.path)
        };
        ConfigError {
            path,
            message: self.message,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() || self.path == "." {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl core::error::Error for ConfigError {}

/// Deserializes a `T` from any serde format, naming the place of the first
/// bad value in the error.
///
/// ```
/// use cellrate::compose::LimiterConfig;
/// use cellrate_config as config;
/// let text = "algorithm = \"token_bucket\"\nlimit = 10\nwindow = 1000\nburst = 0\nhz = 1000\n";
/// let err = config::from_deserializer::<LimiterConfig, _>(toml::Deserializer::parse(text).unwrap())
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid bucket quota: quota: the burst is zero");
/// ```
pub fn from_deserializer<'de, T, D>(d: D) -> Result<T, ConfigError>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    serde_path_to_error::deserialize(d).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(path, e.into_inner())
    })
}
