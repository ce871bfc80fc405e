"""Checks that each crate's declared `rust-version` is honest: at least the
highest `rust-version` in its normal dependency closure, as locked, with
the features its users start from (the defaults) and with the features
its manifest says need more (a `# rust-version with FEATURE: X.Y` line).

    python3 tools/msrv.py
"""
import json
import re
import subprocess
import sys


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def closure(package, features):
    args = ["cargo", "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none",
            "--format", "{p}"]
    if features:
        args += ["--features", features]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return {" ".join(line.split(" ")[:2]) for line in out.splitlines() if line.strip()}


meta = json.loads(subprocess.run(["cargo", "metadata", "--locked", "--format-version", "1"],
                                 capture_output=True, text=True, check=True).stdout)
rust_version = {f"{p['name']} v{p['version']}": p.get("rust_version") for p in meta["packages"]}
failed = False
for package in meta["packages"]:
    if package["id"] not in meta["workspace_members"]:
        continue
    name, declared = package["name"], package.get("rust_version")
    manifest = open(package["manifest_path"], encoding="utf-8").read()
    checks = [("", declared)]
    checks += re.findall(r"# rust-version with ([\w,-]+): ([\d.]+)", manifest)
    for features, claimed in checks:
        needed = max(((rust_version[p], p) for p in closure(name, features)
                      if rust_version.get(p) and not p.startswith(name + " ")),
                     key=lambda x: version_key(x[0]))
        ok = version_key(claimed) >= version_key(needed[0])
        failed |= not ok
        print(f"{name} ({features or 'default features'}): declares {claimed}, "
              f"dependencies need {needed[0]} ({needed[1]}){'' if ok else '  FAIL'}")
sys.exit(1 if failed else 0)
