#!/usr/bin/env python3
"""Runs a bench's paired-ratio pass several times and summarises it.

usage: scripts/paired_runs.py [--runs N] BENCH [CARGO_ARGS ...]

Each bench under benches/ that includes benches/common/paired.rs prints
`ratio: <name>: <median> (quartiles …)` lines before its criterion groups;
benches/keyed.rs prints its own `ratio:` lines, which this reads too.
On a shared machine a whole run can land in a slow phase (a neighbour on the
same physical core moves every ratio of that run), so this runs only the
paired pass (`--paired-only`, criterion skipped) N times and prints, per
ratio, the median over the runs and the lowest and highest run.

Example: scripts/paired_runs.py --runs 5 gcra
         scripts/paired_runs.py --runs 3 redis --features redis
         scripts/paired_runs.py --runs 5 keyed
"""
import re
import statistics
import subprocess
import sys

# `ratio: <name>: <median> (quartiles …)`, or (benches/keyed.rs)
# `ratio: <case>: governor ÷ contender <median> (quartiles …)`.
LINE = re.compile(r"^ratio: (.+?):? ([0-9.]+) \(quartiles")


def main() -> None:
    args = sys.argv[1:]
    runs = 5
    if len(args) >= 2 and args[0] == "--runs":
        runs, args = int(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    bench, cargo_args = args[0], args[1:]
    results: dict[str, list[float]] = {}
    for _ in range(runs):
        out = subprocess.run(
            ["cargo", "bench", "--quiet", "--bench", bench, *cargo_args, "--", "--paired-only"],
            check=True, capture_output=True, text=True,
        ).stdout
        for line in out.splitlines():
            m = LINE.match(line)
            if m:
                results.setdefault(m.group(1), []).append(float(m.group(2)))
    print(f"| ratio | median of {runs} runs | lowest–highest |")
    print("|---|---|---|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}–{max(values):.2f} |")


if __name__ == "__main__":
    main()
