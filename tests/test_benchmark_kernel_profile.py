"""Smoke test of ``benchmarks/kernel_profile.py``: it samples stage A with perf and prints
the compiled functions' shares and the hottest instructions.  No timing is asserted.  It
needs Linux perf allowed to sample, and objdump; where either is missing, or perf cannot
sample here, the tool must say so and exit 2, which is checked instead."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_profile_attributes_the_samples_to_stage_a(tmp_path):
    listing = tmp_path / "rows.lst"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernel_profile.py"), "--L", "64",
                          "--spread", "2.5", "--seconds", "0.5", "--top", "3", "--listing", str(listing)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    if shutil.which("perf") is None or shutil.which("objdump") is None or res.stderr.startswith("kernel_profile: perf"):
        # no perf here, or one not allowed to sample this process: the tool's own clear error
        assert res.returncode == 2 and res.stderr.startswith("kernel_profile: "), res.stderr
        return
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("stage_a, L = 64, spread 2.5:")
    shares = {m.group(2): float(m.group(1)) for m in (re.match(r"^\s*([\d.]+)%  (\S.*)$", ln) for ln in lines) if m}
    assert "theta_fused._rows" in shares and shares["theta_fused._rows"] > 50, shares
    assert 99.0 <= sum(shares.values()) <= 101.0
    assert any(ln.startswith("hottest 128-byte blocks of theta_fused._rows") for ln in lines)
    assert sum(1 for ln in lines if re.match(r"^\+0x[0-9a-f]{5}\s", ln)) == 3
    # the listing: every instruction of the function, in address order, with its share; the
    # shares in it are the function's (about its share in the report), and the hot blocks'
    # instructions are in it with the same shares
    rows = [re.match(r"^(0x[0-9a-f]{5}) +([\d.]+)  (\S.*)$", ln) for ln in listing.read_text().splitlines()]
    assert len(rows) > 100 and all(rows)
    offs = [int(m.group(1), 16) for m in rows]
    assert offs == sorted(offs) and len(set(offs)) == len(offs)
    assert abs(sum(float(m.group(2)) for m in rows) - shares["theta_fused._rows"]) < 1.0
    by_off = {m.group(1): (float(m.group(2)), m.group(3)) for m in rows}
    for ln in lines:
        m = re.match(r"^    (0x[0-9a-f]{5}) +([\d.]+)%  (\S.*)$", ln)
        if m:
            assert by_off[m.group(1)][1] == m.group(3) and abs(by_off[m.group(1)][0] - float(m.group(2))) < 0.006
