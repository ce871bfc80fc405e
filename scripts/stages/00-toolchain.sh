#!/usr/bin/env bash
# Toolchain pieces every later stage relies on.
set -euo pipefail
rustup component add rustfmt clippy llvm-tools >/dev/null
rustup target add thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf \
    riscv32imc-unknown-none-elf >/dev/null
rustc --version
