"""Stage A of the certify pipeline: one fused numba pass per row (C4, C5, C7).

Per row: the max (from the int64 view: for nonnegative floats the bit patterns order like
the values), the exact extraction parts and totals (:mod:`numerics.theta_kernels`), the
dominant-atom test, a witness — the singleton when dominant, else greedy on the big atoms
in exponent order, the prefix crossing over the small ones and up to ``flips`` best single
flips — and its outward-rounded value.  The loops index R[i, j] directly and call no
helper with array arguments per element, so a 64-entry row costs a few hundred cycles.

The decisions are exactly those of :func:`numerics.theta_kernels.big_greedy_tail` and
:func:`numerics.theta_kernels.flip_more`, and of the torch twin
(:mod:`numerics.theta_torch`): every certificate is bit-identical across backends,
thread counts and row orders (each row is computed on its own).
"""
from __future__ import annotations

import numba
import numpy as np

from numerics.rounding import U
from numerics.theta_kernels import (BIG_BITS, BLOCK, POW2, TINY, _msum2, _sum2, bounds_from_parts,
                                    sigmas_scale, threaded)


@numba.njit(cache=True)
def _best_flip(R, M, i, D):
    """(v, j): v = min(|D|, min_j |D − 2σ_j x_j|) and the first j attaining it (−1: none
    below |D|).  2σx = (4m − 2)x is exact; four lanes keep (value, first index) each."""
    L = R.shape[1]
    v0 = v1 = v2 = v3 = abs(D)
    j0 = j1 = j2 = j3 = -1
    j = 0
    while j + 4 <= L:
        w = abs(D - (4.0 * M[i, j] - 2.0) * R[i, j])
        j0 = j if w < v0 else j0
        v0 = w if w < v0 else v0
        w = abs(D - (4.0 * M[i, j + 1] - 2.0) * R[i, j + 1])
        j1 = j + 1 if w < v1 else j1
        v1 = w if w < v1 else v1
        w = abs(D - (4.0 * M[i, j + 2] - 2.0) * R[i, j + 2])
        j2 = j + 2 if w < v2 else j2
        v2 = w if w < v2 else v2
        w = abs(D - (4.0 * M[i, j + 3] - 2.0) * R[i, j + 3])
        j3 = j + 3 if w < v3 else j3
        v3 = w if w < v3 else v3
        j += 4
    while j < L:
        w = abs(D - (4.0 * M[i, j] - 2.0) * R[i, j])
        j0 = j if w < v0 else j0
        v0 = w if w < v0 else v0
        j += 1
    # merge lanes: least value, ties to the least index (= the first index overall)
    v, bj = v0, j0
    if v1 < v or (v1 == v and j1 >= 0 and (bj < 0 or j1 < bj)):
        v, bj = v1, j1
    if v2 < v or (v2 == v and j2 >= 0 and (bj < 0 or j2 < bj)):
        v, bj = v2, j2
    if v3 < v or (v3 == v and j3 >= 0 and (bj < 0 or j3 < bj)):
        v, bj = v3, j3
    return v, bj


@numba.njit(cache=True)
def _rows(R, force, flips, stop_rel, bits, M, out, stat, lo, hi, q1, q2, qs, idx, order, cnt, bi):
    n, L = R.shape
    c = int(np.ceil(np.log2(L + 2.0))) + 1
    Rb = R.view(np.int64)
    bf = bi.view(np.float64)
    tau_scale = POW2[1074 - bits]       # 2^−bits, exact (a table read, not a pow() per row)
    for i in range(lo, hi):
        m0 = m1 = m2 = m3 = np.int64(0)
        j = 0
        while j + 4 <= L:
            m0 = Rb[i, j] if Rb[i, j] > m0 else m0
            m1 = Rb[i, j + 1] if Rb[i, j + 1] > m1 else m1
            m2 = Rb[i, j + 2] if Rb[i, j + 2] > m2 else m2
            m3 = Rb[i, j + 3] if Rb[i, j + 3] > m3 else m3
            j += 4
        while j < L:
            m0 = Rb[i, j] if Rb[i, j] > m0 else m0
            j += 1
        m0 = m1 if m1 > m0 else m0
        m2 = m3 if m3 > m2 else m2
        mb = m2 if m2 > m0 else m0
        bi[0] = mb
        m = bf[0]
        s1, s2, sc = sigmas_scale(mb >> 52, c)
        for j in range(L):             # error-free extraction (theta_kernels docstring)
            v = R[i, j]
            q = (s1 + v) - s1
            q1[j] = q
            q2[j] = (s2 + (v - q)) - s2
        T1, T2 = _sum2(q1, q2)
        # C4: the sign of 2m − T, with a margin for T − (T1 + T2) and the rounding of y
        slack = 4.0 * (L * U * s2) + 4.0 * U * (2.0 * m)
        y = 2.0 * m - (T1 + T2)
        if force[i] >= 0:
            dom = force[i] == 1
            unsure = False
        else:
            dom = y > slack
            unsure = (not dom) and y >= -slack
        a = -1
        if dom:
            for j in range(L):
                M[i, j] = 0
            for j in range(L):
                if Rb[i, j] == mb:
                    a = j
                    break
            M[i, a] = 1
            A1 = q1[a]
            A2 = q2[a]
        else:
            # greedy on the big atoms in (exponent, index) order
            tau = m * tau_scale
            nb = 0
            for j in range(L):
                big = R[i, j] >= tau
                qs[j] = 0.0 if big else q1[j]
                nb += 1 if big else 0
                M[i, j] = 0
            em = np.int64(0)
            k = 0
            for j in range(L):
                if R[i, j] >= tau:
                    idx[k] = j
                    e = Rb[i, j] >> 52
                    em = e if e > em else em
                    k += 1
                    if k == nb:
                        break
            for b in range(bits + 2):
                cnt[b] = 0
            for t in range(nb):
                b = em - (Rb[i, idx[t]] >> 52)
                cnt[(b if b < bits else bits) + 1] += 1
            for b in range(bits + 1):
                cnt[b + 1] += cnt[b]
            for t in range(nb):
                b = em - (Rb[i, idx[t]] >> 52)
                b = b if b < bits else bits
                order[cnt[b]] = idx[t]
                cnt[b] += 1
            D = 0.0
            ts = T1                    # t_s = T₁ − Σ_big q₁: exact (every partial q₁ sum is)
            for t in range(nb):
                j = order[t]
                go = D <= 0.0
                D = D + R[i, j] if go else D - R[i, j]
                M[i, j] = 1 if go else 0
                ts -= q1[j]
            # small atoms: the index-order prefix whose doubled q₁ sum crosses t_s − D joins S
            target = ts - D
            cs = 0.0
            before = 0.0
            k = L
            j = 0
            while j + 8 <= L:
                bs = ((qs[j] + qs[j + 1]) + (qs[j + 2] + qs[j + 3])) + \
                     ((qs[j + 4] + qs[j + 5]) + (qs[j + 6] + qs[j + 7]))
                if 2.0 * (cs + bs) >= target:
                    break
                cs += bs
                j += 8
            while j < L:
                before = cs
                cs += qs[j]
                if 2.0 * cs >= target:
                    k = j
                    break
                j += 1
            if k == L:
                before = cs
            d_with = D + (2.0 * cs - ts)
            d_wo = D + (2.0 * before - ts)
            take = k < L and abs(d_with) <= abs(d_wo)
            kk = k + 1 if take else k
            D = d_with if take else d_wo
            for j in range(kk if kk < L else L):
                if R[i, j] < tau:
                    M[i, j] = 1
            # best single flips
            stop = stop_rel * T1
            for _ in range(flips):
                if abs(D) <= stop:
                    break
                v, j = _best_flip(R, M, i, D)
                if j < 0 or not v < abs(D):
                    break
                D = D - (4.0 * M[i, j] - 2.0) * R[i, j]
                M[i, j] = 1 - M[i, j]
            A1, A2 = _msum2(q1, q2, M[i])
        bounds_from_parts(A1, A2, T1, T2, s2, L, sc, out[i])
        out[i, 5] = m / out[i, 4]
        stat[i, 0] = 1 if dom else 0
        stat[i, 1] = 1 if unsure else 0
        stat[i, 2] = a
        stat[i, 3] = 1 if m < TINY else 0


def _stage_a(R, force, flips, stop_rel, M, out, stat, bits):
    n, L = R.shape
    for blk in numba.prange((n + BLOCK - 1) // BLOCK):
        q1 = np.empty(L)
        q2 = np.empty(L)
        qs = np.empty(L)
        idx = np.empty(L, np.int64)
        order = np.empty(L, np.int64)
        cnt = np.empty(bits + 2, np.int64)
        bi = np.empty(1, np.int64)
        _rows(R, force, flips, stop_rel, bits, M, out, stat, blk * BLOCK, min(n, (blk + 1) * BLOCK),
              q1, q2, qs, idx, order, cnt, bi)


_stage_a_ser = numba.njit(cache=True)(_stage_a)
_stage_a_par = numba.njit(cache=True, parallel=True)(_stage_a)


def stage_a(R, force, flips, stop_rel, M, out, stat, bits=BIG_BITS):
    """Stage A for every row of R (C-contiguous float64, nonnegative, some mass).

    force[i] = −1: decide dominance here; 0/1: the caller's exact decision.  Writes M (uint8
    witness), out[i] = (θ_lo, θ_hi_S, gap_lo_S, gap_hi, row total, p_max) and
    stat[i] = (dominant, unsure, argmax or −1, tiny).  Threaded over rows for large batches;
    each row is computed on its own, so the thread count never changes a result.
    """
    (_stage_a_par if threaded(R) else _stage_a_ser)(R, force, flips, stop_rel, M, out, stat, bits)
