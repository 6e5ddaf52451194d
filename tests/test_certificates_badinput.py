"""Bad input to certify, verify and report: every case gets exit 2 and one line, never a traceback,
never partial output; the odd-but-valid ones certify.  One regression test per case."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from certificates.__main__ import main
from certificates.outdir import write_npz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rows(n=6, L=8, seed=0):
    x = np.random.default_rng(seed).random((n, L)) + 0.1
    return (x / x.sum(1, keepdims=True)).astype(np.float32)


def _run(args, capsys):
    rc = main(args + ["--no-progress"])
    err = capsys.readouterr().err.strip()
    return rc, err


def _one_line_2(rc, err, *words):
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


# ---------------------------------------------------------------- certify: valid but odd inputs
def test_metadata_named_file_nonascii_bytes_and_structured(tmp_path, capsys):
    f = tmp_path / "odd.npz"
    write_npz(f, {"rows": _rows(4), "file": np.arange(4), "tag": np.array([b"\xff\xfe", b"ab", b"c", b"d"]),
                  "rec": np.zeros(4, dtype=[("a", "i4"), ("b", "f4")])})
    rc, err = _run(["certify", str(f), "-o", str(tmp_path / "o")], capsys)
    assert rc == 0, err
    meta = np.load(tmp_path / "o" / "metadata.npz")
    assert meta["file"].tolist() == [0, 1, 2, 3] and meta["tag"][0] == "\xff\xfe"
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["inputs"][0]["metadata_not_carried"] == ["rec"]


def test_pt_non_str_key_and_exotic_metadata_dtypes(tmp_path, capsys):
    x = torch.tensor(_rows(4))
    torch.save({"rows": x, 3: torch.zeros(4), "f8": torch.zeros(4, dtype=torch.float8_e4m3fn),
                "c32": torch.zeros(4, dtype=torch.complex32),
                "q": torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.qint8),
                "layer": torch.arange(4)}, tmp_path / "m.pt")
    rc, err = _run(["certify", str(tmp_path / "m.pt"), "-o", str(tmp_path / "o")], capsys)
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert set(s["inputs"][0]["metadata_not_carried"]) == {"3", "c32", "f8", "q"}
    assert np.load(tmp_path / "o" / "metadata.npz")["layer"].tolist() == [0, 1, 2, 3]


def test_safetensors_float8_metadata_is_skipped(tmp_path, capsys):
    from safetensors.torch import save_file
    save_file({"rows": torch.tensor(_rows(4)), "f8": torch.zeros(4, dtype=torch.float8_e4m3fn)},
              str(tmp_path / "m.safetensors"))
    rc, err = _run(["certify", str(tmp_path / "m.safetensors"), "-o", str(tmp_path / "o")], capsys)
    assert rc == 0, err


def test_negative_bit_rows_tensor_certifies_its_values(tmp_path, capsys):
    x = torch.tensor(_rows(4), dtype=torch.float64)
    torch.save({"rows": torch._neg_view(-x)}, tmp_path / "neg.pt")
    torch.save({"rows": x}, tmp_path / "pos.pt")
    assert _run(["certify", str(tmp_path / "neg.pt"), "-o", str(tmp_path / "a")], capsys)[0] == 0
    assert _run(["certify", str(tmp_path / "pos.pt"), "-o", str(tmp_path / "b")], capsys)[0] == 0
    za, zb = np.load(tmp_path / "a" / "certificates.npz"), np.load(tmp_path / "b" / "certificates.npz")
    assert (za["theta_lo"] == zb["theta_lo"]).all()


# ---------------------------------------------------------------- certify: bad input → exit 2
def _sparse(p):
    torch.save({"rows": torch.tensor(_rows(4)).to_sparse()}, p)


def _nested(p):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save({"rows": torch.nested.nested_tensor([torch.ones(3) / 3, torch.ones(2) / 2])}, p)


def _overflow_logits(p):
    np.savez(p, logits=np.array([[1e300, 0.0], [0.0, 1.0]]), tau=np.array(1e-300))


def _bad_safetensors(p):
    p.write_bytes((10**9).to_bytes(8, "little") + b"{}")


CERTIFY_BAD = {      # name: (file maker, file name, words the one line must contain)
    "sparse.pt": (_sparse, "sparse"),
    "nested.pt": (_nested, "nested"),
    "logits_overflow.npz": (_overflow_logits, "overflows"),
    "header.safetensors": (_bad_safetensors, "header"),
}


@pytest.mark.parametrize("name", sorted(CERTIFY_BAD))
def test_certify_bad_files(name, tmp_path, capsys):
    maker, word = CERTIFY_BAD[name]
    maker(tmp_path / name)
    rc, err = _run(["certify", str(tmp_path / name), "-o", str(tmp_path / "o")], capsys)
    _one_line_2(rc, err, name, word)
    assert not (tmp_path / "o").exists() and sorted(os.listdir(tmp_path)) == [name]


def test_directory_input_says_directory(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    rc, err = _run(["certify", str(tmp_path / "d"), "-o", str(tmp_path / "o")], capsys)
    _one_line_2(rc, err, "is a directory")


def test_unwritable_outdir_and_duplicate_inputs(tmp_path, capsys):
    np.save(tmp_path / "r.npy", _rows())
    rc, err = _run(["certify", str(tmp_path / "r.npy"), "-o", "/dev/null/x"], capsys)
    _one_line_2(rc, err, "/dev/null")
    rc, err = _run(["certify", str(tmp_path / "r.npy"), "-o", "/proc/version/x"], capsys)
    _one_line_2(rc, err, "cannot write")
    rc, err = _run(["certify", str(tmp_path / "r.npy"), str(tmp_path / "r.npy"), "-o", str(tmp_path / "o")], capsys)
    _one_line_2(rc, err, "given twice")
    assert sorted(os.listdir(tmp_path)) == ["r.npy"]


def test_usage_error_is_exit_2_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["certify", "-o"])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ---------------------------------------------------------------- verify: crafted folders → exit 2
@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("v")
    np.save(d / "r.npy", _rows(30, 16, 1))
    assert main(["certify", str(d / "r.npy"), "-o", str(d / "out"), "--no-progress"]) == 0
    return d


def _crafted(folder, tmp_path, summary=None, cert=None):
    t = folder / f"c-{tmp_path.name}"          # a sibling, so the relative input path still resolves
    shutil.copytree(folder / "out", t)
    if summary:
        s = json.loads((t / "summary.json").read_text())
        s = summary(s)
        (t / "summary.json").write_text(json.dumps(s))
    if cert:
        z = dict(np.load(t / "certificates.npz"))
        cert(z)
        write_npz(t / "certificates.npz", z)
    return t


def _set(k, v):
    def f(s):
        s[k] = v
        return s
    return f


VERIFY_SUMMARY_BAD = {
    "tolerance_null": (_set("tolerance", None), "tolerance"),
    "topk_0": (_set("topk_K", 0), "topk_K"),
    "topk_neg": (_set("topk_K", -1), "topk_K"),
    "topk_60": (_set("topk_K", 60), "topk_K"),
    "list": (lambda s: [s], "not an object"),
    "dup_inputs": (lambda s: dict(s, inputs=s["inputs"] * 2, rows=2 * s["rows"]), "repeats"),
    "rows_bool": (_set("rows", True), "rows"),
}


@pytest.mark.parametrize("case", sorted(VERIFY_SUMMARY_BAD))
def test_verify_rejects_crafted_summary(case, folder, tmp_path, capsys):
    fn, word = VERIFY_SUMMARY_BAD[case]
    t = _crafted(folder, tmp_path, summary=fn)
    rc, err = _run(["verify", str(t)], capsys)
    _one_line_2(rc, err, "summary.json", word)


VERIFY_CERT_BAD = {
    "theta_rank": lambda z: z.update(theta_lo=z["theta_lo"][:, None]),
    "gap_rank": lambda z: z.update(gap_hi=np.stack([z["gap_hi"]] * 2)),
    "regime_rank": lambda z: z.update(regime=z["regime"][:, None]),
    "witness_1d": lambda z: z.update(witness=z["witness"][:, 0]),
    "witness_bool": lambda z: z.update(witness=z["witness"].astype(bool)),
    "missing": lambda z: z.pop("row_sum"),
}


@pytest.mark.parametrize("case", sorted(VERIFY_CERT_BAD))
def test_verify_rejects_malformed_arrays(case, folder, tmp_path, capsys):
    t = _crafted(folder, tmp_path, cert=VERIFY_CERT_BAD[case])
    rc, err = _run(["verify", str(t)], capsys)
    _one_line_2(rc, err, "certificates.npz")


def test_verify_subprocess_no_traceback_on_list_summary(folder, tmp_path):
    t = _crafted(folder, tmp_path, summary=lambda s: [s])
    p = subprocess.run([sys.executable, "-m", "certificates", "verify", str(t)], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_report_on_a_non_certificate_folder_is_exit_2(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "summary.json").write_text("[]")
    rc, err = _run(["report", str(tmp_path / "x"), "-o", str(tmp_path / "rep")], capsys)
    _one_line_2(rc, err, str(tmp_path / "x"))
    assert not (tmp_path / "rep").exists()


def test_truncated_certificates_npz_is_exit_2(folder, tmp_path, capsys):
    t = _crafted(folder, tmp_path)
    data = (t / "certificates.npz").read_bytes()
    (t / "certificates.npz").write_bytes(data[: len(data) // 2])
    rc, err = _run(["verify", str(t)], capsys)
    _one_line_2(rc, err, "certificates.npz")
    assert zipfile.is_zipfile(folder / "out" / "certificates.npz")


def test_verify_huge_header_in_compressed_member_is_exit_2(folder, tmp_path, capsys):
    # a crafted header must not make verify allocate what the header claims
    t = _crafted(folder, tmp_path)
    z = dict(np.load(t / "certificates.npz"))
    with zipfile.ZipFile(t / "certificates.npz", "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in z.items():
            with zf.open(k + ".npy", "w") as f:
                if k == "theta_lo":
                    np.lib.format.write_array_header_1_0(
                        f, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
                    f.write(v.tobytes())
                else:
                    np.lib.format.write_array(f, v)
    rc, err = _run(["verify", str(t)], capsys)
    _one_line_2(rc, err, "theta_lo", "requires float64")
