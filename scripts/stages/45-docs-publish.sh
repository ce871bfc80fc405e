#!/usr/bin/env bash
# docs.rs and publishing: the crate documents on nightly exactly as docs.rs
# builds it (`--cfg docsrs`, the features of [package.metadata.docs.rs], with
# feature badges from `doc_cfg`), without a warning; and the package that
# `cargo publish` would upload builds on its own.
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
grep -q 'Available on crate feature <code>redis</code> only\|Available on crate feature `redis` only' \
    target/doc/cellrate/index.html || {
    echo "FAIL: no feature badge on the redis module (doc_cfg not in effect)"
    exit 1
}

echo "--- package: what would be uploaded builds on its own"
cargo package --locked
cargo package --list --locked >target/package-list.txt
for needed in README.md LICENSE src/lib.rs src/firmware/BOUNDS.md \
    src/firmware/cortex-m.main.rs src/firmware/riscv.main.rs; do
    grep -qx "$needed" target/package-list.txt || { echo "FAIL: $needed is not in the package"; exit 1; }
done
echo "$(wc -l <target/package-list.txt) files in the package"
cargo publish --dry-run --locked
