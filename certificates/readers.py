"""Container readers that never load the whole row array.

Each reader returns ``(main, meta, skipped)``:

* ``main``: ``(name, Array)`` for the ``rows`` or ``logits`` array, where :class:`Array`
  knows its shape and dtype and reads a range of flattened rows on demand;
* ``meta``: ``{name: numpy array}`` for the other arrays whose shape is per row or scalar
  (they are O(rows), never O(rows·L)), read in full;
* ``skipped``: names of arrays not carried (wrong shape, or a dtype with no numpy form).

Memory: ``.npy`` and uncompressed ``.npz`` members and ``.safetensors`` tensors are
read with ``pread``, only the rows asked for; compressed ``.npz`` members are decompressed as a stream, front to back;
``.pt`` files are loaded with ``torch.load(mmap=True)`` (the zip format) so tensor data
stays in the page cache.  Only the rows asked for are converted.
"""
from __future__ import annotations

import json
import os
import struct
import zipfile

import numpy as np

MAIN_KEYS = ("rows", "logits")
# safetensors dtype names that have an exact numpy form (BF16 is widened by a bit shift)
ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
             "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


class ReadError(Exception):
    """A container problem; the caller adds the file name."""


def _bf16_to_f32(u16: np.ndarray) -> np.ndarray:
    # bfloat16 is the top half of a float32: the widening is exact
    return (np.asarray(u16, dtype=np.uint32) << 16).view(np.float32)


class Array:
    """A row array in its stored form; ``read(s, e)`` returns flattened rows [s, e) as a numpy array."""

    def __init__(self, shape, dtype_name, read):
        self.shape, self.dtype_name, self._read = tuple(int(d) for d in shape), dtype_name, read

    def read(self, s, e):
        return self._read(s, e)


def _mmap_array(path, dtype, shape, offset, fortran=False, name=None):
    """Rows of a raw C-order array at ``offset`` in ``path``, read with pread chunk by chunk.

    Plain reads (not a memory map) keep the resident set to the chunk asked for; a
    Fortran-order .npy is memory-mapped and gathered row by row instead.
    """
    dtype = np.dtype(dtype)
    n_items = int(np.prod(shape)) if shape else 1
    L = shape[-1] if shape else 1
    name = name or dtype.name
    if n_items == 0:
        return Array(shape, name, lambda s, e: np.zeros((0, L), dtype))
    if fortran:
        mm = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape), order="F")

        def read_f(s, e):
            idx = np.unravel_index(np.arange(s, e), shape[:-1])
            return np.asarray(mm[idx])
        return Array(shape, name, read_f)
    row = L * dtype.itemsize

    def read(s, e):
        with open(path, "rb") as f:
            buf = os.pread(f.fileno(), (e - s) * row, offset + s * row)
        if len(buf) != (e - s) * row:
            raise ReadError(f"truncated: rows {s}…{e - 1} lie beyond the end of the file")
        return np.frombuffer(buf, dtype=dtype).reshape(e - s, L)
    return Array(shape, name, read)


def _npy_header(f):
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f, max_header_size=1 << 20)
    return np.lib.format.read_array_header_2_0(f, max_header_size=1 << 20)


def read_npy(path):
    with open(path, "rb") as f:
        shape, fortran, dtype = _npy_header(f)
        offset = f.tell()
    if dtype.hasobject:
        raise ReadError("object array (ragged rows?); store a numeric array")
    need = int(np.prod(shape)) * dtype.itemsize
    if os.path.getsize(path) - offset < need:
        raise ReadError(f"truncated: header promises {need} data bytes")
    return ("rows", _mmap_array(path, dtype, shape, offset, fortran)), {}, []


class ZipMember:
    """Sequential reader of one .npy member of a zip archive (any compression)."""

    def __init__(self, path, info):
        self.path, self.info = path, info
        with zipfile.ZipFile(path) as z, z.open(info) as f:
            self.shape, self.fortran, self.dtype = _npy_header(f)
            self.header_len = f.tell()
        self._f, self._pos, self._zip = None, None, None

    def _seek(self, byte):
        if self._f is None or self._pos > byte:
            if self._zip is None:
                self._zip = zipfile.ZipFile(self.path)
            self._f = self._zip.open(self.info)
            self._f.read(self.header_len)
            self._pos = 0
        while self._pos < byte:                  # skip forward in bounded blocks
            got = self._f.read(min(byte - self._pos, 1 << 24))
            if not got:
                raise ReadError("truncated archive member")
            self._pos += len(got)

    def read(self, s, e):
        L = self.shape[-1]
        row_bytes = L * self.dtype.itemsize
        self._seek(s * row_bytes)
        buf = self._f.read((e - s) * row_bytes)
        if len(buf) != (e - s) * row_bytes:
            raise ReadError("truncated archive member")
        self._pos += len(buf)
        return np.frombuffer(buf, dtype=self.dtype).reshape(e - s, L)


def stored_offset(path, info):
    """Offset of an uncompressed member's data in the file (local header is 30 bytes + names)."""
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise ReadError("bad zip local header")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + n_name + n_extra


def read_npz(path):
    with zipfile.ZipFile(path) as z:
        infos = {i.filename[:-4]: i for i in z.infolist() if i.filename.endswith(".npy")}
    main = next((k for k in MAIN_KEYS if k in infos), None)
    if main is None:
        return None, {}, sorted(infos)
    meta, skipped, arr = {}, [], None
    for k, info in infos.items():
        m = ZipMember(path, info)
        if m.dtype.hasobject:
            raise ReadError(f"array {k!r} holds Python objects (ragged rows?); store numeric arrays")
        if k == main:
            if info.compress_type == zipfile.ZIP_STORED and not m.fortran:
                arr = _mmap_array(path, m.dtype, m.shape, stored_offset(path, info) + m.header_len)
            elif m.fortran and len(m.shape) > 1:
                raise ReadError(f"{k!r} is a compressed Fortran-order array; store it in C order")
            else:
                arr = Array(m.shape, m.dtype.name, m.read)
            continue
        meta[k] = (m, info)
    return (main, arr), meta, skipped


def load_npz_meta(path, pending, keep):
    """Read the metadata members that ``keep(shape)`` accepts; the rest are skipped."""
    out, skipped = {}, []
    with zipfile.ZipFile(path) as z:
        for k, (m, info) in pending.items():
            if k == "tau" or keep(m.shape):
                with z.open(info) as f:
                    out[k] = np.lib.format.read_array(f, allow_pickle=False)
            else:
                skipped.append(k)
    return out, skipped


def read_safetensors(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise ReadError("too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > min(size - 8, 100 << 20):
            raise ReadError("header length beyond the file")
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReadError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ReadError("header is not a JSON object")
    header.pop("__metadata__", None)
    base = 8 + n
    tensors = {}
    for k, h in header.items():
        try:
            dt, shape, (b, e) = h["dtype"], [int(d) for d in h["shape"]], h["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ReadError(f"tensor {k!r}: malformed header entry") from None
        if not (0 <= b <= e and base + e <= size) or any(d < 0 for d in shape):
            raise ReadError(f"tensor {k!r}: data offsets outside the file")
        if dt in ST_DTYPES and e - b != int(np.prod(shape)) * np.dtype(ST_DTYPES[dt]).itemsize:
            raise ReadError(f"tensor {k!r}: {e - b} bytes for shape {shape}")
        tensors[k] = (dt, tuple(shape), base + b)
    main = next((k for k in MAIN_KEYS if k in tensors), None)
    if main is None:
        return None, {}, sorted(tensors)
    dt, shape, off = tensors.pop(main)
    if dt not in ("F64", "F32", "F16", "BF16"):
        arr = Array(shape, {"I64": "int64", "I32": "int32"}.get(dt, dt.lower()), None)
    elif dt == "BF16":
        inner = _mmap_array(path, "<u2", shape, off)
        arr = Array(shape, "bfloat16", lambda s, e: _bf16_to_f32(inner.read(s, e)))
    else:
        arr = _mmap_array(path, ST_DTYPES[dt], shape, off)
    meta, skipped = {}, []
    for k, (dt, shp, off) in tensors.items():
        if dt not in ST_DTYPES:
            skipped.append(k)
            continue
        a = _mmap_array(path, ST_DTYPES[dt], shp, off)
        meta[k] = (a, dt)
    return (main, arr), meta, skipped


def st_meta_value(a, dt):
    v = np.asarray(a.read(0, int(np.prod(a.shape[:-1])) if a.shape else 1)).reshape(a.shape)
    return _bf16_to_f32(v) if dt == "BF16" else v


# torch dtypes with an exact numpy form (bfloat16 → float32 is exact widening)
def _torch_numpy(t):
    import torch
    ok = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.float32, torch.float64, torch.bfloat16}
    if not isinstance(t, torch.Tensor) or t.dtype not in ok or t.layout != torch.strided or t.is_nested \
            or t.is_quantized:
        return None
    t = t.detach().resolve_neg().resolve_conj()
    return (t.to(torch.float32) if t.dtype == torch.bfloat16 else t).numpy()


def read_pt(path):
    import warnings

    import torch
    with warnings.catch_warnings():          # torch's notes on exotic dtypes are not the user's problem
        warnings.simplefilter("ignore")
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc) and "zip" not in str(exc):
                raise
            obj = torch.load(path, map_location="cpu", weights_only=True)   # legacy format: no mmap
    if not isinstance(obj, dict):
        obj = {"rows": obj}
    skipped = [repr(k) for k in obj if not isinstance(k, str)]
    obj = {k: v for k, v in obj.items() if isinstance(k, str)}
    main = next((k for k in MAIN_KEYS if k in obj), None)
    if main is None:
        return None, {}, sorted(obj) + skipped
    t = obj.pop(main)
    if not isinstance(t, torch.Tensor):
        raise ReadError(f"{main!r} is a {type(t).__name__}, not a tensor")
    if t.layout != torch.strided or t.is_nested:
        raise ReadError(f"{main!r} is a {'nested' if t.is_nested else str(t.layout)} tensor; store a dense tensor")
    if t.is_quantized:
        raise ReadError(f"{main!r} is a quantized tensor ({t.dtype}); store float rows")
    name = str(t.dtype).replace("torch.", "")
    if t.dim() == 0:
        arr = Array((), name, None)
    else:
        flat = t.reshape(-1, t.shape[-1])      # a view when contiguous (the usual case)

        def read(s, e):
            c = flat[s:e].detach().resolve_neg().resolve_conj()
            return (c.to(torch.float64) if c.is_floating_point() else c).numpy()
        arr = Array(tuple(t.shape), name, read)
    meta = {}
    for k, v in obj.items():
        a = _torch_numpy(v) if isinstance(v, torch.Tensor) else \
            np.asarray(v) if isinstance(v, (int, float, bool)) and not isinstance(v, complex) else None
        if a is None:
            skipped.append(k)
        else:
            meta[k] = a
    return (main, arr), meta, skipped
