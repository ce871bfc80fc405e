#!/usr/bin/env bash
# Fuzzing (cargo fuzz, libFuzzer; nightly): quota construction, every
# limiter's check path with arbitrary states and times, the header writers
# and the human quota syntax (feature serde), each for a bounded time. The
# kept corpus under fuzz/corpus/ is read, and what a run finds is written
# to a scratch copy, so the tree is left as it was. A crash fails the stage
# and is saved under fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${CELLRATE_FUZZ_SECS:-25}"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal >/dev/null
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked >/dev/null
fi

cd fuzz
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in quota limiters headers config; do
    mkdir -p "$scratch/$target" "corpus/$target"
    echo "--- fuzz $target for ${secs} s (kept corpus: $(ls "corpus/$target" | wc -l) inputs)"
    cargo +nightly fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$secs" -print_final_stats=1 2>&1 |
        grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY|thread)|panicked|Done" || true
    # grep may hide the failure: the pipeline's status is cargo fuzz's.
    [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "FAIL: fuzz target $target"; exit 1; }
done
