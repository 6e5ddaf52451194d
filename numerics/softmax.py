"""The tempered softmax, its Jacobian C(p)/τ (C1), and ∞→1 norms (C2).

One algorithm in several number types: pass Fractions for exact results,
``mpmath.mpf`` for arbitrary precision (inside the caller's ``mp.workdps``),
or use the ``*_float64`` functions.

Near-one-hot trap: when p_max rounds to 1, ``p_i − p_i²`` rounds to
0 although the true diagonal is ``p_i Σ_{j≠i} p_j`` > 0.  Every form here
builds the diagonal from the complementary mass, and the float64 form
computes that mass from the logits directly.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np

from .signs import sign_matrix, sign_tuples


def covariance(p: Sequence, tau=1):
    """C(p)/τ = (diag(p) − p pᵀ)/τ as a list of rows, in p's own number type.

    Exact for Fractions; for other types each entry carries one rounding of
    the product plus the rounding of the complementary sum (no cancellation).
    """
    L = len(p)
    total = sum(p)
    rows = []
    for i in range(L):
        row = []
        for j in range(L):
            if i == j:
                rest = total - p[i] if isinstance(p[i], Fraction) else sum(p[k] for k in range(L) if k != i)
                row.append(p[i] * rest / tau)
            else:
                row.append(-p[i] * p[j] / tau)
        rows.append(row)
    return rows


def softmax_float64(u: np.ndarray, tau: float = 1.0) -> np.ndarray:
    """softmax(u/τ) in float64 (max-shifted; relative error of each entry O(L·ε))."""
    z = np.asarray(u, dtype=np.float64) / tau
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def softmax_mp(u: Sequence, tau=1):
    """softmax(u/τ) with mpmath numbers at the caller's working precision."""
    import mpmath

    z = [mpmath.mpf(x) / tau for x in u]
    top = max(z)
    e = [mpmath.exp(x - top) for x in z]
    s = mpmath.fsum(e)
    return [x / s for x in e]


def complement_float64(u: np.ndarray, tau: float = 1.0) -> np.ndarray:
    """1 − p_i = Σ_{j≠i} p_j computed from the logits, accurate even when p_i ≈ 1.

    Uses 1 − p_i = s_i/(1 + s_i) with s_i = Σ_{j≠i} exp((u_j − u_i)/τ), which has
    no cancellation.
    """
    z = np.asarray(u, dtype=np.float64) / tau
    L = z.shape[0]
    diff = z[None, :] - z[:, None]                     # (L, L): z_j − z_i
    diff[np.arange(L), np.arange(L)] = -np.inf
    m = diff.max(axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    s = np.exp(m[:, 0]) * np.exp(diff - m).sum(axis=1)
    return s / (1.0 + s)


def jacobian_float64(u: np.ndarray, tau: float = 1.0, diagonal: str = "complement") -> np.ndarray:
    """J_τ(u) = C(p)/τ in float64.

    ``diagonal="complement"`` (the default) builds C_ii = p_i(1 − p_i) from the
    complementary mass (trap-safe, relative error O(L·ε) per entry);
    ``diagonal="naive"`` forms p_i − p_i², which falls into the near-one-hot trap
    (C1's negative control runs it to show that the check can tell them apart).
    """
    p = softmax_float64(u, tau)
    J = -np.outer(p, p)
    if diagonal == "complement":
        np.fill_diagonal(J, p * complement_float64(u, tau))
    elif diagonal == "naive":
        np.fill_diagonal(J, p - p * p)
    else:
        raise ValueError(f"unknown diagonal {diagonal!r}")
    return J / tau


def inf_to_one_norm(A) -> object:
    """max_{x ∈ {±1}^L} ‖Ax‖₁, by enumerating sign vertices (exact in A's number type).

    The maximum of the convex function x ↦ ‖Ax‖₁ over the cube is attained at a
    vertex (C2, step (i)); x and −x give the same value, so x_0 = +1 is fixed.
    Cost O(2^(L−1) L²).
    """
    L = len(A)
    best = None
    for x in sign_tuples(L):
        val = sum(abs(sum(A[i][j] * x[j] for j in range(L))) for i in range(L))
        if best is None or val > best:
            best = val
    return best


def inf_to_one_norm_float64(A: np.ndarray) -> float:
    """Vectorised float64 version of :func:`inf_to_one_norm` (L ≤ ~20)."""
    A = np.asarray(A, dtype=np.float64)
    X = sign_matrix(A.shape[0]).astype(np.float64)   # (2^(L−1), L)
    return float(np.abs(X @ A.T).sum(axis=1).max())


def quadratic_form_on_subset(p: Sequence, mask: int):
    """xᵀC(p)x for x = 1_S − 1_{Sᶜ}; equals 4p(S)(1 − p(S)) when Σp = 1 (C2, step iii)."""
    L = len(p)
    x = [1 if mask >> i & 1 else -1 for i in range(L)]
    C = covariance(p)
    return sum(x[i] * C[i][j] * x[j] for i in range(L) for j in range(L))


def entropy_float64(R: np.ndarray):
    """Shannon entropy in nats of each row's normalisation (rows on the last axis).

    Plain float64, descriptive only (E1); zero atoms contribute 0.  A 1-D row gives
    a float, an (n, L) array an (n,) array.
    """
    R = np.asarray(R, dtype=np.float64)
    p = R / R.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return float(h) if h.ndim == 0 else h


__all__ = ["covariance", "softmax_float64", "complement_float64", "jacobian_float64",
           "inf_to_one_norm", "inf_to_one_norm_float64", "quadratic_form_on_subset",
           "entropy_float64", "softmax_mp"]
