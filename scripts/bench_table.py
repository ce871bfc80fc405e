#!/usr/bin/env python3
"""Prints criterion results as a markdown table of ratios to a baseline.

usage: scripts/bench_table.py BASELINE_ID ID [ID ...]
IDs are criterion ids such as floor/cas or gcra/check_admit; the point
estimate of the mean from the last run (target/criterion/<id>/new) is used.
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"


def mean_ns(bench_id: str) -> float:
    path = root / bench_id / "new" / "estimates.json"
    with open(path) as f:
        return json.load(f)["mean"]["point_estimate"]


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base_id, ids = sys.argv[1], sys.argv[2:]
    base = mean_ns(base_id)
    print(f"| bench | mean (ns) | ratio to `{base_id}` |")
    print("|---|---|---|")
    for bench_id in [base_id] + ids:
        ns = mean_ns(bench_id)
        print(f"| `{bench_id}` | {ns:.2f} | {ns / base:.2f}× |")


if __name__ == "__main__":
    main()
