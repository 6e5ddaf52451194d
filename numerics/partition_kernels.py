"""Numba kernels of the exact partition solver (:mod:`numerics.partition`).

One pair of kernels for every integer size: the sorted list of a half's 2^h subset sums
with their masks (Horowitz–Sahni merge, in place, back to front), and the two-pointer scan
over two sorted lists for the pair whose doubled sum is closest to a target T.

Number format.  A nonnegative integer v is a little-endian row of K int64 limbs:
limbs 0 … K−2 hold 62 bits each (values in [0, 2^62)), and the top limb K−1 holds
everything above, v >> 62(K−1), unmasked.  With K = 1 that is the plain int64 value.

Overflow argument (exact integer arithmetic only).  The caller picks K with 2T < 2^62K
when K > 1 and T < 2^62 when K = 1 (T = the sum of all weights), so
  * every subset sum is ≤ T, and twice a sum of two halves is ≤ 2T: its top limb is
    < 2^63 (K = 1: 2T < 2^63; K > 1: 2T >> 62(K−1) < 2^62);
  * a lower limb sum of two limbs plus a carry is < 2^63;
so no int64 operation below overflows and no carry is lost.  Comparison is
lexicographic from the top limb, which is the integer order because the lower limbs
are in [0, 2^62).
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np
from numba.cpython.unsafe.tuple import tuple_setitem   # numba's tuple update (as in its ndindex)

LIMB_BITS = 62
_LMASK = (1 << LIMB_BITS) - 1


@numba.njit(cache=True, inline="always")
def _add_t(a, i, b, j, y):
    """a[i] + b[j] as a K-tuple (y: any K-tuple; a value in registers, not memory)."""
    K = len(y)
    c = np.int64(0)
    for l in range(K - 1):
        s = a[i, l] + b[j, l] + c
        c = s >> 62
        y = tuple_setitem(y, l, s & np.int64(_LMASK))
    return tuple_setitem(y, K - 1, a[i, K - 1] + b[j, K - 1] + c)


@numba.njit(cache=True, inline="always")
def _cmp(a, i, y, K):
    """Sign of a[i] − y (a limb row against a K-tuple or limb vector)."""
    for l in range(K - 1, -1, -1):
        if a[i, l] != y[l]:
            return 1 if a[i, l] > y[l] else -1
    return 0


@numba.njit(cache=True)
def sorted_sums(w, shape):
    """(vals (2^m, K), masks (2^m,) uint32): all subset sums of the m limb rows w, ascending.

    ``shape`` is :func:`limb_shape` (K): K is part of its type, so each K compiles once to
    straight-line limb code (no run-time loop over limbs; for K = 1, plain int64 code).
    """
    K = len(shape)
    m = w.shape[0]
    vals = np.zeros((1 << m, K), np.int64)
    masks = np.zeros(1 << m, np.uint32)
    y = shape
    size = 1
    for t in range(m):
        bit = np.uint32(1 << t)
        # Back-to-front in-place merge of X = vals[:size] and X + w[t] into vals[:2size].
        # The write index p = i + j + 1 stays above both read indices i and j.
        i = size - 1
        j = size - 1
        p = 2 * size - 1
        jy = -1  # y holds vals[jy] + w[t]
        while j >= 0:
            if jy != j:
                y = _add_t(vals, j, w, t, y)
                jy = j
            if i >= 0 and _cmp(vals, i, y, K) > 0:
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
def scan(A, B, T, shape):
    """(j, k) minimising |T − 2(A[j] + B[k])| over ascending limb lists A, B (first found on ties).

    T is a limb vector; the running sums are K-tuples (registers, not memory).
    """
    K = len(shape)
    lm = np.int64(_LMASK)
    best = tuple_setitem(shape, K - 1, np.iinfo(np.int64).max)  # > any |s − T| ≤ 2T
    j = 0
    k = B.shape[0] - 1
    bj = 0
    bk = 0
    while j < A.shape[0] and k >= 0:
        s = _add_t(A, j, B, k, shape)
        c = np.int64(0)
        for l in range(K - 1):  # s = 2 (A[j] + B[k])
            x = (s[l] << 1) + c
            c = x >> 62
            s = tuple_setitem(s, l, x & lm)
        s = tuple_setitem(s, K - 1, (s[K - 1] << 1) + c)
        cmp = 0  # sign of s − T
        for l in range(K - 1, -1, -1):
            if s[l] != T[l]:
                cmp = 1 if s[l] > T[l] else -1
                break
        br = np.int64(0)
        d = shape
        for l in range(K):  # d = |s − T|; the top limb never borrows below zero
            x = (s[l] - T[l] if cmp > 0 else T[l] - s[l]) - br
            if x < 0 and l < K - 1:
                x += lm + 1
                br = 1
            else:
                br = 0
            d = tuple_setitem(d, l, x)
        better = False
        for l in range(K - 1, -1, -1):
            if d[l] != best[l]:
                better = d[l] < best[l]
                break
        if better:
            best = d
            bj = j
            bk = k
        if cmp < 0:
            j += 1
        elif cmp > 0:
            k -= 1
        else:
            break
    return bj, bk


def limb_shape(K: int) -> tuple:
    """The compile-time token for K limbs passed to the kernels (a K-tuple)."""
    return (0,) * K


def to_limbs(values: Sequence[int], K: int) -> np.ndarray:
    """(len(values), K) int64 limb rows of nonnegative ints (the top limb unmasked, see above)."""
    out = np.zeros((len(values), K), np.int64)
    for r, v in enumerate(values):
        for l in range(K - 1):
            out[r, l] = (v >> (LIMB_BITS * l)) & _LMASK
        out[r, K - 1] = v >> (LIMB_BITS * (K - 1))
    return out
