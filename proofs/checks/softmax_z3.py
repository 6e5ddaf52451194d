"""z3 (SMT) checks of the softmax-sensitivity claims C2, C4 and C5.

Every statement is proved the same way: its negation is handed to z3 as a
small real-arithmetic query that must come back ``unsat``.  A query gets a
timeout, and ``unknown`` (timeout included) is never a pass.  Each claim has
negative controls: a deliberately wrong variant, encoded by the same helpers,
that must come back ``sat`` with a model that replays exactly (Fractions).

Scaling (shared/MATH.md): one big disjunction over sign vertices, or letting
z3 range over the box, does not scale.  So sign vertices are enumerated here
in Python, reduced by symmetry orbits, and each representative gets its own
query of a few real variables.

Precision contract: exact.  z3 decides real arithmetic over the rationals;
models of negative controls are replayed in Fraction arithmetic.  The C5
sawtooth pieces (:mod:`proofs.checks.softmax_z3_bounds`) follow the same rules.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from fractions import Fraction

import z3

from ..registry import Evidence, check

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


# ----------------------------------------------------------------------------- C2: symmetry orbits

def pair_orbits(L: int) -> dict[tuple, int]:
    """Orbits of sign-vector pairs (x, y) ∈ {±1}^L × {±1}^L, with their sizes.

    The group: permutations of positions (acting on p, x, y at once; the
    simplex is permutation invariant), the joint flip (x, y) → (−x, −y), and
    the swap (x, y) → (y, x) (C is symmetric).  All three leave yᵀCx, xᵀCx and
    yᵀCy unchanged, so one query per orbit decides the lemma for the orbit.
    The representative is the lexicographically least sorted column list.
    """
    orbits: dict[tuple, int] = {}
    for x in itertools.product((1, -1), repeat=L):
        for y in itertools.product((1, -1), repeat=L):
            images = []
            for a, b in ((x, y), (y, x)):
                for s in (1, -1):
                    images.append(tuple(sorted((s * ai, s * bi) for ai, bi in zip(a, b))))
            rep = min(images)
            orbits[rep] = orbits.get(rep, 0) + 1
    return orbits


def _pair_vectors(rep: tuple) -> tuple[list[int], list[int]]:
    return [c[0] for c in rep], [c[1] for c in rep]


def c2_lemma_queries(L: int, scale: Fraction = Fraction(1), keep_nonneg: bool = True,
                     stop_at_sat: bool = False) -> tuple[Tally, int]:
    """Per orbit: ∃ p, t = 1/τ > 0 with t·yᵀCx > scale·t·max(xᵀCx, yᵀCy)?

    C2 steps (i)–(ii): the lemma yᵀCx ≤ max(xᵀCx, yᵀCy) on the simplex holds
    iff every query is unsat (scale = 1).  ``scale`` < 1 or dropping p ≥ 0
    gives the negative controls.
    """
    tally = Tally()
    orbits = pair_orbits(L)
    for rep in sorted(orbits):
        x, y = _pair_vectors(rep)
        p, cons = simplex(L)
        if not keep_nonneg:
            cons = cons[L:]  # keep Σp = 1 only
        t = z3.Real("inv_tau")
        k = z3.RealVal(str(scale))
        yx = t * bilinear(p, y, x)
        q = [*cons, t > 0, yx > k * t * bilinear(p, x, x), yx > k * t * bilinear(p, y, y)]
        r = tally.add(f"L={L} x={x} y={y}", run_query(q))
        if stop_at_sat and r.verdict == "sat":
            break
    return tally, len(orbits)


def c2_identity_queries(L: int, factor: int = 4) -> Tally:
    """Per |S| ≤ L/2: ∃ p in the simplex with xᵀCx ≠ factor·p(S)(1 − p(S))?

    C2 step (iii), x = 1_S − 1_Sᶜ; permutations and S ↔ Sᶜ leave both sides
    unchanged, so |S| = k ≤ ⌊L/2⌋ represents all S.  Unsat iff the identity
    holds (factor = 4); factor = 1 is a negative control.
    """
    tally = Tally()
    for k in range(L // 2 + 1):
        S = list(range(k))
        p, cons = simplex(L)
        x = sign_vector(S, L)
        a = mass(p, S)
        tally.add(f"L={L} |S|={k}", run_query([*cons, bilinear(p, x, x) != factor * a * (1 - a)]))
    return tally


def _c2_scopes(tier: str) -> list[int]:
    # Each orbit query takes milliseconds, so the quick tier already reaches L = 6.
    return list(range(1, 7)) if tier == "quick" else list(range(1, 9))


def _c2_positive(Ls: list[int]) -> Evidence:
    lemma, ident = Tally(), Tally()
    orbits, pairs = 0, 0
    for L in Ls:
        t, n = c2_lemma_queries(L)
        lemma.results += t.results
        lemma.labels += t.labels
        orbits += n
        pairs += 4 ** L
        t2 = c2_identity_queries(L)
        ident.results += t2.results
        ident.labels += t2.labels
    both = Tally(lemma.results + ident.results, lemma.labels + ident.labels)
    scope = f"L ≤ {max(Ls)}, every τ > 0"
    ev = proved(both, scope, "C2: yᵀCx ≤ max(xᵀCx, yᵀCy) on every sign-pair orbit and "
                "xᵀCx = 4p(S)(1 − p(S)) for x = 1_S − 1_Sᶜ, so ‖C/τ‖∞→1 = θ/τ",
                orbits=orbits, sign_pairs=pairs, lemma_queries=len(lemma.results),
                identity_queries=len(ident.results))
    return ev


@check("C2", "z3", scope="L ≤ 6 (quick), L ≤ 8 (full); every τ > 0")
def c2_z3_orbits(tier="quick"):
    """C2 for small L: the sign-pair lemma per symmetry orbit plus the quadratic-form identity.

    Together: max_{x,y} yᵀ(C/τ)x ≤ max_x xᵀ(C/τ)x = θ/τ (lemma, identity) and
    ≥ θ/τ at x = y = 1_S − 1_Sᶜ (identity).  τ is the variable 1/τ = inv_tau > 0.
    Step (i), ‖A‖∞→1 = max over sign pairs, is the convention of MATH.md (the
    maximum of a convex function on the cube sits at a vertex); it is not re-proved.
    """
    return _c2_positive(_c2_scopes(tier))


def _replay_c2_lemma(L: int, scale: Fraction, nonneg: bool):
    def replay(model):
        p = model_row(model, L)
        t = model.get("inv_tau")
        if p is None or t is None or t <= 0 or sum(p) != 1 or (nonneg and min(p) < 0):
            return False
        for x, y in (_pair_vectors(r) for r in sorted(pair_orbits(L))):
            yx = t * f_bilinear(p, y, x)
            if yx > scale * t * f_bilinear(p, x, x) and yx > scale * t * f_bilinear(p, y, y):
                return True
        return False
    return replay


@check("C2", "z3", scope="L = 3, right-hand side θ/2", negative_control=True)
def c2_z3_neg_half(tier="quick"):
    """Wrong C2 with θ/2 on the right: the same orbit queries must find a model."""
    L, scale = 3, Fraction(1, 2)
    tally, _ = c2_lemma_queries(L, scale=scale, stop_at_sat=True)
    return refuted_by_model(tally, f"L = {L}", "‖C‖∞→1 ≤ θ/2", _replay_c2_lemma(L, scale, nonneg=True))


@check("C2", "z3", scope="L = 3, factor 4 omitted", negative_control=True)
def c2_z3_neg_factor(tier="quick"):
    """Wrong step (iii): xᵀCx = p(S)(1 − p(S)) (factor 4 dropped) must be refuted."""
    L = 3
    tally = c2_identity_queries(L, factor=1)

    def replay(model):
        p = model_row(model, L)
        if p is None or sum(p) != 1 or min(p) < 0:
            return False
        for k in range(L // 2 + 1):
            x = sign_vector(range(k), L)
            a = sum(p[:k])
            if f_bilinear(p, x, x) != a * (1 - a):
                return True
        return False
    return refuted_by_model(tally, f"L = {L}", "xᵀCx = p(S)(1 − p(S))", replay)


@check("C2", "z3", scope="L = 3, hypothesis p ≥ 0 dropped", negative_control=True)
def c2_z3_neg_signed(tier="quick"):
    """Without p ≥ 0 (C not PSD) the sign-pair lemma must fail: z3 must find a model."""
    L, scale = 3, Fraction(1)
    tally, _ = c2_lemma_queries(L, keep_nonneg=False, stop_at_sat=True)
    return refuted_by_model(tally, f"L = {L}, Σp = 1 only", "lemma without p ≥ 0",
                            _replay_c2_lemma(L, scale, nonneg=False))


def c2_block_mass_query(scale: Fraction = Fraction(1)) -> QueryResult:
    """The sign-pair lemma in terms of four block masses: one query for every L.

    For sign vectors x, y and p in the simplex let a, b, c, d be the masses of
    the positions where (x_i, y_i) = (+,+), (+,−), (−,+), (−,−).  Then exactly
    yᵀCx = (a − b − c + d) − (a + b − c − d)(a − b + c − d),
    xᵀCx = 1 − (a + b − c − d)², yᵀCy = 1 − (a − b + c − d)²,
    whatever L is, so unsat here proves the lemma of C2 step (ii) for all L.
    """
    a, b, c, d = z3.Reals("a b c d")
    sx, sy = a + b - c - d, a - b + c - d
    yx = (a - b - c + d) - sx * sy
    k = z3.RealVal(str(scale))
    return run_query([a >= 0, b >= 0, c >= 0, d >= 0, a + b + c + d == 1,
                      yx > k * (1 - sx * sx), yx > k * (1 - sy * sy)])


def c2_square_identity_query(factor: int = 4) -> QueryResult:
    """∃ s with 1 − (2s − 1)² ≠ factor·s(1 − s)?  Unsat iff the identity holds (factor = 4).

    With s = p(S) this is step (iii) for every L: xᵀCx = 1 − (2p(S) − 1)² for
    x = 1_S − 1_Sᶜ (the block-mass form with one sign vector).
    """
    s = z3.Real("s")
    return run_query([1 - (2 * s - 1) ** 2 != factor * s * (1 - s)])


@check("C2", "z3", scope="every L (block-mass reduction, stated in the docstring)")
def c2_z3_block_masses(tier="quick"):
    """C2 steps (ii)–(iii) for every L: the four-block-mass lemma plus 1 − (2a − 1)² = 4a(1 − a)."""
    tally = Tally()
    tally.add("block masses: yᵀCx > max(xᵀCx, yᵀCy)", c2_block_mass_query())
    tally.add("1 − (2s − 1)² ≠ 4s(1 − s)", c2_square_identity_query())
    return proved(tally, "every L, given the exact block-mass aggregation",
                  "C2 lemma over block masses (a, b, c, d) and step (iii) identity")


def _replay_block_masses(scale: Fraction):
    """Replay on the real C, not the block formulas: p = (a, b, c, d), x = (++−−), y = (+−+−)."""
    x, y = [1, 1, -1, -1], [1, -1, 1, -1]

    def replay(model):
        p = [model.get(k) for k in "abcd"]
        if None in p or sum(p) != 1 or min(p) < 0:
            return False
        yx = f_bilinear(p, y, x)
        return yx > scale * f_bilinear(p, x, x) and yx > scale * f_bilinear(p, y, y)
    return replay


@check("C2", "z3", scope="block masses with right-hand side θ/2; identity with factor 3",
       negative_control=True)
def c2_z3_neg_block_masses(tier="quick"):
    """The every-L machinery on wrong statements: both queries must be sat and replay exactly."""
    scale, factor = Fraction(1, 2), 3
    lemma = Tally()
    lemma.add("block masses: yᵀCx > ½·max(xᵀCx, yᵀCy)", c2_block_mass_query(scale=scale))
    ev = refuted_by_model(lemma, "block masses", "C2 lemma with θ/2", _replay_block_masses(scale))
    ident = Tally()
    ident.add(f"1 − (2s − 1)² ≠ {factor}s(1 − s)", c2_square_identity_query(factor))

    def replay_identity(model):
        s = model.get("s")
        return s is not None and 1 - (2 * s - 1) ** 2 != factor * s * (1 - s)
    ev2 = refuted_by_model(ident, "identity", f"1 − (2s − 1)² = {factor}s(1 − s)", replay_identity)
    ev = both_refuted(ev, ev2, "identity_counterexample")
    ev.scope = "every L (block masses), θ/2 and factor 3"
    return ev
