"""Arbitrary-precision (mpmath) and float64 checks of C1 and C2."""
from __future__ import annotations

import mpmath
import numpy as np
import torch

from numerics.softmax import covariance, inf_to_one_norm, jacobian_float64, softmax_mp

from ..registry import check
from ._util import refuted, verdict, worst


def _theta_mp(p):
    """θ by enumerating subsets, in mpmath (p sums to 1 up to working precision)."""
    L = len(p)
    best = mpmath.mpf(0)
    for mask in range(1 << (L - 1)):
        a = mpmath.fsum(p[i] for i in range(L) if mask >> i & 1)
        best = max(best, 4 * a * (1 - a))
    return best


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


@check("C2", "mpmath", negative_control=True,
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


@check("C1", "mpmath", scope="near-one-hot logits (gap 20…700): float64 diagonal vs 50-digit C(p)")
def c1_near_one_hot(tier):
    # The trap of MATH.md: p_i − p_i² is 0 in float64 once p_max rounds to 1; the diagonal
    # must come from the complementary mass.  Relative error of every diagonal entry.
    errors = []
    for gap in (20.0, 40.0, 80.0, 300.0, 700.0):
        u = np.array([gap, 0.0, -1.0, 0.5])
        J = jacobian_float64(u)
        with mpmath.workdps(50):
            C = covariance(softmax_mp(u.tolist()))
            for i in range(4):
                ref = C[i][i]
                errors.append(abs((mpmath.mpf(J[i, i]) - ref) / ref))
    top = worst(errors)
    return verdict(top < 1e-13, "logit gaps 20, 40, 80, 300, 700",
                   "every diagonal entry of the float64 Jacobian has relative error < 1e-13, including "
                   "p_max = 1 − 1e-300", worst_rel_error=top)


@check("C1", "mpmath", negative_control=True,
       scope="the naive float64 diagonal p − p² at logit gap 40 (must lose all accuracy)")
def c1_near_one_hot_negative(tier):
    u = np.array([40.0, 0.0, -1.0, 0.5])
    p = np.exp(u - u.max())
    p /= p.sum()
    naive = p[0] - p[0] ** 2
    with mpmath.workdps(50):
        ref = covariance(softmax_mp(u.tolist()))[0][0]
        rel = float(abs((mpmath.mpf(naive) - ref) / ref))
    return refuted(rel > 0.5, "logit gap 40", f"naive diagonal relative error {rel:.2g}", rel_error=rel)
