#!/usr/bin/env bash
# Unit, property, integration and doc tests, with and without std.
set -euo pipefail
cargo test
cargo test --features std
# The HTTP layer over loopback (tests/tower.rs), the gateway example in
# process (tests/gateway.rs builds and starts it), the waits, and their docs.
cargo test --features axum
