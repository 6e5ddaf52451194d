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

Trust: a header must describe exactly the bytes that follow it (shape products in Python
integers, which cannot wrap), and an .npz must pass :func:`npz_members` (one reading: what
numpy.load shows is what is read here).  Every failure is a :class:`ReadError`, one line.
"""
from __future__ import annotations

import json
import math
import os
import struct
import zipfile
import zlib

import numpy as np

MAIN_KEYS = ("rows", "logits")
# safetensors dtype names that have an exact numpy form (BF16 is widened by a bit shift)
ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
             "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


class ReadError(Exception):
    """A container problem; the caller adds the file name."""


# What a damaged compressed member can raise while it is read: zlib.error and lzma.LZMAError
# for corrupt streams, BadZipFile for a CRC mismatch, EOFError for a stream cut short, OSError
# (bz2) and ValueError (a garbled .npy header).  None of them is a subclass of another.
_MEMBER_ERRORS = (zlib.error, zipfile.BadZipFile, EOFError, OSError, ValueError)
try:
    import lzma
    _MEMBER_ERRORS += (lzma.LZMAError,)
except ImportError:          # Python built without lzma: zipfile cannot read such members either
    lzma = None


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
    n_items = math.prod(shape)          # Python integers: a numpy product wraps silently at 2^63
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


def _data_bytes(shape, dtype):
    """Bytes of data a .npy header promises, as an exact Python integer.

    numpy's own product (np.prod) is int64 and wraps: (274177, 67280421310721, 4) float32
    "promises" 16 bytes there, so a tiny file would pass as one row.  math.prod cannot wrap.
    """
    if any(d < 0 for d in shape):
        raise ReadError(f"negative dimension in shape {tuple(shape)}")
    return math.prod(shape) * dtype.itemsize


def read_npy(path):
    with open(path, "rb") as f:
        shape, fortran, dtype = _npy_header(f)
        offset = f.tell()
    if dtype.hasobject:
        raise ReadError("object array (ragged rows?); store a numeric array")
    # the header must describe exactly the bytes that follow it, before its shape is used for anything
    need, have = _data_bytes(shape, dtype), os.path.getsize(path) - offset
    if need != have:
        raise ReadError(f"header promises {need} data bytes, the file has {have}"
                        f"{' (truncated?)' if have < need else ''}")
    return ("rows", _mmap_array(path, dtype, shape, offset, fortran)), {}, []


# ---------------------------------------------------------------- .npz: one reading of the archive
# A .npz is a zip, and a zip can be built so that numpy.load and this module see different arrays:
# numpy.load(f)["rows"] prefers a member named "rows" to "rows.npy", zipfile keeps only the last of
# two members with one name, and stray or overlapping bytes can hide a second archive.  npz_members
# accepts only the plain layout numpy and zipfile write, so that there is one reading of the file.

_SIG_LOCAL, _SIG_CENTRAL, _SIG_DESCRIPTOR = b"PK\x03\x04", b"PK\x01\x02", b"PK\x07\x08"
_SIG_END, _SIG_END64, _SIG_LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
_END = struct.Struct("<4s4H2LH")               # end of central directory record, 22 bytes + comment
_LOCATOR64 = struct.Struct("<4sLQL")           # zip64 end record locator, 20 bytes
_END64 = struct.Struct("<4sQ2H2L4Q")           # zip64 end record without extensible data, 56 bytes
_CENTRAL = struct.Struct("<4s4B4H3L5H2L")      # central directory entry, 46 bytes + name + extra + comment
_LOCAL = struct.Struct("<4s5H3L2H")            # local file header, 30 bytes + name + extra
_ZIP64_EXTRA = 0x0001
_MAX32 = 0xFFFFFFFF


def _readable_methods():
    methods = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}          # zlib is always there with numpy
    try:
        import bz2  # noqa: F401
        methods.add(zipfile.ZIP_BZIP2)
    except ImportError:
        pass
    if lzma is not None:
        methods.add(zipfile.ZIP_LZMA)
    return methods


def _pread(fd, n, at):
    return os.pread(fd, n, at) if n > 0 else b""


def _end_records(fd, size):
    """(start of the end records, entry count, central directory size, its offset).

    The end record is the one whose declared comment ends exactly at the end of the file; the
    zip64 end record and locator, when present, must sit immediately before it.
    """
    tail_at = max(0, size - (_END.size + 0xFFFF))
    tail = _pread(fd, size - tail_at, tail_at)
    p, overshoot = tail.rfind(_SIG_END), None
    while p >= 0:
        if p + _END.size <= len(tail):
            end = p + _END.size + _END.unpack_from(tail, p)[-1]
            if end == len(tail):
                break
            if end < len(tail) and overshoot is None:
                overshoot = len(tail) - end
        p = tail.rfind(_SIG_END, 0, p)
    if p < 0:
        if overshoot is not None:
            raise ReadError(f"{overshoot} bytes after the end of the archive")
        raise ReadError("not a zip archive (truncated?)")
    _, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, n_comment = _END.unpack_from(tail, p)
    # without a comment zipfile takes the last 22 bytes, as here; with one it takes the last
    # signature in the tail, which must then be this one
    if n_comment and tail.find(_SIG_END, p + 1) >= 0:
        raise ReadError("the archive comment holds a second end-of-archive signature")
    end_at = tail_at + p
    loc_at = end_at - _LOCATOR64.size
    if loc_at >= 0 and _pread(fd, 4, loc_at) == _SIG_LOCATOR64:
        _, z_disk, z_at, z_disks = _LOCATOR64.unpack(_pread(fd, _LOCATOR64.size, loc_at))
        # zipfile reads the zip64 record at a fixed 56 bytes before the locator, whatever the
        # locator says: demand that both agree (no "extensible data")
        if z_at != loc_at - _END64.size or z_disk != 0 or z_disks > 1:
            raise ReadError("zip64 end record is not where its locator says (or spans disks)")
        sig, rec_size, _, _, disk, cd_disk, n_disk, n_total, cd_size, cd_offset = \
            _END64.unpack(_pread(fd, _END64.size, z_at))
        if sig != _SIG_END64 or rec_size != _END64.size - 12:
            raise ReadError("damaged zip64 end record")
        end_at = z_at
    if disk != 0 or cd_disk != 0 or n_disk != n_total:
        raise ReadError("multi-disk archive")
    if cd_offset + cd_size != end_at:
        gap = end_at - cd_offset - cd_size
        raise ReadError(f"the central directory does not end where the end record starts ({gap} bytes "
                        f"{'prepended or inserted' if gap > 0 else 'missing'}; truncated or concatenated?)")
    return end_at, n_total, cd_size, cd_offset


def _central_entries(cd):
    """[(raw name, flags, method, crc, compressed size, size, local header offset)] of a central directory."""
    out, pos = [], 0
    while pos < len(cd):
        if pos + _CENTRAL.size > len(cd) or cd[pos:pos + 4] != _SIG_CENTRAL:
            raise ReadError("damaged central directory")
        f = _CENTRAL.unpack_from(cd, pos)
        flags, method, crc, csize, usize, n_name, n_extra, n_comment, offset = \
            f[5], f[6], f[9], f[10], f[11], f[12], f[13], f[14], f[18]
        name = cd[pos + _CENTRAL.size:pos + _CENTRAL.size + n_name]
        extra = cd[pos + _CENTRAL.size + n_name:pos + _CENTRAL.size + n_name + n_extra]
        pos += _CENTRAL.size + n_name + n_extra + n_comment
        if pos > len(cd):
            raise ReadError("damaged central directory")
        # zip64: each of these 32-bit fields that reads 0xFFFFFFFF is stored, in this order, as
        # 8 bytes in the zip64 extra field
        values, wide = [usize, csize, offset], _zip64_field(extra)
        if wide is not None:
            for j, v in enumerate(values):
                if v == _MAX32:
                    if len(wide) < 8:
                        raise ReadError(f"member {name.decode('latin-1')!r}: short zip64 extra field")
                    values[j], wide = struct.unpack_from("<Q", wide)[0], wide[8:]
        usize, csize, offset = values
        out.append((name, flags, method, crc, csize, usize, offset))
    return out


def _zip64_field(extra):
    """The payload of the zip64 extra field (id 1) of an extra block, or None."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, n = struct.unpack_from("<HH", extra, pos)
        if tag == _ZIP64_EXTRA:
            return extra[pos + 4:pos + 4 + n]
        pos += 4 + n
    return None


def _member_end(fd, name, raw_name, flags, crc, csize, usize, offset):
    """Where member ``name`` ends (local header + data + data descriptor), checking its local header."""
    head = _pread(fd, _LOCAL.size, offset)
    if len(head) < _LOCAL.size or head[:4] != _SIG_LOCAL:
        raise ReadError(f"member {name!r}: no local header at offset {offset}")
    n_name, n_extra = _LOCAL.unpack(head)[-2:]
    local = _pread(fd, n_name + n_extra, offset + _LOCAL.size)
    if local[:n_name] != raw_name:
        raise ReadError(f"member {name!r}: its local header names it {local[:n_name].decode('latin-1')!r}")
    end = offset + _LOCAL.size + n_name + n_extra + csize
    if not flags & 0x08:
        return end
    # flag bit 3: a data descriptor follows the data: [signature] crc, sizes (8-byte sizes with zip64);
    # accept the one reading whose fields agree with the central directory
    wide_first = _zip64_field(local[n_name:]) is not None
    raw = _pread(fd, 24, end)
    for fmt in (("<LQQ", "<LLL") if wide_first else ("<LLL", "<LQQ")):
        n = struct.calcsize(fmt)
        for skip in ((4, 0) if raw[:4] == _SIG_DESCRIPTOR else (0,)):
            if len(raw) >= skip + n and struct.unpack_from(fmt, raw, skip) == (crc, csize, usize):
                return end + skip + n
    raise ReadError(f"member {name!r}: its data descriptor does not match the central directory")


def npz_members(path, expected=None) -> dict[str, zipfile.ZipInfo]:
    """{array name: ZipInfo} of an .npz, after checking that the archive has one plain reading.

    Accepted: members named ``<name>.npy``, each once, unencrypted, in a compression zipfile
    reads, laid out as numpy and zipfile write them: local header + data (+ data descriptor)
    back to back from offset 0, then the central directory, the zip64 end records if any and
    the end record with its comment, ending at the end of the file.  Anything else (a member
    that numpy.load would prefer to ours, a hidden or overlapping member, stray bytes) is a
    ReadError naming the member.  ``expected``: the exact set of names the archive must hold.
    """
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        end_at, n_total, cd_size, cd_offset = _end_records(fd, size)
        entries = _central_entries(_pread(fd, cd_size, cd_offset))
        if len(entries) != n_total:
            raise ReadError(f"the end record counts {n_total} members, the central directory lists {len(entries)}")
        try:
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, UnicodeDecodeError,
                struct.error) as exc:
            raise ReadError(f"not a readable zip archive ({type(exc).__name__}: {exc})") from None
        # the ZipInfo objects handed out must describe exactly the entries checked here
        if len(infos) != len(entries) or any(
                (i.flag_bits, i.compress_type, i.CRC, i.compress_size, i.file_size, i.header_offset) != e[1:]
                for i, e in zip(infos, entries)):
            raise ReadError("zipfile reads the central directory differently from its raw bytes")

        names = [i.filename for i in infos]
        stripped = {n[:-4] for n in names if n.endswith(".npy")}
        seen, methods = set(), _readable_methods()
        for i in infos:
            n = i.filename
            if n.endswith("/"):
                raise ReadError(f"member {n!r} is a directory entry")
            if not n.endswith(".npy"):
                if n in stripped:
                    raise ReadError(f"member {n!r} (no .npy suffix) shadows {n + '.npy'!r} for numpy.load")
                raise ReadError(f"member {n!r} is not a .npy array (numpy.load would show it as {n!r})")
            if n in seen:
                raise ReadError(f"member {n!r} appears twice (numpy.load and zipfile see only one of them)")
            seen.add(n)
            if i.flag_bits & 0x41:
                raise ReadError(f"member {n!r} is encrypted")
            if i.flag_bits & 0x20:
                raise ReadError(f"member {n!r} holds patched data (zip flag bit 5)")
            if i.compress_type not in methods:
                raise ReadError(f"member {n!r} uses compression method {i.compress_type}, which zipfile cannot read")
            # zipfile reads compress_size bytes of a stored member, our pread reads file_size
            if i.compress_type == zipfile.ZIP_STORED and i.compress_size != i.file_size:
                raise ReadError(f"member {n!r} is stored uncompressed but lists {i.compress_size} bytes "
                                f"stored and {i.file_size} bytes of content")

        # one plain sequence: member after member from offset 0, then the central directory
        at, prev = 0, None
        for i, e in sorted(zip(infos, entries), key=lambda ie: ie[0].header_offset):
            n = i.filename
            if i.header_offset > at:
                raise ReadError(f"{i.header_offset - at} bytes before member {n!r} that no entry lists"
                                + (" (data prepended?)" if prev is None else ""))
            if i.header_offset < at:
                raise ReadError(f"member {n!r} overlaps member {prev!r}")
            at, prev = _member_end(fd, n, e[0], i.flag_bits, i.CRC, i.compress_size, i.file_size,
                                   i.header_offset), n
        if at != cd_offset:
            raise ReadError(f"member {prev!r} runs into the central directory" if at > cd_offset else
                            f"{cd_offset - at} bytes before the central directory that no entry lists")

    members = {i.filename[:-4]: i for i in infos}
    if expected is not None:
        missing, extra = sorted(set(expected) - set(members)), sorted(set(members) - set(expected))
        if missing:
            raise ReadError(f"array {missing[0]!r} is missing")
        if extra:
            raise ReadError(f"unexpected member {extra[0] + '.npy'!r}")
    return members


class ZipMember:
    """Sequential reader of one .npy member of a zip archive (any compression).

    Every failure while decompressing (a corrupt stream, a bad CRC, a stream cut short) is a
    ReadError naming the member, so that it reaches the user as one line.
    """

    def __init__(self, path, info):
        self.path, self.info = path, info
        try:
            with zipfile.ZipFile(path) as z, z.open(info) as f:
                self.shape, self.fortran, self.dtype = _npy_header(f)
                self.header_len = f.tell()
        except _MEMBER_ERRORS as exc:
            raise self._error("cannot read its .npy header", exc) from None
        self._f, self._pos, self._zip = None, None, None

    def _error(self, what, exc=None):
        why = f" ({type(exc).__name__}: {' '.join(str(exc).split())})" if exc is not None else ""
        return ReadError(f"member {self.info.filename!r}: {what}{why}")

    def check_size(self):
        """The header must promise exactly the member's bytes after it (checked before the shape is used)."""
        try:
            need = _data_bytes(self.shape, self.dtype)
        except ReadError as exc:
            raise self._error(str(exc)) from None
        have = self.info.file_size - self.header_len
        if need != have:
            raise self._error(f"header promises {need} data bytes, the member has {have}")
        return need

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
                raise self._error("truncated archive member")
            self._pos += len(got)

    def close(self):
        if self._zip is not None:
            self._zip.close()
        self._f, self._zip = None, None

    def read_bytes(self, n):
        """The first n data bytes of the member (after its .npy header)."""
        try:
            self._seek(0)
            buf = self._f.read(n)
        except _MEMBER_ERRORS as exc:
            self._f = None
            raise self._error("cannot decompress", exc) from None
        if len(buf) != n:
            raise self._error("truncated archive member")
        self._pos += len(buf)
        return buf

    def read(self, s, e):
        L = self.shape[-1]
        row_bytes = L * self.dtype.itemsize
        try:
            self._seek(s * row_bytes)
            buf = self._f.read((e - s) * row_bytes)
        except _MEMBER_ERRORS as exc:
            self._f = None                       # a later read starts again from the front
            raise self._error("cannot decompress", exc) from None
        if len(buf) != (e - s) * row_bytes:
            raise self._error("truncated archive member")
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
    infos = npz_members(path)
    main = next((k for k in MAIN_KEYS if k in infos), None)
    if main is None:
        return None, {}, sorted(infos)
    meta, skipped, arr = {}, [], None
    for k, info in infos.items():
        m = ZipMember(path, info)
        if m.dtype.hasobject:
            raise ReadError(f"array {k!r} holds Python objects (ragged rows?); store numeric arrays")
        m.check_size()
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
    """Read the metadata members that ``keep(shape)`` accepts; the rest are skipped.

    The data is read as bytes first and only then shaped, so memory follows what the member
    really holds (read_npz has checked that its header promises exactly that many bytes);
    reading to the member's end makes zipfile check its CRC.
    """
    out, skipped = {}, []
    with zipfile.ZipFile(path) as z:
        for k, (m, info) in pending.items():
            if not (k == "tau" or keep(m.shape)):
                skipped.append(k)
                continue
            need = m.check_size()
            try:
                with z.open(info) as f:
                    f.read(m.header_len)
                    buf = f.read(need)
                    rest = f.read(1)             # b"" at the end; reaching it checks the CRC
            except _MEMBER_ERRORS as exc:
                raise m._error("cannot decompress", exc) from None
            if len(buf) != need or rest:
                raise m._error(f"its data is not the {need} bytes its header promises")
            if need == 0:
                a = np.zeros(m.shape, m.dtype)
            elif m.fortran:
                a = np.frombuffer(bytearray(buf), dtype=m.dtype).reshape(m.shape[::-1]).transpose()
            else:
                a = np.frombuffer(bytearray(buf), dtype=m.dtype).reshape(m.shape)
            out[k] = a
    return out, skipped


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


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
            dt, shape, (b, e) = h["dtype"], list(h["shape"]), h["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ReadError(f"tensor {k!r}: malformed header entry") from None
        # JSON numbers are Python integers here, so these sums and products are exact (no wrap)
        if not (isinstance(dt, str) and all(map(_is_int, shape + [b, e]))):
            raise ReadError(f"tensor {k!r}: malformed header entry")
        if not (0 <= b <= e and base + e <= size) or any(d < 0 for d in shape):
            raise ReadError(f"tensor {k!r}: data offsets outside the file")
        if dt in ST_DTYPES and e - b != math.prod(shape) * np.dtype(ST_DTYPES[dt]).itemsize:
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
    v = np.asarray(a.read(0, math.prod(a.shape[:-1]) if a.shape else 1)).reshape(a.shape)
    return _bf16_to_f32(v) if dt == "BF16" else v


# torch dtypes with an exact numpy form (bfloat16 → float32 is exact widening)
def _torch_numpy(t):
    import torch
    ok = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.float32, torch.float64, torch.bfloat16}
    # meta tensors have no data; sparse, nested and quantized ones have no plain numpy form
    if not isinstance(t, torch.Tensor) or t.is_nested or t.layout != torch.strided or t.device.type != "cpu" \
            or t.is_quantized or t.dtype not in ok:
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
    if t.device.type != "cpu":            # map_location="cpu" leaves meta tensors on meta
        raise ReadError(f"{main!r} is on the {t.device.type} device (no data); save a CPU tensor")
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
