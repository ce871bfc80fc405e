//! The servers `scripts/stages/70-redis.sh` starts, as the test crates
//! that use them (`tests/redis.rs`, `tests/redis_algorithms.rs`) find
//! them: a test that needs one is `#[ignore]`d, so plain `cargo test
//! --features redis` reports it as ignored, and it fails, not passes,
//! when run without its variable.
#![allow(dead_code)]

use std::time::Duration;

/// The variable `name`; panics without it.
pub fn env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{name} is not set: this test needs a Redis server (run scripts/stages/70-redis.sh)"
        ),
    }
}

/// The standalone server's URL (`CELLRATE_REDIS_URL`); panics if unset or
/// unreachable.
pub fn standalone() -> String {
    let url = env("CELLRATE_REDIS_URL");
    let client = redis::Client::open(url.as_str()).expect("CELLRATE_REDIS_URL is not a URL");
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("CELLRATE_REDIS_URL={url} is set but unreachable: {e}"));
    let _: String = redis::cmd("PING").query(&mut conn).expect("PING");
    url
}

/// The Cluster's node URLs (`CELLRATE_REDIS_CLUSTER`, comma-separated),
/// each checked to report `cluster_state:ok`.
pub fn cluster_nodes() -> Vec<String> {
    let nodes: Vec<String> = env("CELLRATE_REDIS_CLUSTER")
        .split(',')
        .map(str::to_owned)
        .collect();
    for url in &nodes {
        let client = redis::Client::open(url.as_str()).expect("node URL");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("cluster node {url} is set but unreachable: {e}"));
        let state: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
        assert!(state.contains("cluster_state:ok"), "{url}: {state}");
    }
    nodes
}

/// A key prefix no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{t}-{n}")
}
