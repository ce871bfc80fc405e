#!/usr/bin/env bash
# Benchmarks must build; running them is `cargo bench` (docs/benchmarks.md), and
# their tables come from tools/bench-runner (docs/benchmarks.md), whose unit
# tests run here (its own workspace, no dependencies: a few seconds).
set -euo pipefail
cargo bench --no-run
cargo bench --no-run -p cellrate-tower --features axum,serde --bench tower
cargo bench --no-run -p cellrate-redis --bench redis
cargo fmt --manifest-path tools/bench-runner/Cargo.toml --check
cargo clippy --manifest-path tools/bench-runner/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path tools/bench-runner/Cargo.toml
# Every figure the README quotes (`1.71×`) is a median in one of
# docs/benchmarks.md's generated tables (the bench's own, where the line
# links to it): a figure cannot outlive the run that produced it.
cargo run --quiet --manifest-path tools/bench-runner/Cargo.toml -- --check README.md docs/benchmarks.md
