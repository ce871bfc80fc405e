//! The wire protocol: a policy's requests encoded as one script call, and
//! the script's reply decoded into the crate's own [`Decision`] and
//! [`Denied`]: the same values an in-process limiter with the tier's
//! [`quota`](super::RedisTier::quota) (or [`algorithm`](super::RedisTier::algorithm))
//! reports at the same server time. The arguments and replies are those
//! each script's Lua file states. A reply of any other shape is
//! [`Error::BadReply`], never a panic.

use std::string::String;
use std::vec::Vec;

use super::client::Check;
use super::policy::TierAlgorithm;
use super::scripts::{
    bucketed_script, check_script, fixed_script, log_script, single_script, sliding_script,
    tiers_script,
};
use super::{Error, Outcome, RedisPolicy, RedisTier};
use cellrate::{Decision, Denied, Limited, Quota};

/// The most keys one check-script call carries (requests × tiers). A
/// batch with more is split into several calls in one pipeline, so one
/// call holds the server for at most a few hundred key updates.
///
/// ```
/// assert_eq!(cellrate_redis::MAX_KEYS_PER_CALL, 256);
/// ```
pub const MAX_KEYS_PER_CALL: usize = 256;

impl RedisPolicy {
    /// How many requests one check-script call carries (at least one).
    pub(crate) fn requests_per_call(&self) -> usize {
        (MAX_KEYS_PER_CALL / self.tiers().len()).max(1)
    }

    /// One script call deciding `requests` (already validated, each cost
    /// within every burst) in order, and the script it needs: the single
    /// script for one request of a one-tier GCRA policy; else the check
    /// script (all tiers GCRA), the one-tier script of a policy's one window
    /// tier, or the tiers script (the last two take the same arguments and
    /// give the same reply), with the keys written
    /// straight into the command through one reused buffer, then the
    /// policy's arguments and the costs.
    /// `bases`: per tier, the parameters an untagged value was written
    /// under when they are not the tier's (the scripts' contract).
    pub(crate) fn check_cmd(
        &self,
        requests: &[Check<'_>],
        bases: &[Option<[u64; 3]>],
    ) -> (&'static ::redis::Script, ::redis::Cmd) {
        let mut cmd = ::redis::cmd("EVALSHA");
        let gcra = self.is_gcra();
        let mut key = String::with_capacity(64);
        if let (true, [(client, scope, cost)], [tier]) = (gcra, requests, self.tiers()) {
            let script = single_script();
            cmd.arg(script.get_hash()).arg(1);
            cmd.arg(self.key(tier, client, *scope, &mut key));
            cmd.arg(*cost).arg(&tier_args(tier)[1..]);
            if let Some(Some(base)) = bases.first() {
                cmd.arg(&base[..]);
            }
            return (script, cmd);
        }
        let script = match (gcra, self.tiers()) {
            (true, _) => check_script(),
            (false, [tier]) => match tier.algorithm() {
                TierAlgorithm::FixedWindow(_) => fixed_script(),
                TierAlgorithm::SlidingWindow(_) => sliding_script(),
                TierAlgorithm::BucketedWindow(_) => bucketed_script(),
                TierAlgorithm::SlidingLog { .. } => log_script(),
                TierAlgorithm::Gcra => tiers_script(),
            },
            (false, _) => tiers_script(),
        };
        cmd.arg(script.get_hash())
            .arg(requests.len() * self.tiers().len());
        for &(client, scope, _) in requests {
            for t in self.tiers() {
                cmd.arg(self.key(t, client, scope, &mut key));
            }
        }
        // -m when some tier runs on other parameters than its base: then
        // each tier's three numbers of its base follow its own (0: none).
        let based = bases.iter().any(Option::is_some);
        let m = self.tiers().len() as i64;
        cmd.arg(if based { -m } else { m });
        for (i, t) in self.tiers().iter().enumerate() {
            // The check script takes GCRA's three numbers without the kind.
            cmd.arg(&tier_args(t)[usize::from(gcra)..]);
            if based {
                cmd.arg(&bases.get(i).copied().flatten().unwrap_or([0; 3])[..]);
            }
        }
        match requests.first() {
            // One cost stands for all when they are equal (the usual case).
            Some(&(_, _, cost)) if requests.iter().all(|r| r.2 == cost) => {
                cmd.arg(cost);
            }
            _ => {
                for &(_, _, cost) in requests {
                    cmd.arg(cost);
                }
            }
        }
        (script, cmd)
    }

    /// Turns a reply of [`check_cmd`](Self::check_cmd)'s script for
    /// `requests` into one result each, appended to `out`: an [`Outcome`],
    /// or [`Error::CorruptKey`] for a request with a key that holds no TAT
    /// (that request alone). The check script sends one value per key, the
    /// tiers script four.
    pub(crate) fn decode_checks(
        &self,
        reply: &[i64],
        requests: &[Check<'_>],
        out: &mut Vec<Result<Outcome, Error>>,
    ) -> Result<(), Error> {
        let gcra = self.is_gcra();
        let width = if gcra { 1 } else { 4 };
        let m = self.tiers().len();
        let values = requests.len() * m * width;
        if reply.len() < 1 + values
            || reply[0] < 0
            || (!gcra && reply[1..1 + values].iter().any(|&v| v < 0))
        {
            return Err(Error::BadReply);
        }
        let now = reply[0] as u64;
        let bad = bad_keys(&reply[1 + values..], requests.len(), m)?;
        let start = out.len();
        for ((values, &(client, scope, cost)), bad) in reply[1..1 + values]
            .chunks_exact(width * m)
            .zip(requests)
            .zip(bad)
        {
            if let Some(tier) = bad {
                let mut key = String::new();
                self.key(&self.tiers()[tier], client, scope, &mut key);
                out.push(Err(Error::CorruptKey(key)));
                continue;
            }
            let results = if gcra {
                self.gcra_results(values, cost)
            } else {
                self.tier_results(values, cost)
            };
            let Some(results) = results else {
                out.truncate(start);
                return Err(Error::BadReply);
            };
            out.push(Ok(from_redis(results, now)));
        }
        Ok(())
    }

    /// One request's results from the check script's values: per tier
    /// `TAT − now` after the request if admitted, else `−1 − (TAT − now)`
    /// before it (every tier the same sign, else `None`).
    fn gcra_results(&self, values: &[i64], cost: u64) -> Option<Vec<Result<Decision, Denied>>> {
        let admitted = values[0] >= 0;
        if values.iter().any(|&v| (v >= 0) != admitted) {
            return None;
        }
        let results = self.tiers().iter().zip(values).map(|(t, &v)| {
            let ahead = if admitted { v as u64 } else { (-1 - v) as u64 };
            gcra_answer(&t.quota(), ahead, cost, admitted)
        });
        Some(results.collect())
    }

    /// One request's results from the tiers script's values: per tier
    /// whether it fits, then GCRA's `TAT − now` or a window's remaining,
    /// reset_after and retry_after (`None` for values it never sends).
    fn tier_results(&self, values: &[i64], cost: u64) -> Option<Vec<Result<Decision, Denied>>> {
        let tiers = self.tiers().iter().zip(values.chunks_exact(4));
        tiers
            .map(|(t, v)| {
                let fits = match v[0] {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let (x, y, z) = (v[1] as u64, v[2] as u64, v[3] as u64);
                let limit = t.limit();
                Some(match t.algorithm() {
                    TierAlgorithm::Gcra => gcra_answer(&t.quota(), x, cost, fits),
                    _ if x > limit => return None,
                    _ if fits => Ok(Decision::new(limit, x, y)),
                    _ => Err(Denied::Limited(Limited::with_remaining(limit, x, z, y))),
                })
            })
            .collect()
    }

    /// The script invocation for one request.
    pub(crate) fn invocation<'a>(
        &self,
        script: &'a ::redis::Script,
        keys: &[String],
        request: Request,
        bases: &[Option<[u64; 3]>],
    ) -> ::redis::ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(k);
        }
        inv.arg(request.cost)
            .arg(if request.up_to { 1 } else { 0 })
            .arg(request.refund);
        for t in self.tiers() {
            inv.arg(&tier_args(t)[1..]);
        }
        if bases.iter().any(Option::is_some) {
            for b in bases {
                inv.arg(&b.unwrap_or([0; 3])[..]);
            }
        }
        inv
    }
    /// Turns the lease script's reply for `keys` into an [`Outcome`].
    pub(crate) fn decode(
        &self,
        reply: &[i64],
        keys: &[String],
        cost: u64,
    ) -> Result<(u64, Outcome), Error> {
        if let [-1, _, i] = reply {
            let key = usize::try_from(*i)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| keys.get(i));
            return match key {
                Some(k) => Err(Error::CorruptKey(k.clone())),
                None => Err(Error::BadReply),
            };
        }
        if reply.len() != 2 + 2 * self.tiers().len() || reply.iter().any(|&v| v < 0) {
            return Err(Error::BadReply);
        }
        let granted = reply[0] as u64;
        let now = reply[1] as u64;
        let results = self
            .tiers()
            .iter()
            .zip(reply[2..].chunks_exact(2))
            .map(|(t, pair)| {
                let (ahead, wait) = (pair[0] as u64, pair[1] as u64);
                let quota = t.quota();
                if granted == 0 && cost > 0 && wait > 0 {
                    Err(Denied::Limited(Limited::from_gcra(&quota, ahead, wait)))
                } else {
                    Ok(Decision::from_gcra(&quota, ahead))
                }
            })
            .collect();
        Ok((granted, from_redis(results, now)))
    }
}

/// A tier's kind code and its three parameters, as the scripts read them
/// (the check, single and lease scripts take GCRA's three without the kind).
fn tier_args(tier: &RedisTier) -> [u64; 4] {
    tier.algorithm().args(&tier.quota())
}

impl RedisTier {
    /// The kind code and the three parameters the scripts read.
    pub(crate) fn script_args(&self) -> (u64, [u64; 3]) {
        let [kind, a, b, c] = tier_args(self);
        (kind, [a, b, c])
    }
}

/// An outcome Redis decided at server time `now` (µs).
fn from_redis(results: Vec<Result<Decision, Denied>>, now: u64) -> Outcome {
    Outcome::from_redis(&results, now)
}

/// A GCRA tier's answer to `cost` cells with the TAT `ahead` sub-ticks
/// after now (before the request unless it `fits`): what an in-process
/// [`Gcra`](cellrate::Gcra) with the tier's quota answers. Not fitting, its
/// wait is the GCRA inequality's overshoot `ahead + cost·T − span`; a tier
/// with no overshoot would have admitted the request alone and reports its
/// unchanged state.
fn gcra_answer(quota: &Quota, ahead: u64, cost: u64, fits: bool) -> Result<Decision, Denied> {
    if fits || cost == 0 {
        return Ok(Decision::from_gcra(quota, ahead));
    }
    let increment = cost as u128 * quota.emission_interval() as u128;
    match (ahead as u128 + increment).checked_sub(quota.span() as u128) {
        Some(wait) if wait > 0 => Err(Denied::Limited(Limited::from_gcra(
            quota,
            ahead,
            wait.min(u64::MAX as u128) as u64,
        ))),
        _ => Ok(Decision::from_gcra(quota, ahead)),
    }
}

/// What the lease script is asked to do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub(crate) cost: u64,
    pub(crate) up_to: bool,
    pub(crate) refund: u64,
}

/// The keys a batch reply lists as unreadable (1-based indices after the
/// values, `m` keys per request), as the tier index per request; a bad
/// index is a bad reply.
fn bad_keys(tail: &[i64], requests: usize, m: usize) -> Result<Vec<Option<usize>>, Error> {
    let mut bad: Vec<Option<usize>> = std::vec![None; requests];
    for &j in tail {
        let j = usize::try_from(j).ok().and_then(|j| j.checked_sub(1));
        match j {
            Some(j) if j < requests * m => bad[j / m] = Some(j % m),
            _ => return Err(Error::BadReply),
        }
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::policy;
    use std::string::ToString;

    fn args(cmd: &::redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                ::redis::Arg::Simple(b) => String::from_utf8(b.to_vec()).unwrap(),
                _ => String::from("<not a plain argument>"),
            })
            .collect()
    }

    #[test]
    fn check_cmd_carries_the_policys_keys_and_costs() {
        let p = policy();
        let (t0, t1) = (p.tiers()[0].quota(), p.tiers()[1].quota());
        let tiers: Vec<String> = std::vec![
            "2".into(),
            t0.emission_interval().to_string(),
            t0.span().to_string(),
            t0.scale().to_string(),
            t1.emission_interval().to_string(),
            t1.span().to_string(),
            t1.scale().to_string(),
        ];
        let (script, cmd) = p.check_cmd(&[("k1", Some("/a"), 1), ("k2", Some("/b"), 2)], &[]);
        let sha = check_script().get_hash();
        assert_eq!(script.get_hash(), sha);
        let mut want: Vec<String> = std::vec!["EVALSHA".into(), sha.into(), "4".into()];
        want.extend(p.keys("k1", Some("/a")).unwrap());
        want.extend(p.keys("k2", Some("/b")).unwrap());
        want.extend(tiers.iter().cloned());
        want.extend(["1".into(), "2".into()]);
        assert_eq!(args(&cmd), want);
        // Equal costs travel as one.
        let (_, cmd) = p.check_cmd(&[("k1", Some("/a"), 3), ("k1", Some("/a"), 3)], &[]);
        assert_eq!(args(&cmd).last().map(String::as_str), Some("3"));
        assert_eq!(args(&cmd).len(), 3 + 4 + tiers.len() + 1);
        // One request of a one-tier policy: the single script.
        let one = RedisPolicy::single("p", "t", Quota::per_second(10).at_hz(1)).unwrap();
        let q = one.tiers()[0].quota();
        let (script, cmd) = one.check_cmd(&[("k1", None, 2)], &[]);
        let sha = single_script().get_hash();
        assert_eq!(script.get_hash(), sha);
        let mut want: Vec<String> = std::vec!["EVALSHA".into(), sha.into(), "1".into()];
        want.extend(one.keys("k1", None).unwrap());
        want.extend([
            "2".into(),
            q.emission_interval().to_string(),
            q.span().to_string(),
            q.scale().to_string(),
        ]);
        assert_eq!(args(&cmd), want);
        assert!(p.validate("k1", Some("/a")).is_ok());
        assert!(matches!(p.validate("k1", None), Err(Error::ScopeMismatch)));
        assert!(matches!(
            p.validate("k{1", Some("/a")),
            Err(Error::InvalidKey)
        ));
    }

    #[test]
    fn decode_checks_matches_in_process_gcra() {
        let p = policy();
        let (q0, q1) = (p.tiers()[0].quota(), p.tiers()[1].quota());
        let mut out = Vec::new();
        // Request 1 admitted (both tiers ahead after it), request 2 denied
        // by the second tier only (values before it, as −1 − ahead).
        let reply = [
            5_000_000,
            100_000,
            12_000_000,
            -1 - 100_000,
            -1 - 60_000_000,
        ];
        let requests = [("k1", Some("/a"), 1), ("k1", Some("/b"), 1)];
        p.decode_checks(&reply, &requests, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        let out: Vec<Outcome> = out.into_iter().map(Result::unwrap).collect();
        let (a, b) = (cellrate::Gcra::new(q0), cellrate::Gcra::new(q1));
        assert_eq!(
            out[0].tiers().results(),
            &[a.check(5_000_000), b.check(5_000_000)]
        );
        assert_eq!(out[0].server_time(), Some(5_000_000));
        assert!(out[1].tiers().results()[0].is_ok());
        assert_eq!(
            out[1].tiers().results()[0],
            Ok(a.peek(5_000_000).to_decision())
        );
        for _ in 0..4 {
            b.check(5_000_000).unwrap();
        }
        assert_eq!(out[1].tiers().results()[1], b.check(5_000_000));
        // A key that holds no TAT (index 4: request 2, tier 2) fails that
        // request alone, naming the key.
        let mut out = Vec::new();
        let reply = [5_000_000, 100_000, 12_000_000, 0, 0, 4];
        p.decode_checks(&reply, &requests, &mut out).unwrap();
        assert!(out[0].as_ref().unwrap().tiers().is_admitted());
        assert!(
            matches!(&out[1], Err(Error::CorruptKey(k)) if k == "p:{k1}:e:/b"),
            "{:?}",
            out[1]
        );
        // Wrong length, mixed signs within a request, negative time, a bad
        // index out of range.
        let one = [("k1", Some("/a"), 1)];
        for bad in [
            &[1, 2][..],
            &[1, 2, -3],
            &[-1, 2, 3],
            &[1, 2, 3, 3],
            &[1, 2, 3, 0],
        ] {
            let r = p.decode_checks(bad, &one, &mut out);
            assert!(matches!(r, Err(Error::BadReply)), "{bad:?}");
        }
    }

    #[test]
    fn decode_matches_in_process_gcra() {
        let p = policy();
        let q0 = p.tiers()[0].quota();
        // Admitted: both tiers 100 ms / 12 s ahead after the request.
        let keys = p.keys("c", Some("/x")).unwrap();
        let (g, o) = p
            .decode(&[1, 5_000_000, 100_000, 0, 12_000_000, 0], &keys, 1)
            .unwrap();
        assert_eq!(g, 1);
        assert!(o.tiers().is_admitted());
        let local = cellrate::Gcra::new(q0);
        assert_eq!(o.tiers().results()[0], local.check(5_000_000));
        assert_eq!(o.server_time(), Some(5_000_000));
        // Denied by the second tier only: the first keeps a Decision.
        let (_, o) = p
            .decode(&[0, 9, 0, 0, 60_000_000, 12_000_000], &keys, 1)
            .unwrap();
        assert!(o.tiers().results()[0].is_ok());
        assert_eq!(o.tiers().denied().unwrap().retry_after(), Some(12_000_000));
        assert!(matches!(
            p.decode(&[1, 2, 3], &keys, 1),
            Err(Error::BadReply)
        ));
        assert!(matches!(
            p.decode(&[1, -2, 3, 4, 5, 6], &keys, 1),
            Err(Error::BadReply)
        ));
        assert!(matches!(
            p.decode(&[-1, 9, 2], &keys, 1),
            Err(Error::CorruptKey(k)) if k == keys[1]
        ));
        assert!(matches!(
            p.decode(&[-1, 9, 3], &keys, 1),
            Err(Error::BadReply)
        ));
    }
}
