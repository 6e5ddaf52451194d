"""Arbitrary-precision (mpmath) and float64 checks of C1 and C2."""
from __future__ import annotations

import mpmath
import numpy as np
import torch

from fractions import Fraction

from numerics.softmax import covariance, inf_to_one_norm, jacobian_float64, softmax_mp
from numerics.theta import theta_bruteforce

from ..registry import check
from ._util import refuted, verdict, worst


def _theta_mp(p):
    """θ of an mpmath row: its entries are exact dyadic rationals, so θ of their exact
    normalisation comes from numerics.theta (within ~10⁻⁵⁰ of θ(p) since Σp = 1 to 50 digits)."""
    def exact(x):
        man, exp = mpmath.mpf(x).man_exp
        return Fraction(man) * Fraction(2) ** exp
    th = theta_bruteforce([exact(x) for x in p]).theta
    return mpmath.mpf(th.numerator) / th.denominator


@check("C2", "mpmath", scope="50 digits, random logits, L = 2…12 (full: 3 rows per L), τ ∈ [0.25, 4]")
def c2_mpmath(tier):
    rng = np.random.default_rng(20260218)
    per_L = 3 if tier == "full" else 1
    errors = []
    rows = 0
    with mpmath.workdps(50):
        for L in range(2, 13):
            for _ in range(per_L):
                u = rng.normal(scale=rng.uniform(0.5, 6.0), size=L).tolist()
                tau = mpmath.mpf(float(rng.uniform(0.25, 4.0)))
                p = softmax_mp(u, tau)
                norm = inf_to_one_norm(covariance(p, tau))
                err = abs(norm - _theta_mp(p) / tau)
                errors.append(err)
                rows += 1
        ok = all(mpmath.isfinite(e) for e in errors) and max(errors) < mpmath.mpf(10) ** -45
        top = max(errors) if ok else None
    exp10 = int(mpmath.floor(mpmath.log10(top))) if ok and top > 0 else None
    return verdict(bool(ok), f"50 digits, L = 2…12, {rows} rows",
                   f"|‖J_τ‖∞→1 − θ/τ| < 1e-45 on all {rows} random rows",
                   rows=rows, worst_abs_error_log10=exp10)


@check("C2", "mpmath", negative_control=True, guards=("c2_mpmath",),
       scope="50 digits, L = 4…8: the wrong value 4m(1 − m)/τ must differ from the norm on some row")
def c2_mpmath_negative(tier):
    rng = np.random.default_rng(7)
    with mpmath.workdps(50):
        for L in range(4, 9):
            u = rng.normal(size=L).tolist()
            p = softmax_mp(u)
            m = max(p)
            if m < 0.5 and abs(inf_to_one_norm(covariance(p)) - 4 * m * (1 - m)) > mpmath.mpf(10) ** -10:
                return refuted(True, "L = 4…8", f"refuted at L = {L}")
    return refuted(False, "L = 4…8")


@check("C1", "float64", scope="torch float64 autograd vs C(p)/τ on 200 random logit rows, L ≤ 16")
def c1_autograd(tier):
    rng = np.random.default_rng(11)
    errors = []
    n = 200 if tier == "quick" else 2000
    for _ in range(n):
        L = int(rng.integers(2, 17))
        u = rng.normal(scale=3.0, size=L)
        tau = float(rng.uniform(0.3, 3.0))
        ut = torch.tensor(u, dtype=torch.float64)
        J_auto = torch.autograd.functional.jacobian(lambda z: torch.softmax(z / tau, dim=0), ut).numpy()
        J = jacobian_float64(u, tau)
        # Autograd forms p_i − p_i², whose rounding error is a few ulps of p_i (not of the
        # entry), so the error is measured in units of ε·p_max/τ.
        p_max = float(torch.softmax(ut / tau, dim=0).max())
        errors.append(np.abs(J - J_auto).max() / (np.finfo(float).eps * p_max / tau))
    top = worst(errors)
    # Near-one-hot rows are left to the mpmath check below: there autograd itself falls into
    # the p − p² trap (its diagonal rounds to 0), so it is no reference.
    return verdict(top <= 64, f"{n} rows, L ≤ 16",
                   "autograd Jacobian and C(p)/τ agree entrywise within 64·ε·p_max/τ",
                   rows=n, worst_error_in_eps_pmax_over_tau=top)


NEAR_ONE_HOT_GAPS = (20.0, 40.0, 80.0, 300.0, 700.0)
NEAR_ONE_HOT_TOL = 1e-13


def near_one_hot_error(diagonal: str) -> float:
    """Worst relative error of a diagonal entry of jacobian_float64(u, diagonal=…) against 50-digit C(p)."""
    errors = []
    for gap in NEAR_ONE_HOT_GAPS:
        u = np.array([gap, 0.0, -1.0, 0.5])
        J = jacobian_float64(u, diagonal=diagonal)
        with mpmath.workdps(50):
            C = covariance(softmax_mp(u.tolist()))
            for i in range(4):
                ref = C[i][i]
                errors.append(abs((mpmath.mpf(J[i, i]) - ref) / ref))
    return worst(errors)


@check("C1", "mpmath", scope="near-one-hot logits (gap 20…700): float64 diagonal vs 50-digit C(p)")
def c1_near_one_hot(tier):
    # The near-one-hot trap: p_i − p_i² is 0 in float64 once p_max rounds to 1; the diagonal
    # must come from the complementary mass.  Relative error of every diagonal entry.
    top = near_one_hot_error("complement")
    return verdict(top < NEAR_ONE_HOT_TOL, "logit gaps 20, 40, 80, 300, 700",
                   "every diagonal entry of the float64 Jacobian has relative error < 1e-13, including "
                   "p_max = 1 − 1e-300", worst_rel_error=top)


@check("C1", "mpmath", negative_control=True, guards=("c1_near_one_hot",),
       scope="same rows through jacobian_float64 with the naive diagonal p − p² (must lose all accuracy)")
def c1_near_one_hot_negative(tier):
    top = near_one_hot_error("naive")
    # The trap rounds p − p² to 0 at gap ≥ 40: relative error 1, far beyond the check's tolerance.
    return refuted(NEAR_ONE_HOT_TOL <= top < np.inf and top > 0.5, "logit gaps 20, 40, 80, 300, 700",
                   f"naive diagonal worst relative error {top:.2g}", worst_rel_error=top)
