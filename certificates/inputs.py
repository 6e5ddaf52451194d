"""Reading attention-row files (formats documented in docs/certificates.md) and rejecting bad input.

Every problem becomes an :class:`InputError` whose message is one line naming
the file, the row (when there is one) and the problem; the command line turns
it into exit code 2 without a traceback.

What is certified: for ``rows`` input, the stored values widened exactly to
float64.  For ``logits`` input (optional scalar ``tau``, default 1), the
float64 row ``e / Σe`` with ``e = exp(logits/τ − max)`` computed here by numpy;
that float64 array *is* the certified row.  Because ``exp`` differs in its last
bit between libms and SIMD paths, certify stores these rows in OUTDIR and verify
replays the stored rows (sha256-checked); how they relate to the logits is a
separate, stated check (see verify.LOGIT_REL).
"""
from __future__ import annotations

import hashlib
import math
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from . import readers as rd

# bfloat16 keeps 8 significant bits: storing each entry of a row that sums to 1 moves the sum
# by at most 2^-9 ≈ 1.95e-3 in total (any L, round-to-nearest); torch's bf16 softmax adds
# fp32 rounding (≈ L·2^-24 ≈ 2.4e-4 at L = 4096).  1e-2 leaves about 4× headroom.
DEFAULT_MAX_SUM_DEFECT = 1e-2
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
META_KEYS_SKIP = ("rows", "logits", "tau")


class InputError(Exception):
    def __init__(self, path, problem, row=None):
        where = f"{path}: row {row}: " if row is not None else f"{path}: "
        super().__init__(where + " ".join(str(problem).split()))


@dataclass
class Source:
    path: str
    kind: str                 # "rows" or "logits"
    arr: object               # readers.Array: flattened rows read on demand
    dtype: str
    n: int
    L: int
    tau: float = 1.0
    meta: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    sha256: str = ""


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Squares of row totals must stay finite in the float64 kernels (2^500 squared is < 2^1024).
MAX_ROW_SUM = 2.0 ** 500
RESERVED_META = ("input_index", "length", "entropy")


def _open(path):
    ext = os.path.splitext(path)[1].lower()
    if os.path.isdir(path):
        raise InputError(path, "is a directory, not a rows file")
    if not os.path.isfile(path):
        raise InputError(path, "no such file")
    if os.path.getsize(path) == 0:
        raise InputError(path, "empty file")
    readers = {".npz": rd.read_npz, ".npy": rd.read_npy, ".pt": rd.read_pt, ".safetensors": rd.read_safetensors}
    if ext not in readers:
        raise InputError(path, f"unknown file type {ext!r} (use .npz, .npy, .pt or .safetensors)")
    try:
        return ext, readers[ext](path)
    except InputError:
        raise
    except rd.ReadError as exc:
        raise InputError(path, str(exc))
    except Exception as exc:     # any parser failure of a foreign file is bad input, not a crash
        raise InputError(path, f"cannot read ({type(exc).__name__}: {exc}); truncated, ragged or not this format?")


def _meta_array(v):
    """A carried metadata column as numpy (numbers, booleans or text), or None when not carried."""
    a = np.asarray(v)
    if a.dtype.kind == "S":          # bytes: latin-1 never fails, and keeps every byte visible
        return np.char.decode(a, "latin-1")
    return a if a.dtype.kind in "biufU" else None


def load_source(path: str, sha256: str | None = None, hash_file: bool = True) -> Source:
    """Open one rows file: header, metadata and sha256 now; rows later, chunk by chunk.

    ``sha256``: the file's hash when the caller has just computed it (saves a pass);
    ``hash_file=False``: leave ``sha256`` empty for the caller to fill in (certify hashes
    the file on another thread while it certifies the rows).
    """
    ext, (main, raw_meta, skipped) = _open(path)
    if main is None:
        raise InputError(path, f"no 'rows' or 'logits' array (found: {', '.join(map(str, skipped)) or 'nothing'})")
    kind, arr = main
    dtype = arr.dtype_name
    if dtype not in FLOAT_DTYPES:
        kindname = {"int": "integer", "uin": "integer", "com": "complex", "boo": "boolean",
                    "voi": "raw/void (bfloat16 in .npy? use .pt or .safetensors)"}.get(dtype[:3], "")
        raise InputError(path, f"unsupported dtype {dtype} {kindname}".strip() +
                         f"; need one of {', '.join(FLOAT_DTYPES)}")
    if len(arr.shape) == 0:
        raise InputError(path, f"{kind!r} is a 0-d array; need (..., L)")
    L = arr.shape[-1]
    if L < 2:
        raise InputError(path, f"L = {L}: θ needs at least two positions (θ = 0 for L = 1)")
    lead = arr.shape[:-1]
    n = math.prod(lead)          # Python integers (np.prod wraps at 2^63); math.prod(()) is 1
    if n == 0:
        raise InputError(path, "no rows")

    def per_row(shape):
        return tuple(shape) in ((), tuple(lead), (n,))
    try:
        if ext == ".npz":
            raw_meta, more = rd.load_npz_meta(path, raw_meta, per_row)
            skipped = skipped + more
        elif ext == ".safetensors":
            kept = {}
            for k, (a, dt) in raw_meta.items():
                if per_row(a.shape):
                    kept[k] = rd.st_meta_value(a, dt)
                else:
                    skipped.append(k)
            raw_meta = kept
    except (rd.ReadError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(path, f"cannot read metadata ({type(exc).__name__}: {exc})")
    tau = 1.0
    if "tau" in raw_meta:
        t = np.asarray(raw_meta.pop("tau"))
        ok = t.size == 1 and t.dtype.kind in "fiu"
        tv = float(t.reshape(-1)[0]) if ok else float("nan")
        if not (ok and np.isfinite(tv) and tv > 0):
            raise InputError(path, f"tau must be one positive finite number, got shape {t.shape} dtype {t.dtype}")
        tau = tv
    meta = {}
    for k, v in raw_meta.items():
        a = _meta_array(v)
        if a is None or k in RESERVED_META or not k.isprintable() or "/" in k or not per_row(a.shape):
            skipped.append(k)
        else:
            meta[k] = np.full(n, a.item()) if a.ndim == 0 else a.reshape(n)   # a scalar tag applies to every row
    return Source(path=os.path.abspath(path), kind=kind, arr=arr, dtype=dtype, n=n, L=L, tau=tau, meta=meta,
                  skipped=sorted(map(str, skipped)), sha256=sha256 or (file_sha256(path) if hash_file else ""))


def read_rows(src: Source, start: int, stop: int) -> np.ndarray:
    """Stored rows [start, stop) widened exactly to float64 (not yet normalised)."""
    try:
        x = src.arr.read(start, stop)
    except rd.ReadError as exc:
        raise InputError(src.path, str(exc), start)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
        raise InputError(src.path, f"cannot read rows ({type(exc).__name__}: {exc})", start)
    return np.ascontiguousarray(x, dtype=np.float64)


def softmax_rows(x: np.ndarray, tau: float, path: str, start: int) -> np.ndarray:
    """The float64 softmax e/Σe, e = exp(x/τ − max) computed by numpy (what certify stores)."""
    bad = np.isnan(x) | (x == np.inf)
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise InputError(path, "logit is NaN or +inf", start + r)
    with np.errstate(over="ignore"):
        x = x / tau
    over = x == np.inf
    if over.any():
        r = int(np.argmax(over.any(axis=1)))
        raise InputError(path, f"logit/tau overflows float64 (tau = {tau:g}); rescale the logits", start + r)
    mx = x.max(axis=1, keepdims=True)
    if not np.isfinite(mx).all():
        r = int(np.argmax(~np.isfinite(mx[:, 0])))
        raise InputError(path, "every logit is -inf (no positive mass)", start + r)
    e = np.exp(x - mx)
    return np.ascontiguousarray(e / e.sum(axis=1, keepdims=True))


def rows_float64(src: Source, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) as float64 (exact widening, or the float64 softmax for logits)."""
    x = read_rows(src, start, stop)
    return x if src.kind == "rows" else softmax_rows(x, src.tau, src.path, start)


def validate(R: np.ndarray, path: str, offset: int, max_sum_defect: float | None) -> np.ndarray:
    """Reject NaN, ±inf, negative, all-zero rows and sums off 1 by more than max_sum_defect.

    Returns the plain float64 row sums (used only for this check).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        s = R.sum(axis=1)
    if R.size and R.shape[1]:
        # fast path, three reductions: a NaN or ±inf entry makes the sum non-finite (or NaN
        # the min), a negative one the min; any doubt falls through to the detailed checks
        # below, which name the first bad row and entry
        mn, mx = R.min(axis=1), R.max(axis=1)
        ok = (mn >= 0).all() and (mx > 0).all() and (s <= MAX_ROW_SUM).all()
        if ok and max_sum_defect is not None:
            ok = bool((np.abs(s - 1.0) <= max_sum_defect).all())
        if ok:
            return s
    checks = [(np.isnan(R), "NaN entry"), (np.isinf(R), "infinite entry"), (R < 0, "negative entry")]
    for bad, what in checks:
        rows_bad = bad.any(axis=1)
        if rows_bad.any():
            r = int(np.argmax(rows_bad))
            c = int(np.argmax(bad[r]))
            raise InputError(path, f"{what} {float(R[r, c])!r} at position {c}", offset + r)
    big = ~(s <= MAX_ROW_SUM)
    if big.any():
        r = int(np.argmax(big))
        raise InputError(path, f"row sum {s[r]:.6g} exceeds {MAX_ROW_SUM:.3g}, beyond the certified float64 "
                               "kernels; rescale the row (θ does not depend on scale)", offset + r)
    zero = ~(R > 0).any(axis=1)
    if zero.any():
        raise InputError(path, "all-zero row (no positive mass)", offset + int(np.argmax(zero)))
    if max_sum_defect is not None:
        defect = np.abs(s - 1.0)
        if (defect > max_sum_defect).any():
            r = int(np.argmax(defect > max_sum_defect))
            raise InputError(path, f"row sum {s[r]:.6g} is off 1 by {defect[r]:.3g} > --max-sum-defect "
                                   f"{max_sum_defect:g}", offset + r)
    return s
