"""z3 query machinery and encodings shared by the SMT checks (C2, C4, C5).

Every statement is proved the same way: its negation is handed to z3 as a
small real-arithmetic query that must come back ``unsat``.  A query gets a
timeout, and ``unknown`` (timeout included) is never a pass.  Each claim has
negative controls: a deliberately wrong variant, encoded by the same helpers,
that must come back ``sat`` with a model that replays exactly (Fractions).

Precision contract: exact.  z3 decides real arithmetic over the rationals;
models of negative controls are replayed in Fraction arithmetic.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import z3

from ..registry import Evidence

QUERY_TIMEOUT_MS = 20_000  # per query; the quick-tier queries each take well under 1 s
FULL_TIMEOUT_MS = 180_000  # full tier: the slowest query (C5 sawtooth, L = 8) takes ~15 s


# ----------------------------------------------------------------------------- query machinery

@dataclass
class QueryResult:
    verdict: str             # "sat", "unsat" or "unknown" (timeouts are "unknown")
    seconds: float
    reason: str = ""         # z3's reason_unknown for an unknown
    model: dict = field(default_factory=dict)  # name -> Fraction (rational models only)
    timeout_ms: int = QUERY_TIMEOUT_MS


def _rational_model(model: z3.ModelRef) -> dict:
    out = {}
    for d in model.decls():
        v = model[d]
        if z3.is_rational_value(v):
            out[d.name()] = Fraction(v.numerator_as_long(), v.denominator_as_long())
    return out


def run_query(constraints, *, timeout_ms: int = QUERY_TIMEOUT_MS, solver=None) -> QueryResult:
    """Decide the conjunction ``constraints``; exact (z3 real arithmetic).

    ``solver`` may be injected (tests); by default a fresh z3 solver with a
    timeout.  Anything other than a definite sat/unsat becomes ``unknown``.
    """
    s = solver if solver is not None else z3.Solver()
    s.set("timeout", int(timeout_ms))
    s.add(*constraints)
    t0 = time.perf_counter()
    res = s.check()
    secs = time.perf_counter() - t0
    if res == z3.unsat:
        return QueryResult("unsat", secs, timeout_ms=timeout_ms)
    if res == z3.sat:
        return QueryResult("sat", secs, model=_rational_model(s.model()), timeout_ms=timeout_ms)
    return QueryResult("unknown", secs, reason=str(s.reason_unknown()), timeout_ms=timeout_ms)


@dataclass
class Tally:
    """The queries behind one check: counts, worst time, failures."""

    results: list = field(default_factory=list)
    labels: list = field(default_factory=list)

    def add(self, label: str, r: QueryResult) -> QueryResult:
        self.results.append(r)
        self.labels.append(label)
        return r

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.results)

    def all_unsat(self) -> bool:
        """True iff there was at least one query and every one was unsat."""
        return bool(self.results) and all(r.verdict == "unsat" for r in self.results)

    def not_unsat(self) -> list[str]:
        return [f"{lab}: {r.verdict}{' (' + r.reason + ')' if r.reason else ''}"
                for lab, r in zip(self.labels, self.results) if r.verdict != "unsat"]

    def numbers(self) -> dict:
        return {"queries": len(self.results), "unsat": self.count("unsat"), "sat": self.count("sat"),
                "unknown": self.count("unknown"),
                "max_query_seconds": round(max((r.seconds for r in self.results), default=0.0), 3),
                "timeout_ms": max((r.timeout_ms for r in self.results), default=QUERY_TIMEOUT_MS)}


def proved(tally: Tally, scope: str, what: str, **numbers) -> Evidence:
    """pass iff every query was unsat; an unknown or a sat fails the check."""
    ok = tally.all_unsat()
    bad = tally.not_unsat()
    detail = (f"{what}: all {len(tally.results)} negated queries unsat" if ok else
              f"{what}: NOT proved; " + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))
    return Evidence("pass" if ok else "fail", scope, numbers={**tally.numbers(), **numbers}, detail=detail)


def refuted_by_model(tally: Tally, scope: str, what: str, replay, **numbers) -> Evidence:
    """Negative control: pass iff some query was sat and its model replays exactly.

    ``replay(model_dict) -> bool`` evaluates the wrong statement's negation on
    the model in Fraction arithmetic (it returns False for missing values).
    """
    witness = None
    for lab, r in zip(tally.labels, tally.results):
        if r.verdict == "sat" and replay(r.model):
            witness = (lab, r.model)
            break
    if witness is None:
        detail = f"{what}: wrong variant NOT refuted (no replayable model): the check cannot fail"
        return Evidence("fail", scope, numbers={**tally.numbers(), **numbers}, detail=detail)
    lab, model = witness
    shown = ", ".join(f"{k}={v}" for k, v in sorted(model.items()))
    return Evidence("pass", scope, numbers={**tally.numbers(), **numbers, "counterexample": {
        "query": lab, "model": {k: str(v) for k, v in sorted(model.items())}}},
        detail=f"{what}: wrong variant refuted at {lab}: {shown}")


def both_refuted(first: Evidence, second: Evidence, key: str) -> Evidence:
    """Two negative-control refutations as one: pass only if both passed (exact, no new queries)."""
    if first.status != "pass" or second.status != "pass":
        return first if first.status != "pass" else second
    for n in ("queries", "sat"):
        first.numbers[n] += second.numbers[n]
    first.numbers[key] = second.numbers["counterexample"]
    first.detail += f"; {second.detail}"
    return first


# ----------------------------------------------------------------------------- encodings

def simplex(L: int, name: str = "p"):
    """Variables p_0..p_{L-1} and the constraints p_i ≥ 0, Σp = 1."""
    p = [z3.Real(f"{name}{i}") for i in range(L)]
    return p, [*(v >= 0 for v in p), z3.Sum(p) == 1]


def mass(p, S) -> z3.ArithRef:
    """p(S) for S an iterable of positions (z3 term; 0 for the empty set)."""
    terms = [p[i] for i in S]
    return z3.Sum(terms) if terms else z3.RealVal(0)


def bilinear(p, y, x) -> z3.ArithRef:
    """yᵀC(p)x with C = diag(p) − ppᵀ, for integer vectors x, y."""
    diag = z3.Sum([p[i] * (x[i] * y[i]) for i in range(len(p))])
    return diag - z3.Sum([p[i] * x[i] for i in range(len(p))]) * z3.Sum([p[i] * y[i] for i in range(len(p))])


def split(p, S) -> z3.ArithRef:
    """4p(S)(1 − p(S)): the quadratic form of the sign vector 1_S − 1_Sᶜ (C2 step iii)."""
    a = mass(p, S)
    return 4 * a * (1 - a)


def subsets_without_last(L: int):
    """One of S, Sᶜ for every S: those not containing position L − 1 (4a(1−a) is symmetric)."""
    for mask in range(1 << (L - 1)):
        yield [i for i in range(L - 1) if mask >> i & 1]


def sign_vector(S, L: int) -> list[int]:
    return [1 if i in S else -1 for i in range(L)]


def f_bilinear(p, y, x) -> Fraction:
    return (sum(pi * xi * yi for pi, xi, yi in zip(p, x, y))
            - sum(pi * xi for pi, xi in zip(p, x)) * sum(pi * yi for pi, yi in zip(p, y)))


def model_row(model: dict, L: int, name: str = "p"):
    """The row p of a rational model, or None when a value is missing."""
    row = [model.get(f"{name}{i}") for i in range(L)]
    return row if all(v is not None for v in row) else None
