#!/usr/bin/env bash
# no_std builds with no default features, as a firmware user gets them, for
# every bare-metal target the firmware guide lists, and what each target's
# final binary must provide, checked at link time (examples/bare-metal).
set -euo pipefail
cd "$(dirname "$0")/../.."

targets=(thumbv6m-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf
    riscv32imc-unknown-none-elf riscv32imac-unknown-none-elf
    aarch64-unknown-none x86_64-unknown-none wasm32-unknown-unknown)
for target in "${targets[@]}"; do
    cargo build --lib --release --no-default-features --target "$target"
done
cargo build --lib --release --no-default-features --features defmt --target thumbv7em-none-eabihf
# Configuration builds without std (serde with `alloc`): the feature is
# no_std; a firmware that parses its limits needs only an allocator.
cargo build --lib --release --no-default-features --features serde --target aarch64-unknown-none
# UEFI x86_64 takes the bare-metal path too (src/sync/loom.rs, `pair_atomic!`).
cargo build --lib --release --no-default-features --target x86_64-unknown-uefi
# Bare-metal x86_64 with `cmpxchg16b` at compile time: the keyed slots are
# portable-atomic's inline 16-byte atomics instead of a critical section.
# (A target directory of its own: other RUSTFLAGS would rebuild the rest.)
RUSTFLAGS="-C target-feature=+cmpxchg16b" CARGO_TARGET_DIR=target/x86_64-cmpxchg16b \
    cargo build --lib --release --no-default-features --target x86_64-unknown-none

# Per target and per kind of state: "native" (links with no critical-section
# implementation) or "section" (needs one: the link fails on
# _critical_section_1_0_acquire, or on wasm32 the symbol is left as an
# import). The firmware guide's table (src/firmware.rs) states the same.
kinds=(state-word keyed sliding-log wide-bucketed)
declare -A expect=(
    [thumbv6m-none-eabi]="section section section section"
    [thumbv7em-none-eabihf]="section section section section"
    [thumbv8m.main-none-eabihf]="section section section section"
    [riscv32imc-unknown-none-elf]="section section section section"
    [riscv32imac-unknown-none-elf]="section section section section"
    [aarch64-unknown-none]="native native section section"
    [x86_64-unknown-none]="native section section section"
    [wasm32-unknown-unknown]="native section section section"
)
unset CARGO_TARGET_DIR
cd examples/bare-metal
cargo fmt --check
cargo clippy --locked --release --target thumbv8m.main-none-eabihf --features keyed,cortex-m-cs -- -D warnings

# What a link of the check binary for `target` with `features` needs.
link_needs() { # target features [target-dir]
    local target=$1 features=$2 dir=${3:-target} out artifact
    if out=$(CARGO_TARGET_DIR=$dir cargo build --locked --quiet --release --target "$target" \
        --features "$features" 2>&1); then
        artifact=$dir/$target/release/bare-metal-link
        [[ $target == wasm32-* ]] && artifact+=.wasm
        [[ -f $artifact ]] || { echo "FAIL: no $artifact" >&2; exit 1; }
        if grep -q _critical_section_1_0_acquire "$artifact"; then echo section; else echo native; fi
    elif printf '%s\n' "$out" | grep -q "undefined symbol: _critical_section_1_0_acquire"; then
        echo section
    else
        printf '%s\n' "$out" >&2
        echo "FAIL: the $features check binary failed for another reason on $target" >&2
        exit 1
    fi
}

check() { # target kind expected [target-dir]
    local got
    got=$(link_needs "$1" "$2" "${4:-}")
    [[ $got == "$3" ]] || { echo "FAIL: $1, $2: expected $3, got $got"; exit 1; }
}

for target in "${targets[@]}"; do
    read -r -a want <<<"${expect[$target]}"
    for i in 0 1 2 3; do
        check "$target" "${kinds[$i]}" "${want[$i]}"
    done
    printf '%-30s state word: %-8s keyed: %-8s sliding log: %-8s wide bucketed: %s\n' \
        "$target" "${want[@]}"
done
RUSTFLAGS="-C target-feature=+cmpxchg16b" check x86_64-unknown-none keyed native target/cmpxchg16b
echo "x86_64-unknown-none, +cmpxchg16b: keyed: native"

# The implementations the guide names link (the other Cortex-M and RISC-V
# targets link theirs in scripts/stages/60-firmware.sh).
cargo build --locked --quiet --release --target thumbv8m.main-none-eabihf --features keyed,cortex-m-cs
cargo build --locked --quiet --release --target riscv32imac-unknown-none-elf --features keyed,riscv-cs
echo "thumbv8m.main with cortex-m's and riscv32imac with riscv's critical section: linked"
