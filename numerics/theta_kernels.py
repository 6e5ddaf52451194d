"""Fused per-row numba kernels of the certify pipeline: one exact-sum evaluator, cheap search.

Evaluator (C7).  Rump's error-free extraction ``q = fl(σ + x) − σ`` (exact, with x − q
exact too, when σ is a power of two ≥ |x|) is applied twice: x = q₁ + q₂ + r with q₁ a
multiple of u·σ₁, q₂ a multiple of u·σ₂ and |r| ≤ u·σ₂.  With σ₁ = 2^c·2^e ≥ 2^c·max x,
c = ⌈log₂(L + 2)⌉ + 1, and σ₂ = 2^c·u·σ₁, every partial sum of q₁'s (and of q₂'s), and
twice any of them, is exact in float64, whatever the order.  So Σ_S x and Σ x are known up
to the dropped remainders only, |Σ_S r| ≤ L·u·σ₂ ≈ 2L³u²·max x — far below one ulp of the
row total — and :func:`bounds_from_parts` rounds θ_S = 4AB/T² and δ_S² = (A − B)²/T²
outward from these exact parts.  Sums of exact terms may be reassociated freely (they are
compiled with ``fastmath={'reassoc'}``, which vectorises them) without changing a bit, so
results do not depend on SIMD paths, thread counts or the backend (the torch twin in
:mod:`numerics.theta_torch` reproduces them bit for bit).

Search (no rigour needed: the evaluator re-scores every mask).  For non-dominant rows:
"big" atoms (≥ max·2^−BIG_BITS) are placed by greedy in decreasing exponent order (an O(L)
stand-in for sorted greedy/LPT), then the small atoms, in index order, fill the lighter
side up to the prefix crossing (C5: what is left is at most one small atom), then up to
``flips`` best single flips.  Each decision uses exact q₁ sums or elementwise float
operations in a fixed order, so the masks are backend-independent too.
"""
from __future__ import annotations

import math
import os
import threading
import time

import numba
import numpy as np

from numerics.rounding import U

BLOCK = 64          # rows per prange task (scratch arrays are allocated per block)
PAR_MIN = 1 << 18   # entries from which the threaded forms run (below, thread wake-ups cost more)
LOAD_AWARE = True   # threaded forms only while a core is idle (see threaded(); tests switch it off)
BIG_BITS = 4        # atoms within 2^−BIG_BITS of the row max are placed by greedy
TINY = 2.0 ** -900  # rows with a smaller max are lifted by the caller first (σ₂ stays normal)
POW2 = np.ldexp(1.0, np.arange(-1074, 1024))   # POW2[k + 1074] = 2^k, exact (no libm calls)
_EXACT = {"reassoc"}                  # only for sums whose every partial sum is exact


def headroom_bits(L: int) -> int:
    """c = ⌈log₂(L + 2)⌉ + 1, the headroom that keeps every partial q₁ sum exact."""
    return int(math.ceil(math.log2(L + 2))) + 1


# ----------------------------------------------------------------------------- outward steps
# up(x) = fl(x + (|x|·2⁻⁵² + 2⁻¹⁰⁷⁴)) ≥ the next float above x: the added amount is at least
# one ulp of x (also for subnormal and negative x), and rounding is monotone.  Cheaper than
# a libm nextafter call; the bound is at most two ulps loose.

@numba.njit(cache=True, inline="always")
def _up(x):
    return x + (abs(x) * 2.0 ** -52 + 2.0 ** -1074)


@numba.njit(cache=True, inline="always")
def _dn(x):
    return x - (abs(x) * 2.0 ** -52 + 2.0 ** -1074)


# ----------------------------------------------------------------------------- exact pieces

@numba.njit(cache=True)
def _row_max(x):
    # eight explicit lanes: numba's max() builtin does not vectorise; the max is exact anyway
    L = x.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = 0.0
    j = 0
    while j + 8 <= L:
        m0 = x[j] if x[j] > m0 else m0
        m1 = x[j + 1] if x[j + 1] > m1 else m1
        m2 = x[j + 2] if x[j + 2] > m2 else m2
        m3 = x[j + 3] if x[j + 3] > m3 else m3
        m4 = x[j + 4] if x[j + 4] > m4 else m4
        m5 = x[j + 5] if x[j + 5] > m5 else m5
        m6 = x[j + 6] if x[j + 6] > m6 else m6
        m7 = x[j + 7] if x[j + 7] > m7 else m7
        j += 8
    while j < L:
        m0 = x[j] if x[j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    return m4 if m4 > m0 else m0


@numba.njit(cache=True, inline="always")
def _max_bits(xb):
    # max of the int64 view of a nonnegative float row = bits of its max (−0.0 reads negative)
    L = xb.shape[0]
    m0 = m1 = m2 = m3 = np.int64(0)
    j = 0
    while j + 4 <= L:
        m0 = xb[j] if xb[j] > m0 else m0
        m1 = xb[j + 1] if xb[j + 1] > m1 else m1
        m2 = xb[j + 2] if xb[j + 2] > m2 else m2
        m3 = xb[j + 3] if xb[j + 3] > m3 else m3
        j += 4
    while j < L:
        m0 = xb[j] if xb[j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return m2 if m2 > m0 else m0


@numba.njit(cache=True, inline="always")
def sigmas_scale(ef, c):
    """σ₁, σ₂ and the lift for a row whose max has biased exponent field ef: max < 2^(ef−1022)."""
    s1 = POW2[ef - 1022 + c + 1074]
    s2 = POW2[ef - 1022 + 2 * c - 53 + 1074]
    sc = 1.0 if ef >= 1023 else POW2[1023 - ef + 1074]
    return s1, s2, sc


@numba.njit(cache=True, inline="always")
def _extract(x, s1, s2, q1, q2):
    for j in range(x.shape[0]):
        v = x[j]
        q = (s1 + v) - s1
        q1[j] = q
        q2[j] = (s2 + (v - q)) - s2


@numba.njit(cache=True, fastmath=_EXACT)
def _sum(a):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j]
    return s


@numba.njit(cache=True, fastmath=_EXACT)
def _sum2(a, b):
    s = t = 0.0
    for j in range(a.shape[0]):
        s += a[j]
        t += b[j]
    return s, t


@numba.njit(cache=True, fastmath=_EXACT)
def _msum2(a, b, mk):
    s = t = 0.0
    for j in range(a.shape[0]):
        f = np.float64(mk[j])
        s += a[j] * f
        t += b[j] * f
    return s, t


@numba.njit(cache=True)
def _sigmas(m, c):
    _, e = math.frexp(m)            # m = f·2^e, ½ ≤ f < 1, so m < 2^e
    s1 = math.ldexp(1.0, e + c)
    return s1, math.ldexp(s1, c - 53)


@numba.njit(cache=True)
def _scale_of(m):
    # power of two lifting m to [1, 2) when m < 1 (scaling up never rounds); else 1
    if m >= 1.0:
        return 1.0
    _, e = math.frexp(m)
    return math.ldexp(1.0, 1 - e)


@numba.njit(cache=True, inline="always")
def bounds_from_parts(A1, A2, T1, T2, s2, L, scale, out):
    """Outward-rounded θ_S and δ_S² of one witness from its exact parts (C7).

    A = A1 + A2 + ε_A, T = T1 + T2 + ε_T, B = T − A, with |ε_A| + |ε_T − ε_A| ≤ L·u·σ₂.
    ``scale`` (a power of two) lifts the row max to ≥ 1 so that squares keep their
    relative precision.  out[0:5] = θ_lo, θ_hi, gap_lo, gap_hi (of the witness), total.
    """
    out[4] = T1 + T2                   # the row total to ~1 ulp (descriptive row_sum)
    out[0], out[1], out[2], out[3] = outward_bounds(A1, A2, T1, T2, s2, L, scale)


@numba.njit(cache=True, inline="always")
def outward_bounds(A1, A2, T1, T2, s2, L, scale):
    """(θ_lo, θ_hi, gap_lo, gap_hi) of :func:`bounds_from_parts`, as a tuple: straight-line
    code, so a loop over rows of it vectorises (stage A rounds 64 rows at a time)."""
    B1 = T1 - A1                       # exact: multiples of u·σ₁, |·| ≤ σ₁
    B2 = T2 - A2
    D1 = (A1 - B1) * scale
    D2 = (A2 - B2) * scale
    A1 *= scale
    A2 *= scale
    B1 *= scale
    B2 *= scale
    T1 *= scale
    T2 *= scale
    e = _up(_up(L * U) * (s2 * scale))  # ≥ L·u·σ₂, scaled
    A_lo = max(_dn(_dn(A1 + A2) - e), 0.0)
    A_hi = _up(_up(A1 + A2) + e)
    B_lo = max(_dn(_dn(B1 + B2) - e), 0.0)
    B_hi = _up(_up(B1 + B2) + e)
    T_lo = max(_dn(A_lo + B_lo), _dn(_dn(T1 + T2) - e))
    T_hi = min(_up(A_hi + B_hi), _up(_up(T1 + T2) + e))
    e2 = _up(e + e)
    D_lo = _dn(_dn(D1 + D2) - e2)
    D_hi = _up(_up(D1 + D2) + e2)
    if D_lo >= 0.0:
        aD_lo, aD_hi = D_lo, D_hi
    elif D_hi <= 0.0:
        aD_lo, aD_hi = -D_hi, -D_lo
    else:
        aD_lo, aD_hi = 0.0, max(-D_lo, D_hi)
    th_lo = _dn(_dn((4.0 * A_lo) * B_lo) / _up(T_hi * T_hi))   # 4·A is exact
    th_hi = _up(_up((4.0 * A_hi) * B_hi) / _dn(T_lo * T_lo))
    d_hi = _up(aD_hi / T_lo)
    d_lo = _dn(aD_lo / T_hi)
    g_hi = _up(d_hi * d_hi)
    g_lo = max(_dn(d_lo * d_lo), 0.0)
    # θ = 1 − δ² exactly (C2 (iii), normalised row): each side tightens the other
    th_lo = max(th_lo, _dn(1.0 - g_hi))
    g_hi = min(g_hi, _up(1.0 - th_lo))
    th_hi = min(th_hi, _up(1.0 - g_lo))
    g_lo = max(g_lo, _dn(1.0 - th_hi))
    return (min(max(th_lo, 0.0), 1.0), min(max(th_hi, 0.0), 1.0), min(max(g_lo, 0.0), 1.0),
            min(max(g_hi, 0.0), 1.0))


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


@numba.njit(cache=True)
def _split_small(x, q1, tau, qs, mk):
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


@numba.njit(cache=True)
def big_greedy_tail(x, q1, m, bits, mk, idx, order, cnt, qs):
    """Greedy on the big atoms (≥ m·2^−bits, in exponent order), prefix crossing on the
    small ones.  Writes mk (uint8); returns the float D = Σ_S x − Σ_{S^c} x.
    idx, order, qs (length L) and cnt (≥ bits + 2) are scratch.
    """
    L = x.shape[0]
    tau = m * 2.0 ** -bits
    nb = _split_small(x, q1, tau, qs, mk)
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
    ts = _sum(qs)
    target = ts - D
    k, c, before = prefix_crossing(qs, L, target)
    d_with = D + (2.0 * c - ts)
    d_wo = D + (2.0 * before - ts)
    kk = k + 1 if (k < L and abs(d_with) <= abs(d_wo)) else k
    for j in range(min(kk, L)):
        if x[j] < tau:
            mk[j] = 1
    return d_with if kk == k + 1 else d_wo


# ----------------------------------------------------------------------------- evaluator driver

@numba.njit(cache=True)
def eval_row(x, mk, c, q1, q2, out):
    """The certified value of witness mk (uint8) on row x: out[:5] as in stage_a.
    c = headroom_bits(len(x)); q1, q2 are scratch of the row's length."""
    s1, s2, sc = sigmas_scale(_max_bits(x.view(np.int64)) >> 52, c)
    _extract(x, s1, s2, q1, q2)
    A1, A2 = _msum2(q1, q2, mk)
    T1, T2 = _sum2(q1, q2)
    bounds_from_parts(A1, A2, T1, T2, s2, x.shape[0], sc, out)


@numba.njit(cache=True)
def _evaluate_span(R, M, out, lo, hi):
    L = R.shape[1]
    c = int(np.ceil(np.log2(L + 2.0))) + 1
    q1 = np.empty(L)
    q2 = np.empty(L)
    for i in range(lo, hi):
        eval_row(R[i], M[i], c, q1, q2, out[i])


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


@numba.njit(cache=True)
def bounds_batch(parts, L, out):
    """Outward rounding for rows given as exact parts (A₁, A₂, T₁, T₂, max) — the last step
    of the torch backend, the same routine as in stage_a."""
    c = int(np.ceil(np.log2(L + 2.0))) + 1
    mb = parts[:, 4].copy().view(np.int64)
    for i in range(parts.shape[0]):
        m = parts[i, 4]
        _, s2, sc = sigmas_scale(mb[i] >> 52, c)
        bounds_from_parts(parts[i, 0], parts[i, 1], parts[i, 2], parts[i, 3], s2, L, sc, out[i])
        out[i, 5] = m / out[i, 4]


def others_running():
    """Tasks runnable on this machine right now besides the calling thread and the
    threads numba started, or None where that cannot be read (no Linux /proc).

    The kernel's count of runnable tasks (/proc/loadavg, 4th field) minus this process's
    threads in state R that Python does not know (numba's OpenMP workers keep spinning
    for a few milliseconds after a parallel region: not someone else's load) and minus the
    calling thread.  This process's other Python threads count: a helper thread hashing
    the input beside the kernels keeps a core busy.
    """
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        known = {t.native_id for t in threading.enumerate()}
        me = threading.get_native_id()
        ours = 0
        for t in os.listdir("/proc/self/task"):
            tid = int(t)
            if tid in known and tid != me:
                continue
            try:
                with open(f"/proc/self/task/{t}/stat") as f:
                    st = f.read()
            except OSError:             # the thread ended meanwhile
                continue
            ours += st[st.rindex(")") + 2] == "R"
        return max(running - ours, 0)
    except (OSError, ValueError, IndexError):
        return None


_SEEN = [-1.0, None]     # (monotonic time, others_running()) of the last reading


def _others_recent(max_age=0.02):
    """others_running(), read again only after max_age seconds: a reading costs ≈ 60 µs
    (a few /proc files), and stage A and stage B of one batch ask within milliseconds."""
    now = time.monotonic()
    if now - _SEEN[0] > max_age:
        _SEEN[0], _SEEN[1] = now, others_running()
    return _SEEN[1]


def cpu_count():
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threaded(R):
    """Use the threaded drivers only for large batches and while a core is idle.

    Idle means that other processes keep fewer than cores − 1 CPUs busy at this moment
    (:func:`others_running`).  On an oversubscribed machine a parallel region waits for its
    slowest thread, and measured up to 2–4× slower than the serial loop on a shared 2-core
    machine.  The 1-minute load average is only the fallback where /proc is missing: it
    counts this process's own recent work, so a long single-threaded run kept turning the
    threads off on an otherwise idle machine.  Only speed depends on this choice: every
    row is computed on its own, so results are bit-identical for any thread count (tests
    check it).
    """
    return R.size >= PAR_MIN and threaded_rows(R.shape[0], 1)


def threaded_rows(n, min_rows):
    """The rule of :func:`threaded` for a batch of n independent rows of any cost: threads
    from min_rows rows on, while a core is free."""
    if n < min_rows or numba.get_num_threads() < 2:
        return False
    if not LOAD_AWARE:
        return True
    others = _others_recent()
    if others is not None:
        return others <= cpu_count() - 2
    try:
        return os.getloadavg()[0] < cpu_count() - 1
    except OSError:                     # no load average on this platform
        return True


def evaluate(R, M, out):
    """The certified value of witness M[i] (uint8) in every row: out[i, :5] as in stage_a."""
    (_evaluate_par if threaded(R) else _evaluate_ser)(R, M, out)
