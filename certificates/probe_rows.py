"""Streaming writer of ``rows.npz`` (the certificates input format) for ``probe``.

``np.savez`` needs every array in memory.  A probe of a long corpus produces far more
rows than fit, so rows are appended to the ``rows.npy`` member of an uncompressed zip
as they are captured (one layer of one batch at a time) and the metadata arrays, which
are small per row, go to temporary raw files that become members at the end.  The
number of rows is known before the forward passes (it is fixed by the token plan), so
the ``.npy`` header can be written first.

Precision contract: rows are stored as float64; the captured float32 (or float64)
probabilities widen exactly, so the stored values are the ones the model computed.
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

META_KEYS = ("layer", "head", "query", "sequence", "seqlen")


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


class RowsWriter:
    """Write (n_rows, L) float64 rows plus int32 metadata into ``path`` without holding them.

    Usage: ``w = RowsWriter(path, n_rows, L, tmpdir)``; ``w.add(rows, layer=..., head=...,
    query=..., sequence=..., seqlen=...)`` any number of times; ``w.close()``.  ``close``
    checks that exactly ``n_rows`` rows were written (a mismatch is a bug, not bad input).
    """

    def __init__(self, path: str, n_rows: int, L: int, tmpdir: str):
        self.path, self.n_rows, self.L, self.written = path, int(n_rows), int(L), 0
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._rows = self._zip.open("rows.npy", "w", force_zip64=True)
        self._rows.write(_npy_header((self.n_rows, self.L), np.float64))
        self._meta_paths = {k: os.path.join(tmpdir, f".meta-{k}.bin") for k in META_KEYS}
        self._meta = {k: open(p, "wb") for k, p in self._meta_paths.items()}

    def add(self, rows: np.ndarray, **meta) -> None:
        rows = np.asarray(rows, dtype=np.float64)
        n, width = rows.shape
        if width > self.L:
            raise ValueError(f"row width {width} exceeds the planned L = {self.L}")
        if width < self.L:      # zero padding is neutral for θ (C6); causal zeros stay zeros
            rows = np.concatenate([rows, np.zeros((n, self.L - width))], axis=1)
        if self.written + n > self.n_rows:
            raise ValueError(f"more rows than planned ({self.written + n} > {self.n_rows})")
        self._rows.write(np.ascontiguousarray(rows).tobytes())
        for k in META_KEYS:
            v = np.broadcast_to(np.asarray(meta[k], dtype=np.int32), (n,))
            self._meta[k].write(np.ascontiguousarray(v).tobytes())
        self.written += n

    def close(self) -> None:
        if self.written != self.n_rows:
            self.abort()
            raise RuntimeError(f"rows.npz: wrote {self.written} rows, planned {self.n_rows}")
        self._rows.close()
        for k in META_KEYS:
            self._meta[k].close()
            with self._zip.open(f"{k}.npy", "w", force_zip64=True) as out, open(self._meta_paths[k], "rb") as f:
                out.write(_npy_header((self.n_rows,), np.int32))
                for block in iter(lambda: f.read(1 << 20), b""):
                    out.write(block)
            os.remove(self._meta_paths[k])
        self._zip.close()

    def abort(self) -> None:
        """Close every handle and delete the temporary metadata files (the caller removes the folder)."""
        for f in self._meta.values():
            f.close()
        for p in self._meta_paths.values():
            if os.path.exists(p):
                os.remove(p)
        try:
            self._rows.close()
            self._zip.close()
        except (ValueError, OSError, RuntimeError):
            pass
