//! [`RateLimitLayer`]: the tower [`Layer`] that wraps a service in a
//! [`RateLimit`].

use core::fmt;
use std::sync::Arc;

use ::tower::Layer;
use cellrate::Clock;

use crate::live::Shared;
use crate::{Backend, Extract, RateLimit};

/// The [`Layer`]: wraps a service in a [`RateLimit`].
pub struct RateLimitLayer<E, B, C> {
    pub(crate) shared: Arc<Shared<E, B, C>>,
}

impl<E, B, C> Clone for RateLimitLayer<E, B, C> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E, B, C> fmt::Debug for RateLimitLayer<E, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("tiers", &self.shared.live.load().announce().names)
            .finish_non_exhaustive()
    }
}

impl<E: Extract, B: Backend, C: Clock + Send + Sync + 'static> RateLimitLayer<E, B, C> {
    /// The backend in force (e.g. to read a Redis backend's counters); a
    /// [`Reloader`](crate::Reloader) may replace it, so this is a handle to the one in force
    /// now.
    pub fn backend(&self) -> Arc<B> {
        Arc::clone(&self.shared.live.load().backend)
    }
}

impl<S, E, B, C> Layer<S> for RateLimitLayer<E, B, C> {
    type Service = RateLimit<S, E, B, C>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}
