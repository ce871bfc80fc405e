#!/usr/bin/env bash
# docs.rs and publishing: each crate documents on nightly exactly as docs.rs
# builds it (`--cfg docsrs`, the features of [package.metadata.docs.rs], with
# feature badges from `doc_cfg`), without a warning; and the packages that
# `cargo publish` would upload build on their own.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
rustup run nightly rustc --version

# The features docs.rs enables, read from Cargo.toml so the two cannot differ.
features=$(python3 - <<'PY'
import tomllib
meta = tomllib.load(open("Cargo.toml", "rb"))["package"]["metadata"]["docs"]["rs"]
assert "loom" not in meta["features"], "docs.rs must never enable loom"
assert not meta.get("all-features"), "docs.rs must not use all-features (loom)"
print(",".join(meta["features"]))
PY
)
echo "--- docs.rs build: features $features"
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo +nightly doc --no-deps --features "$features"
# The badges must be there: an item gated on a feature says so.
grep -q 'Available on crate feature <code>serde</code> only\|Available on crate feature `serde` only' \
    target/doc/cellrate/index.html || {
    echo "FAIL: no feature badge on the config module (doc_cfg not in effect)"
    exit 1
}
# The adapter crates as docs.rs builds them (every feature: none of theirs
# is for tests only).
for crate in cellrate-config cellrate-headers cellrate-metrics cellrate-redis cellrate-tower; do
    python3 - "$crate" <<'PY'
import sys, tomllib
meta = tomllib.load(open(f"crates/{sys.argv[1]}/Cargo.toml", "rb"))["package"]["metadata"]["docs"]["rs"]
assert meta.get("all-features"), f"{sys.argv[1]}: docs.rs should build every feature"
PY
    RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo +nightly doc --no-deps -p "$crate" --all-features
done

echo "--- rust-version: each crate's is at least its dependencies' (as locked)"
python3 tools/msrv.py

echo "--- package: what would be uploaded builds on its own"
# Every crate of the workspace, the adapters against the core as packaged
# (not the checkout), as `cargo publish` would upload them.
#
# `cargo package` unpacks its temporary registry into the cargo home under a
# name fixed by the checkout's path, and never unpacks a version that is
# already there: a copy left by an earlier run at the same path would be
# built in place of this one. Remove the workspace's own crates from those
# local-registry copies first.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for crate in cellrate cellrate-config cellrate-headers cellrate-metrics cellrate-redis cellrate-tower; do
    rm -rf "$cargo_home"/registry/src/-*/"$crate"-[0-9]*
done
cargo package --workspace --locked
cargo package --list --locked -p cellrate >target/package-list.txt
for needed in README.md LICENSE src/lib.rs src/firmware/BOUNDS.md \
    src/firmware/cortex-m.main.rs src/firmware/riscv.main.rs; do
    grep -qx "$needed" target/package-list.txt || { echo "FAIL: $needed is not in the package"; exit 1; }
done
echo "$(wc -l <target/package-list.txt) files in the core's package"
for crate in cellrate-config cellrate-headers cellrate-metrics cellrate-redis cellrate-tower; do
    cargo package --list --locked -p "$crate" >"target/package-list-$crate.txt"
    for needed in README.md src/lib.rs Cargo.toml; do
        grep -qx "$needed" "target/package-list-$crate.txt" || { echo "FAIL: $needed is not in $crate's package"; exit 1; }
    done
    echo "$(wc -l <"target/package-list-$crate.txt") files in $crate's package"
done
grep -qx src/lua/check.lua target/package-list-cellrate-redis.txt || { echo "FAIL: the Lua steps are not in cellrate-redis's package"; exit 1; }
cargo publish --dry-run --locked -p cellrate
