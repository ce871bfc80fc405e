#!/usr/bin/env python3
"""Criterion ratios that hold up on a shared, noisy machine.

usage: scripts/bench_rounds.py [--rounds N] BENCH BASELINE_ID ID [ID ...]

Runs the criterion bench target BENCH once per id and round, in rounds that
alternate the baseline with every id (baseline, id1, baseline, id2, ... ),
with short criterion settings. Each id's ratio in a round is its mean
divided by the mean of the baseline run just before it, so a neighbour that
slows the machine for a while moves both sides of a ratio together. Prints,
per id, the median ratio over the rounds and its range.

Example: scripts/bench_rounds.py --rounds 5 gcra floor/cas gcra/check_admit
"""
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"


def run(bench: str, bench_id: str) -> float:
    """Mean time (ns) of one short criterion run of exactly `bench_id`."""
    filt = "^" + bench_id + "$"
    subprocess.run(
        ["cargo", "bench", "--quiet", "--bench", bench, "--", filt,
         "--warm-up-time", "0.5", "--measurement-time", "1.5", "--noplot"],
        cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "CELLRATE_PAIRED": "0"},
    )
    with open(CRITERION / bench_id / "new" / "estimates.json") as f:
        return json.load(f)["mean"]["point_estimate"]


def main() -> None:
    args = sys.argv[1:]
    rounds = 5
    if len(args) >= 2 and args[0] == "--rounds":
        rounds, args = int(args[1]), args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    bench, base_id, ids = args[0], args[1], args[2:]
    subprocess.run(["cargo", "bench", "--quiet", "--bench", bench, "--no-run"],
                   cwd=ROOT, check=True)
    ratios = {i: [] for i in ids}
    for _ in range(rounds):
        for bench_id in ids:
            base = run(bench, base_id)
            ratios[bench_id].append(run(bench, bench_id) / base)
    print(f"| bench | median ratio to `{base_id}` | range over {rounds} rounds |")
    print("|---|---|---|")
    for bench_id in ids:
        r = ratios[bench_id]
        print(f"| `{bench_id}` | {statistics.median(r):.2f}× | {min(r):.2f}–{max(r):.2f} |")


if __name__ == "__main__":
    main()
