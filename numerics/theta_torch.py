"""Torch twin of :func:`numerics.theta_fused.stage_a` (CUDA, or CPU for tests).

Same algorithm, same floating-point operations on the same operands: the trusted
formulas of :mod:`numerics.trusted` applied to tensors (``split``, ``dominance_terms``,
``splitter_exponents``, ``headroom_bits``: each written once), the exact extraction sums
(order-free, so torch's reduction order does not matter), the same greedy / prefix-crossing / first-fit / flip decisions (elementwise
IEEE operations, first-index tie breaks; the first-fit scans step one window position for all
rows at a time).  Only the per-row exact parts (A₁, A₂, T₁, T₂) and
the masks leave the device; the outward rounding is the shared numba routine, so the
certificates are bit-identical to the numpy backend.
"""
from __future__ import annotations


import numpy as np

from numerics import theta_kernels as tk
from numerics import trusted
from numerics.theta_fused import DIFFUSE_BITS, EX_ROUNDS, EX_SPAN, FF_WIN, diffuse_cut


def _int_bits(x):
    import torch
    return x.view(torch.int64) >> 52


def _pow2(k):
    """2^k (k an int64 tensor), built from its bits when normal, so no device pow() is involved."""
    import torch
    kb = k + 1023
    v = (kb.clamp(1, 2046) << 52).view(torch.float64)
    return torch.where((kb >= 1) & (kb <= 2046), v, torch.ldexp(torch.ones_like(v), k.to(torch.float64)))


def _exchange_window(x, mk, D, stop, k, rows):
    """:func:`numerics.theta_kernels.exchange_window` for all rows at once, each on its
    window of EX_SPAN atoms around its crossing k (mk updated in place, the new D
    returned): the same values, computed by the same IEEE operations, and the same
    first-index choices."""
    import torch
    L = x.shape[1]
    E = min(EX_SPAN, L)
    j0 = torch.clamp(torch.clamp(k - (EX_SPAN >> 1), min=0), max=max(L - EX_SPAN, 0))
    cols = j0[:, None] + torch.arange(E, device=x.device)[None, :]
    xs = x.gather(1, cols)
    inf = torch.full_like(xs, float("inf"))
    for _ in range(EX_ROUNDS):
        act = D.abs() > stop
        if not bool(act.any()):
            break
        ms = mk.gather(1, cols)
        b2 = torch.where(~ms & (xs > 0.0), 2.0 * xs, inf)
        vmin = torch.empty_like(xs)
        for p in range(E):             # V[p, q] = |(D − 2x_p) + b2_q|, its min over q
            vmin[:, p] = ((D - 2.0 * xs[:, p])[:, None] + b2).abs().min(dim=1).values
        vmin = torch.where(ms & (xs > 0.0), vmin, inf)
        hit = vmin <= stop[:, None]
        first_hit = torch.argmax(hit.to(torch.uint8), dim=1)
        vbest = vmin.min(dim=1).values
        first_min = torch.argmax((vmin == vbest[:, None]).to(torch.uint8), dim=1)
        bp = torch.where(hit.any(dim=1), first_hit, first_min)
        best = vmin[rows, bp]
        act &= best < D.abs()
        c = D - 2.0 * xs[rows, bp]
        bq = torch.argmax(((c[:, None] + b2).abs() == best[:, None]).to(torch.uint8), dim=1)
        mk[rows[act], (j0 + bp)[act]] = False
        mk[rows[act], (j0 + bq)[act]] = True
        D = torch.where(act, c + b2[rows, bq], D)
    return D


def stage_a_torch(R: np.ndarray, force: np.ndarray, flips: int, stop_rel: float, device: str,
                  bits: int = tk.BIG_BITS):
    """(M uint8, out (n, 6), stat (n, 4)) for :func:`numerics.theta_fused.triage`: the same
    masks and bounds as :func:`numerics.theta_fused.stage_a`, bit for bit."""
    import torch
    n, L = R.shape
    x = torch.as_tensor(R, device=device)
    c = trusted.headroom_bits(L)
    m = x.max(dim=1).values                  # exact (I1)
    k1, k2 = trusted.splitter_exponents.py_func(_int_bits(m), c)   # I2
    s1 = _pow2(k1)
    s2 = _pow2(k2)
    q1, q2 = trusted.split.py_func(x, s1[:, None], s2[:, None])    # I2, elementwise
    T1 = q1.sum(dim=1)                       # exact in any order (I3)
    T2 = q2.sum(dim=1)
    y, slack = trusted.dominance_terms.py_func(m, T1, T2, s2, L)   # I4
    f = torch.as_tensor(force, device=device)
    dom = torch.where(f >= 0, f == 1, y > slack)
    unsure = (f < 0) & ~(y > slack) & (y >= -slack)
    arg = torch.argmax(x, dim=1)             # first index of the maximum
    rows = torch.arange(n, device=device)

    # greedy on the big atoms in (exponent bucket, index) order
    # (a diffuse row, more than diffuse_cut(L) atoms ≥ max·2^−bits, uses DIFFUSE_BITS)
    tau4 = m * 2.0 ** -bits
    diffuse = (x >= tau4[:, None]).sum(dim=1) > diffuse_cut.py_func(L)
    tau = torch.where(diffuse, m * 2.0 ** -DIFFUSE_BITS, tau4)
    big = x >= tau[:, None]
    eb = _int_bits(x)
    em = _int_bits(m)
    rbits = torch.where(diffuse, torch.full_like(em, DIFFUSE_BITS), torch.full_like(em, bits))
    bucket = torch.minimum(em[:, None] - eb, rbits[:, None])
    key = torch.where(big, bucket * L + torch.arange(L, device=device)[None, :],
                      torch.full_like(bucket, (bits + 1) * L))
    order = torch.argsort(key, dim=1, stable=True)
    nb = big.sum(dim=1)
    D = torch.zeros(n, dtype=x.dtype, device=device)
    mk = torch.zeros((n, L), dtype=torch.bool, device=device)
    for t in range(int(nb.max()) if n else 0):
        j = order[:, t]
        live = t < nb
        xj = x[rows, j]
        go = D <= 0.0
        D = torch.where(live, torch.where(go, D + xj, D - xj), D)
        mk[rows[live], j[live]] = go[live]
    # small atoms: the index-order prefix whose doubled q₁ sum crosses t_s − D joins S
    qs = torch.where(big, torch.zeros_like(q1), q1)
    ts = qs.sum(dim=1)
    target = ts - D
    cs = torch.cumsum(qs, dim=1)             # exact prefix sums
    cross = 2.0 * cs >= target[:, None]
    k = torch.where(cross.any(dim=1), torch.argmax(cross.to(torch.uint8), dim=1),
                    torch.full_like(nb, L))
    kc = torch.clamp(k, max=L - 1)
    c_k = torch.where(k < L, cs[rows, kc], ts)
    before = torch.where(k == 0, torch.zeros_like(ts),
                         torch.where(k < L, cs[rows, torch.clamp(k - 1, min=0)], ts))
    d_with = D + (2.0 * c_k - ts)
    d_wo = D + (2.0 * before - ts)
    pos = torch.arange(L, device=device)[None, :]
    small = x < tau[:, None]
    mk |= (pos < k[:, None]) & small
    # first fit after the crossing atom (theta_fused): D = d_wo ≤ 0 and a small atom joins S
    # when that keeps D ≤ 0, until |D| ≤ stop; one window position per step for all rows
    stop = stop_rel * T1
    D = d_wo
    hj = torch.where(diffuse, k + 1, torch.clamp(k + 1 + FF_WIN, max=L))   # none on diffuse rows
    for t in range(min(FF_WIN, L)):
        j = k + 1 + t
        jc = torch.clamp(j, max=L - 1)
        xj = x[rows, jc]
        act = (j < hj) & (D.abs() > stop)
        if not bool(act.any()):
            break
        cand = D + 2.0 * xj
        go = act & (xj < tau) & (cand <= 0.0)
        D = torch.where(go, cand, D)
        mk[rows[go], jc[go]] = True
    # the mirror image from d_with ≥ 0: prefix atoms leave S going back from k − 1
    Db = d_with
    lj = torch.clamp(k - FF_WIN, min=0)
    back = (k < L) & (D.abs() > stop) & ~diffuse
    rem = torch.zeros_like(mk)
    for t in range(min(FF_WIN, L)):
        j = k - 1 - t
        act = back & (j >= lj) & (Db.abs() > stop)
        if not bool(act.any()):
            break
        jc = torch.clamp(j, min=0)
        xj = x[rows, jc]
        cand = Db - 2.0 * xj
        go = act & (xj < tau) & (cand >= 0.0)
        Db = torch.where(go, cand, Db)
        rem[rows[go], jc[go]] = True
    use = (k < L) & (Db.abs() <= D.abs())         # the crossing atom's side does better
    win = (pos > k[:, None]) & (pos < hj[:, None]) & small
    mk &= ~(use[:, None] & (win | rem))
    mk |= use[:, None] & (pos == k[:, None]) & small
    D = torch.where(use, Db, D)
    D = _exchange_window(x, mk, D, stop, k, rows)
    # best single flips (same values, same first-index choice as the numba loop)
    mf = mk.to(x.dtype)
    for _ in range(flips):
        active = D.abs() > stop
        v = (D[:, None] - (4.0 * mf - 2.0) * x).abs()
        vmin = torch.minimum(v.min(dim=1).values, D.abs())
        active &= vmin < D.abs()
        j = torch.argmax((v == vmin[:, None]).to(torch.uint8), dim=1)
        xj = x[rows, j]
        Dn = D - (4.0 * mf[rows, j] - 2.0) * xj
        D = torch.where(active, Dn, D)
        mf[rows[active], j[active]] = 1.0 - mf[rows[active], j[active]]
    # dominant rows: the singleton
    mf = torch.where(dom[:, None], (pos == arg[:, None]).to(x.dtype), mf)
    A1 = (q1 * mf).sum(dim=1)                # exact
    A2 = (q2 * mf).sum(dim=1)
    parts = torch.stack([A1, A2, T1, T2, m], dim=1).cpu().numpy()
    out = np.empty((n, 6))
    tk.bounds_batch(parts, L, out)
    M = mf.to(torch.uint8).cpu().numpy()
    stat = np.stack([dom.cpu().numpy().astype(np.int64), unsure.cpu().numpy().astype(np.int64),
                     np.where(dom.cpu().numpy(), arg.cpu().numpy(), -1),
                     (m < trusted.TINY).cpu().numpy().astype(np.int64)], axis=1)
    return M, out, stat
