"""Smoke tests of ``benchmarks/certify_throughput.py``'s ``--floor``, ``--causal`` and
``--only-spreads --minima`` tables (issue 27), of the causal rows the second times, and of the
ratio of minima the third prints.

No timing is asserted (speed lives in benchmarks/, not in tests); these check that each
option runs end to end on a few rows and prints one cell per row kind and spread, and that
the causal rows are what the table says they are — a softmax over a prefix of each row,
exact zeros after it.
"""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from certify_throughput import causal_rows  # noqa: E402


def _table(option, head_word, *more):
    """(header line, output lines) of the table that ``option`` (with ``more`` options)
    prints on a few rows."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "certify_throughput.py"), option, *more,
                          "--elems", "8192", "--reps", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    head = [ln for ln in lines if ln.lstrip().startswith(head_word + " ")]
    assert len(head) == 1 and head[0].count("spread") == 4
    return lines


def test_floor_table_prints_a_ratio_pair_for_every_length_and_spread():
    lines = _table("--floor", "L")
    body = {int(ln.split()[0]): ln for ln in lines if re.match(r"^\s+\d+\s", ln)}
    assert sorted(body) == [64, 256, 1024, 4096]
    for ln in body.values():
        assert len(re.findall(r"\d+\.\dx / +\d+\.\dx", ln)) == 4, ln


def test_causal_rows_are_softmax_prefixes_followed_by_zeros():
    R = causal_rows(2000, 64, seed=3, spread=1.0)
    assert R.shape == (2000, 64) and R.dtype == np.float64
    nnz = (R > 0).sum(axis=1)
    for r, k in zip(R, nnz):
        assert (r[:k] > 0).all() and (r[k:] == 0).all()       # a prefix, then exact zeros
    assert nnz.min() == 1 and nnz.max() == 64                   # every prefix length occurs
    assert np.abs(R.sum(axis=1) - 1).max() < 1e-12


def test_causal_table_prints_a_cell_for_every_row_kind_and_spread():
    lines = _table("--causal", "rows")
    body = [m.group(1) for m in (re.match(r"^\s+(causal \d+|L = \d+)\s", ln) for ln in lines) if m]
    assert body == ["causal 64", "causal 256", "causal 1024", "L = 8", "L = 16", "L = 32"]
    for ln in lines:
        if re.match(r"^\s+(causal \d+|L = \d+)\s", ln):
            assert len(re.findall(r"\d+\.\dx \( *\d+\.\d\d%, +\d+\.\d%\)", ln)) == 4, ln


def test_spread_table_with_minima_prints_both_ratios_for_every_length_and_spread():
    lines = _table("--only-spreads", "L", "--minima")
    body = {int(ln.split()[0]): ln for ln in lines if re.match(r"^\s+\d+\s", ln)}
    assert sorted(body) == [64, 256, 1024, 4096]
    for ln in body.values():
        assert len(re.findall(r"\d+\.\dx +\d+\.\dx \( *\d+\.\d\d%, +\d+\.\d%\)", ln)) == 4, ln


def test_ratio_of_minima_takes_each_sides_fastest_run():
    from certify_throughput import ratio_of_minima
    # the fastest certify run (8) over the fastest row sum (1), though they were not paired
    assert ratio_of_minima([2.0, 1.0, 4.0], [10.0, 9.0, 8.0]) == 8.0
    assert ratio_of_minima([3.0], [6.0]) == 2.0
