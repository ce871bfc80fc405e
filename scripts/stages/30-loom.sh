#!/usr/bin/env bash
# The loom models (they live beside the code, in the library's unit tests).
# Release mode and a preemption bound keep them to minutes.
set -euo pipefail
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
cargo test --release --features loom --lib
