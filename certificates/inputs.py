"""Reading attention-row files (formats in shared/ARCHITECTURE.md) and rejecting bad input.

Every problem becomes an :class:`InputError` whose message is one line naming
the file, the row (when there is one) and the problem; the command line turns
it into exit code 2 without a traceback.

What is certified: for ``rows`` input, the stored values widened exactly to
float64.  For ``logits`` input (optional scalar ``tau``, default 1), the
float64 row ``e / Σe`` with ``e = exp(logits/τ − max)`` computed here by numpy;
that float64 array *is* the certified row (its exact normalisation differs
from the real softmax by float64 rounding only), and its sha256 is recorded
so that ``verify`` can confirm it rebuilt the same rows.
"""
from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

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
    data: object              # (N, L) array-like in its stored dtype (numpy, possibly memory-mapped)
    dtype: str
    tau: float = 1.0
    meta: dict = field(default_factory=dict)
    sha256: str = ""

    @property
    def n(self) -> int:
        return self.data.shape[0]

    @property
    def L(self) -> int:
        return self.data.shape[1]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Squares of row totals must stay finite in the float64 kernels (2^500 squared is < 2^1024).
MAX_ROW_SUM = 2.0 ** 500


def _meta_to_numpy(v):
    """Metadata tensors of any dtype (layer, head, step …) as numpy; no float requirement."""
    import torch
    t = v.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return t.numpy()


def _torch_to_numpy(path, t):
    import torch
    if not isinstance(t, torch.Tensor):
        raise InputError(path, f"expected a tensor, got {type(t).__name__}")
    name = str(t.dtype).replace("torch.", "")
    if name not in FLOAT_DTYPES:
        raise InputError(path, f"unsupported dtype {name} (need one of {', '.join(FLOAT_DTYPES)})")
    # bfloat16/float16/float32 → float64 is exact widening
    return t.detach().cpu().to(torch.float64).numpy(), name


def _read(path):
    """(arrays dict, dtype name of the main array) from any supported container."""
    ext = os.path.splitext(path)[1].lower()
    if not os.path.isfile(path):
        raise InputError(path, "no such file")
    if os.path.getsize(path) == 0:
        raise InputError(path, "empty file")
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        elif ext == ".npy":
            arrays = {"rows": np.load(path, mmap_mode="r", allow_pickle=False)}
        elif ext == ".pt":
            import torch
            obj = torch.load(path, map_location="cpu", weights_only=True)
            obj = obj if isinstance(obj, dict) else {"rows": obj}
            arrays = {}
            for k, v in obj.items():
                arrays[k] = v
        elif ext == ".safetensors":
            from safetensors.torch import load_file
            arrays = dict(load_file(path))
        else:
            raise InputError(path, f"unknown file type {ext!r} (use .npz, .npy, .pt or .safetensors)")
    except InputError:
        raise
    except (ValueError, OSError, EOFError, RuntimeError, zipfile.BadZipFile, KeyError, Exception) as exc:
        raise InputError(path, f"cannot read ({type(exc).__name__}: {exc}); truncated, ragged or not this format?")
    return arrays


def _as_numpy(path, key, v):
    if hasattr(v, "detach"):
        return _torch_to_numpy(path, v)
    if not isinstance(v, np.ndarray):
        raise InputError(path, f"{key!r} is not an array")
    return v, v.dtype.name


def load_source(path: str) -> Source:
    arrays = _read(path)
    kind = "rows" if "rows" in arrays else "logits" if "logits" in arrays else None
    if kind is None:
        raise InputError(path, f"no 'rows' or 'logits' array (found: {', '.join(sorted(arrays)) or 'nothing'})")
    data, dtype = _as_numpy(path, kind, arrays[kind])
    if data.dtype.kind != "f" or dtype not in FLOAT_DTYPES:
        kindname = {"i": "integer", "u": "integer", "c": "complex", "b": "boolean", "O": "object (ragged?)",
                    "V": "raw/void (bfloat16 in .npy? use .pt or .safetensors)"}.get(data.dtype.kind, "")
        raise InputError(path, f"unsupported dtype {dtype} {kindname}".strip() +
                         f"; need one of {', '.join(FLOAT_DTYPES)}")
    if data.ndim == 0:
        raise InputError(path, f"{kind!r} is a 0-d array; need (..., L)")
    L = data.shape[-1]
    if L < 2:
        raise InputError(path, f"L = {L}: θ needs at least two positions (θ = 0 for L = 1)")
    lead = data.shape[:-1]
    n = int(np.prod(lead)) if lead else 1
    if n == 0:
        raise InputError(path, "no rows")
    data = data.reshape(n, L)
    tau = 1.0
    if "tau" in arrays:
        t, _ = _as_numpy(path, "tau", arrays["tau"])
        if t.size != 1 or t.dtype.kind not in "fiu" or not np.isfinite(float(t.reshape(-1)[0])) \
                or float(t.reshape(-1)[0]) <= 0:
            raise InputError(path, f"tau must be one positive finite number, got {t!r}")
        tau = float(t.reshape(-1)[0])
    meta = {}
    for k, v in arrays.items():
        if k in META_KEYS_SKIP:
            continue
        if hasattr(v, "detach"):
            a = _meta_to_numpy(v)
        elif isinstance(v, np.ndarray):
            a = v
        else:
            continue
        if a.ndim == 0:
            meta[k] = np.full(n, a.item())          # a scalar tag (e.g. run, step) applies to every row
        elif a.shape == lead or (a.ndim == 1 and a.shape[0] == n):
            meta[k] = np.asarray(a).reshape(n)
    return Source(path=os.path.abspath(path), kind=kind, data=data, dtype=dtype, tau=tau, meta=meta,
                  sha256=file_sha256(path))


def rows_float64(src: Source, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) as float64 (exact widening, or the float64 softmax for logits)."""
    x = np.asarray(src.data[start:stop], dtype=np.float64)
    if src.kind == "rows":
        return np.ascontiguousarray(x)
    bad = np.isnan(x) | (x == np.inf)
    if bad.any():
        r = int(np.argmax(bad.any(axis=1)))
        raise InputError(src.path, "logit is NaN or +inf", start + r)
    x = x / src.tau
    mx = x.max(axis=1, keepdims=True)
    if not np.isfinite(mx).all():
        r = int(np.argmax(~np.isfinite(mx[:, 0])))
        raise InputError(src.path, "every logit is -inf (no positive mass)", start + r)
    e = np.exp(x - mx)
    return np.ascontiguousarray(e / e.sum(axis=1, keepdims=True))


def validate(R: np.ndarray, path: str, offset: int, max_sum_defect: float | None) -> np.ndarray:
    """Reject NaN, ±inf, negative, all-zero rows and sums off 1 by more than max_sum_defect.

    Returns the plain float64 row sums (used only for this check).
    """
    checks = [(np.isnan(R), "NaN entry"), (np.isinf(R), "infinite entry"), (R < 0, "negative entry")]
    for bad, what in checks:
        rows_bad = bad.any(axis=1)
        if rows_bad.any():
            r = int(np.argmax(rows_bad))
            c = int(np.argmax(bad[r]))
            raise InputError(path, f"{what} {float(R[r, c])!r} at position {c}", offset + r)
    with np.errstate(over="ignore"):
        s = R.sum(axis=1)
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
