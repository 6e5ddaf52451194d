"""Stage A of this tree against stage A of another git revision, timed in one process.

Between runs of the spread table the shared development machines drift by more than most
kernel changes (benchmarks/README.md), so a change is judged here instead: the base
revision's ``numerics/theta_fused.py`` is loaded beside this tree's as a second module (it
uses this tree's other ``numerics`` modules, so the two differ only in that file), both are
compiled, and on the same softmax rows, one thread, their calls alternate with a row sum,
``--reps`` rounds.  Printed per cell: the row sum's fastest time a row; each side's fastest
run over the row sum's fastest; and this tree's fastest over the base's (below 1: this tree
is faster).  Fastest runs, because a slow spell only adds time and the two sides take turns
within it.  Before timing, the two sides' outputs (witness masks, bounds, states) are
compared on the cell's rows and the cell says ``identical`` or how many rows differ: a
change of search changes what is timed, and a change meant to keep every output must show
``identical``.

Usage: python benchmarks/stage_a_ab.py [--base REV] [--Ls 64,256,1024,4096]
       [--spreads 0.3,1.0,2.5,5.0] [--reps 31] [--elems N]
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from certify_throughput import rows  # noqa: E402
from numerics import theta_fused  # noqa: E402


def load_base(rev, folder):
    """The module ``numerics/theta_fused.py`` of git revision ``rev``, loaded from a copy in
    ``folder`` under the name theta_fused_base."""
    try:
        src = subprocess.run(["git", "show", f"{rev}:numerics/theta_fused.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or str(e)
        raise SystemExit(f"stage_a_ab: cannot read numerics/theta_fused.py at {rev!r}: {err.strip()}")
    path = Path(folder) / "theta_fused_base.py"
    path.write_text(src)
    try:
        mod = load_module(path)
    except Exception as e:      # e.g. it imports a kernel this tree no longer has
        raise SystemExit(f"stage_a_ab: numerics/theta_fused.py at {rev!r} does not load beside this tree's "
                         f"numerics/ ({type(e).__name__}: {e}); compare with a closer revision")
    if not hasattr(mod, "stage_a"):
        raise SystemExit(f"stage_a_ab: numerics/theta_fused.py at {rev!r} has no stage_a")
    return mod


def load_module(path):
    """The file ``path`` (a copy of ``numerics/theta_fused.py``) as module theta_fused_base."""
    spec = importlib.util.spec_from_file_location("theta_fused_base", path)
    mod = importlib.util.module_from_spec(spec)
    # registered by name: numba's cached code refers to its module by name when loaded
    sys.modules["theta_fused_base"] = mod
    spec.loader.exec_module(mod)
    return mod


def _run(mod, R):
    n, L = R.shape
    M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
    mod.stage_a(R, np.full(n, -1, np.int8), 3, 5e-4, 1e-6, M, cols, st)
    return M, cols, st


def differing_rows(a, b):
    """How many rows differ between two stage A outputs (M, cols, state), bit for bit."""
    (Ma, ca, sa), (Mb, cb, sb) = a, b
    d = (Ma != Mb).any(axis=1) | (ca.view(np.int64) != cb.view(np.int64)).any(axis=0) | (sa != sb)
    return int(d.sum())


def cell(base, R, reps):
    """(row sum s a row, base's fastest / sum's, this tree's fastest / sum's, this / base,
    rows whose outputs differ)."""
    n = R.shape[0]
    diff = differing_rows(_run(base, R), _run(theta_fused, R))
    best = {"sum": np.inf, "base": np.inf, "this": np.inf}
    args = {}
    for name, mod in (("base", base), ("this", theta_fused)):
        M, cols, st = np.empty((n, R.shape[1]), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
        args[name] = (mod, (R, np.full(n, -1, np.int8), 3, 5e-4, 1e-6, M, cols, st))
    for _ in range(reps):
        t0 = time.perf_counter()
        R.sum(axis=1)
        best["sum"] = min(best["sum"], time.perf_counter() - t0)
        for name in ("base", "this"):
            mod, a = args[name]
            t0 = time.perf_counter()
            mod.stage_a(*a)
            best[name] = min(best[name], time.perf_counter() - t0)
    s = best["sum"]
    return s / n, best["base"] / s, best["this"] / s, best["this"] / best["base"], diff


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the git revision to compare with (default HEAD)")
    ap.add_argument("--Ls", default="64,256,1024,4096", help="row lengths (default 64,256,1024,4096)")
    ap.add_argument("--spreads", default="0.3,1.0,2.5,5.0", help="logit spreads (default 0.3,1.0,2.5,5.0)")
    ap.add_argument("--reps", type=int, default=31, help="alternated rounds per cell (default 31)")
    ap.add_argument("--elems", type=int, default=1 << 20, help="float64 entries per cell (default 2^20)")
    a = ap.parse_args(argv)
    Ls = [int(x) for x in a.Ls.split(",")]
    spreads = [float(x) for x in a.spreads.split(",")]
    numba.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="stage-a-ab-") as d:
        base = load_base(a.base, d)
        _run(base, rows(16, 64))               # compile both outside the timing
        _run(theta_fused, rows(16, 64))
        print(f"stage A, this tree against {a.base}, one thread, fastest of {a.reps} alternated runs each")
        print(f"{'L':>6} {'spread':>7} {'sum ns/row':>11} {'base/sum':>9} {'this/sum':>9} {'this/base':>10}  outputs")
        for L in Ls:
            for sp in spreads:
                R = rows(max(16, a.elems // L), L, seed=L, spread=sp)
                ns, rb, rt, ab, diff = cell(base, R, a.reps)
                same = "identical" if diff == 0 else f"{diff} of {R.shape[0]} rows differ"
                print(f"{L:>6} {sp:>7} {1e9 * ns:>11.1f} {rb:>8.2f}x {rt:>8.2f}x {ab:>10.3f}  {same}", flush=True)


if __name__ == "__main__":
    main()
