"""Smoke tests of ``benchmarks/lockstep_chains.py`` (issue 27): its three schedules of the same
chains must agree bit for bit, or the times it prints compare different work.  No timing is
asserted (speed lives in benchmarks/)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import lockstep_chains as lc  # noqa: E402

SCRIPT = str(ROOT / "benchmarks" / "lockstep_chains.py")


def _plain(R, NB, NF, stop):
    # the chains written out in Python, one row at a time, rows chained as in the script
    out = np.empty(R.shape[0])
    prev = 0.0
    L = R.shape[1]
    for i in range(R.shape[0]):
        D = prev * 0.0
        for t in range(NB[i]):
            D = D + R[i, t] if D <= 0.0 else D - R[i, t]
        E = abs(D) + R[i, L - 1]
        for t in range(NF[i]):
            if E <= stop:
                break
            p = R[i, L // 2 + t % (L // 2)]
            E = E - p if p <= E else E
        out[i] = E
        prev = E
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_three_schedules_agree_with_plain_python(seed):
    R, NB, NF, stop = lc.chains_input(200, seed=seed)
    NB[:4] = [16, 1, 1, 16]            # one row of a pair far longer than the other, both ways
    NF[:4] = [0, 24, 24, 0]
    ref = _plain(R, NB, NF, stop).view(np.int64)
    for name, out in lc.results(R, NB, NF, stop).items():
        assert np.array_equal(out.view(np.int64), ref), name


def test_a_stop_that_ends_first_fit_early_is_honoured_by_every_schedule():
    R, NB, NF, _ = lc.chains_input(64, seed=5)
    stop = 0.02                        # reached within a few first-fit steps on most rows
    ref = _plain(R, NB, NF, stop).view(np.int64)
    for name, out in lc.results(R, NB, NF, stop).items():
        assert np.array_equal(out.view(np.int64), ref), name


def test_it_prints_the_three_variants_and_refuses_an_odd_row_count():
    r = subprocess.run([sys.executable, SCRIPT, "--rows", "64", "--reps", "1"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "bit-identical" in r.stdout
    for name in ("one", "lockstep", "min+tails"):
        assert any(ln.split()[:1] == [name] for ln in r.stdout.splitlines()), r.stdout
    bad = subprocess.run([sys.executable, SCRIPT, "--rows", "63"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode == 2 and "--rows" in bad.stderr
