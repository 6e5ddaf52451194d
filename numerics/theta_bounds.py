"""Cheap θ tools for batches of float64 rows outside the fused certify kernels.

Rows are (n, L) float64 arrays of nonnegative finite values (exact dyadic rationals); θ is
that of each row's exact normalisation p/Σp (C7).

* :func:`topk_delta_lower` — a certified lower bound on δ (so an upper bound θ ≤ 1 − δ_lo²,
  used by :mod:`numerics.attention_bounds` for C9/C10).  It is the top-K interval lemma of
  :func:`numerics.trusted.topk_row` (exact extraction sums, rounded outward once),
  the one implementation that certify runs and ``verify`` recomputes; this module only lifts
  tiny rows and adapts the calling convention.
* :func:`count_delta_lower` — the count lemma (:func:`numerics.trusted.count_interval`, in
  integers), a certified lower bound on δ from how many tail atoms each side can hold.  With an odd number n of nonzero atoms one side of any
  split holds at least k = (n + 1)/2 of them, so |A − B| ≥ 2·s_k − T with s_k the sum of
  the k smallest; with the K largest atoms' signs enumerated, the tail's contribution for
  each count j lies in an interval, which also settles rows with one atom just below 1/2
  and no small atom to balance it.  When the bound is positive a mask attains it (an
  optimal witness).  This closes diffuse rows of comparable atoms with an odd count
  (uniform rows are C3's 1 − 1/L²), where the top-K lemma's tail swamps its head.
* :func:`kk_masks` — Karmarkar–Karp witness masks, the batch form of stage B's last search
  (:func:`numerics.theta_refine.kk_row`).  A
  search: plain floats, every mask is re-scored by the outward-rounded evaluator.

The older float kernels that lived here (compensated-sum witness bounds, a prefix-crossing
pass, sorted greedy and their torch forms) were replaced by :mod:`numerics.theta_fused`,
:mod:`numerics.theta_kernels` and :mod:`numerics.theta_torch`, which compute the same
things from exact sums.
"""
from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np

from numerics.rounding import frac_down
from numerics.theta import integer_weights
from numerics.theta_refine import kk_row, topk_lemma
from numerics.trusted import TINY, count_interval

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

def count_delta_lower(R: np.ndarray, K: int = 0):
    """Count lemma (:func:`numerics.trusted.count_interval`): a certified lower bound on δ, the better
    of K = 0 (parity: one side of any split holds at least (n + 1)/2 of an odd number n of
    nonzero atoms, so |A − B| ≥ 2·s_k − T, s_k the sum of the k = (n + 1)/2 smallest) and
    the given K (the largest atoms' signs enumerated, 2^(K−1) cases).

    Exact: the row is put over one power-of-two denominator as integers, the lemma is
    evaluated in integers, and δ ≥ d/T is rounded down once.  Returns (delta_lo, mask,
    closes) like :func:`topk_delta_lower`: delta_lo = 0 where the lemma gives nothing; where
    ``closes`` holds the mask attains the bound exactly (an optimal witness).
    """
    R = np.asarray(R, dtype=np.float64)
    n, L = R.shape
    d_lo = np.zeros(n)
    M = np.zeros((n, L), dtype=bool)
    closes = np.zeros(n, dtype=bool)
    for i in range(n):
        nz = np.flatnonzero(R[i] > 0)
        w = integer_weights(R[i, nz])
        T = sum(w)
        best, mask = 0, None
        for k in sorted({0, K}):
            if k == 0 and len(w) % 2 == 0:
                continue                              # an even count: K = 0 gives nothing
            best, mask = count_interval(w, k)
            if best > 0:
                break         # attained by its mask, so it is the optimum: K cannot beat it
        if best > 0:
            d_lo[i] = frac_down(Fraction(best, T))
            M[i, nz] = mask
            closes[i] = True
    return d_lo, M, closes


# ----------------------------------------------------------------------------- Karmarkar–Karp

@numba.njit(cache=True)
def kk_masks(R):
    """Karmarkar–Karp largest differencing, the subset recovered by 2-colouring."""
    n, L = R.shape
    M = np.zeros((n, L), dtype=np.bool_)
    for i in range(n):
        kk_row(R[i], M[i])
    return M
