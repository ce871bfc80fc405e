#!/usr/bin/env bash
# The whole test suite, installs included. `.ci/run` calls exactly this.
# Each stage in scripts/stages/ installs what it needs and fails loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
total=$SECONDS
# What `git status` shows before the stages (empty on CI's fresh clone).
in_git=no
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    in_git=yes
    before=$(git status --porcelain)
fi
for stage in scripts/stages/*.sh; do
    echo "=== stage $(basename "$stage")"
    start=$SECONDS
    bash "$stage"
    echo "=== stage $(basename "$stage") ok in $((SECONDS - start)) s"
done
# The suite leaves the tree as it found it: nothing modified, nothing new
# that git would pick up (build output belongs in ignored target dirs). On
# CI's fresh clone this means `git status --porcelain` prints nothing.
if [[ $in_git == yes ]]; then
    after=$(git status --porcelain)
    if [[ "$after" != "$before" ]]; then
        echo "=== FAIL: the stages changed the work tree (git status --porcelain before, after):"
        printf '%s\n' "$before" "---" "$after"
        git diff --stat
        exit 1
    fi
fi
echo "=== all stages ok in $((SECONDS - total)) s"
