"""Search kernels and the evaluator's batch drivers of the certify pipeline (C5, C7).

Search (no rigour needed: every mask is re-scored by the trusted evaluator,
:func:`numerics.trusted.score_row`).  For non-dominant rows: "big" atoms (≥
max·2^−BIG_BITS; on a diffuse row, where more than max(L/8, 16) atoms are, only the max's ties:
``theta_fused.diffuse_cut``) are placed by greedy in decreasing exponent order (an O(L) stand-in for
sorted greedy/LPT), then the small atoms, in index order, fill the lighter side up to the
prefix crossing (C5: what is left is at most one small atom), then up to ``flips`` best
single flips.  Each decision uses exact q₁ sums or elementwise float operations in a fixed
order, so the masks are backend-independent too.

Evaluator drivers: :func:`evaluate` (witness masks of many rows) and :func:`bounds_batch`
(rows given as exact parts, the torch backend's last step) run the trusted functions of
:mod:`numerics.trusted` (exact extraction, exact sums, outward rounding) row by row.  The
threaded forms are chosen by the caller (``parallel=``): numerics/ has no thread policy
(certificates/threads.py has it).  Each row is computed on its own, so the thread count
never changes a result.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from numerics import trusted

BLOCK = 64          # rows per prange task (scratch arrays are allocated per block)
BIG_BITS = 4        # atoms within 2^−BIG_BITS of the row max are placed by greedy


# ----------------------------------------------------------------------------- search

@numba.njit(cache=True)
def _best_flip_value(x, mk, D):
    # min over j of |D − 2σ_j x_j| (σ = ±1 by the mask; 2σx = (4m − 2)x is exact); eight
    # explicit lanes so that it vectorises; a min of exactly computed values is order-free
    L = x.shape[0]
    v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = abs(D)
    j = 0
    while j + 8 <= L:
        w = abs(D - (4.0 * mk[j] - 2.0) * x[j])
        v0 = w if w < v0 else v0
        w = abs(D - (4.0 * mk[j + 1] - 2.0) * x[j + 1])
        v1 = w if w < v1 else v1
        w = abs(D - (4.0 * mk[j + 2] - 2.0) * x[j + 2])
        v2 = w if w < v2 else v2
        w = abs(D - (4.0 * mk[j + 3] - 2.0) * x[j + 3])
        v3 = w if w < v3 else v3
        w = abs(D - (4.0 * mk[j + 4] - 2.0) * x[j + 4])
        v4 = w if w < v4 else v4
        w = abs(D - (4.0 * mk[j + 5] - 2.0) * x[j + 5])
        v5 = w if w < v5 else v5
        w = abs(D - (4.0 * mk[j + 6] - 2.0) * x[j + 6])
        v6 = w if w < v6 else v6
        w = abs(D - (4.0 * mk[j + 7] - 2.0) * x[j + 7])
        v7 = w if w < v7 else v7
        j += 8
    while j < L:
        w = abs(D - (4.0 * mk[j] - 2.0) * x[j])
        v0 = w if w < v0 else v0
        j += 1
    v0 = v1 if v1 < v0 else v0
    v2 = v3 if v3 < v2 else v2
    v4 = v5 if v5 < v4 else v4
    v6 = v7 if v7 < v6 else v6
    v0 = v2 if v2 < v0 else v0
    v4 = v6 if v6 < v4 else v4
    return v4 if v4 < v0 else v0


@numba.njit(cache=True)
def flip_more(x, mk, D, flips, stop):
    """Up to ``flips`` best single flips (the first index attaining the least |D'|)."""
    for _ in range(flips):
        if abs(D) <= stop:
            break
        v = _best_flip_value(x, mk, D)
        if not v < abs(D):
            break
        for j in range(x.shape[0]):
            if abs(D - (4.0 * mk[j] - 2.0) * x[j]) == v:
                D = D - (4.0 * mk[j] - 2.0) * x[j]
                mk[j] = 1 - mk[j]
                break
    return D


@numba.njit(cache=True, inline="always")
def pair_min(c, b2, nb, w, wi):
    """min over q < nb of |fl(c + b2[q])| for finite c and b2 finite or +inf.  Each value
    is computed one way and stored in w (scratch, ≥ max(nb, 1) entries); the least is found
    on their bit patterns wi (w viewed as int64): nonnegative floats order like their bits
    (as in I1), and an integer min reduction vectorises where a float one does not
    (≈ 5× faster at 64 entries).  w[0] is overwritten by the result."""
    for q in range(nb):
        w[q] = abs(c + b2[q])
    m = np.int64(0x7FF0000000000000)   # the bits of +inf
    for q in range(nb):
        v = wi[q]
        m = v if v < m else m
    wi[0] = m
    return w[0]


INF_BITS = np.int64(0x7FF0000000000000)   # the bit pattern of +inf


@numba.njit(cache=True, inline="always")
def first_equal(c, v, b2, nb, w, wi, fresh):
    """The first q < nb with |fl(c + b2[q])| = v (one exists), where w[1:nb] already holds
    those values from pair_min(c, b2, nb, w, wi) unless ``fresh`` asks for them again (w[0]
    holds pair_min's result, so q = 0 is tested on its own).  The same q as stepping q up
    from 0 while |c + b2[q]| ≠ v, without that loop's serial compare and mispredicted exit:
    the values are nonnegative floats and never NaN (c is finite), so they are equal
    exactly when their bit patterns are, and the least index of a match is an integer min
    reduction, which vectorises."""
    if abs(c + b2[0]) == v:
        return 0
    if fresh:
        pair_min(c, b2, nb, w, wi)
    w[0] = v
    t = wi[0]
    wi[0] = t + 1                 # q = 0 is not a match (tested above)
    first = nb
    for q in range(nb):
        first = min(first, q if wi[q] == t else nb)
    return first


@numba.njit(cache=True, inline="always")
def exchange_window(x, mk, j0, span, rounds, stop, D, b2, w):
    """Stage A's exchange: the best exchange of an atom of S with one of S^c, both among
    the nonzero atoms with index in [j0, j0 + span), repeated up to ``rounds`` times while
    |D| > stop; D is the caller's float Σ_S x − Σ_{S^c} x for mk.  The scan over S's atoms
    (index order) takes the first whose best partner reaches |D| ≤ stop, else the first
    attaining the least |D'| (if below |D|); its partner is the first attaining that
    value.  A window of consecutive atoms (stage A centres it on the prefix crossing,
    where S ends and S^c begins) instead of the first W atoms of each side (stage B's
    :func:`exchange`): no compaction, whose data-dependent stores cost more than the
    scan.  span ≤ 64 (S's atoms in the window are one bit word).  b2, w: scratch of
    ≥ max(span, 1) entries.  Plain float search (the mask is re-scored by
    the evaluator); the torch twin (numerics.theta_torch) makes the same choices."""
    E = min(span, x.shape[0] - j0, 64)
    wi = w.view(np.int64)
    b2i = b2.view(np.int64)
    for _ in range(rounds):
        if abs(D) <= stop:
            break
        sw = np.uint64(0)              # S's nonzero atoms as bits, 2x on S^c's, +inf elsewhere:
        for q in range(E):             # one branch-free pass (a branch per atom mispredicts)
            v = x[j0 + q]
            inS = mk[j0 + q] == 1
            pos = v > 0.0              # & and > on the two flags: no short-circuit branch
            b2[q] = 2.0 * v if pos > inS else np.inf
            sw |= np.uint64(pos & inS) << np.uint64(q)
        # the least and the largest finite b2 (on bit patterns: b2 ≥ 0, as in pair_min)
        lo_b = INF_BITS
        hi_b = np.int64(0)
        for q in range(E):
            u = b2i[q]
            lo_b = u if u < lo_b else lo_b
            u = u if u != INF_BITS else np.int64(0)
            hi_b = u if u > hi_b else hi_b
        if lo_b == INF_BITS:           # no partner in the window: every value is +inf
            break
        wi[0] = lo_b
        bmin = w[0]
        wi[0] = hi_b
        bmax = w[0]
        best = abs(D)
        bp = -1
        p = -1
        last = -1                      # the atom whose values pair_min left in w
        while sw != 0:                 # S's atoms in index order, by their set bits
            p = np.int64(trailing_zeros(sw))
            sw &= sw - np.uint64(1)
            # fl(c + b) only grows with b: when even the least b2 leaves c + b ≥ 0, every
            # value is c + b and the least is fl(c + bmin); when even the largest finite
            # one leaves it ≤ 0, the least |·| is at bmax (the +inf entries give +inf).
            # Either is the value the scan would give, found without it
            c = D - 2.0 * x[j0 + p]
            lo_v = c + bmin
            hi_v = c + bmax
            if lo_v >= 0.0:
                v = abs(lo_v)
            elif hi_v <= 0.0:
                v = abs(hi_v)
            else:
                v = pair_min(c, b2, E, w, wi)
                last = p
            if v < best:
                best = v
                bp = p
                if best <= stop:       # good enough: the first S atom that reaches it
                    break
        if bp < 0:
            break
        c = D - 2.0 * x[j0 + bp]
        bq = first_equal(c, best, b2, E, w, wi, bp != last)
        mk[j0 + bp] = 0
        mk[j0 + bq] = 1
        D = c + b2[bq]
    return D


@numba.njit(cache=True, inline="always")
def exchange(x, mk, W, rounds, stop, D, ia, ib, b2):
    """Best exchange of one atom of S with one of S^c among the first W nonzero atoms of
    each side (index order), repeated up to ``rounds`` times while |D| > stop; D is the
    caller's float Σ_S x − Σ_{S^c} x for mk.  No sort, at most W² candidate pairs a round:
    the scan over S's atoms takes the first whose best partner reaches |D| ≤ stop, else the
    first attaining the least |D'| (if below |D|), and its partner is the first attaining
    that least value.  On diffuse rows (all atoms comparable: greedy and the prefix
    crossing leave |D| about an atom's spread) the W² pair differences are dense enough
    that one exchange nearly always reaches |D| ≤ stop.  Plain float search (the mask is
    re-scored by the evaluator); returns the new D.  ia, ib: scratch of L entries, b2: of
    2W.  The torch twin (numerics.theta_torch) makes the same choices."""
    L = x.shape[0]
    ws = b2[W:]                        # pair_min's scratch
    wi = ws.view(np.int64)
    for _ in range(rounds):
        if abs(D) <= stop:
            break
        na = 0
        nb = 0
        j0 = 0
        while j0 < L and (na < W or nb < W):    # branch-free compaction, 64 atoms a step
            j1 = min(L, j0 + 64)
            for j in range(j0, j1):
                pos = x[j] > 0.0
                ia[na] = j
                ib[nb] = j
                na += 1 if (pos and mk[j] == 1) else 0
                nb += 1 if (pos and mk[j] == 0) else 0
            j0 = j1
        na = min(na, W)
        nb = min(nb, W)
        if na == 0 or nb == 0:
            break
        for q in range(nb):
            b2[q] = 2.0 * x[ib[q]]
        best = abs(D)
        bp = -1
        for p in range(na):
            v = pair_min(D - 2.0 * x[ia[p]], b2, nb, ws, wi)
            if v < best:
                best = v
                bp = p
                if best <= stop:       # good enough: the first S atom that reaches it
                    break
        if bp < 0:
            break
        c = D - 2.0 * x[ia[bp]]
        bq = -1
        bv = abs(D)
        for q in range(nb):
            w = abs(c + b2[q])
            if w < bv:
                bv = w
                bq = q
        if bq < 0:
            break
        mk[ia[bp]] = 0
        mk[ib[bq]] = 1
        D = c + b2[bq]
    return D


@numba.njit(cache=True)
def split_small(x, q1, tau, qs, mk):
    # qs = q₁ on the small atoms, 0 on the big ones; mk cleared; returns the number of bigs
    nb = 0
    for j in range(x.shape[0]):
        big = x[j] >= tau
        qs[j] = 0.0 if big else q1[j]
        nb += 1 if big else 0
        mk[j] = 0
    return nb


@numba.njit(cache=True)
def prefix_crossing(qs, L, target):
    """C5's prefix crossing in index order: the first k with 2·Σ_{j≤k} q_j ≥ target.

    Returns (k, Σ_{j≤k} q_j, Σ_{j<k} q_j); k = L when no prefix reaches the target.
    Every partial sum is exact (the q's are parts of an error-free extraction), so the
    block-of-8 shortcut and the order of the sums do not change the result.  The q's are
    ≥ 0, so the prefix sums only grow: inside the crossing block, k is the count of
    prefixes still below the target, taken over all (up to) 8 atoms — a fixed-count loop
    in place of an exit the branch predictor would miss.
    """
    c = 0.0
    j = 0
    while j + 8 <= L:                   # exact block sums first, then inside the block
        bs = ((qs[j] + qs[j + 1]) + (qs[j + 2] + qs[j + 3])) + \
             ((qs[j + 4] + qs[j + 5]) + (qs[j + 6] + qs[j + 7]))
        if 2.0 * (c + bs) >= target:
            break
        c += bs
        j += 8
    e = j + 8 if j + 8 < L else L
    below = c                           # the prefix sum through the last atom below
    nbl = 0
    cc = c
    for t in range(j, e):
        cc += qs[t]
        b = 2.0 * cc < target
        nbl += 1 if b else 0
        below = cc if b else below
    k = j + nbl
    if k < e:
        return k, below + qs[k], below
    return L, cc, cc


@numba.njit(cache=True, inline="always")
def prefix_sums(qs, L, pre):
    """pre[j] = Σ_{t≤j} qs[t] for j < L, every one exact (the q's are parts of an
    error-free extraction, so any partial sum is: I3), in blocks of 8: within a block a
    chain from 0, then the running offset added to each, so the eight blocks' chains are
    independent and only the offset is carried from block to block."""
    off = 0.0
    j = 0
    while j + 8 <= L:
        s0 = qs[j]
        s1 = s0 + qs[j + 1]
        s2 = s1 + qs[j + 2]
        s3 = s2 + qs[j + 3]
        s4 = s3 + qs[j + 4]
        s5 = s4 + qs[j + 5]
        s6 = s5 + qs[j + 6]
        s7 = s6 + qs[j + 7]
        pre[j] = off + s0
        pre[j + 1] = off + s1
        pre[j + 2] = off + s2
        pre[j + 3] = off + s3
        pre[j + 4] = off + s4
        pre[j + 5] = off + s5
        pre[j + 6] = off + s6
        pre[j + 7] = off + s7
        off = off + s7
        j += 8
    while j < L:
        off = off + qs[j]
        pre[j] = off
        j += 1


@numba.njit(cache=True, inline="always")
def crossing_in_prefix(pre, L, target):
    """:func:`prefix_crossing` from the prefix sums pre of :func:`prefix_sums` (L ≥ 1): the
    same (k, Σ_{j≤k} q_j, Σ_{j<k} q_j), as the sums are the same exact values and only
    grow (q ≥ 0), so k, the first j with 2·pre[j] ≥ target, is the count of j where that
    test fails: a compare and an add a lane, which vectorise, and no exit.  Counted as
    "not ≥" rather than "<", so that a NaN target (out of stage A's domain: its inputs are
    validated finite and far from overflow) crosses nowhere, k = L, as in the torch twin."""
    k = 0
    for j in range(L):
        k += np.int64(not (2.0 * pre[j] >= target))
    if k < L:
        return k, pre[k], (pre[k - 1] if k > 0 else 0.0)
    return L, pre[L - 1], pre[L - 1]


@numba.njit(cache=True)
def big_greedy_tail(x, q1, m, bits, mk, idx, order, cnt, qs):
    """Greedy on the big atoms (≥ m·2^−bits, in exponent order), prefix crossing on the
    small ones.  Writes mk (uint8); returns the float D = Σ_S x − Σ_{S^c} x.
    idx, order, qs (length L) and cnt (≥ bits + 2) are scratch.
    """
    L = x.shape[0]
    tau = m * 2.0 ** -bits
    nb = split_small(x, q1, tau, qs, mk)
    xb = x.view(np.int64)
    em = np.int64(0)                    # biased exponent field of the max (found with the bigs)
    k = 0
    for j in range(L):                  # the big atoms' indices (few: the branch predicts)
        if x[j] >= tau:
            idx[k] = j
            e = xb[j] >> 52
            em = e if e > em else em
            k += 1
            if k == nb:
                break
    for b in range(bits + 2):
        cnt[b] = 0
    for t in range(nb):
        b = em - (xb[idx[t]] >> 52)
        cnt[(b if b < bits else bits) + 1] += 1
    for b in range(bits + 1):
        cnt[b + 1] += cnt[b]
    for t in range(nb):                 # stable counting sort by exponent, largest first
        b = em - (xb[idx[t]] >> 52)
        b = b if b < bits else bits
        order[cnt[b]] = idx[t]
        cnt[b] += 1
    D = 0.0
    for t in range(nb):                 # branch-free greedy: the atom joins the lighter side
        j = order[t]
        go = D <= 0.0
        D = D + x[j] if go else D - x[j]
        mk[j] = 1 if go else 0
    # small atoms: the prefix (index order) P with 2·Σ_P q₁ crossing t_s − D joins S
    ts = trusted.exact_sum(qs)
    target = ts - D
    k, c, before = prefix_crossing(qs, L, target)
    d_with = D + (2.0 * c - ts)
    d_wo = D + (2.0 * before - ts)
    kk = k + 1 if (k < L and abs(d_with) <= abs(d_wo)) else k
    for j in range(min(kk, L)):
        if x[j] < tau:
            mk[j] = 1
    return d_with if kk == k + 1 else d_wo


# ----------------------------------------------------------------------------- evaluator drivers

@numba.njit(cache=True)
def _evaluate_span(R, M, out, lo, hi):
    L = R.shape[1]
    c = trusted.headroom_bits(L)
    q1 = np.empty(L)
    q2 = np.empty(L)
    for i in range(lo, hi):
        o = out[i]
        o[0], o[1], o[2], o[3], o[4] = trusted.score_row(R[i], M[i], c, q1, q2)


# Separately defined serial and threaded drivers: numba's disk cache is keyed by function
# name and line, so one function jitted twice would share (and overwrite) one cache entry.
@numba.njit(cache=True)
def _evaluate_ser(R, M, out):
    _evaluate_span(R, M, out, 0, R.shape[0])


@numba.njit(cache=True, parallel=True)
def _evaluate_par(R, M, out):
    n = R.shape[0]
    for blk in numba.prange((n + BLOCK - 1) // BLOCK):
        _evaluate_span(R, M, out, blk * BLOCK, min(n, (blk + 1) * BLOCK))


def evaluate(R, M, out, parallel=False):
    """The certified value of witness M[i] (uint8) in every row (max ≥ TINY): out[i, :5] =
    θ_lo, θ_hi, gap_lo, gap_hi of the witness and the row total (trusted.score_row)."""
    (_evaluate_par if parallel else _evaluate_ser)(R, M, out)


@numba.njit(cache=True)
def bounds_batch(parts, L, out):
    """Outward rounding for rows given as exact parts (A₁, A₂, T₁, T₂, max) — the last step
    of the torch backend, the same trusted routine as in stage_a: out[i] = θ_lo, θ_hi,
    gap_lo, gap_hi, row total, p_max."""
    c = trusted.headroom_bits(L)
    mb = parts[:, 4].copy().view(np.int64)
    for i in range(parts.shape[0]):
        _, s2, sc = trusted.splitters(mb[i] >> 52, c)
        A1, A2, T1, T2 = parts[i, 0], parts[i, 1], parts[i, 2], parts[i, 3]
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = trusted.outward_bounds(A1, A2, T1, T2, s2, L, sc)
        out[i, 4] = T1 + T2            # the row total to ~1 ulp (descriptive row_sum)
        out[i, 5] = parts[i, 4] / out[i, 4]


_MOVED = ("others_running", "cpu_count", "threaded", "threaded_rows", "LOAD_AWARE", "PAR_MIN", "_others_recent")


def __getattr__(name):
    # Transition only: the thread policy moved to certificates/threads.py (numerics/ does no
    # I/O and decides no threads).  Callers outside numerics/ that still import these names
    # from here (benchmarks/certify_throughput.py, certificates/probe_capture.py) get the new
    # ones; setting LOAD_AWARE here no longer changes the policy.
    if name in _MOVED:
        from certificates import threads
        return getattr(threads, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
