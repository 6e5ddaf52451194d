"""Where ``probe``'s captured rows go: a streaming ``rows.npz`` writer, or memory (Python API).

``np.savez`` needs every array in memory.  A probe of a long corpus produces far more
rows than fit, and neither their number nor their widths are known before the forward
passes (an encoder's length, image patches, cross-attention over the encoder), so rows
are appended to a temporary raw file as captured (one layer of one batch at a time) and
the per-row metadata to small temporary files.  ``close`` then streams them into the
members of an uncompressed zip, ``rows.npy`` first, each block zero-padded on the right
to the widest row seen: one file, one L.  Zero padding is neutral for θ (C6) and the
``seqlen`` column keeps each row's own width, so ``rows[i, :seqlen[i]]`` is the row the
module produced.

Precision contract: rows are stored as float64; the captured float32 (or bfloat16,
float16, float64) probabilities widen exactly, so the stored values are the ones the
model computed.

Columns: ``rows`` (N, L) float64; int32 ``layer``, ``head``, ``query``, ``sequence``,
``seqlen``; strings ``stack`` ("encoder" | "decoder") and ``kind`` ("self" | "cross").
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

INT_KEYS = ("layer", "head", "query", "sequence", "seqlen")
STR_KEYS = {"stack": ("encoder", "decoder"), "kind": ("self", "cross")}
META_KEYS = INT_KEYS + tuple(STR_KEYS)


def _npy_header(shape: tuple, dtype: np.dtype) -> bytes:
    """The .npy header for a C-ordered array of this shape and dtype (version 1.0 or 2.0)."""
    import io
    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:          # header too long for 1.0 (huge shapes): numpy's 2.0 layout
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()


def _str_dtype(key: str) -> np.dtype:
    return np.dtype(f"<U{max(map(len, STR_KEYS[key]))}")


def _columns(n: int, meta: dict) -> dict:
    """The metadata of n rows as arrays of their stored dtypes (str keys as int8 codes)."""
    out = {}
    for k in INT_KEYS:
        out[k] = np.ascontiguousarray(np.broadcast_to(np.asarray(meta[k], dtype=np.int32), (n,)))
    for k, values in STR_KEYS.items():
        v = np.broadcast_to(np.asarray(meta[k]), (n,))
        codes = np.zeros(n, dtype=np.int8)
        for c, name in enumerate(values):
            codes[v == name] = c
        if not np.isin(v, values).all():
            raise ValueError(f"{k} must be one of {values}, got {sorted(set(v.tolist()) - set(values))}")
        out[k] = codes
    return out


class RowsWriter:
    """Write float64 rows of any widths plus their metadata into ``path`` without holding them.

    Usage: ``w = RowsWriter(path, tmpdir)``; ``w.add(rows, layer=..., head=..., query=...,
    sequence=..., seqlen=..., stack=..., kind=...)`` any number of times; ``n, L = w.close()``.
    ``expect_rows``: when given, ``close`` checks that exactly that many rows came (a
    mismatch is a bug, not bad input).  ``abort`` removes everything it wrote.
    """

    def __init__(self, path: str, tmpdir: str, expect_rows: int | None = None):
        self.path, self.expect, self.written, self.L = path, expect_rows, 0, 0
        self._blocks: list[tuple[int, int]] = []          # (rows, width) of each add, in order
        self._raw_path = os.path.join(tmpdir, ".rows.bin")
        self._meta_paths = {k: os.path.join(tmpdir, f".meta-{k}.bin") for k in META_KEYS}
        self._files = {}
        try:
            self._raw = open(self._raw_path, "wb")
            for k, p in self._meta_paths.items():
                self._files[k] = open(p, "wb")
        except BaseException:
            self.abort()
            raise

    def add(self, rows: np.ndarray, **meta) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        if rows.ndim != 2:
            raise ValueError(f"rows of shape {rows.shape}; need (n, L)")
        n, width = rows.shape
        if n == 0:
            return
        cols = _columns(n, meta)
        self._raw.write(rows.tobytes())
        for k, v in cols.items():
            self._files[k].write(v.tobytes())
        self._blocks.append((n, width))
        self.written += n
        self.L = max(self.L, width)

    def close(self) -> tuple[int, int]:
        """Assemble ``path``; returns (rows, L).  The temporary files are gone afterwards."""
        if self.expect is not None and self.written != self.expect:
            self.abort()
            raise RuntimeError(f"rows.npz: wrote {self.written} rows, planned {self.expect}")
        try:
            for f in (self._raw, *self._files.values()):
                f.close()
            n, L = self.written, self.L
            with zipfile.ZipFile(self.path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
                with z.open("rows.npy", "w", force_zip64=True) as out, open(self._raw_path, "rb") as f:
                    out.write(_npy_header((n, L), np.float64))
                    for rows, width in self._blocks:
                        step = max(1, (1 << 20) // max(width, 1))      # ≤ 8 MiB of rows at a time
                        for a in range(0, rows, step):
                            k = min(step, rows - a)
                            block = np.frombuffer(f.read(8 * k * width), dtype=np.float64).reshape(k, width)
                            if width < L:     # zero padding is neutral for θ (C6)
                                block = np.concatenate([block, np.zeros((k, L - width))], axis=1)
                            out.write(np.ascontiguousarray(block).tobytes())
                for k in INT_KEYS:
                    with z.open(f"{k}.npy", "w", force_zip64=True) as out, open(self._meta_paths[k], "rb") as f:
                        out.write(_npy_header((n,), np.int32))
                        for block in iter(lambda: f.read(1 << 20), b""):
                            out.write(block)
                for k, values in STR_KEYS.items():
                    dt = _str_dtype(k)
                    names = np.asarray(values, dtype=dt)
                    with z.open(f"{k}.npy", "w", force_zip64=True) as out, open(self._meta_paths[k], "rb") as f:
                        out.write(_npy_header((n,), dt))
                        for block in iter(lambda: f.read(1 << 18), b""):
                            out.write(names[np.frombuffer(block, dtype=np.int8)].tobytes())
        except BaseException:
            self.abort()
            raise
        self._remove_temporaries()
        return self.written, self.L

    def _remove_temporaries(self) -> None:
        for p in (self._raw_path, *self._meta_paths.values()):
            if os.path.exists(p):
                os.remove(p)

    def abort(self) -> None:
        """Close every handle and delete the temporary files (the caller removes the folder)."""
        for f in (getattr(self, "_raw", None), *self._files.values()):
            if f is not None:
                f.close()
        self._remove_temporaries()


class RowsCollector:
    """The same interface in memory, for the Python API: ``result()`` gives the padded rows."""

    def __init__(self):
        self._rows: list[np.ndarray] = []
        self._meta: list[dict] = []
        self.written, self.L = 0, 0

    def add(self, rows: np.ndarray, **meta) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        if rows.shape[0] == 0:
            return
        self._meta.append(_columns(rows.shape[0], meta))
        self._rows.append(rows)
        self.written += rows.shape[0]
        self.L = max(self.L, rows.shape[1])

    def result(self) -> tuple[np.ndarray, dict]:
        """(rows (N, L) float64, zero-padded; {column: array}) with str columns as strings."""
        L = self.L
        rows = np.zeros((self.written, L))
        a = 0
        for r in self._rows:
            rows[a:a + len(r), :r.shape[1]] = r
            a += len(r)
        meta = {}
        for k in INT_KEYS:
            meta[k] = np.concatenate([m[k] for m in self._meta]) if self._meta else np.zeros(0, np.int32)
        for k, values in STR_KEYS.items():
            codes = np.concatenate([m[k] for m in self._meta]) if self._meta else np.zeros(0, np.int8)
            meta[k] = np.asarray(values, dtype=_str_dtype(k))[codes]
        return rows, meta
