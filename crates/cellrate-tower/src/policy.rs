//! The `RateLimit-Policy` a layer announces: each tier's burst policy and,
//! when its burst does not refill in whole seconds, its rate policy
//! `"<tier>/rate"` (see `docs/design/tower.md`).

use cellrate::{Decision, Denied};
use cellrate_headers as headers;
use http::HeaderValue;

use crate::value::ValueBuf;
use crate::TierInfo;

/// A tier's rate policy, announced after its burst policy: its name
/// (`<tier>/rate`), `q`, and `q − burst` (the cells its `r` adds to the
/// burst's).
#[derive(Clone, Debug)]
pub(crate) struct RatePolicy {
    pub(crate) name: String,
    pub(crate) limit: u64,
    pub(crate) extra: u64,
}

/// The rate policy of each tier (`None`: the burst policy says the rate).
pub(crate) fn rate_policies(tiers: &[TierInfo]) -> Vec<Option<RatePolicy>> {
    tiers
        .iter()
        .map(|t| {
            t.rate.map(|(q, _)| RatePolicy {
                name: std::format!("{}/rate", t.name),
                limit: q,
                extra: q.saturating_sub(t.limit),
            })
        })
        .collect()
}

/// The `RateLimit-Policy` value for `tiers` (all at `tiers[0].hz`): each
/// tier's burst policy, then its rate policy if it has one.
pub(crate) fn policy_value(tiers: &[TierInfo]) -> Option<HeaderValue> {
    let hz = tiers.first()?.hz;
    let rates = rate_policies(tiers);
    let mut policies: Vec<headers::Policy<'_>> = Vec::with_capacity(2 * tiers.len());
    for (t, rate) in tiers.iter().zip(&rates) {
        policies.push(headers::Policy::new(&t.name, t.limit, t.window_ticks));
        if let (Some(r), Some((_, w))) = (rate, t.rate) {
            policies.push(headers::Policy::new(&r.name, r.limit, w));
        }
    }
    let mut buf = ValueBuf::with_capacity(64 * policies.len());
    headers::write_ratelimit_policy(&mut buf, &policies, hz).ok()?;
    buf.value()
}

/// The rate policy's answer: the burst's, with `extra` more cells left.
pub(crate) fn rate_result(
    rate: &RatePolicy,
    result: Result<Decision, Denied>,
) -> Result<Decision, Denied> {
    match result {
        Ok(d) => Ok(Decision::new(
            rate.limit,
            d.remaining().saturating_add(rate.extra).min(rate.limit),
            d.reset_after(),
        )),
        Err(Denied::Limited(l)) => Err(Denied::Limited(cellrate::Limited::with_remaining(
            rate.limit,
            l.remaining().saturating_add(rate.extra).min(rate.limit),
            l.retry_after(),
            l.reset_after(),
        ))),
        never => never,
    }
}
