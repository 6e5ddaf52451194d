"""Exact number partitioning: Horowitz–Sahni for short rows, Schroeppel–Shamir beyond.

θ(p) = 1 − δ(p)² needs the subset S whose sum s is closest to T/2, i.e. the
minimum of the deviation |T − 2s| (shared/MATH.md, conventions; C2, C7).
This module finds it exactly for nonnegative integer weights of any size.
The largest atom is always fixed outside S (S and its complement have the same
deviation), and every deviation has the parity of T, so T mod 2 is a proven
lower bound: a search that reaches it has found an optimum and stops.

Rows with at most HS_MAX_ATOMS nonzero atoms: Horowitz–Sahni (:func:`_hs`).
The other atoms are split into two halves; each half's 2^h subset sums are
produced in sorted order (merge the sorted list X with X + w, in place, back to
front, keeping a parallel mask array), and a two-pointer scan over the two
sorted lists finds the pair whose total is closest to T/2.  Memory O(2^{L/2}).
This path is kept as it was, so the witnesses of certificates (whose exact
rows have at most certificates.folder.EXACT_MAX_ATOMS = 24 atoms) do not move.

Longer rows: Schroeppel–Shamir (:func:`_ss`).  The free atoms of the "core"
(at most 4·CORE_GROUP of the smallest) go into four groups A, B, C, D with
sorted subset-sum lists of ≤ 2^CORE_GROUP entries; X = A + B is walked upwards
and Y = C + D downwards, each produced in order by a heap with one candidate
per row of A (resp. C), so memory is O(2^{L/4}) and time O(2^{L/2} L) at worst.
The walk starts in the middle (x ≥ v with v near the median of X) and a second
walk on the complements covers x < v, so rows with many near-perfect partitions
(softmax rows: 2^L subsets against ~2^35 possible sums) stop after a few steps.
Atoms beyond the core ("outer", the largest) are set by a depth-first branch
and bound, greedy side first, pruned by the interval bound on what the rest can
still add; each leaf is one core walk.  The search is complete: it stops early
only at the parity bound or where the bound proves no improvement is left.

Big integers.  A float64 row put over one power-of-two denominator can hold
~1100-bit integers.  Two exact, order-preserving reductions come first:
  * divide by the gcd of the weights (scaling);
  * gap compression (:func:`compress`): if no weight has a set bit in [c+1, b)
    where 2^c > Σ_i (w_i mod 2^b), the bits from b upwards are shifted down to
    c+1.  This keeps the preorder of all deviations |Σ ε_i w_i| (proof in
    :func:`compress`), so the set of optimal masks is unchanged.  Rows such as
    [1.0, 2**-600, ...] shrink to a few dozen bits.
What is left runs in exact multi-limb arithmetic (:mod:`numerics.partition_kernels`):
K int64 limbs, 62 bits each below the top one, with K = 1 when T < 2^62 (plain
int64) and otherwise the least K with 2T < 2^{62K}.  Nothing is rounded
anywhere, so correctness never rests on luck.

Cost and memory.  Horowitz–Sahni: each list element takes 8K + 4 bytes (limbs
+ uint32 mask); when both halves would exceed ``memory_budget`` (default
1 GiB), the free halves are capped at h atoms and the remaining P atoms are
enumerated outside (2^P prefixes, each one more scan of the same two lists).
Schroeppel–Shamir: four lists and two heaps of ≤ 2^CORE_GROUP entries (a few
MiB at K = 1), also capped by ``memory_budget``.  Measured in
benchmarks/exact_theta.py and benchmarks/exact_peers.py.

Precision contract: exact (Python ints in, Python ints out).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from numerics.partition_kernels import (LIMB_BITS, limb_shape, residue_bound, scan, sorted_sums, ss_walk,
                                        to_limbs)

__all__ = ["LIMB_BITS", "MEMORY_BUDGET", "best_mask_mitm", "closest_half", "compress", "solve", "warm_up"]

MEMORY_BUDGET = 2**30  # bytes for both sorted lists together
MAX_PREFIX = 24                 # 2^24 extra scans is hours: refuse beyond that
HS_MAX_ATOMS = 24               # nonzero atoms solved by Horowitz–Sahni (certificate witnesses stay put)
CORE_GROUP = 16                 # atoms per quick Schroeppel–Shamir group: lists of ≤ 2^16 sums
BIG_BITS = 20                   # the full layout's long lists hold ≤ 2^20 sums
QUICK_STEPS = 1 << 16           # pairs a quick walk may visit before the full layout takes over
MAX_LEAVES = 1 << 16            # core walks in the outer branch and bound before giving up
QUICK_LEAVES = 64               # quick-only core walks tried first when there are outer atoms
RESIDUE_BITS = 16               # the lower bound looks at subset sums mod 2^16


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


def _limbs_needed(T: int, min_limbs: int) -> int:
    # K = 1 needs T < 2^62 (int64 bound); otherwise the least K with 2T < 2^{62K}.
    return max(min_limbs, 1 if T < 2**62 else -(-(T.bit_length() + 1) // LIMB_BITS))


def _bits(sub_mask: int, atoms: Sequence[int]) -> int:
    """Mask over the row's positions of the atoms selected by sub_mask (bit q = atoms[q])."""
    out = 0
    for q, i in enumerate(atoms):
        if sub_mask >> q & 1:
            out |= 1 << i
    return out


def _hs(w: list[int], K: int, memory_budget: int) -> tuple[int, int]:
    """Horowitz–Sahni with the prefix enumeration: (mask over positions of w, deviation)."""
    T = sum(w)
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
        local = _bits(pm, prefix)
        t = T - 2 * c
        if t >= 0:
            j, k = scan(A, B, to_limbs([t], K)[0], ks)
            local |= _bits(int(mA[j]), half_a) | _bits(int(mB[k]), half_b)
        # else: 2c > T already, and the empty completion gives the least 2s − T.
        s = sum(w[i] for i in range(len(w)) if local >> i & 1)
        dev = abs(T - 2 * s)  # exact, recomputed from the mask in the reduced units
        if best_dev is None or dev < best_dev:
            best_dev, best_local = dev, local
    return best_local, best_dev


class _Core:
    """The core atoms' sorted subset-sum lists, in two layouts, and exact walks over them.

    X and Y are a snake split of the core (largest first: X Y Y X X Y …), so their sums are
    close.  Quick layout: X = A + B and Y = C + D with four equal groups (≤ 2^group sums a
    list, cheap to build): the walk from the middle that finds a perfect partition in a few
    steps.  Full layout (built only when a quick walk runs out of steps): A and C keep as few
    atoms as the list cap allows, B and D the rest (≤ 2^big_bits sums), so the heaps are
    small and each step costs O(log |A|) — the exhaustive walk, still O(2^{L/4})-ish memory.
    """

    def __init__(self, w: list[int], core: list[int], K: int, group: int, big_bits: int):
        self.w, self.K, self.ks, self.big_bits = w, K, limb_shape(K), big_bits
        X, Y = [], []
        for r, i in enumerate(core):
            (X if r % 4 in (0, 3) else Y).append(i)
        self.X, self.Y = X, Y
        assert max(len(X), len(Y)) <= 2 * group
        self.S_X = sum(w[i] for i in X)
        self.S = self.S_X + sum(w[i] for i in Y)
        self.all = _bits((1 << len(core)) - 1, core)
        self.quick = self._layout([X[0::2], X[1::2], Y[0::2], Y[1::2]])
        self.full = None

    def _layout(self, groups):
        lists = []
        for g in groups:
            vals, masks = sorted_sums(to_limbs([self.w[i] for i in g], self.K), self.ks)
            # One subset per distinct sum: the walks see the same values (so the same optimum,
            # and value sets stay symmetric for the complement walk), but rows of many ties
            # (bfloat16, small integers) no longer walk through every repeat of a sum.
            keep = np.ones(vals.shape[0], bool)
            keep[1:] = np.any(vals[1:] != vals[:-1], axis=1)
            lists.append((np.ascontiguousarray(vals[keep]), np.ascontiguousarray(masks[keep])))
        return groups, lists

    def _full(self):
        if self.full is None:
            a = max(len(self.X) - self.big_bits, min(len(self.X), 2))
            c = max(len(self.Y) - self.big_bits, min(len(self.Y), 2))
            self.full = self._layout([self.X[:a], self.X[a:], self.Y[:c], self.Y[c:]])
        return self.full

    def _walk(self, layout, t: int, v: int, lb: int, best: int | None, steps: int):
        """(dev, core mask or None, complete): the best x + y ≥ v against target t, if below best."""
        K = self.K
        bl = np.zeros(K, np.int64)
        if best is None:
            bl[K - 1] = np.iinfo(np.int64).max
        else:
            bl[:] = to_limbs([best], K)[0]
        groups, ((A, mA), (B, mB), (C, mC), (D, mD)) = layout
        found, complete, d, i, j, k, l = ss_walk(A, B, C, D, to_limbs([t], K)[0], to_limbs([v], K)[0],
                                                 np.int64(lb), bl, np.int64(steps), self.ks)
        if not found:
            return best, None, complete
        dev = sum(int(x) << (LIMB_BITS * q) for q, x in enumerate(d))
        mask = 0
        for g, m in zip(groups, (mA[i], mB[j], mC[k], mD[l])):
            mask |= _bits(int(m), g)
        return dev, mask, complete

    def best(self, t: int, lb: int, best: int | None, quick_only: bool = False):
        """(dev, mask) minimising |t − 2·(core subset sum)| if that beats best, else None.

        Exact and complete: x ≥ v by the walk itself, x < v by the same walk on the
        complements (x' = S_X − x ≥ S_X − v + 1 against t' = 2S − t: |t' − 2s'| = |t − 2s|).
        The quick layout is tried first within QUICK_STEPS pairs a walk; only if that proves
        nothing does the full layout run without a step limit.  quick_only: stop after the
        quick walks (then a None proves nothing; the caller uses it only to find a bound).
        """
        if t <= 0:
            cand = (-t, 0)                       # every core atom only adds to 2s − t ≥ 0
        elif t >= 2 * self.S:
            cand = (t - 2 * self.S, self.all)    # every core atom in S, still 2s ≤ t
        else:
            cand = None
        if cand is not None:
            return cand if best is None or cand[0] < best else None
        v = t * self.S_X // (2 * self.S)  # the middle of X, where a near-perfect pair is likeliest
        res = None
        for layout, steps in ((self.quick, QUICK_STEPS), (None, -1))[: 1 if quick_only else 2]:
            done = True
            for tt, vv, flip in ((t, v, False), (2 * self.S - t, self.S_X - v + 1, True)):
                if best is not None and best <= lb:
                    return res
                best, mask, complete = self._walk(layout or self._full(), tt, vv, lb, best, steps)
                done = done and complete
                if mask is not None:
                    res = best, (self.all ^ mask) if flip else mask
            if done:
                return res
        return res

def lower_bound(w: Sequence[int]) -> int:
    """A proven lower bound on min |T − 2s|: T mod 2, raised by the residues mod 2^RESIDUE_BITS.

    Exact.  |T − 2s| ≡ T (mod 2) always; :func:`residue_bound` refines it from the low bits.
    """
    T = sum(w)
    k = RESIDUE_BITS
    res = np.array([x & ((1 << k) - 1) for x in w], np.int64)
    return max(T & 1, int(residue_bound(res, np.int64(T & ((1 << (k + 1)) - 1)), np.int64(k))))


def _ss(w: list[int], K: int, memory_budget: int) -> tuple[int, int]:
    """Schroeppel–Shamir on the core, branch and bound outside it: (mask over w, deviation)."""
    T = sum(w)
    lb = lower_bound(w)
    order = sorted(range(len(w)), key=lambda i: -w[i])
    big, free = order[0], order[1:]
    if 2 * w[big] >= T:  # the side holding the largest atom is ≥ w[big]: {big}ᶜ is optimal
        return _bits((1 << len(free)) - 1, free), 2 * w[big] - T
    group = 1
    while group < CORE_GROUP and 6 * 2 ** (group + 1) * (8 * K + 12) <= memory_budget:
        group += 1  # four lists (8K + 4 bytes a sum) and two heaps (8K + 20 bytes a row)
    big_bits = 1
    while big_bits < BIG_BITS and 2 * 2 ** (big_bits + 1) * (8 * K + 4) <= memory_budget // 2:
        big_bits += 1  # the full layout's two long lists: at most half the budget
    n_core = min(len(free), 4 * group)
    outer, core = free[: len(free) - n_core], free[len(free) - n_core:]
    cw = _Core(w, core, K, group, big_bits)
    rest = [0] * (len(outer) + 1)  # rest[d] = sum of outer[d:] + the core
    rest[-1] = cw.S
    for d in range(len(outer) - 1, -1, -1):
        rest[d] = rest[d + 1] + w[outer[d]]

    best = [None, 0]  # deviation, mask of S

    def search(quick: bool, max_leaves: int) -> None:
        """Depth-first over the outer atoms; each leaf a core walk (quick ones: a bound only)."""
        leaves = 0
        stack = [(0, 0, w[big], 0)]  # (depth, sum in S, sum outside S, mask of S)
        while stack:
            d, s_in, s_out, m = stack.pop()
            # every completion has s ∈ [s_in, s_in + rest[d]], so |T − 2s| is at least this
            bound = max(lb, 2 * s_in - T, T - 2 * (s_in + rest[d]))
            if best[0] is not None and bound >= best[0]:
                continue
            if d == len(outer):
                leaves += 1
                if leaves > max_leaves:
                    if quick:
                        return
                    raise ValueError(f"partition: {len(w)} atoms, no optimum proved within {max_leaves} "
                                     f"core walks of {len(core)} atoms; too hard for the exact solver")
                res = cw.best(T - 2 * s_in, lb, best[0], quick_only=quick)
                if res is not None:
                    best[:] = res[0], m | res[1]
                    if best[0] == lb:
                        return
                continue
            o = outer[d]
            into = (d + 1, s_in + w[o], s_out, m | 1 << o)
            away = (d + 1, s_in, s_out + w[o], m)
            stack += [away, into] if s_in <= s_out else [into, away]  # the lighter side first

    # Many cheap leaves first (quick walks only: any answer found is real, a miss proves
    # nothing), then the complete search, which keeps what the first pass found.
    if outer:
        search(True, QUICK_LEAVES)
    if best[0] != lb:
        search(False, MAX_LEAVES)
    best_dev, best_mask = best
    return best_mask, best_dev


def solve(weights: Sequence[int], *, memory_budget: int = MEMORY_BUDGET, min_limbs: int = 1,
          reduce: bool = True, method: str | None = None) -> tuple[int, int, str]:
    """(mask, |T − 2s|, method) for a subset S (bit i = position i) with sum s closest to T/2.

    Exact.  method is "mitm" (Horowitz–Sahni, rows of ≤ HS_MAX_ATOMS nonzero atoms) or
    "ss" (Schroeppel–Shamir with the outer branch and bound); passing it forces that path.
    The other keyword arguments are for tests and benchmarks: ``memory_budget`` (bytes for
    the lists; smaller forces the prefix enumeration or a smaller core), ``min_limbs``
    (force the multi-limb path), ``reduce=False`` (skip gcd/gap compression).
    """
    if method not in (None, "mitm", "ss"):
        raise ValueError(f"partition: unknown method {method!r}")
    w0 = _validate(weights)
    T0 = sum(w0)
    nz = [i for i, x in enumerate(w0) if x]  # C6: zero atoms never change a deviation
    chosen = method or ("mitm" if len(nz) <= HS_MAX_ATOMS else "ss")
    if len(nz) <= 1:
        return 0, T0, chosen
    w = [w0[i] for i in nz]
    if reduce:
        w = _reduce(w)
    K = _limbs_needed(sum(w), min_limbs)
    local, _ = (_hs if chosen == "mitm" else _ss)(w, K, memory_budget)
    mask = _bits(local, nz)
    s0 = sum(w0[i] for i in range(len(w0)) if mask >> i & 1)
    return mask, abs(T0 - 2 * s0), chosen  # recomputed from the mask in the caller's units


def closest_half(weights: Sequence[int], *, memory_budget: int = MEMORY_BUDGET,
                 min_limbs: int = 1, reduce: bool = True, method: str | None = None) -> tuple[int, int]:
    """(mask, |T − 2s|) for a subset S (bit i = position i) with sum s closest to T/2.

    Exact.  The deviation is in the units of the given weights.  Keyword arguments as in
    :func:`solve`.
    """
    mask, dev, _ = solve(weights, memory_budget=memory_budget, min_limbs=min_limbs,
                         reduce=reduce, method=method)
    return mask, dev

def best_mask_mitm(weights: Sequence[int]) -> int:
    """Mask (bit i = position i) of a subset whose sum s minimises |T − 2s|.  Exact."""
    return closest_half(weights)[0]


def warm_up() -> None:
    """Compile (or load from numba's cache) the merge, scan and walk kernels for K = 1, 2, 3 limbs.

    K is part of the kernels' argument types (a K-tuple), so each K is its own signature.
    """
    for k in (1, 2, 3):
        for m in ("mitm", "ss"):
            closest_half([3, 5, 7, 11], min_limbs=k, method=m)
