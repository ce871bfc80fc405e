#!/usr/bin/env bash
# Benchmarks must build; running them is `cargo bench` (see README), and
# their tables come from tools/bench-runner (docs/benchmarks.md), whose unit
# tests run here (its own workspace, no dependencies: a few seconds).
set -euo pipefail
cargo bench --no-run
cargo bench --no-run --features axum --bench tower
cargo fmt --manifest-path tools/bench-runner/Cargo.toml --check
cargo clippy --manifest-path tools/bench-runner/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path tools/bench-runner/Cargo.toml
