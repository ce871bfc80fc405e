//! The extractor a [`KeyConfig`] describes.

use http::request::Parts;

use super::{KeyConfig, KeySource};
use crate::{Extract, HeaderKey, KeyError, KeyPart, Part, PeerIp, RequestKey, Route};
use cellrate_config::ConfigError as Error;

/// A key part chosen by configuration.
#[derive(Clone, Debug)]
enum Source {
    Header(HeaderKey),
    PeerIp,
    Route,
}

impl KeyPart for Source {
    fn part<'r>(&self, req: &'r Parts) -> Result<Part<'r>, KeyError> {
        match self {
            Source::Header(h) => h.part(req),
            Source::PeerIp => PeerIp.part(req),
            Source::Route => Route.part(req),
        }
    }
}

/// The extractor a [`KeyConfig`] describes: a client part and an optional
/// endpoint part, read as the built-in extractors read them.
#[derive(Clone, Debug)]
pub struct ConfigKey {
    client: Source,
    endpoint: Option<Source>,
}

impl Extract for ConfigKey {
    fn extract<'r>(&self, req: &'r Parts) -> Result<RequestKey<'r>, KeyError> {
        match &self.endpoint {
            None => Ok(RequestKey::new(self.client.part(req)?, None)),
            // As the `(client, endpoint)` pair reads them.
            Some(e) => {
                let client = self.client.part(req)?;
                Ok(RequestKey::new(client, Some(e.part(req)?)))
            }
        }
    }
    fn scope<'r>(&self, req: &'r Parts) -> Option<Part<'r>> {
        self.endpoint.as_ref().and_then(|e| e.part(req).ok())
    }
}

impl KeySource {
    fn build(&self, place: &str) -> Result<Source, Error> {
        Ok(match self {
            KeySource::Header(name) => {
                Source::Header(HeaderKey::try_new(name).ok_or_else(|| {
                    Error::new(format!("{place}.header"), "not a valid header name")
                })?)
            }
            KeySource::PeerIp => Source::PeerIp,
            KeySource::Route => Source::Route,
        })
    }
}

impl KeyConfig {
    /// The extractor.
    ///
    /// ```
    /// use cellrate_tower::config::{KeyConfig, KeySource};
    /// let bad = KeyConfig::new(KeySource::Header("bad name".into()));
    /// assert_eq!(bad.build().unwrap_err().to_string(), "key.client.header: not a valid header name");
    /// ```
    pub fn build(&self) -> Result<ConfigKey, Error> {
        Ok(ConfigKey {
            client: self.client.build("key.client")?,
            endpoint: match &self.endpoint {
                None => None,
                Some(e) => Some(e.build("key.endpoint")?),
            },
        })
    }
}
