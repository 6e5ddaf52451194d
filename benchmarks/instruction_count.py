"""Instructions a row that stage A executes, counted by valgrind: the same count on every run.

On the shared development machines two runs of the spread table can differ by 1.2–1.4×
(benchmarks/README.md), and a change worth 3 % disappears in that noise.  A count of
executed instructions does not drift.  For each cell (row length, logit spread) this runs
one short child process under ``valgrind --tool=callgrind``.  The child computes stage A on
the cell's softmax rows (``certify_throughput.rows``, one thread) and reports where numba's
machine code lies in memory.  This script then adds up the instructions valgrind counted at
those addresses and divides by the rows done.

Two columns come out per side: instructions a row, and callgrind's simulated conditional
branch mispredictions a row (``--branch-sim=yes``).  That simulation uses a simple textbook
predictor, not the real CPU's, so read it as a relative figure between two trees, not as a
cycle cost.  Instructions are not time either: a change that removes instructions off the
critical path can leave the time as it was, so a result still needs a timing
(``stage_a_ab.py``).

The child is given the CPU name and features that numba's LLVM sees on this machine
(``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``).  Without them, LLVM inside valgrind sees the
CPU that valgrind emulates (on a Zen 3 host: ``haswell``, with fewer features), and numba
would compile other code for it.  With them, the child loads the very code that this
script compiles natively first, from numba's cache, so nothing is compiled under valgrind
and the count is of the code a native run executes.

``--base REV`` counts git revision REV's ``numerics/theta_fused.py`` beside this tree's,
as ``stage_a_ab.py`` does, and says whether the two give identical outputs on the cell's
rows.  ``--listing FILE`` writes this tree's stage A machine code for the first cell, each
instruction with its executions a row and its mispredictions, for reading where the
instructions go.

Usage: python benchmarks/instruction_count.py [--base REV] [--Ls 64] [--spreads 0.3,1.0,2.5,5.0]
       [--rows 4096] [--reps 4] [--jobs 2] [--listing FILE]
Needs valgrind (Debian: valgrind) and, for --listing, objdump (binutils).  A child takes
about half a minute on this machine; the children run ``--jobs`` at a time.  Ctrl-C kills
the children still running, prints no table and exits 130.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

WARM_ROWS = 16          # the child's first call, which loads the code, on the cell's first rows
_CHILDREN = set()       # the valgrind children running now (killed on Ctrl-C)
_STOP = []              # non-empty once interrupted


def _fail(msg):
    print(f"instruction_count: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_callgrind(path, ranges):
    """Costs counted by callgrind at instruction addresses inside ``ranges`` ([lo, hi)
    pairs), summed per event: ({event: total}, {address: [costs in event order]}, events).

    Reads the output of ``--dump-instr=yes``: each cost line starts with the position
    columns named by the ``positions:`` header (the instruction address first), written
    absolute (``0x…`` or decimal), relative to the previous line (``+n``, ``-n``) or the
    same (``*``), then one cost per event of the ``events:`` header.  The line that follows
    a ``calls=`` line holds the inclusive cost of a call, already counted at the callee's
    own instructions, so it is left out.
    """
    npos, events = 1, None
    per = {}
    pos = 0
    after_call = False
    with open(path) as fh:
        for line in fh:
            if line.startswith("positions:"):
                npos = len(line.split()[1:])
                continue
            if line.startswith("events:"):
                events = line.split()[1:]
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            if events is None:
                break                   # a cost before any 'events:' line: refused below
            parts = line.split()
            p = parts[0]
            if p.startswith("+"):
                pos += int(p[1:], 0)
            elif p.startswith("-"):
                pos -= int(p[1:], 0)
            elif p != "*":
                pos = int(p, 0)
            if after_call:
                after_call = False
                continue
            if any(lo <= pos < hi for lo, hi in ranges):
                costs = [int(v) for v in parts[npos:]]
                acc = per.setdefault(pos, [0] * len(events))
                for k, v in enumerate(costs):
                    acc[k] += v
    if events is None:
        raise ValueError(f"{path}: no 'events:' line (not a callgrind output file)")
    totals = {e: sum(c[k] for c in per.values()) for k, e in enumerate(events)}
    return totals, per, events


def _child(a):
    # runs under valgrind: stage A on the cell's rows, then where the compiled code lies
    import numba
    import numpy as np

    from certify_throughput import rows
    if a.base_file:
        from stage_a_ab import load_module
        mod = load_module(a.base_file)
    else:
        from numerics import theta_fused as mod
    numba.set_num_threads(1)
    R = rows(a.rows, a.L, seed=a.L, spread=a.spread)
    n, L = R.shape
    M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
    force = np.full(n, -1, np.int8)
    w = min(WARM_ROWS, n)
    mod.stage_a(R[:w], force[:w], 3, 5e-4, 1e-6, M[:w], np.empty((6, w)), st[:w])
    for _ in range(a.reps):
        mod.stage_a(R, force, 3, 5e-4, 1e-6, M, cols, st)
    entry = [ov.library.get_pointer_to_function(ov.fndesc.llvm_func_name)
             for ov in mod._stage_a_ser.overloads.values()]
    with open(a.info, "w") as out:
        out.write(f"rows {w + a.reps * n}\n")
        # the executable mapping that holds stage A's compiled entry: numba links a
        # kernel's whole call tree into one library, and its machine code lies there
        with open("/proc/self/maps") as fh:
            for line in fh:
                f = line.split()
                lo, hi = (int(v, 16) for v in f[0].split("-"))
                if "x" in f[1] and any(lo <= e < hi for e in entry):
                    out.write(f"map {lo:#x} {hi:#x}\n")
                    if a.code:
                        Path(a.code).write_bytes(ctypes.string_at(lo, hi - lo))


def _count(side, base_file, L, spread, a, tmp, env, code=None):
    # one child under callgrind: (instructions a row, mispredictions a row, per-address
    # costs, events, the kernel's mapping)
    tag = f"{side}-{L}-{spread}"
    out, info = Path(tmp) / f"cg.{tag}", Path(tmp) / f"info.{tag}"
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--branch-sim=yes",
           f"--callgrind-out-file={out}", sys.executable, str(Path(__file__).resolve()), "--child",
           "--L", str(L), "--spread", str(spread), "--rows", str(a.rows), "--reps", str(a.reps),
           "--info", str(info)]
    if base_file:
        cmd += ["--base-file", str(base_file)]
    if code:
        cmd += ["--code", str(code)]
    if _STOP:                          # interrupted: start no more children
        return None
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _CHILDREN.add(p)
    try:
        err = p.communicate()[1]
    finally:
        _CHILDREN.discard(p)
    if _STOP:
        return None
    if p.returncode != 0 or not info.exists():
        _fail(f"the child for {side}, L = {L}, spread {spread} failed under valgrind "
              f"(exit {p.returncode}):\n{err[-2000:]}")
    nrows, maps = 0, []
    for line in info.read_text().splitlines():
        f = line.split()
        if f[0] == "rows":
            nrows = int(f[1])
        else:
            maps.append((int(f[1], 16), int(f[2], 16)))
    if not maps:
        _fail(f"the child for {side}, L = {L}, spread {spread} found no mapping of stage A's compiled code")
    totals, per, events = parse_callgrind(out, maps)
    kmap = maps[0]
    out.unlink()
    return totals["Ir"] / nrows, totals.get("Bcm", 0) / nrows, per, events, kmap, nrows


def _listing(path, code, kmap, per, events, nrows):
    # the kernel's mapping disassembled, each instruction with its executions a row
    dis = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f"--adjust-vma={kmap[0]:#x}",
                          str(code)], capture_output=True, text=True, check=True).stdout
    ir, bcm = events.index("Ir"), (events.index("Bcm") if "Bcm" in events else None)
    total = sum(c[ir] for c in per.values()) or 1
    with open(path, "w") as fh:
        fh.write(f"# executions a row ({nrows} rows), simulated mispredictions a row, share of the "
                 f"instructions counted, instruction\n")
        for line in dis.splitlines():
            head = line.strip().split(":", 1)[0]
            try:
                addr = int(head, 16)
            except ValueError:
                continue
            c = per.get(addr)
            x = c[ir] / nrows if c else 0.0
            m = c[bcm] / nrows if (c and bcm is not None) else 0.0
            share = 100.0 * c[ir] / total if c else 0.0
            fh.write(f"{x:9.3f} {m:6.3f} {share:5.2f}% | {line.strip()}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="also count this git revision's numerics/theta_fused.py")
    ap.add_argument("--Ls", default="64", help="row lengths (default 64)")
    ap.add_argument("--spreads", default="0.3,1.0,2.5,5.0", help="logit spreads (default 0.3,1.0,2.5,5.0)")
    ap.add_argument("--rows", type=int, default=4096, help="rows a cell (default 4096)")
    ap.add_argument("--reps", type=int, default=4, help="stage A runs over the rows in a child (default 4)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="children at a time (default: CPUs)")
    ap.add_argument("--listing", help="write this tree's stage A machine code for the first cell to this "
                                      "file, each instruction with its executions a row")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--L", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--spread", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--info", help=argparse.SUPPRESS)
    ap.add_argument("--code", help=argparse.SUPPRESS)
    ap.add_argument("--base-file", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a)
    if a.rows < 1 or a.reps < 1 or a.jobs < 1:
        _fail("--rows, --reps and --jobs must be at least 1")
    try:
        Ls = [int(x) for x in a.Ls.split(",")]
        spreads = [float(x) for x in a.spreads.split(",")]
    except ValueError:
        _fail(f"--Ls takes integers and --spreads numbers, comma-separated (got {a.Ls!r}, {a.spreads!r})")
    if min(Ls) < 1:
        _fail("every row length in --Ls must be at least 1")
    for tool in ("valgrind",) + (("objdump",) if a.listing else ()):
        if shutil.which(tool) is None:
            _fail(f"{tool} not found on PATH (Debian: apt-get install {'valgrind' if tool == 'valgrind' else 'binutils'})")

    import llvmlite.binding as ll
    import numba
    from numba.core.codegen import get_host_cpu_features

    from certify_throughput import rows
    from numerics import theta_fused
    from stage_a_ab import _run, differing_rows, load_base

    numba.set_num_threads(1)
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]),
               NUMBA_CPU_NAME=numba.config.CPU_NAME or ll.get_host_cpu_name(),
               NUMBA_CPU_FEATURES=numba.config.CPU_FEATURES or get_host_cpu_features())
    with tempfile.TemporaryDirectory(prefix="instruction-count-") as tmp:
        base = load_base(a.base, tmp) if a.base else None
        base_file = Path(tmp) / "theta_fused_base.py" if a.base else None
        # compiled natively first (and cached), so the children load this code
        for mod in (theta_fused, base):
            if mod is not None:
                _run(mod, rows(16, 64))
        cells = [(L, sp) for L in Ls for sp in spreads]
        jobs = [("this", None, L, sp) for L, sp in cells] + [("base", base_file, L, sp) for L, sp in cells if base]
        code = Path(tmp) / "kernel.bin"
        ex = ThreadPoolExecutor(max_workers=a.jobs)
        try:
            futs = {j: ex.submit(_count, j[0], j[1], j[2], j[3], a, tmp, env,
                                 code if (a.listing and j[0] == "this" and (j[2], j[3]) == cells[0]) else None)
                    for j in jobs}
            res = {j: f.result() for j, f in futs.items()}
        except KeyboardInterrupt:
            _STOP.append(True)         # the children still running are killed, none is started
            for p in list(_CHILDREN):
                p.kill()
            ex.shutdown(wait=True, cancel_futures=True)
            print("instruction_count: interrupted; nothing printed", file=sys.stderr)
            sys.exit(130)
        ex.shutdown(wait=True)
        print(f"stage A, instructions a row counted by callgrind (valgrind), code compiled for "
              f"{env['NUMBA_CPU_NAME']}; {a.rows} rows x {a.reps} runs a cell, one thread; "
              f"'mispred.': callgrind's simulated predictor")
        head = f"{'L':>6} {'spread':>7} {'this instr':>11} {'mispred.':>9}"
        if base:
            head += f" {'base instr':>11} {'mispred.':>9} {'this/base':>10}  outputs"
        print(head)
        for L, sp in cells:
            ti, tm = res[("this", None, L, sp)][:2]
            line = f"{L:>6} {sp:>7} {ti:>11.1f} {tm:>9.2f}"
            if base:
                bi, bm = res[("base", base_file, L, sp)][:2]
                R = rows(a.rows, L, seed=L, spread=sp)
                d = differing_rows(_run(base, R), _run(theta_fused, R))
                same = "identical" if d == 0 else f"{d} of {R.shape[0]} rows differ"
                line += f" {bi:>11.1f} {bm:>9.2f} {ti / bi:>10.3f}  {same}"
            print(line, flush=True)
        if a.listing:
            _, _, per, events, kmap, nrows = res[("this", None) + cells[0]]
            if not code.exists():
                _fail("the child did not write stage A's compiled code for the listing")
            _listing(a.listing, code, kmap, per, events, nrows)
            print(f"listing of L = {cells[0][0]}, spread {cells[0][1]} written to {a.listing}")
    return None


if __name__ == "__main__":
    main()
