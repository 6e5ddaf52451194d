"""python -m proofs: run the claim registry and show what is checked.

Exit status 0 iff no check fails (a skipped check is not a failure, but it is
not a pass either: its claim is at best ``partial``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import claims as _claims  # noqa: F401  (registers the claims)
from .checks import load_all
from .dashboard import render_markdown
from .registry import CHECKS, CLAIMS, Evidence, claim_statuses

ROOT = Path(__file__).resolve().parent.parent


def select_checks(tier: str, only: list[str] | None, coq: bool = False):
    """The checks a run schedules: quick-tier checks always, full-tier ones with --full,
    Coq ones with --coq or --full."""
    wanted = set(only) if only else None
    for c in CHECKS:
        if wanted is not None and c.claim not in wanted:
            continue
        if c.tier == "full" and tier != "full":
            continue
        if c.tier == "coq" and not (coq or tier == "full"):
            continue
        yield c


def run(tier: str, only: list[str] | None, progress: bool = True, coq: bool = False) -> dict[str, list[Evidence]]:
    load_all()
    todo = list(select_checks(tier, only, coq))
    evidence: dict[str, list[Evidence]] = {cid: [] for cid in CLAIMS}
    # On a terminal a bar; when stderr is piped (CI logs, `| tee`), one line per check.
    bar = None
    tty = progress and sys.stderr.isatty()
    if tty:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), unit="check", file=sys.stderr, dynamic_ncols=True)
    for k, c in enumerate(todo, 1):
        if bar is not None:
            bar.set_description(f"{c.claim} {c.method} {c.name}"[:48])
        ev = c.run(tier)
        evidence.setdefault(c.claim, []).append(ev)
        first = ev.detail.splitlines()[0] if ev.detail else ""
        if bar is not None:
            bar.update(1)
            if ev.status == "fail":
                bar.write(f"FAIL {c.claim} {c.name} ({c.method}): {first}")
        elif progress:
            note = f": {first}" if ev.status != "pass" and first else ""
            print(f"[{k:>3}/{len(todo)}] {c.claim:<4} {c.method:<10} {c.name} ... {ev.status} "
                  f"({ev.seconds:.1f} s){note}", file=sys.stderr, flush=True)
    if bar is not None:
        bar.close()
    return evidence


def print_table(evidence: dict[str, list[Evidence]], statuses: dict[str, str], out=sys.stdout,
                only: list[str] | None = None) -> None:
    rows = [("claim", "status", "check", "method", "neg", "result", "secs", "scope")]
    for cid in CLAIMS:
        if only and cid not in only:
            continue
        evs = evidence.get(cid, [])
        if not evs:
            rows.append((cid, statuses[cid], "-", "-", "", "", "", "no check run"))
        for i, e in enumerate(evs):
            rows.append((cid if i == 0 else "", statuses[cid] if i == 0 else "", e.name, e.method,
                         "neg" if e.negative_control else "", e.status, f"{e.seconds:.1f}", e.scope))
    widths = [max(len(r[k]) for r in rows) for k in range(7)]
    for r in rows:
        print("  ".join(r[k].ljust(widths[k]) for k in range(7)) + "  " + r[7], file=out)


def to_json(evidence, statuses, tier: str, seconds: float) -> dict:
    return {
        "tier": tier,
        "seconds": seconds,
        "claims": [
            {
                "id": cid,
                "title": c.title,
                "statement": c.statement,
                "uses": list(c.uses),
                "assumes": list(c.assumes),
                "status": statuses[cid],
                "checks": [e.to_json() for e in evidence.get(cid, [])],
            }
            for cid, c in CLAIMS.items()
        ],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m proofs",
        description="Check the claims of 'Exact Attention Sensitivity and the Geometry of "
                    "Transformer Stability' (arXiv:2602.18849v2) by sympy, z3, exact rational "
                    "enumeration, mpmath, hypothesis, float64 search and experiment results. "
                    "Exit status 0 iff no check fails.")
    tier = ap.add_mutually_exclusive_group()
    tier.add_argument("--quick", dest="tier", action="store_const", const="quick",
                      help="the fast tier (default; under a minute on 2 cores, about 3 minutes with --coq)")
    tier.add_argument("--full", dest="tier", action="store_const", const="full",
                      help="also run the long checks and searches")
    ap.add_argument("--coq", action="store_true",
                    help="also run the Coq tier: compile proofs/coq/ (proofs for every L) and its "
                         "negative controls; needs coqc with Mathematical Components")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these claims (e.g. C2 C4)")
    ap.add_argument("--json", metavar="FILE", help="write all evidence as JSON")
    ap.add_argument("--write-md", action="store_true",
                    help="regenerate paper_checks.md from this run (deterministic, no timings)")
    ap.add_argument("--list", action="store_true", help="list claims and checks, run nothing")
    args = ap.parse_args(argv)
    args.tier = args.tier or "quick"
    if args.only:
        unknown = [i for i in args.only if i not in CLAIMS]
        if unknown:
            ap.error(f"unknown claim id(s): {', '.join(unknown)}; known: {', '.join(CLAIMS)}")
    if args.list:
        load_all()
        for cid, c in CLAIMS.items():
            print(f"{cid}: {c.title}")
            for ch in CHECKS:
                if ch.claim == cid:
                    neg = " [negative control]" if ch.negative_control else ""
                    print(f"    {ch.name} ({ch.method}, {ch.tier}){neg}: {ch.scope}")
        return 0
    if args.write_md and args.only:
        ap.error("--write-md needs the whole registry; drop --only")
    if args.write_md and args.tier != "quick":
        ap.error("--write-md records the quick tier (plus Coq); drop --full")
    if args.write_md:
        # The dashboard records the quick tier and the Coq tier together (proofs for every L).
        args.coq = True

    t0 = time.perf_counter()
    evidence = run(args.tier, args.only, coq=args.coq)
    statuses = claim_statuses(evidence)
    seconds = time.perf_counter() - t0
    print_table(evidence, statuses, only=args.only)
    n_fail = sum(e.status == "fail" for evs in evidence.values() for e in evs)
    n_checks = sum(len(evs) for evs in evidence.values())
    counts = {s: sum(v == s for v in statuses.values()) for s in ("pass", "partial", "unchecked", "fail")}
    print(f"\n{n_checks} checks in {seconds:.1f} s ({args.tier} tier); claims: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(evidence, statuses, args.tier, seconds),
                                              indent=1, default=str) + "\n")
    if args.write_md:
        (ROOT / "paper_checks.md").write_text(render_markdown(evidence, statuses, args.tier, coq=args.coq))
        print(f"wrote {ROOT / 'paper_checks.md'}")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
