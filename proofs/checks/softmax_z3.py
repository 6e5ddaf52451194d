"""z3 (SMT) checks of the main theorem C2: the sign-pair lemma per symmetry orbit.

Query machinery and conventions are in :mod:`proofs.checks._z3` (negation must be
unsat; unknown fails; negative controls must be sat with a model that replays
exactly).  C4 and C5 are in :mod:`proofs.checks.softmax_z3_bounds`.

Scaling (measured while writing these checks): one big disjunction over sign vertices, or letting
z3 range over the box, does not scale.  So sign vertices are enumerated here
in Python, reduced by symmetry orbits, and each representative gets its own
query of a few real variables.

Precision contract: exact (z3 real arithmetic; rational replay of models).
"""
from __future__ import annotations

from fractions import Fraction

import z3

from numerics.signs import sign_tuples

from ..registry import Evidence, check
from ._z3 import (QueryResult, Tally, bilinear, both_refuted, f_bilinear, mass, model_row, proved, refuted_by_model,
                  run_query, sign_vector, simplex)


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
    vectors = sign_tuples(L, half=False)
    for x in vectors:
        for y in vectors:
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


def c2_prove(Ls: list[int]) -> Evidence:
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
    Step (i), ‖A‖∞→1 = max over sign pairs, is the definition of the norm (the
    maximum of a convex function on the cube sits at a vertex); it is not re-proved.
    """
    return c2_prove(_c2_scopes(tier))


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


@check("C2", "z3", scope="L = 3, right-hand side θ/2", negative_control=True, guards=("c2_z3_orbits",))
def c2_z3_neg_half(tier="quick"):
    """Wrong C2 with θ/2 on the right: the same orbit queries must find a model."""
    L, scale = 3, Fraction(1, 2)
    tally, _ = c2_lemma_queries(L, scale=scale, stop_at_sat=True)
    return refuted_by_model(tally, f"L = {L}", "‖C‖∞→1 ≤ θ/2", _replay_c2_lemma(L, scale, nonneg=True))


@check("C2", "z3", scope="L = 3, factor 4 omitted", negative_control=True, guards=("c2_z3_orbits",))
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


@check("C2", "z3", scope="L = 3, hypothesis p ≥ 0 dropped", negative_control=True, guards=("c2_z3_orbits",))
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


def replay_block_masses(scale: Fraction):
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
       negative_control=True, guards=("c2_z3_block_masses",))
def c2_z3_neg_block_masses(tier="quick"):
    """The every-L machinery on wrong statements: both queries must be sat and replay exactly."""
    scale, factor = Fraction(1, 2), 3
    lemma = Tally()
    lemma.add("block masses: yᵀCx > ½·max(xᵀCx, yᵀCy)", c2_block_mass_query(scale=scale))
    ev = refuted_by_model(lemma, "block masses", "C2 lemma with θ/2", replay_block_masses(scale))
    ident = Tally()
    ident.add(f"1 − (2s − 1)² ≠ {factor}s(1 − s)", c2_square_identity_query(factor))

    def replay_identity(model):
        s = model.get("s")
        return s is not None and 1 - (2 * s - 1) ** 2 != factor * s * (1 - s)
    ev2 = refuted_by_model(ident, "identity", f"1 − (2s − 1)² = {factor}s(1 − s)", replay_identity)
    ev = both_refuted(ev, ev2, "identity_counterexample")
    ev.scope = "every L (block masses), θ/2 and factor 3"
    return ev
