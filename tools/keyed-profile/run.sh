#!/usr/bin/env bash
# Instructions per keyed check, counted by cachegrind (deterministic, so a
# shared machine does not move it): two runs of each case, 1 and 2 million
# checks, and their difference per check, the setup cancelling out.
# Needs valgrind (`apt-get install valgrind`).
set -euo pipefail
cd "$(dirname "$0")"
cargo build -q --release
bin=${CARGO_TARGET_DIR:-target}/release/keyed-profile
refs() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
        awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}
for case in table step16 slot16; do
    one=$(refs "$case" 1000000)
    two=$(refs "$case" 2000000)
    echo "$case: $(( (two - one) / 1000000 )) instructions per check (the loop's own included)"
done
