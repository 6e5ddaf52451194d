"""‖J_LN(x)‖₂ exactly, estimated and certified (C14), via one Haynsworth count.

``P`` is symmetric with eigenvalue 0 on 1, ``eps/s²`` on c and 1 elsewhere, so
``‖J‖₂ ≤ ‖γ‖_∞/s``.  Exactly, ``‖J‖₂² = λ_max(A)/s²`` with ``A = ΓP²Γ = D − VVᵀ``,
``D = diag(γ²)``, ``V = [Γ1/√d, √(α(2−α)) Γĉ]`` (P² = Π − α(2−α)ĉĉᵀ).  By Haynsworth
inertia on ``[[D − λI, V], [Vᵀ, I₂]]``, for λ not in D the number of eigenvalues of
A above λ is ``#{D_i > λ} + npos(S(λ)) − 2`` with the 2×2 matrix
``S = I₂ − Vᵀ(D − λI)⁻¹V``.  numerics.haynsworth evaluates that count; this module
runs it exactly (Fractions), in float64 (bisection estimate) and in outward-rounded
intervals (certified two-sided enclosures of ‖J‖₂).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np

from .haynsworth import INTERVAL, POINT, count_above
from .interval import Interval
from .layernorm import as_fractions, check_inputs
from .rounding import down, up


def count_eigs_above_exact(x: Sequence, gamma: Sequence, eps, lam) -> int:
    """Exact number of eigenvalues of ``A = s² J_LNJ_LNᵀ`` strictly above ``lam``.

    Haynsworth count (module docstring); ``lam`` must not equal any γ_i².
    Precision: exact (Fractions).  Use for small d; it is O(d) Fraction sums.
    """
    xs, gs = as_fractions(x, "x"), as_fractions(gamma, "gamma")
    d, e = len(xs), Fraction(eps)
    mean = sum(xs, Fraction(0)) / d
    c = np.array([[t - mean for t in xs]], dtype=object)
    s2 = np.array([sum((t * t for t in c[0]), Fraction(0)) / d + e], dtype=object)
    D = np.array([g * g for g in gs], dtype=object)
    n = int(count_above(POINT, c, s2, D, np.array([Fraction(lam)], dtype=object))[0])
    if n < 0:
        raise ValueError("lam equals some gamma_i^2; the count is taken off the poles")
    return n


def ln_spectral_norm(x, gamma, eps: float, iters: int = 80) -> np.ndarray:
    """``‖J_LN(x)‖₂`` per row of x (shape (..., d)) by bisection on the Haynsworth count.

    Precision: float64 estimate (relative error ~1e-13 in benign cases, no
    guarantee); :func:`ln_spectral_norm_enclosure` certifies it.
    """
    x = np.asarray(x, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    check_inputs(x, gamma, eps)
    shape, d = x.shape[:-1], x.shape[-1]
    X = x.reshape(-1, d)
    c = X - X.mean(axis=-1, keepdims=True)
    s2 = (c * c).mean(axis=-1) + eps
    D = gamma * gamma
    Ds = np.sort(D)[::-1]
    # interlacing for a rank-2 downdate: λ_3(D) ≤ λ_max(A) ≤ λ_1(D)
    lo = np.full(len(X), Ds[2] if d >= 3 else 0.0)
    hi = np.full(len(X), Ds[0])
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        # λ on a pole: step one ulp off it (this is an estimate only)
        mid = np.where((D[None, :] == mid[:, None]).any(-1), up(mid), mid)
        above = count_above(POINT, c, s2, D, mid) >= 1
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.sqrt(0.5 * (lo + hi) / s2).reshape(shape)


# ----------------------------------------------------------------------------- certified (interval)

def s2_enclosure(x, eps: float) -> tuple[Interval, Interval]:
    """Rigorous enclosures ``(σ² + eps, c)`` per row (x, eps taken exactly); c is the centred x."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    mean = Interval(x).sum() / d
    c = Interval(x) - mean[..., None]
    return c.sq().sum() / d + eps, c


def rho_enclosure(x, gamma, eps: float):
    """Rigorous ``(lo, hi)`` of ``ρ = √(σ² + eps)/‖γ‖_∞`` per row.  Outward-rounded."""
    s2, _ = s2_enclosure(x, eps)
    g = float(np.max(np.abs(np.asarray(gamma, dtype=np.float64))))
    # s2.lo ≤ 0 (variance below float resolution, eps = 0): only ρ ≥ 0 is certain
    lo = np.where(s2.lo > 0, down(down(np.sqrt(np.maximum(s2.lo, 0.0))) / g), 0.0)
    return lo, up(up(np.sqrt(s2.hi)) / g)


def ln_spectral_norm_enclosure(x, gamma, eps: float, rel: float = 1e-9):
    """Certified ``(lo, hi, certified)`` for ``‖J_LN(x)‖₂`` per row of x (shape (n, d)).

    x, gamma, eps are taken at their exact float64 values.  ``hi`` is always a
    rigorous upper bound (at worst the C14 bound, outward-rounded; ``inf`` where
    the enclosure of σ² + eps reaches 0, e.g. eps = 0 and a variance below float
    resolution); ``lo`` is a rigorous lower bound (0 where not certified); neither
    is ever NaN.  ``certified[k]`` is True when both bounds came from the exact
    Haynsworth count at λ(1 ± rel) with every sign decided in outward-rounded
    interval arithmetic (never where σ² + eps is not certified positive).
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    gamma = np.asarray(gamma, dtype=np.float64)
    check_inputs(x, gamma, eps)
    s2, c = s2_enclosure(x, eps)
    pos = s2.lo > 0  # rows where s² is certified positive; elsewhere hi = inf, lo = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        est = ln_spectral_norm(x, gamma, eps)
    est = np.where(pos & np.isfinite(est), est, 0.0)
    # placeholder s² = [1, 1] on those rows (results overridden below) keeps the interval code finite
    s2 = Interval(np.where(pos, s2.lo, 1.0), np.where(pos, s2.hi, 1.0))
    D = Interval(gamma).sq()
    lam = est * est * 0.5 * (s2.lo + s2.hi)  # estimate of λ_max(A)
    lam_hi, lam_lo = lam * (1 + rel), lam * (1 - rel)
    n_hi = count_above(INTERVAL, c, s2, D, Interval(lam_hi))
    n_lo = count_above(INTERVAL, c, s2, D, Interval(lam_lo))
    gmax = float(np.max(np.abs(gamma)))
    c14 = up(gmax / down(np.sqrt(s2.lo)))  # C14 bound, outward-rounded
    ok_hi = n_hi == 0
    hi = np.minimum(np.where(ok_hi, up(np.sqrt(up(lam_hi / s2.lo))), c14), c14)
    ok_lo = n_lo >= 1
    lo = np.where(ok_lo, down(np.sqrt(np.maximum(down(lam_lo / s2.hi), 0.0))), 0.0)
    return np.where(pos, lo, 0.0), np.where(pos, hi, np.inf), ok_hi & ok_lo & pos
