#!/usr/bin/env bash
# no_std builds with no default features, as a firmware user gets them.
set -euo pipefail
for target in thumbv6m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf; do
    cargo build --lib --release --no-default-features --target "$target"
done
cargo build --lib --release --no-default-features --features defmt --target thumbv7em-none-eabihf
