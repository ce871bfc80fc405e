#!/usr/bin/env bash
# Miri (nightly) over a named subset of the library's unit tests, chosen to
# fit about a minute of interpretation (plus ~50 s to build the dev
# dependencies for Miri and ~20 s for its sysroot on a fresh machine):
# * keyed::tests and tests/keyed_table.rs: the keyed table (16-byte
#   slots), threads on shared keys included (two threads and fewer rounds
#   under Miri);
# * sync::word: the state word;
# * gcra::step: the GCRA step at the edges of the u64 range;
# * window::log::tests::header_follows_reset_set_limit_and_revoke: the
#   sliding log's ring behind its sequence lock (`std`).
# cellrate has no `unsafe`; what Miri checks here is the code it relies on.
# On x86_64 the slots' `portable_atomic::AtomicU128` is, under Miri,
# portable-atomic's lock-based fallback (a sequence lock over byte-wise
# atomic copies, which is `unsafe` code): Miri runs no CPUID and no inline
# assembly, so the `cmpxchg16b` path of real builds cannot run here (with
# `-C target-feature=+cmpxchg16b` Miri would run portable-atomic's
# intrinsics path instead). Not run: the property tests (proptest wants the
# file system for its regression files, which Miri's isolation refuses, and
# is slow under Miri), and the loom models (stage 30).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
rustup +nightly component add miri rust-src >/dev/null
cargo +nightly miri setup >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
filters=(keyed::tests sync::word gcra::step
    window::log::tests::header_follows_reset_set_limit_and_revoke)
cargo +nightly miri test --lib --features std -- "${filters[@]}" 2>&1 | tee "$log"
cargo +nightly miri test --features std --test keyed_table 2>&1 | tee -a "$log"
# A filter that matches nothing must not pass quietly.
passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^passed/) n += $i } END { print n + 0 }' "$log")
echo "$passed tests passed under Miri"
if ((passed < 20)); then
    echo "FAIL: expected at least 20 tests under Miri (keyed, keyed_table, sync::word, gcra::step, window::log)"
    exit 1
fi
