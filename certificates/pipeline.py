"""The certification pipeline for a batch of float64 rows (no I/O).

Stages (each later stage only touches rows still open, i.e. hi − lo > tolerance):

A. one fused pass per row (:func:`numerics.theta_fused.stage_a`, numba, rows independent,
   threaded for large batches): max, the exact total, the dominant-atom test (C4; the rare
   undecided rows are settled exactly with ``math.fsum``), a witness — the singleton when
   dominant, else greedy on the big atoms, a prefix crossing over the small ones (C5),
   first fit on both sides of the crossing atom, the best exchange of two atoms among 64
   around the crossing (what closes near-uniform rows) and, rarely, best single flips —
   and its certified value;
B. (:mod:`numerics.theta_refine`) a sort-free pass: the top-K interval lemma on the 6
   largest atoms (an upper bound; its closing witness: most rows reaching B have θ truly
   below 1 − tol), the best exchange of one atom of S with one of Sᶜ among the first 32
   on each side, a meet-in-the-middle split of the top 12 atoms against a greedy
   remainder (which closes the peaked rows of θ ≈ 1), the lemma on the top 12 atoms;
   then, on rows still open, each sorted once, the count
   window (⌈n/2⌉ consecutive sorted atoms), best exchanges and flips on the current
   witness, the same split of the top 16 atoms, Karmarkar–Karp — one compiled pass over
   the open rows,
   :func:`numerics.theta_refine.stage_b_rows` — and last the count lemma (how many tail
   atoms each side can hold, with and without the top K atoms' signs enumerated: an upper
   bound and, when it is positive, its optimal witness;
   :func:`numerics.theta_bounds.count_delta_lower`);
C. the exact solver :func:`numerics.theta.theta_exact` for rows with few nonzero atoms.

Every reported bound comes from the trusted core :mod:`numerics.trusted` (docs/soundness.md
states the invariants it rests on): one evaluator (exact extraction sums, outward rounding:
:func:`numerics.trusted.outward_bounds`), the top-K lemma computed the same way, the count
lemma (in integers, rounded down once), or exact Fractions rounded outward, so lo ≤ θ ≤ hi
always holds; the searches only propose masks.  The regime labels are decided by
:func:`numerics.trusted.closed`, the threads by :mod:`certificates.threads`.  With backend "torch" stage A runs on
``device`` (:mod:`numerics.theta_torch`) and returns the same exact sums and masks, so
the certificates are bit-identical to the numpy backend;
stages B–C and the outward rounding run on the CPU for both.
"""
from __future__ import annotations

import math

import numpy as np

from numerics import theta_fused as tf
from numerics import theta_kernels as tk
from numerics import theta_refine as tr
from numerics import trusted
from numerics.rounding import frac_down, frac_up
from numerics.theta import theta_exact
from numerics.theta_bounds import count_delta_lower

from . import threads
from .folder import CLOSE_FLOOR, EXACT_MAX_ATOMS, TOPK

FLIPS = 3               # best single flips after the stage-A greedy
SWAP_ROUNDS = 4         # exchange + flip rounds on open rows (stage B)
MITM_K = 16             # atoms split exactly by the diffuse-row search (2 × 2^8 sums)


def exact_max_atoms() -> int:
    """Largest count of nonzero atoms sent to theta_exact."""
    return EXACT_MAX_ATOMS


class _State:
    """Per-row best results so far; offers keep the witness that proves theta_lo."""

    def __init__(self, lo, hi, gap_lo, gap_hi, M):
        self.lo, self.hi, self.gap_lo, self.gap_hi, self.M = lo, hi, gap_lo, gap_hi, M

    def offer(self, idx, M, lo, gap_hi):
        better = (lo > self.lo[idx]) | ((lo == self.lo[idx]) & (gap_hi < self.gap_hi[idx]))
        sel = idx[better]
        self.lo[sel], self.gap_hi[sel], self.M[sel] = lo[better], gap_hi[better], M[better]

    def upper(self, idx, hi, gap_lo):
        self.hi[idx] = np.minimum(self.hi[idx], hi)
        self.gap_lo[idx] = np.maximum(self.gap_lo[idx], gap_lo)

    def open(self, tol, among=None):
        idx = np.arange(self.lo.shape[0]) if among is None else among
        return idx[~trusted.closed(self.lo[idx], self.hi[idx], tol)]


def _stage_a(R, tolerance, flips, backend, device, force):
    """(M, cols, state) of :func:`numerics.theta_fused.stage_a` for either backend."""
    n, L = R.shape
    stop_rel = 0.5 * math.sqrt(tolerance)       # |D| ≤ stop_rel·T gives 1 − θ_S ≤ tol/4
    if backend == "torch":
        from numerics.theta_torch import stage_a_torch
        M, out, stat = stage_a_torch(R, force, flips, stop_rel, device)
        return (M, *tf.triage(out, stat, tolerance))
    M = np.empty((n, L), np.uint8)
    cols = np.empty((6, n))
    state = np.empty(n, np.int8)
    tf.stage_a(R, force, flips, stop_rel, tolerance, M, cols, state, parallel=threads.threaded(R))
    return M, cols, state


def certify_batch(R: np.ndarray, tolerance: float, backend: str = "numpy", device: str = "cpu",
                  K: int = TOPK, exact_max: int | None = None, flips: int = FLIPS) -> dict:
    """Certified bounds for rows R (n, L) float64, validated (finite, ≥ 0, some mass).

    backend "numpy" (numba) or "torch" (stage A on ``device``; bit-identical results).
    Returns arrays theta_lo, theta_hi, gap_lo, gap_hi, p_max, regime, witness (bool mask),
    row_sum; regime 0 dominant, 1 closed (hi − lo ≤ max(tolerance, CLOSE_FLOOR)), 2 open —
    the labels certify writes.
    """
    R = np.ascontiguousarray(R, dtype=np.float64)
    n, L = R.shape
    exact_max = exact_max_atoms() if exact_max is None else exact_max
    force = np.full(n, -1, np.int8)
    M, cols, state = _stage_a(R, tolerance, flips, backend, device, force)
    redo = np.flatnonzero(state >= 3)           # rare: a tiny max or an undecided dominance
    if redo.size:
        _redo(R, redo, state, tolerance, flips, backend, device, M, cols)
    lo, hi, glo, ghi, rs, pm = cols            # views: one row of cols per quantity
    st = _State(lo, hi, glo, ghi, M.view(bool))
    op0 = op = np.flatnonzero(state == 2)
    if op.size:
        _stage_b(R, op, st, tolerance, K, flips, lift=redo.size > 0)
        op = st.open(tolerance, op)
    if op.size:
        _stage_c(R, op, st, exact_max)
    if op0.size:                                # the regime of the rows stages B–C worked on
        # with the closing floor, rows the exact solver settled read closed even at tolerance 0
        state[op0] = np.where(trusted.closed(st.lo[op0], st.hi[op0], tolerance, CLOSE_FLOOR), 1, 2)
    return dict(theta_lo=st.lo, theta_hi=st.hi, gap_lo=st.gap_lo, gap_hi=st.gap_hi,
                p_max=pm, regime=state, witness=st.M, row_sum=rs)


def _redo(R, redo, state, tolerance, flips, backend, device, M, cols):
    """Rows stage A could not settle alone, redone and written back (M, cols, state).

    Rows with a maximum below 2^-900 are lifted by an exact power of two first (θ is
    scale-free; their row_sum and p_max then come from the original row, by fsum: correctly
    rounded); undecided dominance (C4's margin) is settled exactly with fsum and passed in.
    """
    Rl, tiny = trusted.lift_tiny(np.ascontiguousarray(R[redo]))
    force = np.full(redo.size, -1, np.int8)
    Mu, cu, su = _stage_a(Rl, tolerance, flips, backend, device, force)
    und = su == 4                               # still undecided (after any lift): decide exactly
    if und.any():
        force[und] = [1 if trusted.dominant_exact(r, int(np.argmax(r))) else 0 for r in Rl[und]]
        Mu2, cu2, su2 = _stage_a(np.ascontiguousarray(Rl[und]), tolerance, flips, backend, device,
                                 force[und])
        Mu[und], cu[:, und], su[und] = Mu2, cu2, su2
    for a, i in enumerate(redo):
        if tiny[a]:
            cu[4, a] = math.fsum(R[i].tolist())
            cu[5, a] = R[i].max() / cu[4, a]
    M[redo] = Mu
    cols[:, redo] = cu
    state[redo] = su


def _evaluate(R, M):
    out = np.empty((R.shape[0], 6))
    tk.evaluate(R, M.view(np.uint8), out, parallel=threads.threaded(R))
    return out


def _stage_b(R, op, st, tol, K, flips, lift=True):
    # lift=False: the caller knows no row has a max below TINY (stage A flagged none), so
    # lift_tiny would return the rows unchanged (its max pass costs ~0.1 row sums at L = 64)
    Ro = trusted.lift_tiny(R[op])[0] if lift else R[op]
    # top-K lemma first (after stage A's first fit, most rows still open have θ truly below
    # 1 − tol and need its upper bound; its closing witness is optimal), then the witness
    # searches: one compiled pass over the rows (numerics.theta_refine.stage_b_rows)
    lo, hi, glo, ghi = st.lo[op], st.hi[op], st.gap_lo[op], st.gap_hi[op]
    Mo = np.ascontiguousarray(st.M[op]).view(np.uint8)
    tr.stage_b_rows(Ro, K, SWAP_ROUNDS, 0.25 * math.sqrt(tol), min(MITM_K, Ro.shape[1]), flips + 2,
                    tol, lo, hi, glo, ghi, Mo, parallel=threads.threaded_rows(Ro.shape[0], 16))
    st.lo[op], st.hi[op], st.gap_lo[op], st.gap_hi[op], st.M[op] = lo, hi, glo, ghi, Mo.view(bool)
    # last, on rows still open: the count lemma (odd counts: an upper bound, in integers,
    # and its optimal witness when it is positive)
    sub = np.flatnonzero(~trusted.closed(lo, hi, tol))
    if not sub.size:
        return
    d_lo, Mc, closes = count_delta_lower(np.ascontiguousarray(Ro[sub]), K)
    th, g = np.empty_like(d_lo), np.empty_like(d_lo)
    trusted.hi_from_delta_lo_rows(d_lo, th, g)
    st.upper(op[sub], th, g)
    if closes.any():
        c = sub[closes]
        Ms = np.ascontiguousarray(Mc[closes]).view(np.uint8)
        ev = _evaluate(Ro[c], Ms)
        st.offer(op[c], Ms.view(bool), ev[:, 0], ev[:, 3])


def _stage_c(R, op, st, exact_max):
    nnz = (R[op] > 0).sum(axis=1)
    L = R.shape[1]
    for i in op[nnz <= exact_max]:
        res = theta_exact(R[i])
        gap = res.delta * res.delta
        # I12: exact θ and δ² as Fractions, rounded outward once
        st.lo[i], st.hi[i] = frac_down(res.theta), frac_up(res.theta)
        st.gap_lo[i], st.gap_hi[i] = frac_down(gap), frac_up(gap)
        st.M[i] = [(res.mask >> j) & 1 == 1 for j in range(L)]
