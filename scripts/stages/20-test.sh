#!/usr/bin/env bash
# Unit, property, integration and doc tests, with and without std.
set -euo pipefail
cargo test
cargo test --features std
# The HTTP layer over loopback (tests/tower.rs) and its property tests, the
# gateway example in process (tests/gateway.rs starts the binary built
# first), the waits, and the doc examples of those modules only (the rest
# of the doc tests ran above).
cargo build --features axum --example gateway
cargo test --features axum,tracing --test tower --test tower_fields --test gateway --test wait
cargo test --features axum --doc -- tower wait compose headers
# Configuration (feature `serde`): round trips, the human syntax against
# its model, the golden error messages, and the config module's doc
# examples (TOML and JSON) with those of the types it derives serde for.
cargo test --features serde,std --test config
cargo test --features serde,std --doc -- config LimiterConfig WhenFull
# A keyed table's hot loop built in release (portable-atomic's 16-byte
# atomics under the optimizer, in the default build's run-time dispatch):
# it fails on a crash or a wrong count.
cargo run --release --features std --example keyed_loop
cargo run --release --features std --example keyed_loop -- 262144
