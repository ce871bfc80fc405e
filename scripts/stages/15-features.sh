#!/usr/bin/env bash
# Every feature combination builds and lints (cargo-hack, installed here if
# missing), with clippy -D warnings:
# * each feature alone (and none), all targets: the library with its tests,
#   benches and examples, as a user enabling one feature gets them;
# * every pair of features (a powerset of depth 2), the library alone:
#   where two features' code meets (defmt's derives on types other
#   features add; in cellrate-tower, redis with tracing, metrics or serde).
# Over the host features, never `loom` (CI never combines it: stage 10 and
# stage 30 use it alone) nor `default` (empty, so every pair with it is the
# other feature alone). cargo-hack skips combinations a feature implies
# (`std` with `alloc`, `serde` with `alloc`, ...); a new
# feature is covered by both runs as soon as Cargo.toml declares it. The runs stage 10 already
# made (no feature, std) are up to date and cost nothing here.
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
echo "--- core, each feature, all targets: $((SECONDS - start)) s"
start=$SECONDS
cargo hack clippy --feature-powerset --depth 2 --exclude-features loom,default --lib -- -D warnings
echo "--- core, every pair of features, the library: $((SECONDS - start)) s"
# The adapter crates, the same way (their own features only).
for crate in cellrate-headers cellrate-redis cellrate-tower; do
    start=$SECONDS
    cargo hack clippy -p "$crate" --each-feature --exclude-features default --all-targets -- -D warnings
    cargo hack clippy -p "$crate" --feature-powerset --depth 2 --exclude-features default --lib -- -D warnings
    echo "--- $crate, each feature (all targets) and every pair (library): $((SECONDS - start)) s"
done
# Every optional dependency exists on every target, not only on hosted
# x86_64: a `[target.…]` table in Cargo.toml takes every dependency written
# below it (so it happened once to redis, tower, axum and serde). The
# direct dependencies of every feature but loom, per target, must be the
# host's (portable-atomic aside: it is per target by design). `cargo tree`
# resolves for a target without its standard library installed.
features=serde,defmt,embedded-hal,embassy-time
direct() {
    cargo tree --quiet --target "$1" --features "$features" -e normal --depth 1 --prefix none |
        grep -Ev '^(cellrate|portable-atomic) ' | sort
}
host=$(direct x86_64-unknown-linux-gnu)
for target in aarch64-unknown-linux-gnu aarch64-apple-darwin riscv64gc-unknown-linux-gnu \
    thumbv7em-none-eabihf; do
    if [[ $(direct "$target") != "$host" ]]; then
        echo "FAIL: optional dependencies missing on $target (a [target.…] table in Cargo.toml?):"
        diff <(echo "$host") <(direct "$target") || true
        exit 1
    fi
done
echo "--- optional dependencies on every target: $(echo "$host" | wc -l) alike on 5 targets"
