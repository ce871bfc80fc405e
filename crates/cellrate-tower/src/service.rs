//! The [`Service`]: one request's way through the layer, from its key to
//! the inner service or a refusal.

use core::fmt;
use core::task::{Context, Poll};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ::tower::Service;
use cellrate::ticks_to_duration;
use cellrate::Clock;
use http::header::WWW_AUTHENTICATE;
use http::request::Parts;
use http::{Request, Response, StatusCode};

use crate::announce::Announce;
#[cfg(feature = "axum")]
use crate::body;
use crate::body::Metering;
use crate::future::{body_for, plain, Checking, ResponseFuture, Sleeping, Slot, State};
use crate::live::Shared;
use crate::stamp::Stamp;
use crate::{Backend, Check, Extract, KeyError, Keyless, Part, RequestKey, Verdict};

/// What the layer logs when `charge_body` meets a body it cannot meter.
#[cfg(feature = "axum")]
pub(crate) const NOT_AXUM_BODY: &str =
    "charge_body meters axum::body::Body only, and this service's \
    request body is another type: every request is answered 500";

/// Logs `hint` (a [`KeyError::Unavailable`]) the first time only.
pub(crate) fn log_misconfigured(flag: &AtomicBool, hint: &str) {
    if flag.swap(true, Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "tracing")]
    tracing::error!(target: "cellrate::tower", "{hint}");
    #[cfg(not(feature = "tracing"))]
    std::eprintln!("cellrate::tower: {hint}");
}

/// The [`Service`]: limits the requests to `S`; see the [crate docs](crate).
pub struct RateLimit<S, E, B, C> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared<E, B, C>>,
}

impl<S: Clone, E, B, C> Clone for RateLimit<S, E, B, C> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, E, B, C> fmt::Debug for RateLimit<S, E, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Takes a place in the delaying queue, or `None` if it is full.
pub(crate) struct QueueSlot<E, B, C> {
    pub(crate) shared: Arc<Shared<E, B, C>>,
}

impl<E, B, C> Drop for QueueSlot<E, B, C> {
    fn drop(&mut self) {
        if let Some(d) = &self.shared.delay {
            d.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<S, E, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, E, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    E: Extract,
    B: Backend,
    C: Clock + Send + Sync + 'static,
    ReqBody: 'static,
    ResBody: From<&'static str>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B::Future, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        // The rules in force, backend and announcement together: one
        // lock-free load, held for this call only.
        let live = shared.live.load();
        let (parts, body) = req.into_parts();
        let key = match shared.extract.extract(&parts) {
            Ok(key) => key,
            Err(KeyError::Invalid) => {
                count!(live.announce(), InvalidKey);
                return ResponseFuture::done(StatusCode::BAD_REQUEST);
            }
            Err(KeyError::Unavailable(hint)) => {
                count!(live.announce(), Error);
                log_misconfigured(&shared.misconfigured, hint);
                return ResponseFuture::done(StatusCode::INTERNAL_SERVER_ERROR);
            }
            Err(KeyError::Missing) => match shared.keyless {
                Keyless::Reject(status) => {
                    count!(live.announce(), NoKey);
                    let mut response = plain(status, "missing rate-limit key\n", Stamp::default());
                    if status == StatusCode::UNAUTHORIZED {
                        if let Some(challenge) = &shared.challenge {
                            response
                                .headers_mut()
                                .insert(WWW_AUTHENTICATE, challenge.clone());
                        }
                    }
                    return ResponseFuture::fixed(response);
                }
                Keyless::Shared => RequestKey::new(Part::Keyless, shared.extract.scope(&parts)),
            },
        };
        let cost = shared.weigh.as_ref().map_or(1, |w| w(&parts));
        // What the tiers that decide this request announce.
        let announce = live.announce_for(&key);
        #[cfg(feature = "axum")]
        let (body, metering): (ReqBody, Metering) = if shared.charge_body {
            match body::meter(body, &key, cost, &self.shared) {
                Ok((body, meter)) => (body, Some((meter, Arc::clone(announce)))),
                Err(other) => {
                    count!(announce, Error);
                    if other.is_some() {
                        log_misconfigured(&shared.misconfigured, NOT_AXUM_BODY);
                    }
                    return ResponseFuture::done(StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
        } else {
            (body, None)
        };
        #[cfg(not(feature = "axum"))]
        let metering: Metering = None;
        let now = shared.clock.now();
        if let Some(delay) = &shared.delay {
            // Take a place in the queue first, so a full queue books nothing.
            if delay.queued.fetch_add(1, Ordering::AcqRel) >= delay.max_queued {
                delay.queued.fetch_sub(1, Ordering::AcqRel);
                count!(announce, QueueFull);
                return ResponseFuture::done(StatusCode::SERVICE_UNAVAILABLE);
            }
            let slot: Slot = Box::new(QueueSlot {
                shared: Arc::clone(&self.shared),
            });
            if let Some(reserved) = live.backend.reserve(&key, now, cost, delay.max_wait) {
                return match reserved {
                    Err(verdict) | Ok((0, verdict)) => {
                        drop(slot);
                        self.finish(verdict, announce, parts, body, metering)
                    }
                    Ok((wait, verdict)) => {
                        let hz = announce.hz;
                        let (_, stamp) = announce.decide(&verdict);
                        #[cfg(feature = "metrics")]
                        announce.metrics.held();
                        let inner = self.take_ready();
                        ResponseFuture {
                            state: State::Sleeping {
                                waiting: Box::pin(Sleeping {
                                    sleep: tokio::time::sleep(ticks_to_duration(wait, hz)),
                                    req: Some(Request::from_parts(parts, body)),
                                    inner: Some(inner),
                                    stamp: Some(stamp),
                                    slot: Some(slot),
                                    metering,
                                }),
                            },
                        }
                    }
                };
            }
            drop(slot);
        }
        match live.backend.check(&key, now, cost) {
            Check::Ready(verdict) => self.finish(verdict, announce, parts, body, metering),
            Check::Pending(check) => {
                let inner = self.take_ready();
                ResponseFuture {
                    state: State::Checking {
                        waiting: Box::pin(Checking {
                            check,
                            req: Some(Request::from_parts(parts, body)),
                            inner: Some(inner),
                            announce: Arc::clone(announce),
                            metering,
                        }),
                    },
                }
            }
        }
    }
}

impl<S: Clone, E, B, C> RateLimit<S, E, B, C> {
    /// The ready inner service, for a request that waits; a clone stays
    /// behind (as tower's documentation asks).
    fn take_ready(&mut self) -> S {
        let clone = self.inner.clone();
        core::mem::replace(&mut self.inner, clone)
    }
}

impl<S, E, B, C> RateLimit<S, E, B, C> {
    pub(crate) fn finish<ReqBody, ResBody>(
        &mut self,
        verdict: Verdict,
        announce: &Announce,
        parts: Parts,
        body: ReqBody,
        metering: Metering,
    ) -> ResponseFuture<S, B::Future, ReqBody>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        B: Backend,
        ResBody: From<&'static str>,
    {
        let (status, stamp) = announce.decide(&verdict);
        if status == StatusCode::OK {
            ResponseFuture {
                state: State::Calling {
                    fut: self.inner.call(Request::from_parts(parts, body)),
                    stamp: Some(stamp),
                    metering,
                },
            }
        } else {
            ResponseFuture::fixed(plain(status, body_for(status), stamp))
        }
    }
}
