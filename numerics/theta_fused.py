"""Stage A of the certify pipeline: one fused numba pass per row (C4, C5, C7).

Per row, the trusted steps (:mod:`numerics.trusted`, each citing the invariants of
docs/soundness.md): the max, the exact extraction parts and totals, the dominant-atom test
and the singleton witness, the exact parts of the witness, its outward-rounded value and
the closed/open state.  Between them one call of the untrusted search :func:`_search`,
which only writes the witness mask of a non-dominant row: greedy on the big atoms (≥ max·2^−4, or only the max's ties on a diffuse row, one with more
than max(L/8, 16) of those: ``diffuse_cut``) in exponent order; the index-order
prefix of small atoms whose exact doubled q₁ sum crosses what the lighter side lacks (C5:
D then changes sign at one crossing atom k); then *first fit* on both sides of k — from
D ≤ 0 (k left out) a later small atom joins S when D stays ≤ 0, and, if that does not
reach |D| ≤ stop, from D ≥ 0 (k taken) an earlier one leaves S when D stays ≥ 0, each over
at most FF_WIN atoms and stopping as soon as |D| ≤ stop (the row then closes); the
smaller |D| wins; then up to ``flips`` best single flips (rarely reached).  On softmax rows
this leaves about 0.3 % of the non-dominant rows to stage B (greedy + crossing + flips
alone: 1.5–3 %).  The loops index R[i, j] directly; the few scratch arrays are allocated
once per span of rows.

Laid out for a CPU's branch predictor more than for its arithmetic (most of the cost on
short rows is loop exits after row-dependent counts): the big atoms are bit masks and a
counting sort over their set bits, the witness is built as bit words and written to the
byte mask once, the crossing block is scanned with a fixed count (on rows of at most
PREFIX_MAX atoms the crossing is a count over prefix sums made before the greedy, so that
nothing of it but one vectorised compare waits on the greedy's D), and the outward rounding
runs for RB rows at a time in one vectorised loop.

The decisions use elementwise IEEE operations in a fixed order and exact q₁ sums, and the
torch twin (:mod:`numerics.theta_torch`) makes the same ones: every certificate is
bit-identical across backends, thread counts and row orders (each row on its own).
"""
from __future__ import annotations

import sys

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from numerics import trusted
from numerics.borrowed import borrow
from numerics.theta_kernels import (BIG_BITS, BLOCK, crossing_in_prefix, exchange_window, prefix_crossing,
                                    prefix_sums)

FF_WIN = 64             # atoms tried by first fit on each side of the crossing (≤ 64: a word)
RB = 64                 # rows whose outward rounding runs as one vectorised loop
DIFFUSE_DEN = 8         # a row with more than max(L/DIFFUSE_DEN, DIFFUSE_MIN) atoms
DIFFUSE_MIN = 16        # ≥ max·2^−bits is diffuse (diffuse_cut):
DIFFUSE_BITS = 0        # its big atoms are those ≥ max·2^−DIFFUSE_BITS (the max's ties only)
EX_SPAN = 64            # the exchange pass pairs atoms among EX_SPAN around the crossing
EX_ROUNDS = 2           # exchange rounds after first fit, while |D| > stop
GUESS = 0.375           # _search counts the big atoms before it marks them when the row's
                        # total is > GUESS·diffuse_cut(L)·max (likely diffuse: 88–98 % of the
                        # diffuse softmax rows of spread 1.0 at L = 64…1024, ≤ 2 % of the others)
PREFIX_MAX = 64         # rows up to this long take the prefix crossing from prefix sums made early
_SPREAD = np.array([sum(((b >> t) & 1) << (8 * t) for t in range(8)) for b in range(256)], np.uint64)  # _expand
LITTLE_ENDIAN = sys.byteorder == "little"   # _expand stores eight mask bytes as one word


@numba.njit(cache=True, inline="always")
def diffuse_cut(L):
    """A row of length L is diffuse when more than this many atoms are ≥ max·2^−bits:
    max(⌊L/DIFFUSE_DEN⌋, DIFFUSE_MIN).  On long rows the greedy is the costly part (about
    7 ns an atom against 0.5 for the rest of the search), and the prefix crossing over many
    small atoms with the exchange after it closes them without it; short rows keep it."""
    return max(L // DIFFUSE_DEN, DIFFUSE_MIN)


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


@numba.njit(cache=True, inline="always")
def _expand(Sw, m):
    # the witness as bits (one word per 64 atoms) to the uint8 mask m, eight atoms a step:
    # _SPREAD[x] is the byte of bits x spread over eight bytes (bit t to byte t, 0 or 1),
    # stored as one word (little-endian: byte t is atom 8g + t).  A table read: stage A
    # takes 0.96–0.97× the time it took with a multiply-and-mask spread at L = 256…4096
    # (A/B).  Fixed counts, no branches: byte stores scattered over the search would
    # stall its final sum
    L = m.shape[0]
    nfull = (L >> 3) if LITTLE_ENDIAN else 0    # (elsewhere the plain loop below does all)
    mw = m[:nfull << 3].view(np.uint64)
    for g in range(nfull):
        x = (Sw[g >> 3] >> np.uint64((g & 7) << 3)) & np.uint64(0xFF)
        mw[g] = _SPREAD[x]
    for j in range(nfull << 3, L):
        m[j] = np.uint8((Sw[j >> 6] >> np.uint64(j & 63)) & np.uint64(1))


@numba.njit(cache=True, inline="always")
def _mark(R, i, tau, Wb, q1, qs):
    # the atoms x ≥ tau of row i as bit words Wb and, in the same pass, qs = q₁ of the
    # other (small) atoms, 0 for those; returns their count
    L = R.shape[1]
    nbig = 0
    for w in range((L + 63) >> 6):
        j0 = w * 64
        xs = R[i, j0:min(L, j0 + 64)]
        qw = q1[j0:j0 + xs.shape[0]]
        sw = qs[j0:j0 + xs.shape[0]]
        wb = np.uint64(0)
        c = 0
        for t in range(xs.shape[0]):
            q = qw[t]                  # read unconditionally: a select, not a masked load
            big = xs[t] >= tau
            sw[t] = 0.0 if big else q
            wb |= np.uint64(big) << np.uint64(t)
            c += np.int64(big)
        Wb[w] = wb
        nbig += c
    return nbig


@numba.njit(cache=True, inline="always")
def _count_at_least(R, i, tau):
    # how many atoms of row i are ≥ tau
    c = 0
    for j in range(R.shape[1]):
        c += np.int64(R[i, j] >= tau)
    return c


@numba.njit(cache=True, error_model="numpy", inline="always")
def _search(R, Rb, i, mb, m, T1, q1, stop_rel, flips, bits, M, qs, jt, bj, rib, cnt, order, Sw, Wb, p2x):
    """Untrusted: a witness mask for non-dominant row i, written to M[i] (nothing else).
    q1 are the row's exact q₁ parts (read only); the rest is scratch.  Inlined into _rows
    (a call per row cost ~10 % at L = 64)."""
    L = R.shape[1]
    nwd = (L + 63) >> 6                # 64-atom words per row
    ones = np.uint64(0xFFFFFFFFFFFFFFFF)
    tau = m * trusted.POW2[1074 - bits]   # 2^−bits·max, exact (a table read, not a pow())
    # the big atoms of each 64-atom word as a bit mask Wb (a vectorised compare) and qs,
    # q₁ of the small atoms (0 for the big ones).  A diffuse row (more than diffuse_cut(L)
    # big atoms) would make the greedy a serial chain over many atoms: there only the
    # atoms at the max are big (the rest goes to the prefix crossing and the exchange), a
    # far cheaper witness
    # A row whose total is many times its max is likely diffuse: its big atoms are
    # counted first (a compare and an add a lane), so that it is marked once, with the
    # threshold the count picks, rather than twice.  The same marks either way; only the
    # work differs (a diffuse row marked twice spent about 400 of its 3000 instructions
    # there, at L = 64)
    diffuse = False
    if T1 > GUESS * diffuse_cut(L) * m:
        diffuse = _count_at_least(R, i, tau) > diffuse_cut(L)
        if diffuse:
            bits = DIFFUSE_BITS
            tau = m * trusted.POW2[1074 - bits]
    nbig = _mark(R, i, tau, Wb, q1, qs)
    if not diffuse and nbig > diffuse_cut(L):
        diffuse = True
        bits = DIFFUSE_BITS
        tau = m * trusted.POW2[1074 - bits]
        nbig = _mark(R, i, tau, Wb, q1, qs)
    # the witness S is built as bits Sw (one word per 64 atoms), written to M once
    for w in range(nwd):
        Sw[w] = 0
    # greedy on the big atoms in (exponent, index) order; the max is big, so the
    # largest big exponent is the max's.  Walking the set bits of Wb gives each big
    # atom's exponent step below the max (the last step also holds the lower
    # ones) and its rank within its step; then a stable counting sort, and the
    # greedy: three loops of one trip count each (the trip counts are what the
    # branch predictor cannot know).  The scratch indices are unsigned: numba wraps a
    # negative signed index (a sign test and an add on every access), and these are never
    # negative (2–3 % of stage A at L = 64, spread 2.5, measured A/B): nb and t count up
    # from 0, and the step b ≥ 0, as a big atom is ≤ the max and nonnegative floats order
    # like their bits (I1), so its exponent field is at most the max's
    em = mb >> 52
    for b in range(bits + 1):
        cnt[b] = 0
    # The set bits are walked in one loop of nbig trips: on rows of more than one word, the
    # nonzero words are first listed (their bits, then their numbers, each list ending in a
    # zero word, in order's free space: it is written only after the walk, and it has
    # L + 4 ≥ 2·nwd + 2 entries), and a word that runs out is replaced by the next listed
    # one through selects, not a loop exit per word
    nb = nbig
    zw = order[:nwd + 1]
    zn = order[nwd + 1:2 * nwd + 2]
    zw[0] = Wb[0]
    zn[0] = 0
    zw[1] = 0
    zn[1] = 0
    if nwd > 1:
        c = 0
        for w in range(nwd):
            x = Wb[w]
            zw[np.uint64(c)] = x
            zn[np.uint64(c)] = w
            c += np.int64(x != 0)
        zw[np.uint64(c)] = 0
        zn[np.uint64(c)] = 0
    c = np.uint64(0)
    wb = zw[0]
    j0 = zn[0] << np.uint64(6)
    for t in range(nb):
        u = np.uint64(t)
        j = j0 + trailing_zeros(wb)
        wb &= wb - np.uint64(1)
        e = wb == 0
        c += np.uint64(e)
        nx = zw[c]
        nj = zn[c] << np.uint64(6)
        wb = nx if e else wb
        j0 = nj if e else j0
        b = em - (Rb[i, j] >> 52)
        b = np.uint64(b if b < bits else bits)
        jt[u] = j
        bj[u] = b
        cb = cnt[b]
        rib[u] = cb
        cnt[b] = cb + 1
    cb = 0
    for b in range(bits + 1):  # counts to starting places
        cn = cnt[b]
        cnt[b] = cb
        cb += cn
    for t in range(nb):
        u = np.uint64(t)
        order[np.uint64(cnt[bj[u]] + rib[u])] = jt[u]
    # On short rows the small atoms' prefix sums are made here (in rib's place, free from
    # now on), before the greedy: they depend on nothing but the mark, so they are computed
    # while the greedy's chain runs, and the crossing, once the greedy's D is known, is a
    # count over them: no chain of additions and no exit left to wait on D (4–9 % of stage
    # A at L = 64, spreads 0.3–2.5, measured A/B; at L ≥ 128 the full sums cost more than
    # the early exit saves)
    pre = rib.view(np.float64)
    if L <= PREFIX_MAX:
        prefix_sums(qs, L, pre)
    # The serial chains (this greedy, first fit both ways) keep each step's D in p2x and
    # set the witness bits in a second pass from those: a choice used both as a float
    # select and as an integer bit went through a flag register and back to a mask on
    # every step of the chain (10–16 % of stage A at L = 64…1024, spread 2.5, measured
    # A/B); the bits are the same tests on the same values, so the same witness
    D = 0.0
    ts = T1                # t_s = T₁ − Σ_big q₁: exact (every partial q₁ sum is)
    for t in range(nb):
        j = order[t]
        p2x[t] = D
        D = D + R[i, j] if D <= 0.0 else D - R[i, j]
        ts -= q1[j]
    for t in range(nb):
        j = order[t]
        Sw[j >> np.uint64(6)] |= np.uint64(p2x[t] <= 0.0) << (j & np.uint64(63))
    # small atoms: the index-order prefix whose doubled q₁ sum crosses t_s − D
    # joins S
    target = ts - D
    if L <= PREFIX_MAX:
        k, cs, before = crossing_in_prefix(pre, L, target)
    else:
        k, cs, before = prefix_crossing(qs, L, target)
    d_with = D + (2.0 * cs - ts)
    d_wo = D + (2.0 * before - ts)
    for w in range(nwd):   # the small atoms before the crossing atom join S
        nbit = min(max(k - 64 * w, 0), 64)
        below = ones if nbit == 64 else (np.uint64(1) << np.uint64(nbit)) - np.uint64(1)
        Sw[w] |= below & ~Wb[w]
    # first fit after the crossing atom: D = d_wo ≤ 0; a small atom joins S when
    # that keeps D ≤ 0, until |D| ≤ stop (then the row closes, no flips needed).
    # The choices go to a 64-bit word (FF_WIN ≤ 64) after the loop.  The test
    # fl(D + 2x) ≤ 0 is made as 2x ≤ −D, off the addition's latency: the same
    # answer, as rounding is monotone, 0 is a float and a nonzero exact sum of two
    # floats never rounds to 0; a step of +inf for the big atoms makes it fail there
    # (and likewise fl(D − 2x) ≥ 0 ⇔ D ≥ 2x going back)
    stop = stop_rel * T1
    hj = k + 1 if diffuse else (k + 1 + FF_WIN if k + 1 + FF_WIN < L else L)
    # on the deficit E = −D: fl(E − p) = −fl(D + p) exactly (round to nearest is
    # symmetric), so E − p if p ≤ E is the same step with no negation on the chain.  The
    # one difference is the sign of an exact zero (E − E = +0, so D = −0 where D + p gave
    # +0); a zero D has |D| ≤ stop, so the row closes and only |D| is read after it
    E = -d_wo
    nf = np.uint64(0)
    for j in range(np.uint64(k + 1), np.uint64(hj)):
        if abs(E) <= stop:
            break
        v = R[i, j]
        p = 2.0 * v if v < tau else np.inf     # first fit's step; +inf: a big atom
        p2x[nf] = E
        E = E - p if p <= E else E
        nf += np.uint64(1)
    D = -E
    fw = np.uint64(0)
    for t in range(nf):
        v = R[i, np.uint64(k + 1) + t]
        p = 2.0 * v if v < tau else np.inf
        fw |= np.uint64(p <= p2x[t]) << t
    # the mirror image when the forward pass did not close: from d_with ≥ 0 (the
    # crossing atom in S) a prefix atom leaves S when that keeps D ≥ 0, going back
    Db = d_with
    bw = np.uint64(0)
    nw = 0
    if k < L and abs(D) > stop and not diffuse:
        nmax = k if k < FF_WIN else FF_WIN
        for t in range(nmax):          # atom k − 1 − t; go bits rebuilt below, as forward
            if abs(Db) <= stop:
                break
            v = R[i, k - 1 - t]
            p = 2.0 * v if v < tau else np.inf
            p2x[t] = Db
            Db = Db - p if Db >= p else Db
            nw += 1
        for t in range(nw):
            v = R[i, k - 1 - t]
            p = 2.0 * v if v < tau else np.inf
            bw |= np.uint64(p2x[t] >= p) << np.uint64(t)
    if k < L and abs(Db) <= abs(D):     # the crossing atom's side does better
        if R[i, k] < tau:
            Sw[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
        while bw != 0:             # the leavers (bit t: atom k − 1 − t) leave
            jl = k - 1 - np.int64(trailing_zeros(bw))
            bw &= bw - np.uint64(1)
            Sw[jl >> 6] &= ~(np.uint64(1) << np.uint64(jl & 63))
        D = Db
    elif fw != 0:                  # the joiners (bit t: atom k + 1 + t) join
        w0 = (k + 1) >> 6
        off = np.uint64((k + 1) & 63)
        Sw[w0] |= fw << off
        if off != 0 and w0 + 1 < nwd:
            Sw[w0 + 1] |= fw >> (np.uint64(64) - off)
    _expand(Sw, M[i])
    # the best exchange of an atom of S with one of S^c among EX_SPAN consecutive atoms
    # around the crossing (S's prefix ends there: what closes diffuse rows, where first
    # fit finds no atom small enough), then best single flips, both on M; p2x and qs are
    # free scratch by now.  Both only when first fit left |D| > stop: the guard, though
    # the exchange itself returns at once then, is 6–12 % of stage A at L = 64…256
    # (measured A/B; the inlined code off the common path)
    if abs(D) > stop:
        j0 = min(max(k - (EX_SPAN >> 1), 0), max(L - EX_SPAN, 0))
        D = exchange_window(R[i], M[i], j0, EX_SPAN, EX_ROUNDS, stop, D, p2x, qs)
        for _ in range(flips):
            if abs(D) <= stop:
                break
            v, j = _best_flip(R, M, i, D)
            if j < 0 or not v < abs(D):
                break
            D = D - (4.0 * M[i, j] - 2.0) * R[i, j]
            M[i, j] = 1 - M[i, j]


@numba.njit(cache=True, error_model="numpy", _nrt=False)
def _rows(R, force, flips, stop_rel, thr, bits, M, cols, state, lo, hi, q1, q2, qs, bi, P, Q, jt, bj, rib,
          cnt, order, Sw, Wb, p2x):
    # The trusted lines of stage A (numerics.trusted, docs/soundness.md) and one call of
    # the untrusted search; each row on its own.  No reference counting in this loop: it
    # is compiled without numba's runtime (_nrt=False: it allocates nothing) and works on
    # borrowed views of its arguments (numerics.borrowed; the caller, _span, holds them),
    # so the views made per row (R[i], slices) cost no atomic operations (17 % of stage A
    # at L = 64 before; the same loads and stores, so the same results)
    b = borrow
    R, force, M, cols, state, q1, q2, qs, bi, P, Q, jt, bj, rib, cnt, order, Sw, Wb, p2x = (
        b(R), b(force), b(M), b(cols), b(state), b(q1), b(q2), b(qs), b(bi), b(P), b(Q), b(jt), b(bj),
        b(rib), b(cnt), b(order), b(Sw), b(Wb), b(p2x))
    n, L = R.shape
    c = trusted.headroom_bits(L)
    Rb = R.view(np.int64)
    bf = bi.view(np.float64)
    for blo in range(lo, hi, RB):
        bhi = min(hi, blo + RB)
        for i in range(blo, bhi):
            r = i - blo
            mb = trusted.max_bits(Rb[i])                      # I1
            bi[0] = mb
            m = bf[0]
            s1, s2, sc = trusted.splitters(mb >> 52, c)       # I2, I6
            trusted.extract(R[i], s1, s2, q1, q2)             # I2
            T1, T2 = trusted.exact_sum2(q1, q2)               # I3
            y, slack = trusted.dominance_terms(m, T1, T2, s2, L)   # I4
            if force[i] >= 0:                                 # the caller's exact decision
                dom = force[i] == 1
                unsure = False
            else:
                dom = y > slack
                unsure = (not dom) and y >= -slack
            if dom:
                a = trusted.first_index_of_max(Rb[i], mb)     # I5
                for j in range(L):
                    M[i, j] = 0
                M[i, a] = 1
                A1 = q1[a]
                A2 = q2[a]
            else:
                _search(R, Rb, i, mb, m, T1, q1, stop_rel, flips, bits, M, qs, jt, bj, rib, cnt,
                        order, Sw, Wb, p2x)
                A1, A2 = trusted.masked_sum2(q1, q2, M[i])    # I3
            P[0, r] = A1               # the exact parts, rounded below for RB rows at once
            P[1, r] = A2
            P[2, r] = T1
            P[3, r] = T2
            P[4, r] = s2
            P[5, r] = sc
            P[6, r] = m
            state[i] = 3 if m < trusted.TINY else (4 if unsure else (0 if dom else 5))
        # the outward rounding (C7) of RB rows: one loop of straight-line code that
        # vectorises across rows (one row's chain of dependent roundings would stall)
        nr = bhi - blo
        for r in range(nr):
            Q[0, r], Q[1, r], Q[2, r], Q[3, r] = trusted.outward_bounds(P[0, r], P[1, r], P[2, r], P[3, r],
                                                                        P[4, r], L, P[5, r])   # I6, I7
        for r in range(nr):
            i = blo + r
            tot = P[2, r] + P[3, r]    # the row total to ~1 ulp (descriptive row_sum)
            cols[4, i] = tot
            cols[5, i] = P[6, r] / tot
            cols[0, i] = Q[0, r]
            cols[3, i] = Q[3, r]
            st = state[i]
            if st == 5:                # I5: a non-optimal split's θ_hi, gap_lo bound nothing
                cols[1, i] = 1.0
                cols[2, i] = 0.0
                state[i] = 1 if trusted.within(Q[0, r], 1.0, thr) else 2    # I9
            else:
                cols[1, i] = Q[1, r]
                cols[2, i] = Q[2, r]


@numba.njit(cache=True)
def _span(R, force, flips, stop_rel, thr, M, cols, state, bits, lo, hi):
    # rows lo..hi−1 with their own scratch (allocated once per span, not per row)
    L = R.shape[1]
    nwd = (L + 63) >> 6
    u64 = np.uint64
    _rows(R, force, flips, stop_rel, thr, bits, M, cols, state, lo, hi, np.empty(L), np.empty(L),
          np.empty(L), np.empty(1, np.int64), np.empty((7, RB)), np.empty((4, RB)), np.empty(L, u64),
          np.empty(L, u64), np.empty(L, np.int64), np.empty(bits + 1, np.int64), np.empty(L + 4, u64),
          np.empty(nwd, u64), np.empty(nwd, u64), np.empty(L))


# Two separately defined dispatchers: numba's on-disk cache is keyed by the function's name
# and line, so one Python function compiled twice (serial and parallel) would share, and
# overwrite, one cache entry — the serial form then loaded the threaded code.
@numba.njit(cache=True)
def _stage_a_ser(R, force, flips, stop_rel, thr, M, cols, state, bits):
    _span(R, force, flips, stop_rel, thr, M, cols, state, bits, 0, R.shape[0])


@numba.njit(cache=True, parallel=True)
def _stage_a_par(R, force, flips, stop_rel, thr, M, cols, state, bits):
    n = R.shape[0]
    for blk in numba.prange((n + BLOCK - 1) // BLOCK):
        _span(R, force, flips, stop_rel, thr, M, cols, state, bits, blk * BLOCK, min(n, (blk + 1) * BLOCK))


def stage_a(R, force, flips, stop_rel, tol, M, cols, state, bits=BIG_BITS, parallel=False):
    """Stage A for every row of R (C-contiguous float64, nonnegative, some mass).

    force[i] = −1: decide dominance here; 0/1: the caller's exact decision.  Writes M (uint8
    witness), cols (6, n) = θ_lo, θ_hi, gap_lo, gap_hi, row total, p_max — θ_hi = 1 and
    gap_lo = 0 unless the row is dominant (its singleton is optimal, C4) — and state[i]
    (int8) as in :func:`triage`, rows closed when :func:`numerics.trusted.within` accepts
    θ_hi − θ_lo ≤ tol (never a true difference above tol).  ``parallel`` (the caller's
    choice: certificates/threads.py) runs rows on numba's threads; each row is computed on
    its own, so the thread count never changes a result.
    """
    thr = trusted.close_threshold(tol)
    (_stage_a_par if parallel else _stage_a_ser)(R, force, flips, stop_rel, thr, M, cols, state, bits)


@numba.njit(cache=True)
def triage(out, stat, tol):
    """(cols, state) of :func:`stage_a` from per-row records out (n, 6) and stat (n, 4) =
    (dominant, unsure, argmax, tiny), the form the torch twin returns.

    state (int8): 0 dominant (the singleton is optimal, C4, so its upper bounds bound θ
    too), 1 closed, 2 open, 3 tiny max (the caller lifts the row and redoes it), 4
    dominance undecided (the caller decides it exactly).
    """
    n = out.shape[0]
    cols = np.empty((6, n))
    state = np.empty(n, np.int8)
    thr = trusted.close_threshold(tol)
    for i in range(n):
        d = stat[i, 0] == 1
        for k in range(6):
            cols[k, i] = out[i, k]
        if not d:                      # I5: a non-optimal split's θ_hi, gap_lo bound nothing
            cols[1, i] = 1.0
            cols[2, i] = 0.0
        if stat[i, 3] != 0:
            state[i] = 3
        elif stat[i, 1] != 0:
            state[i] = 4
        elif d:
            state[i] = 0
        else:
            state[i] = 1 if trusted.within(cols[0, i], cols[1, i], thr) else 2   # I9
    return cols, state
