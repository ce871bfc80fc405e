#!/usr/bin/env python3
"""Prints the import cycles between sibling modules of the crate.

    python3 tools/modcycles.py [SRC]     (default: src)

Reads every `crate::…`, `super::…` and `self::…` path in the code of each
file under SRC (`use` lines and paths in expressions; comments skipped) and
draws an edge from the file's module to the module the path names (the
longest prefix that is a module; a name the parent re-exports with
`pub use` counts as the module it comes from). Edges are then lifted to
siblings: an edge `a::x → b::y` is an edge between the children of the
deepest module containing both (`a → b` at the crate root, `x → y` when
a = b). A child naming its own ancestor (`use super::Item`) is structure,
not a cycle. Prints each strongly connected set of siblings with more than
one member, with the edges that make it, and exits 1 if there is any.
"""
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "src"
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]*);", re.S)


def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


files = {}
for root, _, names in os.walk(SRC):
    for name in names:
        if name.endswith(".rs"):
            path = os.path.join(root, name)
            files[module_of(path)] = path
modules = set(files)


def code(text):
    """The text without comments (line comments and doc comments)."""
    return "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())


def flatten(tree):
    """`a::{b, c::{d, e}}` as the paths a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, 0, []
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    head, body = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    for i, ch in enumerate(body + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            if body[start:i]:
                parts.append(body[start:i])
            start = i + 1
    return [p for part in parts for p in flatten(head + part)]


# Names each module re-exports (`pub use self::x::Name` / `pub use x::Name`).
reexports = {}
for mod, path in files.items():
    text = code(open(path, encoding="utf-8").read())
    for m in re.finditer(r"\bpub\s+use\s+([^;]*);", text, re.S):
        for p in flatten(m.group(1)):
            segs = [s for s in p.split("::") if s and s != "self"]
            if segs and segs[0] not in ("crate", "super") and len(segs) >= 2:
                name = segs[-1].split(" as ")[-1]
                reexports[(mod, name)] = mod + tuple(segs[:-1])


def resolve(mod, segs):
    """The module a path from `mod` names."""
    kind, rest = segs[0], segs[1:]
    if kind == "crate":
        base = ()
    elif kind == "super":
        base = mod[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    else:
        base = mod
    target = base
    for s in rest:
        if target + (s,) in modules:
            target = target + (s,)
        else:
            target = reexports.get((target, s), target)
            break
    while target not in modules and target:
        target = target[:-1]
    return target


edges = {}
for mod, path in files.items():
    text = code(open(path, encoding="utf-8").read())
    paths = []
    for m in USE_GROUP.finditer(text):
        paths += [p for p in flatten(m.group(1)) if p.split("::")[0] in ("crate", "super", "self")]
    text = USE_GROUP.sub("", text)
    paths += [m.group(0) for m in PATH.finditer(text)]
    for p in paths:
        segs = [s.split(" as ")[0] for s in p.split("::") if s]
        target = resolve(mod, segs)
        if target == mod:
            continue
        common = 0
        while common < min(len(mod), len(target)) and mod[common] == target[common]:
            common += 1
        if common == len(mod) or common == len(target):
            continue  # an ancestor or a descendant: structure
        a, b = mod[: common + 1], target[: common + 1]
        edges.setdefault(a, {}).setdefault(b, set()).add((mod, target))

# Strongly connected components (Tarjan) over the lifted sibling graph.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(set(edges) | {w for e in edges.values() for w in e}):
    if v not in index:
        visit(v)

name = lambda m: "::".join(m) or "crate"
for comp in sorted(sccs):
    print("cycle:", " <-> ".join(name(m) for m in comp))
    for a in comp:
        for b in comp:
            for src, dst in sorted(edges.get(a, {}).get(b, ())):
                print(f"    {name(src)} -> {name(dst)}")
if sccs:
    sys.exit(1)
print(f"no import cycles between sibling modules ({len(modules)} modules)")
