//! What a group of tiers announces, and how a verdict becomes a status and
//! its fields.

use std::sync::Arc;

use http::{HeaderValue, StatusCode};

use crate::error::check_name;
use crate::policy::{policy_value, rate_policies, RatePolicy};
use crate::stamp::{stamp, Stamp};
use crate::value::RateTable;
use crate::{BuildError, Fault, Fields, Mode, TierInfo, Verdict, MAX_TIERS};

/// What every request of a layer shares, besides the key and the backend.
pub(crate) struct Announce {
    pub(crate) names: Vec<String>,
    pub(crate) rates: Vec<Option<RatePolicy>>,
    pub(crate) fallback_rates: Vec<Option<RatePolicy>>,
    /// The shared `RateLimit` values of a one-tier layer.
    pub(crate) table: Option<RateTable>,
    pub(crate) hz: u64,
    pub(crate) policy: Option<HeaderValue>,
    pub(crate) fallback_policy: Option<HeaderValue>,
    pub(crate) fields: Fields,
    /// The layer's series (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) metrics: crate::metrics::LayerMetrics,
}

impl Announce {
    /// [`answer`](Self::answer), counted in the layer's metrics.
    #[inline]
    pub(crate) fn decide(&self, verdict: &Verdict) -> (StatusCode, Stamp) {
        let answer = self.answer(verdict);
        #[cfg(feature = "metrics")]
        self.metrics.verdict(verdict, answer.0);
        answer
    }

    /// What a layer announces for `tiers` (and, when the backend has a
    /// fallback mode, `fallback`), checked as [`RateLimitBuilder::build`]
    /// documents.
    pub(crate) fn new(
        tiers: &[TierInfo],
        fallback: Option<Vec<TierInfo>>,
        fields: Fields,
        metrics_name: &str,
    ) -> Result<Self, BuildError> {
        #[cfg(not(feature = "metrics"))]
        let _ = metrics_name;
        let first = tiers.first().ok_or(BuildError::NoTiers)?;
        if tiers.len() > MAX_TIERS {
            return Err(BuildError::TooManyTiers);
        }
        let hz = first.hz;
        if hz == 0 || tiers.iter().any(|t| t.hz != hz) {
            return Err(BuildError::MixedHz);
        }
        for t in tiers {
            check_name(&t.name)?;
        }
        let (fallback_policy, fallback_rates) = match fallback {
            None => (None, Vec::new()),
            Some(f) => {
                if f.len() != tiers.len() || f.iter().any(|t| t.hz != hz) {
                    return Err(BuildError::Fallback);
                }
                (policy_value(&f), rate_policies(&f))
            }
        };
        Ok(Announce {
            names: tiers.iter().map(|t| t.name.clone()).collect(),
            rates: rate_policies(tiers),
            fallback_rates,
            table: if fields.ietf() {
                RateTable::new(tiers)
            } else {
                None
            },
            hz,
            policy: policy_value(tiers),
            fallback_policy,
            fields,
            #[cfg(feature = "metrics")]
            metrics: crate::metrics::LayerMetrics::new(
                metrics_name,
                &tiers.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            ),
        })
    }

    /// The status and fields for a verdict.
    pub(crate) fn answer(&self, verdict: &Verdict) -> (StatusCode, Stamp) {
        if let Some(fault) = verdict.fault_kind() {
            let status = match fault {
                Fault::InvalidKey => StatusCode::BAD_REQUEST,
                Fault::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            };
            return (status, Stamp::default());
        }
        let results = verdict.tiers().results();
        let admitted = verdict.is_admitted();
        match verdict.mode() {
            Mode::FailOpen => return (StatusCode::OK, Stamp::default()),
            Mode::FailClosed if !admitted => {
                let mut s = stamp(
                    &self.names,
                    &[],
                    self.hz,
                    None,
                    results,
                    Fields::Neither,
                    None,
                );
                if s.is_empty() {
                    s.retry = Some(1);
                }
                return (StatusCode::SERVICE_UNAVAILABLE, s);
            }
            _ => {}
        }
        let (policy, rates, table) = match verdict.mode() {
            Mode::Fallback => (self.fallback_policy.as_ref(), &self.fallback_rates, None),
            _ => (self.policy.as_ref(), &self.rates, self.table.as_ref()),
        };
        let s = stamp(
            &self.names,
            rates,
            self.hz,
            policy,
            results,
            self.fields,
            table,
        );
        let status = if admitted {
            StatusCode::OK
        } else if cellrate::compose::refusing(results)
            .and_then(|i| results[i].err())
            .is_some_and(|d| d.retry_after().is_none())
        {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        (status, s)
    }
}

/// What each group of tiers announces (the first with the backend's
/// `fallback` tiers), checked as [`RateLimitBuilder::build`]
/// documents.
pub(crate) fn announces(
    groups: Vec<Vec<TierInfo>>,
    mut fallback: Option<Vec<TierInfo>>,
    fields: Fields,
    metrics_name: &str,
) -> Result<Vec<Arc<Announce>>, BuildError> {
    let mut announces = Vec::new();
    for tiers in groups {
        let announce = Announce::new(&tiers, fallback.take(), fields, metrics_name)?;
        announces.push(Arc::new(announce));
    }
    if announces.is_empty() {
        return Err(BuildError::NoTiers);
    }
    Ok(announces)
}
