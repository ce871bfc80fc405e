#!/usr/bin/env python3
"""Simulates where keys land in a compact keyed layout, to size it.

The layout: buckets of five slots (five `u32` keys and five `u64` states in
one 64-byte line, 12.8 bytes a slot). A key may use the first free slot in
the W buckets from its home bucket (a bounded window, as the keyed table's
probe window). Keys arrive once each, homes uniformly at random; no key is
evicted (every key in the benches owes). Prints, per window and load, the
share of keys that find a slot and the table's bytes per tracked key.

This is the memory side of "Sizing, memory and speed" in
docs/design/keyed.md: with windows of three or four buckets the layout holds 16 bytes per
tracked key only at about 85 % load, where 3-4 % of keys find no slot.

usage: docs/design/keyed_placement.py [KEYS]
"""
import random
import sys

SLOT_BYTES = 64 / 5
BUCKET = 5


def place(keys: int, load: float, window: int, rng: random.Random) -> tuple[float, float]:
    buckets = int(keys / load / BUCKET)
    fill = [0] * buckets
    placed = 0
    for _ in range(keys):
        home = rng.randrange(buckets)
        for step in range(window):
            b = (home + step) % buckets
            if fill[b] < BUCKET:
                fill[b] += 1
                placed += 1
                break
    return placed / keys, buckets * BUCKET * SLOT_BYTES / placed


def main() -> None:
    keys = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = random.Random(1)
    print("| window (buckets) | load | keys tracked | bytes per tracked key |")
    print("|---|---|---|---|")
    for window in (1, 2, 3, 4):
        for load in (0.7, 0.75, 0.8, 0.85):
            tracked, per_key = place(keys, load, window, rng)
            print(f"| {window} | {load:.2f} | {tracked * 100:.1f} % | {per_key:.1f} |")


if __name__ == "__main__":
    main()
