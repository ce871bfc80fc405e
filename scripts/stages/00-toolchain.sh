#!/usr/bin/env bash
# Toolchain pieces every later stage relies on.
set -euo pipefail
rustup component add rustfmt clippy llvm-tools >/dev/null
rustup target add thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf \
    thumbv8m.main-none-eabihf riscv32imc-unknown-none-elf riscv32imac-unknown-none-elf \
    aarch64-unknown-none x86_64-unknown-none x86_64-unknown-uefi wasm32-unknown-unknown >/dev/null
rustc --version
