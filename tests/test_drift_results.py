"""Drift test of committed records, not of code: the CPU-scale results in results/.

They must still be present, re-verify with today's verifier, and load in the E1–E3 checks. A failure
means the committed results and the code have drifted apart (a format change needs the results
re-made), not that a certificate algorithm is wrong; the algorithms have their own tests.
"""
from pathlib import Path

from certificates.verify import run_verify
from proofs.checks import empirical

ROOT = Path(__file__).resolve().parent.parent
SETS = sorted(p.parent for p in (ROOT / "results").glob("*/seed-*/certificates/summary.json"))


def test_results_are_committed():
    # Three pre-LN seeds and the post-LN contrast.
    names = {f"{p.parent.parent.name}/{p.parent.name}" for p in SETS}
    assert {"small-cpu/seed-1", "small-cpu/seed-2", "small-cpu/seed-3", "small-cpu-postln/seed-1"} <= names


def test_committed_sample_reverifies():
    # The independent exact verifier replays every witness and bound of one seed's set.
    assert run_verify(str(ROOT / "results/small-cpu/seed-1/certificates"), progress=False) == 0


def test_empirical_loader_sees_every_seed():
    runs = empirical.load_runs()
    assert sorted(runs) == ["seed-1", "seed-2", "seed-3"]
    for arrs in runs.values():
        assert len(arrs["theta_lo"]) == len(arrs["layer"]) == len(arrs["entropy"]) > 0
        assert (arrs["theta_lo"] <= arrs["theta_hi"]).all()
