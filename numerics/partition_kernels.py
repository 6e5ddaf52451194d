"""Numba kernels of the exact partition solver (:mod:`numerics.partition`).

For each path (int64, two 62-bit limbs, K limbs): the sorted list of a half's 2^h subset
sums with their masks (Horowitz–Sahni merge, in place, back to front) and the two-pointer
scan over two sorted lists for the pair whose doubled sum is closest to T.  Exact integer
arithmetic only; the overflow argument for each path is stated above it.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

LIMB_BITS = 62
_LMASK = (1 << LIMB_BITS) - 1


# ----------------------------------------------------------------------------- int64 fast path (K = 1)
# Every subset sum is ≤ T < 2^62, so x + w ≤ T and 2(a + b) ≤ 2T < 2^63:
# no intermediate below overflows int64.

@numba.njit(cache=True)
def _sorted_sums_i64(w):
    m = w.shape[0]
    vals = np.zeros(1 << m, np.int64)
    masks = np.zeros(1 << m, np.uint32)
    size = 1
    for t in range(m):
        wt = w[t]
        bit = np.uint32(1 << t)
        # Back-to-front in-place merge of X = vals[:size] and X + wt into vals[:2size].
        # The write index p = i + j + 1 stays above both read indices i and j.
        i = size - 1
        j = size - 1
        p = 2 * size - 1
        while j >= 0:
            y = vals[j] + wt
            if i >= 0 and vals[i] > y:
                vals[p] = vals[i]
                masks[p] = masks[i]
                i -= 1
            else:
                vals[p] = y
                masks[p] = masks[j] | bit
                j -= 1
            p -= 1
        size *= 2
    return vals, masks


@numba.njit(cache=True)
def _scan_i64(A, B, T):
    # Two-pointer scan for min |T − 2(A[j] + B[k])| over sorted A, B.
    j = 0
    k = B.shape[0] - 1
    best = np.int64(-1)
    bj = 0
    bk = 0
    while j < A.shape[0] and k >= 0:
        d = T - 2 * (A[j] + B[k])
        ad = d if d >= 0 else -d
        if best < 0 or ad < best:
            best = ad
            bj = j
            bk = k
        if d > 0:
            j += 1
        elif d < 0:
            k -= 1
        else:
            break
    return bj, bk


# ----------------------------------------------------------------------------- two-limb path (K = 2)
# The K-limb path below, unrolled for K = 2 (value = hi·2^62 + lo): the common
# case of float64 rows at L ≈ 48, whose integers have 63–124 bits.  Same bounds.

@numba.njit(cache=True)
def _sorted_sums_2(w_hi, w_lo):
    m = w_hi.shape[0]
    lm = (np.int64(1) << 62) - 1
    hi = np.zeros(1 << m, np.int64)
    lo = np.zeros(1 << m, np.int64)
    masks = np.zeros(1 << m, np.uint32)
    size = 1
    for t in range(m):
        bit = np.uint32(1 << t)
        i = size - 1
        j = size - 1
        p = 2 * size - 1
        while j >= 0:
            ylo = lo[j] + w_lo[t]
            yhi = hi[j] + w_hi[t] + (ylo >> 62)
            ylo &= lm
            if i >= 0 and (hi[i] > yhi or (hi[i] == yhi and lo[i] > ylo)):
                hi[p] = hi[i]
                lo[p] = lo[i]
                masks[p] = masks[i]
                i -= 1
            else:
                hi[p] = yhi
                lo[p] = ylo
                masks[p] = masks[j] | bit
                j -= 1
            p -= 1
        size *= 2
    return hi, lo, masks


@numba.njit(cache=True)
def _scan_2(Ahi, Alo, Bhi, Blo, Thi, Tlo):
    lm = (np.int64(1) << 62) - 1
    j = 0
    k = Bhi.shape[0] - 1
    bhi = np.int64(-1)
    blo = np.int64(0)
    bj = 0
    bk = 0
    while j < Ahi.shape[0] and k >= 0:
        slo = Alo[j] + Blo[k]
        shi = Ahi[j] + Bhi[k] + (slo >> 62)
        slo = (slo & lm) << 1
        shi = (shi << 1) + (slo >> 62)
        slo &= lm
        if shi > Thi or (shi == Thi and slo > Tlo):
            cmp = 1
            dhi = shi - Thi
            dlo = slo - Tlo
        elif shi == Thi and slo == Tlo:
            cmp = 0
            dhi = np.int64(0)
            dlo = np.int64(0)
        else:
            cmp = -1
            dhi = Thi - shi
            dlo = Tlo - slo
        if dlo < 0:
            dlo += lm + 1
            dhi -= 1
        if bhi < 0 or dhi < bhi or (dhi == bhi and dlo < blo):
            bhi = dhi
            blo = dlo
            bj = j
            bk = k
        if cmp < 0:
            j += 1
        elif cmp > 0:
            k -= 1
        else:
            break
    return bj, bk


# ----------------------------------------------------------------------------- K-limb exact path
# Numbers are little-endian rows of K limbs in [0, 2^62).  Limb sums of two
# limbs plus a carry are < 2^63, so int64 never overflows; K is chosen with
# 2T < 2^{62K}, so no subset sum, nor twice a sum of two halves, loses a carry.

@numba.njit(cache=True)
def _sorted_sums_limbs(w):
    m, K = w.shape
    lm = (np.int64(1) << 62) - 1
    vals = np.zeros((1 << m, K), np.int64)
    masks = np.zeros(1 << m, np.uint32)
    y = np.zeros(K, np.int64)
    size = 1
    for t in range(m):
        bit = np.uint32(1 << t)
        i = size - 1
        j = size - 1
        p = 2 * size - 1
        jy = -1  # y holds vals[jy] + w[t]
        while j >= 0:
            if jy != j:
                c = np.int64(0)
                for l in range(K):
                    s = vals[j, l] + w[t, l] + c
                    c = s >> 62
                    y[l] = s & lm
                jy = j
            take_i = False
            if i >= 0:
                for l in range(K - 1, -1, -1):
                    if vals[i, l] != y[l]:
                        take_i = vals[i, l] > y[l]
                        break
            if take_i:
                for l in range(K):
                    vals[p, l] = vals[i, l]
                masks[p] = masks[i]
                i -= 1
            else:
                for l in range(K):
                    vals[p, l] = y[l]
                masks[p] = masks[j] | bit
                j -= 1
            p -= 1
        size *= 2
    return vals, masks


@numba.njit(cache=True)
def _scan_limbs(A, B, T):
    K = A.shape[1]
    lm = (np.int64(1) << 62) - 1
    s = np.zeros(K, np.int64)
    d = np.zeros(K, np.int64)
    best = np.zeros(K, np.int64)
    have = False
    j = 0
    k = B.shape[0] - 1
    bj = 0
    bk = 0
    while j < A.shape[0] and k >= 0:
        c = np.int64(0)
        for l in range(K):  # s = 2 (A[j] + B[k])
            x = A[j, l] + B[k, l] + c
            c = x >> 62
            s[l] = x & lm
        c = np.int64(0)
        for l in range(K):
            x = (s[l] << 1) + c
            c = x >> 62
            s[l] = x & lm
        cmp = 0  # sign of s − T
        for l in range(K - 1, -1, -1):
            if s[l] != T[l]:
                cmp = 1 if s[l] > T[l] else -1
                break
        br = np.int64(0)
        for l in range(K):  # d = |s − T|
            x = (s[l] - T[l] if cmp > 0 else T[l] - s[l]) - br
            if x < 0:
                x += lm + 1
                br = 1
            else:
                br = 0
            d[l] = x
        better = not have
        if have:
            for l in range(K - 1, -1, -1):
                if d[l] != best[l]:
                    better = d[l] < best[l]
                    break
        if better:
            have = True
            for l in range(K):
                best[l] = d[l]
            bj = j
            bk = k
        if cmp < 0:
            j += 1
        elif cmp > 0:
            k -= 1
        else:
            break
    return bj, bk


def _to_limbs(values: Sequence[int], K: int) -> np.ndarray:
    out = np.zeros((len(values), K), np.int64)
    for r, v in enumerate(values):
        for l in range(K):
            out[r, l] = (v >> (LIMB_BITS * l)) & _LMASK
    return out
