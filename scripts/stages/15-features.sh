#!/usr/bin/env bash
# Every feature combination builds and lints (cargo-hack, installed here if
# missing), with clippy -D warnings:
# * each feature alone (and none), all targets: the library with its tests,
#   benches and examples, as a user enabling one feature gets them;
# * every pair of features (a powerset of depth 2), the library alone:
#   where two features' code meets (tower with redis, tracing or axum; std
#   with tokio; defmt's derives on types other features add).
# Over the host features, never `loom` (CI never combines it: stage 10 and
# stage 30 use it alone) nor `default` (empty, so every pair with it is the
# other feature alone). cargo-hack skips combinations a feature implies
# (`redis` with `std`, `axum` with `tower`, `serde` with `alloc`, ...); a new
# feature is covered by both runs as soon as Cargo.toml declares it. The runs stage 10 already
# made (no feature, std, tower) are up to date and cost nothing here.
set -euo pipefail
cd "$(dirname "$0")/../.."
# A debug build of the tool (about 15 s instead of 70 on 2 cores): it only
# spawns cargo, so its own speed does not matter.
if ! command -v cargo-hack >/dev/null; then
    cargo install cargo-hack --locked --debug >/dev/null
fi
cargo hack --version
start=$SECONDS
cargo hack clippy --each-feature --exclude-features loom,default --all-targets -- -D warnings
echo "--- each feature, all targets: $((SECONDS - start)) s"
start=$SECONDS
cargo hack clippy --feature-powerset --depth 2 --exclude-features loom,default --lib -- -D warnings
echo "--- every pair of features, the library: $((SECONDS - start)) s"
