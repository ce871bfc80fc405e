//! [`Target`] and [`FailurePolicy`] through serde (feature `serde`): a
//! target is written as the URLs it was made from and read by opening
//! them again, so a URL the client cannot parse is an error at its place
//! (`target.standalone`, `target.cluster`).

use std::string::String;
use std::vec::Vec;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::Target;
use cellrate::Quota;

/// The form a target is written in.
#[derive(Serialize)]
#[serde(rename = "Target", rename_all = "snake_case")]
enum Written<'a> {
    Standalone(&'a str),
    Cluster(&'a [String]),
}

/// The form a target is read from; each variant opens its URLs while its
/// value is read, so an error names the variant.
#[derive(Deserialize)]
#[serde(rename = "Target", rename_all = "snake_case")]
enum Read {
    Standalone(Standalone),
    Cluster(Cluster),
}

struct Standalone(Target);
struct Cluster(Target);

impl<'de> Deserialize<'de> for Standalone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let url = String::deserialize(d)?;
        Target::standalone(&url)
            .map(Standalone)
            .map_err(|e| de::Error::custom(format_args!("not a Redis URL: {e}")))
    }
}

impl<'de> Deserialize<'de> for Cluster {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let nodes = Vec::<String>::deserialize(d)?;
        Target::cluster(&nodes)
            .map(Cluster)
            .map_err(|e| de::Error::custom(format_args!("not a Redis Cluster: {e}")))
    }
}

impl Serialize for Target {
    /// `{ standalone = "redis://…" }` or `{ cluster = ["redis://…", …] }`:
    /// the URLs as given, passwords included.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.urls() {
            [url] if !self.is_cluster() => Written::Standalone(url),
            nodes => Written::Cluster(nodes),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Target {
    /// Either form; the URLs are parsed (nothing connects).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Read::deserialize(d)? {
            Read::Standalone(Standalone(t)) | Read::Cluster(Cluster(t)) => t,
        })
    }
}

/// The fallback's quotas in the human form (`"20/min, hz 1000000000"`).
pub(super) fn human_quotas<S: Serializer>(quotas: &[Quota], s: S) -> Result<S::Ok, S::Error> {
    struct Human<'a>(&'a Quota);
    impl Serialize for Human<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            cellrate::config::human::serialize(self.0, s)
        }
    }
    s.collect_seq(quotas.iter().map(Human))
}
