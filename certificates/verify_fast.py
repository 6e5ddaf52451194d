"""verify's fast path: exact row sums in integer limbs, decisions in double-double (numba).

Independent of numerics/ and of the pipeline.  For each row the kernel computes, exactly,
T = Σx, D = Σ±x (the witness split, + on the mask) and 2·x_max − T, as multi-limb integers
(x = M·2^E is added bit-exactly into 32-bit limbs of an int64 accumulator).  It then
decides each claim of the record by comparing products in double-double arithmetic
(Dekker's error-free products and Knuth's TwoSum), with a margin of 2^-90 relative that
covers every rounding of the dd arithmetic (≤ ~2^-100) and the limb truncation (≤ 2^-96):

* witness (C7): D² ≤ gap_hi·T² and D² ≤ (1 − theta_lo)·T²  (θ_S = 1 − D²/T²);
* dominance (C4): sign of 2·x_max − T, exact; for dominant rows the upper bounds
  gap_lo·T² ≤ (2m − T)² and (1 − theta_hi)·T² ≤ (2m − T)²; for the others the same two
  inequalities with a lower bound on δ*·T from the top-K lemma (all atoms when ≤ 16);
* regime 1: theta_hi − theta_lo ≤ tolerance (exact TwoSum); regime 2: clearly wider than the
  tolerance (tolerance = max(tolerance, 2^-50) here; rows near it go to the exact replay);
* row_sum and p_max within 2^-51 relative (the 4-ulp contract of verify.check_row).

It answers only "decided: holds" (1) or "not decided" (0).  Rows answered 0 — a failing
claim, a tie inside the margin, an upper bound the top-K lemma cannot confirm, or an
unusual row — go to verify.check_row, the exact Fraction
replay, which has the last word.  So a wrong 1 is the only way this file could harm
soundness; tests/test_certificates_verify.py compares it with check_row on honest and
tampered records.
"""
from __future__ import annotations

import numba
import numpy as np

NL = 70                     # 32-bit limbs covering bit weights 2^-1074 … 2^1166
MARGIN = 2.0 ** -90
REL = 2.0 ** -51
SPLIT = 134217729.0         # 2^27 + 1 (Veltkamp)


@numba.njit(cache=True, inline="always")
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(cache=True, inline="always")
def _split(a):
    c = SPLIT * a
    h = c - (c - a)
    return h, a - h


@numba.njit(cache=True, inline="always")
def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.njit(cache=True, inline="always")
def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    e += ah * bl + al * bh
    return _two_sum(p, e)


@numba.njit(cache=True, inline="always")
def _le(ah, al, bh, bl):
    """1 if a ≤ b is decided (a, b ≥ 0 in dd, each within 2^-96 relative of the true value)."""
    d = (bh - ah) + (bl - al)
    return d > MARGIN * (abs(ah) + abs(bh))


@numba.njit(cache=True, inline="always")
def _add(acc, x, sign):
    bits = np.int64(np.float64(x).view(np.int64))
    ef = (bits >> 52) & 0x7FF
    M = bits & 0xFFFFFFFFFFFFF
    if ef:
        M |= 1 << 52
        o = ef - 1
    else:
        o = 0
    i, r = o >> 5, o & 31
    lo = (M & 0xFFFFFFFF) << r
    hi = (M >> 32) << r
    acc[i] += sign * (lo & 0xFFFFFFFF)
    acc[i + 1] += sign * ((lo >> 32) + (hi & 0xFFFFFFFF))
    acc[i + 2] += sign * (hi >> 32)


@numba.njit(cache=True)
def _normalize(acc):
    """Carry-propagate; returns the index of the top nonzero limb (−1 for zero).  Sign = sign of it."""
    for i in range(NL - 1):
        c = acc[i] >> 32
        acc[i] -= c << 32
        acc[i + 1] += c
    for i in range(NL - 1, -1, -1):
        if acc[i] != 0:
            return i
    return -1


@numba.njit(cache=True)
def _to_dd(acc, top, ref):
    """(h, l) ≈ value / 2^(32·ref − 1074) from the top 5 limbs (acc normalized, top ≥ 0)."""
    h, l = 0.0, 0.0
    for i in range(max(top - 4, 0), top + 1):
        v = np.ldexp(np.float64(acc[i]), 32 * (i - ref))
        h, e = _two_sum(h, v)
        l += e
    return _two_sum(h, l)


@numba.njit(cache=True)
def _topk_lower(x, accT, tT, K):
    """A lower bound on δ*·T / 2^(32·tT − 1074) by the top-K interval lemma (0.0 when unusable).

    min over sign patterns of |Σ ±t_k| over the K largest atoms, minus the rest of the mass;
    every pattern sum is run in double-double along a Gray code, and the bound subtracts the
    accumulated rounding (≤ 2^-103·Σt per step) before use.  Any K gives a valid bound (C-lemma
    of verify.topk_disc_lower); K = all atoms makes it exact.
    """
    t = np.sort(x)[::-1][:K]
    sc = -32 * tT + 1074
    acc = accT.copy()
    for k in range(t.size):
        _add(acc, t[k], -1)
    tot = 0.0
    ts = np.empty(t.size)
    for k in range(t.size):
        ts[k] = np.ldexp(t[k], sc)
        if ts[k] < 2.0 ** -900:
            return 0.0
        tot += ts[k]
    top = _normalize(acc)
    if top >= 0 and acc[top] < 0:
        return 0.0
    if top < 0:
        tail = 0.0
    elif tT - top > 14:
        tail = np.ldexp(1.0, 32 * (top + 1 - tT))
    else:
        th, tl = _to_dd(acc, top, tT)
        tail = np.nextafter(th + tl, np.inf) * (1.0 + 2.0 ** -50)
    Sh, Sl = 0.0, 0.0
    for k in range(t.size):
        Sh, e = _two_sum(Sh, ts[k])
        Sl += e
    Sh, Sl = _two_sum(Sh, Sl)
    sign = np.ones(t.size)
    best = abs(Sh + Sl)
    n_pat = 1 << (t.size - 1)
    for g in range(1, n_pat):
        j = 1
        while not (g >> (j - 1)) & 1:
            j += 1
        v = -2.0 * sign[j] * ts[j]
        sign[j] = -sign[j]
        Sh, e = _two_sum(Sh, v)
        Sh, Sl = _two_sum(Sh, Sl + e)
        best = min(best, abs(Sh + Sl))
    err = (n_pat + 4) * 2.0 ** -100 * tot
    # each of the four float operations rounds by ≤ u·(best + tail + err): 2^-48 covers them all
    lo = best * (1.0 - 2.0 ** -50) - err - tail - 2.0 ** -48 * (best + tail + err)
    return lo if lo > 0.0 else 0.0


@numba.njit(cache=True)
def fast_rows(R, masks, lo, hi, glo, ghi, pmax, rsum, regime, tol, K, out):
    """out[i] = 1 when every claim of row i is decided to hold; 0 sends the row to check_row."""
    n = R.shape[0]
    accT = np.zeros(NL, np.int64)
    accD = np.zeros(NL, np.int64)
    for i in range(n):
        out[i] = 0
        L = R.shape[1]
        a, b, c, d = lo[i], hi[i], glo[i], ghi[i]
        if not (0.0 <= a <= b <= 1.0 and 0.0 <= c <= d <= 1.0) or L > (1 << 26):
            continue
        if not (np.isfinite(pmax[i]) and np.isfinite(rsum[i])) or regime[i] < 0 or regime[i] > 2:
            continue
        accT[:] = 0
        accD[:] = 0
        m = -1.0
        for j in range(L):
            x = R[i, j]
            if x > m:
                m = x
            if x > 0.0:
                _add(accT, x, 1)
                _add(accD, x, 1 if masks[i, j] else -1)
        tT = _normalize(accT)
        tD = _normalize(accD)
        if tT < 0:
            continue
        Th, Tl = _to_dd(accT, tT, tT)          # T / 2^(32·tT − 1074) ∈ [1, 2^32)
        T2h, T2l = _dd_mul(Th, Tl, Th, Tl)
        # witness: D² ≤ gap_hi·T² and D² ≤ (1 − lo)·T²
        if tD >= 0:
            if accD[tD] < 0:
                for k in range(NL):
                    accD[k] = -accD[k]
                tD = _normalize(accD)
            if tT - tD > 14:                    # D/T < 2^-400: gap < 2^-800
                Dh, Dl = 0.0, 0.0
                if d < 2.0 ** -790:
                    continue
                om_h, om_l = _two_sum(1.0, -a)
                if om_h < 2.0 ** -790:
                    continue
            else:
                Dh, Dl = _to_dd(accD, tD, tT)
        else:
            Dh, Dl = 0.0, 0.0
        D2h, D2l = _dd_mul(Dh, Dl, Dh, Dl)
        gh, gl = _dd_mul(T2h, T2l, d, 0.0)
        om_h, om_l = _two_sum(1.0, -a)
        oh, ol = _dd_mul(T2h, T2l, om_h, om_l)
        if not ((Dh == 0.0 or _le(D2h, D2l, gh, gl)) and (Dh == 0.0 or _le(D2h, D2l, oh, ol))):
            continue
        # dominance, exact: sign of 2m − T
        for k in range(NL):
            accD[k] = -accT[k]
        _add(accD, m, 1)
        _add(accD, m, 1)
        tM = _normalize(accD)
        dominant = tM < 0 or accD[tM] >= 0
        if dominant != (regime[i] == 0):
            continue
        if b < 1.0 or c > 0.0:
            if not dominant:                   # top-K lemma, exact when the row has ≤ 16 atoms
                nnz = 0
                for j in range(L):
                    nnz += R[i, j] > 0.0
                Mh = _topk_lower(R[i], accT, tT, nnz if nnz <= 16 else K)
                Ml = 0.0
                if Mh == 0.0:
                    continue
            elif tM < 0:
                Mh, Ml = 0.0, 0.0
            elif tT - tM > 14:
                continue
            else:
                Mh, Ml = _to_dd(accD, tM, tT)
            M2h, M2l = _dd_mul(Mh, Ml, Mh, Ml)
            lh, ll = _dd_mul(T2h, T2l, c, 0.0)
            qh, ql = _two_sum(1.0, -b)
            uh, ul = _dd_mul(T2h, T2l, qh, ql)
            if not ((c == 0.0 or _le(lh, ll, M2h, M2l)) and (qh == 0.0 or _le(uh, ul, M2h, M2l))):
                continue
        if regime[i] == 1:
            sh, sl = _two_sum(b, -a)          # exact hi − lo
            if not (sh < tol or (sh == tol and sl <= 0.0)):
                continue
        elif regime[i] == 2:                  # open: wider than the tolerance (clearly; else exact replay)
            sh, sl = _two_sum(b, -a)
            if not sh > tol * (1.0 + 2.0 ** -40):
                continue
        # row_sum and p_max within REL, in units of 2^(32·tT − 1074)
        sc = 32 * tT - 1074
        rs = np.ldexp(rsum[i], -sc)
        ms = np.ldexp(m, -sc)
        if not (rs >= 2.0 ** -900 and ms >= 2.0 ** -900):
            continue
        eh, el = _two_sum(Th, -rs)
        e2 = abs(eh + (el + Tl))
        if not e2 <= REL * Th * (1.0 - 2.0 ** -40):
            continue
        ph, pl = _dd_mul(Th, Tl, pmax[i], 0.0)
        fh, fl = _two_sum(ph, -ms)
        if not abs(fh + (fl + pl)) <= REL * ms * (1.0 - 2.0 ** -40):
            continue
        out[i] = 1
    return out
