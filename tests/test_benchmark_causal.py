"""Smoke test of ``benchmarks/certify_throughput.py --causal`` (issue 27): its rows and its table.

No timing is asserted (speed lives in benchmarks/, not in tests).  The causal rows must be
what the table says they are — a softmax over a prefix of each row, exact zeros after it —
and the option must run end to end on a few rows, one cell per row kind and spread.
"""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from certify_throughput import causal_rows  # noqa: E402


def test_causal_rows_are_softmax_prefixes_followed_by_zeros():
    R = causal_rows(2000, 64, seed=3, spread=1.0)
    assert R.shape == (2000, 64) and R.dtype == np.float64
    nnz = (R > 0).sum(axis=1)
    for r, k in zip(R, nnz):
        assert (r[:k] > 0).all() and (r[k:] == 0).all()       # a prefix, then exact zeros
    assert nnz.min() == 1 and nnz.max() == 64                   # every prefix length occurs
    assert np.abs(R.sum(axis=1) - 1).max() < 1e-12


def test_causal_table_prints_a_cell_for_every_row_kind_and_spread():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "certify_throughput.py"), "--causal",
                          "--elems", "8192", "--reps", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    head = [ln for ln in lines if ln.lstrip().startswith("rows ")]
    assert len(head) == 1 and head[0].count("spread") == 4
    body = [ln for ln in lines if re.match(r"^\s+(causal \d+|L = \d+)\s", ln)]
    assert len(body) == 6
    assert [re.match(r"^\s+(causal \d+|L = \d+)", ln).group(1) for ln in body] == [
        "causal 64", "causal 256", "causal 1024", "L = 8", "L = 16", "L = 32"]
    for ln in body:
        assert len(re.findall(r"\d+\.\dx \( *\d+\.\d\d%, +\d+\.\d%\)", ln)) == 4, ln
