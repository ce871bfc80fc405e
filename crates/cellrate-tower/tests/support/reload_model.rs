//! The reference model of a layer's reloads, shared by `tests/tower_reload.rs`
//! (in process) and `tests/tower_redis_reload.rs` (on Redis): the rules of
//! one reload, the TOML of their tiers, and GCRA as the definition states
//! it per (tier, client).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;

use cellrate_tower::RouteName;
use http::{Request, Response};
use proptest::prelude::*;
use tower::{Service, ServiceExt};

/// The quotas a run draws from: (rate, burst) per `unit` (`"s"`, `"h"`),
/// with `unit_len` the unit in the model's time unit; every emission
/// interval `unit_len / rate` is a whole number.
pub struct Quotas {
    pub table: [(u64, u64); 6],
    pub unit: &'static str,
    pub unit_len: u64,
}

impl Quotas {
    fn spec(&self, i: usize) -> String {
        let (rate, burst) = self.table[i];
        format!("{rate}/{}, burst {burst}", self.unit)
    }
    /// The burst of quota `i`.
    pub fn burst(&self, i: usize) -> u64 {
        self.table[i].1
    }
}

/// The rules of one reload: the "key" tier's default quota, client 0's
/// override in it, and whether an "extra" tier (with its quota) is there.
#[derive(Clone, Debug)]
pub struct Rules {
    pub default: usize,
    pub override0: Option<usize>,
    pub extra: Option<usize>,
}

impl Rules {
    /// The burst of the "key" tier as it applies to `client`: its
    /// override's, if it has one.
    pub fn key_burst(&self, q: &Quotas, client: u8) -> u64 {
        match (client, self.override0) {
            (0, Some(o)) => q.burst(o),
            _ => q.burst(self.default),
        }
    }
}

/// Any rules over a table of six quotas.
pub fn rules() -> impl Strategy<Value = Rules> {
    (
        0..6usize,
        prop::option::of(0..6usize),
        prop::option::of(0..6usize),
    )
        .prop_map(|(default, override0, extra)| Rules {
            default,
            override0,
            extra,
        })
}

/// The `[[tiers]]` of `r` in TOML (client `c0`'s override included).
pub fn tiers_toml(q: &Quotas, r: &Rules) -> String {
    let mut text = format!(
        "[[tiers]]\nname = \"key\"\nquota = \"{}\"\ncapacity = 64\nmax_overrides = 4\n",
        q.spec(r.default)
    );
    if let Some(o) = r.override0 {
        text += &format!("overrides = {{ c0 = \"{}\" }}\n", q.spec(o));
    }
    if let Some(e) = r.extra {
        text += &format!(
            "[[tiers]]\nname = \"extra\"\nquota = \"{}\"\ncapacity = 64\n",
            q.spec(e)
        );
    }
    text
}

/// The reference: GCRA as the definition states it, per (tier, client). A
/// request of cost 1 at `now` conforms iff `max(tat, now) − now ≤ τ =
/// (burst − 1)·T` in every tier in force; then each sets
/// `tat = max(tat, now) + T`. A tier that is removed loses its clients'
/// TATs if `forgets_removed` (an in-process table is dropped), else keeps
/// them (on Redis they stay on the server under the tier's name). A
/// `translating` model (Redis) keeps with each TAT the quota it was
/// written under and, when a check finds another in force, keeps the cells
/// used instead of the time: a debt `d` of interval `T` becomes
/// `min(⌈d·T′/T⌉, b′·T′)` (docs/design/reconfigure.md).
pub struct Model {
    quotas: &'static Quotas,
    forgets_removed: bool,
    translating: bool,
    /// tier name → client → (TAT, the (interval, burst) it was written under).
    tat: BTreeMap<&'static str, BTreeMap<u8, Written>>,
}

/// A TAT and the (interval, burst) it was written under.
type Written = (u64, (u64, u64));

impl Model {
    pub fn new(quotas: &'static Quotas, forgets_removed: bool) -> Self {
        Model {
            quotas,
            forgets_removed,
            translating: false,
            tat: BTreeMap::new(),
        }
    }
    /// A model that keeps the cells used across a change of quota, as the
    /// Redis backend does (the time here is constant).
    #[allow(dead_code)]
    pub fn translating(quotas: &'static Quotas, forgets_removed: bool) -> Self {
        Model {
            translating: true,
            ..Model::new(quotas, forgets_removed)
        }
    }
    fn quota(&self, r: &Rules, tier: &str, client: u8) -> (u64, u64) {
        let i = match (tier, client, r.override0) {
            ("key", 0, Some(o)) => o,
            ("key", _, _) => r.default,
            _ => r.extra.unwrap(),
        };
        let (rate, burst) = self.quotas.table[i];
        (self.quotas.unit_len / rate, burst)
    }
    fn tiers(r: &Rules) -> Vec<&'static str> {
        let mut t = vec!["key"];
        if r.extra.is_some() {
            t.push("extra");
        }
        t
    }
    /// The rules `r` are now in force.
    pub fn reload(&mut self, r: &Rules) {
        if self.forgets_removed && r.extra.is_none() {
            self.tat.remove("extra");
        }
    }
    /// The rules `new` replace `old` at `now`, and every client of a kept
    /// tier keeps the cells it has used: a debt `d` under the emission
    /// interval `T` becomes `min(⌈d·T′/T⌉, b′·T′)` under the new quota.
    pub fn reload_keeping_cells_used(&mut self, old: &Rules, new: &Rules, now: u64) {
        self.reload(new);
        let kept: Vec<&'static str> = Self::tiers(old)
            .into_iter()
            .filter(|t| Self::tiers(new).contains(t))
            .collect();
        for tier in kept {
            let clients: Vec<u8> = self
                .tat
                .get(tier)
                .map_or(Vec::new(), |m| m.keys().copied().collect());
            for client in clients {
                let (t, _) = self.quota(old, tier, client);
                let (t2, b2) = self.quota(new, tier, client);
                let tat = self.tat.get_mut(tier).and_then(|m| m.get_mut(&client));
                if let Some(written) = tat {
                    let debt = written.0.saturating_sub(now);
                    *written = (now + (debt * t2).div_ceil(t).min(b2 * t2), (t2, b2));
                }
            }
        }
    }
    /// Whether one request of `client` at `now` under `r` is admitted.
    pub fn check(&mut self, r: &Rules, client: u8, now: u64) -> bool {
        let tiers = Self::tiers(r);
        if self.translating {
            for t in &tiers {
                let (interval, burst) = self.quota(r, t, client);
                if let Some(e) = self.tat.get_mut(t).and_then(|m| m.get_mut(&client)) {
                    let (tat, (old_interval, _)) = *e;
                    if e.1 != (interval, burst) && tat > now {
                        let cells =
                            ((tat - now) as u128 * interval as u128).div_ceil(old_interval as u128);
                        *e = (
                            now + cells.min((burst * interval) as u128) as u64,
                            (interval, burst),
                        );
                    }
                }
            }
        }
        let conforms = tiers.iter().all(|t| {
            let (interval, burst) = self.quota(r, t, client);
            let tat = self.tat.get(t).and_then(|m| m.get(&client)).map(|e| e.0);
            tat.unwrap_or(now).max(now) - now <= (burst - 1) * interval
        });
        if conforms {
            for t in tiers {
                let q = self.quota(r, t, client);
                let entry = self
                    .tat
                    .entry(t)
                    .or_default()
                    .entry(client)
                    .or_insert((now, q));
                *entry = (entry.0.max(now) + q.0, q);
            }
        }
        conforms
    }
}

/// One request of client `key` through `svc` (on route `/`).
pub async fn call<S>(svc: &mut S, key: &str) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut req = Request::builder()
        .header("x-api-key", key)
        .body(String::new())
        .unwrap();
    req.extensions_mut().insert(RouteName("/"));
    svc.ready().await.unwrap().call(req).await.unwrap()
}

/// How many requests of `client` in a row `svc` admits now (the clock
/// does not move): its allowance, used up.
pub async fn allowance<S>(svc: &mut S, client: &str) -> u64
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut n = 0;
    while n < 1_000 && call(svc, client).await.status() == http::StatusCode::OK {
        n += 1;
    }
    n
}

/// A service that answers 200.
pub fn ok_service(
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
       + Clone
       + Send {
    tower::service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("ok")))
    })
}
