#!/usr/bin/env python3
"""Inspect the compiled admit/deny path of a firmware ELF (Arm Thumb or RISC-V).

Usage: firmware-disasm.py OBJDUMP ELF [ROOT_SYMBOL]

Disassembles ELF with llvm-objdump, walks every function reachable from
ROOT_SYMBOL (default `cellrate_check_n`) through calls and tail calls, and

* fails (exit 1) if any of them is a division, floating-point or panic
  routine of the runtime (`__aeabi_uldivmod`, `__udivdi3`, `__aeabi_fadd`,
  `core::panicking::…`) or contains a hardware divide or floating-point
  arithmetic instruction;
* finds every critical section of the path: from the instruction that masks
  interrupts (`cpsid i` on Arm, `csrrci …, mstatus, 0x8` on RISC-V) or a
  call to `_critical_section_1_0_acquire` (builds without LTO), to the one
  that restores them (`msr primask` / `cpsie i`, `csrs mstatus, …`) or the
  call to `_critical_section_1_0_release`;
* fails if a critical section calls, directly or through its callees, a
  memory-copy routine (`memcpy`, `memmove`, `memset`, `__aeabi_memcpy`, …)
  or any of the forbidden routines above: only the update may run with
  interrupts masked;
* prints the worst-case number of instructions executed inside each
  critical section, along the longest path of the control-flow graph,
  counting called functions' own longest paths, and a last line
  `worst critical section: N instructions` for the stage script. A loop
  inside a critical section makes the bound infinite and fails the check.
"""
import re
import subprocess
import sys

FORBIDDEN_CALLS = re.compile(
    r"^__\w*(div|mod)|div_rem|::(div|rem)|__aeabi_[fd]|__aeabi_[il]2[fd]|"
    r"(add|sub|mul|div|neg|cmp|eq|ne|lt|le|gt|ge|unord)[sd]f[23]|"
    r"__float|__fix|__extend|__trunc|sqrt|panic|unwrap_failed|expect_failed|"
    r"slice_(start|end)_index|index_out_of_bounds"
)
FORBIDDEN_INSNS = re.compile(
    r"^(udiv|sdiv|vdiv|vsqrt|vcvt|vadd\.f|vsub\.f|vmul\.f|vfma|vnmul|vcmp)"
    # RISC-V: the M extension's divisions, and any F/D arithmetic.
    r"|^(div|divu|rem|remu|divw|divuw|remw|remuw)$|^f(add|sub|mul|div|sqrt|madd|msub|cvt)\."
)
# Block copies and fills: never with interrupts masked.
MEMORY_CALLS = re.compile(r"^(__aeabi_mem|mem(cpy|move|set|cmp)$|__(memcpy|memmove|memset)|compiler_builtins::mem)")
ACQUIRE = "_critical_section_1_0_acquire"
RELEASE = "_critical_section_1_0_release"

RISCV_COND = re.compile(r"b(eq|ne|lt|ge|ltu|geu|gt|le|gtu|leu)z?")

FUNC_RE = re.compile(r"^([0-9a-f]+) <(.+)>:$")
INSN_RE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
TARGET_RE = re.compile(r"(?:0x)?([0-9a-f]+) <([^>+]+)(?:\+0x([0-9a-f]+))?>")


ARCH = "arm"


def disassemble(objdump, elf):
    global ARCH
    out = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", "--demangle", elf],
        check=True, capture_output=True, text=True,
    ).stdout
    if "riscv" in out[:400]:
        ARCH = "riscv"
    funcs, current = {}, None
    for line in out.splitlines():
        m = FUNC_RE.match(line)
        if m:
            current = m.group(2)
            funcs[current] = []
            continue
        m = INSN_RE.match(line)
        if m and current is not None:
            addr, mnem, ops = int(m.group(1), 16), m.group(2), m.group(3)
            if mnem.startswith((".word", ".short", ".byte", "<unknown>")):
                continue
            funcs[current].append((addr, mnem, ops.split("@")[0].strip()))
    return funcs


def is_return(mnem, ops):
    if ARCH == "riscv":
        return mnem in ("ret", "mret") or (mnem == "jr" and ops == "ra")
    if mnem in ("bx",) and ops == "lr":
        return True
    if mnem.startswith(("pop", "ldm")) and "pc" in ops:
        return True
    return False


def branch(mnem, ops):
    """(kind, target address, target symbol) of a branch, else None."""
    if ARCH == "riscv":
        return branch_riscv(mnem, ops)
    base = mnem.split(".")[0]
    m = TARGET_RE.search(ops)
    if base in ("bl", "blx"):
        return ("call", int(m.group(1), 16) if m else None, m.group(2) if m else None)
    if base in ("cbz", "cbnz") or re.fullmatch(r"b(eq|ne|hs|cs|lo|cc|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)?", base):
        if not m:
            return ("indirect", None, None)
        kind = "jump" if base == "b" else "cond"
        return (kind, int(m.group(1), 16), m.group(2))
    if base in ("bx", "blx", "tbb", "tbh") or (base in ("mov", "ldr") and ops.startswith("pc")):
        return ("indirect", None, None)
    return None


SYM_RE = re.compile(r"<([^>+]+)(?:\+0x([0-9a-f]+))?>")


def branch_riscv(mnem, ops):
    m = TARGET_RE.search(ops)
    target = (int(m.group(1), 16), m.group(2)) if m else (None, None)
    if mnem == "jalr" and not m:
        # `auipc ra, …; jalr off(ra) <sym>`: objdump names the callee only.
        m = SYM_RE.search(ops)
        target = (None, m.group(1)) if m and not m.group(2) else (None, None)
    if mnem in ("call", "jal") or (mnem == "jalr" and "(ra)" in ops and m):
        # `jal <sym>` links ra; `auipc ra, …; jalr off(ra) <sym>` is a call.
        if mnem == "jal" and "," in ops and not ops.startswith("ra"):
            return ("jump",) + target  # jal with another link register
        return ("call",) + target if m else ("indirect", None, None)
    if mnem in ("j", "tail"):
        return ("jump",) + target if m else ("indirect", None, None)
    if mnem == "jr" and not m:
        # `auipc t1, …; jr off(t1) <sym>`: a tail call.
        m = SYM_RE.search(ops)
        if m and not m.group(2):
            return ("jump", None, m.group(1))
    if mnem in ("jr", "jalr"):
        return ("indirect", None, None)
    if RISCV_COND.fullmatch(mnem):
        return ("cond",) + target if m else ("indirect", None, None)
    return None


def masks_interrupts(mnem, ops):
    if ARCH == "riscv":
        return (mnem == "csrrci" and re.search(r"mstatus, 0x8$", ops)) or (
            mnem == "csrci" and re.search(r"mstatus, 0x8$", ops))
    return mnem == "cpsid" and ops.startswith("i")


def is_call_to(mnem, ops, name):
    b = branch(mnem, ops)
    return bool(b) and b[0] in ("call", "jump") and b[2] == name


class Analysis:
    def __init__(self, funcs):
        self.funcs = funcs
        self.cost_cache = {}
        self.problems = []

    def walk(self, fname):
        """Indices of the instructions of `fname` reachable from its entry
        (padding after a return is not), and the functions they call or
        tail-call."""
        insns = self.funcs[fname]
        by_addr = {a: i for i, (a, _, _) in enumerate(insns)}
        seen, callees, todo = set(), set(), [0] if insns else []
        while todo:
            i = todo.pop()
            if i in seen or i >= len(insns):
                continue
            seen.add(i)
            _, mnem, ops = insns[i]
            if is_return(mnem, ops):
                continue
            b = branch(mnem, ops)
            if b is None or b[0] == "call":
                if b and b[2]:
                    callees.add(b[2])
                todo.append(i + 1)
                continue
            kind, target, sym = b
            if kind == "indirect":
                continue
            if sym == fname and target in by_addr:
                todo.append(by_addr[target])
            elif sym:
                callees.add(sym)
            if kind == "cond":
                todo.append(i + 1)
        return seen, callees

    def reachable(self, root):
        """Function name -> reachable instruction indices, for every
        function reachable from `root`."""
        result, todo = {}, [root]
        while todo:
            f = todo.pop()
            if f in result or f not in self.funcs:
                continue
            seen, callees = self.walk(f)
            result[f] = seen
            todo.extend(callees)
        return result

    def successors(self, fname, index):
        insns = self.funcs[fname]
        addr, mnem, ops = insns[index]
        by_addr = {a: i for i, (a, _, _) in enumerate(insns)}
        if is_return(mnem, ops):
            return [], 0
        b = branch(mnem, ops)
        extra = 0
        succ = []
        if b is None or b[0] == "call":
            if b and b[0] == "call":
                extra = self.function_cost(b[2])
            if index + 1 < len(insns):
                succ.append(index + 1)
            return succ, extra
        kind, target, sym = b
        if kind == "indirect":
            if not MEMORY_CALLS.search(fname):  # flagged where they are called
                self.problems.append(f"{fname}: indirect branch at {addr:#x} ({mnem} {ops})")
            return [], 0
        if sym == fname and target in by_addr:
            succ.append(by_addr[target])
        elif sym != fname:
            extra = self.function_cost(sym)  # a tail call: its cost, then return
        if kind == "cond" and index + 1 < len(insns):
            succ.append(index + 1)
        return succ, extra

    def longest(self, fname, start, stop=None):
        """Longest instruction count from `start` to a return (or to the
        first instruction satisfying `stop`, counted), None on a loop."""
        memo, onstack = {}, set()

        def go(i):
            if i in memo:
                return memo[i]
            if i in onstack:
                raise RecursionError
            onstack.add(i)
            _, mnem, ops = self.funcs[fname][i]
            if stop and stop(self.funcs[fname], i):
                result = 1
            else:
                succ, extra = self.successors(fname, i)
                result = 1 + extra + max((go(s) for s in succ), default=0)
            onstack.discard(i)
            memo[i] = result
            return result

        try:
            return go(start)
        except RecursionError:
            return None

    def function_cost(self, fname):
        if fname in self.cost_cache:
            return self.cost_cache[fname]
        if fname not in self.funcs:
            self.problems.append(f"call to unknown function {fname}")
            return 0
        self.cost_cache[fname] = 0  # recursion guard
        cost = self.longest(fname, 0)
        if cost is None:
            if not MEMORY_CALLS.search(fname):  # flagged where they are called
                self.problems.append(f"{fname} contains a loop: no static bound")
            cost = 0
        self.cost_cache[fname] = cost
        return cost


def calls_inside(a, fname, start):
    """Names of the functions called between `start` and the end of its
    critical section, on any path."""
    insns = a.funcs[fname]
    by_addr = {ad: i for i, (ad, _, _) in enumerate(insns)}
    seen, calls, todo = set(), {}, [start]
    while todo:
        i = todo.pop()
        if i in seen or i >= len(insns):
            continue
        seen.add(i)
        addr, mnem, ops = insns[i]
        if i != start and ends_section(insns, i) or is_return(mnem, ops):
            continue
        b = branch(mnem, ops)
        if b and b[0] == "call":
            calls[addr] = b[2]
        if b and b[0] in ("jump", "cond") and b[2] == fname and b[1] in by_addr:
            todo.append(by_addr[b[1]])
        if not b or b[0] in ("call", "cond"):
            todo.append(i + 1)
    return sorted(calls.values())


def describe(names):
    return ", ".join(f"{n} x{names.count(n)}" for n in sorted(set(names))) or "none"


def restores(mnem, ops):
    if is_call_to(mnem, ops, RELEASE):
        return True
    if ARCH == "riscv":
        return mnem in ("csrs", "csrsi", "csrw") and ops.startswith("mstatus")
    return (mnem == "msr" and ops.startswith("primask")) or mnem == "cpsie"


def ends_section(insns, i):
    """Whether instruction `i` ends a critical section: it restores the
    interrupt state, or (RISC-V, `restore-state-bool`) it is the branch that
    skips the restore when interrupts were masked before the section."""
    _, mnem, ops = insns[i]
    if restores(mnem, ops):
        return True
    b = branch(mnem, ops)
    if b and b[0] == "cond" and b[1] is not None:
        for j in range(i + 1, min(i + 3, len(insns) - 1)):
            if restores(insns[j][1], insns[j][2]) and insns[j + 1][0] == b[1]:
                return True
    return False


def starts_section(mnem, ops):
    return masks_interrupts(mnem, ops) or is_call_to(mnem, ops, ACQUIRE)


def calls_closure(a, names):
    """Every function reachable from `names` through calls (names included)."""
    seen, todo = set(), list(names)
    while todo:
        f = todo.pop()
        if f in seen or f is None:
            continue
        seen.add(f)
        if f in a.funcs:
            todo.extend(a.walk(f)[1])
    return seen


def main():
    objdump, elf = sys.argv[1], sys.argv[2]
    root = sys.argv[3] if len(sys.argv) > 3 else "cellrate_check_n"
    funcs = disassemble(objdump, elf)
    if root not in funcs:
        print(f"FAIL: {root} not found in {elf}")
        return 1
    a = Analysis(funcs)
    ok = True
    live = a.reachable(root)
    reach = sorted(live)
    print(f"{elf}: {root} reaches {len(reach)} function(s): {', '.join(reach)}")
    for f in reach:
        if f != root and FORBIDDEN_CALLS.search(f):
            print(f"FAIL: the admit/deny path calls {f}")
            ok = False
        for i in sorted(live[f]):
            addr, mnem, ops = funcs[f][i]
            if FORBIDDEN_INSNS.match(mnem):
                print(f"FAIL: {f} has `{mnem} {ops}` at {addr:#x}")
                ok = False
    sections = []
    for f in reach:
        if f in (ACQUIRE, RELEASE):
            continue  # their mask and unmask are counted at the call sites
        for i in sorted(live[f]):
            addr, mnem, ops = funcs[f][i]
            if starts_section(mnem, ops):
                n = a.longest(f, i, ends_section)
                calls = [c for c in calls_inside(a, f, i) if c not in (ACQUIRE, RELEASE)]
                for g in sorted(calls_closure(a, calls)):
                    if MEMORY_CALLS.search(g) or FORBIDDEN_CALLS.search(g):
                        print(f"FAIL: the critical section at {f}+{addr:#x} calls {g} "
                              "with interrupts masked")
                        ok = False
                if n is None:
                    print(f"FAIL: a loop inside the critical section at {f}+{addr:#x}")
                    ok = False
                else:
                    sections.append((n, f, addr, describe(calls)))
    for f in reach:
        if f != root:
            print(f"called: {f}, longest path {a.function_cost(f)} instructions")
    for n, f, addr, calls in sections:
        print(f"critical section at {addr:#x} in {f}: at most {n} instructions, "
              f"mask to unmask inclusive; calls inside: {calls}")
    if sections:
        print(f"worst critical section: {max(s[0] for s in sections)} instructions")
    else:
        print("no critical section on the path (native atomics)")
    for p in a.problems:
        print(f"FAIL: {p}")
        ok = False
    print("disassembly check:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
