"""Smoke test of ``benchmarks/certify_throughput.py --floor`` (issue 27): the table it prints.

No timing is asserted (speed lives in benchmarks/, not in tests); this checks that the option
runs end to end on a few rows and prints one ratio pair per L and spread.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_floor_table_prints_a_ratio_pair_for_every_length_and_spread():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "certify_throughput.py"), "--floor",
                          "--elems", "8192", "--reps", "1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    head = [ln for ln in lines if ln.lstrip().startswith("L ")]
    assert len(head) == 1 and head[0].count("spread") == 4
    body = {int(ln.split()[0]): ln for ln in lines if re.match(r"^\s+\d+\s", ln)}
    assert sorted(body) == [64, 256, 1024, 4096]
    for ln in body.values():
        assert len(re.findall(r"\d+\.\dx / +\d+\.\dx", ln)) == 4, ln
