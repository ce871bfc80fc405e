#!/usr/bin/env bash
# Firmware on emulated MCUs and the figures the firmware guide states:
# * the quick starts (examples/firmware/quickstart/*) build and link exactly
#   as documented, for thumbv6m, thumbv7em and riscv32imc, and the README's
#   copies of them are the files; a binary that does not link the
#   critical-section implementation must fail to link;
# * the interrupt-safety hammer under qemu-system-arm (Cortex-M3, M0, M4F)
#   and qemu-system-riscv32 (rv32imc on `virt`), with a racy negative
#   control on each architecture; the duty-cycle radio on the three Arm cores;
# * the admit/deny path at opt-level "s" and "z", with and without LTO: no
#   division, float, panic or memory-copy call with interrupts masked, and
#   the documented bounds (examples/firmware/BOUNDS.md) on critical-section
#   length, flash and RAM; controls prove the checks can fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if ! command -v qemu-system-arm >/dev/null || ! command -v qemu-system-riscv32 >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
        qemu-system-arm qemu-system-misc >/dev/null
fi
rustup target add thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf \
    riscv32imc-unknown-none-elf >/dev/null 2>&1
rustup component add llvm-tools >/dev/null 2>&1
llvm_bin=$(ls -d "$(rustc --print sysroot)"/lib/rustlib/*/bin | head -n1)
objdump=$llvm_bin/llvm-objdump
[[ -x $objdump ]] || { echo "llvm-tools missing under $llvm_bin"; exit 1; }
qemu-system-arm --version | head -n1
qemu-system-riscv32 --version | head -n1

echo "--- host: embedded-hal and embassy-time adapters (mock devices, mock time driver)"
cargo clippy --all-targets --features embedded-hal,embassy-time -- -D warnings
cargo test --features embedded-hal,embassy-time
echo "--- bare metal: the firmware features, with defmt"
for target in thumbv6m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf; do
    cargo build --lib --release --target "$target" --features embedded-hal,embassy-time
done
cargo clippy --lib --target thumbv7em-none-eabihf --features embedded-hal,embassy-time,defmt -- -D warnings

# The firmware crates are workspaces of their own with their own target
# directories. Their lock files are part of the repository: --locked keeps
# the run from rewriting them.
unset CARGO_TARGET_DIR

echo "--- quick starts, built as the README and the firmware guide show them"
# The crate is not published yet: the dependency line `cellrate = "0.1"` is
# pointed at this checkout, as the README tells users to do until then.
patch=(--config "patch.crates-io.cellrate.path=\"$root\"")
python3 - "$root" <<'PY'
# The README's copies of the quick-start files must be the files.
import re, sys
root = sys.argv[1]
readme = open(f"{root}/README.md", encoding="utf-8").read()
blocks = re.findall(r"<!-- file: (\S+) -->\n```[^\n]*\n(.*?)```", readme, re.S)
assert blocks, "no `<!-- file: … -->` blocks in README.md"
for path, text in blocks:
    if open(f"{root}/{path}", encoding="utf-8").read() != text:
        sys.exit(f"FAIL: README.md's copy of {path} differs from the file")
    print(f"README.md shows {path} as it is")
PY
(
    cd examples/firmware/quickstart/cortex-m
    cargo fmt --check
    for target in thumbv6m-none-eabi thumbv7em-none-eabihf; do
        cargo clippy --release --target "$target" "${patch[@]}" -- -D warnings
        cargo build --release --target "$target" "${patch[@]}"
    done
)
(
    cd examples/firmware/quickstart/riscv
    cargo fmt --check
    cargo clippy --release "${patch[@]}" -- -D warnings
    cargo build --release "${patch[@]}"
)

cd examples/firmware
cargo fmt --check
features=()
if grep -q '^pub mod window;' "$root/src/lib.rs"; then
    features=(--features window)
fi
cargo clippy --locked --release --target thumbv7m-none-eabi --bins "${features[@]}" -- -D warnings
riscv_bins=(--bin hammer --bin footprint_base --bin footprint_gcra --bin footprint_static
    --bin disasm_control --bin disasm_memcpy_control)
cargo clippy --locked --release --target riscv32imc-unknown-none-elf "${riscv_bins[@]}" \
    "${features[@]}" -- -D warnings

echo "--- control: a binary that does not link the critical-section implementation must not link"
# (Cortex-M only: cortex-m-rt does not depend on cortex-m, so without the
# `use cortex_m as _;` line nothing links it. riscv-rt links `riscv` itself.)
for target in thumbv6m-none-eabi thumbv7em-none-eabihf; do
    if out=$(cargo build --locked --release --target "$target" --bin footprint_gcra \
        --features unlinked-control 2>&1); then
        echo "FAIL: footprint_gcra linked on $target without a critical-section implementation"
        exit 1
    fi
    printf '%s\n' "$out" | grep -q "undefined symbol: _critical_section_1_0_acquire" || {
        printf '%s\n' "$out"
        echo "FAIL: the unlinked build failed for another reason on $target"
        exit 1
    }
    echo "$target: undefined symbol _critical_section_1_0_acquire, as it must be"
done

declare -A cpu=([thumbv7m-none-eabi]=cortex-m3 [thumbv6m-none-eabi]=cortex-m0
    [thumbv7em-none-eabihf]=cortex-m4)
declare -A machine=([thumbv7m-none-eabi]=lm3s6965evb [thumbv6m-none-eabi]=lm3s6965evb
    [thumbv7em-none-eabihf]=mps2-an386)

# Runs one firmware binary under qemu; its exit code is the firmware's.
run() { # target binary-path
    if [[ $1 == riscv32* ]]; then
        timeout -k 5 120 qemu-system-riscv32 -machine virt -bios none -nographic \
            -monitor none -serial stdio -kernel "$2"
    else
        timeout -k 5 120 qemu-system-arm -machine "${machine[$1]}" -cpu "${cpu[$1]}" \
            -nographic -monitor none -serial none \
            -semihosting-config enable=on,target=native -kernel "$2"
    fi
}

run_bin() { # target bin
    local out code
    out=$(run "$1" "target/$1/release/$2") || {
        code=$?
        printf '%s\n' "$out"
        echo "FAIL: $2 on $1 exited with $code (124: timed out)"
        exit 1
    }
    if [[ $2 == radio ]]; then
        printf '%s\n' "$out" | head -n 12
        echo "  [...]"
    fi
    printf '%s\n' "$out" | grep -v -E "^ *[0-9]+ ms |^radio on" || true
}

for target in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf; do
    echo "--- $target (${cpu[$target]} on ${machine[$target]})"
    cargo build --locked --release --target "$target" --bins "${features[@]}"
    run_bin "$target" hammer
    run_bin "$target" radio
done
echo "--- riscv32imc-unknown-none-elf (rv32imc on virt)"
cargo build --locked --release --target riscv32imc-unknown-none-elf "${riscv_bins[@]}" "${features[@]}"
run_bin riscv32imc-unknown-none-elf hammer

# Negative control: a limiter with a lost-update race must be caught.
for target in thumbv7m-none-eabi riscv32imc-unknown-none-elf; do
    echo "--- negative control on $target: a racy limiter must fail the hammer"
    cargo build --locked --release --target "$target" --bin hammer --features racy-control
    caught=no
    for attempt in 1 2 3 4 5; do
        if out=$(run "$target" "target/$target/release/hammer"); then
            echo "attempt $attempt: the race went unnoticed"
        elif printf '%s\n' "$out" | grep -q "^FAIL racy"; then
            printf '%s\n' "$out" | grep "^FAIL"
            caught=yes
            break
        else
            printf '%s\n' "$out"
            echo "FAIL: the control failed for another reason"
            exit 1
        fi
    done
    [[ $caught == yes ]] || { echo "FAIL: the hammer did not catch a racy limiter on $target"; exit 1; }
    # Leave the real hammer binary in place.
    cargo build --locked --release --target "$target" --bin hammer "${features[@]}"
done

echo "--- the admit/deny path at every documented build setting"
targets=(thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf)
for target in "${targets[@]}"; do
    for profile in release s-nolto z-lto z-nolto; do
        cargo build --locked --profile "$profile" --target "$target" --bin footprint_base \
            --bin footprint_gcra --bin footprint_static --bin disasm_control --bin disasm_memcpy_control
    done
done
for target in "${targets[@]}"; do
    for profile in release z-nolto; do
        dir=target/$target/$profile
        # The checks must be able to fail: `remaining()` divides, and the
        # memcpy control copies a table with interrupts masked.
        if python3 "$root/scripts/firmware-disasm.py" "$objdump" "$dir/disasm_control" \
            cellrate_check_remaining >/dev/null; then
            echo "FAIL: the disassembly check missed the division in Decision::remaining ($target, $profile)"
            exit 1
        fi
        if out=$(python3 "$root/scripts/firmware-disasm.py" "$objdump" "$dir/disasm_memcpy_control" \
            cellrate_copy_in_section); then
            echo "FAIL: the disassembly check missed a memcpy inside a critical section ($target, $profile)"
            exit 1
        fi
        printf '%s\n' "$out" | grep -q "calls .*mem.*with interrupts masked" || {
            printf '%s\n' "$out"
            echo "FAIL: the memcpy control failed for another reason ($target, $profile)"
            exit 1
        }
    done
done
echo "controls: the division and the masked memcpy are flagged on every target"
python3 "$root/scripts/firmware-disasm.py" "$objdump" \
    target/thumbv6m-none-eabi/release/footprint_gcra
python3 "$root/scripts/firmware-bounds.py" "$llvm_bin" . BOUNDS.md
