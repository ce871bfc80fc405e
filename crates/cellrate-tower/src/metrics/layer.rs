//! The layer's own series (feature `metrics`): `cellrate_requests_total`,
//! `cellrate_decisions_total` and `cellrate_held_total` (named and
//! described in [`crate::metrics`]), registered when a layer is built and
//! rebuilt with its announcement on a reload.

use ::metrics::Counter;
use http::StatusCode;

use crate::{Mode, Verdict};
use cellrate::Denied;
use cellrate_metrics::{describe, DECISIONS, HELD, REQUESTS};
use std::borrow::ToOwned;

/// What a request came to (the `outcome` of `cellrate_requests_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admitted,
    Denied,
    TooLarge,
    Unavailable,
    QueueFull,
    NoKey,
    InvalidKey,
    Error,
    BodyDenied,
}

impl Outcome {
    const ALL: [(Outcome, &'static str); 9] = [
        (Outcome::Admitted, "admitted"),
        (Outcome::Denied, "denied"),
        (Outcome::TooLarge, "too_large"),
        (Outcome::Unavailable, "unavailable"),
        (Outcome::QueueFull, "queue_full"),
        (Outcome::NoKey, "no_key"),
        (Outcome::InvalidKey, "invalid_key"),
        (Outcome::Error, "error"),
        (Outcome::BodyDenied, "body_denied"),
    ];

    /// The outcome of a verdict the layer answered with `status`.
    fn of(status: StatusCode) -> Self {
        match status {
            StatusCode::OK => Outcome::Admitted,
            StatusCode::TOO_MANY_REQUESTS => Outcome::Denied,
            StatusCode::PAYLOAD_TOO_LARGE => Outcome::TooLarge,
            StatusCode::SERVICE_UNAVAILABLE => Outcome::Unavailable,
            StatusCode::BAD_REQUEST => Outcome::InvalidKey,
            _ => Outcome::Error,
        }
    }
}

/// A tier's `cellrate_decisions_total` handles.
struct TierCounters {
    admitted: Counter,
    denied: Counter,
    too_large: Counter,
}

/// The handles of one layer, registered when it is built.
pub(crate) struct LayerMetrics {
    requests: [Counter; 9],
    tiers: Vec<TierCounters>,
    held: Counter,
}

impl LayerMetrics {
    /// Registers the layer `limiter` with these tiers.
    pub(crate) fn new(limiter: &str, tiers: &[String]) -> Self {
        describe();
        let l: String = limiter.to_owned();
        let requests = Outcome::ALL.map(|(_, outcome)| {
            ::metrics::counter!(REQUESTS, "limiter" => l.clone(), "outcome" => outcome)
        });
        let tiers = tiers
            .iter()
            .map(|t| {
                let c = |outcome: &'static str| {
                    ::metrics::counter!(
                        DECISIONS, "limiter" => l.clone(), "tier" => t.clone(), "outcome" => outcome
                    )
                };
                TierCounters {
                    admitted: c("admitted"),
                    denied: c("denied"),
                    too_large: c("too_large"),
                }
            })
            .collect();
        LayerMetrics {
            requests,
            tiers,
            held: ::metrics::counter!(HELD, "limiter" => l),
        }
    }

    /// One request's outcome.
    #[inline]
    pub(crate) fn request(&self, outcome: Outcome) {
        self.requests[outcome as usize].increment(1);
    }

    /// A request held by the delaying mode.
    pub(crate) fn held(&self) {
        self.held.increment(1);
    }

    /// A verdict the layer answered with `status`: the request's
    /// outcome, and each tier's if the tiers decided it.
    #[inline]
    pub(crate) fn verdict(&self, verdict: &Verdict, status: StatusCode) {
        self.request(Outcome::of(status));
        if verdict.fault_kind().is_some()
            || matches!(verdict.mode(), Mode::FailOpen | Mode::FailClosed)
        {
            return;
        }
        if verdict.is_admitted() {
            for t in &self.tiers {
                t.admitted.increment(1);
            }
            return;
        }
        for (t, result) in self.tiers.iter().zip(verdict.tiers().results()) {
            match result {
                Ok(_) => {}
                Err(Denied::CostTooLarge { .. }) => t.too_large.increment(1),
                Err(_) => t.denied.increment(1),
            }
        }
    }
}

#[test]
fn outcomes_are_listed_in_their_order() {
    for (i, (o, _)) in Outcome::ALL.iter().enumerate() {
        assert_eq!(*o as usize, i);
    }
}
