//! Rate-limit configuration files for cellrate: named tiers of quotas, keyed
//! tables with their per-key overrides, and errors that name the place of
//! the bad value (`tiers[1].quota: quota: the burst is zero`), read from any
//! serde format. Quotas themselves are the core's
//! [`QuotaSpec`](cellrate::config::QuotaSpec) (feature `serde` of
//! `cellrate`), in the structured or the human form (`"100/min, burst 20"`).
//!
//! ```
//! use cellrate::config::QuotaSpec;
//! use cellrate_config::{build_tiers, from_deserializer, TierSpec};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Limits {
//!     hz: u64,
//!     tiers: Vec<TierSpec>,
//! }
//!
//! let text = r#"
//! hz = 1_000_000
//! tiers = [
//!     { name = "second", quota = "10/s, burst 20" },
//!     { name = "hour", quota = { rate = 5000, per = "h", burst = 100 } },
//! ]
//! "#;
//! let limits: Limits = from_deserializer(toml::Deserializer::parse(text).unwrap()).unwrap();
//! let tiers = build_tiers(&limits.tiers, limits.hz).unwrap();
//! assert_eq!(tiers[1].1.quota().burst(), 100);
//! assert_eq!(limits.tiers[0].quota, "10/s, burst 20".parse::<QuotaSpec>().unwrap());
//! ```
//!
//! # Errors name the place
//!
//! [`from_deserializer`] reads any serde format and reports where a bad
//! value is, with the core's own error texts. The checks that need the tick
//! frequency run when the limiters are built ([`build_tiers`],
//! [`KeyedSpec::build`]) and name the same places, from their own spec down
//! ([`ConfigError::within`] puts the spec's own place in front:
//! `tables[2].capacity`). Nothing here panics on any input.
//!
//! ```
//! use cellrate_config::{from_deserializer, TierSpec};
//! let json = r#"[{"name": "a", "quota": "10/s"}, {"name": "b", "quota": "10/s, burst 0"}]"#;
//! let err = from_deserializer::<Vec<TierSpec>, _>(&mut serde_json::Deserializer::from_str(json))
//!     .unwrap_err();
//! // serde_json adds where the value ends in the text
//! assert_eq!(err.to_string(), "[1].quota: quota: the burst is zero at line 1 column 71");
//! assert_eq!(err.path(), "[1].quota");
//! ```
#![no_std]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

mod error;
mod keyed;
mod tiers;

pub use self::error::{from_deserializer, ConfigError};
pub use self::keyed::{check_capacity, ConfiguredTable, KeyedSpec, LiveTable};
pub use self::tiers::{build_tiers, TierSpec};

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
