"""certificates CLI: certify → verify round trip, tampering, bad input, atomic writes, report."""
import os
import subprocess
import sys

from pathlib import Path

import numpy as np
import pytest
import torch

from certificates.__main__ import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _softmax_rows(seed, n, L, scale=3.0):
    lg = np.random.default_rng(seed).normal(size=(n, L)) * scale
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    d = tmp_path_factory.mktemp("cert")
    n = 120
    R = _softmax_rows(0, n, 20)
    R[::7, 10:] = 0.0                                      # causal zero padding
    R /= R.sum(1, keepdims=True)
    np.savez(d / "rows.npz", rows=R.astype(np.float32), layer=np.arange(n) % 3,
             step=(np.arange(n) // 40) * 10, head=np.arange(n) % 2, run=np.array("r0"))
    torch.save(torch.softmax(torch.randn(30, 40, dtype=torch.float64) * 4, -1).to(torch.bfloat16),
               d / "rows.pt")
    out = d / "out"
    assert main(["certify", str(d / "rows.npz"), str(d / "rows.pt"), "-o", str(out), "--no-progress"]) == 0
    return d, out


def test_certify_writes_the_fixed_format(certified):
    _, out = certified
    z = np.load(out / "certificates.npz")
    assert {"theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "regime", "witness", "row_sum"} <= set(z.files)
    assert z["theta_lo"].shape == (150,) and z["witness"].shape == (150, 5) and z["regime"].dtype == np.int8
    assert np.all(z["theta_lo"] <= z["theta_hi"]) and np.all(z["gap_lo"] <= z["gap_hi"])
    for f in ("summary.json", "metadata.npz", "report/report.md", "report/report.html"):
        assert (out / f).exists()


def test_verify_accepts_an_honest_certificate(certified):
    _, out = certified
    assert main(["verify", str(out), "--no-progress"]) == 0


def _tamper(out, tmp_path, fn):
    import shutil
    t = Path(out).parent / f"tampered-{tmp_path.name}"   # a sibling: input paths are relative to OUTDIR
    shutil.copytree(out, t)
    z = dict(np.load(t / "certificates.npz"))
    fn(z)
    np.savez(t / "certificates.npz", **z)
    return main(["verify", str(t), "--no-progress"])


def test_verify_rejects_raised_lower_bound(certified, tmp_path):
    _, out = certified

    def raise_lo(z):
        i = int(np.argmax(z["regime"] == 1))
        z["theta_lo"][i] = z["theta_hi"][i]          # above the witness value unless the witness is exact
        z["gap_hi"][i] = 0.0
    assert _tamper(out, tmp_path, raise_lo) == 1


def test_verify_rejects_flipped_witness_bit(certified, tmp_path):
    _, out = certified

    def flip(z):
        i = int(np.argmax(z["regime"] == 0))          # dominant row: witness is {argmax}
        bits = np.unpackbits(z["witness"][i], bitorder="little")
        j = int(np.argmax(bits))
        z["witness"][i, j // 8] ^= np.uint8(1 << (j % 8))
    assert _tamper(out, tmp_path, flip) == 1


def test_verify_rejects_unjustified_upper_bound(certified, tmp_path):
    _, out = certified

    def lower_hi(z):
        i = int(np.argmax(z["regime"] == 1))
        z["theta_hi"][i] = z["theta_lo"][i]
        z["gap_lo"][i] = z["gap_hi"][i]
    assert _tamper(out, tmp_path, lower_hi) == 1


def test_verify_rejects_changed_input(certified, tmp_path):
    d, out = certified
    import json
    import shutil
    t = tmp_path / "moved"
    shutil.copytree(out, t)
    R = _softmax_rows(9, 10, 20)
    np.save(tmp_path / "other.npy", R)
    s = json.loads((t / "summary.json").read_text())
    s["inputs"][0]["path"] = str(tmp_path / "other.npy")
    (t / "summary.json").write_text(json.dumps(s))
    assert main(["verify", str(t), "--no-progress"]) != 0


BAD = {
    "nan": lambda: {"rows": np.array([[0.5, np.nan], [0.5, 0.5]])},
    "inf": lambda: {"rows": np.array([[0.5, 0.5], [np.inf, 0.5]])},
    "negative": lambda: {"rows": np.array([[0.6, 0.4], [1.2, -0.2]])},
    "zero": lambda: {"rows": np.array([[0.5, 0.5], [0.0, 0.0]])},
    "int": lambda: {"rows": np.array([[1, 0], [0, 1]])},
    "complex": lambda: {"rows": np.array([[0.5, 0.5]], dtype=complex)},
    "0d": lambda: {"rows": np.array(0.5)},
    "nokey": lambda: {"weights": np.array([[0.5, 0.5]])},
    "L1": lambda: {"rows": np.ones((3, 1))},
    "defect": lambda: {"rows": np.array([[0.5, 0.5], [0.6, 0.6]])},
}
EXPECT = {"nan": "row 0", "inf": "row 1", "negative": "row 1", "zero": "row 1", "int": "dtype",
          "complex": "complex", "0d": "0-d", "nokey": "no 'rows'", "L1": "L = 1", "defect": "row 1"}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line_exit_2_nothing_written(case, tmp_path, capsys):
    f = tmp_path / f"{case}.npz"
    np.savez(f, **BAD[case]())
    out = tmp_path / "out"
    assert main(["certify", str(f), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(f) in err and EXPECT[case] in err
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".out")]


def test_empty_truncated_and_ragged_files_exit_2(tmp_path, capsys):
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "good.npy", _softmax_rows(1, 4, 8))
    data = (tmp_path / "good.npy").read_bytes()
    (tmp_path / "trunc.npy").write_bytes(data[: len(data) // 2])
    np.save(tmp_path / "ragged.npy", np.array([np.ones(2), np.ones(3)], dtype=object), allow_pickle=True)
    for name in ("empty.npy", "trunc.npy", "ragged.npy"):
        assert main(["certify", str(tmp_path / name), "-o", str(tmp_path / "o"), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and name in err
        assert not (tmp_path / "o").exists()


def test_subprocess_bad_input_has_no_traceback(tmp_path):
    np.savez(tmp_path / "x.npz", rows=np.array([[0.5, np.nan]]))
    p = subprocess.run([sys.executable, "-m", "certificates", "certify", str(tmp_path / "x.npz"), "-o",
                        str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "NaN" in p.stderr


def test_logits_input_certifies_the_float64_softmax(tmp_path):
    lg = np.random.default_rng(3).normal(size=(6, 10))
    lg[0, 5:] = -np.inf                                    # masked logits are zero atoms
    np.savez(tmp_path / "l.npz", logits=lg, tau=np.array(0.5))
    out = tmp_path / "o"
    assert main(["certify", str(tmp_path / "l.npz"), "-o", str(out), "--no-progress"]) == 0
    assert main(["verify", str(out), "--no-progress"]) == 0
    z = np.load(out / "certificates.npz")
    p = np.exp(lg[1] / 0.5 - (lg[1] / 0.5).max())
    assert abs(z["p_max"][1] - p.max() / p.sum()) < 1e-14


def test_report_groups_by_metadata(certified, tmp_path):
    _, out = certified
    rep = tmp_path / "rep"
    assert main(["report", str(out), "-o", str(rep), "--no-progress"]) == 0
    md = (rep / "report.md").read_text()
    assert "## By layer" in md and "## By step" in md and "## By head" in md
    html = (rep / "report.html").read_text()
    assert "data:image/png;base64," in html and "src='theta" not in html
    for f in ("theta_vs_pmax.png", "heatmap_layer_step.png", "concentration.png"):
        assert (rep / f).stat().st_size > 1000


def _parity(device):
    from certificates.pipeline import certify_batch
    R = np.concatenate([_softmax_rows(4, 200, 64), np.pad(_softmax_rows(5, 50, 18, 1.0), ((0, 0), (0, 46))),
                        np.random.default_rng(6).dirichlet(np.full(500, 0.02), size=40)[:, :64]])
    R /= R.sum(1, keepdims=True)
    a = certify_batch(R, 1e-6)
    b = certify_batch(R, 1e-6, backend="torch", device=device)
    assert (a["regime"] == b["regime"]).all()
    for k in ("theta_lo", "theta_hi", "gap_hi"):
        assert np.allclose(a[k], b[k], rtol=0, atol=1e-6)
    assert (a["p_max"] == b["p_max"]).all() and (a["row_sum"] == b["row_sum"]).all()


def test_torch_backend_on_cpu_agrees_with_numpy():
    _parity("cpu")


@pytest.mark.gpu
def test_cuda_backend_agrees_with_numpy():
    _parity("cuda")


def test_rows_with_tiny_totals_are_bracketed(tmp_path):
    # Totals below 2^-537 once made T² underflow and gave theta_hi = 0 (found in review).
    from fractions import Fraction

    from numerics.theta import theta_exact
    rows = np.array([[1e-200, 1e-201, 1e-202], [3e-170, 1e-170, 1e-170], [5e-320, 3e-320, 2e-320],
                     [1e-300, 1e-300, 2e-300]])
    np.savez(tmp_path / "tiny.npz", rows=rows)
    out = tmp_path / "out"
    assert main(["certify", str(tmp_path / "tiny.npz"), "-o", str(out), "--max-sum-defect", "inf",
                 "--no-progress"]) == 0
    z = np.load(out / "certificates.npz")
    for i, row in enumerate(rows):
        exact = theta_exact(row)
        assert Fraction(z["theta_lo"][i]) <= exact.theta <= Fraction(z["theta_hi"][i])
        assert Fraction(z["gap_lo"][i]) <= 1 - exact.theta <= Fraction(z["gap_hi"][i])
    assert z["row_sum"][0] == pytest.approx(1.11e-200)
    assert main(["verify", str(out), "--no-progress"]) == 0


def test_overflowing_row_sum_is_bad_input(tmp_path, capsys):
    np.savez(tmp_path / "huge.npz", rows=np.array([[1.7e308, 1e307, 1e307]]))
    assert main(["certify", str(tmp_path / "huge.npz"), "-o", str(tmp_path / "o"),
                 "--max-sum-defect", "inf"]) == 2
    assert "row 0" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_bad_options_and_outdir_are_bad_input(tmp_path):
    np.savez(tmp_path / "r.npz", rows=np.array([[0.5, 0.5]]))
    assert main(["certify", str(tmp_path / "r.npz"), "-o", str(tmp_path / "o"), "--max-sum-defect", "nan"]) == 2
    (tmp_path / "afile").write_text("x")
    assert main(["certify", str(tmp_path / "r.npz"), "-o", str(tmp_path / "afile")]) == 2


def test_integer_metadata_in_pt_is_carried(tmp_path):
    torch.save({"rows": torch.tensor([[0.5, 0.3, 0.2]]), "layer": torch.tensor([3])}, tmp_path / "m.pt")
    assert main(["certify", str(tmp_path / "m.pt"), "-o", str(tmp_path / "o"), "--no-progress"]) == 0
    assert np.load(tmp_path / "o" / "metadata.npz")["layer"].tolist() == [3]


def test_verify_rejects_a_wider_dtype(certified, tmp_path):
    _, out = certified

    def widen(z):
        z["theta_lo"] = z["theta_lo"].astype(np.longdouble)
    assert _tamper(out, tmp_path, widen) == 2        # not the fixed format: bad input
