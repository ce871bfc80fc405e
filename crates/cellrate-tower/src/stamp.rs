//! Stamping: the rate-limit fields of one decision, computed once and
//! inserted into the response (`RateLimit-Policy`, `RateLimit`,
//! `X-RateLimit-*`, `Retry-After`).

use cellrate::{Decision, Denied};
use cellrate_headers::{self as headers, PolicyState};
use http::header::{HeaderValue, RETRY_AFTER};
use http::HeaderMap;

use crate::policy::{policy_value, rate_policies, rate_result, RatePolicy};
use crate::value::{
    number, RateTable, ValueBuf, RATELIMIT, RATELIMIT_POLICY, X_LIMIT, X_REMAINING, X_RESET,
};
use crate::{Fields, TierInfo, MAX_TIERS};

/// The header fields to add to one response, kept small (it travels in
/// the response future): the two shared IETF values, and the legacy
/// numbers and `Retry-After` as integers (their values come from
/// [`number`] when applied). A keyless 401's challenge is added by the
/// keyless path itself.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stamp {
    pub(crate) policy: Option<HeaderValue>,
    pub(crate) ratelimit: Option<HeaderValue>,
    /// `(X-RateLimit-Limit, -Remaining, -Reset)`.
    pub(crate) legacy: Option<(u64, u64, u64)>,
    pub(crate) retry: Option<u64>,
}

impl Stamp {
    pub(crate) fn is_empty(&self) -> bool {
        self.policy.is_none()
            && self.ratelimit.is_none()
            && self.legacy.is_none()
            && self.retry.is_none()
    }
    pub(crate) fn apply(self, map: &mut HeaderMap) {
        let n = self.policy.is_some() as usize
            + self.ratelimit.is_some() as usize
            + 3 * self.legacy.is_some() as usize
            + self.retry.is_some() as usize;
        if n == 0 {
            return;
        }
        map.reserve(n);
        if let Some(v) = self.policy {
            map.insert(RATELIMIT_POLICY, v);
        }
        if let Some(v) = self.ratelimit {
            map.insert(RATELIMIT, v);
        }
        if let Some((limit, remaining, reset)) = self.legacy {
            map.insert(X_LIMIT, number(limit));
            map.insert(X_REMAINING, number(remaining));
            map.insert(X_RESET, number(reset));
        }
        if let Some(secs) = self.retry {
            map.insert(RETRY_AFTER, number(secs));
        }
    }
}

/// The `RateLimit` value for `results` (one per tier of `names`, at `hz`;
/// each tier's rate policy, if any, in `rates`).
pub(crate) fn ratelimit_value(
    names: &[String],
    rates: &[Option<RatePolicy>],
    hz: u64,
    results: &[Result<Decision, Denied>],
) -> Option<HeaderValue> {
    let mut states = [PolicyState::new("", Ok(Decision::new(0, 0, 0))); 2 * MAX_TIERS];
    let mut len = 0;
    let mut capacity = 16;
    for (i, (name, result)) in names.iter().zip(results).take(MAX_TIERS).enumerate() {
        states[len] = PolicyState::new(name, *result);
        len += 1;
        capacity += name.len() + 24;
        if let Some(Some(rate)) = rates.get(i) {
            states[len] = PolicyState::new(&rate.name, rate_result(rate, *result));
            len += 1;
            capacity += rate.name.len() + 24;
        }
    }
    let mut buf = ValueBuf::with_capacity(capacity);
    headers::write_ratelimit(&mut buf, &states[..len], hz).ok()?;
    buf.value()
}

/// One tier's `(limit, remaining, t)`: `t` the whole seconds until it is
/// full (the `t` of `RateLimit` and the `X-RateLimit-Reset` value alike).
/// `None` for a cost that can never fit (it has no state to announce).
pub(crate) fn one_state(result: &Result<Decision, Denied>, hz: u64) -> Option<(u64, u64, u64)> {
    let (limit, remaining, reset) = match result {
        Ok(d) => (d.limit(), d.remaining(), d.reset_after()),
        Err(Denied::Limited(l)) => (l.limit(), l.remaining(), l.reset_after()),
        Err(Denied::CostTooLarge { .. }) => return None,
    };
    Some((limit, remaining, headers::seconds_ceil(reset, hz).ok()?))
}

/// Writes the fields of `results` (one per tier of `names`, at `hz`; each
/// tier's rate policy, if any, in `rates`; the one tier's values shared
/// through `table` if there is one).
pub(crate) fn stamp(
    names: &[String],
    rates: &[Option<RatePolicy>],
    hz: u64,
    policy: Option<&HeaderValue>,
    results: &[Result<Decision, Denied>],
    fields: Fields,
    table: Option<&RateTable>,
) -> Stamp {
    let mut out = Stamp::default();
    // One tier (the common layer): its state is read once for both
    // families (each accessor divides), and its `RateLimit` value comes
    // from the table. The same fields as the general path below.
    if let [only] = results {
        if let Some((limit, remaining, t)) = one_state(only, hz) {
            if fields.ietf() {
                out.policy = policy.cloned();
                let make = || ratelimit_value(names, rates, hz, results);
                out.ratelimit = match table {
                    Some(table) => table.get(remaining, t, make),
                    None => make(),
                };
            }
            if fields.legacy() {
                out.legacy = Some((limit, remaining, t));
            }
            if let Err(denied) = only {
                out.retry = headers::retry_after_secs(denied, hz).ok();
            }
            return out;
        }
    }
    if fields.ietf() {
        out.policy = policy.cloned();
        out.ratelimit = ratelimit_value(names, rates, hz, results);
    }
    if fields.legacy() {
        if let Some(Ok((limit, remaining, reset))) =
            cellrate::compose::tightest(results).map(|r| headers::x_ratelimit(&r, hz))
        {
            out.legacy = Some((limit, remaining, reset));
        }
    }
    if let Some(Err(denied)) = cellrate::compose::refusing(results).map(|i| results[i]) {
        if let Ok(secs) = headers::retry_after_secs(&denied, hz) {
            out.retry = Some(secs);
        }
    }
    out
}

/// Inserts the rate-limit fields for one outcome of any backend into
/// `map`: `results` has one entry per tier of `tiers` (a Redis
/// [`Tiers::results`](cellrate::compose::Tiers::results) of a Redis
/// `Outcome`, of a [`Verdict`](crate::Verdict) or of in-process tiers), all
/// counted at `tiers[0].hz`. On a refusal it
/// also inserts `Retry-After`.
///
/// ```
/// use cellrate_tower::{insert_fields, Fields, TierInfo};
/// use cellrate::compose::AllTiers;
/// use cellrate::{Gcra, Quota};
/// let (q1, q2) = (Quota::per_second(5).at_hz(1_000), Quota::per_minute(20).at_hz(1_000));
/// let tiers = [Gcra::new(q1), Gcra::new(q2)];
/// let info = [TierInfo::from_quota("burst", &q1), TierInfo::from_quota("minute", &q2)];
/// let mut map = http::HeaderMap::new();
/// insert_fields(&mut map, &info, tiers.check_tiers(0, 1).results(), Fields::Both);
/// assert_eq!(map["ratelimit-policy"], r#""burst";q=5;w=1, "minute";q=20;w=60"#);
/// assert_eq!(map["ratelimit"], r#""burst";r=4;t=1, "minute";r=19;t=3"#);
/// assert_eq!(map["x-ratelimit-remaining"], "4");
/// assert!(map.get("retry-after").is_none());
/// ```
pub fn insert_fields(
    map: &mut HeaderMap,
    tiers: &[TierInfo],
    results: &[Result<Decision, Denied>],
    fields: Fields,
) {
    let Some(hz) = tiers.first().map(|t| t.hz) else {
        return;
    };
    let names: Vec<String> = tiers.iter().map(|t| t.name.clone()).collect();
    let policy = policy_value(tiers);
    let rates = rate_policies(tiers);
    stamp(&names, &rates, hz, policy.as_ref(), results, fields, None).apply(map);
}
