#!/usr/bin/env bash
# Unit, property, integration and doc tests, with and without std.
set -euo pipefail
cargo test
cargo test --features std
# The HTTP layer over loopback (tests/tower.rs) and its property tests, the
# gateway example in process (tests/gateway.rs starts the binary built
# first), the waits, and the doc examples of those modules only (the rest
# of the doc tests ran above).
cargo build --features axum --example gateway
cargo test --features axum,tracing --test tower --test tower_fields --test gateway --test wait
cargo test --features axum --doc -- tower wait compose headers
# A keyed table's hot loop built in release, where the x86_64 fast path's
# inline assembly meets the optimizer's register allocation (a release build
# of this loop once crashed; see src/sync/cx16.rs). It fails on a crash or a
# wrong count.
cargo run --release --features std --example keyed_loop
cargo run --release --features std --example keyed_loop -- 262144
# The same by construction: no `cmpxchg16b` in that binary takes its address
# from rbx (the register it reads the new value from). x86_64 hosts only.
if [ "$(uname -m)" = x86_64 ]; then
    if ! command -v objdump >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
        apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends binutils >/dev/null
    fi
    swaps=$(objdump -d --no-show-raw-insn target/release/examples/keyed_loop | grep -c 'cmpxchg16b' || true)
    if [ "$swaps" -eq 0 ] ||
        objdump -d --no-show-raw-insn target/release/examples/keyed_loop |
        grep -E 'cmpxchg16b +(-?0x[0-9a-f]+)?\(%rbx'; then
        echo "FAIL: keyed_loop has no cmpxchg16b ($swaps found) or one addressed through rbx"
        exit 1
    fi
fi
