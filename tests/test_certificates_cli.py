"""Certificates CLI: nothing lost, portable certificates,
honest display, CLI conventions, streaming with bounded memory, progress when piped."""
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from certificates.__main__ import build_parser, main
from certificates.report import fmt_theta

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rows(n, L, seed=0, scale=3.0):
    lg = np.random.default_rng(seed).normal(size=(n, L)) * scale
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _listing(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def _certify(*args):
    return main(["certify", *map(str, args), "--no-progress"])


# ---------------------------------------------------------------- item 4: nothing is ever lost
def test_existing_folder_is_refused_and_left_unchanged(tmp_path, capsys):
    np.save(tmp_path / "r.npy", _rows(20, 12).astype(np.float32))
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    shutil.copy(tmp_path / "r.npy", out / "r.npy")          # the input itself lives in OUTDIR
    before = _listing(out)
    assert _certify(out / "r.npy", "-o", out) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert _listing(out) == before


def test_overwrite_replaces_only_what_certify_wrote(tmp_path):
    np.save(tmp_path / "r.npy", _rows(20, 12).astype(np.float32))
    np.savez(tmp_path / "l.npz", logits=np.random.default_rng(1).normal(size=(5, 9)))
    out = tmp_path / "out"
    assert _certify(tmp_path / "r.npy", tmp_path / "l.npz", "-o", out) == 0
    assert (out / "certified-rows-1.npy").exists()
    (out / "notes.txt").write_text("mine")
    (out / "report" / "my-figure.png").write_bytes(b"x")
    assert _certify(tmp_path / "r.npy", "-o", out, "--overwrite") == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "report" / "my-figure.png").exists()
    assert not (out / "certified-rows-1.npy").exists()        # ours, stale: removed
    assert main(["verify", str(out), "--no-progress"]) == 0
    assert not [p for p in os.listdir(out) if p.startswith(".certify-tmp")]


def test_overwrite_never_replaces_a_foreign_file(tmp_path, capsys):
    np.save(tmp_path / "r.npy", _rows(5, 6))
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"mine": true}')          # not written by certify
    before = _listing(out)
    assert _certify(tmp_path / "r.npy", "-o", out, "--overwrite") == 2
    assert "not written by certify" in capsys.readouterr().err
    assert _listing(out) == before


def test_report_removes_only_its_own_stale_figures(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npy"
    n = 40
    np.savez(a, rows=_rows(n, 10), layer=np.arange(n) % 2, step=np.arange(n) // 20)
    np.save(b, _rows(n, 10, seed=3))
    assert _certify(a, "-o", tmp_path / "ca") == 0 and _certify(b, "-o", tmp_path / "cb") == 0
    rep = tmp_path / "rep"
    assert main(["report", str(tmp_path / "ca"), "-o", str(rep), "--no-progress"]) == 0
    assert (rep / "heatmap_layer_step.png").exists()
    (rep / "keep.png").write_bytes(b"x")
    assert main(["report", str(tmp_path / "cb"), "-o", str(rep), "--no-progress"]) == 0
    assert not (rep / "heatmap_layer_step.png").exists() and (rep / "keep.png").exists()
    assert "heatmap" not in (rep / "report.md").read_text()


# ---------------------------------------------------------------- item 4: moved folders
def test_moved_folder_verifies_with_inputs_dir(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "r.npy", _rows(15, 10))
    assert _certify(data / "r.npy", "-o", tmp_path / "out") == 0
    moved = tmp_path / "elsewhere" / "deeper" / "out"
    shutil.copytree(tmp_path / "out", moved)
    assert main(["verify", str(moved), "--no-progress"]) == 2
    assert "--inputs" in capsys.readouterr().err
    assert main(["verify", str(moved), "--inputs", str(tmp_path / "elsewhere"), str(data), "--no-progress"]) == 0
    other = tmp_path / "other"
    other.mkdir()
    np.save(other / "r.npy", _rows(15, 10, seed=9))            # same name, other content: never taken
    assert main(["verify", str(moved), "--inputs", str(other), "--no-progress"]) == 1


def test_hashes_made_on_helper_threads_match_a_serial_pass_and_a_wrong_one_fails(tmp_path, capsys):
    # certify and verify hash on helper threads; the recorded hashes must be those of a plain
    # serial pass over the same bytes, chunk after chunk, and verify must notice a wrong one
    import hashlib
    R = _rows(3000, 16, seed=4)                         # several chunks at chunk_elems below
    np.save(tmp_path / "r.npy", R)
    from certificates.certify_files import run_certify
    run_certify([str(tmp_path / "r.npy")], str(tmp_path / "out"), progress=False, report=False,
                chunk_elems=4096)
    summ = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summ["rows_sha256"] == hashlib.sha256(R.tobytes()).hexdigest()
    assert summ["inputs"][0]["sha256"] == hashlib.sha256((tmp_path / "r.npy").read_bytes()).hexdigest()
    assert main(["verify", str(tmp_path / "out"), "--no-progress"]) == 0
    summ["rows_sha256"] = ("0" if summ["rows_sha256"][0] != "0" else "1") + summ["rows_sha256"][1:]
    (tmp_path / "out" / "summary.json").write_text(json.dumps(summ))
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "rows_sha256" in capsys.readouterr().out


# ---------------------------------------------------------------- item 3: logits on any machine
def test_logits_verify_replays_stored_rows_not_this_libm(tmp_path, monkeypatch):
    lg = np.random.default_rng(5).normal(size=(40, 33)) * 4
    np.savez(tmp_path / "l.npz", logits=lg, tau=np.array(0.7))
    out = tmp_path / "out"
    assert _certify(tmp_path / "l.npz", "-o", out) == 0
    stored = np.load(out / "certified-rows-0.npy")
    z = np.load(out / "certificates.npz")
    assert (z["p_max"] == stored.max(1) / stored.sum(1)).mean() > 0.5   # the stored rows are what was certified
    real_exp = np.exp

    def other_libm(x, *a, **k):                   # a different exp: last bits move by 1 ulp
        y = real_exp(x, *a, **k)
        return np.nextafter(y, np.inf) if isinstance(y, np.ndarray) else y
    monkeypatch.setattr(np, "exp", other_libm)
    assert main(["verify", str(out), "--no-progress"]) == 0
    monkeypatch.setattr(np, "exp", real_exp)
    # negative control: rows that are not the softmax of these logits (sha256 updated to match)
    bad = stored.copy()
    bad[3] = bad[3][::-1]
    np.save(out / "certified-rows-0.npy", bad)
    s = json.loads((out / "summary.json").read_text())
    from certificates.inputs import file_sha256
    s["inputs"][0]["certified_rows"]["sha256"] = file_sha256(str(out / "certified-rows-0.npy"))
    (out / "summary.json").write_text(json.dumps(s))
    assert main(["verify", str(out), "--no-progress"]) == 1


# ---------------------------------------------------------------- item 6: honest display
def test_theta_below_one_never_prints_as_one():
    assert fmt_theta(0.99999999999) != "1" and "1e-11" in fmt_theta(0.99999999999)
    assert fmt_theta(1.0) == "1" and fmt_theta(0.5) == "0.5"


def test_report_names_missing_metadata_and_closes_exact_rows_at_tolerance_0(tmp_path):
    n = 30
    np.savez(tmp_path / "a.npz", rows=_rows(n, 9, scale=0.3), layer=np.arange(n) % 3)
    np.save(tmp_path / "b.npy", _rows(n, 9, seed=2, scale=0.3))
    out = tmp_path / "out"
    assert _certify(tmp_path / "a.npz", tmp_path / "b.npy", "-o", out, "--tolerance", "0") == 0
    z = np.load(out / "certificates.npz")
    assert (z["regime"] != 2).all()              # L = 9: every row solved exactly → closed, not open
    md = (out / "report" / "report.md").read_text()
    assert "(no layer metadata)" in md and "| -1 |" not in md
    assert main(["verify", str(out), "--no-progress"]) == 0


# ---------------------------------------------------------------- item 7: CLI conventions
def test_every_argument_has_help():
    ap = build_parser()
    for sub in ap._subparsers._group_actions[0].choices.values():
        for act in sub._actions:
            assert act.help, (sub.prog, act.dest)


def test_other_commands_work_without_probe(monkeypatch, tmp_path):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "certificates.probe_cli" else real(name, *a))
    np.save(tmp_path / "r.npy", _rows(4, 5))
    assert _certify(tmp_path / "r.npy", "-o", tmp_path / "o") == 0


def test_progress_lines_when_piped():
    from certificates.progress import Progress
    buf = io.StringIO()
    p = Progress(100, "certify", every=0.0, file=buf)
    p.update(40)
    p.update(60)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "40/100" in lines[0] and "rows/s" in lines[0]


# ---------------------------------------------------------------- bounded memory
MEMCHILD = textwrap.dedent("""
    import resource, sys, numpy as np
    from certificates.__main__ import main
    d = sys.argv[1]
    np.save(d + "/warm.npy", np.full((2, 4), 0.25))
    assert main(["certify", d + "/warm.npy", "-o", d + "/w", "--overwrite", "--no-progress"]) == 0  # imports, JIT
    vm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize")][0] * 1024
    limit = vm + int(sys.argv[2]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rc = main(["certify", *sys.argv[3:], "-o", d + "/out", "--no-progress"])
    rc = rc or main(["verify", d + "/out", "--no-progress"])
    sys.exit(rc)
""")


def test_mixed_lengths_certify_within_a_memory_limit(tmp_path):
    # the case had 20,000 rows of L = 8 and one of L = 65,536 (padding asked for 9.8 GiB);
    # 1,500 short rows already need 750 MiB padded as float64, above the 400 MiB allowed here
    np.save(tmp_path / "short.npy", _rows(1500, 8).astype(np.float32))
    x = np.random.default_rng(1).random(65536)
    np.save(tmp_path / "long.npy", (x / x.sum())[None, :])
    p = subprocess.run([sys.executable, "-c", MEMCHILD, str(tmp_path), "400", str(tmp_path / "short.npy"),
                        str(tmp_path / "long.npy")], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert np.load(tmp_path / "out" / "certificates.npz")["witness"].shape == (1501, 8192)


@pytest.mark.slow
def test_many_rows_certify_within_a_memory_limit(tmp_path):
    # 256 MiB of float32 rows, as .npy (pread) and as a compressed .npz (streamed); 200 MiB of
    # address space above the warmed-up process is less than the file itself, so only
    # chunked reading can pass (reading it whole, or as float64, needs 256–512 MiB)
    R = _rows(131072, 512).astype(np.float32)
    np.save(tmp_path / "big.npy", R)
    np.savez_compressed(tmp_path / "big.npz", rows=R)
    del R
    for f in ("big.npy", "big.npz"):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        p = subprocess.run([sys.executable, "-c", MEMCHILD, str(tmp_path), "200", str(tmp_path / f)],
                           cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-2000:]
