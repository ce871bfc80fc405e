#!/usr/bin/env bash
# Unit, property, integration and doc tests: the core with and without std,
# then the adapter crates.
set -euo pipefail
cargo test
cargo test --features std
# The configuration (feature `serde`): the doc examples (TOML and JSON) of
# `config` and the types it derives for; then cellrate-config: round trips,
# the human syntax against its model, the golden error messages.
cargo test --features serde --doc -- config LimiterConfig WhenFull
cargo test -p cellrate-config
# cellrate-headers: the fields against their model, and its doc examples.
cargo test -p cellrate-headers
# cellrate-tower: the HTTP layer over loopback (tests/tower.rs) and its
# property tests, the gateway example in process (tests/gateway.rs starts
# the binary built first), the layer built from its config and its live
# reloads (tests/tower_config.rs, tests/tower_reload.rs), what its rules
# say beyond GCRA tiers (tests/tower_config_rules.rs), window tiers in
# process and their reloads (tests/tower_windows.rs), sliding-log tiers
# and per-client overrides of window and log tiers in process
# (tests/tower_store.rs), the admin endpoint
# and the rules-file watcher (tests/admin.rs, tests/watch.rs), the
# README's quick start (tests/readme_sync.rs), and every doc example.
cargo build -p cellrate-tower --features axum,serde --example gateway
cargo test -p cellrate-tower --features axum,tracing,serde --lib --test tower --test tower_fields \
    --test gateway --test tower_config --test tower_config_rules --test tower_windows \
    --test tower_store --test tower_reload --test admin \
    --test watch --test readme_sync
cargo test -p cellrate-tower --features axum,tracing,serde,metrics --doc
# The `metrics` feature: the series a layer records equal the answers
# (in process, and a Redis backend on a closed port), then the gateway
# rebuilt with `/metrics` is scraped over loopback after known traffic.
cargo build -p cellrate-tower --features axum,serde,metrics --example gateway
cargo test -p cellrate-tower --features axum,serde,metrics,redis --test metrics
cargo test -p cellrate-metrics
# cellrate-redis without a server: its unit tests and doc examples (the
# server tests run in stage 70).
cargo test -p cellrate-redis --lib
cargo test -p cellrate-redis --doc
# A keyed table's hot loop built in release (portable-atomic's 16-byte
# atomics under the optimizer, in the default build's run-time dispatch):
# it fails on a crash or a wrong count.
cargo run --release --features std --example keyed_loop
cargo run --release --features std --example keyed_loop -- 262144
