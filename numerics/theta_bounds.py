"""Cheap certified two-sided bounds on θ for batches of float64 rows.

Rows are (n, L) float64 arrays of nonnegative finite values (exact dyadic
rationals); θ is that of each row's exact normalisation p/Σp (C7).

Two kinds of kernel live here:

* *search* kernels return candidate witness masks (bool (n, L)); they use
  plain floats, and nothing certified depends on their rounding, because a
  mask is re-evaluated by :func:`witness_bounds`;
* *certified* kernels (:func:`witness_bounds`, :func:`topk_delta_lower`) are
  outward-rounded: lower bounds are ≤ the exact value, upper bounds ≥ it.

Error model: IEEE float64 round-to-nearest, unit roundoff u = 2⁻⁵³.  One
correctly rounded operation is within half an ulp, so moving its result one
ulp outward with ``nextafter`` bounds the exact result (valid in the subnormal
range too).  Sums use Ogita–Rump–Oishi Sum2 (compensated summation), whose
error is ≤ u|Σx| + γ_{n−1}² Σ|x| with γ_k = ku/(1 − ku): this keeps the
relative precision of δ = |A − B|/T down to about γ_L² ≈ 10⁻²⁵ at L = 4096,
which is what lets θ = 1 − 2⁻⁷⁸ keep a gap bound near 2⁻⁷⁸.

Torch forms (``*_torch``) implement the same search and top-K bound for CUDA;
the final witness evaluation is always :func:`witness_bounds` on the CPU, so
both devices certify through one rounding routine.
"""
from __future__ import annotations

import heapq

import numba
import numpy as np

from numerics.rounding import U, gamma  # noqa: E402  (one home for u, γ_n and outward steps)
from numerics.rounding import down as _dn  # noqa: E402
from numerics.rounding import up as _up  # noqa: E402


# ----------------------------------------------------------------------------- certified sums

@numba.njit(cache=True)
def _masked_sums(R, M):
    """Sum2 of the S part (A), the complement (B), the total (T) and the signed D = A − B."""
    n, L = R.shape
    out = np.empty((n, 4))
    for i in range(n):
        acc = np.zeros(4)   # running sums: A, B, T, D
        cmp = np.zeros(4)   # compensation terms
        for j in range(L):
            x = R[i, j]
            ins = M[i, j]
            for k in range(4):
                if k == 0:
                    y = x if ins else 0.0
                elif k == 1:
                    y = 0.0 if ins else x
                elif k == 2:
                    y = x
                else:
                    y = x if ins else -x
                s = acc[k]
                t = s + y
                z = t - s
                cmp[k] += (s - (t - z)) + (y - z)   # TwoSum: exact error of s + y
                acc[k] = t
        for k in range(4):
            out[i, k] = acc[k] + cmp[k]
    return out


def total_bounds(R: np.ndarray):
    """(T_lo, T_hi, T_near): outward-rounded bounds on each row's exact sum, and the estimate."""
    s = _masked_sums(np.ascontiguousarray(R), np.ones(R.shape, dtype=np.bool_))
    rel = 2.0 * (U + gamma(R.shape[1]) ** 2)
    T = s[:, 2]
    return _dn(T / (1.0 + rel)), _up(T * (1.0 + rel)), T


def witness_bounds(R: np.ndarray, M: np.ndarray):
    """Outward-rounded value of the witness S = M in every row (C7).

    Returns (theta_lo, theta_w_hi, gap_w_lo, gap_hi): theta_lo ≤ θ_S ≤ theta_w_hi and
    gap_w_lo ≤ 1 − θ_S ≤ gap_hi, where θ_S = 4AB/T² is the witness value.
    theta_lo and gap_hi bound θ itself; the other two bound θ only when S is optimal.
    """
    R = np.ascontiguousarray(R, dtype=np.float64)
    s = _masked_sums(R, np.ascontiguousarray(M, dtype=np.bool_))
    A, B, T, D = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
    g2 = gamma(R.shape[1]) ** 2
    rel = 2.0 * (U + g2)                      # A, B, T: nonnegative sums, relative error ≤ u + γ²
    A_lo, A_hi = _dn(A / (1 + rel)), _up(A * (1 + rel))
    B_lo, B_hi = _dn(B / (1 + rel)), _up(B * (1 + rel))
    T_lo, T_hi = _dn(T / (1 + rel)), _up(T * (1 + rel))
    # |D̃ − D| ≤ u|D| + γ² T  ⇒  bounds on |D| (margin 2u covers the 1/(1 ± u) factors)
    absD = np.abs(D)
    slack = _up(_up(g2 * 2.0) * T_hi)
    Dabs_hi = _up(_up(absD * (1 + 2 * U)) + slack)
    Dabs_lo = np.maximum(_dn(_dn(absD * (1 - 2 * U)) - slack), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        th_lo = _dn(_dn(_dn(4.0 * A_lo) * B_lo) / _up(T_hi * T_hi))
        th_hi = _up(_up(_up(4.0 * A_hi) * B_hi) / _dn(T_lo * T_lo))
        d_hi, d_lo = _up(Dabs_hi / T_lo), _dn(Dabs_lo / T_hi)
    gap_hi = _up(d_hi * d_hi)
    gap_lo = _dn(d_lo * d_lo)
    # θ = 1 − δ² exactly: each bound also yields one for the other quantity.
    th_lo = np.maximum(th_lo, _dn(1.0 - gap_hi))
    gap_hi = np.minimum(gap_hi, _up(1.0 - th_lo))
    th_hi = np.minimum(th_hi, _up(1.0 - gap_lo))
    gap_lo = np.maximum(gap_lo, _dn(1.0 - th_hi))
    return (np.clip(th_lo, 0.0, 1.0), np.clip(th_hi, 0.0, 1.0),
            np.clip(gap_lo, 0.0, 1.0), np.clip(gap_hi, 0.0, 1.0))


# ----------------------------------------------------------------------------- search kernels

def bulk_pass(R: np.ndarray):
    """Fused pass: (T, m, argmax, mask) with mask the best of the prefix-crossing subset
    (C5: its δ is ≤ m) and its best single flip.  Plain float64; masks are re-certified."""
    return _bulk_pass(np.ascontiguousarray(R, dtype=np.float64))


@numba.njit(cache=True)
def _bulk_pass(R):
    n, L = R.shape
    T = np.empty(n)
    m = np.empty(n)
    arg = np.empty(n, dtype=np.int64)
    M = np.zeros((n, L), dtype=np.bool_)
    for i in range(n):
        t = 0.0
        mx = -1.0
        a = 0
        for j in range(L):
            x = R[i, j]
            t += x
            if x > mx:
                mx = x
                a = j
        T[i], m[i], arg[i] = t, mx, a
        # prefix crossing: first k with 2·cs_k ≥ T (same sequential cumsum as the torch form)
        cs = 0.0
        k = L - 1
        before = 0.0
        for j in range(L):
            before = cs
            cs += R[i, j]
            if not (2.0 * cs < t):
                k = j
                break
        d_with = 2.0 * cs - t
        d_wo = 2.0 * before - t
        take = abs(d_with) <= abs(d_wo)
        D = d_with if take else d_wo
        kk = k + 1 if take else k
        for j in range(kk):
            M[i, j] = True
        # best single flip: moving atom j across changes D by −2σ_j x_j (σ = +1 inside S)
        best = abs(D)
        bj = -1
        for j in range(L):
            s = 1.0 if M[i, j] else -1.0
            v = abs(D - 2.0 * s * R[i, j])
            if v < best:
                best = v
                bj = j
        if bj >= 0:
            M[i, bj] = not M[i, bj]
    return T, m, arg, M


@numba.njit(cache=True)
def greedy_masks(R):
    """Sorted greedy (LPT): atoms in decreasing order go to the lighter side."""
    n, L = R.shape
    M = np.zeros((n, L), dtype=np.bool_)
    for i in range(n):
        order = np.argsort(-R[i])
        sa = 0.0
        sb = 0.0
        for j in order:
            if sa <= sb:
                sa += R[i, j]
                M[i, j] = True
            else:
                sb += R[i, j]
    return M


@numba.njit(cache=True)
def _kk_row(x, out):
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
def kk_masks(R):
    """Karmarkar–Karp largest differencing, the subset recovered by 2-colouring."""
    n, L = R.shape
    M = np.zeros((n, L), dtype=np.bool_)
    for i in range(n):
        _kk_row(R[i], M[i])
    return M


# ----------------------------------------------------------------------------- top-K interval lemma

def sign_patterns(K: int) -> np.ndarray:
    """(2^(K−1), K) matrix of ±1 with first column +1 (S and S^c give the same δ)."""
    idx = np.arange(1 << (K - 1))[:, None]
    bits = (idx >> np.arange(K - 1)[None, :]) & 1
    return np.concatenate([np.ones((idx.shape[0], 1)), 1.0 - 2.0 * bits], axis=1)


def _signed_sums(top, K):
    # recursive doubling over columns: each entry is a left-to-right K-term sum
    S = top[:, :1].copy()
    for k in range(1, K):
        S = np.concatenate([S + top[:, k:k + 1], S - top[:, k:k + 1]], axis=1)
    return S


def topk_delta_lower(R: np.ndarray, K: int = 12):
    """Top-K interval lemma: δ ≥ min_ε max(0, |Σ_{i≤K} ε_i x_(i)| − t_K)/T (outward-rounded).

    Returns (delta_lo, mask, closes): delta_lo ≤ δ(p) for every row; mask puts the top atoms
    by the minimising ε and the whole tail on the lighter side; when |Σε*x| ≥ t_K that mask
    attains the bound (``closes``), so it is optimal.
    """
    n, L = R.shape
    K = max(1, min(K, L))
    part = np.argpartition(-R, K - 1, axis=1)[:, :K] if K < L else np.tile(np.arange(L), (n, 1))
    top = np.take_along_axis(R, part, axis=1)
    T_lo, T_hi, _ = total_bounds(R)
    gK = gamma(K)
    top_sum = top.sum(axis=1)
    top_lo, top_hi = _dn(top_sum * (1 - gK)), _up(top_sum * (1 + gK))
    t_hi = np.maximum(_up(T_hi - top_lo), 0.0)            # tail mass, rounded up
    S = _signed_sums(top, K)
    e = np.abs(S).argmin(axis=1)
    Smin = np.abs(S[np.arange(n), e])
    err = _up(gK * top_hi)
    num = np.maximum(_dn(_dn(Smin - err) - t_hi), 0.0)
    delta_lo = _dn(num / T_hi)
    closes = _dn(Smin - err) >= t_hi
    signs = sign_patterns(K)[e]                            # (n, K)
    heavy_plus = S[np.arange(n), e] >= 0
    M = np.zeros((n, L), dtype=bool)
    np.put_along_axis(M, part, signs > 0, axis=1)
    tail = np.ones((n, L), dtype=bool)
    np.put_along_axis(tail, part, False, axis=1)
    M |= tail & ~heavy_plus[:, None]                       # tail joins the lighter side
    return delta_lo, M, closes


# ----------------------------------------------------------------------------- torch forms

def bulk_pass_torch(R):
    """Torch form of :func:`bulk_pass` (same algorithm; float64 on R's device)."""
    import torch
    n, L = R.shape
    T = R.sum(dim=1)
    m, arg = R.max(dim=1)
    cs = torch.cumsum(R, dim=1)
    k = torch.clamp((2.0 * cs < T[:, None]).sum(dim=1), max=L - 1)
    rows = torch.arange(n, device=R.device)
    D_with = 2.0 * cs[rows, k] - T
    D_wo = 2.0 * (cs[rows, k] - R[rows, k]) - T
    take = D_with.abs() <= D_wo.abs()
    M = torch.arange(L, device=R.device)[None, :] < (k + take.long())[:, None]
    D = torch.where(take, D_with, D_wo)
    sig = torch.where(M, 1.0, -1.0).to(R.dtype)
    Dflip = (D[:, None] - 2.0 * sig * R).abs()
    j = Dflip.argmin(dim=1)
    better = Dflip[rows, j] < D.abs()
    M[rows[better], j[better]] ^= True
    return T, m, arg, M


def greedy_masks_torch(R):
    """Torch form of :func:`greedy_masks`: one vectorised step per position."""
    import torch
    n, L = R.shape
    vals, order = torch.sort(R, dim=1, descending=True, stable=True)
    sa = torch.zeros(n, dtype=R.dtype, device=R.device)
    sb = torch.zeros_like(sa)
    inS = torch.zeros((n, L), dtype=torch.bool, device=R.device)
    for j in range(L):
        go = sa <= sb
        x = vals[:, j]
        sa = torch.where(go, sa + x, sa)
        sb = torch.where(go, sb, sb + x)
        inS[:, j] = go
    M = torch.zeros_like(inS)
    M.scatter_(1, order, inS)
    return M


def topk_delta_lower_torch(R, K: int = 12):
    """Torch form of :func:`topk_delta_lower`; same rounding argument (nextafter per op)."""
    import torch
    n, L = R.shape
    K = max(1, min(K, L))
    top, part = torch.topk(R, K, dim=1)
    inf = torch.tensor(float("inf"), dtype=R.dtype, device=R.device)
    up = lambda x: torch.nextafter(x, inf)            # noqa: E731
    dn = lambda x: torch.nextafter(x, -inf)           # noqa: E731
    rel = 2.0 * (U + gamma(L) ** 2)
    T = _sum2_torch(R)
    T_hi = up(T * (1.0 + rel))
    gK = gamma(K)
    top_sum = top.sum(dim=1)
    top_lo, top_hi = dn(top_sum * (1 - gK)), up(top_sum * (1 + gK))
    t_hi = torch.clamp(up(T_hi - top_lo), min=0.0)
    S = top[:, :1].clone()
    for k in range(1, K):
        S = torch.cat([S + top[:, k:k + 1], S - top[:, k:k + 1]], dim=1)
    e = S.abs().argmin(dim=1)
    rows = torch.arange(n, device=R.device)
    Smin = S[rows, e].abs()
    err = up(gK * top_hi)
    num = torch.clamp(dn(dn(Smin - err) - t_hi), min=0.0)
    delta_lo = dn(num / T_hi)
    closes = dn(Smin - err) >= t_hi
    signs = torch.as_tensor(sign_patterns(K), device=R.device)[e]
    M = torch.zeros((n, L), dtype=torch.bool, device=R.device)
    M.scatter_(1, part, signs > 0)
    tail = torch.ones_like(M)
    tail.scatter_(1, part, False)
    M |= tail & ~(S[rows, e] >= 0)[:, None]
    return delta_lo, M, closes


def _sum2_torch(R):
    """Sum2 (compensated) row sums in torch, one vectorised step per position."""
    import torch
    s = torch.zeros(R.shape[0], dtype=R.dtype, device=R.device)
    c = torch.zeros_like(s)
    for j in range(R.shape[1]):
        y = R[:, j]
        t = s + y
        z = t - s
        c = c + ((s - (t - z)) + (y - z))
        s = t
    return s + c
