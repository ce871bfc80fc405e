//! Charging a request body as it streams ([`RateLimitBuilder::charge_body`](super::RateLimitBuilder::charge_body)).
//!
//! The layer charges the request's weight before the handler runs; with
//! `charge_body` that weight is the body's *prepaid* bytes (typically its
//! `Content-Length`, 0 when it declares none), and the body handed to the
//! handler is a meter around the real one: each data frame first uses what
//! is left of the prepaid bytes, and the excess is checked against the same
//! backend and key as the request. A frame the backend refuses ends the
//! body with [`BodyLimited`]; the handler sees a body error, and the layer
//! answers the client `429` (with `Retry-After` and the fields of that
//! refusal) or `413` (a frame larger than a tier's burst) in place of the
//! handler's response (an HTTP/1 client that is still sending its body
//! when that answer leaves may see the connection closed instead: the
//! server does not read the rest). A chunked body, or an HTTP/2 body without
//! `Content-Length`, therefore pays for every byte that reaches the handler.
//!
//! Invariant: the bytes the handler reads are at most the prepaid bytes
//! plus the excess the backend admitted; nothing past a refused frame is
//! yielded.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::live::Shared;
use super::{Backend, Check, Part, RequestKey, Verdict};
use cellrate::Clock;

use crate::announce::Announce;

/// What a metered request's response needs: the meter, and how to answer
/// its refusal.
pub(crate) type Metering = Option<(Arc<Meter>, Arc<Announce>)>;

/// The error a metered request body ends with once the backend refuses a
/// frame: the body went over the rate limit (the client gets 429 or 413).
///
/// ```
/// let e = cellrate_tower::BodyLimited;
/// assert_eq!(e.to_string(), "request body over the rate limit");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BodyLimited;

impl core::fmt::Display for BodyLimited {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("request body over the rate limit")
    }
}

impl std::error::Error for BodyLimited {}

/// A key part that outlives the request head.
enum OwnedPart {
    Str(Box<str>),
    Ip(IpAddr),
    Keyless,
}

impl OwnedPart {
    fn new(part: Part<'_>) -> Self {
        match part {
            Part::Str(s) => OwnedPart::Str(s.into()),
            Part::Ip(ip) => OwnedPart::Ip(ip),
            Part::Keyless => OwnedPart::Keyless,
        }
    }
    fn part(&self) -> Part<'_> {
        match self {
            OwnedPart::Str(s) => Part::Str(s),
            OwnedPart::Ip(ip) => Part::Ip(*ip),
            OwnedPart::Keyless => Part::Keyless,
        }
    }
}

/// What the body and the response future share: the refusal, once a frame
/// was refused.
#[derive(Default)]
pub(super) struct Meter {
    refused: Mutex<Option<Verdict>>,
}

impl Meter {
    pub(super) fn refused(&self) -> Option<Verdict> {
        self.refused.lock().map(|v| *v).unwrap_or(None)
    }
    fn refuse(&self, verdict: Verdict) {
        if let Ok(mut v) = self.refused.lock() {
            *v = Some(verdict);
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A frame and the pending check of its excess.
type Held<B> = (Pin<Box<<B as Backend>::Future>>, Frame<Bytes>);

struct Metered<E, B: Backend, C> {
    inner: axum::body::Body,
    shared: Arc<Shared<E, B, C>>,
    client: OwnedPart,
    scope: Option<OwnedPart>,
    prepaid: u64,
    meter: Arc<Meter>,
    /// A frame waiting for a backend that decides asynchronously.
    pending: Option<Held<B>>,
    done: bool,
}

impl<E, B: Backend, C> Unpin for Metered<E, B, C> {}

impl<E, B: Backend, C: Clock> Metered<E, B, C> {
    /// The frame if `verdict` admits its excess, else the end of the body.
    fn settle(
        &mut self,
        verdict: Verdict,
        frame: Frame<Bytes>,
    ) -> Option<Result<Frame<Bytes>, Error>> {
        if verdict.is_admitted() {
            Some(Ok(frame))
        } else {
            self.done = true;
            self.meter.refuse(verdict);
            Some(Err(Box::new(BodyLimited)))
        }
    }
}

impl<E, B, C> Body for Metered<E, B, C>
where
    E: Send + Sync + 'static,
    B: Backend,
    C: Clock + Send + Sync + 'static,
{
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some((fut, _)) = &mut this.pending {
            let verdict = core::task::ready!(fut.as_mut().poll(cx));
            let Some((_, frame)) = this.pending.take() else {
                return Poll::Ready(None);
            };
            return Poll::Ready(this.settle(verdict, frame));
        }
        let frame = match core::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(e)) => return Poll::Ready(Some(Err(Box::new(e)))),
            Some(Ok(frame)) => frame,
        };
        let len = frame.data_ref().map_or(0, |d| d.len() as u64);
        let paid = len.min(this.prepaid);
        this.prepaid -= paid;
        let excess = len - paid;
        if excess == 0 {
            return Poll::Ready(Some(Ok(frame)));
        }
        let key = RequestKey::new(this.client.part(), this.scope.as_ref().map(OwnedPart::part));
        let now = this.shared.clock.now();
        match this.shared.live.load().backend.check(&key, now, excess) {
            Check::Ready(verdict) => Poll::Ready(this.settle(verdict, frame)),
            Check::Pending(fut) => {
                this.pending = Some((Box::pin(fut), frame));
                Pin::new(this).poll_frame(cx)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.pending.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.done {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

/// `body` metered for `key` with `prepaid` bytes already charged, if it is
/// axum's body (the only body type the meter can rebuild): `Err(Some(body))`
/// for any other type (`Err(None)` cannot happen: a value downcasts to its
/// own type).
pub(super) fn meter<ReqBody: 'static, E, B, C>(
    body: ReqBody,
    key: &RequestKey<'_>,
    prepaid: u64,
    shared: &Arc<Shared<E, B, C>>,
) -> Result<(ReqBody, Arc<Meter>), Option<ReqBody>>
where
    E: Send + Sync + 'static,
    B: Backend,
    C: Clock + Send + Sync + 'static,
{
    use core::any::Any;
    let mut slot = Some(body);
    let Some(inner) = (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<axum::body::Body>>()
        .and_then(Option::take)
    else {
        return Err(slot);
    };
    let meter = Arc::new(Meter::default());
    let mut back = Some(axum::body::Body::new(Metered {
        inner,
        shared: Arc::clone(shared),
        client: OwnedPart::new(key.client()),
        scope: key.scope().map(OwnedPart::new),
        prepaid,
        meter: Arc::clone(&meter),
        pending: None,
        done: false,
    }));
    match (&mut back as &mut dyn Any)
        .downcast_mut::<Option<ReqBody>>()
        .and_then(Option::take)
    {
        Some(body) => Ok((body, meter)),
        None => Err(None),
    }
}
