"""Command line: ``python -m certificates certify|verify|report`` (FIXED in shared/ARCHITECTURE.md).

Exit codes: 0 success; 1 verify found a discrepancy; 2 bad input (one line on stderr,
no traceback, nothing left in OUTDIR).
"""
from __future__ import annotations

import argparse
import sys

from .inputs import DEFAULT_MAX_SUM_DEFECT, InputError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m certificates", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("certify", help="certify attention rows: two-sided θ bounds + witnesses")
    c.add_argument("inputs", nargs="+", metavar="INPUT")
    c.add_argument("-o", "--out", required=True, metavar="OUTDIR")
    c.add_argument("--tolerance", type=float, default=1e-6,
                   help="a row is closed (regime 1) when theta_hi − theta_lo ≤ T (default 1e-6)")
    c.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    c.add_argument("--max-sum-defect", type=float, default=DEFAULT_MAX_SUM_DEFECT,
                   help="reject rows with |Σrow − 1| above this (default 1e-2: bfloat16 storage moves "
                        "a row sum by ≤ 2^-9 ≈ 2e-3 at any L); 'inf' disables")
    c.add_argument("--no-progress", action="store_true")
    v = sub.add_parser("verify", help="independent exact replay of a certificate directory")
    v.add_argument("outdir", metavar="OUTDIR")
    v.add_argument("--no-progress", action="store_true")
    r = sub.add_parser("report", help="Markdown/HTML/PNG report over certificate directories")
    r.add_argument("dirs", nargs="+", metavar="OUTDIR")
    r.add_argument("-o", "--out", required=True, metavar="REPORTDIR")
    r.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "certify":
            from .certify import run_certify
            s = run_certify(a.inputs, a.out, tolerance=a.tolerance, device=a.device,
                            max_sum_defect=a.max_sum_defect, progress=not a.no_progress)
            rc = s["regime_counts"]
            print(f"{a.out}: {s['rows']} rows certified: {rc['dominant']} dominant, {rc['closed']} closed, "
                  f"{rc['open']} open; median theta_lo {s['median_theta_lo']:.9g}")
            return 0
        if a.cmd == "verify":
            from .verify import run_verify
            return 1 if run_verify(a.outdir, progress=not a.no_progress) else 0
        from .report import write_report
        write_report(a.dirs, a.out, progress=not a.no_progress)
        print(f"{a.out}: report.md, report.html and figures written")
        return 0
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, KeyError, ValueError) as exc:
        if a.cmd == "certify":
            raise
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
