"""Throughput of the Coq-proved certificate checker on the committed certificate folders.

    python -m benchmarks.coq_checker [--jobs J] [--binary PATH] [FOLDER ...]

(from the repository root; default: every folder under results/ with a certificates.npz).
The extracted program is proofs/coq/extract/_build/coq-checker (build it with
proofs/coq/extract/build.sh) or --binary / $ATTNSENS_COQ_CHECKER.

Two stages are timed separately, per folder and in total: the Python side
(certificates.coq_checker.folder_lines: reading the rows and certificates, floats → exact
integers, text lines) and the extracted checker itself (certificates.coq_checker.run_lines,
J processes).  Every row must be accepted; the script exits 1 otherwise.  Timings are wall
clock on a machine that may be shared: read ratios and orders of magnitude, not absolutes.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from certificates import coq_checker as cc

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.coq_checker", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*")
    ap.add_argument("--jobs", type=int, default=2, help="checker processes (default 2)")
    ap.add_argument("--binary", help="the extracted checker (default: $ATTNSENS_COQ_CHECKER or the build folder)")
    a = ap.parse_args(argv)
    if a.binary:
        os.environ["ATTNSENS_COQ_CHECKER"] = a.binary
    path = cc.require_binary()
    folders = a.folders or sorted(str(p.parent.relative_to(ROOT)) for p in (ROOT / "results").rglob("certificates.npz"))
    tot_rows = tot_py = tot_chk = 0.0
    bad = 0
    print(f"checker: {path}; {a.jobs} process(es)")
    print(f"{'folder':48s} {'rows':>6s} {'python s':>9s} {'checker s':>10s} {'checker rows/s':>15s} {'accepted':>9s}")
    for d in folders:
        t0 = time.perf_counter()
        lines, problems, n = cc.folder_lines(str(ROOT / d) if not os.path.isabs(d) else d)
        t1 = time.perf_counter()
        verdicts = cc.run_lines(lines, a.jobs, path)
        t2 = time.perf_counter()
        acc = sum(verdicts)
        bad += (n - acc) + len(problems)
        tot_rows += n
        tot_py += t1 - t0
        tot_chk += t2 - t1
        print(f"{d:48s} {n:6d} {t1 - t0:9.2f} {t2 - t1:10.2f} {n / (t2 - t1):15.0f} {acc:9d}")
    print(f"{'total':48s} {int(tot_rows):6d} {tot_py:9.2f} {tot_chk:10.2f} {tot_rows / tot_chk:15.0f}   "
          f"end to end {tot_rows / (tot_py + tot_chk):.0f} rows/s ({tot_py + tot_chk:.1f} s)")
    if bad:
        print(f"{bad} rows not accepted", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
