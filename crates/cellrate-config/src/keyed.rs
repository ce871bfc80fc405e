//! Keyed tables with overrides, built from configuration.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use cellrate::config::QuotaSpec;

use crate::ConfigError;
use cellrate::keyed::{KeyId, KeyedBox, LiveQuota, Seed, WhenFull};
use cellrate::Quota;

/// A keyed table and its per-key overrides:
///
/// ```toml
/// quota = "100/min"
/// capacity = 100000
/// when_full = "deny"          # or "admit", "shared"
/// [overrides]
/// acct_123 = "500/min"
/// ```
///
/// Overrides are keyed by the string a client presents (as the HTTP
/// layer's key extractors produce it) and must share the table's tick
/// frequency; each is re-expressed at the table's scale
/// ([`KeyedTable::compatible_quota`](cellrate::keyed::KeyedTable::compatible_quota),
/// rounded toward admitting less).
///
/// ```
/// use cellrate_config::KeyedSpec;
/// use cellrate::keyed::Seed;
/// let spec: KeyedSpec = toml::from_str(r#"
///     quota = "100/min"
///     capacity = 1000
///     [overrides]
///     acct_123 = "500/min"
/// "#).unwrap();
/// let table = spec.build(1_000_000, Seed::new(1, 2)).unwrap();
/// assert_eq!(table.check("acct_123", 0).unwrap().limit(), 500);
/// assert_eq!(table.check("acct_9", 0).unwrap().limit(), 100);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct KeyedSpec {
    /// Every key's quota unless overridden.
    pub quota: QuotaSpec,
    /// The most live keys (at least 1; 16 bytes each, asked of the
    /// allocator when the table is built: one it refuses is an error here).
    pub capacity: usize,
    /// What a full table does with a new key (default `deny`).
    #[serde(default = "deny")]
    pub when_full: WhenFull,
    /// Per-key quotas, by key.
    /// (Written even when empty: a binary format finds fields by position.)
    #[serde(default)]
    pub overrides: BTreeMap<String, QuotaSpec>,
}

fn deny() -> WhenFull {
    WhenFull::Deny
}

/// A capacity of at least 1 whose slots the allocator grants: a table of
/// `capacity` × 16 bytes is asked for (and given back) before the table is
/// built, so a size no allocator can grant (a typo of a few digits) is an
/// error at `capacity` instead of an abort of the process. (A size the
/// allocator grants but the system cannot back when the slots are written
/// is the system's to refuse, as for any allocation.)
/// For every builder that sizes a table from a file (its message,
/// [`ConfigError::message`], placed at that builder's own field).
///
/// ```
/// use cellrate_config::check_capacity;
/// assert!(check_capacity(1_024).is_ok());
/// assert!(check_capacity(0).is_err());
/// assert!(check_capacity(usize::MAX / 2).is_err()); // no allocator grants it
/// ```
pub fn check_capacity(capacity: usize) -> Result<(), ConfigError> {
    if capacity == 0 {
        return Err(ConfigError::new(
            "capacity",
            "a keyed table needs a capacity of at least 1",
        ));
    }
    let mut slots: Vec<cellrate::keyed::Slot> = Vec::new();
    slots.try_reserve_exact(capacity).map_err(|_| {
        let bytes = (capacity as u128) * core::mem::size_of::<cellrate::keyed::Slot>() as u128;
        ConfigError::new(
            "capacity",
            format_args!("a keyed table of {capacity} slots ({bytes} bytes) cannot be allocated"),
        )
    })
}

/// A table built from a [`KeyedSpec`]: heap slots, overrides by [`KeyId`].
pub type ConfiguredTable = KeyedBox<Quota, Vec<(KeyId, Quota)>>;

/// A table built from a [`KeyedSpec`] whose quotas change at run time
/// ([`KeyedSpec::reload`]).
pub type LiveTable = KeyedBox<LiveQuota, Vec<(KeyId, LiveQuota)>>;

impl KeyedSpec {
    /// A table of `capacity` keys with `quota` for each, no overrides, and
    /// a full table denying new keys.
    ///
    /// ```
    /// use cellrate_config::KeyedSpec;
    /// let spec = KeyedSpec::new("10/s".parse().unwrap(), 64);
    /// assert!(spec.overrides.is_empty());
    /// ```
    pub fn new(quota: QuotaSpec, capacity: usize) -> Self {
        KeyedSpec {
            quota,
            capacity,
            when_full: WhenFull::Deny,
            overrides: BTreeMap::new(),
        }
    }

    /// The table at `hz` with hash `seed`. Errors name the field
    /// (`capacity`, `quota`, `overrides.acct_123`).
    pub fn build(&self, hz: u64, seed: Seed) -> Result<ConfiguredTable, ConfigError> {
        let (quota, overrides) = self.quotas(hz, seed)?;
        Ok(KeyedBox::with_capacity_and_overrides(
            self.capacity,
            quota,
            overrides,
            self.when_full,
            seed,
        ))
    }

    /// Like [`build`](Self::build), with [`LiveQuota`]s that
    /// [`reload`](Self::reload) changes at run time.
    pub fn build_live(&self, hz: u64, seed: Seed) -> Result<LiveTable, ConfigError> {
        let (quota, overrides) = self.quotas(hz, seed)?;
        Ok(KeyedBox::with_capacity_and_overrides(
            self.capacity,
            LiveQuota::new(quota),
            overrides
                .into_iter()
                .map(|(id, q)| (id, LiveQuota::new(q)))
                .collect(),
            self.when_full,
            seed,
        ))
    }

    /// Applies this spec at `now` to a table [`build_live`](Self::build_live)
    /// made (at the same `hz`), keeping every client's state: the default
    /// quota and each override change, then every client whose quota
    /// changed keeps the cells it has used, at most its new burst
    /// ([`KeyedTable::translate_states`](cellrate::keyed::KeyedTable::translate_states));
    /// an override the spec no longer names falls back to the default
    /// quota. Everything is checked before anything changes; then each
    /// quota switches on its own (a check sees each one old or new, never
    /// a mix; until the walk passes a client, its debt reads as time).
    /// What is fixed when a table is made is refused, with its place:
    /// `capacity`, `when_full`, and a key that had no override.
    ///
    /// ```
    /// use cellrate_config::KeyedSpec;
    /// use cellrate::keyed::Seed;
    /// let spec: KeyedSpec = toml::from_str(
    ///     "quota = \"100/min\"\ncapacity = 64\n[overrides]\nacct_123 = \"100/min\"",
    /// ).unwrap();
    /// let table = spec.build_live(1_000, Seed::new(1, 2)).unwrap();
    /// assert!(table.check_n("acct_123", 0, 100).is_ok());
    /// assert!(table.check("acct_123", 0).is_err());
    /// // The operator raises acct_123 to 500/min (burst 500): its 100
    /// // cells stay used, 400 are left at once.
    /// let raised: KeyedSpec = toml::from_str(
    ///     "quota = \"100/min\"\ncapacity = 64\n[overrides]\nacct_123 = \"500/min\"",
    /// ).unwrap();
    /// raised.reload(&table, 1_000, 0).unwrap();
    /// assert_eq!(table.check_n("acct_123", 0, 400).unwrap().remaining(), 0);
    /// assert_eq!(table.check("acct_9", 0).unwrap().limit(), 100);
    /// ```
    pub fn reload(&self, table: &LiveTable, hz: u64, now: u64) -> Result<(), ConfigError> {
        if self.capacity != table.capacity() {
            return Err(ConfigError::new(
                "capacity",
                "fixed when the table is made: build a new table to change it",
            ));
        }
        if self.when_full != table.when_full() {
            return Err(ConfigError::new(
                "when_full",
                "fixed when the table is made: build a new table to change it",
            ));
        }
        let fixed = table.algorithm().quota();
        let rescale = |q: Quota, place: &dyn Fn() -> String| -> Result<Quota, ConfigError> {
            if q.hz() != fixed.hz() {
                return Err(ConfigError::new(
                    place(),
                    "a quota must count ticks at the table's frequency",
                ));
            }
            q.rescaled(fixed.scale(), fixed.hz())
                .map_err(|e| ConfigError::new(place(), e))
        };
        let default = self
            .quota
            .quota(hz)
            .map_err(|e| ConfigError::new("quota", e))?;
        let default = rescale(default, &|| "quota".into())?;
        // One new quota per override slot of the table, all checked first.
        let slots = table.overrides();
        let mut next: Vec<Quota> = slots.iter().map(|_| default).collect();
        for (key, spec) in &self.overrides {
            let place = || format!("overrides.{key}");
            let id = table.key_id(key.as_str());
            let Some(i) = slots.iter().position(|(k, _)| *k == id) else {
                return Err(ConfigError::new(
                    place(),
                    "this key had no override when the table was made: build a new table to add one",
                ));
            };
            let q = spec.quota(hz).map_err(|e| ConfigError::new(place(), e))?;
            next[i] = rescale(q, &place)?;
        }
        // The quotas each client followed, then the new ones published,
        // then every client re-expressed from the first to the second.
        let before = table.algorithm().quota();
        let overrides_before: Vec<(KeyId, Quota)> =
            slots.iter().map(|(id, live)| (*id, live.quota())).collect();
        let busy = |place: String| move |e| ConfigError::new(place, e);
        table
            .algorithm()
            .set_quota(default)
            .map_err(busy("quota".into()))?;
        for ((_, live), q) in slots.iter().zip(next) {
            live.set_quota(q).map_err(busy("overrides".into()))?;
        }
        table
            .translate_states(now, before, |id| {
                overrides_before
                    .iter()
                    .find(|(k, _)| *k == id)
                    .map(|&(_, q)| q)
            })
            .map_err(busy("quota".into()))
    }

    /// The default quota and the overrides by [`KeyId`] (at the table's
    /// scale) for a table with hash `seed`.
    pub(crate) fn quotas(
        &self,
        hz: u64,
        seed: Seed,
    ) -> Result<(Quota, Vec<(KeyId, Quota)>), ConfigError> {
        check_capacity(self.capacity)?;
        let quota = self
            .quota
            .quota(hz)
            .map_err(|e| ConfigError::new("quota", e))?;
        // KeyIds of string keys depend on the seed: a one-slot table with
        // the same seed names them.
        let probe = KeyedBox::with_capacity(1, quota, self.when_full, seed);
        let mut overrides = Vec::with_capacity(self.overrides.len());
        for (key, spec) in &self.overrides {
            let place = || format!("overrides.{key}");
            let q = spec.quota(hz).map_err(|e| ConfigError::new(place(), e))?;
            if q.hz() != quota.hz() {
                return Err(ConfigError::new(
                    place(),
                    "an override must count ticks at the table's frequency",
                ));
            }
            let q = probe
                .compatible_quota(q)
                .map_err(|e| ConfigError::new(place(), e))?;
            overrides.push((probe.key_id(key.as_str()), q));
        }
        Ok((quota, overrides))
    }
}
