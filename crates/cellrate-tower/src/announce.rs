//! What a group of tiers announces, and how a verdict becomes a status and
//! its fields.

use std::sync::Arc;

use http::{HeaderValue, StatusCode};

use crate::error::check_name;
use crate::policy::{policy_value, rate_policies, RatePolicy};
use crate::stamp::{stamp, Stamp};
use crate::value::RateTable;
use crate::{BuildError, Fault, Fields, Mode, TierInfo, Verdict, MAX_TIERS};

/// What a client with an override is announced in one tier: its quota's
/// policy, and the whole `RateLimit-Policy` value when the group has this
/// one tier (made once per override, as the tiers' own value is).
pub(crate) struct SlotPolicy {
    info: TierInfo,
    rate: Option<RatePolicy>,
    policy: Option<HeaderValue>,
}

/// What every request of a layer shares, besides the key and the backend.
pub(crate) struct Announce {
    pub(crate) names: Vec<String>,
    /// The tiers, as their own quotas announce them.
    tiers: Vec<TierInfo>,
    /// Per tier, what each of its override slots announces.
    slots: Vec<Vec<Option<SlotPolicy>>>,
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
    /// fallback mode, `fallback`; for a client with an override, the
    /// quota of its slot in `overrides`, the backend's slots by tier),
    /// checked as [`RateLimitBuilder::build`] documents.
    pub(crate) fn new(
        tiers: &[TierInfo],
        fallback: Option<Vec<TierInfo>>,
        overrides: &[Vec<Option<TierInfo>>],
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
        let slots = tiers
            .iter()
            .map(|t| {
                let of_tier = overrides.iter().find(|slots| {
                    slots
                        .iter()
                        .flatten()
                        .any(|s| s.name == t.name && s.hz == hz)
                });
                of_tier
                    .map(|slots| {
                        slots
                            .iter()
                            .map(|s| s.as_ref().map(|s| slot_policy(s, tiers.len() == 1)))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        Ok(Announce {
            names: tiers.iter().map(|t| t.name.clone()).collect(),
            tiers: tiers.to_vec(),
            slots,
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
        let s = match verdict.mode() {
            Mode::Fallback => stamp(
                &self.names,
                &self.fallback_rates,
                self.hz,
                self.fallback_policy.as_ref(),
                results,
                self.fields,
                None,
            ),
            _ if verdict.is_overridden() => self.overridden(verdict),
            _ => stamp(
                &self.names,
                &self.rates,
                self.hz,
                self.policy.as_ref(),
                results,
                self.fields,
                self.table.as_ref(),
            ),
        };
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

    /// The fields of a verdict in which overrides decided some tiers: each
    /// such tier announced with the quota that decided it (its slot's, when
    /// that quota's burst is the decision's limit; else the tier's own).
    fn overridden(&self, verdict: &Verdict) -> Stamp {
        let results = verdict.tiers().results();
        let own = |i: usize| -> Option<&SlotPolicy> {
            let slot = self
                .slots
                .get(i)?
                .get(verdict.override_slot(i)?)?
                .as_ref()?;
            let limit = match results.get(i)? {
                Ok(d) => d.limit(),
                Err(d) => d.limit(),
            };
            (slot.info.limit == limit).then_some(slot)
        };
        if let (1, Some(slot)) = (results.len(), own(0)) {
            let rates = core::slice::from_ref(&slot.rate);
            let policy = slot.policy.as_ref();
            return stamp(
                &self.names,
                rates,
                self.hz,
                policy,
                results,
                self.fields,
                None,
            );
        }
        let mut tiers = self.tiers.clone();
        let mut rates = self.rates.clone();
        for (i, (tier, rate)) in tiers.iter_mut().zip(&mut rates).enumerate() {
            if let Some(slot) = own(i) {
                *tier = slot.info.clone();
                *rate = slot.rate.clone();
            }
        }
        let policy = policy_value(&tiers);
        stamp(
            &self.names,
            &rates,
            self.hz,
            policy.as_ref(),
            results,
            self.fields,
            None,
        )
    }
}

/// What the client of an override slot whose quota is `info` is announced
/// in its tier; with its whole policy value if the tier is `alone` in its
/// group.
fn slot_policy(info: &TierInfo, alone: bool) -> SlotPolicy {
    let one = core::slice::from_ref(info);
    SlotPolicy {
        info: info.clone(),
        rate: rate_policies(one).pop().flatten(),
        policy: if alone { policy_value(one) } else { None },
    }
}

/// What each group of tiers announces (the first with the backend's
/// `fallback` tiers; its clients with overrides with the quotas of their
/// slots in `overrides`), checked as [`RateLimitBuilder::build`]
/// documents.
pub(crate) fn announces(
    groups: Vec<Vec<TierInfo>>,
    mut fallback: Option<Vec<TierInfo>>,
    overrides: &[Vec<Option<TierInfo>>],
    fields: Fields,
    metrics_name: &str,
) -> Result<Vec<Arc<Announce>>, BuildError> {
    let mut announces = Vec::new();
    for tiers in groups {
        let announce = Announce::new(&tiers, fallback.take(), overrides, fields, metrics_name)?;
        announces.push(Arc::new(announce));
    }
    if announces.is_empty() {
        return Err(BuildError::NoTiers);
    }
    Ok(announces)
}
