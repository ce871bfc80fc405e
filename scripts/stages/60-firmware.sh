#!/usr/bin/env bash
# Firmware on an emulated MCU: the interrupt-safety hammer and the duty-cycle
# radio under qemu-system-arm (Cortex-M3, Cortex-M0, Cortex-M4F), the disassembly
# check of the admit/deny path (no division, no floating point, no panic;
# worst-case critical-section length) and the flash footprint.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if ! command -v qemu-system-arm >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends qemu-system-arm >/dev/null
fi
rustup target add thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf \
    riscv32imc-unknown-none-elf >/dev/null 2>&1
rustup component add llvm-tools >/dev/null 2>&1
llvm_bin=$(ls -d "$(rustc --print sysroot)"/lib/rustlib/*/bin | head -n1)
objdump=$llvm_bin/llvm-objdump
size=$llvm_bin/llvm-size
[[ -x $objdump && -x $size ]] || { echo "llvm-tools missing under $llvm_bin"; exit 1; }
qemu-system-arm --version | head -n1

echo "--- host: embedded-hal and embassy-time adapters (mock devices, mock time driver)"
cargo clippy --all-targets --features embedded-hal,embassy-time -- -D warnings
cargo test --features embedded-hal,embassy-time
echo "--- bare metal: the firmware features, with defmt"
for target in thumbv6m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf; do
    cargo build --lib --release --target "$target" --features embedded-hal,embassy-time
done
cargo clippy --lib --target thumbv7em-none-eabihf --features embedded-hal,embassy-time,defmt -- -D warnings

# The firmware crate is its own workspace with its own target directory.
cd examples/firmware
unset CARGO_TARGET_DIR
cargo fmt --check
cargo clippy --release --target thumbv7m-none-eabi --bins -- -D warnings
if grep -q '^pub mod window;' "$root/src/lib.rs"; then
    cargo clippy --release --target thumbv7m-none-eabi --bins --features window -- -D warnings
fi
declare -A cpu=([thumbv7m-none-eabi]=cortex-m3 [thumbv6m-none-eabi]=cortex-m0
    [thumbv7em-none-eabihf]=cortex-m4)
declare -A machine=([thumbv7m-none-eabi]=lm3s6965evb [thumbv6m-none-eabi]=lm3s6965evb
    [thumbv7em-none-eabihf]=mps2-an386)

# Runs one firmware binary under qemu; its exit code is the firmware's.
run() { # target binary-path
    timeout -k 5 120 qemu-system-arm -machine "${machine[$1]}" -cpu "${cpu[$1]}" \
        -nographic -monitor none -serial none \
        -semihosting-config enable=on,target=native -kernel "$2"
}

# The hammer adds cellrate's FixedWindow when the library has one.
features=()
if grep -q '^pub mod window;' "$root/src/lib.rs"; then
    features=(--features window)
fi
for target in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf; do
    echo "--- $target (${cpu[$target]} on ${machine[$target]})"
    cargo build --release --target "$target" --bins "${features[@]}"
    for bin in hammer radio; do
        out=$(run "$target" "target/$target/release/$bin") || {
            code=$?
            printf '%s\n' "$out"
            echo "FAIL: $bin on ${cpu[$target]} exited with $code (124: timed out)"
            exit 1
        }
        if [[ $bin == radio ]]; then
            printf '%s\n' "$out" | head -n 12
            echo "  [...]"
        fi
        printf '%s\n' "$out" | grep -v -E "^ *[0-9]+ ms |^radio on" || true
    done
done

# Negative control: a limiter with a lost-update race must be caught.
echo "--- negative control: a racy limiter must fail the hammer"
cargo build --release --target thumbv7m-none-eabi --bin hammer --features racy-control
caught=no
for attempt in 1 2 3; do
    if out=$(run thumbv7m-none-eabi target/thumbv7m-none-eabi/release/hammer); then
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
[[ $caught == yes ]] || { echo "FAIL: the hammer did not catch a racy limiter"; exit 1; }
# Leave the real hammer binary in place.
cargo build --release --target thumbv7m-none-eabi --bin hammer "${features[@]}"

echo "--- disassembly: the admit/deny path (Gcra::check_n)"
for target in thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf; do
    python3 "$root/scripts/firmware-disasm.py" "$objdump" "target/$target/release/footprint_gcra"
    # The check must be able to fail: `remaining()` divides.
    if python3 "$root/scripts/firmware-disasm.py" "$objdump" \
        "target/$target/release/disasm_control" cellrate_check_remaining >/dev/null; then
        echo "FAIL: the disassembly check missed the division in Decision::remaining on $target"
        exit 1
    fi
done

echo "--- flash footprint (bytes: text + data)"
for target in thumbv6m-none-eabi thumbv7em-none-eabihf; do
    flash() { "$size" -A "target/$target/release/$1" |
        awk '$1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" || $1 == ".data" { s += $2 } END { print s }'; }
    base=$(flash footprint_base)
    gcra=$(flash footprint_gcra)
    echo "$target: minimal firmware $base, with a Gcra check $gcra, difference $((gcra - base))"
done
