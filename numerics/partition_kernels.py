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


# ----------------------------------------------------------------------------- Schroeppel–Shamir
#
# The same limb format and overflow argument as above: the caller keeps every sum of the
# four lists ≤ T (the target) … ≤ the row total, so doubled sums stay below 2^63 per limb.
# X = {A[i] + B[j]} is walked upwards and Y = {C[k] + D[l]} downwards, each as a stream out of a
# heap that holds one candidate per row of the first list (the Schroeppel–Shamir 1981 scheme):
# memory O(|A| + |B| + |C| + |D|), never |X|.

@numba.njit(cache=True, inline="always")
def _row_t(a, i, y):
    """a[i] as a K-tuple."""
    for l in range(len(y)):
        y = tuple_setitem(y, l, a[i, l])
    return y


@numba.njit(cache=True, inline="always")
def _add_tt(x, y):
    """x + y for K-tuples (the carry rule of _add_t)."""
    K = len(x)
    c = np.int64(0)
    for l in range(K - 1):
        s = x[l] + y[l] + c
        c = s >> 62
        x = tuple_setitem(x, l, s & np.int64(_LMASK))
    return tuple_setitem(x, K - 1, x[K - 1] + y[K - 1] + c)


@numba.njit(cache=True, inline="always")
def _cmp_tt(x, y):
    """Sign of x − y for K-tuples (or limb vectors)."""
    for l in range(len(x) - 1, -1, -1):
        if x[l] != y[l]:
            return 1 if x[l] > y[l] else -1
    return 0


@numba.njit(cache=True, inline="always")
def _dev_t(s, T):
    """(sign of 2s − T, |2s − T|) for a K-tuple s and a K-tuple T."""
    K = len(s)
    lm = np.int64(_LMASK)
    c = np.int64(0)
    for l in range(K - 1):
        x = (s[l] << 1) + c
        c = x >> 62
        s = tuple_setitem(s, l, x & lm)
    s = tuple_setitem(s, K - 1, (s[K - 1] << 1) + c)
    cmp = _cmp_tt(s, T)
    br = np.int64(0)
    d = s
    for l in range(K):  # the top limb never borrows below zero
        x = (s[l] - T[l] if cmp > 0 else T[l] - s[l]) - br
        if x < 0 and l < K - 1:
            x += lm + 1
            br = 1
        else:
            br = 0
        d = tuple_setitem(d, l, x)
    return cmp, d


@numba.njit(cache=True, inline="always")
def _first(P, i, Q, y, up, strict):
    """Up: the least j with P[i] + Q[j] ≥ y (> y if strict), Q.shape[0] if none.
    Down: the largest j with P[i] + Q[j] ≤ y, −1 if none (Q ascending; y a K-tuple)."""
    lo = 0
    hi = Q.shape[0]
    while lo < hi:  # invariant: the predicate "P[i] + Q[j] passes y" is monotone in j
        mid = (lo + hi) // 2
        c = _cmp_tt(_add_t(P, i, Q, mid, y), y)
        past = (c > 0 or (c == 0 and not strict)) if up else c > 0
        if past:
            hi = mid
        else:
            lo = mid + 1
    return lo if up else lo - 1


@numba.njit(cache=True, inline="always")
def _ahead(hk, a, y, up):
    """Row a of the heap keys comes strictly before the K-tuple y in the stream's order."""
    c = _cmp_tt(_row_t(hk, a, y), y)
    return c < 0 if up else c > 0


@numba.njit(cache=True)
def _sift(hk, hw, size, r, up, shape):
    """Restore the heap below position r (hole method: the key at r moves down)."""
    y = _row_t(hk, r, shape)
    who = hw[r]
    while True:
        c = 2 * r + 1
        if c >= size:
            break
        if c + 1 < size and _ahead(hk, c + 1, _row_t(hk, c, shape), up):
            c += 1
        if not _ahead(hk, c, y, up):
            break
        for l in range(len(shape)):
            hk[r, l] = hk[c, l]
        hw[r] = hw[c]
        r = c
    for l in range(len(shape)):
        hk[r, l] = y[l]
    hw[r] = who


@numba.njit(cache=True)
def _stream(P, Q, y, up, strict, shape):
    """A heap over the sums P[i] + Q[j] beyond the threshold y, in the stream's direction.

    Returns (keys, who, pos, size): the heap holds, for each i with a candidate, the key
    P[i] + Q[pos[i]] (pos[i] the first j past y); up: ascending from the least sum ≥ y
    (> y if strict), down: descending from the largest sum ≤ y.  P ascending makes pos[i]
    non-increasing in i, so one binary search and then a pointer walk find them all."""
    n = P.shape[0]
    hk = np.zeros((n, len(shape)), np.int64)
    hw = np.zeros(n, np.int32)
    pos = np.zeros(n, np.int64)
    size = 0
    j = _first(P, 0, Q, y, up, strict)
    for i in range(n):
        if i > 0:  # move j down to the first index past y for row i
            if up:
                while j > 0:
                    c = _cmp_tt(_add_t(P, i, Q, j - 1, y), y)
                    if c > 0 or (c == 0 and not strict):
                        j -= 1
                    else:
                        break
            else:
                while j >= 0 and _cmp_tt(_add_t(P, i, Q, j, y), y) > 0:
                    j -= 1
        if 0 <= j < Q.shape[0]:
            pos[i] = j
            s = _add_t(P, i, Q, j, shape)
            for l in range(len(shape)):
                hk[size, l] = s[l]
            hw[size] = i
            size += 1
    for r in range(size // 2 - 1, -1, -1):
        _sift(hk, hw, size, r, up, shape)
    return hk, hw, pos, size


@numba.njit(cache=True)
def _advance(P, Q, hk, hw, pos, size, up, shape):
    """Replace the heap's top by its successor P[i] + Q[j ± 1] (or drop it); the new size."""
    i = hw[0]
    j = pos[i] + (1 if up else -1)
    if 0 <= j < Q.shape[0]:
        pos[i] = j
        s = _add_t(P, i, Q, j, shape)
        for l in range(len(shape)):
            hk[0, l] = s[l]
    else:
        size -= 1
        for l in range(len(shape)):
            hk[0, l] = hk[size, l]
        hw[0] = hw[size]
    if size > 1:
        _sift(hk, hw, size, 0, up, shape)
    return size


@numba.njit(cache=True)
def ss_walk(A, B, C, D, T, v, lb, best, max_steps, shape):
    """The least |T − 2(x + y)| over x = A[i] + B[j] ≥ v and y = C[k] + D[l], if below best.

    A, B, C, D: ascending limb lists; T, v, best: limb vectors; lb: a nonnegative int64,
    the walk stops as soon as a deviation ≤ lb is found (the caller's proven lower bound);
    max_steps: stop after that many pairs (−1: never).  Returns (found, complete, dev limbs,
    i, j, k, l): found is False when nothing beat best; complete is False only when the walk
    stopped at max_steps (then nothing is proved about the pairs not visited).

    Two-pointer walk, x upwards from the least x ≥ v and y downwards.  Y starts at y*, the
    least y with 2(x0 + y) > T (or at the top of Y if there is none): every larger y gives
    every x ≥ x0 a deviation above that of (x0, y*), so skipping them loses nothing.
    """
    K = len(shape)
    vt = _row_t(v.reshape(1, K), 0, shape)
    Tt = _row_t(T.reshape(1, K), 0, shape)
    bt = _row_t(best.reshape(1, K), 0, shape)
    hx, wx, px, sx = _stream(A, B, vt, True, False, shape)
    out = np.zeros(K, np.int64)
    if sx == 0:
        return False, True, out, -1, -1, -1, -1
    x0 = _row_t(hx, 0, shape)
    top = tuple_setitem(shape, K - 1, np.iinfo(np.int64).max)
    ys = top
    lo = D.shape[0]  # y* = min over k of the least C[k] + D[l] with 2(x0 + ·) > T; l falls with k
    for k in range(C.shape[0]):
        if k == 0:
            lo = 0
            hi = D.shape[0]
            while lo < hi:
                mid = (lo + hi) // 2
                c, _ = _dev_t(_add_tt(x0, _add_t(C, k, D, mid, shape)), Tt)
                if c > 0:
                    hi = mid
                else:
                    lo = mid + 1
        else:
            while lo > 0:
                c, _ = _dev_t(_add_tt(x0, _add_t(C, k, D, lo - 1, shape)), Tt)
                if c > 0:
                    lo -= 1
                else:
                    break
        if lo < D.shape[0]:
            y = _add_t(C, k, D, lo, shape)
            if _cmp_tt(y, ys) < 0:
                ys = y
    hy, wy, py, sy = _stream(C, D, ys, False, False, shape)
    found = False
    complete = True
    steps = 0
    bi = bj = bk = bl = -1
    while sx > 0 and sy > 0:
        if steps == max_steps:
            complete = False
            break
        steps += 1
        cmp, d = _dev_t(_add_tt(_row_t(hx, 0, shape), _row_t(hy, 0, shape)), Tt)
        if _cmp_tt(d, bt) < 0:
            bt = d
            found = True
            bi = wx[0]
            bj = px[bi]
            bk = wy[0]
            bl = py[bk]
            small = d[0] <= lb
            for l in range(1, K):
                small = small and d[l] == 0
            if small:
                break
        if cmp < 0:
            sx = _advance(A, B, hx, wx, px, sx, True, shape)
        elif cmp > 0:
            sy = _advance(C, D, hy, wy, py, sy, False, shape)
        else:
            break
    for l in range(K):
        out[l] = bt[l]
    return found, complete, out, bi, bj, bk, bl


@numba.njit(cache=True)
def residue_bound(res, t_mod, k):
    """min |T − 2s| over subset sums s, as far as residues mod 2^k can tell (a lower bound).

    res: the weights mod 2^k (k ≥ 6); t_mod = T mod 2^(k+1).  Every s is ≡ some reachable
    residue r (a subset-sum table mod 2^k, kept as a bitset: R |= R rotated by a), and
    T − 2s ≡ T − 2r (mod 2^(k+1)), so |T − 2s| is at least the distance from T − 2r to the
    nearest multiple of 2^(k+1).  On float rows the low bits come from the few atoms of the
    smallest exponent, so this often exceeds T mod 2.
    """
    M = np.int64(1) << k
    W = M >> 6
    R = np.zeros(W, np.uint64)
    R[0] = np.uint64(1)
    nxt = np.empty(W, np.uint64)
    ones = ~np.uint64(0)
    for a in res:
        if a == 0:
            continue
        full = True
        for i in range(W):  # bit r of the rotation is bit (r − a) mod M of R
            lo = (64 * i - a) % M
            q = lo >> 6
            b = np.uint64(lo & 63)
            x = R[q] if b == 0 else (R[q] >> b) | (R[(q + 1) % W] << (np.uint64(64) - b))
            nxt[i] = R[i] | x
            full = full and nxt[i] == ones
        R, nxt = nxt, R
        if full:
            break
    M2 = M << 1
    best = M2
    for r in range(M):
        if (R[r >> 6] >> np.uint64(r & 63)) & np.uint64(1):
            u = (t_mod - 2 * r) % M2
            d = min(u, M2 - u)
            if d < best:
                best = d
    return best
