"""Command line: ``python -m certificates certify|verify|report|probe`` (documented in docs/cli.md).

Exit codes, the same for every subcommand: 0 success; 1 a check or verification failed;
2 bad input or usage (one line on stderr naming the file, row and problem; no traceback;
nothing written or changed); 130 interrupted by Ctrl-C (one line; nothing written or changed).
"""
from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading

from .inputs import DEFAULT_MAX_SUM_DEFECT, InputError


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # usage errors: one line, exit 2 (argparse prints usage first)
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _probe_module():
    """certificates.probe_cli is optional here: the other subcommands work without it."""
    try:
        if importlib.util.find_spec("certificates.probe_cli") is None:
            return None
    except (ImportError, ValueError):
        return None
    return importlib.import_module("certificates.probe_cli")


def _keys(text):
    """--by KEY: one key or several separated by commas."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise argparse.ArgumentTypeError(f"empty key {text!r}")
    return keys


def build_parser(probe=None):
    ap = _Parser(prog="python -m certificates", description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    c = sub.add_parser("certify", help="certify attention rows: two-sided θ bounds + witnesses")
    c.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="row files: .npz/.safetensors (array 'rows', or 'logits' + optional 'tau'), .npy, .pt; "
                        "the last axis is L, leading axes are flattened")
    c.add_argument("-o", "--out", required=True, metavar="OUTDIR",
                   help="certificate folder to create; an existing non-empty one is refused unless --overwrite")
    c.add_argument("--overwrite", action="store_true",
                   help="write into an existing OUTDIR, replacing only the files an earlier certify wrote there "
                        "(other files are never touched)")
    c.add_argument("--tolerance", type=float, default=1e-6,
                   help="a row is closed (regime 1) when theta_hi − theta_lo ≤ max(T, 2^-50) (default 1e-6; at 0 "
                        "only exactly solved rows are closed)")
    c.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the bulk stages run (default cpu); the final outward rounding is always on the CPU")
    c.add_argument("--max-sum-defect", type=float, default=DEFAULT_MAX_SUM_DEFECT,
                   help="reject rows with |Σrow − 1| above this (default 1e-2: bfloat16 storage moves "
                        "a row sum by ≤ 2^-9 ≈ 2e-3 at any L); 'inf' disables")
    c.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines on stderr")
    v = sub.add_parser("verify", help="independent exact replay of a certificate folder")
    v.add_argument("outdir", metavar="OUTDIR", help="a folder written by certify")
    v.add_argument("--inputs", nargs="+", metavar="DIR", default=[],
                   help="folders to search (recursively, by file name and sha256) for inputs that were moved")
    v.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines on stderr")
    v.add_argument("--checker", choices=["python", "coq"], default="python",
                   help="python (default): the exact Python replay; coq: that replay and, for every row, the "
                        "checker proved in Coq (proofs/coq/Checker.v, extracted; docs/checker.md), both must accept")
    r = sub.add_parser("report", help="Markdown/HTML/PNG report over certificate folders")
    r.add_argument("dirs", nargs="+", metavar="OUTDIR", help="certificate folders written by certify")
    r.add_argument("-o", "--out", required=True, metavar="REPORTDIR",
                   help="where report.md, report.html, stats.json and the figures go; only these files "
                        "are replaced or removed there")
    r.add_argument("--by", nargs="+", metavar="KEY", type=_keys, action="extend",
                   help="which tables to show, in this order: metadata keys (layer, head, step, …) or 'source' "
                        "(one group per OUTDIR); commas also separate keys; give it after the OUTDIRs "
                        "(default: every present key of run, step, layer, head, stack, kind)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    if probe is not None:
        probe.add_probe_parser(sub)
    return ap


def main(argv=None) -> int:
    """The command line; a Ctrl-C anywhere ends it with exit 130 and one line on stderr."""
    # With RLIMIT_FSIZE, writing past the limit raises SIGXFSZ, whose default action kills
    # the process (no cleanup, a temp folder left behind).  Ignored, the write fails with
    # EFBIG instead, an OSError that certify cleans up after and reports in one line.
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    a = None
    try:
        a = build_parser(_probe_module()).parse_args(argv)
        return _dispatch(a)
    except KeyboardInterrupt:
        # every writer cleans up on the way out (outdir.Staging.abort, probe's own cleanup);
        # a second Ctrl-C from here on must not turn exit 130 into death by SIGINT
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        where = getattr(a, "out", None) or getattr(a, "outdir", None)     # None: interrupted while parsing
        print(f"interrupted; {where} unchanged" if where else "interrupted; nothing changed", file=sys.stderr)
        return 130


def run(argv) -> int:
    """Like main, for a caller that runs a subcommand in-process (probe): a Ctrl-C is not
    turned into an exit code here but reaches the caller, which cleans up and ends the run."""
    return _dispatch(build_parser(_probe_module()).parse_args(argv))


def _dispatch(a) -> int:
    try:
        if a.cmd == "certify":
            from .certify_files import run_certify
            from .report import fmt_theta
            s = run_certify(a.inputs, a.out, tolerance=a.tolerance, device=a.device,
                            max_sum_defect=a.max_sum_defect, progress=not a.no_progress, overwrite=a.overwrite)
            rc = s["regime_counts"]
            print(f"{a.out}: {s['rows']} rows certified: {rc['dominant']} dominant, {rc['closed']} closed, "
                  f"{rc['open']} open; median theta_lo {fmt_theta(s['median_theta_lo'])}")
            return 0
        if a.cmd == "verify":
            from .verify import run_verify
            if a.checker == "coq":
                from .coq_checker import require_binary, run_coq_check
                require_binary()               # a missing program is an error before any work
                bad = run_verify(a.outdir, progress=not a.no_progress, search=a.inputs)
                return 1 if run_coq_check(a.outdir, search=a.inputs) + bad else 0
            return 1 if run_verify(a.outdir, progress=not a.no_progress, search=a.inputs) else 0
        if a.cmd == "report":
            from .report import write_report
            by = [k for ks in a.by for k in ks] if a.by else None
            write_report(a.dirs, a.out, progress=not a.no_progress, by=by)
            print(f"{a.out}: report.md, report.html and figures written")
            return 0
        return int(_probe_module().run_probe(a))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:             # disk full, permission denied …: one line, not a traceback
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
