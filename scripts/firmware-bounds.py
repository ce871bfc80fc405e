#!/usr/bin/env python3
"""Measure the firmware figures the docs state and enforce their bounds.

Usage: firmware-bounds.py LLVM_BIN_DIR FIRMWARE_DIR BOUNDS_MD

BOUNDS_MD (examples/firmware/BOUNDS.md, which cellrate's firmware guide
includes) holds one table row per target:

    | `target` | core | critical section | flash, constant quota | flash, run-time quota | RAM |

For every target in it and every build setting the bounds hold for (the
firmware crate's profiles `release` = opt-level "s" with LTO, `s-nolto`,
`z-lto`, `z-nolto`, already built), this measures

* the worst critical section: the longest path, in instructions, from the
  instruction that masks interrupts to the one that restores them, over
  `cellrate_check_n` (footprint_gcra) and `cellrate_check_static`
  (footprint_static), as scripts/firmware-disasm.py reports it; that script
  also fails the build on a division, float, panic or memory-copy call;
* flash: the allocated, initialised sections (vector table, code, read-only
  data, initial values of data) of footprint_static and footprint_gcra,
  minus footprint_base's;
* RAM per limiter: the size of the `CELLRATE_LIMITER` symbol.

It prints every measurement and exits 1 if any exceeds its bound, or if a
check of the path fails.
"""
import os
import re
import subprocess
import sys

PROFILES = {
    "release": 'opt-level "s", LTO',
    "s-nolto": 'opt-level "s", no LTO',
    "z-lto": 'opt-level "z", LTO',
    "z-nolto": 'opt-level "z", no LTO',
}
COLUMNS = ["critical section", "flash, constant quota", "flash, run-time quota", "RAM"]


def read_bounds(path):
    bounds = {}
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith("`"):
            continue
        target = cells[0].strip("`")
        numbers = [int(re.sub(r"[^0-9]", "", c)) for c in cells[2:]]
        bounds[target] = dict(zip(COLUMNS, numbers))
    if not bounds:
        sys.exit(f"FAIL: no bounds found in {path}")
    return bounds


def flash(llvm, elf):
    out = subprocess.run([os.path.join(llvm, "llvm-readobj"), "--elf-output-style=GNU", "-S", elf],
                         check=True, capture_output=True, text=True).stdout
    total = 0
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if m and m.group(2) == "PROGBITS" and "A" in m.group(4):
            total += int(m.group(3), 16)
    return total


def symbol_size(llvm, elf, name):
    out = subprocess.run([os.path.join(llvm, "llvm-nm"), "-S", "--defined-only", elf],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == name:
            return int(parts[1], 16)
    sys.exit(f"FAIL: {name} not found in {elf}")


def worst_section(llvm, elf, root):
    disasm = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firmware-disasm.py")
    run = subprocess.run([sys.executable, disasm, os.path.join(llvm, "llvm-objdump"), elf, root],
                         capture_output=True, text=True)
    m = re.search(r"^worst critical section: (\d+) instructions", run.stdout, re.M)
    return run.returncode == 0, int(m.group(1)) if m else 0, run.stdout


def main():
    llvm, firmware, bounds_path = sys.argv[1:4]
    bounds = read_bounds(bounds_path)
    ok = True
    print(f"{'target':<28} {'build':<22} {'crit. section':>13} {'flash const':>11} "
          f"{'flash run-time':>14} {'RAM':>5}")
    for target, bound in bounds.items():
        worst = dict.fromkeys(COLUMNS, 0)
        for profile, label in PROFILES.items():
            d = os.path.join(firmware, "target", target, profile)
            base = flash(llvm, os.path.join(d, "footprint_base"))
            measured = {
                "flash, constant quota": flash(llvm, os.path.join(d, "footprint_static")) - base,
                "flash, run-time quota": flash(llvm, os.path.join(d, "footprint_gcra")) - base,
                "RAM": symbol_size(llvm, os.path.join(d, "footprint_static"), "CELLRATE_LIMITER"),
            }
            cs = 0
            for binary, root in (("footprint_gcra", "cellrate_check_n"),
                                 ("footprint_static", "cellrate_check_static")):
                good, n, report = worst_section(llvm, os.path.join(d, binary), root)
                cs = max(cs, n)
                if not good:
                    print(report)
                    print(f"FAIL: the disassembly check of {binary} ({target}, {label}) failed")
                    ok = False
            measured["critical section"] = cs
            print(f"{target:<28} {label:<22} {cs:>13} {measured['flash, constant quota']:>11} "
                  f"{measured['flash, run-time quota']:>14} {measured['RAM']:>5}")
            for column in COLUMNS:
                worst[column] = max(worst[column], measured[column])
        for column in COLUMNS:
            if worst[column] > bound[column]:
                print(f"FAIL: {target}: {column} measured {worst[column]}, "
                      f"above the documented bound {bound[column]} ({bounds_path})")
                ok = False
            else:
                print(f"  {target}: {column} {worst[column]} <= bound {bound[column]}")
    print("firmware bounds:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
