"""C8: row-stochastic mixing is nonexpansive in the block-∞/RMS norm; not in Frobenius.

Exhaustive exact rationals on grids (P rows from the simplex grid of step 1/2
or 1/3, V entries from a small symmetric grid), comparing squared norms so no
square root is taken; hypothesis in float64; and the negative control: the
Frobenius version ‖PV‖_F ≤ ‖V‖_F must be refuted, with worst factor exactly √L.
"""
from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np

from numerics.norms import block_norm, block_norm_sq_exact

from ..registry import check
from ._util import refuted, verdict


def _simplex_rows(L: int, den: int):
    for c in itertools.product(range(den + 1), repeat=L):
        if sum(c) == den:
            yield tuple(F(x, den) for x in c)


def _grids(tier: str):
    half = [F(-1), F(-1, 2), F(0), F(1, 2), F(1)]
    small = [F(-1), F(0), F(1)]
    g = [(1, 1, 3, half), (2, 1, 2, half), (2, 2, 2, half), (3, 1, 2, half), (2, 1, 3, half)]
    if tier == "full":
        g += [(3, 2, 2, small), (4, 1, 1, half), (3, 1, 3, half), (2, 3, 2, small)]
    return g


def _mix(P, V):
    L, d = len(P), len(V[0])
    return [[sum(P[i][j] * V[j][c] for j in range(L)) for c in range(d)] for i in range(L)]


def frobenius_sq(X):
    """‖X‖_F²/(L·d) = the block norm² of X read as one row of length L·d (block_norm_sq_exact)."""
    return block_norm_sq_exact([[x for r in X for x in r]])


def _exhaust(tier: str, norm_sq=block_norm_sq_exact):
    """Yield (L, d, norm_sq(PV), norm_sq(V)) for every grid instance."""
    for L, d, den, vals in _grids(tier):
        rows = list(_simplex_rows(L, den))
        Vs = [[v[r * d:(r + 1) * d] for r in range(L)] for v in itertools.product(vals, repeat=L * d)]
        for P in itertools.product(rows, repeat=L):
            for V in Vs:
                yield L, d, norm_sq(_mix(P, V)), norm_sq(V)


@check("C8", "exact", scope="all P on simplex grids (step 1, 1/2, 1/3), V on grids; L ≤ 3, d ≤ 2 (full: L ≤ 4, d ≤ 3)")
def c8_exhaustive_exact(tier):
    n = viol = 0
    worst = F(0)
    for L, d, lhs, rhs in _exhaust(tier):
        n += 1
        if lhs > rhs:
            viol += 1
        if rhs > 0:
            worst = max(worst, lhs / rhs)
    return verdict(viol == 0 and n > 0 and worst == 1, f"{n} exact instances",
                   f"{n} grid instances in exact rationals, {viol} violations of ‖PV‖_B ≤ ‖V‖_B; "
                   f"max ‖PV‖_B²/‖V‖_B² = {worst} (attained: P = I)",
                   instances=n, violations=viol, worst_ratio_sq=str(worst))


@check("C8", "exact", scope="same grids as the positive check", negative_control=True,
       guards=("c8_exhaustive_exact",))
def c8_frobenius_refuted(tier):
    worst: dict[int, F] = {}
    n = viol = 0
    for L, d, lhs, rhs in _exhaust(tier, frobenius_sq):
        n += 1
        if lhs > rhs:
            viol += 1
        if rhs > 0:
            worst[L] = max(worst.get(L, F(0)), lhs / rhs)
    # The wrong statement ‖PV‖_F ≤ ‖V‖_F must fail, and the worst factor² must be exactly L
    # (all rows of P equal to e_1 and V = e_1 v_1ᵀ gives √L; Cauchy–Schwarz caps it there).
    exact_sqrtL = all(worst[L] == L for L in worst if L > 1)
    return refuted(viol > 0 and exact_sqrtL, f"{n} exact instances",
                   f"Frobenius version violated on {viol} of {n} instances; worst ‖PV‖_F²/‖V‖_F² by L: "
                   + ", ".join(f"L={L}: {worst[L]}" for L in sorted(worst)) + " (= L: factor √L)",
                   instances=n, violations=viol, worst_ratio_sq={str(k): str(v) for k, v in worst.items()})


@check("C8", "hypothesis", scope="float64, L ≤ 64, d ≤ 32, random row-stochastic P")
def c8_hypothesis(tier):
    from hypothesis import given, settings, strategies as st

    n_ex = 300 if tier == "quick" else 3000
    worst = [0.0]
    count = [0]

    @settings(max_examples=n_ex, deadline=None, derandomize=True, database=None)
    @given(st.integers(1, 64), st.integers(1, 32), st.integers(0, 2**32 - 1), st.floats(-30, 30))
    def prop(L, d, seed, logscale):
        rng = np.random.default_rng(seed)
        W = rng.exponential(size=(L, L)) ** rng.uniform(0.1, 8)   # from flat to near one-hot rows
        P = W / W.sum(axis=1, keepdims=True)
        V = rng.standard_normal((L, d)) * np.exp(logscale * rng.uniform(0, 1, (L, 1)))
        lhs, rhs = block_norm(P @ V), block_norm(V)
        count[0] += 1
        worst[0] = max(worst[0], lhs / rhs)
        # float64 slack: each row of PV has relative error ≤ (L + d + 2)·2⁻⁵³.
        assert lhs <= rhs * (1 + (L + d + 4) * 2.0 ** -52)

    try:
        prop()
        ok = True
    except AssertionError:
        ok = False
    return verdict(ok and count[0] > 0, f"{count[0]} hypothesis examples",
                   f"{count[0]} float64 examples, max ‖PV‖_B/‖V‖_B = {worst[0]:.12f}",
                   examples=count[0], worst_ratio=round(worst[0], 12))
