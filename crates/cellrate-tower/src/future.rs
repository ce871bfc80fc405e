//! [`ResponseFuture`]: a request decided in `call`, waiting for its check
//! (Redis) or held until its turn (the delaying mode), then the inner
//! service's answer with the fields.

use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::future::Future;
use std::sync::Arc;

use ::tower::Service;
use http::header::HeaderValue;
use http::{Request, Response, StatusCode};

use crate::announce::Announce;
use crate::body::Metering;
use crate::stamp::Stamp;
use crate::Verdict;

/// A place in the delaying queue (type-erased).
pub(crate) type Slot = Box<dyn Send + Sync>;

pub(crate) fn plain<B: From<&'static str>>(
    status: StatusCode,
    body: &'static str,
    stamp: Stamp,
) -> Response<B> {
    let mut r = Response::new(B::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    stamp.apply(r.headers_mut());
    r
}

pub(crate) fn body_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "rate limited\n",
        StatusCode::PAYLOAD_TOO_LARGE => "request too large for the rate limit\n",
        StatusCode::SERVICE_UNAVAILABLE => "rate limiter unavailable\n",
        StatusCode::BAD_REQUEST => "invalid rate-limit key\n",
        _ => "internal error\n",
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RateLimit`].
    pub struct ResponseFuture<S, F, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        pub(crate) state: State<S, F, ReqBody>,
    }
}

pin_project_lite::pin_project! {
    /// A request whose check is not decided yet (a Redis round trip).
    #[project = CheckingProj]
    pub(crate) struct Checking<S, F, ReqBody> {
        #[pin] pub(crate) check: F,
        pub(crate) req: Option<Request<ReqBody>>,
        pub(crate) inner: Option<S>,
        pub(crate) announce: Arc<Announce>,
        pub(crate) metering: Metering,
    }
}

pin_project_lite::pin_project! {
    /// A request held until its turn (the delaying mode).
    #[project = SleepingProj]
    pub(crate) struct Sleeping<S, ReqBody> {
        #[pin] pub(crate) sleep: tokio::time::Sleep,
        pub(crate) req: Option<Request<ReqBody>>,
        pub(crate) inner: Option<S>,
        pub(crate) stamp: Option<Stamp>,
        pub(crate) slot: Option<Slot>,
        pub(crate) metering: Metering,
    }
}

pin_project_lite::pin_project! {
    /// The response future's states. The waiting ones are boxed: an
    /// in-process backend's check future holds a whole [`Verdict`], and a
    /// held request its request and a timer, while the common path
    /// (decided in `call`) carries only the inner future and the fields;
    /// the future is moved (into axum's box, for one) by its size.
    #[project = StateProj]
    pub(crate) enum State<S, F, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Fixed { response: Option<S::Response> },
        Checking { waiting: Pin<Box<Checking<S, F, ReqBody>>> },
        Sleeping { waiting: Pin<Box<Sleeping<S, ReqBody>>> },
        Calling { #[pin] fut: S::Future, stamp: Option<Stamp>, metering: Metering },
    }
}

impl<S, F, ReqBody> ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn fixed(response: S::Response) -> Self {
        ResponseFuture {
            state: State::Fixed {
                response: Some(response),
            },
        }
    }
}

impl<S, F, ReqBody, ResBody> ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: From<&'static str>,
{
    pub(crate) fn done(status: StatusCode) -> Self {
        Self::fixed(plain(status, body_for(status), Stamp::default()))
    }
}

impl<S, F, ReqBody, ResBody> Future for ResponseFuture<S, F, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    F: Future<Output = Verdict>,
    ResBody: From<&'static str>,
{
    type Output = Result<Response<ResBody>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Fixed { response } => {
                    return match response.take() {
                        Some(r) => Poll::Ready(Ok(r)),
                        // Polled after completion: answer again rather than panic.
                        None => Poll::Ready(Ok(plain(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "internal error\n",
                            Stamp::default(),
                        ))),
                    };
                }
                StateProj::Checking { waiting } => {
                    let CheckingProj {
                        check,
                        req,
                        inner,
                        announce,
                        metering,
                    } = waiting.as_mut().project();
                    let verdict = ready!(check.poll(cx));
                    let (status, stamp) = announce.decide(&verdict);
                    let (Some(req), Some(mut inner)) = (req.take(), inner.take()) else {
                        state.set(State::Fixed { response: None });
                        continue;
                    };
                    if status == StatusCode::OK {
                        let fut = inner.call(req);
                        let metering = metering.take();
                        state.set(State::Calling {
                            fut,
                            stamp: Some(stamp),
                            metering,
                        });
                    } else {
                        state.set(State::Fixed {
                            response: Some(plain(status, body_for(status), stamp)),
                        });
                    }
                }
                StateProj::Sleeping { waiting } => {
                    let SleepingProj {
                        sleep,
                        req,
                        inner,
                        stamp,
                        slot,
                        metering,
                    } = waiting.as_mut().project();
                    ready!(sleep.poll(cx));
                    drop(slot.take());
                    let (Some(req), Some(mut inner)) = (req.take(), inner.take()) else {
                        state.set(State::Fixed { response: None });
                        continue;
                    };
                    let stamp = stamp.take();
                    let metering = metering.take();
                    let fut = inner.call(req);
                    state.set(State::Calling {
                        fut,
                        stamp,
                        metering,
                    });
                }
                StateProj::Calling {
                    fut,
                    stamp,
                    metering,
                } => {
                    let mut response = ready!(fut.poll(cx))?;
                    // The body went over while the handler read it: the
                    // answer is the refusal, not the handler's.
                    if let Some((meter, announce)) = metering.take() {
                        if let Some(verdict) = meter.refused() {
                            let (status, stamp) = announce.answer(&verdict);
                            count!(announce, BodyDenied);
                            return Poll::Ready(Ok(plain(status, body_for(status), stamp)));
                        }
                    }
                    if let Some(stamp) = stamp.take() {
                        stamp.apply(response.headers_mut());
                    }
                    return Poll::Ready(Ok(response));
                }
            }
        }
    }
}
