"""The Python API: ``certificates.certify(rows)`` on a numpy array or torch tensor.

The same validation and the same certificates as ``python -m certificates certify``: a row
the command line refuses raises ValueError here with the same one-line message, and the
bounds of a row are bit-identical to the ones certify writes for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import inputs as io


@dataclass(frozen=True)
class Certificates:
    """Certified bounds for n rows (numpy arrays; see docs/certificates.md).

    theta_lo ≤ θ(p) ≤ theta_hi and gap_lo ≤ 1 − θ(p) ≤ gap_hi for p the exact normalisation
    of each row, rounded outward (exact arithmetic on the stored floats).  regime: 0 dominant
    atom (θ exact, C4), 1 closed (theta_hi − theta_lo ≤ max(tolerance, 2^-50)), 2 open.
    witness: bool (n, L), the subset S whose value 4·p(S)·(1 − p(S)) proves theta_lo (C7).
    p_max and row_sum are descriptive (within a few ulps of max/Σ and Σ).
    """
    theta_lo: np.ndarray
    theta_hi: np.ndarray
    gap_lo: np.ndarray
    gap_hi: np.ndarray
    p_max: np.ndarray
    regime: np.ndarray
    witness: np.ndarray
    row_sum: np.ndarray
    tolerance: float

    def __len__(self) -> int:
        return int(self.theta_lo.shape[0])


def as_rows(rows) -> np.ndarray:
    """rows (numpy array or torch tensor, shape (n, L), a float dtype) as float64, exactly."""
    if type(rows).__module__.startswith("torch"):
        import torch
        t = rows.detach()
        if t.is_nested or t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
            raise ValueError(f"rows: a {'nested' if t.is_nested else t.layout} tensor on {t.device} "
                             f"({t.dtype}); pass a dense tensor with data")
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)             # exact widening
        rows = t.resolve_neg().resolve_conj().cpu().numpy()
    a = np.asarray(rows)
    if a.dtype.name not in io.FLOAT_DTYPES:
        raise ValueError(f"rows: dtype {a.dtype} is not supported; need one of {', '.join(io.FLOAT_DTYPES)}")
    if a.ndim != 2:
        raise ValueError(f"rows: shape {a.shape}; need (n, L) — one row r is r[None]")
    n, L = a.shape
    if n == 0:
        raise ValueError("rows: no rows")
    if L < 2:
        raise ValueError(f"rows: L = {L}: θ needs at least two positions (θ = 0 for L = 1)")
    return np.ascontiguousarray(a, dtype=np.float64)


def certify(rows, tolerance: float = 1e-6, *, max_sum_defect: float = io.DEFAULT_MAX_SUM_DEFECT,
            device: str = "cpu") -> Certificates:
    """Certified two-sided bounds on θ for each row of ``rows`` (n, L).

    Precision: outward-rounded bounds from exact arithmetic on the stored values (sound for
    every row); regime as certify writes it.  Raises ValueError naming the row for NaN, ±inf,
    negative or all-zero rows, sums off 1 by more than ``max_sum_defect`` (default 1e-2, as
    on the command line; ``float("inf")`` disables it), a wrong shape or dtype.
    """
    from .certify_files import CHUNK_ELEMS, check_options
    from .pipeline import certify_batch
    R = as_rows(rows)
    n, L = R.shape
    step = max(1, CHUNK_ELEMS // L)         # chunks as on the command line (rows are independent)
    try:
        check_options(tolerance, max_sum_defect, device)
        for s in range(0, n, step):
            io.validate(R[s:s + step], "rows", s, max_sum_defect)
    except io.InputError as exc:
        raise ValueError(str(exc)) from None
    backend = "torch" if device.startswith("cuda") else "numpy"
    parts = [certify_batch(R[s:s + step], tolerance, backend=backend, device=device) for s in range(0, n, step)]
    cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return Certificates(theta_lo=cat["theta_lo"], theta_hi=cat["theta_hi"], gap_lo=cat["gap_lo"],
                        gap_hi=cat["gap_hi"], p_max=cat["p_max"], regime=cat["regime"].astype(np.int8),
                        witness=np.asarray(cat["witness"], dtype=bool), row_sum=cat["row_sum"],
                        tolerance=float(tolerance))
