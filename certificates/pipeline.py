"""The certification pipeline for a batch of float64 rows (no I/O).

Order of work (each stage only touches rows still open, i.e. hi − lo > tolerance):

1. dominant atom (C4), decided exactly: 2m ≥ T is settled by the outward-rounded
   total, or by ``math.fsum`` (correctly rounded, so its sign is exact) when close;
2. fused bulk pass: sum, max, prefix crossing (C5: δ ≤ m) and its best single flip;
3. sorted greedy (LPT) and Karmarkar–Karp witnesses;
4. the top-K interval lemma: an upper bound on θ, exact when it closes;
5. the exact solver :func:`numerics.theta.theta_exact` for rows with few nonzero atoms.

Every reported number comes from :func:`numerics.theta_bounds.witness_bounds` (outward-
rounded) or from exact Fractions rounded outward, so lo ≤ θ ≤ hi always holds.
The torch backend runs stages 2–4 with torch (CUDA or CPU); Karmarkar–Karp and the final
rounding always run on the CPU, so both backends certify through the same code.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from numerics import theta_bounds as tb
from numerics.theta import theta_exact

TOPK = 12               # top-K lemma: 2^(K−1) sign patterns per open row
TOPK_CHUNK = 2048       # rows per top-K block (memory: rows × 2^(K−1) float64)


def exact_max_atoms() -> int:
    """Largest count of nonzero atoms sent to theta_exact (24 once numerics.partition exists)."""
    try:
        from numerics.partition import best_mask_mitm  # noqa: F401
        return 24
    except ImportError:
        return 20


def frac_down(f: Fraction) -> float:
    """Largest float ≤ f (exact comparison)."""
    x = float(f)
    return float(np.nextafter(x, -np.inf)) if Fraction(x) > f else x


def frac_up(f: Fraction) -> float:
    """Smallest float ≥ f (exact comparison)."""
    x = float(f)
    return float(np.nextafter(x, np.inf)) if Fraction(x) < f else x


class _State:
    """Per-row best results so far; updates keep the witness that proves theta_lo."""

    def __init__(self, n, L):
        self.lo = np.zeros(n)
        self.gap_hi = np.ones(n)
        self.hi = np.ones(n)
        self.gap_lo = np.zeros(n)
        self.M = np.zeros((n, L), dtype=bool)

    def offer(self, idx, M, lo, gap_hi):
        better = (lo > self.lo[idx]) | ((lo == self.lo[idx]) & (gap_hi < self.gap_hi[idx]))
        sel = idx[better]
        self.lo[sel], self.gap_hi[sel], self.M[sel] = lo[better], gap_hi[better], M[better]

    def upper(self, idx, hi, gap_lo):
        self.hi[idx] = np.minimum(self.hi[idx], hi)
        self.gap_lo[idx] = np.maximum(self.gap_lo[idx], gap_lo)

    def open(self, tol):
        return np.flatnonzero(~_closed(self.lo, self.hi, tol))


def _closed(lo, hi, tol):
    # hi − lo ≤ tol, decided conservatively (x − y rounds to 0 only when x = y)
    return (hi == lo) | (tb._up(hi - lo) <= tol)


def _dominant(R, m, arg):
    """Exact test 2·x_max ≥ Σx for every row (2m is exact in float64)."""
    T_lo, T_hi, _ = tb.total_bounds(R)
    dom = 2.0 * m >= T_hi
    unsure = np.flatnonzero((2.0 * m >= T_lo) & ~dom)
    for i in unsure:
        row = R[i].tolist()
        j = int(arg[i])
        signed = [x if k == j else -x for k, x in enumerate(row)]
        dom[i] = math.fsum(signed) >= 0.0      # fsum is correctly rounded: its sign is exact
    return dom


def certify_batch(R: np.ndarray, tolerance: float, backend: str = "numpy", device: str = "cpu",
                  K: int = TOPK, exact_max: int | None = None) -> dict:
    """Certified bounds for rows R (n, L) float64, validated (finite, ≥ 0, some mass).

    backend "numpy" (numpy + numba) or "torch" (on ``device``).  Returns arrays
    theta_lo, theta_hi, gap_lo, gap_hi, p_max, regime, witness (bool mask), row_sum.
    """
    n, L = R.shape
    exact_max = exact_max_atoms() if exact_max is None else exact_max
    _, _, row_sum = tb.total_bounds(R)
    # θ is scale-invariant, and the error bounds of the float kernels need squares of row
    # totals that neither underflow nor overflow: bring each row whose largest entry is
    # below 1 up to [1, 2) by an exact power of two (scaling up never rounds).  Rows are
    # validated to have sums ≤ MAX_ROW_SUM, so squares stay finite.
    _, e = np.frexp(R.max(axis=1))
    k = np.where(e < 1, 1 - e, 0)
    if k.any():
        R = np.ldexp(R, k[:, None])
    st = _State(n, L)
    if backend == "torch":
        import torch
        Rt = torch.as_tensor(R, device=device)
        _, m_t, arg_t, Mb = tb.bulk_pass_torch(Rt)
        m, arg, Mb = m_t.cpu().numpy(), arg_t.cpu().numpy(), Mb.cpu().numpy()
    else:
        _, m, arg, Mb = tb.bulk_pass(R)
    _, _, T = tb.total_bounds(R)
    all_idx = np.arange(n)

    # 1. dominant atom (C4): the singleton is optimal, so its value bounds θ on both sides.
    dom = _dominant(R, m, arg)
    di = np.flatnonzero(dom)
    if di.size:
        Ms = np.zeros((di.size, L), dtype=bool)
        Ms[np.arange(di.size), arg[di]] = True
        lo, hi, glo, ghi = tb.witness_bounds(R[di], Ms)
        st.offer(di, Ms, lo, ghi)
        st.upper(di, hi, glo)

    # 2. bulk pass witness (prefix crossing + best flip) for the other rows.
    nd = np.flatnonzero(~dom)
    if nd.size:
        lo, _, _, ghi = tb.witness_bounds(R[nd], Mb[nd])
        st.offer(nd, Mb[nd], lo, ghi)

    # 3. sorted greedy, then Karmarkar–Karp, each on the rows still open.
    for stage in ("greedy", "kk"):
        op = np.setdiff1d(st.open(tolerance), di)
        if not op.size:
            break
        Ro = R[op]
        if stage == "kk":
            Mc = tb.kk_masks(Ro)
        elif backend == "torch":
            Mc = tb.greedy_masks_torch(torch.as_tensor(Ro, device=device)).cpu().numpy()
        else:
            Mc = tb.greedy_masks(Ro)
        lo, _, _, ghi = tb.witness_bounds(Ro, Mc)
        st.offer(op, Mc, lo, ghi)

    # 4. top-K interval lemma on rows still open (upper bound; closing witness).
    op = np.setdiff1d(st.open(tolerance), di)
    for s in range(0, op.size, TOPK_CHUNK):
        idx = op[s:s + TOPK_CHUNK]
        Ro = R[idx]
        if backend == "torch":
            d_lo, Mk, _ = tb.topk_delta_lower_torch(torch.as_tensor(Ro, device=device), K)
            d_lo, Mk = d_lo.cpu().numpy(), Mk.cpu().numpy()
        else:
            d_lo, Mk, _ = tb.topk_delta_lower(Ro, K)
        glo = tb._dn(d_lo * d_lo)
        st.upper(idx, tb._up(1.0 - glo), glo)
        lo, _, _, ghi = tb.witness_bounds(Ro, Mk)
        st.offer(idx, Mk, lo, ghi)

    # 5. exact solver for short rows still open.
    op = np.setdiff1d(st.open(tolerance), di)
    nnz = (R[op] > 0).sum(axis=1) if op.size else np.zeros(0, dtype=int)
    for i in op[nnz <= exact_max]:
        res = theta_exact(R[i])
        gap = res.delta * res.delta
        st.lo[i], st.hi[i] = frac_down(res.theta), frac_up(res.theta)
        st.gap_lo[i], st.gap_hi[i] = frac_down(gap), frac_up(gap)
        st.M[i] = [(res.mask >> j) & 1 == 1 for j in range(L)]

    regime = np.where(dom, 0, np.where(_closed(st.lo, st.hi, tolerance), 1, 2)).astype(np.int8)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_max = m / T
    return dict(theta_lo=st.lo, theta_hi=st.hi, gap_lo=st.gap_lo, gap_hi=st.gap_hi,
                p_max=p_max, regime=regime, witness=st.M, row_sum=row_sum)


def entropy(R: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row's normalisation; plain float64, descriptive only."""
    p = R / R.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
