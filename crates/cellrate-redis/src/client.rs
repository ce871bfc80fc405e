//! What the blocking and the async client share: the policy, the failure
//! policy in force, the tiers' bases the fleet recorded, the checks a
//! request passes before any round trip, and a call's deadline. Each
//! client adds only its connections and I/O.
//!
//! **Bases.** A tier's *base* is the parameters its name (and scope) first
//! had with its algorithm under the prefix; the scripts read an untagged
//! state as written under it. The fleet records it on the server, in the
//! hash `<prefix>:bases` (every client key holds a `{`; one key, so one
//! node of a Cluster), field `c:<kind>:<tier>` (`s:…` per scope), value
//! `<a>:<b>:<c>` (the script arguments), kept without expiry. Before its
//! first script call, and its first after each failure of the connection
//! (the server may have restarted empty), a limiter records each tier's
//! base there if none is (`HSETNX`: the first parameters of its line, or
//! the base it learned) and learns the recorded one: one round trip (none
//! for a `with_policy` limiter whose tiers its limiter learned). No script
//! runs before that, so no state is read under a base the fleet did not
//! agree on.

use std::string::{String, ToString};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::vec::Vec;

use super::{Degrade, Error, FailurePolicy, Outcome, RedisConfig, RedisPolicy, Source};

/// A request of a batch: `(client, scope, cost)`.
pub(crate) type Check<'a> = (&'a str, Option<&'a str>, u64);

/// A client's policy and failure policy.
pub(crate) struct Limits {
    pub(crate) policy: RedisPolicy,
    pub(crate) degrade: Degrade,
    /// Per tier, the base this limiter records when the fleet has none:
    /// the parameters its name (and scope) first had with its algorithm in
    /// this limiter's line (the limiter it was made from by `with_policy`,
    /// and so on, or the base that one learned).
    firsts: Vec<Origin>,
    /// The first parameters of every tier (name, scope and algorithm) the
    /// line has had under this prefix, removed ones included.
    origins: Vec<Origin>,
    /// What the fleet recorded, once learned, and the connection failures
    /// there had been then (`Backoff::failures`).
    learned: Mutex<Option<(u64, Arc<Learned>)>>,
}

/// The bases the fleet recorded for a limiter's tiers.
#[derive(Debug)]
pub(crate) struct Learned {
    /// Per tier, its recorded base.
    recorded: Vec<Origin>,
    /// Per tier, its recorded base's parameters when they differ from the
    /// tier's own (`None` otherwise). The scripts read an untagged value
    /// as written under the base, and write a tagged one only while a tier
    /// runs on other parameters than its base.
    bases: Vec<Option<[u64; 3]>>,
}

impl Learned {
    /// What `policy`'s tiers read under, given their recorded bases.
    fn new(policy: &RedisPolicy, recorded: Vec<Origin>) -> Self {
        let bases = policy.tiers().iter().zip(&recorded);
        let bases = bases.map(|(t, r)| (r.3 != t.script_args().1).then_some(r.3));
        Learned {
            bases: bases.collect(),
            recorded,
        }
    }

    /// Per tier, the parameters an untagged state was written under when
    /// they are not the tier's own (the scripts' `bases`).
    pub(crate) fn bases(&self) -> &Bases {
        &self.bases
    }
}

/// The script that records each tier's base unless one is, and answers
/// the recorded ones: `KEYS[1]` the hash, `ARGV` pairs of field and value.
const RECORD: &str = "local out = {}
for i = 1, #ARGV, 2 do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
  out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i])
end
return out";

/// The hash holding the recorded bases of the tiers under `prefix`.
pub(crate) fn bases_key(prefix: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + 6);
    key.push_str(prefix);
    key.push_str(":bases");
    key
}

/// A tier's field in that hash: its scope, algorithm and name.
fn field(o: &Origin) -> String {
    let scope = if o.1 { 's' } else { 'c' };
    std::format!("{scope}:{}:{}", o.2, o.0)
}

/// A base as its recorded value, `<a>:<b>:<c>`.
fn value(o: &Origin) -> String {
    let [a, b, c] = o.3;
    std::format!("{a}:{b}:{c}")
}

/// A recorded value's parameters; `None` if it is not one.
fn parse(v: &str) -> Option<[u64; 3]> {
    let mut n = v.split(':').map(|p| p.parse::<u64>().ok());
    let parsed = [n.next()??, n.next()??, n.next()??];
    n.next().is_none().then_some(parsed)
}

/// Whether `a` and `b` are one tier's (name, scope, algorithm).
fn same_tier(a: &Origin, b: &Origin) -> bool {
    a.0 == b.0 && a.1 == b.1 && a.2 == b.2
}

/// Per tier, the parameters an untagged state was written under when they
/// are not the tier's own (the scripts' `bases`).
pub(crate) type Bases = [Option<[u64; 3]>];

/// A tier's name, whether it counts per scope, its kind code and its three
/// parameters (`RedisTier::script_args`).
type Origin = (String, bool, u64, [u64; 3]);

/// What a tier is, as an origin.
fn origin_of(tier: &super::RedisTier) -> Origin {
    let (kind, args) = tier.script_args();
    (tier.name().into(), tier.is_per_scope(), kind, args)
}

impl Limits {
    pub(crate) fn new(policy: RedisPolicy, config: RedisConfig) -> Result<Self, Error> {
        let degrade = Degrade::new(config, &policy)?;
        let origins: Vec<Origin> = policy.tiers().iter().map(origin_of).collect();
        Ok(Limits {
            policy,
            degrade,
            firsts: origins.clone(),
            origins,
            learned: Mutex::new(None),
        })
    }

    /// These limits reconfigured to `policy` and `failure` (the other
    /// settings kept), carrying the fallback tables of the tiers kept.
    pub(crate) fn with_policy(
        &self,
        policy: RedisPolicy,
        failure: FailurePolicy,
    ) -> Result<Self, Error> {
        let mut config = self.config().clone();
        config.failure = failure;
        let degrade = Degrade::carried(config, &policy, &self.degrade, &self.policy)?;
        // Another prefix names other keys: the line starts again.
        let mut origins = if policy.prefix() == self.policy.prefix() {
            let mut origins = self.origins.clone();
            // What the fleet recorded stands for what this line had.
            for r in self.known().iter().flat_map(|l| &l.recorded) {
                if let Some(o) = origins.iter_mut().find(|o| same_tier(o, r)) {
                    *o = r.clone();
                }
            }
            origins
        } else {
            Vec::new()
        };
        let mut firsts = Vec::with_capacity(policy.tiers().len());
        for t in policy.tiers() {
            let own = origin_of(t);
            match origins.iter().find(|o| same_tier(o, &own)) {
                Some(o) => firsts.push(o.clone()),
                None => {
                    origins.push(own.clone());
                    firsts.push(own);
                }
            }
        }
        // When this limiter learned the record of every tier kept, the new
        // one knows its bases as this one does: no round trip.
        let learned = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        let inherited = learned.as_ref().and_then(|(at, l)| {
            let recorded = policy.tiers().iter().map(|t| {
                let own = origin_of(t);
                l.recorded.iter().find(|r| same_tier(r, &own)).cloned()
            });
            let recorded = recorded.collect::<Option<Vec<Origin>>>()?;
            (policy.prefix() == self.policy.prefix())
                .then(|| (*at, Arc::new(Learned::new(&policy, recorded))))
        });
        drop(learned);
        Ok(Limits {
            policy,
            degrade,
            firsts,
            origins,
            learned: Mutex::new(inherited),
        })
    }

    /// What this limiter learned last, if anything.
    fn known(&self) -> Option<Arc<Learned>> {
        let learned = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        learned.as_ref().map(|(_, l)| Arc::clone(l))
    }

    /// The fleet's record as learned with no connection failure since
    /// (`failures` failures so far); `None` when it must be learned
    /// ([`learn`](Self::learn)) before a script runs.
    pub(crate) fn bases(&self, failures: u64) -> Option<Arc<Learned>> {
        let learned = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        match &*learned {
            Some((at, l)) if *at == failures => Some(Arc::clone(l)),
            _ => None,
        }
    }

    /// The call that records this limiter's bases where the fleet has none
    /// (those it learned, else its line's first) and answers the recorded
    /// ones (one key: a Cluster sends it to the node that owns it).
    pub(crate) fn record_cmd(&self) -> ::redis::Cmd {
        let mut cmd = ::redis::cmd("EVAL");
        cmd.arg(RECORD).arg(1).arg(bases_key(self.policy.prefix()));
        let known = self.known();
        let ours = known.as_ref().map_or(&self.firsts, |l| &l.recorded);
        for o in ours {
            cmd.arg(field(o)).arg(value(o));
        }
        cmd
    }

    /// Takes the recorded bases, the reply to [`record_cmd`](Self::record_cmd)
    /// sent with `failures` connection failures so far: a tier whose
    /// recorded base is not its own parameters reads untagged states under
    /// it (and writes tagged ones). The bases from then on.
    pub(crate) fn learn(&self, reply: &[String], failures: u64) -> Result<Arc<Learned>, Error> {
        if reply.len() != self.firsts.len() {
            return Err(Error::BadReply);
        }
        let mut recorded = Vec::with_capacity(reply.len());
        for (v, first) in reply.iter().zip(&self.firsts) {
            let args =
                parse(v).ok_or_else(|| Error::CorruptKey(bases_key(self.policy.prefix())))?;
            recorded.push((first.0.to_string(), first.1, first.2, args));
        }
        let learned = Arc::new(Learned::new(&self.policy, recorded));
        *self.learned.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((failures, Arc::clone(&learned)));
        Ok(learned)
    }

    pub(crate) fn config(&self) -> &RedisConfig {
        self.degrade.config()
    }

    /// The longest a call may take: the timeout, capped at a year so that
    /// adding it to a clock reading cannot overflow.
    pub(crate) fn timeout(&self) -> Duration {
        self.config().timeout.min(Duration::from_secs(86_400 * 365))
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn register_fallback_metrics(&self, limiter: &str) {
        self.degrade.register_metrics(limiter, &self.policy);
    }

    /// What a request gets without a round trip: a key error, or the denial
    /// of a cost that can never fit; `None` when Redis must decide it.
    pub(crate) fn precheck(
        &self,
        client: &str,
        scope: Option<&str>,
        cost: u64,
    ) -> Result<Option<Outcome>, Error> {
        self.policy.validate(client, scope)?;
        Ok(self
            .policy
            .too_large(cost)
            .map(|d| Outcome::of(&std::vec![Err(d); self.policy.tiers().len()], Source::Redis)))
    }

    /// A batch's outcomes: each request's [`precheck`](Self::precheck)
    /// answer, the others from `decide` (given them in order, answering
    /// one outcome each, in order).
    pub(crate) fn batch(
        &self,
        requests: &[Check<'_>],
        decide: impl FnOnce(&[Check<'_>], &mut Vec<Result<Outcome, Error>>) -> Result<(), Error>,
    ) -> Result<Vec<Result<Outcome, Error>>, Error> {
        let mut remote = Vec::with_capacity(requests.len());
        let mut local = Vec::with_capacity(requests.len());
        for &(client, scope, cost) in requests {
            let early = self.precheck(client, scope, cost)?;
            if early.is_none() {
                remote.push((client, scope, cost));
            }
            local.push(early.map(Ok));
        }
        let mut decided = Vec::with_capacity(remote.len());
        if !remote.is_empty() {
            decide(&remote, &mut decided)?;
        }
        let mut decided = decided.into_iter();
        local
            .into_iter()
            .map(|slot| slot.or_else(|| decided.next()).ok_or(Error::BadReply))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisTier;
    use cellrate::Quota;

    fn limits(burst: u64) -> Limits {
        let quota = Quota::per_second(10).with_burst(burst).at_hz(1_000);
        let policy = RedisPolicy::single("rl", "api", quota).unwrap();
        Limits::new(policy, RedisConfig::new(FailurePolicy::Closed)).unwrap()
    }

    /// The values `l` records.
    fn recorded(l: &Limits) -> Vec<String> {
        let known = l.known();
        let ours = known.as_ref().map_or(&l.firsts, |k| &k.recorded);
        ours.iter().map(value).collect()
    }

    #[test]
    fn a_limiter_reads_untagged_states_under_the_recorded_base() {
        let (old, fresh) = (limits(5), limits(9));
        assert!(fresh.bases(0).is_none());
        let base = old.policy.tiers()[0].script_args().1;
        assert_eq!(
            fresh.learn(&recorded(&old), 0).unwrap().bases(),
            [Some(base)]
        );
        assert_eq!(fresh.bases(0).unwrap().bases(), [Some(base)]);
        // After a connection failure it learns again, recording what it knows.
        assert!(fresh.bases(1).is_none());
        assert_eq!(recorded(&fresh), recorded(&old));
        // Its own parameters recorded: untagged states are its own.
        let own = limits(9);
        assert_eq!(own.learn(&recorded(&own), 0).unwrap().bases(), [None]);
    }

    #[test]
    fn a_reload_records_the_base_its_limiter_learned() {
        let (old, fresh) = (limits(5), limits(9));
        let reloaded = |l: &Limits| {
            let quota = Quota::per_second(10).with_burst(20).at_hz(1_000);
            let policy = RedisPolicy::single("rl", "api", quota).unwrap();
            l.with_policy(policy, FailurePolicy::Closed).unwrap()
        };
        // Before learning: the line's first parameters.
        assert_eq!(recorded(&reloaded(&fresh)), recorded(&fresh));
        fresh.learn(&recorded(&old), 0).unwrap();
        let after = reloaded(&fresh);
        assert_eq!(recorded(&after), recorded(&old));
        // Its tiers' records learned: no round trip until a failure.
        let base = old.policy.tiers()[0].script_args().1;
        assert_eq!(after.bases(0).unwrap().bases(), [Some(base)]);
        assert!(after.bases(1).is_none());
        let again = after.learn(&recorded(&old), 1).unwrap();
        assert_eq!(again.bases(), [Some(base)]);
        // A tier it has not learned: the new limiter learns first.
        let two = RedisPolicy::new(
            "rl",
            std::vec![
                RedisTier::new("api", Quota::per_second(10).with_burst(5).at_hz(1_000)).unwrap(),
                RedisTier::new("day", Quota::per_day(10).at_hz(1_000)).unwrap(),
            ],
        )
        .unwrap();
        let added = fresh.with_policy(two, FailurePolicy::Closed).unwrap();
        assert!(added.bases(0).is_none());
        let learned = added.learn(&recorded(&added), 0).unwrap();
        assert_eq!(learned.bases(), [None, None]);
    }

    #[test]
    fn each_algorithm_and_scope_has_its_own_field() {
        let c = cellrate::compose::LimiterConfig::new(
            cellrate::compose::AlgorithmKind::FixedWindow,
            5,
            1_000,
            1_000,
        );
        let tiers = [
            RedisTier::new("api", Quota::per_second(1).at_hz(1)).unwrap(),
            RedisTier::from_config("api", &c).unwrap(),
            RedisTier::from_config("api", &c).unwrap().per_scope(),
        ];
        let fields: Vec<String> = tiers.iter().map(|t| field(&origin_of(t))).collect();
        assert_eq!(fields[0][..2], *"c:");
        assert_eq!(fields[2][..2], *"s:");
        assert!(fields.iter().all(|f| f.ends_with(":api")));
        assert!(fields[0] != fields[1] && fields[1] != fields[2]);
    }

    #[test]
    fn a_record_that_is_no_base_is_an_error() {
        let l = limits(5);
        for bad in ["", "1:2", "1:2:x", "1:2:3:4", "-1:2:3"] {
            let e = l.learn(&[bad.into()], 0).unwrap_err();
            assert!(
                matches!(e, Error::CorruptKey(ref k) if k == "rl:bases"),
                "{bad}"
            );
        }
        assert!(matches!(l.learn(&[], 0), Err(Error::BadReply)));
        assert!(l.bases(0).is_none());
    }

    #[test]
    fn the_record_is_no_clients_key() {
        let l = limits(5);
        let key = bases_key(l.policy.prefix());
        assert!(!key.contains('{'));
        // Every client key has the client's hash tag.
        for client in ["", "bases", "x"] {
            assert!(l.policy.keys(client, None).unwrap()[0].contains(":{"));
        }
    }
}
