#!/usr/bin/env bash
# The public surface of every crate of the workspace, as `cargo public-api`
# lists it (rustdoc JSON, nightly; blanket and auto-trait impls omitted),
# with the features docs.rs documents. `--write` rewrites the committed
# lists in docs/api/; without it, each list is compared with its committed
# file and any difference fails, so every API change shows in review.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal >/dev/null
fi
# A debug build of the tool (it only reads rustdoc's JSON): about half the
# time of a release build on 2 cores.
if ! command -v cargo-public-api >/dev/null; then
    cargo install cargo-public-api --locked --debug >/dev/null
fi

# crate, then its cargo public-api feature arguments.
surfaces=(
    "cellrate --features std,alloc,defmt,embedded-hal,embassy-time,serde"
    "cellrate-config --all-features"
    "cellrate-headers --all-features"
    "cellrate-metrics --all-features"
    "cellrate-redis --all-features"
    "cellrate-tower --all-features"
)
status=0
for entry in "${surfaces[@]}"; do
    read -r crate args <<<"$entry"
    # shellcheck disable=SC2086
    listed=$(cargo public-api -p "$crate" -ss $args 2>/dev/null)
    file=docs/api/$crate.txt
    if [[ $mode == --write ]]; then
        printf '%s\n' "$listed" >"$file"
        echo "$file: $(wc -l <"$file") lines"
    elif ! diff -u "$file" <(printf '%s\n' "$listed"); then
        echo "FAIL: the public API of $crate changed; run scripts/public-api.sh --write and commit $file"
        status=1
    else
        echo "$crate: public API as listed in $file ($(grep -c '' "$file") lines)"
    fi
done
exit $status
