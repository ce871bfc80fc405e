//! [`RateLimitBuilder`]: a layer's settings, checked whole by `build`.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use cellrate::Clock;
use http::request::Parts;
use http::StatusCode;

use crate::announce::announces;
#[cfg(feature = "metrics")]
use crate::error::check_name;
use crate::keyless::challenge_value;
use crate::live::{Delay, Live, Shared, Weigh};
use crate::{Backend, BuildError, Extract, Fields, Keyless, RateLimitLayer};

/// Builds a [`RateLimitLayer`]; see the [crate docs](crate).
pub struct RateLimitBuilder<E, B, C> {
    pub(crate) extract: E,
    pub(crate) backend: B,
    pub(crate) clock: C,
    pub(crate) weigh: Option<Box<Weigh>>,
    pub(crate) keyless: Keyless,
    pub(crate) fields: Fields,
    pub(crate) delay: Option<(u64, usize)>,
    pub(crate) challenge: Option<(String, String)>,
    pub(crate) charge_body: bool,
    #[cfg(feature = "metrics")]
    pub(crate) metrics_name: String,
}

impl<E: Extract, B: Backend, C: Clock + Send + Sync + 'static> RateLimitBuilder<E, B, C> {
    /// The `limiter` label of this layer's series (feature `metrics`;
    /// default `"default"`): a name like a tier's, 1 to 32 printable ASCII
    /// characters ([`BuildError::InvalidName`] otherwise). Give each layer
    /// of a process its own. See the `cellrate-metrics` crate for the series.
    ///
    /// ```
    /// use cellrate::StdClock;
    /// use cellrate_tower::{Global, PeerIp, RateLimitLayer};
    /// use cellrate::Quota;
    /// let layer = RateLimitLayer::builder(
    ///     PeerIp,
    ///     Global::gcra("all", Quota::per_second(100).at_hz(StdClock::HZ)).unwrap(),
    ///     StdClock::new(),
    /// )
    /// .metrics_name("edge")
    /// .build()
    /// .unwrap();
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics_name(mut self, name: &str) -> Self {
        self.metrics_name = name.into();
        self
    }
    /// The header families to send (default [`Fields::Both`]).
    pub fn fields(mut self, fields: Fields) -> Self {
        self.fields = fields;
        self
    }
    /// What a request without a key gets (default
    /// `Keyless::Reject(StatusCode::BAD_REQUEST)`; see [`Keyless`]).
    pub fn keyless(mut self, keyless: Keyless) -> Self {
        self.keyless = keyless;
        self
    }
    /// The challenge a keyless `401` carries, as RFC 9110 §15.5.2 requires:
    /// `WWW-Authenticate: {scheme} realm="{realm}"`. The scheme must be an
    /// HTTP token and the realm printable ASCII without `"` or `\`
    /// (checked by [`build`](Self::build): [`BuildError::Challenge`]).
    /// See [`Keyless`] for an example.
    pub fn challenge(mut self, scheme: &str, realm: &str) -> Self {
        self.challenge = Some((scheme.into(), realm.into()));
        self
    }
    /// The cells a request costs (default 1), e.g. by route. A cost of 0
    /// charges nothing; a cost above a tier's burst is answered 413.
    ///
    /// A weight read from the request head alone cannot limit bytes: a
    /// chunked body declares no length. To limit bytes, weigh by
    /// `Content-Length` (0 when absent) *and* [`charge_body`](Self::charge_body),
    /// which charges every byte past the declared ones as the body streams:
    ///
    /// ```
    /// # #[cfg(feature = "axum")] {
    /// use cellrate::StdClock;
    /// use cellrate_tower::{Global, PeerIp, RateLimitLayer};
    /// use cellrate::Quota;
    /// let q = Quota::per_second(1_000_000).at_hz(StdClock::HZ); // bytes per second
    /// let layer = RateLimitLayer::builder(PeerIp, Global::gcra("bytes", q).unwrap(), StdClock::new())
    ///     .weight(|req| {
    ///         req.headers.get(http::header::CONTENT_LENGTH)
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(0) // unknown length: charged as it streams
    ///     })
    ///     .charge_body()
    ///     .build()
    ///     .unwrap();
    /// # let _ = layer;
    /// # }
    /// ```
    pub fn weight(mut self, weigh: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.weigh = Some(Box::new(weigh));
        self
    }
    /// Charges the request body as it streams (feature `axum`; see
    /// [`BodyLimited`](crate::BodyLimited)): the [`weight`](Self::weight) is then the bytes paid
    /// before the handler runs (the `Content-Length`, or 0 for a body of
    /// unknown length), and every data frame past them is charged to the
    /// same key when the handler reads it. A refused frame ends the body
    /// with [`BodyLimited`](crate::BodyLimited) and the client gets `429` (or `413` for a frame
    /// above a tier's burst) instead of the handler's answer, so a chunked
    /// or unsized body cannot carry more than the quota. Meters
    /// `axum::body::Body` only; any other request body type is a
    /// misconfiguration, answered 500 and logged once. The example under
    /// [`weight`](Self::weight) limits bytes this way.
    #[cfg(feature = "axum")]
    pub fn charge_body(mut self) -> Self {
        self.charge_body = true;
        self
    }
    /// Delaying mode: hold a request over the rate until its turn instead of
    /// refusing it, at most `max_wait` ticks, with at most `max_queued`
    /// requests held at once. Only backends that can shape ([`Shaper`](crate::Shaper))
    /// delay; the others keep refusing. A request that would wait longer
    /// gets 429 with `Retry-After`, one that finds the queue full 503; the
    /// fields a held request gets are explained in `docs/design/tower.md`.
    pub fn delay(mut self, max_wait: u64, max_queued: usize) -> Self {
        self.delay = Some((max_wait, max_queued));
        self
    }
    /// The layer.
    pub fn build(self) -> Result<RateLimitLayer<E, B, C>, BuildError> {
        #[cfg(feature = "metrics")]
        check_name(&self.metrics_name)?;
        #[cfg(feature = "metrics")]
        let metrics_name = self.metrics_name.as_str();
        #[cfg(not(feature = "metrics"))]
        let metrics_name = "";
        let announces = announces(
            self.backend.groups(),
            self.backend.fallback_tiers(),
            &self.backend.override_slots(),
            self.fields,
            metrics_name,
        )?;
        let challenge = match &self.challenge {
            Some((scheme, realm)) => Some(challenge_value(scheme, realm)?),
            None => None,
        };
        if let Keyless::Reject(status) = self.keyless {
            let unchallenged = status == StatusCode::UNAUTHORIZED && challenge.is_none();
            if !status.is_client_error()
                || status == StatusCode::PROXY_AUTHENTICATION_REQUIRED
                || unchallenged
            {
                return Err(BuildError::Keyless);
            }
        }
        #[allow(unused_mut)]
        let mut backend = self.backend;
        #[cfg(feature = "metrics")]
        backend.register_metrics(&self.metrics_name);
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                extract: self.extract,
                live: arc_swap::ArcSwap::from_pointee(Live {
                    backend: Arc::new(backend),
                    announces,
                }),
                #[cfg(all(feature = "metrics", feature = "serde"))]
                metrics_name: self.metrics_name,
                clock: self.clock,
                weigh: self.weigh,
                keyless: self.keyless,
                challenge,
                misconfigured: AtomicBool::new(false),
                charge_body: self.charge_body,
                delay: self.delay.map(|(max_wait, max_queued)| Delay {
                    max_wait,
                    max_queued,
                    queued: AtomicUsize::new(0),
                }),
                fields: self.fields,
                #[cfg(feature = "serde")]
                applied: std::sync::Mutex::new(None),
            }),
        })
    }
}

impl<E: Extract, B: Backend, C: Clock + Send + Sync + 'static> RateLimitLayer<E, B, C> {
    /// Starts a layer that keys requests with `extract`, decides with
    /// `backend`, and reads the time from `clock` (whose ticks the backend's
    /// quotas count).
    pub fn builder(extract: E, backend: B, clock: C) -> RateLimitBuilder<E, B, C> {
        RateLimitBuilder {
            extract,
            backend,
            clock,
            weigh: None,
            keyless: Keyless::Reject(StatusCode::BAD_REQUEST),
            fields: Fields::Both,
            delay: None,
            challenge: None,
            charge_body: false,
            #[cfg(feature = "metrics")]
            metrics_name: "default".into(),
        }
    }
}
