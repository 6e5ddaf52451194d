"""X6 (beyond the paper): RMSNorm outputs have RMS at most ‖γ‖∞, the radius R of C10/X3.

Exact: for rational x, γ and eps ≥ 0 the squared statement
mean(γ²x²) ≤ ‖γ‖²∞ (mean(x²) + eps) is decided in Fractions, and equality is
checked at x = e_k with |γ_k| = ‖γ‖∞, eps = 0.  float64: numerics.attention.rmsnorm
on random inputs over 200 decades and a Nelder–Mead search for the largest
RMS(y)/‖γ‖∞ stay below rmsnorm_radius.  Negative control: the same exact
machinery with RMS(γ) in place of ‖γ‖∞ must find a counterexample.
"""
from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np

from numerics.attention import rmsnorm, rmsnorm_radius

from ..registry import check
from ._util import nanmax, refuted, verdict


def _rat(rng, n: int, scale: int = 50) -> list[F]:
    return [F(int(rng.integers(-scale, scale + 1)), int(rng.integers(1, 9))) for _ in range(n)]


def _exact_cases(seed: int, n: int):
    """Random rational (x, γ, eps) with x ≠ 0, plus the equality points x = e_k, eps = 0."""
    rng = np.random.default_rng(seed)
    for t in range(n):
        d = int(rng.integers(1, 9))
        g = _rat(rng, d)
        if t % 4 == 0:                                    # the extremal point for this γ
            k = max(range(d), key=lambda i: abs(g[i]))
            x = [F(0)] * d
            x[k] = F(int(rng.integers(1, 20)), 3)
            yield x, g, F(0), True
            continue
        x = _rat(rng, d)
        if not any(x):
            x[0] = F(1)
        eps = F(0) if t % 3 == 0 else F(int(rng.integers(1, 100)), 10 ** int(rng.integers(1, 7)))
        yield x, g, eps, False


def _sq_rms_y(x, g, eps) -> F:
    d = len(x)
    return sum(gi * gi * xi * xi for gi, xi in zip(g, x)) / d / (sum(xi * xi for xi in x) / d + eps)


def _radius_sq(g) -> F:
    return max(gi * gi for gi in g)


def _rms_gamma_sq(g) -> F:
    return sum(gi * gi for gi in g) / len(g)


@check("X6", "exact", scope="rational x, γ (d ≤ 8) and eps ≥ 0: RMS(y)² ≤ ‖γ‖²∞ exactly, with equality at x = e_k, "
       "eps = 0 (quick: 400 cases; full: 20000)")
def x6_radius_exact(tier):
    n = 400 if tier == "quick" else 20000
    viol, eq_ok, eq_n = 0, 0, 0
    for x, g, eps, extremal in _exact_cases(606, n):
        v, R2 = _sq_rms_y(x, g, eps), _radius_sq(g)
        viol += v > R2
        if extremal:
            eq_n += 1
            eq_ok += v == R2
    ok = viol == 0 and eq_n > 0 and eq_ok == eq_n
    return verdict(ok, f"{n} exact cases", f"{viol} violations; equality attained at {eq_ok}/{eq_n} extremal points",
                   cases=n, violations=viol, equality_points=eq_n)


@check("X6", "exact", scope="the same exact comparison with RMS(γ) as the radius", negative_control=True,
       guards=("x6_radius_exact",))
def x6_rms_gamma_radius_refuted(tier):
    n, found = 400, 0
    for x, g, eps, _ in _exact_cases(606, n):
        found += _sq_rms_y(x, g, eps) > _rms_gamma_sq(g)
    return refuted(found > 0, f"{n} exact cases", f"RMS(y) > RMS(γ) in {found} of {n} cases", counterexamples=found)


@check("X6", "float64", scope="numerics.attention.rmsnorm on random x (|x| from 1e-100 to 1e100, d ≤ 4096, eps ∈ "
       "{0, 1e-6, 1e-5, 1}) and a Nelder–Mead search for the largest RMS(y)/‖γ‖∞")
def x6_float64_random_and_adversarial(tier):
    from scipy.optimize import minimize
    rng = np.random.default_rng(607)
    n = 300 if tier == "quick" else 5000
    worst, worst_pos_eps = 0.0, 0.0
    for t in range(n):
        d = int(rng.choice([1, 2, 3, 8, 64, 4096]))
        g = rng.standard_normal(d) * float(np.exp(rng.uniform(-3, 3)))
        x = rng.standard_normal(d) * 10.0 ** float(rng.uniform(-100, 100))
        if t % 5 == 0:
            x[rng.random(d) < 0.8] = 0.0
            x[int(np.argmax(np.abs(g)))] = 1.0
        eps = float(rng.choice([0.0, 1e-6, 1e-5, 1.0]))
        y = rmsnorm(x, g, eps)
        q = math.sqrt(float((y * y).mean())) / rmsnorm_radius(g)
        worst = nanmax(worst, q)
        if eps > 0:
            worst_pos_eps = nanmax(worst_pos_eps, q)
    best = 0.0
    for d in (2, 4, 8):
        g = rng.standard_normal(d)
        for eps in (0.0, 1e-5):
            f = lambda v: -math.sqrt(float((rmsnorm(v, g, eps) ** 2).mean())) / rmsnorm_radius(g) if np.any(v) else 0.0  # noqa: E731
            res = minimize(f, rng.standard_normal(d), method="Nelder-Mead", options=dict(maxfev=400, xatol=1e-12))
            best = nanmax(best, -res.fun)
    ok = worst <= 1.0 and best <= 1.0
    return verdict(ok, f"{n} random inputs, 6 searches",
                   f"max RMS(y)/R over random inputs {worst:.15f} (eps > 0: {worst_pos_eps:.15f}); "
                   f"Nelder–Mead best {best:.15f} (R = ‖γ‖∞ rounded up by 1e-12)",
                   inputs=n, max_ratio_random=worst, max_ratio_search=best)
