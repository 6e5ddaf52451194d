"""A certificate folder has one reading, and verify checks every number a reader sees.

One regression test per finding of the integrity audit: shadow and extra members, the
metadata and summary fields verify used to ignore, row_sum/p_max at long L, and the Python
API's validation.  Each test fails on the code before the audit's fixes.
"""
import json
import shutil
import warnings
import zipfile

import numpy as np
import pytest
import torch

import certificates
from certificates.__main__ import main
from certificates.outdir import write_npz


def _run(args, capsys):
    rc = main(args + ["--no-progress"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.strip()


def _one_line(err, *words):
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def _folder(tmp_path, capsys, rows, name="o", tol="1e-6", **meta):
    f = tmp_path / f"{name}.npz"
    write_npz(f, {"rows": rows, **meta})
    out = tmp_path / name
    rc, _, err = _run(["certify", str(f), "-o", str(out), "--tolerance", tol], capsys)
    assert rc == 0, err
    return out


def _uniform3(tmp_path, capsys):
    return _folder(tmp_path, capsys, np.full((2, 3), 1 / 3), layer=np.array([0, 1]))


def _diffuse(tmp_path, capsys, n=40, L=64, tol="0"):
    x = np.random.default_rng(1).random((n, L)) + 0.5
    return _folder(tmp_path, capsys, x / x.sum(1, keepdims=True), tol=tol, layer=np.arange(n) % 3)


def _append(npz, name, array):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # zipfile warns about a duplicate name
        with zipfile.ZipFile(npz, "a") as z, z.open(name, "w") as f:
            np.lib.format.write_array(f, np.asanyarray(array))


def _edit_summary(out, **changes):
    p = out / "summary.json"
    s = json.loads(p.read_text())
    s.update(changes)
    p.write_text(json.dumps(s))


# ------------------------------------------------------------- one reading of each .npz
@pytest.mark.parametrize("member", ["theta_lo", "theta_hi", "regime"])
def test_shadow_member_in_certificates_is_refused_by_verify_and_report(tmp_path, capsys, member):
    out = _uniform3(tmp_path, capsys)
    fake = {"theta_lo": [0.99, 0.99], "theta_hi": [0.5, 0.5], "regime": np.int8([0, 0])}[member]
    _append(out / "certificates.npz", member, np.asarray(fake))
    assert np.load(out / "certificates.npz")[member].tolist() == list(fake)   # what numpy.load shows
    rc, _, err = _run(["verify", str(out)], capsys)
    assert rc == 2
    _one_line(err, "certificates.npz", repr(member))
    rc, _, err = _run(["report", str(out), "-o", str(tmp_path / "r")], capsys)
    assert rc == 2
    _one_line(err, repr(member))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where,name", [("certificates.npz", "extra.npy"), ("certificates.npz", "theta_lo.npy"),
                                        ("metadata.npz", "entropy"), ("metadata.npz", "extra.npy"),
                                        ("metadata.npz", "layer.npy")])
def test_extra_or_duplicate_member_is_refused(tmp_path, capsys, where, name):
    out = _uniform3(tmp_path, capsys)
    _append(out / where, name, np.zeros(2))
    rc, _, err = _run(["verify", str(out)], capsys)
    assert rc == 2
    _one_line(err, where, name.removesuffix(".npy"))


def test_metadata_column_is_checked_against_the_inputs(tmp_path, capsys):
    out = _uniform3(tmp_path, capsys)
    m = dict(np.load(out / "metadata.npz"))
    m["layer"] = np.array([7, 1])
    write_npz(out / "metadata.npz", m)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "layer" in text, text


def test_metadata_missing_column_is_refused(tmp_path, capsys):
    out = _uniform3(tmp_path, capsys)
    m = dict(np.load(out / "metadata.npz"))
    del m["layer"]
    write_npz(out / "metadata.npz", m)
    rc, _, err = _run(["verify", str(out)], capsys)
    assert rc == 2
    _one_line(err, "metadata.npz", "'layer'")


def test_metadata_entropy_is_checked(tmp_path, capsys):
    out = _uniform3(tmp_path, capsys)
    m = dict(np.load(out / "metadata.npz"))
    assert abs(m["entropy"][0] - np.log(3)) < 1e-12
    m["entropy"] = m["entropy"] * (1 + 1e-9)
    write_npz(out / "metadata.npz", m)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "entropy" in text, text


# ------------------------------------------------------------- summary.json
@pytest.mark.parametrize("key,value", [("regime_counts", {"dominant": 0, "closed": 0, "open": 2}),
                                       ("median_theta_lo", 0.99), ("fraction_theta_lo_ge_0.99", 1.0)])
def test_summary_derived_numbers_are_recomputed(tmp_path, capsys, key, value):
    out = _uniform3(tmp_path, capsys)
    _edit_summary(out, **{key: value})
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and key in text, text


def test_summary_input_dtype_is_checked(tmp_path, capsys):
    out = _uniform3(tmp_path, capsys)
    s = json.loads((out / "summary.json").read_text())
    s["inputs"][0]["dtype"] = "float16"
    (out / "summary.json").write_text(json.dumps(s))
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "dtype" in text, text


@pytest.mark.parametrize("key,value", [("close_floor", 2.0 ** -40), ("exact_max_atoms", 40),
                                       ("format", "attention-theta-certificates/9"),
                                       ("files", ["certificates.npz", "summary.json"]),
                                       ("files", ["certificates.npz", "metadata.npz", "summary.json", "x.txt"])])
def test_summary_constants_are_certify_s(tmp_path, capsys, key, value):
    out = _uniform3(tmp_path, capsys)
    _edit_summary(out, **{key: value})
    rc, _, err = _run(["verify", str(out)], capsys)
    assert rc == 2
    _one_line(err, "summary.json", key)


def test_max_sum_defect_is_checked(tmp_path, capsys):
    x = np.full((2, 4), 0.25)
    x[1] = [0.25, 0.25, 0.25, 0.2525]              # sums to 1.0025
    out = _folder(tmp_path, capsys, x)
    assert _run(["verify", str(out)], capsys)[0] == 0
    _edit_summary(out, max_sum_defect=1e-3)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "row 1" in text and "max_sum_defect" in text, text


def test_tolerance_and_regimes_are_tied(tmp_path, capsys):
    out = _diffuse(tmp_path, capsys)
    c = dict(np.load(out / "certificates.npz"))
    assert (c["regime"] == 2).sum() > 0
    assert _run(["verify", str(out)], capsys)[0] == 0
    keep = (out / "summary.json").read_text()
    _edit_summary(out, tolerance=1.0)              # open rows would be closed at tolerance 1
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "regime 2" in text, text
    (out / "summary.json").write_text(keep)
    c["regime"] = np.where(c["regime"] == 2, 1, c["regime"]).astype(np.int8)   # relabel, same tolerance
    write_npz(out / "certificates.npz", c)
    counts = {"dominant": int((c["regime"] == 0).sum()), "closed": int((c["regime"] == 1).sum()), "open": 0}
    _edit_summary(out, regime_counts=counts)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "regime 1" in text, text


# ------------------------------------------------------------- row_sum and p_max at long L
@pytest.mark.parametrize("L", [131071, 1 << 17, 1 << 20])
def test_row_sum_contract_holds_at_long_rows(tmp_path, capsys, L):
    x = np.full((1, L), 2.0 ** -67 - 2.0 ** -120)
    x[0, 0] = 1.0
    out = _folder(tmp_path, capsys, x)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 0, text
    c = np.load(out / "certificates.npz")
    c = {k: c[k].copy() for k in c.files}
    c["row_sum"] = c["row_sum"] * (1 - 2.0 ** -30)      # far beyond the contract: still caught
    write_npz(out / "certificates.npz", c)
    rc, text, _ = _run(["verify", str(out)], capsys)
    assert rc == 1 and "row_sum" in text, text


# ------------------------------------------------------------- the Python API
def test_api_matches_the_command_line_bit_for_bit(tmp_path, capsys):
    x = np.random.default_rng(3).random((50, 17)) ** 3
    x /= x.sum(1, keepdims=True)
    out = _folder(tmp_path, capsys, x)
    c = certificates.certify(x)
    z = np.load(out / "certificates.npz")
    for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "regime", "row_sum"):
        assert z[k].tobytes() == getattr(c, k).tobytes(), k
    assert (np.packbits(c.witness, axis=-1, bitorder="little") == z["witness"]).all()
    assert len(c) == 50 and c.witness.shape == (50, 17) and c.witness.dtype == bool
    t = certificates.certify(torch.tensor(x, dtype=torch.float64))
    assert t.theta_lo.tobytes() == c.theta_lo.tobytes()


@pytest.mark.parametrize("rows,words", [
    (np.array([[0.5, 0.6, -0.1]]), ["row 0", "negative"]),
    (np.array([[0.5, 0.5], [np.nan, 1.0]]), ["row 1", "NaN"]),
    (np.array([[0.5, 0.5], [0.5, 0.5], [0.0, 0.0]]), ["row 2", "all-zero"]),
    (np.array([0.5, 0.5]), ["shape (2,)", "(n, L)"]),
    (np.zeros((2, 2, 2)) + 0.5, ["shape (2, 2, 2)"]),
    (np.array([[1, 1]]), ["dtype int64"]),
    (np.array([[1.0]]), ["L = 1"]),
    (np.array([[0.2, 0.2]]), ["row 0", "row sum"]),
])
def test_api_validates_as_the_command_line(rows, words):
    with pytest.raises(ValueError) as e:
        certificates.certify(rows)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_api_torch_bfloat16_and_meta():
    x = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.bfloat16)
    c = certificates.certify(x)
    assert c.regime.tolist() == [0, 0]                     # both dominant: θ = 4m(1 − m) exactly (C4)
    assert c.theta_lo[0] <= 0.75 <= c.theta_hi[0] and c.theta_hi[0] - c.theta_lo[0] < 1e-14
    assert c.theta_lo[1] <= 1.0 <= c.theta_hi[1]
    with pytest.raises(ValueError, match="meta"):
        certificates.certify(torch.empty(2, 3, device="meta"))


def test_moved_copy_with_shadow_is_refused_too(tmp_path, capsys):
    out = _uniform3(tmp_path, capsys)
    dst = tmp_path / "copy"
    shutil.copytree(out, dst)
    _append(dst / "metadata.npz", "layer", np.array([5, 5]))
    rc, _, err = _run(["verify", str(dst), "--inputs", str(tmp_path)], capsys)
    assert rc == 2
    _one_line(err, "layer")


def test_entropy_check_uses_the_same_values_as_certify():
    from certificates.folder import entropy, entropy_with_tolerance
    x = np.random.default_rng(4).random((30, 50)) ** 4
    x[:5, 10:] = 0.0
    x[5] = 0.0
    x[5, 3] = 1.0                                   # one-hot: H clipped at 0
    H, tol = entropy_with_tolerance(x)
    assert H.tobytes() == entropy(x).tobytes()
    assert (tol > 0).all() and (tol < 1e-11).all()
