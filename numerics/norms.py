"""The block-∞/RMS norm (C8–C10) and tools for B→B operator norms.

For X ∈ R^{L×d} with rows x_i,  ‖X‖_B = max_i ‖x_i‖₂/√d  (the Conventions of paper_checks.md).

A linear map J : R^{L×d_in} → R^{L×d_out} is stored as an array of shape
(L, d_out, L, d_in) (the layout of ``torch.autograd.functional.jacobian`` for a
map (L, d_in) → (L, d_out)).  Its operator norm is

    ‖J‖_{B→B} = max_{‖X‖_B ≤ 1} ‖JX‖_B
              = √(d_in/d_out) · max_k max_{‖x_i‖₂ ≤ 1} ‖Σ_i J[k, :, i, :] x_i‖₂.

The inner maximum is of a convex function over a product of balls, so it is
attained at a point of the product of spheres.  For d_in = 1 the spheres are
{±1} and :func:`bb_norm_vertices` enumerates them: exact up to float64
rounding.  For d_in > 1 no exact method is used here: :func:`bb_norm_ascent`
gives a lower bound (the value at a feasible point it found) and
:func:`bb_norm_upper` the upper bound max_k Σ_i ‖J[k,:,i,:]‖₂.  A violation of
a claimed upper bound found with the lower bound is real; the absence of one
is evidence, not proof.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .signs import sign_matrix


def block_norm(X) -> float:
    """‖X‖_B = max_i ‖x_i‖₂/√d for X of shape (L, d); float64 (relative error ≤ (d+2)·2⁻⁵³)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] == 0:
        raise ValueError(f"block_norm: expected an (L, d) array with d ≥ 1, got shape {X.shape}")
    return float(np.sqrt((X * X).sum(axis=1)).max() / math.sqrt(X.shape[1]))


def block_norm_sq_exact(rows: Sequence[Sequence]):
    """‖X‖_B² = max_i ‖x_i‖²/d, exact for rows of Fractions or ints (C8 checks compare squares)."""
    rows = [list(r) for r in rows]
    if not rows or not rows[0]:
        raise ValueError("block_norm_sq_exact: empty matrix")
    d = len(rows[0])
    if any(len(r) != d for r in rows):
        raise ValueError("block_norm_sq_exact: rows of unequal length")
    from fractions import Fraction
    return max(sum(v * v for v in r) for r in rows) / Fraction(d)


def frobenius_rms(X) -> float:
    """‖X‖_F/√(L·d) in float64: the Frobenius counterpart scaled so that it equals ‖X‖_B
    on matrices with all rows of equal norm (the C8 negative control compares the two)."""
    X = np.asarray(X, dtype=np.float64)
    return float(np.sqrt((X * X).sum() / X.size))


def _check_jac(J) -> np.ndarray:
    J = np.asarray(J, dtype=np.float64)
    if J.ndim != 4 or J.shape[0] != J.shape[2]:
        raise ValueError(f"expected a Jacobian of shape (L, d_out, L, d_in), got {J.shape}")
    if not np.isfinite(J).all():
        raise ValueError("Jacobian has non-finite entries")
    return J


def bb_norm_vertices(J, max_L: int = 16) -> tuple[float, np.ndarray]:
    """Exact ‖J‖_{B→B} for d_in = 1 by enumerating the 2^(L−1) sign vertices.

    Returns (norm, x) with x ∈ {±1}^L a maximiser.  float64: the enumeration is
    exhaustive, each value carries relative rounding error ≤ (L + d_out)·2⁻⁵³.
    """
    J = _check_jac(J)
    L, d_out, _, d_in = J.shape
    if d_in != 1:
        raise ValueError(f"vertex enumeration is exact only for d_in = 1, got d_in = {d_in}")
    if L > max_L:
        raise ValueError(f"vertex enumeration limited to L ≤ {max_L}, got {L}")
    S = sign_matrix(L).astype(np.float64)      # (V, L); x and −x give the same norm
    M = J[:, :, :, 0]                          # (L_out, d_out, L_in)
    out = np.einsum("vi,kci->vkc", S, M)       # (V, L_out, d_out)
    vals = np.sqrt((out * out).sum(axis=2))    # (V, L_out)
    v, _ = np.unravel_index(int(np.argmax(vals)), vals.shape)
    return float(vals.max() / math.sqrt(d_out)), S[v].reshape(L, 1)


def bb_norm_upper(J) -> float:
    """Upper bound √(d_in/d_out)·max_k Σ_i ‖J[k,:,i,:]‖₂ (float64, SVD; relative error ~1e-15)."""
    J = _check_jac(J)
    L, d_out, _, d_in = J.shape
    blocks = np.transpose(J, (0, 2, 1, 3))     # (k, i, d_out, d_in)
    s = np.linalg.norm(blocks, ord=2, axis=(2, 3))
    return float(s.sum(axis=1).max() * math.sqrt(d_in / d_out))


def bb_norm_ascent(J, restarts: int = 8, iters: int = 60, rng=None) -> tuple[float, np.ndarray]:
    """A lower bound on ‖J‖_{B→B} by alternating ascent, with the feasible point that attains it.

    For each output row k: y ← J_k x/‖J_k x‖, then x_i ← (J_kiᵀ y)/‖J_kiᵀ y‖; each
    step does not decrease yᵀJ_k x.  Started from the top singular vectors of
    the blocks and from random points.  The returned value is recomputed at
    the returned x (‖x_i‖ = 1 up to rounding, rescaled to ≤ 1), so it is a
    true lower bound up to float64 rounding (relative ~1e-15).
    """
    J = _check_jac(J)
    L, d_out, _, d_in = J.shape
    rng = np.random.default_rng(0) if rng is None else rng
    best, best_x = -1.0, None
    for k in range(L):
        Jk = J[k]                                  # (d_out, L, d_in)
        starts = []
        # Start: for the output row k, the top left singular vector of [J_k1 … J_kL].
        u, _, _ = np.linalg.svd(Jk.reshape(d_out, L * d_in), full_matrices=False)
        starts.append(("y", u[:, 0]))
        for _ in range(restarts):
            starts.append(("x", rng.standard_normal((L, d_in))))
        for kind, v in starts:
            if kind == "y":
                x = _x_from_y(Jk, v)
            else:
                x = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
            prev = -1.0
            for _ in range(iters):
                z = np.einsum("cid,id->c", Jk, x)
                nz = float(np.linalg.norm(z))
                if nz == 0.0:
                    break
                x = _x_from_y(Jk, z / nz)
                if nz <= prev * (1 + 1e-13):
                    break
                prev = nz
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)  # feasible
            val = float(np.linalg.norm(np.einsum("cid,id->c", Jk, x)))
            if val > best:
                best, best_x = val, x.copy()
    return best * math.sqrt(d_in / d_out), best_x


def _x_from_y(Jk: np.ndarray, y: np.ndarray) -> np.ndarray:
    g = np.einsum("c,cid->id", y, Jk)              # J_kiᵀ y for every i
    n = np.linalg.norm(g, axis=1, keepdims=True)
    x = np.where(n > 0, g / np.where(n > 0, n, 1.0), 0.0)
    return x


def bb_norm(J, **kw) -> tuple[float, bool]:
    """(value, exact): the exact norm for d_in = 1, else the ascent lower bound."""
    J = _check_jac(J)
    if J.shape[3] == 1 and J.shape[0] <= 16:
        return bb_norm_vertices(J)[0], True
    return bb_norm_ascent(J, **kw)[0], False
