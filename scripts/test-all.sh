#!/usr/bin/env bash
# The whole test suite, installs included. `.ci/run` calls exactly this.
# Each stage in scripts/stages/ installs what it needs and fails loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
total=$SECONDS
for stage in scripts/stages/*.sh; do
    echo "=== stage $(basename "$stage")"
    start=$SECONDS
    bash "$stage"
    echo "=== stage $(basename "$stage") ok in $((SECONDS - start)) s"
done
echo "=== all stages ok in $((SECONDS - total)) s"
