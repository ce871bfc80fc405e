//! The rules in force and what every service of a layer shares.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use http::request::Parts;
use http::HeaderValue;

use crate::announce::Announce;
use crate::{Backend, Fields, Keyless, RequestKey};

pub(crate) type Weigh = dyn Fn(&Parts) -> u64 + Send + Sync;

/// The delaying mode's bounds and queue.
pub(crate) struct Delay {
    pub(crate) max_wait: u64,
    pub(crate) max_queued: usize,
    pub(crate) queued: AtomicUsize,
}

/// The rules in force: the backend and what its tiers announce, read
/// together by each request (one lock-free load) and replaced together by a
/// [`Reloader`].
pub(crate) struct Live<B> {
    pub(crate) backend: Arc<B>,
    /// What each of the backend's [groups](Backend::groups) announces.
    pub(crate) announces: Vec<Arc<Announce>>,
}

impl<B> Live<B> {
    /// What the first group announces: the tiers of every route no tier
    /// is limited to (what counts a request decided before its key).
    pub(crate) fn announce(&self) -> &Arc<Announce> {
        &self.announces[0]
    }
}

impl<B: Backend> Live<B> {
    /// What the group that decides `key` announces.
    pub(crate) fn announce_for(&self, key: &RequestKey<'_>) -> &Arc<Announce> {
        self.announces
            .get(self.backend.group(key))
            .unwrap_or(&self.announces[0])
    }
}

pub(crate) struct Shared<E, B, C> {
    pub(crate) extract: E,
    pub(crate) live: arc_swap::ArcSwap<Live<B>>,
    pub(crate) clock: C,
    pub(crate) weigh: Option<Box<Weigh>>,
    pub(crate) keyless: Keyless,
    /// The `WWW-Authenticate` value of a keyless 401.
    pub(crate) challenge: Option<HeaderValue>,
    /// Whether a server misconfiguration has been logged (once per layer).
    pub(crate) misconfigured: AtomicBool,
    pub(crate) delay: Option<Delay>,
    /// Whether request bodies are metered (`RateLimitBuilder::charge_body`).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) charge_body: bool,
    /// The header families (what a reload announces with).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fields: Fields,
    /// The configuration a [`Reloader`](crate::Reloader) applies changes
    /// to, if the layer was built from one (the configuration's own type,
    /// which the layer does not know); its lock serializes reloads (never
    /// taken by a request).
    #[cfg(feature = "serde")]
    pub(crate) applied: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// The `limiter` label of the layer's series (what a reload registers
    /// new tiers' series under).
    #[cfg(all(feature = "metrics", feature = "serde"))]
    pub(crate) metrics_name: String,
}
