#!/usr/bin/env bash
# Times a past commit's checks against this working tree's, in one binary.
#
#   tools/ab/run.sh [--aligned] [--runs N] [--write DOC --name NAME] OLD
#
# OLD is any commit (say the one before a change). The script copies it
# (`git archive`) into a scratch directory, gives the copy another package
# version so that Cargo links both, builds `tools/ab/ab.rs` against the two
# and runs it through `tools/bench-runner` (--runs, --write and --name are
# bench-runner's: the median of N runs, written into DOC's
# `<!-- generated:NAME -->` region). `--aligned` builds with every function
# and branch target aligned to 64 bytes, so that where a loop lands does
# not decide the comparison. See docs/design/gcra.md, "Comparing two
# versions of the crate".
#
# The scratch directory is ${CELLRATE_AB_DIR:-${TMPDIR:-/tmp}/cellrate-ab}
# (kept between runs, so a rerun only rebuilds what changed).
set -euo pipefail

root=$(git rev-parse --show-toplevel)
runner_args=()
aligned=false
while [ $# -gt 1 ]; do
    case "$1" in
        --aligned) aligned=true; shift ;;
        --runs | --name) runner_args+=("$1" "$2"); shift 2 ;;
        --write) runner_args+=("$1" "$(realpath "$2")"); shift 2 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: tools/ab/run.sh [--aligned] [--runs N] [--write DOC --name NAME] OLD" >&2
    exit 2
fi
commit=$(git -C "$root" rev-parse --verify --quiet "$1^{commit}") ||
    { echo "run.sh: $1 is not a commit" >&2; exit 2; }

work=${CELLRATE_AB_DIR:-${TMPDIR:-/tmp}/cellrate-ab}
old=$work/old-$commit
if [ ! -f "$old/Cargo.toml" ]; then
    rm -rf "$old" && mkdir -p "$old"
    git -C "$root" archive "$commit" | tar -x -C "$old"
    # Two path dependencies of one name need two versions.
    sed -i '0,/^version = .*/s//version = "0.0.0-ab"/' "$old/Cargo.toml"
fi

crate=$work/crate
mkdir -p "$crate/src"
: > "$crate/src/lib.rs"
criterion=$(grep -m1 '^criterion = ' "$root/Cargo.toml")
cat > "$crate/Cargo.toml" <<TOML
[package]
name = "cellrate-ab"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
old = { path = "$old", package = "cellrate", features = ["std"] }
new = { path = "$root", package = "cellrate", features = ["std"] }
$criterion

[[bench]]
name = "ab"
path = "$root/tools/ab/ab.rs"
harness = false

[workspace]
TOML
[ -f "$crate/Cargo.lock" ] || cp "$root/Cargo.lock" "$crate/Cargo.lock"

# bench-runner itself is built plainly, whatever RUSTFLAGS the bench gets.
env -u RUSTFLAGS -u CARGO_TARGET_DIR \
    cargo build --quiet --release --manifest-path "$root/tools/bench-runner/Cargo.toml"
runner=$root/tools/bench-runner/target/release/bench-runner

cd "$crate"
if $aligned; then
    export RUSTFLAGS="-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=6"
    export CARGO_TARGET_DIR=$work/target-aligned
else
    unset RUSTFLAGS
    export CARGO_TARGET_DIR=$work/target
fi
echo "run.sh: old = $commit, new = the working tree at $root" >&2
exec "$runner" "${runner_args[@]}" ab
