"""Exact number partitioning by meet in the middle (Horowitz–Sahni).

θ(p) = 1 − δ(p)² needs the subset S whose sum s is closest to T/2, i.e. the
minimum of the deviation |T − 2s| (shared/MATH.md, conventions; C2, C7).
This module finds it exactly for nonnegative integer weights of any size.

Algorithm.  The largest atom is fixed outside S (S and its complement have the
same deviation).  The other atoms are split into two halves; each half's
2^h subset sums are produced in sorted order by the Horowitz–Sahni merge
(merge the sorted list X with X + w, in place, back to front, keeping a
parallel mask array), and a two-pointer scan over the two sorted lists finds
the pair whose total is closest to T/2.  Time O(2^{L/2} L), memory
O(2^{L/2}): L = 48 needs two lists of 2^23 and 2^24 sums.

Big integers.  A float64 row put over one power-of-two denominator can hold
~1100-bit integers.  Two exact, order-preserving reductions come first:
  * divide by the gcd of the weights (scaling);
  * gap compression (:func:`compress`): if no weight has a set bit in [c+1, b)
    where 2^c > Σ_i (w_i mod 2^b), the bits from b upwards are shifted down to
    c+1.  This keeps the preorder of all deviations |Σ ε_i w_i| (proof in
    :func:`compress`), so the set of optimal masks is unchanged.  Rows such as
    [1.0, 2**-600, ...] shrink to a few dozen bits.
What is left runs in exact multi-limb arithmetic: K limbs of 62 bits in int64,
with K the least number such that 2T < 2^{62K}.  K = 1 is the plain int64 fast
path.  Nothing is rounded anywhere, so correctness never rests on luck.

Cost and memory.  Each list element takes 8K + 4 bytes (limbs + uint32 mask).
When both halves would exceed ``memory_budget`` (default 1 GiB), the free
halves are capped at h atoms and the remaining P atoms are enumerated outside
(2^P prefixes, each one more scan of the same two lists with the target moved
by the prefix sum): memory stays bounded and time grows by 2^P.  Measured in
benchmarks/exact_theta.py.

Precision contract: exact (Python ints in, Python ints out).
"""
from __future__ import annotations

import math
from typing import Sequence

import numba
import numpy as np

LIMB_BITS = 62
_LMASK = (1 << LIMB_BITS) - 1
MEMORY_BUDGET = 2**30  # bytes for both sorted lists together
MAX_PREFIX = 24                 # 2^24 extra scans is hours: refuse beyond that


# ----------------------------------------------------------------------------- reductions

def compress(weights: Sequence[int]) -> list[int]:
    """Shrink empty bit ranges out of the weights, keeping every optimal mask.

    Exact.  For a gap end b (some weight has bit b, none has bit b − 1) let
    lo_i = w_i mod 2^b, hi_i = w_i >> b and c = bit_length(Σ lo_i), so
    |Λ| < 2^c for Λ = Σ ε_i lo_i, ε ∈ {±1}^L.  If b > c + 1, each weight becomes
    hi_i·2^{c+1} + lo_i.  Why that is safe: with H = Σ ε_i hi_i the deviation is
    |2^s H + Λ| for s = b before and s = c + 1 after, and for every s ≥ c + 1
      H = 0:  |V| = |Λ| < 2^c,
      H ≠ 0:  2^s|H| − 2^c < |V| = 2^s|H| + sgn(H)Λ < 2^s|H| + 2^c,
    so |V1| < |V2| iff (|H1|, sgn(H1)Λ1) < (|H2|, sgn(H2)Λ2) lexicographically
    (with H = 0 below all H ≠ 0), a rule that does not depend on s.
    """
    w = list(weights)
    while True:
        union = 0
        for x in w:
            union |= x
        ends = union & ~(union << 1)  # bit b set in some weight, bit b − 1 in none
        done = True
        while ends:
            b = (ends & -ends).bit_length() - 1
            ends &= ends - 1
            if b == 0:
                continue
            lo_mask = (1 << b) - 1
            c = sum(x & lo_mask for x in w).bit_length()
            if b > c + 1:
                w = [((x >> b) << (c + 1)) | (x & lo_mask) for x in w]
                done = False
                break  # bit positions moved: recompute the gap ends
        if done:
            return w


def _reduce(w: list[int]) -> list[int]:
    g = 0
    for x in w:
        g = math.gcd(g, x)
    if g > 1:
        w = [x // g for x in w]
    return compress(w)


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


# ----------------------------------------------------------------------------- public API

def _validate(weights) -> list[int]:
    w = []
    for i, x in enumerate(weights):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise TypeError(f"partition: weight at position {i} is {type(x).__name__} {x!r}, expected an int")
        x = int(x)
        if x < 0:
            raise ValueError(f"partition: weight at position {i} is negative ({x})")
        w.append(x)
    return w


def closest_half(weights: Sequence[int], *, memory_budget: int = MEMORY_BUDGET,
                 min_limbs: int = 1, reduce: bool = True) -> tuple[int, int]:
    """(mask, |T − 2s|) for a subset S (bit i = position i) with sum s closest to T/2.

    Exact.  The deviation is in the units of the given weights.  Keyword
    arguments are for tests and benchmarks: ``memory_budget`` (bytes for the
    two sorted lists; smaller forces the prefix enumeration), ``min_limbs``
    (force the multi-limb path), ``reduce=False`` (skip gcd/gap compression).
    """
    w0 = _validate(weights)
    T0 = sum(w0)
    nz = [i for i, x in enumerate(w0) if x]  # C6: zero atoms never change a deviation
    if len(nz) <= 1:
        return 0, T0
    w = [w0[i] for i in nz]
    if reduce:
        w = _reduce(w)
    T = sum(w)
    # K = 1 needs T < 2^62 (int64 bound); otherwise the least K with 2T < 2^{62K}.
    K = max(min_limbs, 1 if T < 2**62 else -(-(T.bit_length() + 1) // LIMB_BITS))

    order = sorted(range(len(w)), key=lambda i: -w[i])
    free = order[1:]  # order[0], the largest atom, stays outside S (complement symmetry)
    per_elem = 8 * K + 4
    h_max = 1
    while h_max < 30 and 2 ** (h_max + 1) * per_elem * 2 <= memory_budget:
        h_max += 1
    n_prefix = max(0, len(free) - 2 * h_max)
    if n_prefix > MAX_PREFIX:
        raise ValueError(f"partition: {len(w)} atoms at {K} limbs need 2^{n_prefix} scans "
                         f"within the memory budget; too long for the exact solver")
    prefix, rest = free[:n_prefix], free[n_prefix:]
    half_a, half_b = rest[: len(rest) // 2], rest[len(rest) // 2:]

    if K == 1:
        gen, scan = _sorted_sums_i64, _scan_i64
        A, mA = gen(np.array([w[i] for i in half_a], np.int64))
        B, mB = gen(np.array([w[i] for i in half_b], np.int64))
        target = lambda t: np.int64(t)  # noqa: E731
    elif K == 2:
        def gen2(half):
            hi = np.array([w[i] >> LIMB_BITS for i in half], np.int64)
            return _sorted_sums_2(hi, np.array([w[i] & _LMASK for i in half], np.int64))
        (Ah, Al, mA), (Bh, Bl, mB) = gen2(half_a), gen2(half_b)
        A, B = (Ah, Al), (Bh, Bl)
        scan = lambda A, B, t: _scan_2(*A, *B, t >> LIMB_BITS, t & _LMASK)  # noqa: E731
        target = lambda t: t  # noqa: E731
    else:
        gen, scan = _sorted_sums_limbs, _scan_limbs
        A, mA = gen(_to_limbs([w[i] for i in half_a], K).reshape(len(half_a), K))
        B, mB = gen(_to_limbs([w[i] for i in half_b], K).reshape(len(half_b), K))
        target = lambda t: _to_limbs([t], K)[0]  # noqa: E731

    best_dev, best_local = None, 0
    for pm in range(1 << len(prefix)):
        c = sum(w[prefix[q]] for q in range(len(prefix)) if pm >> q & 1)
        local = 0
        for q in range(len(prefix)):
            if pm >> q & 1:
                local |= 1 << prefix[q]
        t = T - 2 * c
        if t >= 0:
            j, k = scan(A, B, target(t))
            ma, mb = int(mA[j]), int(mB[k])
            for q, i in enumerate(half_a):
                if ma >> q & 1:
                    local |= 1 << i
            for q, i in enumerate(half_b):
                if mb >> q & 1:
                    local |= 1 << i
        # else: 2c > T already, and the empty completion gives the least 2s − T.
        s = sum(w[i] for i in range(len(w)) if local >> i & 1)
        dev = abs(T - 2 * s)  # exact, recomputed from the mask in the reduced units
        if best_dev is None or dev < best_dev:
            best_dev, best_local = dev, local
    mask = 0
    for j, i in enumerate(nz):
        if best_local >> j & 1:
            mask |= 1 << i
    s0 = sum(w0[i] for i in range(len(w0)) if mask >> i & 1)
    return mask, abs(T0 - 2 * s0)


def best_mask_mitm(weights: Sequence[int]) -> int:
    """Mask (bit i = position i) of a subset whose sum s minimises |T − 2s|.  Exact."""
    return closest_half(weights)[0]


def warm_up() -> None:
    """Compile (or load from numba's cache) the int64, two-limb and K-limb paths once."""
    closest_half([3, 5, 7, 11])
    closest_half([3, 5, 7, 11], min_limbs=2)
    closest_half([3, 5, 7, 11], min_limbs=3)
