#!/usr/bin/env bash
# Formatting and clippy for the feature sets CI builds (never --all-features).
set -euo pipefail
cargo fmt --all --check
# No import cycles between sibling modules (each module owns its concept),
# in the core and in each adapter crate.
python3 tools/modcycles.py
for crate in crates/*/; do
    python3 tools/modcycles.py "${crate}src"
done
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --features std -- -D warnings
cargo clippy --all-targets --features loom -- -D warnings
# The adapter crates: each alone, and the HTTP layer with axum's extractors
# and the tracing events (stage 15 covers their other feature sets).
cargo clippy -p cellrate-config -p cellrate-headers -p cellrate-metrics -p cellrate-redis -p cellrate-tower \
    --all-targets -- -D warnings
# The header fields are for any server, bare metal included.
cargo clippy -p cellrate-headers --lib --target thumbv6m-none-eabi -- -D warnings
cargo clippy -p cellrate-tower --all-targets --features axum,tracing -- -D warnings
for target in thumbv6m-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf \
    riscv32imc-unknown-none-elf riscv32imac-unknown-none-elf aarch64-unknown-none \
    x86_64-unknown-none wasm32-unknown-unknown; do
    cargo clippy --lib --target "$target" -- -D warnings
done
cargo clippy --lib --target thumbv7em-none-eabihf --features defmt -- -D warnings
# Docs build without broken links (the adapters with every feature).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features std
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p cellrate-config -p cellrate-headers -p cellrate-metrics \
    -p cellrate-redis -p cellrate-tower \
    --features cellrate-tower/axum,cellrate-tower/redis,cellrate-tower/serde,cellrate-tower/metrics,cellrate-tower/tracing
