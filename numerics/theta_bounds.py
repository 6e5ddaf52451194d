"""Cheap θ tools for batches of float64 rows outside the fused certify kernels.

Rows are (n, L) float64 arrays of nonnegative finite values (exact dyadic rationals); θ is
that of each row's exact normalisation p/Σp (C7).

* :func:`topk_delta_lower` — a certified lower bound on δ (so an upper bound θ ≤ 1 − δ_lo²,
  used by :mod:`numerics.attention_bounds` for C9/C10).  It is the top-K interval lemma of
  :func:`numerics.theta_refine.topk_lemma` (exact extraction sums, rounded outward once),
  the one implementation that certify runs and ``verify`` recomputes; this module only lifts
  tiny rows and adapts the calling convention.
* :func:`count_delta_lower` — the count lemma, a certified lower bound on δ from how many
  tail atoms each side can hold.  With an odd number n of nonzero atoms one side of any
  split holds at least k = (n + 1)/2 of them, so |A − B| ≥ 2·s_k − T with s_k the sum of
  the k smallest; with the K largest atoms' signs enumerated, the tail's contribution for
  each count j lies in an interval, which also settles rows with one atom just below 1/2
  and no small atom to balance it.  When the bound is positive a mask attains it (an
  optimal witness).  This closes diffuse rows of comparable atoms with an odd count
  (uniform rows are C3's 1 − 1/L²), where the top-K lemma's tail swamps its head.
* :func:`kk_masks` — Karmarkar–Karp witness masks, the batch form of stage B's last search
  (:func:`numerics.theta_refine._kk_row`).  A
  search: plain floats, every mask is re-scored by the outward-rounded evaluator.

The older float kernels that lived here (compensated-sum witness bounds, a prefix-crossing
pass, sorted greedy and their torch forms) were replaced by :mod:`numerics.theta_fused`,
:mod:`numerics.theta_kernels` and :mod:`numerics.theta_torch`, which compute the same
things from exact sums.
"""
from __future__ import annotations

import bisect
from fractions import Fraction

import numba
import numpy as np

from numerics.rounding import frac_down
from numerics.theta import integer_weights
from numerics.theta_kernels import TINY
from numerics.theta_refine import _kk_row, topk_lemma

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

def _count_interval(w, K):
    """(d, mask) for integer weights w (nonzero, any order): d ≤ min_S |w(S) − w(S^c)|, the
    count lemma with the K largest atoms' signs enumerated, and a mask attaining d when d > 0.

    Lemma.  Let the K largest atoms be fixed with signs ε (ε₁ = +1: S and S^c give the same
    |A − B|), the other m atoms be the tail with total t, and s_j / l_j the sums of its j
    smallest / largest atoms.  If S takes j tail atoms, the tail contributes
    2·w(S ∩ tail) − t ∈ I_j = [2s_j − t, 2l_j − t], so |A − B| ≥ dist(0, Σε_i w_(i) + I_j).
    Minimising over ε and j = 0…m bounds the discrepancy; when the minimum is positive it is
    attained at an end of some I_j, by S = {top atoms with ε = +1} ∪ {the j smallest (left
    end) or j largest (right end) tail atoms}.  K = 0 with an odd count is the parity
    argument (one side holds ≥ (n + 1)/2 atoms); K ≥ 1 generalises the top-K interval lemma
    (which replaces every I_j by [−t, t]).
    """
    n = len(w)
    order = sorted(range(n), key=lambda i: (-w[i], i))
    K = min(K, n)
    top, tail = order[:K], order[K:][::-1]            # tail ascending
    m = len(tail)
    t = sum(w[i] for i in tail)
    small, large = [0], [0]
    for i in tail:
        small.append(small[-1] + w[i])
    for i in reversed(tail):
        large.append(large[-1] + w[i])
    a = [2 * v - t for v in small]                    # left ends, increasing in j
    b = [2 * v - t for v in large]                    # right ends, increasing in j
    sums = [(w[top[0]], 1)] if K else [(0, 0)]        # (Σ ε w, bits of ε = +1 among the top)
    for q in range(1, K):
        v = w[top[q]]
        sums = [(x + v, bits | 1 << q) for x, bits in sums] + [(x - v, bits) for x, bits in sums]
    best, arg = None, None
    for x, bits in sums:
        target = -x
        j = bisect.bisect_left(b, target)             # first j with b_j ≥ −x
        if j <= m and a[j] <= target:
            return 0, None                            # some S may balance: no bound
        if j <= m and (best is None or a[j] - target < best):
            best, arg = a[j] - target, (bits, "small", j)
        if j >= 1 and (best is None or target - b[j - 1] < best):
            best, arg = target - b[j - 1], (bits, "large", j - 1)
    bits, end, j = arg
    mask = [False] * n
    for q in range(K):
        mask[top[q]] = bool(bits >> q & 1)
    for i in (tail[:j] if end == "small" else tail[m - j:]):
        mask[i] = True
    return best, mask


def count_delta_lower(R: np.ndarray, K: int = 0):
    """Count lemma (see :func:`_count_interval`): a certified lower bound on δ, the better
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
            best, mask = _count_interval(w, k)
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
        _kk_row(R[i], M[i])
    return M
