"""LayerNorm, its Jacobian and its spectral norm (C11, C14), in several precisions.

Conventions (paper_checks.md, as in PyTorch): ``LN(x) = γ ⊙ c/s + β`` with ``c = Πx``,
``Π = I − 11ᵀ/d``, ``σ² = ‖c‖²/d`` (biased) and ``s = √(σ² + eps)``.

Closed form (C11).  Differentiating ``c/s``: ``d(c/s) = (Π − ccᵀ/(d s²)) dx / s``, so

    J_LN(x) = (1/s) diag(γ) P,    P = Π − ccᵀ/(d s²) = Π − α ĉĉᵀ,   α = σ²/s².

``P`` is rational in ``(x, eps)``, hence ``J = M/s`` with ``M = diag(γ)P`` rational:
kernel and rank facts are decided exactly on ``M`` (:func:`ln_jacobian_exact`).

Spectral norm (C14): ``‖J‖₂ ≤ ‖γ‖_∞/s`` (:func:`ln_norm_bound`); the exact value,
its float64 estimate and certified enclosures are in numerics.layernorm_spectral.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import sympy

# ----------------------------------------------------------------------------- validation


def as_fractions(v, name: str) -> list[Fraction]:
    out = []
    for i, t in enumerate(v):
        if isinstance(t, float) and not np.isfinite(t):
            raise ValueError(f"{name}[{i}] is not finite: {t!r}")
        out.append(Fraction(t))
    return out


def check_inputs(x: np.ndarray, gamma: np.ndarray, eps: float) -> None:
    if x.shape[-1] != gamma.shape[-1]:
        raise ValueError(f"x has width {x.shape[-1]} but gamma has {gamma.shape[-1]}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(gamma))):
        raise ValueError("x or gamma has a non-finite entry")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")


# ----------------------------------------------------------------------------- exact (C11)


def ln_jacobian_exact(x: Sequence, gamma: Sequence, eps=0) -> tuple[sympy.Matrix, sympy.Rational]:
    """Exact ``(M, s²)`` with ``J_LN(x) = M/√s²``; M is a rational sympy Matrix.

    Inputs are exact rationals (ints, Fractions, or floats taken at their exact
    dyadic value).  Precision: exact.  Raises if s² = 0 (eps = 0 and x constant).
    """
    xs, gs = as_fractions(x, "x"), as_fractions(gamma, "gamma")
    d = len(xs)
    if len(gs) != d:
        raise ValueError(f"x has width {d} but gamma has {len(gs)}")
    e = Fraction(eps)
    mean = sum(xs, Fraction(0)) / d
    c = [t - mean for t in xs]
    s2 = sum((t * t for t in c), Fraction(0)) / d + e
    if s2 == 0:
        raise ValueError("LayerNorm Jacobian undefined: eps = 0 and x is constant")
    rows = []
    for i in range(d):
        # P_ij = δ_ij − 1/d − c_i c_j/(d s²)
        rows.append([gs[i] * ((1 if i == j else 0) - Fraction(1, d) - c[i] * c[j] / (d * s2))
                     for j in range(d)])
    M = sympy.Matrix([[sympy.Rational(v.numerator, v.denominator) for v in r] for r in rows])
    return M, sympy.Rational(s2.numerator, s2.denominator)


def ln_jacobian_sympy(x: Sequence, gamma: Sequence, eps=0) -> sympy.Matrix:
    """``J_LN(x)`` as an exact sympy Matrix (entries rational multiples of 1/√s²)."""
    M, s2 = ln_jacobian_exact(x, gamma, eps)
    return M / sympy.sqrt(s2)


def ln_sympy_autodiff(x: Sequence, gamma: Sequence, eps=0) -> sympy.Matrix:
    """``J_LN(x)`` by sympy differentiation of the definition (independent of the closed form).

    Differentiates ``γ_i (x_i − mean)/√(var + eps)`` symbolically, then substitutes
    the exact point.  Precision: exact.
    """
    d = len(x)
    xs = sympy.symbols(f"x0:{d}", real=True)
    mean = sum(xs) / d
    var = sum((t - mean) ** 2 for t in xs) / d
    e = sympy.Rational(Fraction(eps).numerator, Fraction(eps).denominator)
    gs = [sympy.Rational(Fraction(g).numerator, Fraction(g).denominator) for g in gamma]
    out = [gs[i] * (xs[i] - mean) / sympy.sqrt(var + e) for i in range(d)]
    point = {xs[i]: sympy.Rational(Fraction(x[i]).numerator, Fraction(x[i]).denominator) for i in range(d)}
    J = sympy.Matrix(d, d, lambda i, j: sympy.diff(out[i], xs[j]).subs(point))
    return J.applyfunc(sympy.radsimp)


# ----------------------------------------------------------------------------- float64 / mpmath


def ln_forward(x, gamma, beta, eps: float) -> np.ndarray:
    """LayerNorm over the last axis, PyTorch convention.  Precision: float64."""
    x = np.asarray(x, dtype=np.float64)
    c = x - x.mean(axis=-1, keepdims=True)
    s = np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps)
    return np.asarray(gamma, dtype=np.float64) * c / s + np.asarray(beta, dtype=np.float64)


def ln_jacobian(x, gamma, eps: float, precision: str = "float64"):
    """Closed-form ``J_LN(x)`` (C11).

    ``precision="float64"``: x of shape (..., d) gives (..., d, d) numpy float64
    (relative error a few ulps per entry).  ``precision="mpmath"``: x of shape (d,)
    gives an mpmath matrix at the caller's ``mp.dps`` (inputs taken exactly).
    """
    if precision == "mpmath":
        import mpmath as mp
        d = len(x)
        xs = [mp.mpf(v) for v in x]
        gs = [mp.mpf(v) for v in gamma]
        mean = mp.fsum(xs) / d
        c = [t - mean for t in xs]
        s2 = mp.fsum(t * t for t in c) / d + mp.mpf(eps)
        s = mp.sqrt(s2)
        return mp.matrix([[gs[i] * ((1 if i == j else 0) - mp.mpf(1) / d - c[i] * c[j] / (d * s2)) / s
                           for j in range(d)] for i in range(d)])
    if precision != "float64":
        raise ValueError(f"unknown precision {precision!r}")
    x = np.asarray(x, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    check_inputs(x, gamma, eps)
    d = x.shape[-1]
    c = x - x.mean(axis=-1, keepdims=True)
    s2 = (c * c).mean(axis=-1, keepdims=True) + eps
    P = np.eye(d) - 1.0 / d - c[..., :, None] * c[..., None, :] / (d * s2[..., None])
    return gamma[..., :, None] * P / np.sqrt(s2)[..., None]


def ln_norm_bound(x, gamma, eps: float) -> np.ndarray:
    """C14 bound ``‖γ‖_∞/√(σ² + eps)`` per row of x.  Precision: float64 (few ulps)."""
    x = np.asarray(x, dtype=np.float64)
    c = x - x.mean(axis=-1, keepdims=True)
    s = np.sqrt((c * c).mean(axis=-1) + eps)
    return np.max(np.abs(np.asarray(gamma, dtype=np.float64)), axis=-1) / s


def rho(x, gamma, eps: float) -> np.ndarray:
    """X1's ``ρ = √(var(x) + eps)/‖γ‖_∞`` per row (``‖J_LN‖₂ ≤ 1/ρ``).  Precision: float64."""
    return 1.0 / ln_norm_bound(x, gamma, eps)


def ln_jvp(x, gamma, eps: float, v) -> np.ndarray:
    """``J_LN(x) v`` per row without forming J: ``(γ/s) ⊙ (Πv − c (cᵀv)/(d s²))``.  float64."""
    x, v = np.asarray(x, dtype=np.float64), np.asarray(v, dtype=np.float64)
    d = x.shape[-1]
    c = x - x.mean(-1, keepdims=True)
    s2 = (c * c).mean(-1, keepdims=True) + eps
    Pv = v - v.mean(-1, keepdims=True) - c * (c * v).sum(-1, keepdims=True) / (d * s2)
    return np.asarray(gamma, dtype=np.float64) * Pv / np.sqrt(s2)


def ln_vjp(x, gamma, eps: float, w) -> np.ndarray:
    """``J_LN(x)ᵀ w`` per row (P is symmetric, so Jᵀw = P(γ ⊙ w)/s).  float64."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    c = x - x.mean(-1, keepdims=True)
    s2 = (c * c).mean(-1, keepdims=True) + eps
    u = np.asarray(gamma, dtype=np.float64) * np.asarray(w, dtype=np.float64)
    Pu = u - u.mean(-1, keepdims=True) - c * (c * u).sum(-1, keepdims=True) / (d * s2)
    return Pu / np.sqrt(s2)


def ln_product_norm(xs: list, gammas: list, eps: list, iters: int = 200, seed: int = 0) -> np.ndarray:
    """``‖J_LN(x_N) ⋯ J_LN(x_1)‖₂`` per token row by power iteration (C14/C15's LN-only term).

    ``xs[l]`` has shape (n, d).  Precision: float64; the value is ‖Πv‖/‖v‖ for the
    final iterate v, so up to rounding (~1e-13 relative) it is a lower bound on the
    norm, and equals it when the iteration has converged.
    """
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(np.shape(xs[0]))
    est = np.zeros(len(v))
    for _ in range(iters):
        v /= np.linalg.norm(v, axis=-1, keepdims=True)
        w = v
        for x, g, e in zip(xs, gammas, eps):
            w = ln_jvp(x, g, e, w)
        est = np.linalg.norm(w, axis=-1)
        for x, g, e in zip(reversed(xs), reversed(gammas), reversed(eps)):
            w = ln_vjp(x, g, e, w)
        v = w
    return est
