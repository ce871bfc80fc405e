//! Which tiers decide which route, and what the layer learns of the routes
//! requests come on: each named route, whether some request matched it
//! yet; each route named by no tier, how many requests came on one, and
//! (feature `tracing`) one event the first time each came.
//!
//! Recording costs a request on a route-limited layer one relaxed load of
//! its route's flag (a store the first time), or, on a route no tier
//! names, one counter increment and a hash of the route looked up in a
//! fixed table of 64 words. Past 64 distinct such routes only the count
//! grows; a hash collision spares a second event (the count still grows).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::TierInfo;

/// The routes no tier names that the layer remembers having seen.
const SEEN: usize = 64;

/// The tiers of each route: group 0 (the tiers limited to no route) for a
/// route no tier names, else the group of the route's tiers, each in the
/// tiers' order. Routes are the request's endpoint (`key.endpoint =
/// "route"`: the matched route).
#[derive(Clone, Debug, Default)]
pub(crate) struct Routes {
    /// Tier indices per group; group 0 is the tiers limited to no route.
    pub(crate) groups: Vec<Vec<usize>>,
    /// Each named route's group and the index of its flag in `matched`.
    by_route: HashMap<String, (usize, usize)>,
    watch: Arc<Watch>,
}

/// What requests taught the layer about its routes.
#[derive(Debug, Default)]
struct Watch {
    /// Per named route (in `by_route`'s index order): some request matched it.
    matched: Box<[AtomicBool]>,
    /// Shared by every set of routes a reload makes from these.
    unrouted: Arc<Unrouted>,
}

/// Requests on routes no tier names.
#[derive(Debug)]
struct Unrouted {
    requests: AtomicU64,
    /// Hashes (never 0) of the routes seen, in arrival order.
    seen: [AtomicU64; SEEN],
}

impl Default for Unrouted {
    fn default() -> Self {
        Unrouted {
            requests: AtomicU64::new(0),
            seen: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Unrouted {
    /// Counts a request on `route`; `true` the first time `route` is seen
    /// (as far as the table remembers).
    fn record(&self, route: &str) -> bool {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut h = DefaultHasher::new();
        route.hash(&mut h);
        let word = h.finish() | 1;
        for slot in &self.seen {
            match slot.compare_exchange(0, word, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(w) if w == word => return false,
                Err(_) => {}
            }
        }
        false
    }
}

/// Equal when they route alike (what requests taught them aside).
impl PartialEq for Routes {
    fn eq(&self, other: &Self) -> bool {
        self.groups == other.groups && self.by_route == other.by_route
    }
}

impl Eq for Routes {}

// Routes are made from a configuration (feature `serde`).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl Routes {
    /// The groups of tiers whose route lists are `routes` (`None`: every
    /// route), and the group of each route named.
    pub(crate) fn new(routes: &[Option<&[String]>]) -> Self {
        let default: Vec<usize> = (0..routes.len()).filter(|&i| routes[i].is_none()).collect();
        let mut groups = std::vec![default];
        let mut by_route = HashMap::new();
        let named: BTreeSet<&String> = routes.iter().flatten().flat_map(|r| r.iter()).collect();
        for (index, route) in named.into_iter().enumerate() {
            let members: Vec<usize> = (0..routes.len())
                .filter(|&i| routes[i].is_none_or(|r| r.contains(route)))
                .collect();
            let g = match groups.iter().position(|m| *m == members) {
                Some(g) => g,
                None => {
                    groups.push(members);
                    groups.len() - 1
                }
            };
            by_route.insert(route.clone(), (g, index));
        }
        let matched = (0..by_route.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        Routes {
            groups,
            by_route,
            watch: Arc::new(Watch {
                matched,
                unrouted: Arc::default(),
            }),
        }
    }

    /// These routes, keeping what requests taught `old`: the routes no
    /// tier names seen so far and their count, and each route both name
    /// that some request matched.
    pub(crate) fn carrying(self, old: &Routes) -> Self {
        let matched: Box<[AtomicBool]> = (0..self.by_route.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        for (route, &(_, i)) in &self.by_route {
            let was = old
                .by_route
                .get(route)
                .and_then(|&(_, j)| old.watch.matched.get(j))
                .is_some_and(|m| m.load(Ordering::Relaxed));
            if let (true, Some(m)) = (was, matched.get(i)) {
                m.store(true, Ordering::Relaxed);
            }
        }
        Routes {
            groups: self.groups,
            by_route: self.by_route,
            watch: Arc::new(Watch {
                matched,
                unrouted: Arc::clone(&old.watch.unrouted),
            }),
        }
    }

    /// The group of `route`; with `record`, the request is recorded as
    /// having matched a named route, or as unrouted.
    #[inline]
    pub(crate) fn group_of(&self, route: &str, record: bool) -> usize {
        match self.by_route.get(route) {
            Some(&(g, i)) => {
                if record {
                    if let Some(m) = self.watch.matched.get(i) {
                        if !m.load(Ordering::Relaxed) {
                            m.store(true, Ordering::Relaxed);
                        }
                    }
                }
                g
            }
            None => {
                if record && self.watch.unrouted.record(route) {
                    #[cfg(feature = "tracing")]
                    tracing::info!(
                        target: "cellrate::tower",
                        route,
                        "a request came on a route no tier's routes name: the tiers without routes decide it"
                    );
                }
                0
            }
        }
    }

    /// The named routes no request has matched yet, in order.
    pub(crate) fn unmatched(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .by_route
            .iter()
            .filter(|(_, &(_, i))| {
                !self
                    .watch
                    .matched
                    .get(i)
                    .is_some_and(|m| m.load(Ordering::Relaxed))
            })
            .map(|(r, _)| r.clone())
            .collect();
        out.sort();
        out
    }

    /// Requests on routes no tier names, so far.
    pub(crate) fn unrouted_requests(&self) -> u64 {
        self.watch.unrouted.requests.load(Ordering::Relaxed)
    }

    /// The groups of `all` (every tier, in order) that `routes` makes: one,
    /// `all`, without routes.
    pub(crate) fn groups_of(routes: Option<&Routes>, all: Vec<TierInfo>) -> Vec<Vec<TierInfo>> {
        match routes {
            None => std::vec![all],
            Some(r) => r
                .groups
                .iter()
                .map(|m| m.iter().map(|&i| all[i].clone()).collect())
                .collect(),
        }
    }
}
