"""What a certificate folder holds: one definition, shared by certify, verify and report.

Names, dtypes and constants of the format (docs/certificates.md), the
numbers summary.json derives from the certified arrays, and the descriptive entropy column
of metadata.npz.  numpy only: verify imports this module, never numerics/ or the pipeline.
"""
from __future__ import annotations

import numpy as np

from . import readers as rd

FORMAT = "attention-theta-certificates/1"
# A row is closed (regime 1) when theta_hi − theta_lo ≤ max(tolerance, CLOSE_FLOOR): an exactly
# solved row is bracketed by adjacent floats (width ≤ 2^-52), so at --tolerance 0 it reads closed.
CLOSE_FLOOR = 2.0 ** -50
TOPK = 12               # top-K lemma: 2^(K−1) sign patterns per open row (verify replays this K)
EXACT_MAX_ATOMS = 24    # rows with at most this many nonzero atoms go to the exact solver


def close_width(tolerance: float) -> float:
    """The width up to which a row is closed: max(tolerance, CLOSE_FLOOR) (docs/soundness.md, I10)."""
    return max(float(tolerance), CLOSE_FLOOR)


# certificates.npz: exactly these members (each "<name>.npy"), per row; witness is (rows, ⌈L_max/8⌉)
CERT_DTYPES = {"theta_lo": "float64", "theta_hi": "float64", "gap_lo": "float64", "gap_hi": "float64",
               "p_max": "float64", "regime": "int8", "witness": "uint8", "row_sum": "float64"}
# metadata.npz: these columns, plus the metadata arrays carried from the inputs
META_FIXED = {"input_index": "int32", "length": "int32", "entropy": "float64"}


def derived(theta_lo: np.ndarray, regime: np.ndarray) -> dict:
    """The summary.json numbers that are functions of the certified arrays (verify recomputes
    them and refuses a summary that differs): deterministic float64 operations only."""
    theta_lo = np.asarray(theta_lo, dtype=np.float64)
    reg = np.bincount(np.asarray(regime, dtype=np.int64), minlength=3)
    n = int(theta_lo.size)
    return {"regime_counts": {"dominant": int(reg[0]), "closed": int(reg[1]), "open": int(reg[2])},
            "median_theta_lo": float(np.median(theta_lo)),
            "fraction_theta_lo_ge_0.99": int(np.count_nonzero(theta_lo >= 0.99)) / n}


def carried_metadata(sources) -> dict:
    """metadata.npz's columns except entropy: the inputs' metadata arrays (a source lacking a
    key gets -1 for numbers, "" for text), ``input_index`` and ``length`` (the row's L)."""
    keys = set().union(*(set(s.meta) for s in sources))
    out = {}
    for k in sorted(keys):
        kinds = {np.asarray(s.meta[k]).dtype.kind for s in sources if k in s.meta}
        numeric = kinds <= set("biuf")
        parts = [np.asarray(s.meta[k]) if k in s.meta else np.full(s.n, -1 if numeric else "")
                 for s in sources]
        if not numeric:
            parts = [p.astype(str) for p in parts]
        out[k] = np.concatenate(parts)
    out["input_index"] = np.concatenate([np.full(s.n, i, dtype=np.int32) for i, s in enumerate(sources)])
    out["length"] = np.concatenate([np.full(s.n, s.L, dtype=np.int32) for s in sources])
    return out


def entropy(R: np.ndarray) -> np.ndarray:
    """Shannon entropy (nats) of each row's normalisation; plain float64, descriptive only.

    H = log T − (Σ x log x)/T with T = Σ x (0·log 0 = 0): one log pass over the raw row
    instead of normalising first; clipped at 0 (H ≥ 0; the two terms cancel for one-hot rows).
    """
    R = np.asarray(R, dtype=np.float64)
    T = R.sum(axis=1)
    lx = np.zeros(R.shape)
    np.log(R, out=lx, where=R > 0)
    return np.maximum(np.log(T) - np.einsum("ij,ij->i", R, lx) / T, 0.0)


def entropy_with_tolerance(R: np.ndarray):
    """(:func:`entropy` of the rows, how far two machines' values may differ), one log pass.

    Each machine's value is within (L + 8)·u·K of the true H, K = 1 + |log T| + Σ x·|log x|/T:
    the two sums of L terms in any order (γ_L each), a libm log within 4 ulps, one division
    and one subtraction.  The descriptive column is checked to twice that, not certified.
    """
    R = np.asarray(R, dtype=np.float64)
    T = R.sum(axis=1)
    lx = np.zeros(R.shape)
    np.log(R, out=lx, where=R > 0)
    lT = np.log(T)
    H = np.maximum(lT - np.einsum("ij,ij->i", R, lx) / T, 0.0)     # as entropy() computes it
    np.abs(lx, out=lx)
    K = 1.0 + np.abs(lT) + np.einsum("ij,ij->i", R, lx) / T
    return H, 2.0 * (R.shape[1] + 8) * 2.0 ** -52 * K


def read_arrays(path, expected=None, keys=None) -> dict:
    """Arrays of an .npz in full, after :func:`readers.npz_members`'s structure check (one
    reading: what numpy.load would show).  ``expected``: the exact member names; ``keys``:
    read only these.  Raises ReadError (the caller names the file) on anything else.
    """
    infos = rd.npz_members(path, expected=expected)
    out = {}
    for k in (infos if keys is None else keys):
        if k not in infos:
            raise rd.ReadError(f"array {k!r} is missing")
        m = rd.ZipMember(path, infos[k])
        if m.dtype.hasobject:
            raise rd.ReadError(f"member {k!r} holds Python objects")
        nbytes = m.check_size()                  # the header's bytes, checked before reading
        try:
            flat = np.frombuffer(m.read_bytes(nbytes), dtype=m.dtype)
        finally:
            m.close()
        out[k] = flat.reshape(m.shape, order="F" if m.fortran else "C")
    return out
