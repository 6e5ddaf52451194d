"""Second-stage numba kernels for the rows the fused pass leaves open (C5, C7).

* :func:`topk_lemma` — the batch driver of the top-K interval lemma
  (:func:`numerics.trusted.topk_row`, the trusted core): δ·T ≥ min_ε max(0,
  |Σ_{i≤K} ε_i x_(i)| − t_K), t_K the tail mass, from exact extraction parts, rounded
  outward, so it is ≤ the integer value that certificates/verify.py recomputes with the
  same K.  When the minimising |Σε x| is at least t_K, the mask "top atoms by ε, tail on
  the lighter side" attains it: the row closes.
* :func:`_quick_swap` — stage B's first search, before any sort: the best exchange of
  one atom of S with one of S^c among the first W nonzero atoms of each side (W² pairs,
  stopping at the first that closes the row).  Near-uniform rows (attention at
  initialisation), where the fused pass's greedy leaves |D| about one atom's spread,
  nearly all close here.  Plain float search (masks re-scored by the evaluator).
* :func:`_mitm_row` — a search for diffuse rows of many comparable atoms, where greedy and
  Karmarkar–Karp stall at 1 − θ ≈ 10⁻⁵…10⁻³: everything but the top k atoms is placed by
  the fused pass's greedy, then the top k atoms are split exactly against that remainder
  by meet in the middle (2 × 2^(k/2) sums, one two-pointer scan).  Plain float search:
  its masks are re-scored by the evaluator.
* :func:`_window_row` — a witness for the same rows when their count is the obstacle:
  with the nonzero atoms sorted, the sums of k = ⌈n/2⌉ consecutive atoms rise from the k
  smallest to the k largest in steps of at most max − min, so some window lands within
  (max − min)/2 of T/2 — greedy and Karmarkar–Karp, which balance sizes first, stay about
  one atom off on odd counts.  Plain float search (masks re-scored by the evaluator);
  the exchanges of :func:`_improve_row` refine it.
"""
from __future__ import annotations

import heapq
import math

import numba
import numpy as np

from numerics import trusted
from numerics.borrowed import borrow
from numerics.theta_kernels import big_greedy_tail, exchange, flip_more


@numba.njit(cache=True)
def topk_lemma(R, K, M, d_lo, closes):
    """Top-K lemma (:func:`numerics.trusted.topk_row`) for every row of R (float64,
    nonnegative): d_lo[i] ≤ δ(row i); closes[i]: M[i] is the lemma's witness."""
    n, L = R.shape
    q1 = np.empty(L)
    q2 = np.empty(L)
    for i in range(n):
        d_lo[i], closes[i] = trusted.topk_row(R[i], K, M[i], q1, q2)


@numba.njit(cache=True)
def _half_sums(v):
    """All 2^h signed sums Σ ±v_i (bit i of the mask set: +v_i), in increasing order, ties
    by lower mask (the order of a stable sort), with their masks.

    Built one atom at a time, each sum formed left to right as a_i = a_{i−1} ± v_i: the
    sorted sums over atoms 0..i−1 shifted by −v_i and by +v_i are two sorted lists, merged
    in one pass (on ties the −v_i list first: bit i is the highest so far, so its masks
    are the smaller).  O(h·2^h) additions and comparisons with no sort call.
    """
    n = 1 << v.shape[0]
    return _half_sums_into(v, np.empty(n), np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64))


@numba.njit(cache=True, inline="always")
def _half_sums_into(v, s, o, s2, o2):
    # _half_sums in the caller's scratch (each ≥ 2^h entries); returns views of two of them
    h = v.shape[0]
    s[0] = 0.0
    o[0] = 0
    m = 1
    for i in range(h):
        a = 0
        b = 0
        p = 0
        while a < m and b < m:
            lo_ = s[a] - v[i]
            hi_ = s[b] + v[i]
            if hi_ < lo_:
                s2[p] = hi_
                o2[p] = o[b] | (1 << i)
                b += 1
            else:
                s2[p] = lo_
                o2[p] = o[a]
                a += 1
            p += 1
        while a < m:
            s2[p] = s[a] - v[i]
            o2[p] = o[a]
            a += 1
            p += 1
        while b < m:
            s2[p] = s[b] + v[i]
            o2[p] = o[b] | (1 << i)
            b += 1
            p += 1
        m *= 2
        s, s2 = s2, s
        o, o2 = o2, o
    # rounding can make sums that were ordered equal, so each run of equal sums is put in
    # mask order at the end (insertion sort: runs are short except on degenerate rows)
    for p in range(1, m):
        q = p
        while q > 0 and s[q - 1] == s[q] and o[q - 1] > o[q]:
            o[q - 1], o[q] = o[q], o[q - 1]
            q -= 1
    return s[:m], o[:m]


@numba.njit(cache=True, inline="always")
def _class_max(x, mx, C):
    # mx[b] = the largest atom of x whose index is ≡ b (mod C), b < C ≤ len(x); where C is
    # a literal at the call (8, 16), the loop over b is one vector of C lanes
    L = x.shape[0]
    for b in range(C):
        mx[b] = x[b]
    j0 = C
    while j0 + C <= L:
        for b in range(C):
            v = x[j0 + b]
            mx[b] = v if v > mx[b] else mx[b]
        j0 += C
    for b in range(L - j0):
        v = x[j0 + b]
        mx[b] = v if v > mx[b] else mx[b]


@numba.njit(cache=True, inline="always")
def _kth_largest(mx, C, K):
    # the K-th largest of mx[:C] by rank, branch-free: mx[a]'s rank counts the values above
    # it and the equal ones before it, so exactly one has rank K − 1
    t = np.inf
    for a in range(C):
        v = mx[a]
        r = 0
        for b in range(C):
            w = mx[b]
            r += (w > v) | ((w == v) & (b < a))
        t = v if r == K - 1 else t
    return t


@numba.njit(cache=True)
def top_into(x, top, val, ci, mx):
    """top[:] = trusted.top_indices(x, K) for K = len(top) ≤ len(x): the same indices in the
    same order (tested against it), with no allocation; K ≤ len(x) is the caller's to
    ensure.  val: scratch of K entries, mx of max(K, 16), ci of len(x).  Only the atoms
    ≥ t can be among the K largest, where t is the K-th largest of the maxima of C ≥ K
    residue classes j mod C: those K maxima are K distinct atoms ≥ t, so the K-th largest
    value is ≥ t.  The atoms < t are dropped (in index order, branch-free) and the
    reference's insertion (trusted.top_of) runs over the rest (about 9 of 64 atoms for
    K = 6 on softmax rows of spread 5, against 13 with K classes): it keeps the same K atoms
    in the same order, as the dropped atoms are below all of them.  C is 8 for K ≤ 8 and
    16 for K ≤ 16 (a vector of lanes each), else K."""
    L = x.shape[0]
    K = top.shape[0]
    if K == 0:
        return
    if K <= 8 and L >= 8:              # C a literal here, so its rank loop unrolls (stage B
        _class_max(x, mx, 8)           # 0.95× the time at L = 64, spread 5; unrolled for
        t = _kth_largest(mx, 8, K)     # C = 16 it was 1.04–1.07× at L = 16)
    else:
        if K <= 16 and L >= 16:
            C = 16
            _class_max(x, mx, 16)
        else:
            C = K
            _class_max(x, mx, K)
        t = _kth_largest(mx, C, K)
    c = 0
    for j in range(L):
        ci[c] = j
        c += 1 if x[j] >= t else 0
    trusted.top_of(x, ci, c, top, val)   # top_indices' insertion over the candidates


@numba.njit(cache=True)
def _mitm_row(x, top, flips, mk):
    # the meet-in-the-middle split of the atoms top (trusted.top_indices(x, k) or a prefix
    # of a longer one: the same), the rest placed first by big_greedy_tail
    L = x.shape[0]
    H = mitm_scratch(L, top.shape[0])
    return _mitm_row_on(x, top, flips, mk, np.empty(H[0]), np.empty(H[1], np.int64))


@numba.njit(cache=True, inline="always")
def mitm_scratch(L, kk):
    # the float and int64 scratch sizes _mitm_row_on needs for rows of L atoms, kk top atoms
    H = 1 << ((kk + 1) // 2)
    return 3 * L + kk + 4 * H, 2 * L + 67 + 4 * H


@numba.njit(cache=True)
def _mitm_row_on(x, top, flips, mk, wf, wi):
    # _mitm_row in the caller's scratch wf (float64) and wi (int64), sized by mitm_scratch:
    # no allocation per row (a dozen small arrays a call cost as much as the search)
    L = x.shape[0]
    kk = top.shape[0]
    H = 1 << ((kk + 1) // 2)
    q1, qs, y, saved = wf[:L], wf[L:2 * L], wf[2 * L:3 * L], wf[3 * L:3 * L + kk]
    f0 = 3 * L + kk
    idx, order, cnt, mb = wi[:L], wi[L:2 * L], wi[2 * L:2 * L + 66], wi[2 * L + 66:2 * L + 67]
    i0 = 2 * L + 67
    for t in range(kk):            # place the rest first: hide the top atoms
        saved[t] = x[top[t]]
    for j in range(L):
        y[j] = x[j]
    for t in range(kk):
        y[top[t]] = 0.0
    mb[0] = trusted.max_bits(y.view(np.int64))
    m = mb.view(np.float64)[0]
    if m > 0.0:
        # the greedy's q₁ only steer the search (its mask is re-scored), so a plain
        # frexp splitter does here, subnormal maxima included
        _, e = math.frexp(m)
        s1 = math.ldexp(1.0, e + trusted.headroom_bits(L))
        for j in range(L):
            q1[j] = (s1 + y[j]) - s1
        D = big_greedy_tail(y, q1, m, 64, mk, idx, order, cnt, qs)
    else:
        D = 0.0
        for j in range(L):
            mk[j] = 0
    h = kk // 2
    A, ma = _half_sums_into(saved[:h], wf[f0:f0 + H], wi[i0:i0 + H], wf[f0 + H:f0 + 2 * H],
                            wi[i0 + H:i0 + 2 * H])
    B, mb = _half_sums_into(saved[h:], wf[f0 + 2 * H:f0 + 3 * H], wi[i0 + 2 * H:i0 + 3 * H],
                            wf[f0 + 3 * H:f0 + 4 * H], wi[i0 + 3 * H:i0 + 4 * H])
    # two-pointer scan for min |D + a + b|
    j = 0
    t = B.shape[0] - 1
    best = np.inf
    bj = 0
    bt = 0
    while j < A.shape[0] and t >= 0:
        v = D + A[j] + B[t]
        if abs(v) < best:
            best = abs(v)
            bj = j
            bt = t
        if v > 0.0:
            t -= 1
        elif v < 0.0:
            j += 1
        else:
            break
    for q in range(h):
        mk[top[q]] = 1 if (ma[bj] >> q) & 1 else 0
    for q in range(kk - h):
        mk[top[h + q]] = 1 if (mb[bt] >> q) & 1 else 0
    return flip_more(x, mk, D + A[bj] + B[bt], flips, 0.0)


@numba.njit(cache=True)
def _window_row(x, mk, o):
    # o: the row's stable argsort; its nonzero atoms are a suffix of it (x ≥ 0), in the
    # order of a stable sort of the nonzero atoms alone
    L = x.shape[0]
    for j in range(L):
        mk[j] = 0
    z = 0
    while z < L and not x[o[z]] > 0.0:
        z += 1
    m = L - z
    if m >= 2:
        k = (m + 1) // 2
        T = 0.0
        for j in range(m):
            T += x[o[z + j]]
        w = 0.0
        for j in range(k):
            w += x[o[z + j]]
        best = abs(2.0 * w - T)
        bj = 0
        for j in range(1, m - k + 1):
            w += x[o[z + j + k - 1]] - x[o[z + j - 1]]
            d = abs(2.0 * w - T)
            if d < best:
                best = d
                bj = j
            elif 2.0 * w > T:
                break                   # window sums only rise
        for j in range(bj, bj + k):
            mk[o[z + j]] = 1


@numba.njit(cache=True)
def _best_swap(x, mk, D, o, si, so):
    """Best exchange of one atom of S with one of S^c: min |D − 2x_i + 2x_j| (i ∈ S, j ∉ S),
    by one two-pointer scan over both sides in sorted order — read off the row's stable
    argsort o (the order a stable sort of either side alone would give), into si, so."""
    na = 0
    nb = 0
    for t in range(o.shape[0]):
        j = o[t]
        si[na] = j
        so[nb] = j
        na += 1 if mk[j] == 1 else 0
        nb += 1 if (mk[j] == 0) & (x[j] > 0.0) else 0
    if na == 0 or nb == 0:
        return D
    half = 0.5 * D
    p = 0
    q = 0
    best = abs(D)
    bi = -1
    bj = -1
    while p < na and q < nb:
        d = x[si[p]] - x[so[q]]          # increasing in p, decreasing in q
        v = abs(D - 2.0 * d)
        if v < best:
            best = v
            bi = si[p]
            bj = so[q]
        if d < half:
            p += 1
        else:
            q += 1
    if bi < 0:
        return D
    mk[bi] = 0
    mk[bj] = 1
    return D - 2.0 * (x[bi] - x[bj])


@numba.njit(cache=True)
def _improve_row(x, mk, rounds, stop_rel, o, si, so):
    # o: the row's stable argsort; si, so: scratch of L + 1 entries
    T = 0.0
    D = 0.0
    for j in range(x.shape[0]):
        T += x[j]
        D += x[j] if mk[j] else -x[j]
    for _ in range(rounds):
        if abs(D) <= stop_rel * T:
            break
        D0 = abs(D)
        D = _best_swap(x, mk, D, o, si, so)
        D = flip_more(x, mk, D, 1, stop_rel * T)
        if not abs(D) < D0:
            break
    return D


@numba.njit(cache=True)
def kk_row(x, out):
    L = x.shape[0]
    heap = [(-x[j], j) for j in range(L)]
    heapq.heapify(heap)
    partner = np.full(L, -1)
    merged = np.empty(L, dtype=np.int64)
    nm = 0
    while len(heap) > 1:
        a, i = heapq.heappop(heap)       # largest remaining
        b, j = heapq.heappop(heap)       # second largest: put opposite to i
        heapq.heappush(heap, (a - b, i))
        partner[j] = i
        merged[nm] = j
        nm += 1
    colour = np.zeros(L, dtype=np.bool_)
    for k in range(nm - 1, -1, -1):     # 2-colouring of the differencing tree, root first
        j = merged[k]
        colour[j] = not colour[partner[j]]
    out[:] = colour


@numba.njit(cache=True)
def _count_positive(x):
    """How many entries of x are > 0 (a fixed-count loop that vectorises)."""
    c = 0
    for j in range(x.shape[0]):
        c += 1 if x[j] > 0.0 else 0
    return c


@numba.njit(cache=True, fastmath={"nnan", "ninf", "nsz"})
def _sum_max(x):
    """(a float sum of x, max x) for x ≥ 0: four running sums (any order of a float sum of
    L nonnegative terms is within (L − 1)·u·T of T, all the caller assumes), a max."""
    L = x.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    m0 = m1 = m2 = m3 = 0.0
    j = 0
    while j + 4 <= L:
        s0 += x[j]
        s1 += x[j + 1]
        s2 += x[j + 2]
        s3 += x[j + 3]
        m0 = x[j] if x[j] > m0 else m0
        m1 = x[j + 1] if x[j + 1] > m1 else m1
        m2 = x[j + 2] if x[j + 2] > m2 else m2
        m3 = x[j + 3] if x[j + 3] > m3 else m3
        j += 4
    while j < L:
        s0 += x[j]
        m0 = x[j] if x[j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return (s0 + s1) + (s2 + s3), (m2 if m2 > m0 else m0)


@numba.njit(cache=True)
def _signed_total(x, mk):
    # D = Σ_S x − Σ_{S^c} x as a float, four running sums (order only moves D by roundings)
    L = x.shape[0]
    d0 = d1 = d2 = d3 = 0.0
    j = 0
    while j + 4 <= L:
        d0 += (2.0 * mk[j] - 1.0) * x[j]
        d1 += (2.0 * mk[j + 1] - 1.0) * x[j + 1]
        d2 += (2.0 * mk[j + 2] - 1.0) * x[j + 2]
        d3 += (2.0 * mk[j + 3] - 1.0) * x[j + 3]
        j += 4
    while j < L:
        d0 += (2.0 * mk[j] - 1.0) * x[j]
        j += 1
    return (d0 + d1) + (d2 + d3)


@numba.njit(cache=True)
def _quick_swap(x, mk, W, rounds, stop, ia, ib, b2):
    """Best exchange of one atom of S with one of S^c among the first W nonzero atoms of
    each side (index order), repeated up to ``rounds`` times while |D| > stop: no sort,
    at most W² candidate pairs, and the scan over S's atoms ends at the first whose best
    partner reaches |D| ≤ stop (with stop = 0: the best exchange).  On diffuse rows (all atoms comparable, where the fused
    pass's greedy leaves |D| about an atom's spread) the W² pair differences are dense
    enough that one exchange nearly always reaches |D| ≤ stop.  Plain float search (the
    mask is re-scored by the evaluator); returns the new D.  ia, ib: scratch of L + 1
    entries (the compaction writes past W), b2: of 2W."""
    return exchange(x, mk, W, rounds, stop, _signed_total(x, mk), ia, ib, b2)


SEARCHES = ("window", "swap", "mitm", "kk")     # pass 2's witness searches, in the order tried


@numba.njit(cache=True)
def _offer(x, mk, i, c, q1, q2, ev, lo, ghi, M):
    # keep the witness that proves the larger theta_lo (ties: the smaller gap_hi)
    ev[0], ev[1], ev[2], ev[3], ev[4] = trusted.score_row(x, mk, c, q1, q2)
    if ev[0] > lo[i] or (ev[0] == lo[i] and ev[3] < ghi[i]):
        lo[i] = ev[0]
        ghi[i] = ev[3]
        for j in range(x.shape[0]):
            M[i, j] = mk[j]


@numba.njit(cache=True, inline="always")
def _topk_step(x, top, i, c, mk, q1, q2, ev, lo, hi, glo, ghi, M, lw):
    # the top-K lemma on row i with the K = len(top) atoms top (a prefix of the row's
    # trusted.top_indices: the atoms verify replays), in the span's scratch lw: its bound
    # lowers hi[i] and raises glo[i]; its witness, when it closes the row, is offered
    # (re-scored)
    d, closes = trusted.topk_row_in(x, top, mk, q1, q2, lw)
    th, g = trusted.hi_from_delta_lo(d)
    hi[i] = min(hi[i], th)
    glo[i] = max(glo[i], g)
    if closes:
        _offer(x, mk, i, c, q1, q2, ev, lo, ghi, M)


@numba.njit(cache=True)
def _stage_b_quick_span(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M,
                        a, b):
    # pass 1 on rows a..b−1: the top-K lemma on the TOPK_FIRST largest atoms, the
    # sort-free quick exchange on the current witness (most diffuse rows close here), the
    # meet-in-the-middle split of the top atoms (what closes peaked rows of θ ≈ 1), then
    # the lemma on all K atoms; all without the sort pass 2 needs
    L = R.shape[1]
    _stage_b_quick_rows(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M,
                        a, b, np.empty(L), np.empty(L), np.empty(6), np.empty(L, np.uint8),
                        np.empty(L + 1, np.int64), np.empty(L + 1, np.int64), np.empty(2 * quick_w),
                        np.empty(mitm_scratch(L, mitm_k)[0]), np.empty(mitm_scratch(L, mitm_k)[1], np.int64),
                        np.empty(L, np.int64), np.empty(L), np.empty(L),
                        np.empty(trusted.topk_scratch(min(max(K, mitm_k), L))))


@numba.njit(cache=True)
def _stage_b_quick_rows(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M,
                        a, b, q1, q2, ev, mk, ia, ib, b2, wf, wi, ti, tv, tm, lw):
    # the loop of _stage_b_quick_span on borrowed views of its arguments (the span holds
    # them; numerics.borrowed): no atomic reference counts per row (18 % of pass 1 at
    # L = 64 before), and no allocation per row either: the top atoms (top_into: ti, tv,
    # tm), the split (_mitm_row_on: wf, wi) and the lemma's signed sums (lw) work in the
    # span's scratch
    R, lo, hi, glo, ghi, M, q1, q2, ev, mk, ia, ib, b2, wf, wi, ti, tv, tm, lw = (
        borrow(R), borrow(lo), borrow(hi), borrow(glo), borrow(ghi), borrow(M), borrow(q1), borrow(q2),
        borrow(ev), borrow(mk), borrow(ia), borrow(ib), borrow(b2), borrow(wf), borrow(wi), borrow(ti),
        borrow(tv), borrow(tm), borrow(lw))
    L = R.shape[1]
    c = trusted.headroom_bits(L)
    margin = 1.0 + 4.0 * L * 2.0 ** -53
    kt = min(max(K, mitm_k), L)
    k6 = min(K, TOPK_FIRST, L)
    top = ti[:kt]                  # the row's kt largest atoms (top_into)
    for i in range(a, b):
        x = R[i]
        # the top-K lemma gives nothing when the tail outweighs the largest atom, which
        # T ≥ (K + 1)·max implies (the K top atoms weigh at most K·max); the float sum is
        # within (L − 1)·u of T, so the margin makes this skip only what trusted.topk_row
        # would return (0, no witness) for: diffuse rows, where the lemma costs ~1.4 µs
        Tf, mx = _sum_max(x)
        lemma = not Tf >= (K + 1) * mx * margin
        if lemma:
            # first with the TOPK_FIRST largest atoms (≈ 3× cheaper than all K; most peaked
            # rows close there); the rest get all K only after the searches below, which
            # close most of them (θ ≈ 1) on the lower side
            top_into(x, top[:k6], tv, ia, tm)
            _topk_step(x, top[:k6], i, c, mk, q1, q2, ev, lo, hi, glo, ghi, M, lw)
            if K > k6 and not trusted.within(lo[i], hi[i], thr):
                # a row of at most K nonzero atoms (a short row, or a causally masked one)
                # takes all of them next: with no tail the lemma is exact, so it closes the
                # row with an optimal witness, for 2^(nz−1) sign patterns, where the
                # searches below and the lemma on all K (its value, with zeros among the
                # K) came to the same bound later
                nz = _count_positive(x)
                if k6 < nz <= K:           # at most k6: the lemma above had them all
                    top_into(x, top[:nz], tv, ia, tm)
                    _topk_step(x, top[:nz], i, c, mk, q1, q2, ev, lo, hi, glo, ghi, M, lw)
        if quick_rounds > 0 and not trusted.within(lo[i], hi[i], thr):
            for j in range(L):
                mk[j] = M[i, j]
            _quick_swap(x, mk, quick_w, quick_rounds, quick_stop * Tf, ia, ib, b2)
            _offer(x, mk, i, c, q1, q2, ev, lo, ghi, M)
        if trusted.within(lo[i], hi[i], thr):
            continue
        # the row's kt largest atoms, sorted once for the split's mitm_k and the lemma's K
        # (prefixes of them are the top_indices of each)
        top_into(x, top, tv, ia, tm)
        if mitm_k > 0:
            _mitm_row_on(x, top[:mitm_k], mitm_flips, mk, wf, wi)
            _offer(x, mk, i, c, q1, q2, ev, lo, ghi, M)
        if lemma and K > TOPK_FIRST and not trusted.within(lo[i], hi[i], thr):
            # each d bounds δ below (a larger K only raises it): hi and glo keep the best
            _topk_step(x, top[:K], i, c, mk, q1, q2, ev, lo, hi, glo, ghi, M, lw)


@numba.njit(cache=True)
def _stage_b_span(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M, a, b):
    # pass 2 on rows idx[a..b−1] (O[t]: the stable argsort of row idx[t]), own scratch
    L = R.shape[1]
    _stage_b_rows_span(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M, a, b,
                       np.empty(L), np.empty(L), np.empty(6), np.empty(L, np.uint8), np.empty(L, np.bool_),
                       np.empty(L + 1, np.int64), np.empty(L + 1, np.int64))


@numba.njit(cache=True)
def _stage_b_rows_span(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M, a, b,
                       q1, q2, ev, mk, colour, si, so):
    # the loop of _stage_b_span on borrowed views (as in _stage_b_quick_rows)
    R, O, idx, lo, hi, glo, ghi, M, q1, q2, ev, mk, colour, si, so = (
        borrow(R), borrow(O), borrow(idx), borrow(lo), borrow(hi), borrow(glo), borrow(ghi), borrow(M),
        borrow(q1), borrow(q2), borrow(ev), borrow(mk), borrow(colour), borrow(si), borrow(so))
    L = R.shape[1]
    c = trusted.headroom_bits(L)
    for t in range(a, b):
        i = idx[t]
        x = R[i]
        o = O[t]                       # the row's stable argsort
        for step in range(len(SEARCHES)):
            if trusted.within(lo[i], hi[i], thr):
                break
            if step == 0:
                _window_row(x, mk, o)
            elif step == 1:
                for j in range(L):
                    mk[j] = M[i, j]
                _improve_row(x, mk, swap_rounds, swap_stop, o, si, so)
            elif step == 2:
                _mitm_row(x, trusted.top_indices(x, min(mitm_k, L)), mitm_flips, mk)
            else:
                kk_row(x, colour)
                for j in range(L):
                    mk[j] = 1 if colour[j] else 0
            _offer(x, mk, i, c, q1, q2, ev, lo, ghi, M)


# serial and threaded drivers defined separately (numba's disk cache is keyed by name and
# line: see numerics.theta_fused)
@numba.njit(cache=True)
def _stage_b_quick_ser(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M):
    _stage_b_quick_span(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M,
                        0, R.shape[0])


@numba.njit(cache=True, parallel=True)
def _stage_b_quick_par(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M):
    n = R.shape[0]
    for t in numba.prange((n + 7) // 8):
        _stage_b_quick_span(R, K, quick_w, quick_rounds, quick_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi,
                            M, 8 * t, min(n, 8 * t + 8))


@numba.njit(cache=True)
def _stage_b_ser(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M):
    _stage_b_span(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M, 0,
                  idx.shape[0])


@numba.njit(cache=True, parallel=True)
def _stage_b_par(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M):
    n = idx.shape[0]
    for t in numba.prange((n + 3) // 4):        # 4 rows per task: their costs vary a lot
        _stage_b_span(R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M,
                      4 * t, min(n, 4 * t + 4))


TOPK_FIRST = 6          # the top-K lemma is tried with this many atoms before all K
QUICK_W = 32            # atoms per side the quick exchange pairs (≤ QUICK_W² pairs a round)
QUICK_MITM_K = 12       # pass 1's meet-in-the-middle split: at most this many top atoms
QUICK_FLIPS = 2         # and its best single flips after the split
QUICK_ROUNDS = 2        # quick exchange rounds


def stage_b_rows(R, K, swap_rounds, swap_stop, mitm_k, mitm_flips, tol, lo, hi, glo, ghi, M,
                 parallel=False, quick_w=QUICK_W, quick_rounds=QUICK_ROUNDS, quick_flips=QUICK_FLIPS):
    """Stage B of the certify pipeline for rows R (float64, max ≥ 2^−900), in place.

    lo, hi, glo, ghi (the rows' bounds so far) and M (uint8, their witnesses) are updated
    row by row.  Pass 1, every row: the top-K lemma on the TOPK_FIRST largest atoms
    (:func:`numerics.trusted.topk_row`: an upper bound, and its witness when it closes),
    then, while hi − lo > tol (:func:`numerics.trusted.within` with
    :func:`numerics.trusted.close_threshold`), the sort-free quick exchange on the current
    witness (:func:`_quick_swap`: quick_w atoms a side, quick_rounds rounds, 0 skips it,
    stopping at |D| ≤ ½·√tol·T), :func:`_mitm_row` on at most QUICK_MITM_K top atoms with
    quick_flips flips (on peaked rows of θ ≈ 1 it is the search that closes, and it needs
    no sort; its 2 × 2^6 half sums cost a sixteenth of pass 2's 2 × 2^8), and last the
    lemma on all K atoms, 2^(K−1) sign patterns a row (tried after the searches: on
    softmax rows of spread 5 at L = 64 the searches close 24 % of the rows that reach
    stage B, the K-atom lemma 3 %).  Pass 2, the rows still open, each sorted once: the
    searches of SEARCHES in order — the count window, exchanges and flips on the current
    witness (:func:`_improve_row`, swap_rounds rounds, stopping at |D| ≤ swap_stop·T),
    :func:`_mitm_row` (mitm_k atoms, mitm_flips flips), Karmarkar–Karp — each mask
    re-scored by :func:`numerics.trusted.score_row` and kept when it proves a larger
    theta_lo (so a pass never loses a bound).
    Compiled loops instead of a batch call per search: the few rows that reach stage B
    cost microseconds each, and a Python round per search cost more than the searches.
    Rows are independent, so ``parallel`` (the caller's choice: certificates/threads.py)
    runs them on numba's threads with the same results.
    """
    thr = trusted.close_threshold(tol)
    # pass 1 stops where the witness alone closes the row with room to spare: |D| ≤
    # ½·√tol·T gives 1 − θ_S ≤ tol/4 (the fused pass's stop)
    quick_stop = 0.5 * math.sqrt(max(tol, 0.0))
    (_stage_b_quick_par if parallel else _stage_b_quick_ser)(
        R, K, max(int(quick_w), 1), int(quick_rounds), quick_stop, min(int(mitm_k), QUICK_MITM_K),
        int(quick_flips), thr, lo, hi, glo, ghi, M)
    idx = np.flatnonzero(~trusted.closed(lo, hi, tol)).astype(np.int64)
    if not idx.size:
        return
    O = stable_argsort_rows(R[idx])
    (_stage_b_par if parallel else _stage_b_ser)(
        R, O, idx, swap_rounds, swap_stop, mitm_k, mitm_flips, thr, lo, hi, glo, ghi, M)


def stable_argsort_rows(R):
    """Each row's stable argsort (ascending, ties by index), as NumPy's
    ``argsort(kind="stable")`` gives it, but ~6× faster on short rows: NumPy's SIMD
    quicksort (≈ 0.4 µs for 64 doubles, against ≈ 2.2 µs stable and ≈ 2.5 µs for numba's
    own sort), then every run of equal values put in index order.  (value, index) is a
    total order, so the result does not depend on how the quicksort broke ties."""
    O = np.argsort(R, axis=1, kind="quicksort")
    _ties_by_index(R, O)
    return O


@numba.njit(cache=True)
def _ties_by_index(R, O):
    # each run of equal values (contiguous: the order is sorted) sorted by index; long runs
    # (uniform rows) by a sort, not by insertion, which would be quadratic
    for i in range(R.shape[0]):
        x = R[i]
        o = O[i]
        L = o.shape[0]
        p = 0
        while p < L:
            q = p + 1
            while q < L and x[o[q]] == x[o[p]]:
                q += 1
            if q - p > 16:
                o[p:q] = np.sort(o[p:q])
            else:
                for t in range(p + 1, q):
                    u = t
                    while u > p and o[u - 1] > o[u]:
                        o[u - 1], o[u] = o[u], o[u - 1]
                        u -= 1
            p = q
