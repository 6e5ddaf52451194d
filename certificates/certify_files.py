"""``certify``: read row files chunk by chunk, certify every row, write OUTDIR without losing files.

OUTDIR holds certificates.npz (format fixed; documented in docs/certificates.md), summary.json,
metadata.npz (carried metadata arrays, ``input_index``, ``length`` and a descriptive
float64 ``entropy``), report/ and, for every ``logits`` input i, certified-rows-i.npy:
the float64 rows that were certified (softmax computed here), so that verify replays
them instead of recomputing ``exp`` with another machine's libm.

Memory: inputs are memory-mapped or streamed and read CHUNK_ELEMS
entries at a time, each file at its own L (never padded to the longest row), so the
working set is a fixed multiple of CHUNK_ELEMS float64 entries (one row if L is larger)
whatever the number of rows or mix of lengths.  Outputs go to memory-mapped .npy files in
the staging folder; the per-row metadata of the inputs (O(rows)) is held in memory.

Hashing (the input files' sha256 and rows_sha256 over the certified float64 rows) runs on
two helper threads beside the kernels (hashlib releases the GIL); at most one chunk waits
to be hashed, so memory stays bounded, and the hashes are those of the same bytes in the
same order as a serial pass.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import inputs as io
from .folder import CLOSE_FLOOR, EXACT_MAX_ATOMS, FORMAT, TOPK, carried_metadata, derived, entropy
from .outdir import LEGACY_FILES, REPORT_FILES, Staging, checkpoint, hold_sigint, write_npz
from .pipeline import certify_batch
from .progress import Progress

DEFAULT_TOLERANCE = 1e-6
CHUNK_ELEMS = 1 << 20     # entries per chunk (8 MiB of float64); a chunk is at least one row
PER_ROW = ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "regime", "row_sum")


def chunks(src, chunk_elems=CHUNK_ELEMS):
    """(start, stop) row ranges of one source, each about chunk_elems entries at the source's own L."""
    step = max(1, chunk_elems // src.L)
    return [(s, min(src.n, s + step)) for s in range(0, src.n, step)]


def _versions():
    import numba
    v = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__}
    try:  # from the package metadata: importing torch only for its version costs seconds
        from importlib.metadata import version
        v["torch"] = version("torch")
    except Exception:
        pass
    return v


def check_options(tolerance, max_sum_defect, device):
    if not (tolerance >= 0 and np.isfinite(tolerance)):
        raise io.InputError("--tolerance", f"must be a finite number ≥ 0, got {tolerance}")
    if not max_sum_defect >= 0:   # NaN or negative would silently disable or break the check
        raise io.InputError("--max-sum-defect", f"must be a number ≥ 0 (inf allowed), got {max_sum_defect}")
    if device.startswith("cuda"):
        import torch
        if not torch.cuda.is_available():
            raise io.InputError("--device", "cuda requested but torch sees no CUDA device")


def run_certify(paths, outdir, tolerance=DEFAULT_TOLERANCE, device="cpu",
                max_sum_defect=io.DEFAULT_MAX_SUM_DEFECT, backend=None, progress=True, report=True,
                overwrite=False, chunk_elems=CHUNK_ELEMS):
    """Certify all rows of ``paths`` into ``outdir``; returns the summary dict.

    Raises InputError on bad input, while another certify holds OUTDIR's lock, and on a full
    disk or file-size limit; then OUTDIR is exactly as it was (KeyboardInterrupt likewise).
    backend defaults to "numpy" for device cpu and "torch" for cuda.
    """
    check_options(tolerance, max_sum_defect, device)
    backend = backend or ("torch" if device.startswith("cuda") else "numpy")
    t0 = time.time()
    seen = {}
    for p in paths:
        if os.path.realpath(p) in seen:
            raise io.InputError(p, f"given twice (also as {seen[os.path.realpath(p)]}); each input once")
        seen[os.path.realpath(p)] = p
    from .outdir import FULL_DISK
    # OUTDIR's lock first (outdir.Staging): a second certify into the same folder stops here,
    # before any work; from now on every exit goes through st.install or st.abort.
    st = Staging(outdir, overwrite)
    files = ThreadPoolExecutor(1, thread_name_prefix="sha256-files")
    rows = ThreadPoolExecutor(1, thread_name_prefix="sha256-rows")
    try:
        sources = [io.load_source(p, hash_file=False) for p in paths]   # headers only: rows come later
        expected = [*LEGACY_FILES, *("report/" + n for n in REPORT_FILES),
                    *(f"certified-rows-{i}.npy" for i, s in enumerate(sources) if s.kind == "logits")]
        st.check_owned(expected)      # fail before any work when a foreign file is in the way
        file_hashes = [files.submit(io.file_sha256, s.path) for s in sources]
        summary = _certify_into(st, sources, tolerance, device, backend, max_sum_defect, progress, report,
                                chunk_elems, t0, file_hashes, rows)
        st.install()
    except BaseException as exc:
        st.abort()
        # A full disk or file-size limit while staging: the staged files are gone again, so say
        # which folder could not be written (the temporary path in the error no longer exists).
        if isinstance(exc, OSError) and exc.errno in FULL_DISK:
            raise io.InputError(outdir, f"cannot write the certificates ({exc.strerror or exc}); "
                                        "nothing changed") from None
        raise
    finally:
        files.shutdown(wait=True, cancel_futures=True)
        rows.shutdown(wait=True, cancel_futures=True)
    return summary


def _certify_into(st, sources, tolerance, device, backend, max_sum_defect, progress, report, chunk_elems, t0,
                  file_hashes, hasher):
    Lmax = max(s.L for s in sources)
    N = sum(s.n for s in sources)
    W = (Lmax + 7) // 8
    mm = st.open_memmap   # reserves the disk space first: a full disk is an OSError, not a SIGBUS
    dtypes = dict(theta_lo="f8", theta_hi="f8", gap_lo="f8", gap_hi="f8", p_max="f8", regime="i1", row_sum="f8")
    out = {k: mm(st.path(k + ".npy"), "w+", np.dtype(d), (N,)) for k, d in dtypes.items()}
    out["witness"] = mm(st.path("witness.npy"), "w+", np.uint8, (N, W))
    ent = mm(st.path("entropy.npy"), "w+", np.float64, (N,))
    rows_hash = hashlib.sha256()
    pending = None                    # the chunk being hashed (at most one waits)
    stored = {}
    bar = Progress(N, "certify", enabled=progress)
    r0 = 0
    for i, src in enumerate(sources):
        keep = None
        if src.kind == "logits":      # the certified float64 rows travel with the certificate
            stored[i] = f"certified-rows-{i}.npy"
            keep = mm(st.path(stored[i]), "w+", np.float64, (src.n, src.L))
        for s, e in chunks(src, chunk_elems):
            R = io.rows_float64(src, s, e)
            io.validate(R, src.path, s, max_sum_defect if src.kind == "rows" else None)
            if keep is not None:
                keep[s:e] = R
            if pending is not None:
                pending.result()
            pending = hasher.submit(rows_hash.update, memoryview(np.ascontiguousarray(R)).cast("B"))
            with hold_sigint() as interrupted:     # numba may compile here; see checkpoint()
                c = certify_batch(R, tolerance, backend=backend, device=device)
            checkpoint(interrupted)
            a, b = r0 + s, r0 + e
            for k in PER_ROW:
                out[k][a:b] = c[k]
            wit = np.packbits(np.asarray(c["witness"], dtype=bool), axis=-1, bitorder="little")
            out["witness"][a:b, :wit.shape[1]] = wit     # bits beyond this file's L stay 0 (C6)
            ent[a:b] = entropy(R)
            bar.update(e - s)
        if keep is not None:
            keep.flush()
            del keep
        r0 += src.n
    bar.close()
    if pending is not None:
        pending.result()
    for s, f in zip(sources, file_hashes):
        s.sha256 = f.result()
    for a in list(out.values()) + [ent]:
        a.flush()
    theta_lo = out["theta_lo"]
    inputs = []
    for i, s in enumerate(sources):
        d = {"path": os.path.relpath(s.path, st.out), "sha256": s.sha256, "kind": s.kind, "dtype": s.dtype,
             "rows": s.n, "L": s.L, "tau": s.tau}
        if i in stored:
            d["certified_rows"] = {"path": stored[i], "sha256": io.file_sha256(st.path(stored[i]))}
        if s.skipped:
            d["metadata_not_carried"] = s.skipped
        inputs.append(d)
    summary = {
        "format": FORMAT,
        "rows": int(N), "L_max": int(Lmax),
        **derived(theta_lo, out["regime"]),
        "tolerance": tolerance, "close_floor": CLOSE_FLOOR, "max_sum_defect": max_sum_defect, "topk_K": TOPK,
        "exact_max_atoms": EXACT_MAX_ATOMS, "device": device, "backend": backend,
        # Paths relative to OUTDIR, so a committed result set verifies from any checkout.
        "inputs": inputs,
        "rows_sha256": rows_hash.hexdigest(),
        "seconds": round(time.time() - t0, 3), "versions": _versions(), "argv": sys.argv[1:],
    }
    names = dict.fromkeys(list(out))
    write_npz(st.path("certificates.npz"), {}, {k: st.path(k + ".npy") for k in names})
    meta = carried_metadata(sources)
    write_npz(st.path("metadata.npz"), meta, {"entropy": st.path("entropy.npy")})
    del out, ent, theta_lo
    for k in list(names) + ["entropy"]:
        os.remove(st.path(k + ".npy"))
    if report:
        from .report import write_report
        with open(st.path("summary.json"), "w") as f:      # report reads it; rewritten below
            json.dump(summary, f)
        write_report([st.tmp], st.path("report"), progress=False)
    files = sorted(set(st.written()) | {"summary.json"})
    st.check_owned(files)
    summary["files"] = files
    with open(st.path("summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary
