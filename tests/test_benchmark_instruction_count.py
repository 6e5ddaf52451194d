"""Tests of ``benchmarks/instruction_count.py`` (issue 27): the callgrind parser on a
hand-written output file, the clear error where valgrind is missing, and (slow tier) a real
count under valgrind.  No count is asserted against a stored figure."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from instruction_count import parse_callgrind  # noqa: E402

SCRIPT = str(ROOT / "benchmarks" / "instruction_count.py")

# the shape callgrind writes with --dump-instr=yes --branch-sim=yes: positions (instr line),
# absolute, relative and repeated addresses, and a call whose inclusive cost follows calls=
CG = """\
version: 1
creator: callgrind-3.19.0
positions: instr line
events: Ir Bc Bcm Bi Bim
fl=(1) ???
fn=(1) 0x0000000000001000
0x1000 0 5 1 0
+4 * 7 2 1
+4 * 3
cfn=(2) 0x0000000000009000
calls=1 0x9000 0
+2 * 1000 100 50
+3 * 11 0 0 0 0
-13 * 2
0x1ffe 0 9
fn=(2)
0x9000 0 20 4 2
0x2000 0 40
"""


def test_parse_callgrind_sums_the_ranges_and_leaves_out_inclusive_call_costs(tmp_path):
    f = tmp_path / "cg.out"
    f.write_text(CG)
    totals, per, events = parse_callgrind(f, [(0x1000, 0x2000)])
    assert events == ["Ir", "Bc", "Bcm", "Bi", "Bim"]
    # 0x1000: 5+2 (the line at -13 returns to it), 0x1004: 7, 0x1008: 3, 0x100d: 11, 0x1ffe: 9;
    # the call's 1000 at 0x100a is the callee's inclusive cost; 0x9000 and 0x2000 are outside
    assert per[0x1000][0] == 7 and per[0x1004][:3] == [7, 2, 1] and per[0x1008][0] == 3
    assert per[0x100d][0] == 11 and per[0x1ffe][0] == 9 and 0x100a not in per
    assert totals["Ir"] == 7 + 7 + 3 + 11 + 9 and totals["Bc"] == 1 + 2 and totals["Bcm"] == 1
    totals, _, _ = parse_callgrind(f, [(0x9000, 0x9001), (0x2000, 0x2001)])
    assert totals["Ir"] == 60 and totals["Bcm"] == 2


def test_a_file_that_is_not_callgrind_output_is_refused(tmp_path):
    f = tmp_path / "not.out"
    f.write_text("0x1000 0 5\n")
    with pytest.raises(ValueError, match="not a callgrind output file"):
        parse_callgrind(f, [(0, 1 << 64)])


def test_without_valgrind_on_path_it_says_so_and_exits_2(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))        # an empty folder: no valgrind, no git
    r = subprocess.run([sys.executable, SCRIPT, "--Ls", "64", "--spreads", "1.0"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("instruction_count: valgrind not found"), r.stderr
    assert r.stdout == ""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("objdump") is None,
                    reason="needs valgrind and objdump")
def test_a_real_count_against_head_is_identical_and_the_listing_covers_it(tmp_path):
    listing = tmp_path / "stage_a.lst"
    r = subprocess.run([sys.executable, SCRIPT, "--base", "HEAD", "--Ls", "64", "--spreads", "2.5",
                        "--rows", "256", "--reps", "1", "--listing", str(listing)], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    row = [ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("64 ")]
    assert len(row) == 1, r.stdout
    f = row[0].split()
    this, base = float(f[2]), float(f[4])
    # the same code counted twice: the same count, and a stage A row is hundreds of instructions
    assert this == base and this > 200 and f[6] == "1.000" and row[0].rstrip().endswith("identical")
    body = [ln for ln in listing.read_text().splitlines() if not ln.startswith("#")]
    per_row = sum(float(ln.split()[0]) for ln in body if re.match(r"^\s*[\d.]+\s", ln))
    assert abs(per_row - this) <= 0.01 * this        # the listing's executions add up to the count


def test_a_malformed_list_of_lengths_is_a_clear_error():
    r = subprocess.run([sys.executable, SCRIPT, "--Ls", "6x4"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("instruction_count: --Ls takes integers"), r.stderr
    assert r.stdout == ""
