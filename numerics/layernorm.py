"""LayerNorm, its Jacobian and its spectral norm (C11, C14), in several precisions.

Conventions (shared/MATH.md, PyTorch): ``LN(x) = γ ⊙ c/s + β`` with ``c = Πx``,
``Π = I − 11ᵀ/d``, ``σ² = ‖c‖²/d`` (biased) and ``s = √(σ² + eps)``.

Closed form (C11).  Differentiating ``c/s``: ``d(c/s) = (Π − ccᵀ/(d s²)) dx / s``, so

    J_LN(x) = (1/s) diag(γ) P,    P = Π − ccᵀ/(d s²) = Π − α ĉĉᵀ,   α = σ²/s².

``P`` is rational in ``(x, eps)``, hence ``J = M/s`` with ``M = diag(γ)P`` rational:
kernel and rank facts are decided exactly on ``M`` (:func:`ln_jacobian_exact`).

Spectral norm (C14).  ``P`` is symmetric with eigenvalue 0 on 1, ``eps/s²`` on c and
1 elsewhere, so ``‖J‖₂ ≤ ‖γ‖_∞/s``.  Exactly, ``‖J‖₂² = λ_max(A)/s²`` with
``A = ΓP²Γ = D − VVᵀ``, ``D = diag(γ²)``, ``V = [Γ1/√d, √(α(2−α)) Γĉ]`` (P² = Π − α(2−α)ĉĉᵀ).
By Haynsworth inertia on ``[[D − λI, V], [Vᵀ, I₂]]``, for λ not in D the number of
eigenvalues of A above λ is ``#{D_i > λ} + npos(S(λ)) − 2`` with the 2×2 matrix
``S = I₂ − Vᵀ(D − λI)⁻¹V``; that count, evaluated exactly (Fractions) or in rigorous
interval arithmetic, certifies two-sided enclosures of ``‖J‖₂``.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import sympy

# ----------------------------------------------------------------------------- validation


def _as_fractions(v, name: str) -> list[Fraction]:
    out = []
    for i, t in enumerate(v):
        if isinstance(t, float) and not np.isfinite(t):
            raise ValueError(f"{name}[{i}] is not finite: {t!r}")
        out.append(Fraction(t))
    return out


def _check(x: np.ndarray, gamma: np.ndarray, eps: float) -> None:
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
    xs, gs = _as_fractions(x, "x"), _as_fractions(gamma, "gamma")
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


def count_eigs_above_exact(x: Sequence, gamma: Sequence, eps, lam) -> int:
    """Exact number of eigenvalues of ``A = s² J_LNJ_LNᵀ`` strictly above ``lam``.

    Haynsworth count (module docstring); ``lam`` must not equal any γ_i².
    Precision: exact (Fractions).  Use for small d; it is O(d) Fraction sums.
    """
    xs, gs = _as_fractions(x, "x"), _as_fractions(gamma, "gamma")
    d, e, lam = len(xs), Fraction(eps), Fraction(lam)
    mean = sum(xs, Fraction(0)) / d
    c = [t - mean for t in xs]
    s2 = sum((t * t for t in c), Fraction(0)) / d + e
    alpha = (s2 - e) / s2
    kappa = (2 - alpha) / (d * s2)  # α(2−α)/‖c‖², finite even at c = 0
    D = [g * g for g in gs]
    if lam in D:
        raise ValueError("lam equals some gamma_i^2; the count is taken off the poles")
    t = [Di - lam for Di in D]
    a = sum((D[i] / t[i] for i in range(d)), Fraction(0)) / d
    b = kappa * sum((D[i] * c[i] * c[i] / t[i] for i in range(d)), Fraction(0))
    g = sum((D[i] * c[i] / t[i] for i in range(d)), Fraction(0))
    det = (1 - a) * (1 - b) - kappa * g * g / d
    tr = 2 - a - b
    npos = 1 if det < 0 else (0 if tr <= 0 else (2 if det > 0 else 1))
    return sum(1 for v in t if v > 0) + npos - 2


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
    _check(x, gamma, eps)
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


def _haynsworth_terms(c, s2, D, lam, d):
    """(det S, tr S, #{D_i > λ}) in float64 for batches (rows = tokens)."""
    alpha = (c * c).sum(-1) / d / s2  # α = σ²/s²
    kappa = (2 - alpha) / (d * s2)
    t = D - lam[:, None]
    hit = (t == 0).any(-1)
    if hit.any():  # λ on a pole: step one ulp off it (this is an estimate only)
        lam = np.where(hit, np.nextafter(lam, np.inf), lam)
        t = D - lam[:, None]
    a = (D / t).sum(-1) / d
    b = kappa * (D * c * c / t).sum(-1)
    g = (D * c / t).sum(-1)
    det = (1 - a) * (1 - b) - kappa * g * g / d
    return det, 2 - a - b, (t > 0).sum(-1)


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


def _npos(det, tr):
    return np.where(det < 0, 1, np.where(tr <= 0, 0, np.where(det > 0, 2, 1)))


def ln_spectral_norm(x, gamma, eps: float, iters: int = 80) -> np.ndarray:
    """``‖J_LN(x)‖₂`` per row of x (shape (..., d)) by bisection on the Haynsworth count.

    Precision: float64 estimate (relative error ~1e-13 in benign cases, no
    guarantee); :func:`ln_spectral_norm_enclosure` certifies it.
    """
    x = np.asarray(x, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    _check(x, gamma, eps)
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
        det, tr, nabove = _haynsworth_terms(c, s2, D, mid, d)
        above = (nabove + _npos(det, tr) - 2) >= 1
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.sqrt(0.5 * (lo + hi) / s2).reshape(shape)


# ----------------------------------------------------------------------------- certified (interval)
# Round-to-nearest results lie within half an ulp of the exact value, so widening
# every computed endpoint by one ulp outward gives a rigorous enclosure.

def _dn(v):
    return np.nextafter(v, -np.inf)


def _up(v):
    return np.nextafter(v, np.inf)


def _iadd(a, b):
    return _dn(a[0] + b[0]), _up(a[1] + b[1])


def _isub(a, b):
    return _dn(a[0] - b[1]), _up(a[1] - b[0])


def _imul(a, b):
    p = np.stack([a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]])
    return _dn(p.min(0)), _up(p.max(0))


def _idiv(a, b):
    bad = (b[0] <= 0) & (b[1] >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.stack([a[0] / b[0], a[0] / b[1], a[1] / b[0], a[1] / b[1]])
    lo, hi = _dn(p.min(0)), _up(p.max(0))
    return np.where(bad, -np.inf, lo), np.where(bad, np.inf, hi)


def _isq(a):
    lo = np.where((a[0] <= 0) & (a[1] >= 0), 0.0, np.minimum(a[0] * a[0], a[1] * a[1]))
    return _dn(lo), _up(np.maximum(a[0] * a[0], a[1] * a[1]))


def _pt(v):
    v = np.asarray(v, dtype=np.float64)
    return v, v


def _isum(terms_lo, terms_hi):
    """Enclosure of Σ over the last axis, summed term by term with outward rounding."""
    lo, hi = np.zeros(terms_lo.shape[:-1]), np.zeros(terms_lo.shape[:-1])
    for i in range(terms_lo.shape[-1]):
        lo, hi = _iadd((lo, hi), (terms_lo[..., i], terms_hi[..., i]))
    return lo, hi


def s2_enclosure(x, eps: float):
    """Rigorous enclosure ``(lo, hi)`` of ``σ² + eps`` per row (x, eps taken exactly)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    tot = _isum(x, x)
    mean = _idiv(tot, _pt(np.full(tot[0].shape, float(d))))
    c = _isub(_pt(x), (mean[0][..., None], mean[1][..., None]))
    sq = _isq(c)
    var = _idiv(_isum(*sq), _pt(np.full(tot[0].shape, float(d))))
    return _iadd(var, _pt(np.full(tot[0].shape, float(eps)))), c


def rho_enclosure(x, gamma, eps: float):
    """Rigorous ``(lo, hi)`` of ``ρ = √(σ² + eps)/‖γ‖_∞`` per row.  Outward-rounded."""
    (s2lo, s2hi), _ = s2_enclosure(x, eps)
    g = float(np.max(np.abs(np.asarray(gamma, dtype=np.float64))))
    # s2lo ≤ 0 (variance below float resolution, eps = 0): only ρ ≥ 0 is certain
    lo = np.where(s2lo > 0, _dn(_dn(np.sqrt(np.maximum(s2lo, 0.0))) / g), 0.0)
    return lo, _up(_up(np.sqrt(s2hi)) / g)


def _count_above_interval(c, s2, D, lam, d):
    """Haynsworth count in interval arithmetic; -1 where the sign is undecided."""
    n = lam.shape[0]
    dd = _pt(np.full(n, float(d)))
    sig2 = _idiv(_isum(*_isq(c)), dd)
    alpha = _idiv(sig2, s2)  # α = σ²/s²
    kappa = _idiv(_isub(_pt(np.full(n, 2.0)), alpha), _imul(dd, s2))
    Dv = (D[0][None, :], D[1][None, :])
    t = _isub(Dv, (lam[:, None], lam[:, None]))
    a = _idiv(_isum(*_idiv(Dv, t)), dd)
    csq = _isq(c)
    b = _imul(kappa, _isum(*_idiv(_imul(Dv, csq), t)))
    g = _isum(*_idiv(_imul(Dv, c), t))
    one = _pt(np.ones(n))
    det = _isub(_imul(_isub(one, a), _isub(one, b)), _idiv(_imul(kappa, _isq(g)), dd))
    tr = _isub(_isub(_pt(np.full(n, 2.0)), a), b)
    pos_t = (t[0] > 0).sum(-1)
    undecided_t = ((t[0] <= 0) & (t[1] >= 0)).any(-1)
    npos = np.where(det[1] < 0, 1, np.where((det[0] > 0) & (tr[0] > 0), 2,
                    np.where((det[0] > 0) & (tr[1] < 0), 0, -99)))
    out = pos_t + npos - 2
    return np.where(undecided_t | (npos < 0), -1, out)


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
    _check(x, gamma, eps)
    d = x.shape[-1]
    (s2lo, s2hi), c = s2_enclosure(x, eps)
    pos = s2lo > 0  # rows where s² is certified positive; elsewhere hi = inf, lo = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        est = ln_spectral_norm(x, gamma, eps)
    est = np.where(pos & np.isfinite(est), est, 0.0)
    # placeholder s² = [1, 1] on those rows (results overridden below) keeps the interval code finite
    s2lo, s2hi = np.where(pos, s2lo, 1.0), np.where(pos, s2hi, 1.0)
    D = _isq(_pt(gamma))
    lam = est * est * 0.5 * (s2lo + s2hi)  # estimate of λ_max(A)
    lam_hi, lam_lo = lam * (1 + rel), lam * (1 - rel)
    n_hi = _count_above_interval(c, (s2lo, s2hi), D, lam_hi, d)
    n_lo = _count_above_interval(c, (s2lo, s2hi), D, lam_lo, d)
    gmax = float(np.max(np.abs(gamma)))
    c14 = _up(gmax / _dn(np.sqrt(s2lo)))  # C14 bound, outward-rounded
    ok_hi = n_hi == 0
    hi = np.where(ok_hi, _up(np.sqrt(_up(lam_hi / s2lo))), c14)
    hi = np.minimum(hi, c14)
    ok_lo = n_lo >= 1
    lo = np.where(ok_lo, _dn(np.sqrt(np.maximum(_dn(lam_lo / s2hi), 0.0))), 0.0)
    hi = np.where(pos, hi, np.inf)
    lo = np.where(pos, lo, 0.0)
    return lo, hi, ok_hi & ok_lo & pos
