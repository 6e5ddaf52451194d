"""The trusted core of ``certify``: every line a certificate's truth rests on.

Everything else in the θ kernels (greedy, first fit, windows, exchanges, meet in the
middle, Karmarkar–Karp, the choice of which rows to work on, threads, backends) only
proposes witness masks or skips work; it can be rewritten without a soundness review.
What is here turns a row and a mask into rigorous numbers:

* the exact integer parts of a row (``headroom_bits``, ``max_bits``, ``splitters``,
  ``split``/``extract``, the exact sums),
* the dominance decision and the dominant row's witness (``dominance_terms``,
  ``first_index_of_max``, ``dominant_exact``),
* the outward-rounded value of a witness, θ_S = 4AB/T² and δ_S² (``up``/``dn``,
  ``outward_bounds``),
* the lemmas that yield upper bounds (the top-K lemma ``topk_row``, the count lemma
  ``count_interval``, and ``hi_from_delta_lo`` which turns δ ≥ d into θ ≤ 1 − d²),
* the closed/open decision (``close_threshold``, ``within``, ``closed``),
* the exact power-of-two lift of tiny rows (``lift_tiny``).

Each function cites the invariants of docs/soundness.md (I1, I2, …) that make it right.
Functions written as numba kernels can also be run as plain Python (``f.py_func``), and
the torch twin (:mod:`numerics.theta_torch`) applies the elementwise ones to tensors, so
each formula is written once.
"""
from __future__ import annotations

import bisect
import math

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from numerics.rounding import U

TINY = 2.0 ** -900      # rows with a smaller max are lifted first (I0: σ₂ stays normal)
POW2 = np.ldexp(1.0, np.arange(-1074, 1024))   # POW2[k + 1074] = 2^k, exact (a table read, no libm)
_EXACT = {"reassoc"}    # only for sums whose every partial sum is exact (I3)


# ----------------------------------------------------------------------------- closed / open

@numba.njit(cache=True, inline="always")
def close_threshold(tol):
    """thr = fl(tol·(1 − 2⁻⁵⁰)): fl(hi − lo) ≤ thr implies hi − lo ≤ tol exactly.
    # I9: fl(d) ≥ d(1 − u) and thr ≤ tol(1 − 2⁻⁵⁰)(1 + u), so d ≤ thr/(1 − u) < tol."""
    return tol * (1.0 - 2.0 ** -50)


@numba.njit(cache=True, inline="always")
def within(lo, hi, thr):
    """fl(hi − lo) ≤ thr, for floats or arrays (``within.py_func`` on numpy arrays).
    # I9: with thr = close_threshold(tol) this never accepts a true width above tol."""
    return hi - lo <= thr


def closed(lo, hi, tol, floor=0.0):
    """The regime-1 decision of a non-dominant row (numpy arrays or floats): hi − lo ≤
    max(tol, floor), decided conservatively.
    # I9: fl(hi − lo) ≤ close_threshold(tol) ⇒ hi − lo ≤ tol;
    # I10: fl(hi − lo) ≤ floor/2 ⇒ hi − lo ≤ floor (one rounding, relative error ≤ u)."""
    return within.py_func(lo, hi, close_threshold(tol)) | within.py_func(lo, hi, floor / 2)


# ----------------------------------------------------------------------------- exact parts

@numba.njit(cache=True)
def headroom_bits(L):
    """c = ⌈log₂(L + 2)⌉ + 1, in integers: the smallest c with 2^(c−1) ≥ L + 2.
    # I2: 2^(c−1) ≥ L + 2 keeps every partial q₁ sum, and twice it, exact."""
    k = 0
    while (1 << k) < L + 2:
        k += 1
    return k + 1


@numba.njit(cache=True, inline="always")
def max_bits(xb):
    """The bits of a nonnegative float row's max, from its int64 view xb (0 for +0.0).
    # I1: for floats ≥ +0.0 the bit patterns order like the values (−0.0 reads
    # negative and loses to the start value 0, which is +0.0), so the max is exact."""
    mb = np.int64(0)
    for j in range(xb.shape[0]):       # an integer max reduction: LLVM vectorises it
        v = xb[j]
        mb = v if v > mb else mb
    return mb


@numba.njit(cache=True, inline="always")
def splitter_exponents(ef, c):
    """(k₁, k₂) with σ₁ = 2^k₁, σ₂ = 2^k₂ for a row whose max has biased exponent field ef.
    # I2: max < 2^(ef − 1022), σ₁ = 2^c·2^(ef − 1022) ≥ 2^c·max and σ₂ = 2^c·u·σ₁."""
    return ef - 1022 + c, ef - 1022 + 2 * c - 53


@numba.njit(cache=True, inline="always")
def splitters(ef, c):
    """(σ₁, σ₂, scale) for a row with max exponent field ef (TINY ≤ max, σ₁ ≤ 2^1023).
    # I2: σ₁, σ₂ as in splitter_exponents, exact powers of two (a table read);
    # I6: scale = 2^(1023 − ef) lifts the max into [1, 2) when it is below 1, else 1."""
    k1, k2 = splitter_exponents(ef, c)
    sc = 1.0 if ef >= 1023 else POW2[1023 - ef + 1074]
    return POW2[k1 + 1074], POW2[k2 + 1074], sc


@numba.njit(cache=True, inline="always")
def split(v, s1, s2):
    """Rump's error-free extraction, twice: v = q₁ + q₂ + r (elementwise on tensors too).
    # I2: σ a power of two ≥ |v| makes fl(σ + v) − σ exact, a multiple of 2u·σ within
    # u·σ of v, and v − q₁ exact; so q₁ ∈ 2uσ₁ℤ, q₂ ∈ 2uσ₂ℤ, |r| ≤ u·σ₂."""
    q = (s1 + v) - s1
    return q, (s2 + (v - q)) - s2


@numba.njit(cache=True, inline="always")
def extract(x, s1, s2, q1, q2):
    """q1[j], q2[j] = split(x[j]) for a whole row (I2)."""
    for j in range(x.shape[0]):
        v = x[j]
        q = (s1 + v) - s1              # = split(v, s1, s2), spelt out so that it vectorises
        q1[j] = q
        q2[j] = (s2 + (v - q)) - s2


@numba.njit(cache=True, fastmath=_EXACT)
def exact_sum(a):
    """Σ a (a: q₁ or q₂ parts): # I3: every partial sum is exact, so any order gives it."""
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j]
    return s


@numba.njit(cache=True, fastmath=_EXACT)
def exact_sum2(a, b):
    """(Σ a, Σ b) of q₁ and q₂ parts: # I3 (exact in any order)."""
    s = t = 0.0
    for j in range(a.shape[0]):
        s += a[j]
        t += b[j]
    return s, t


@numba.njit(cache=True, fastmath=_EXACT)
def masked_sum2(a, b, mk):
    """(Σ_S a, Σ_S b) for the mask mk (0/1): # I3 (a·0 and a·1 are exact, sums exact)."""
    s = t = 0.0
    for j in range(a.shape[0]):
        f = np.float64(mk[j])
        s += a[j] * f
        t += b[j] * f
    return s, t


# ----------------------------------------------------------------------------- dominance

@numba.njit(cache=True, inline="always")
def dominance_terms(m, T1, T2, s2, L):
    """(y, slack): y = fl(2m − fl(T₁ + T₂)); the row is dominant (2m ≥ T) when y > slack and
    certainly not dominant (2m < T) when y < −slack; in between it is decided exactly
    (:func:`dominant_exact`).  Elementwise: the torch twin calls it on tensors.
    # I4: |T − (T₁ + T₂)| ≤ L·u·σ₂ (I2) and two roundings; slack ≥ 4·(L·u·σ₂ + 2u·m)·(1 − u)
    # covers both directions with a factor 4 to spare (docs/soundness.md, I4)."""
    slack = 4.0 * (L * U * s2) + 4.0 * U * (2.0 * m)
    return 2.0 * m - (T1 + T2), slack


def dominant_exact(row, j) -> bool:
    """2·x_j ≥ Σx exactly.
    # I4: math.fsum is correctly rounded, so the sign of x_j − Σ_{k≠j} x_k is exact."""
    return math.fsum([x if k == j else -x for k, x in enumerate(row.tolist())]) >= 0.0


@numba.njit(cache=True, inline="always")
def first_index_of_max(xb, mb):
    """The first j with xb[j] == mb (the max's bits): the dominant row's singleton witness.
    # I5: the singleton must be a maximal atom (C4: then θ = θ_S, so θ_S's upper bounds
    # bound θ); comparing bits finds an atom equal to the max (I1)."""
    L = xb.shape[0]
    for w in range((L + 63) >> 6):     # a compare mask per 64-atom word (branch-free inside)
        j0 = w * 64
        xw = xb[j0:min(L, j0 + 64)]
        e = np.uint64(0)
        for t in range(xw.shape[0]):
            e |= np.uint64(xw[t] == mb) << np.uint64(t)
        if e != 0:
            return j0 + np.int64(trailing_zeros(e))
    return 0


# ----------------------------------------------------------------------------- outward rounding

@numba.njit(cache=True, inline="always")
def up(x):
    """A float ≥ the float after x (at most two ulps above x; three just above the
    subnormal range).  # I6: |x|·2⁻⁵² + 2⁻¹⁰⁷⁴ ≥ one ulp of x and rounding is monotone, so
    up(fl(z)) ≥ z for the exact value z of any one rounded operation."""
    return x + (abs(x) * 2.0 ** -52 + 2.0 ** -1074)


@numba.njit(cache=True, inline="always")
def dn(x):
    """A float ≤ the float before x (I6, mirrored)."""
    return x - (abs(x) * 2.0 ** -52 + 2.0 ** -1074)


@numba.njit(cache=True, inline="always")
def outward_bounds(A1, A2, T1, T2, s2, L, scale):
    """(θ_lo, θ_hi, gap_lo, gap_hi) of the witness whose exact parts are A₁, A₂ (of S) and
    T₁, T₂ (of the row): θ_lo ≤ θ_S = 4AB/T² ≤ θ_hi, gap_lo ≤ δ_S² = ((A − B)/T)² ≤ gap_hi.
    Straight-line code, so a loop over rows of it vectorises.
    # I3: B₁ = T₁ − A₁, B₂ = T₂ − A₂, A₁ − B₁, A₂ − B₂ and the ×scale are exact;
    # I2: |A − (A₁ + A₂)|, |B − (B₁ + B₂)|, |T − (T₁ + T₂)| ≤ e and |D − (D₁ + D₂)| ≤ 2e;
    # I6: every rounded operation is moved outward by up/dn;
    # I7: θ_S = 1 − δ_S² exactly, so each side may tighten the other."""
    B1 = T1 - A1
    B2 = T2 - A2
    D1 = (A1 - B1) * scale
    D2 = (A2 - B2) * scale
    A1 *= scale
    A2 *= scale
    B1 *= scale
    B2 *= scale
    T1 *= scale
    T2 *= scale
    e = up(up(L * U) * (s2 * scale))   # ≥ L·u·σ₂ ≥ every remainder sum, scaled (I2)
    A_lo = max(dn(dn(A1 + A2) - e), 0.0)
    A_hi = up(up(A1 + A2) + e)
    B_lo = max(dn(dn(B1 + B2) - e), 0.0)
    B_hi = up(up(B1 + B2) + e)
    T_lo = max(dn(A_lo + B_lo), dn(dn(T1 + T2) - e))
    T_hi = min(up(A_hi + B_hi), up(up(T1 + T2) + e))
    e2 = up(e + e)
    D_lo = dn(dn(D1 + D2) - e2)
    D_hi = up(up(D1 + D2) + e2)
    if D_lo >= 0.0:
        aD_lo, aD_hi = D_lo, D_hi
    elif D_hi <= 0.0:
        aD_lo, aD_hi = -D_hi, -D_lo
    else:
        aD_lo, aD_hi = 0.0, max(-D_lo, D_hi)
    th_lo = dn(dn((4.0 * A_lo) * B_lo) / up(T_hi * T_hi))   # 4·A is exact
    th_hi = up(up((4.0 * A_hi) * B_hi) / dn(T_lo * T_lo))
    d_hi = up(aD_hi / T_lo)
    d_lo = dn(aD_lo / T_hi)
    g_hi = up(d_hi * d_hi)
    g_lo = max(dn(d_lo * d_lo), 0.0)
    th_lo = max(th_lo, dn(1.0 - g_hi))        # I7
    g_hi = min(g_hi, up(1.0 - th_lo))
    th_hi = min(th_hi, up(1.0 - g_lo))
    g_lo = max(g_lo, dn(1.0 - th_hi))
    return (min(max(th_lo, 0.0), 1.0), min(max(th_hi, 0.0), 1.0), min(max(g_lo, 0.0), 1.0),
            min(max(g_hi, 0.0), 1.0))


@numba.njit(cache=True)
def score_row(x, mk, c, q1, q2):
    """(θ_lo, θ_hi, gap_lo, gap_hi, fl(T₁ + T₂)) of witness mk (uint8) on row x, TINY ≤ max x:
    the evaluator every searched mask goes through.  c = headroom_bits(len(x)); q1, q2 are
    scratch of the row's length.  # I1, I2, I3, I6, I7 (as outward_bounds)."""
    s1, s2, sc = splitters(max_bits(x.view(np.int64)) >> 52, c)
    extract(x, s1, s2, q1, q2)
    A1, A2 = masked_sum2(q1, q2, mk)
    T1, T2 = exact_sum2(q1, q2)
    lo, hi, glo, ghi = outward_bounds(A1, A2, T1, T2, s2, x.shape[0], sc)
    return lo, hi, glo, ghi, T1 + T2


# ----------------------------------------------------------------------------- upper-bound lemmas

@numba.njit(cache=True, inline="always")
def hi_from_delta_lo(d):
    """(θ_hi, gap_lo) from a certified d ≤ δ: θ = 1 − δ² ≤ 1 − d² and δ² ≥ d².
    # I8: d² rounded down, 1 − d² rounded up (nextafter: one rounding each)."""
    g = max(np.nextafter(d * d, -np.inf), 0.0)
    return min(np.nextafter(1.0 - g, np.inf), 1.0), g


@numba.njit(cache=True)
def hi_from_delta_lo_rows(d, hi, glo):
    """hi_from_delta_lo for arrays (I8): hi[i], glo[i] = the bounds from d[i]."""
    for i in range(d.shape[0]):
        hi[i], glo[i] = hi_from_delta_lo(d[i])


@numba.njit(cache=True)
def top_indices(x, K):
    """Indices of the K largest entries, largest first, ties by lower index (a stable sort of
    −x).  Soundness needs no property of this choice (the top-K lemma holds for any K
    atoms); verify replays the lemma on the K largest, so certify must use the same ones."""
    L = x.shape[0]
    K = min(K, L)
    top = np.empty(K, np.int64)
    top_of(x, np.arange(L), L, top, np.empty(K))
    return top


@numba.njit(cache=True, inline="always")
def top_of(x, idx, n, top, val):
    """top[:] = the len(top) ≤ n largest of the atoms idx[:n] (increasing indices), largest
    first, ties by lower index; val: scratch of len(top).  One insertion pass: an atom
    enters only above the current K-th (a tie keeps the earlier, lower index)."""
    K = top.shape[0]
    cnt = 0
    for a in range(n):
        j = idx[a]
        v = x[j]
        if cnt == K and not v > val[K - 1]:
            continue                   # not above the K-th: a tie keeps the lower index
        p = cnt if cnt < K else K - 1
        while p > 0 and val[p - 1] < v:   # after every entry ≥ v (stable)
            val[p] = val[p - 1]
            top[p] = top[p - 1]
            p -= 1
        val[p] = v
        top[p] = j
        cnt += 1 if cnt < K else 0


@numba.njit(cache=True, inline="always")
def signed_sums(q1, q2, top, a, b, out, work):
    """out[t] = fl(Σ_i s_i·q1[top[i]] + Σ_i s_i·q2[top[i]]) over i in a..b−1, s_i = −1 where
    bit i − a of t is set, else +1; for a = 0 the largest atom's sign is fixed (+1) and bit
    i − 1 gives s_i.  work holds the q₂ sums.  # I3: each signed partial sum of q₁'s (of
    q₂'s) is exact, so only the final addition rounds."""
    if a == 0:
        out[0] = q1[top[0]]
        work[0] = q2[top[0]]
        lo = 1
    else:
        out[0] = 0.0
        work[0] = 0.0
        lo = a
    m = 1
    for i in range(lo, b):
        v1 = q1[top[i]]
        v2 = q2[top[i]]
        for t in range(m):
            out[t + m] = out[t] - v1
            work[t + m] = work[t] - v2
            out[t] = out[t] + v1
            work[t] = work[t] + v2
        m *= 2
    for t in range(m):
        out[t] = out[t] + work[t]


@numba.njit(cache=True)
def _least_abs_sum(a, v, n):
    """min over r < n of |fl(a + v[r])| for finite a and v (I11): one plain loop, each
    value computed one way."""
    best = np.inf
    for r in range(n):
        w = abs(a + v[r])
        best = w if w < best else best
    return best


@numba.njit(cache=True)
def topk_row(x, K, mk, q1, q2):
    """The top-K interval lemma on one row (TINY ≤ max x, or 0 returned): (d, closes) with
    d ≤ δ, where δ·T ≥ min_ε max(0, |Σ_{i≤K} ε_i x_(i)| − t_K), t_K the tail mass.  When
    ``closes``, mk is the lemma's witness (top atoms by the minimising ε, the tail on the
    lighter side; it is re-scored like any other mask).  The K atoms are
    ``top_indices(x, K)``, the ones verify replays: :func:`topk_row_on`."""
    return topk_row_on(x, top_indices(x, K), mk, q1, q2)


@numba.njit(cache=True, inline="always")
def topk_scratch(K):
    """The float64 scratch :func:`topk_row_in` needs for K atoms: both halves' signed sums
    (2^(h−1) and 2^(K−h) of them, h = ⌈K/2⌉) and as many partial sums of q₂."""
    h = (K + 1) // 2
    return 2 * ((1 << (h - 1)) + (1 << (K - h))) if K > 0 else 0


@numba.njit(cache=True)
def topk_row_on(x, top, mk, q1, q2):
    """:func:`topk_row` on the atoms top (distinct indices; top[0] the one whose sign is
    fixed): :func:`topk_row_in` with scratch of its own."""
    return topk_row_in(x, top, mk, q1, q2, np.empty(topk_scratch(top.shape[0])))


@numba.njit(cache=True)
def topk_row_in(x, top, mk, q1, q2, w):
    """:func:`topk_row` on the atoms top (distinct indices; top[0] the one whose sign is
    fixed), in the caller's scratch w (≥ topk_scratch(len(top)) entries; stage B passes one
    per span of rows: four small allocations a row cost a third of the lemma).  A caller
    that needs the lemma for several K on one row passes prefixes of one
    ``top_indices(x, K_max)``: the first K of a stable sort are ``top_indices(x, K)``.
    # I8: the tail contributes to A − B at most t_K in absolute value, for any split and
    # any choice of the K atoms (validity needs nothing of them; the largest bound best);
    # I2, I3, I6: parts exact, every rounded step outward;
    # I11: the least |fl(L̃ + R̃)| over all 2^(K−1) sign patterns, by an exhaustive scan of
    # both halves' pairs."""
    if w.shape[0] < topk_scratch(top.shape[0]):   # compiled slices are not bounds-checked:
        raise ValueError("topk_row_in: scratch shorter than topk_scratch(K)")   # a bug, never a bound
    L = x.shape[0]
    c = headroom_bits(L)
    ef = max_bits(x.view(np.int64)) >> 52
    if splitter_exponents(ef, c)[0] > 1023:
        return 0.0, False              # σ₁ would overflow: no bound (as a NaN would give)
    s1, s2, sc = splitters(ef, c)
    extract(x, s1, s2, q1, q2)
    T1, T2 = exact_sum2(q1, q2)
    K = top.shape[0]
    p1 = 0.0
    p2 = 0.0
    for i in range(K):
        p1 += q1[top[i]]               # exact partial sums of q₁ (and of q₂): I3
        p2 += q2[top[i]]
    e = up(up(L * U) * (s2 * sc))      # ≥ every remainder sum of the row, scaled (I2)
    T_hi = up(up(T1 * sc + T2 * sc) + e)
    t_hi = up(up((T1 - p1) * sc + (T2 - p2) * sc) + e)   # tail mass, rounded up
    if not (t_hi < x[top[0]] * sc):    # the lemma's min |Σεx| ≤ x_(1) (greedy): no bound
        return 0.0, False
    h = (K + 1) // 2
    nl = 1 << (h - 1)
    nr = 1 << (K - h)
    Lv = w[:nl]
    Rv = w[nl:nl + nr]
    signed_sums(q1, q2, top, 0, h, Lv, w[nl + nr:2 * nl + nr])
    signed_sums(q1, q2, top, h, K, Rv, w[2 * nl + nr:2 * (nl + nr)])
    best = np.inf                      # I11: the least |fl(L̃ + R̃)| over every pair
    for p in range(nl):
        best = min(best, _least_abs_sum(Lv[p], Rv, nr))
    bl = 0                             # the first pair attaining it (a witness, any would do)
    while _least_abs_sum(Lv[bl], Rv, nr) != best:
        bl += 1
    br = 0
    while abs(Lv[bl] + Rv[br]) != best:
        br += 1
    # |Σεx| ≥ |L̃ + R̃| − u(|L̃| + |R̃|) − K·u·σ₂, |L̃| + |R̃| ≤ 2·Σ_top, |fl(z)| ≤ |z|(1 + 2⁻⁵²)
    E = up(up(up(4.0 * U) * up((p1 + p2) * sc)) + e)
    smin = dn(dn(dn(best * sc) * (1.0 - 2.0 ** -52)) - E)
    num = dn(smin - t_hi)
    d_lo = dn(num / T_hi) if num > 0.0 else 0.0
    closes = num >= 0.0
    if closes:
        plus_heavy = (Lv[bl] + Rv[br]) >= 0.0
        for j in range(L):
            mk[j] = 0 if plus_heavy else 1          # tail on the lighter side
        mk[top[0]] = 1
        for i in range(1, h):
            mk[top[i]] = 0 if (bl >> (i - 1)) & 1 else 1
        for i in range(h, K):
            mk[top[i]] = 0 if (br >> (i - h)) & 1 else 1
    return d_lo, closes


def count_interval(w, K):
    """The count lemma in integers: (d, mask) with d ≤ min_S |w(S) − w(S^c)| for integer
    weights w (nonzero, any order), and a mask attaining d when d > 0.

    The same (d, mask) as :func:`count_interval_plain` (the statement and its proof are
    there): where every number the lemma forms fits int64, its loop compiled on int64
    (:func:`_count_interval_i64`: about 50× faster at K = 12, 2^(K−1) sign sums), else that
    plain form itself.
    """
    # every number formed is at most 2·Σw in magnitude when every w > 0 (see
    # _count_interval_i64); weights outside the contract go to the plain form unchanged
    if all(x > 0 for x in w) and 2 * sum(w) < 2 ** 62:
        return _count_interval_i64(w, K)
    return count_interval_plain(w, K)


def _count_interval_i64(w, K):
    """count_interval_plain for Σw < 2^61, its loop compiled (:func:`_count_scan_i64`) on
    int64 values: every number it forms is a sum of ±w's (|·| ≤ Σw) or a difference of two
    of them (|·| ≤ 2·Σw < 2^62), so none wraps.  Same order, same (d, mask)."""
    n = len(w)
    order = sorted(range(n), key=lambda i: (-w[i], i))
    K = min(K, n)
    top, tail = order[:K], order[K:][::-1]            # tail ascending
    m = len(tail)
    found, best, bits, small, j = _count_scan_i64(np.array([w[i] for i in top], dtype=np.int64),
                                                  np.array([w[i] for i in tail], dtype=np.int64))
    if not found:
        return 0, None
    mask = [False] * n
    for q in range(K):
        mask[top[q]] = bool(bits >> q & 1)
    for i in (tail[:j] if small else tail[m - j:]):
        mask[i] = True
    return int(best), mask


@numba.njit(cache=True)
def _count_scan_i64(wtop, wtail):
    """The loop of count_interval_plain on int64 values (the caller bounds them): the K top
    weights wtop (largest first) and the tail wtail (ascending).  Returns (found, d, bits,
    small, j): found False where some S may balance (no bound); else the least distance d,
    first met in the plain form's order, and its witness — the top atoms of bits (bit q:
    ε_q = +1) with the j smallest tail atoms (small) or the j largest."""
    K = wtop.size
    m = wtail.size
    t = np.int64(0)
    for i in range(m):
        t += wtail[i]
    a = np.empty(m + 1, np.int64)                 # left ends 2·s_j − t, increasing in j
    b = np.empty(m + 1, np.int64)                 # right ends 2·l_j − t, increasing in j
    a[0] = -t
    b[0] = -t
    for i in range(m):
        a[i + 1] = a[i] + 2 * wtail[i]
        b[i + 1] = b[i] + 2 * wtail[m - 1 - i]
    # the sign sums Σ ε w in the plain order: step q puts the sums with +w_q first, then
    # those with −w_q (bits: ε = +1), as the plain form's list concatenation does
    N = 1 << max(K - 1, 0)
    xs = np.empty(N, np.int64)
    bs = np.empty(N, np.int64)
    xs[0] = wtop[0] if K else 0
    bs[0] = 1 if K else 0
    h = 1
    for q in range(1, K):
        v = wtop[q]
        for u in range(h):
            xs[h + u] = xs[u] - v
            bs[h + u] = bs[u]
            xs[u] = xs[u] + v
            bs[u] = bs[u] | (np.int64(1) << q)
        h *= 2
    found = False
    best = np.int64(0)
    bbits = np.int64(0)
    small = True
    bj = 0
    for u in range(N):
        target = -xs[u]
        lo, hi = 0, m + 1                         # bisect_left: first j with b_j ≥ target
        while lo < hi:
            mid = (lo + hi) >> 1
            if b[mid] < target:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        if j <= m and a[j] <= target:
            return False, np.int64(0), np.int64(0), True, 0     # some S may balance: no bound
        if j <= m and (not found or a[j] - target < best):
            found, best, bbits, small, bj = True, a[j] - target, bs[u], True, j
        if j >= 1 and (not found or target - b[j - 1] < best):
            found, best, bbits, small, bj = True, target - b[j - 1], bs[u], False, j - 1
    return found, best, bbits, small, bj


def count_interval_plain(w, K):
    """The count lemma in plain Python integers (any size): (d, mask) as :func:`count_interval`.

    Let the K largest atoms be fixed with signs ε (ε₁ = +1: S and S^c give the same
    |A − B|), the other m atoms be the tail with total t, and s_j / l_j the sums of its j
    smallest / largest atoms.  If S takes j tail atoms, the tail contributes
    2·w(S ∩ tail) − t ∈ I_j = [2s_j − t, 2l_j − t], so |A − B| ≥ dist(0, Σε_i w_(i) + I_j).
    # I8: minimising over ε and j = 0…m bounds the discrepancy from below; when the minimum
    # is positive it is attained at an end of some I_j, by S = {top atoms with ε = +1} ∪
    # {the j smallest (left end) or j largest (right end) tail atoms}.  K = 0 with an odd
    # count is the parity argument (one side holds ≥ (n + 1)/2 atoms).
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


# ----------------------------------------------------------------------------- lifting

def lift_tiny(R):
    """R with every row whose max is below TINY multiplied by the power of two that brings
    its max into [1, 2); other rows unchanged.  Returns (R', lifted rows mask).
    # I0: θ is scale-free and multiplying by 2^k (k ≥ 0, no overflow) is exact."""
    m = R.max(axis=1)
    tiny = m < TINY
    if not tiny.any():
        return R, tiny
    _, e = np.frexp(m)
    return np.ascontiguousarray(np.ldexp(R, np.where(tiny, 1 - e, 0)[:, None])), tiny
