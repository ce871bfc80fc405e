//! Checking a configuration's tiers into plans: each tier's table, kept
//! from the rules in force or new, with its quotas at the table's scale.
//! Nothing in force changes until a plan is committed.

use std::sync::Arc;

use super::{KeySource, LayerConfig, QuotaSpec, TierScope, DEFAULT_MAX_OVERRIDES, MAX_OVERRIDES};
use crate::backend::keyed::{Epoch, Probe, TierQuota, TierTable};
use crate::{KeyedTiers, Part};
use cellrate_config::ConfigError as Error;

/// The configuration a layer was built from (and reloaded to), and the
/// frequency of its clock that every quota of it is read at; what the
/// reloader keeps between reloads.
pub(crate) struct Applied {
    /// The rules in force: the last configuration applied, with the
    /// overrides set at run time laid over it.
    pub(crate) config: LayerConfig,
    pub(crate) hz: u64,
    /// The overrides set at run time, by tier and client.
    pub(crate) runtime:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, QuotaSpec>>,
    /// The generation of the rules in force (the layer's first are 0).
    pub(crate) generation: u64,
    /// The rules a reload replaced, by generation, while a request may
    /// still read them.
    pub(crate) retired: Vec<(u64, std::sync::Weak<dyn std::any::Any + Send + Sync>)>,
}

impl Applied {
    pub(crate) fn new(config: LayerConfig, hz: u64) -> Self {
        Applied {
            config,
            hz,
            runtime: Default::default(),
            generation: 0,
            retired: Vec::new(),
        }
    }
    /// The generation in force and the oldest some request may still read
    /// (the replaced rules no request reads any more are forgotten).
    pub(crate) fn epoch(&mut self) -> Epoch {
        self.retired.retain(|(_, rules)| rules.strong_count() > 0);
        let oldest = self.retired.iter().map(|&(g, _)| g).min();
        Epoch {
            current: self.generation,
            oldest: oldest.map_or(self.generation, |g| g.min(self.generation)),
        }
    }
    /// The rules of the generation in force were replaced by the next.
    pub(crate) fn retire(&mut self, rules: std::sync::Weak<dyn std::any::Any + Send + Sync>) {
        self.retired.push((self.generation, rules));
        self.generation += 1;
    }
}

/// An override placed: `(slot, client id, quota)`.
type Placed = (usize, u64, TierQuota);

/// A GCRA tier's table.
type GcraTable =
    cellrate::keyed::KeyedBox<cellrate::keyed::LiveQuota, crate::backend::keyed::LiveOverrides>;

/// A tier table, kept from the rules in force or new.
pub(crate) enum Planned {
    Kept(Arc<crate::backend::keyed::KeyedTier>),
    New(std::boxed::Box<crate::backend::keyed::KeyedTier>),
}

impl Planned {
    fn tier(&self) -> &crate::backend::keyed::KeyedTier {
        match self {
            Planned::Kept(t) => t,
            Planned::New(t) => t,
        }
    }
}

/// One tier of a checked configuration, its quotas at its table's scale,
/// each override placed in its slot.
pub(crate) struct TierPlan {
    tier: Planned,
    default: TierQuota,
    /// `(slot, client id, quota)`, each quota of the tier's kind.
    overrides: Vec<Placed>,
    /// The generation of the rules in force, which the committed rules
    /// replace.
    epoch: Epoch,
}

impl TierPlan {
    /// What the tier announces once committed.
    pub(crate) fn info(&self) -> crate::TierInfo {
        self.default.info(&self.tier.tier().name)
    }
    /// What each of its override slots will give its client.
    pub(crate) fn override_infos(&self) -> Vec<Option<crate::TierInfo>> {
        let mut infos = vec![None; self.tier.tier().override_capacity()];
        for &(slot, _, q) in &self.overrides {
            if let Some(info) = infos.get_mut(slot) {
                *info = Some(q.info(&self.tier.tier().name));
            }
        }
        infos
    }
    /// Sets the tier's quotas (each switches on its own, whole; a store
    /// tier's clients re-expressed at `now` as it switches) and hands its
    /// table on.
    pub(crate) fn commit(self, now: u64) -> Arc<crate::backend::keyed::KeyedTier> {
        let tier = match self.tier {
            Planned::Kept(t) => t,
            Planned::New(t) => Arc::from(t),
        };
        tier.apply(self.default, &self.overrides, self.epoch, now);
        tier
    }
}

impl KeyedTiers {
    /// The tiers of committed `plans` (every quota set at `now`), with
    /// `routes`.
    pub(crate) fn committed(
        plans: Vec<TierPlan>,
        when_full: cellrate::keyed::WhenFull,
        routes: Option<crate::backend::keyed::Routes>,
        now: u64,
    ) -> Self {
        let probes: Vec<Probe> = plans
            .iter()
            .map(|p| Probe::new(p.default, p.overrides.iter().map(|&(_, _, q)| q)))
            .collect();
        KeyedTiers {
            tiers: plans.into_iter().map(|p| p.commit(now)).collect(),
            when_full,
            routes,
            overridden: probes.iter().any(|p| *p != Probe::None),
            probes,
            #[cfg(feature = "metrics")]
            metrics: Vec::new(),
        }
    }
}

impl LayerConfig {
    /// Which tiers decide which route, checked: `None` when no tier is
    /// limited to some routes. Each route list names at least one route,
    /// each a matched route (`/orders/{id}`) read as `key.endpoint =
    /// "route"` reads it, and some tier (limited to no route) decides every
    /// request.
    pub(crate) fn routes(&self) -> Result<Option<crate::backend::keyed::Routes>, Error> {
        if self.tiers.iter().all(|t| t.routes.is_none()) {
            return Ok(None);
        }
        for (i, t) in self.tiers.iter().enumerate() {
            let Some(routes) = &t.routes else { continue };
            let place = format!("tiers[{i}].routes");
            if self.key.endpoint != Some(KeySource::Route) {
                return Err(Error::new(
                    place,
                    "a tier limited to some routes needs key.endpoint = \"route\"",
                ));
            }
            if routes.is_empty() {
                return Err(Error::new(
                    place,
                    "names no route: leave it out for every route",
                ));
            }
            for (j, r) in routes.iter().enumerate() {
                if r.is_empty() || r.len() > crate::MAX_KEY_LEN || !r.starts_with('/') {
                    return Err(Error::new(
                        format!("{place}[{j}]"),
                        format_args!(
                            "a route is a matched path such as \"/orders/{{id}}\", 1 to {} bytes",
                            crate::MAX_KEY_LEN
                        ),
                    ));
                }
                if routes[..j].contains(r) {
                    return Err(Error::new(
                        format!("{place}[{j}]"),
                        format_args!("route {r:?} is named twice"),
                    ));
                }
            }
        }
        if self.tiers.iter().all(|t| t.routes.is_some()) {
            return Err(Error::new(
                "tiers",
                "every tier is limited to some routes: the others would pass unlimited; \
                 give one tier no routes, or limit only those routes' layer",
            ));
        }
        let lists: Vec<Option<&[String]>> =
            self.tiers.iter().map(|t| t.routes.as_deref()).collect();
        Ok(Some(crate::backend::keyed::Routes::new(&lists)))
    }

    /// Every tier checked and made ready at `hz`: a tier of `old` with the
    /// same name keeps its table (its scope, capacity and override slots
    /// must then be the same), the others get new tables; the overrides
    /// are placed in slots as `epoch` allows. Nothing in `old` changes until
    /// the plans are committed.
    pub(crate) fn plan_tiers(
        &self,
        hz: u64,
        old: Option<&KeyedTiers>,
        epoch: Epoch,
    ) -> Result<Vec<TierPlan>, Error> {
        if self.tiers.len() > crate::MAX_TIERS {
            return Err(Error::new("tiers", crate::BuildError::TooManyTiers));
        }
        let mut plans = Vec::with_capacity(self.tiers.len());
        for (i, t) in self.tiers.iter().enumerate() {
            let place = |field: &str| format!("tiers[{i}].{field}");
            let kind = self.tier_algorithm(i)?;
            let quota = self.in_process_quota(i, kind, self.tier_quota(i, hz)?, &place("quota"))?;
            crate::error::check_name(&t.name).map_err(|e| Error::new(place("name"), e))?;
            // A size no allocator grants is an error here, not an abort.
            cellrate_config::check_capacity(t.capacity)
                .map_err(|e| Error::new(place("capacity"), e.message()))?;
            let max_overrides = self.check_overrides(i)?;
            let scope = match t.scope {
                TierScope::Client => crate::backend::keyed::Scope::Client,
                TierScope::ClientAndEndpoint => crate::backend::keyed::Scope::ClientAndEndpoint,
            };
            let existing = old.and_then(|o| o.tiers.iter().find(|k| k.name == t.name));
            let tier = match existing {
                Some(k) => {
                    let fixed = |field: &str| {
                        Error::new(
                            place(field),
                            format_args!(
                                "fixed while tier {:?} lives (its table keeps every client's state): \
                                 give the tier a new name to make a new table",
                                t.name
                            ),
                        )
                    };
                    if !same_table_kind(&k.quota(), &quota) {
                        return Err(fixed("algorithm"));
                    }
                    if k.scope != scope {
                        return Err(fixed("scope"));
                    }
                    if k.table.capacity() != t.capacity {
                        return Err(fixed("capacity"));
                    }
                    if k.override_capacity() != max_overrides {
                        return Err(fixed("max_overrides"));
                    }
                    Planned::Kept(Arc::clone(k))
                }
                None => Planned::New(std::boxed::Box::new(crate::backend::keyed::KeyedTier::new(
                    &t.name,
                    quota,
                    t.capacity,
                    max_overrides,
                    scope,
                    self.when_full,
                ))),
            };
            let (default, overrides) = match (quota, &tier.tier().table) {
                (TierQuota::Gcra(quota), TierTable::Gcra(table)) => {
                    self.gcra_overrides(i, kind, quota, table, hz, epoch)?
                }
                (quota, TierTable::Store(store)) => {
                    self.store_overrides(i, kind, quota, store, hz, epoch)?
                }
                // `same_table_kind` keeps a table only for its own kind.
                _ => return Err(Error::new(place("algorithm"), "not of the tier's kind")),
            };
            plans.push(TierPlan {
                tier,
                default,
                overrides,
                epoch,
            });
        }
        Ok(plans)
    }

    /// A GCRA tier's default quota and overrides, every quota at the
    /// table's scale (that of the quota it was made with), rounded toward
    /// admitting less and refused past 1 %, each override in its slot.
    fn gcra_overrides(
        &self,
        i: usize,
        kind: cellrate::compose::AlgorithmKind,
        quota: cellrate::Quota,
        table: &GcraTable,
        hz: u64,
        epoch: Epoch,
    ) -> Result<(TierQuota, Vec<Placed>), Error> {
        let fixed = table.algorithm().quota();
        let rescale = |q: cellrate::Quota, place: &str| {
            q.rescaled(fixed.scale(), fixed.hz())
                .map_err(|e| Error::new(place, e))
        };
        let default = rescale(quota, &format!("tiers[{i}].quota"))?;
        let mut placed = Vec::with_capacity(self.tiers[i].overrides.len());
        for (client, spec) in &self.tiers[i].overrides {
            let at = format!("tiers[{i}].overrides.{client}");
            let q = self.in_process_quota(i, kind, self.override_quota(spec, hz, &at)?, &at)?;
            let TierQuota::Gcra(own) = q else {
                continue; // a GCRA-family tier's overrides are of its family
            };
            let id = self.client_id(table, client, &at)?.get();
            placed.push((id, TierQuota::Gcra(rescale(own, &at)?)));
        }
        let overrides = self.place(i, table.overrides(), placed, epoch)?;
        Ok((TierQuota::Gcra(default), overrides))
    }

    /// A store tier's default quota and overrides, each override in its
    /// slot.
    fn store_overrides(
        &self,
        i: usize,
        kind: cellrate::compose::AlgorithmKind,
        quota: TierQuota,
        store: &crate::backend::keyed::Store,
        hz: u64,
        epoch: Epoch,
    ) -> Result<(TierQuota, Vec<Placed>), Error> {
        let mut placed = Vec::with_capacity(self.tiers[i].overrides.len());
        for (client, spec) in &self.tiers[i].overrides {
            let at = format!("tiers[{i}].overrides.{client}");
            let q = self.in_process_quota(i, kind, self.override_quota(spec, hz, &at)?, &at)?;
            let id = store.client_id(&self.client_part(client, &at)?);
            placed.push((id, q));
        }
        let overrides = self.place(i, store.slots(), placed, epoch)?;
        Ok((quota, overrides))
    }

    /// Tier `i`'s overrides `(client id, quota)`, in the configuration's
    /// client order, each placed in a slot of `slots` as `epoch` allows.
    fn place<Q>(
        &self,
        i: usize,
        slots: &crate::backend::keyed::OverrideSlots<Q>,
        placed: Vec<(u64, TierQuota)>,
        epoch: Epoch,
    ) -> Result<Vec<Placed>, Error> {
        let ids: Vec<u64> = placed.iter().map(|&(id, _)| id).collect();
        let taken = slots.assign(&ids, epoch).map_err(|n| {
            let t = &self.tiers[i];
            let client = t.overrides.keys().nth(n).map_or("", String::as_str);
            Error::new(
                format!("tiers[{i}].overrides.{client}"),
                format_args!(
                    "every one of the tier's {} override slots is taken \
                     (a slot freed by this reload, or still read by requests decided \
                     before it, is free for the next): remove an override first, or \
                     raise max_overrides under a new tier name",
                    slots.capacity()
                ),
            )
        })?;
        Ok(taken
            .into_iter()
            .zip(placed)
            .map(|(slot, (id, q))| (slot, id, q))
            .collect())
    }

    /// The table's id of the client named `client` (as the layer's client
    /// extractor reads it from a request).
    pub(super) fn client_id(
        &self,
        table: &GcraTable,
        client: &str,
        place: &str,
    ) -> Result<cellrate::keyed::KeyId, Error> {
        Ok(table.key_id(&cellrate::keyed::Hashed(self.client_part(client, place)?)))
    }

    /// The key part of the client named `client` in an override at `place`,
    /// as the layer's client extractor reads it from a request.
    pub(super) fn client_part<'a>(&self, client: &'a str, place: &str) -> Result<Part<'a>, Error> {
        match self.key.client {
            KeySource::PeerIp => {
                let ip: std::net::IpAddr = client.parse().map_err(|_| {
                    Error::new(
                        place,
                        "key.client is peer_ip: an override names an IP address",
                    )
                })?;
                Ok(Part::Ip(ip))
            }
            KeySource::Header(_) | KeySource::Route => {
                if client.is_empty() || client.len() > crate::MAX_KEY_LEN {
                    return Err(Error::new(
                        place,
                        format_args!("a client key is 1 to {} bytes", crate::MAX_KEY_LEN),
                    ));
                }
                Ok(Part::Str(client))
            }
        }
    }

    /// Tier `i`'s override count and scope checked: its `max_overrides`.
    pub(super) fn check_overrides(&self, i: usize) -> Result<usize, Error> {
        let t = &self.tiers[i];
        let place = |field: &str| format!("tiers[{i}].{field}");
        let max_overrides = t.max_overrides.unwrap_or(DEFAULT_MAX_OVERRIDES);
        if max_overrides > MAX_OVERRIDES {
            return Err(Error::new(
                place("max_overrides"),
                format_args!("at most {MAX_OVERRIDES}"),
            ));
        }
        if t.overrides.len() > max_overrides {
            return Err(Error::new(
                place("overrides"),
                format_args!(
                    "{} overrides, more than max_overrides ({max_overrides})",
                    t.overrides.len()
                ),
            ));
        }
        Ok(max_overrides)
    }

    /// The override of `client` at `at` at `hz`.
    pub(super) fn override_quota(
        &self,
        spec: &QuotaSpec,
        hz: u64,
        at: &str,
    ) -> Result<cellrate::Quota, Error> {
        let q = spec.quota(hz).map_err(|e| Error::new(at, e))?;
        if q.hz() != hz {
            return Err(Error::new(
                at,
                "an override must count ticks at the clock's frequency",
            ));
        }
        Ok(q)
    }

    /// Tier `i`'s quota at `hz`, its name and scope checked.
    pub(super) fn tier_quota(&self, i: usize, hz: u64) -> Result<cellrate::Quota, Error> {
        let t = &self.tiers[i];
        let place = |field: &str| format!("tiers[{i}].{field}");
        if self.tiers[..i].iter().any(|u| u.name == t.name) {
            return Err(Error::new(
                place("name"),
                format_args!("tier name {:?} is used twice", t.name),
            ));
        }
        if t.scope == TierScope::ClientAndEndpoint && self.key.endpoint.is_none() {
            return Err(Error::new(
                place("scope"),
                "client_and_endpoint needs key.endpoint",
            ));
        }
        let quota = t
            .quota
            .quota(hz)
            .map_err(|e| Error::new(place("quota"), e))?;
        if quota.hz() != hz {
            return Err(Error::new(
                place("quota"),
                "a tier must count ticks at the clock's frequency",
            ));
        }
        Ok(quota)
    }
}

/// Whether a table made for quota `a` can run quota `b`: both of the GCRA
/// family (one live GCRA table), or both windows of one algorithm.
fn same_table_kind(a: &TierQuota, b: &TierQuota) -> bool {
    match (a, b) {
        (TierQuota::Gcra(_), TierQuota::Gcra(_)) => true,
        (TierQuota::Window { quota: a, .. }, TierQuota::Window { quota: b, .. }) => {
            a.kind() == b.kind()
        }
        _ => false,
    }
}
