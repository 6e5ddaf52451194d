"""Cheap θ tools for batches of float64 rows outside the fused certify kernels.

Rows are (n, L) float64 arrays of nonnegative finite values (exact dyadic rationals); θ is
that of each row's exact normalisation p/Σp (C7).

* :func:`topk_delta_lower` — a certified lower bound on δ (so an upper bound θ ≤ 1 − δ_lo²,
  used by :mod:`numerics.attention_bounds` for C9/C10).  It is the top-K interval lemma of
  :func:`numerics.theta_refine.topk_lemma` (exact extraction sums, rounded outward once),
  the one implementation that certify runs and ``verify`` recomputes; this module only lifts
  tiny rows and adapts the calling convention.
* :func:`count_delta_lower` — the count (parity) lemma, a certified lower bound on δ for
  rows with an odd number n of nonzero atoms: one side of any split holds at least
  k = (n + 1)/2 of them, so |A − B| ≥ 2·s_k − T with s_k the sum of the k smallest.  When
  that is positive the k smallest atoms attain it (an optimal witness).  This is what
  closes diffuse rows of comparable atoms with an odd count (uniform rows are C3's
  1 − 1/L²), where the top-K lemma's tail swamps its head.
* :func:`kk_masks` — Karmarkar–Karp witness masks for the certify pipeline's stage B.  A
  search: plain floats, every mask is re-scored by the outward-rounded evaluator.

The older float kernels that lived here (compensated-sum witness bounds, a prefix-crossing
pass, sorted greedy and their torch forms) were replaced by :mod:`numerics.theta_fused`,
:mod:`numerics.theta_kernels` and :mod:`numerics.theta_torch`, which compute the same
things from exact sums.
"""
from __future__ import annotations

import heapq
import math

import numba
import numpy as np

from numerics.rounding import down, up
from numerics.theta_kernels import TINY
from numerics.theta_refine import topk_lemma

HUGE = 2.0 ** 900    # rows with a larger maximum are scaled down first (see topk_delta_lower)


# ----------------------------------------------------------------------------- top-K interval lemma

def topk_delta_lower(R: np.ndarray, K: int = 12):
    """Top-K interval lemma: δ·T ≥ min_ε max(0, |Σ_{i≤K} ε_i x_(i)| − t_K), rounded outward.

    Returns (delta_lo, mask, closes): delta_lo ≤ δ(p) for every row (0 where no bound is
    found, and for rows with a maximum above 2^900 that cannot be scaled down exactly).
    Where ``closes`` holds, |Σε*x| ≥ t_K and ``mask`` — the top atoms by the minimising ε,
    the tail on the lighter side — attains the bound, so it is an optimal witness; on the
    other rows ``mask`` is all False.
    """
    R = np.ascontiguousarray(R, dtype=np.float64)
    n, L = R.shape
    K = max(1, min(int(K), L))
    # θ is scale-free: bring rows whose maximum is below TINY (the extraction's second
    # splitter would be subnormal) or above HUGE (its first splitter would overflow) to a
    # maximum in [1, 2) by a power of two — where that is exact (always, scaling up;
    # scaling down only if no atom loses a bit).  Other rows keep a zero bound.
    m = R.max(axis=1) if L else np.zeros(n)
    odd = (m > 0) & ((m < TINY) | (m > HUGE))
    if odd.any():
        k = np.where(odd, 1 - np.frexp(np.where(odd, m, 1.0))[1], 0)
        S = np.ldexp(R, k[:, None])
        exact = (np.ldexp(S, -k[:, None]) == R).all(axis=1)
        R = np.ascontiguousarray(np.where(exact[:, None], S, R))
    M = np.zeros((n, L), dtype=np.uint8)
    d_lo = np.zeros(n)
    closes = np.zeros(n, dtype=np.bool_)
    topk_lemma(R, K, M, d_lo, closes)
    ok = np.isfinite(d_lo) & (d_lo >= 0)
    d_lo = np.where(ok, d_lo, 0.0)
    closes &= ok
    return d_lo, M.astype(bool) & closes[:, None], closes


# ----------------------------------------------------------------------------- count lemma

def count_delta_lower(R: np.ndarray):
    """Count (parity) lemma: δ·T ≥ 2·s_k − T when the row has an odd number n of nonzero
    atoms, k = (n + 1)/2 and s_k is the sum of its k smallest nonzero atoms.

    Proof: S or its complement holds at least k nonzero atoms, say A; then x(A) ≥ s_k and
    |x(S) − x(S^c)| = 2·x(A) − T ≥ 2·s_k − T.  Equality for S = the k smallest atoms.

    Exact: after an exact power-of-two scaling, 2·s_k − T and T are each one ``math.fsum``
    (the correctly rounded value of the exact sum), moved one ulp outward, and the quotient
    rounded down.  Returns
    (delta_lo, mask, closes) like :func:`topk_delta_lower`: delta_lo ≤ δ(p) (0 where the
    lemma gives nothing: even n, or 2·s_k ≤ T); where ``closes`` holds the mask (the k
    smallest atoms) attains the bound exactly.
    """
    R = np.asarray(R, dtype=np.float64)
    n, L = R.shape
    d_lo = np.zeros(n)
    M = np.zeros((n, L), dtype=bool)
    closes = np.zeros(n, dtype=bool)
    for i in range(n):
        nz = np.flatnonzero(R[i] > 0)
        if nz.size % 2 == 0:
            continue
        order = nz[np.argsort(R[i, nz], kind="stable")]
        k = (nz.size + 1) // 2
        # θ is scale-free: bring the maximum to [1, 2) by a power of two where that is exact
        # (outward steps of one ulp are then relative, not subnormal-sized; no overflow)
        e = 1 - int(np.frexp(R[i, order[-1]])[1])
        vals = np.ldexp(R[i, order], e)
        if not np.array_equal(np.ldexp(vals, -e), R[i, order]):
            continue                     # a huge row whose smallest atoms would lose bits
        num = math.fsum(np.concatenate([vals[:k], -vals[k:]]).tolist())
        if not num > 0.0:
            continue
        T_hi = float(up(math.fsum(vals.tolist())))
        d_lo[i] = max(0.0, float(down(float(down(num)) / T_hi)))
        M[i, order[:k]] = True
        closes[i] = True
    return d_lo, M, closes


# ----------------------------------------------------------------------------- Karmarkar–Karp

@numba.njit(cache=True)
def _kk_row(x, out):
    L = x.shape[0]
    heap = [(-x[j], j) for j in range(L)]
    heapq.heapify(heap)
    partner = np.full(L, -1)
    merged = np.empty(L, dtype=np.int64)
    nm = 0
    while len(heap) > 1:
        a, i = heapq.heappop(heap)       # largest remaining
        b, j = heapq.heappop(heap)       # second largest: put opposite to i
        heapq.heappush(heap, (a - b, i))
        partner[j] = i
        merged[nm] = j
        nm += 1
    colour = np.zeros(L, dtype=np.bool_)
    for k in range(nm - 1, -1, -1):     # 2-colouring of the differencing tree, root first
        j = merged[k]
        colour[j] = not colour[partner[j]]
    out[:] = colour


@numba.njit(cache=True)
def kk_masks(R):
    """Karmarkar–Karp largest differencing, the subset recovered by 2-colouring."""
    n, L = R.shape
    M = np.zeros((n, L), dtype=np.bool_)
    for i in range(n):
        _kk_row(R[i], M[i])
    return M
