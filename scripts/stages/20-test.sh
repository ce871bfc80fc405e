#!/usr/bin/env bash
# Unit, property, integration and doc tests, with and without std.
set -euo pipefail
cargo test
cargo test --features std
# The HTTP layer over loopback (tests/tower.rs) and its property tests, the
# gateway example in process (tests/gateway.rs starts the binary built
# first), the waits, and the doc examples of those modules only (the rest
# of the doc tests ran above).
cargo build --features axum,serde --example gateway
# With `serde` on (one build for both): the configuration's round trips,
# the human syntax against its model, the golden error messages, the layer
# built from its config (tests/config.rs, tests/tower_config.rs), its live
# reloads (tests/tower_reload.rs; the gateway reads its rules file) and the
# doc examples (TOML and JSON) of `config`, `tower::config` and the types
# they derive serde for.
cargo test --features axum,tracing,serde --test tower --test tower_fields --test gateway --test wait \
    --test config --test tower_config --test tower_reload
cargo test --features axum --doc -- tower wait compose headers
cargo test --features axum,tracing,serde --doc -- config LimiterConfig WhenFull reload
# The `metrics` feature: the series a layer records equal the answers
# (in process, and a Redis backend on a closed port), then the gateway
# rebuilt with `/metrics` is scraped over loopback after known traffic.
cargo build --features axum,serde,metrics --example gateway
cargo test --features axum,serde,metrics,redis --test metrics
cargo test --features axum,metrics --doc -- metrics
# A keyed table's hot loop built in release (portable-atomic's 16-byte
# atomics under the optimizer, in the default build's run-time dispatch):
# it fails on a crash or a wrong count.
cargo run --release --features std --example keyed_loop
cargo run --release --features std --example keyed_loop -- 262144
