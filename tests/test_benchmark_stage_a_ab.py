"""Smoke tests of ``benchmarks/stage_a_ab.py`` (issue 27): it runs this tree's stage A beside
a git revision's, reports whether their outputs are identical, and fails clearly on a
revision it cannot read.  No timing is asserted (speed lives in benchmarks/)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import stage_a_ab  # noqa: E402
from stage_a_ab import differing_rows  # noqa: E402

SCRIPT = str(ROOT / "benchmarks" / "stage_a_ab.py")


def _git_checkout():
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.returncode == 0


def test_differing_rows_compares_bit_for_bit():
    rng = np.random.default_rng(3)
    M = (rng.random((8, 16)) < 0.5).astype(np.uint8)
    cols = rng.random((6, 8))
    st = rng.integers(0, 3, 8).astype(np.int8)
    a = (M, cols, st)
    assert differing_rows(a, (M.copy(), cols.copy(), st.copy())) == 0
    M2, c2, s2 = M.copy(), cols.copy(), st.copy()
    M2[1, 4] ^= 1                    # a witness bit
    c2[2, 3] = np.nextafter(c2[2, 3], 2.0)   # one ulp of a bound
    c2[0, 6] = -0.0                  # equal as floats to +0.0, not as bits
    cols[0, 6] = 0.0
    s2[7] = s2[7] + 1                # a state
    assert differing_rows(a, (M2, c2, s2)) == 4


@pytest.mark.skipif(not _git_checkout(), reason="needs the git checkout it compares against")
def test_against_head_it_prints_a_cell_and_identical():
    r = subprocess.run([sys.executable, SCRIPT, "--base", "HEAD", "--Ls", "64", "--spreads", "1.0",
                        "--reps", "1", "--elems", "2048"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    body = [ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("64 ")]
    assert len(body) == 1 and body[0].rstrip().endswith("identical"), r.stdout


@pytest.mark.skipif(not _git_checkout(), reason="needs the git checkout it compares against")
def test_an_unknown_revision_is_a_clear_error():
    r = subprocess.run([sys.executable, SCRIPT, "--base", "no-such-revision", "--reps", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "no-such-revision" in r.stderr and "numerics/theta_fused.py" in r.stderr


def test_a_base_that_does_not_load_beside_this_tree_is_a_clear_error(monkeypatch, tmp_path):
    # a revision whose theta_fused imports a kernel this tree has dropped
    class Shown:
        stdout = "from numerics.theta_kernels import NO_SUCH_KERNEL\n"

    monkeypatch.setattr(stage_a_ab.subprocess, "run", lambda *a, **k: Shown())
    with pytest.raises(SystemExit) as e:
        stage_a_ab.load_base("old-rev", tmp_path)
    assert "old-rev" in str(e.value) and "NO_SUCH_KERNEL" in str(e.value)
