"""Strict container reading: one reading of every .npz (what numpy.load sees is what we certify),
and every reader failure is exit 2 with one line naming the file (and member), never a traceback."""
import io
import json
import os
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest
import torch

from certificates import readers as rd
from certificates.__main__ import main
from certificates.outdir import write_npz


def _rows(n=6, L=8, seed=0):
    x = np.random.default_rng(seed).random((n, L)) + 0.1
    return (x / x.sum(1, keepdims=True)).astype(np.float32)


def _certify_bad(path, capsys, *words):
    """certify PATH: exit 2, one line naming the file and the words, no traceback, no OUTDIR."""
    out = os.path.join(os.path.dirname(path), "o")
    rc = main(["certify", str(path), "-o", out, "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in (str(path),) + words:
        assert w in err, err
    assert not os.path.exists(out)
    return err


def _npy_bytes(shape, descr="<f4", data=b""):
    """A .npy file written by hand, so that any header can be made (version 1.0)."""
    head = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    head += b" " * (63 - (10 + len(head)) % 64) + b"\n"      # pad magic + header to a multiple of 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + data


def _npy_of(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def _central_entry(data, name):
    """Offset of the central-directory entry for member ``name`` in the archive bytes."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        n_name = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + n_name] == name.encode():
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise KeyError(name)


def _flip(data, pos):
    b = bytearray(data)
    b[pos] ^= 0x10
    return bytes(b)


def _data_start(path, name):
    with zipfile.ZipFile(path) as z:
        i = z.getinfo(name)
    return rd.stored_offset(path, i), i.compress_size


# ---------------------------------------------------------------- Task A: one reading of the archive
def test_member_without_npy_suffix_shadowing_rows_is_refused(tmp_path, capsys):
    f = tmp_path / "shadow.npz"
    np.savez(f, rows=_rows(6))
    with zipfile.ZipFile(f, "a") as z:
        z.writestr("rows", _npy_of(_rows(6, seed=1)))
    assert not (np.load(f)["rows"] == _rows(6)).all()      # numpy.load shows the appended array
    _certify_bad(f, capsys, "'rows'", "shadows 'rows.npy'")


def test_duplicate_member_is_refused(tmp_path, capsys):
    f = tmp_path / "dup.npz"
    np.savez(f, rows=_rows(6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # zipfile: "Duplicate name: 'rows.npy'"
        with zipfile.ZipFile(f, "a") as z:
            z.writestr("rows.npy", _npy_of(_rows(6, seed=1)))
    _certify_bad(f, capsys, "'rows.npy'", "twice")


def test_non_npy_member_is_refused(tmp_path, capsys):
    f = tmp_path / "notes.npz"
    np.savez(f, rows=_rows(6))
    with zipfile.ZipFile(f, "a") as z:
        z.writestr("notes.txt", "hello")
    _certify_bad(f, capsys, "'notes.txt'")


def test_overlapping_members_are_refused(tmp_path, capsys):
    # rows.npy's central entry is stretched over the layer.npy member that follows it: numpy.load
    # still reads both, but the bytes of layer.npy now belong to two members
    f = tmp_path / "overlap.npz"
    np.savez(f, rows=_rows(6), layer=np.arange(6))
    data = f.read_bytes()
    start, _ = _data_start(f, "rows.npy")
    cd_offset = struct.unpack_from("<L", data, len(data) - 22 + 16)[0]
    e = _central_entry(data, "rows.npy")
    b = bytearray(data)
    stretched = data[start:cd_offset]
    struct.pack_into("<3L", b, e + 16, zlib.crc32(stretched), len(stretched), len(stretched))  # CRC, sizes
    f.write_bytes(bytes(b))
    assert (np.load(f)["rows"] == _rows(6)).all() and (np.load(f)["layer"] == np.arange(6)).all()
    _certify_bad(f, capsys, "'layer.npy' overlaps member 'rows.npy'")


def test_stored_member_whose_sizes_differ_is_refused(tmp_path, capsys):
    # zipfile (and so numpy.load) reads the listed compressed size of a stored member: 8 bytes short
    f = tmp_path / "short.npz"
    np.savez(f, rows=_rows(256, 64))              # more than zipfile's first 4 KiB read
    data = f.read_bytes()
    e = _central_entry(data, "rows.npy")
    b = bytearray(data)
    struct.pack_into("<L", b, e + 20, struct.unpack_from("<L", b, e + 20)[0] - 8)
    f.write_bytes(bytes(b))
    with pytest.raises(Exception):
        np.load(f)["rows"]
    _certify_bad(f, capsys, "'rows.npy' is stored uncompressed")


def test_bytes_after_the_end_record_are_refused(tmp_path, capsys):
    f = tmp_path / "tail.npz"
    np.savez(f, rows=_rows(6))
    f.write_bytes(f.read_bytes() + b"\0" * 10)
    assert (np.load(f)["rows"] == _rows(6)).all()
    _certify_bad(f, capsys, "10 bytes after the end of the archive")


def test_bytes_before_the_first_member_are_refused(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", rows=_rows(6))
    data = (tmp_path / "x.npz").read_bytes()
    # offsets left as they were (zipfile reads it as a concatenation)
    f = tmp_path / "pre.npz"
    f.write_bytes(b"junk" * 4 + data)
    member = zipfile.ZipFile(tmp_path / "x.npz").read("rows.npy")
    assert zipfile.ZipFile(f).read("rows.npy") == member
    _certify_bad(f, capsys, "16 bytes prepended")
    # offsets moved along with the data: the archive itself is consistent, its start is not 0
    b = bytearray(b"junk" * 4 + data)
    e = _central_entry(bytes(b), "rows.npy")
    struct.pack_into("<L", b, e + 42, struct.unpack_from("<L", b, e + 42)[0] + 16)
    struct.pack_into("<L", b, len(b) - 22 + 16, struct.unpack_from("<L", b, len(b) - 22 + 16)[0] + 16)
    g = tmp_path / "pre2.npz"
    g.write_bytes(bytes(b))
    assert zipfile.ZipFile(g).read("rows.npy") == member
    _certify_bad(g, capsys, "16 bytes before member 'rows.npy'")


def test_local_header_name_differing_from_the_central_name_is_refused(tmp_path, capsys):
    f = tmp_path / "name.npz"
    np.savez(f, rows=_rows(6))
    data = f.read_bytes()
    assert data[30:38] == b"rows.npy"
    f.write_bytes(data[:30] + b"rowz.npy" + data[38:])
    _certify_bad(f, capsys, "'rows.npy'", "local header names it 'rowz.npy'")


def test_npz_members_with_expected_names(tmp_path):
    f = tmp_path / "ab.npz"
    np.savez(f, a=np.zeros(2), b=np.ones(3))
    assert sorted(rd.npz_members(f, expected=["a", "b"])) == ["a", "b"]
    with pytest.raises(rd.ReadError, match="array 'c' is missing"):
        rd.npz_members(f, expected=["a", "b", "c"])
    with pytest.raises(rd.ReadError, match=r"unexpected member 'b\.npy'"):
        rd.npz_members(f, expected=["a"])


def test_npz_members_on_a_file_that_is_not_a_zip(tmp_path):
    (tmp_path / "x.npz").write_bytes(b"not a zip at all" * 10)
    with pytest.raises(rd.ReadError, match=r"not a zip archive \(truncated\?\)"):
        rd.npz_members(tmp_path / "x.npz")
    np.savez(tmp_path / "empty.npz")
    assert rd.npz_members(tmp_path / "empty.npz") == {}


class _Unseekable:
    """A write-only stream: zipfile then writes data descriptors after each member (flag bit 3)."""

    def __init__(self):
        self.buf = io.BytesIO()

    def write(self, b):
        return self.buf.write(b)

    def flush(self):
        pass

    def read(self, n=-1):          # numpy takes an object with .read for a file
        raise OSError("write-only")


def test_what_numpy_and_write_npz_write_is_accepted_and_read_as_numpy_reads_it(tmp_path, monkeypatch):
    n = 5
    arrays = {"rows": _rows(n), "layer": np.arange(n), "be": np.arange(n, dtype=">f8"), "tau": np.array(2.0),
              "fortran": np.asfortranarray(np.arange(3 * n).reshape(n, 3)), "tag": np.array(list("abcde")),
              "empty": np.zeros((0, 4)), "rec": np.zeros(n, dtype=[("a", "i4"), ("b", "f4")])}
    np.save(tmp_path / "extra.npy", np.arange(n) * 3)
    np.savez(tmp_path / "plain.npz", **arrays)
    np.savez_compressed(tmp_path / "compressed.npz", **arrays)
    write_npz(tmp_path / "ours.npz", arrays, files={"extra": tmp_path / "extra.npy"})
    stream = _Unseekable()
    np.savez_compressed(stream, **arrays)
    (tmp_path / "stream.npz").write_bytes(stream.buf.getvalue())
    with zipfile.ZipFile(tmp_path / "stream.npz") as z:
        assert all(i.flag_bits & 0x08 for i in z.infolist())
    # what a file beyond 4 GiB has: zip64 sizes and offsets in the central directory, zip64 end records
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 64)
    np.savez(tmp_path / "zip64.npz", **arrays)
    monkeypatch.undo()
    assert b"PK\x06\x06" in (tmp_path / "zip64.npz").read_bytes()
    for name in ("plain.npz", "compressed.npz", "ours.npz", "stream.npz", "zip64.npz"):
        f = tmp_path / name
        ref = np.load(f)
        assert sorted(rd.npz_members(f)) == sorted(ref.files)
        (main_name, arr), pending, skipped = rd.read_npz(f)
        assert main_name == "rows" and skipped == []
        assert (arr.read(0, n) == ref["rows"]).all()
        meta, skipped = rd.load_npz_meta(f, pending, lambda shape: True)
        assert skipped == [] and sorted(meta) == sorted(set(ref.files) - {"rows"})
        for k, v in meta.items():
            assert v.dtype == ref[k].dtype and v.shape == ref[k].shape and (v == ref[k]).all(), (name, k)


# ---------------------------------------------------------------- Task B: every reader error is one line
@pytest.mark.parametrize("ext", [".npy", ".npz", ".safetensors"])
def test_shape_product_beyond_int64_is_refused(ext, tmp_path, capsys):
    f = tmp_path / ("big" + ext)
    shape = (3, 2 ** 62, 4)                    # int64 product: 3 · 2^64 wraps to 0
    if ext == ".npy":
        f.write_bytes(_npy_bytes(shape, data=b"\0" * 16))
    elif ext == ".npz":
        with zipfile.ZipFile(f, "w") as z:
            z.writestr("rows.npy", _npy_bytes(shape, data=b"\0" * 16))
    else:
        head = json.dumps({"rows": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 0]}}).encode()
        f.write_bytes(struct.pack("<Q", len(head)) + head)
    _certify_bad(f, capsys, "'rows'" if ext == ".safetensors" else "promises")


@pytest.mark.parametrize("ext", [".npy", ".npz"])
def test_shape_product_wrapping_to_one_row_is_refused(ext, tmp_path, capsys):
    # 274177 · 67280421310721 = 2^64 + 1: numpy's product says one row of 4 float32 (16 bytes)
    f = tmp_path / ("wrap" + ext)
    raw = _npy_bytes((274177, 67280421310721, 4), data=np.full(4, 0.25, "<f4").tobytes())
    if ext == ".npy":
        f.write_bytes(raw)
    else:
        with zipfile.ZipFile(f, "w") as z:
            z.writestr("rows.npy", raw)
    _certify_bad(f, capsys, "header promises 295147905179352825872 data bytes", "has 16")


def test_npy_with_bytes_after_the_data_is_refused(tmp_path, capsys):
    f = tmp_path / "long.npy"
    f.write_bytes(_npy_of(_rows(2, 4)) + b"\0" * 8)
    _certify_bad(f, capsys, "header promises 32 data bytes, the file has 40")


def test_pt_rows_on_the_meta_device_is_refused(tmp_path, capsys):
    f = tmp_path / "meta.pt"
    torch.save(torch.empty(4, 8, device="meta"), f)
    _certify_bad(f, capsys, "'rows' is on the meta device (no data); save a CPU tensor")


def test_pt_metadata_without_plain_cpu_data_is_not_carried(tmp_path, capsys):
    f = tmp_path / "m.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # torch: sparse CSR and nested tensors are beta
        torch.save({"rows": torch.tensor(_rows(4)), "on_meta": torch.empty(4, device="meta"),
                    "csr": torch.eye(4).to_sparse_csr(), "coo": torch.ones(4).to_sparse(),
                    "nested": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
                    "layer": torch.arange(4)}, f)
    rc = main(["certify", str(f), "-o", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["inputs"][0]["metadata_not_carried"] == ["coo", "csr", "nested", "on_meta"]


def test_flipped_byte_in_a_compressed_rows_member_names_the_member(tmp_path, capsys):
    g = tmp_path / "good.npz"
    x = np.random.default_rng(0).integers(1, 4, (256, 64)) / 2.0       # compressible: deflate back-references
    np.savez_compressed(g, rows=(x / x.sum(1, keepdims=True)).astype(np.float32))
    data = g.read_bytes()
    start, size = _data_start(g, "rows.npy")
    for pos in range(start + 5, start + size - 1, size // 25):
        f = tmp_path / f"flip{pos}.npz"
        f.write_bytes(_flip(data, pos))
        _certify_bad(f, capsys, "'rows.npy'")
        f.unlink()


def test_flipped_byte_in_a_compressed_metadata_member_names_the_member(tmp_path, capsys):
    g = tmp_path / "good.npz"
    n = 4096
    rng = np.random.default_rng(1)
    # a few KiB of deflate data with short codes and back-references: a flipped bit past the
    # .npy header breaks the stream itself (zlib.error) or only the CRC, depending on where it falls
    layer = rng.integers(0, 8, n) * 1000 + np.arange(n) % 3
    np.savez_compressed(g, rows=np.full((n, 4), 0.25, np.float32), layer=layer)
    data = g.read_bytes()
    start, size = _data_start(g, "layer.npy")
    for pos in range(start + 200, start + size - 1, (size - 200) // 12):
        f = tmp_path / f"flip{pos}.npz"
        f.write_bytes(_flip(data, pos))
        _certify_bad(f, capsys, "'layer.npy'")
        f.unlink()


def test_truncated_npz_is_refused(tmp_path, capsys):
    f = tmp_path / "half.npz"
    np.savez(f, rows=_rows(64, 16))
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    _certify_bad(f, capsys, "not a zip archive (truncated?)")
