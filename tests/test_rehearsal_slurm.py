"""train.sbatch under a real local Slurm: sbatch, CPUs per rank, SIGUSR1, requeue, bitwise resume.

Slow tier; needs Debian's slurm-wlm and munge (`apt-get install -y slurm-wlm munge`) and root
(slurmd).  About 30-40 s on the 2-core machine.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_experiments import rehearse_slurm

ROOT = Path(__file__).resolve().parents[1]
_missing = rehearse_slurm.missing_tools()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing), reason=f"slurm-wlm/munge not installed ({', '.join(_missing)} missing): "
                                              f"{rehearse_slurm.INSTALL}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local Slurm's slurmd must run as root"),
]


def test_slurm_preempt_requeue_resume_bitwise(tmp_path):
    out = tmp_path / "slurm"
    res = subprocess.run([sys.executable, "-m", "gpu_experiments", "rehearse", "--config", "tiny-cpu", "--slurm",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    rec = json.loads((out / "rehearsal.json").read_text())
    assert rec["slurm"] is True and rec["preempted_and_resumed"] is True and rec["resume_bitwise"] is True
    assert rec["slurm_version"].startswith("slurm")
    # every rank of both attempts saw the CPUs the job asked for; the old srun line would not have
    assert rec["affinity_ok"] and len(rec["affinity"]) == 2
    assert all(r["n_cpus"] == rec["node_cpus"] and r["slurm_cpus_per_task"] == str(rec["node_cpus"])
               for attempt in rec["affinity"] for r in attempt)
    if rec["node_cpus"] > 1:
        assert rec["control_srun_without_cpus_per_task_cpus"] < rec["node_cpus"]
    assert 1 <= rec["preempted_at_update"] < rec["steps"] and rec["requeue_restarts"] == 1
    assert "/resume/step-" in rec["resumed_from"]
    assert rec["losses"] == rec["losses_reference"] and rec["resume_tensors_compared"] > 0
    assert len(rec["eval_losses"]) == 2 and rec["losses"][-1] < rec["losses"][0]
    job = (out / "job-preempted.out").read_text()
    assert "caught SIGUSR1" in job and "requeueing job" in job and "restart 1:" in job
    assert not (out / "work").exists()
    assert not list(Path(rehearse_slurm.tempfile.gettempdir()).glob("rh-slurm-*"))  # daemons' state removed


def test_local_slurm_stops_its_daemons_on_error():
    procs = {}
    with pytest.raises(RuntimeError, match="boom"):
        with rehearse_slurm.LocalSlurm(say=lambda m: None) as slurm:
            procs = dict(slurm.procs)
            tmp = slurm.tmp
            raise RuntimeError("boom")
    assert set(procs) == {"munged", "slurmctld", "slurmd"}
    assert all(p.poll() is not None for p in procs.values()) and not tmp.exists()
