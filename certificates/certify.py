"""``certify``: read row files, certify every row in chunks, write OUTDIR atomically.

OUTDIR holds certificates.npz (format FIXED in shared/ARCHITECTURE.md), summary.json,
metadata.npz (carried metadata arrays, ``input_index``, ``length`` and a descriptive
float64 ``entropy``) and report/.  Everything is first written to a temporary sibling
directory that is renamed into place only when all rows are certified; on any error the
temporary directory is removed and OUTDIR is left as it was.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

from . import inputs as io
from .pipeline import TOPK, certify_batch, entropy, exact_max_atoms

DEFAULT_TOLERANCE = 1e-6
CHUNK_ELEMS = 1 << 21     # rows per chunk = CHUNK_ELEMS // L (16 MiB of float64)


def iter_rows(sources, Lmax, max_sum_defect, validate=True):
    """Yield (global offset, float64 rows padded with zeros to Lmax) chunk by chunk."""
    offset = 0
    for src in sources:
        step = max(1, CHUNK_ELEMS // src.L)
        for s in range(0, src.n, step):
            R = io.rows_float64(src, s, min(src.n, s + step))
            if validate:
                io.validate(R, src.path, s, max_sum_defect if src.kind == "rows" else None)
            if R.shape[1] < Lmax:      # zero padding is neutral for θ (C6)
                R = np.concatenate([R, np.zeros((R.shape[0], Lmax - R.shape[1]))], axis=1)
            yield offset + s, R
        offset += src.n


def _carried_meta(sources):
    """Metadata arrays of all sources; a source lacking a key gets -1 (numeric) or "" (text)."""
    keys = set().union(*(set(s.meta) for s in sources))
    out = {}
    for k in sorted(keys):
        kinds = {np.asarray(s.meta[k]).dtype.kind for s in sources if k in s.meta}
        numeric = kinds <= set("iuf")
        parts = [np.asarray(s.meta[k]) if k in s.meta else np.full(s.n, -1 if numeric else "")
                 for s in sources]
        if not numeric:
            parts = [p.astype(str) for p in parts]
        try:
            out[k] = np.concatenate(parts)
        except (ValueError, TypeError):
            continue
    out["input_index"] = np.concatenate([np.full(s.n, i, dtype=np.int32) for i, s in enumerate(sources)])
    out["length"] = np.concatenate([np.full(s.n, s.L, dtype=np.int32) for s in sources])
    return out


def _versions():
    import numba
    v = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__}
    try:
        import torch
        v["torch"] = torch.__version__
    except ImportError:
        pass
    return v


def run_certify(paths, outdir, tolerance=DEFAULT_TOLERANCE, device="cpu",
                max_sum_defect=io.DEFAULT_MAX_SUM_DEFECT, backend=None, progress=True, report=True):
    """Certify all rows of ``paths`` into ``outdir``; returns the summary dict.

    Raises InputError on bad input (nothing written).  backend defaults to "numpy"
    for device cpu and "torch" for cuda.
    """
    if not (tolerance >= 0 and np.isfinite(tolerance)):
        raise io.InputError("--tolerance", f"must be a finite number ≥ 0, got {tolerance}")
    if not max_sum_defect >= 0:   # NaN or negative would silently disable or break the check
        raise io.InputError("--max-sum-defect", f"must be a number ≥ 0 (inf allowed), got {max_sum_defect}")
    out_abs = os.path.abspath(outdir)
    if os.path.exists(out_abs) and not os.path.isdir(out_abs):
        raise io.InputError(outdir, "OUTDIR exists and is not a directory")
    if os.path.isdir(out_abs) and os.listdir(out_abs) and \
            not os.path.exists(os.path.join(out_abs, "certificates.npz")):
        raise io.InputError(outdir, "OUTDIR exists and is not a certificate directory; refusing to replace it")
    backend = backend or ("torch" if device.startswith("cuda") else "numpy")
    if device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise io.InputError("--device", "cuda requested but torch sees no CUDA device")
    t0 = time.time()
    sources = [io.load_source(p) for p in paths]
    Lmax = max(s.L for s in sources)
    N = sum(s.n for s in sources)
    parts, ent = [], []
    rows_hash = hashlib.sha256()
    from tqdm import tqdm
    bar = tqdm(total=N, unit="row", disable=not progress or None, file=sys.stderr, desc="certify")
    for _, R in iter_rows(sources, Lmax, max_sum_defect):
        rows_hash.update(R.tobytes())
        parts.append(certify_batch(R, tolerance, backend=backend, device=device))
        ent.append(entropy(R))
        bar.update(R.shape[0])
    bar.close()
    res = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    res["witness"] = np.packbits(res["witness"], axis=-1, bitorder="little")
    meta = _carried_meta(sources)
    meta["entropy"] = np.concatenate(ent)
    reg = np.bincount(res["regime"], minlength=3)
    summary = {
        "format": "attention-theta-certificates/1",
        "rows": int(N), "L_max": int(Lmax),
        "regime_counts": {"dominant": int(reg[0]), "closed": int(reg[1]), "open": int(reg[2])},
        "tolerance": tolerance, "max_sum_defect": max_sum_defect, "topk_K": TOPK,
        "exact_max_atoms": exact_max_atoms(), "device": device, "backend": backend,
        # Paths relative to OUTDIR, so a committed result set verifies from any checkout.
        "inputs": [{"path": os.path.relpath(s.path, os.path.abspath(outdir)), "sha256": s.sha256, "kind": s.kind, "dtype": s.dtype,
                    "rows": s.n, "L": s.L, "tau": s.tau} for s in sources],
        "rows_sha256": rows_hash.hexdigest(),
        "median_theta_lo": float(np.median(res["theta_lo"])),
        "fraction_theta_lo_ge_0.99": float(np.mean(res["theta_lo"] >= 0.99)),
        "seconds": round(time.time() - t0, 3), "versions": _versions(), "argv": sys.argv[1:],
    }
    _write_atomic(outdir, res, meta, summary, report)
    return summary


def _write_atomic(outdir, res, meta, summary, report):
    outdir = os.path.abspath(outdir)
    parent = os.path.dirname(outdir)
    os.makedirs(parent, exist_ok=True)
    if os.path.exists(outdir) and os.listdir(outdir) and \
            not os.path.exists(os.path.join(outdir, "certificates.npz")):
        raise io.InputError(outdir, "OUTDIR exists and is not a certificate directory; refusing to replace it")
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(outdir) + ".tmp-", dir=parent)
    try:
        np.savez(os.path.join(tmp, "certificates.npz"), **res)
        np.savez(os.path.join(tmp, "metadata.npz"), **meta)
        with open(os.path.join(tmp, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        if report:
            from .report import write_report
            write_report([tmp], os.path.join(tmp, "report"), progress=False)
        old = None
        if os.path.exists(outdir):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(outdir) + ".old-", dir=parent)
            os.rename(outdir, os.path.join(old, "x"))
        os.rename(tmp, outdir)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
