#!/usr/bin/env bash
# Benchmarks must build; running them is `cargo bench` (see README).
set -euo pipefail
cargo bench --no-run
cargo bench --no-run --features axum --bench tower
