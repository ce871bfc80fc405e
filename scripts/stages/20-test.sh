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
