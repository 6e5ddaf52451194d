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
What is left runs in exact multi-limb arithmetic (one pair of kernels in
:mod:`numerics.partition_kernels`): K int64 limbs, 62 bits each below the top
one, with K = 1 when T < 2^62 (plain int64) and otherwise the least K with
2T < 2^{62K}.  Nothing is rounded anywhere, so correctness never rests on luck.

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

import numpy as np

from numerics.partition_kernels import LIMB_BITS, limb_shape, scan, sorted_sums, to_limbs

__all__ = ["LIMB_BITS", "MEMORY_BUDGET", "best_mask_mitm", "closest_half", "compress", "warm_up"]

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

    ks = limb_shape(K)
    A, mA = sorted_sums(to_limbs([w[i] for i in half_a], K), ks)
    B, mB = sorted_sums(to_limbs([w[i] for i in half_b], K), ks)

    best_dev, best_local = None, 0
    for pm in range(1 << len(prefix)):
        c = sum(w[prefix[q]] for q in range(len(prefix)) if pm >> q & 1)
        local = 0
        for q in range(len(prefix)):
            if pm >> q & 1:
                local |= 1 << prefix[q]
        t = T - 2 * c
        if t >= 0:
            j, k = scan(A, B, to_limbs([t], K)[0], ks)
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
    """Compile (or load from numba's cache) the merge and scan kernels for K = 1, 2, 3 limbs.

    K is part of the kernels' argument types (a K-tuple), so each K is its own signature.
    """
    for k in (1, 2, 3):
        closest_half([3, 5, 7, 11], min_limbs=k)
