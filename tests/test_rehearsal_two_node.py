"""Two-node FSDP2 rehearsal through gpu_experiments/slurm/train.sbatch on localhost.

Slow tier: three torchrun jobs of two agents each plus one single-process run.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_experiments import rehearse_nodes

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_two_nodes_resume_bitwise_and_match_one_node(tmp_path):
    out = tmp_path / "two"
    res = subprocess.run([sys.executable, "-m", "gpu_experiments", "rehearse", "--config", "tiny-cpu",
                          "--nnodes", "2", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=1200, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads((out / "rehearsal.json").read_text())
    assert rec["nnodes"] == 2 and rec["parallel"] == "fsdp2" and rec["grad_accum_per_rank"] == 2
    assert rec["stopped_after_update"] == rec["checkpoint_step"] + 1  # work after the checkpoint was lost
    assert rec["resume_bitwise"] and rec["losses_resumed"] == rec["losses_two_node"]
    assert rec["resume_tensors_compared"] > 0
    assert len(rec["losses_one_node"]) == rec["steps"] == 6
    assert rec["matches_one_node"]
    assert rec["max_loss_diff_vs_one_node"] <= rehearse_nodes.LOSS_TOL
    # the comparison has teeth: the weights moved well beyond the tolerance since the checkpoint
    assert rec["max_weight_change_since_checkpoint"] > 100 * rehearse_nodes.WEIGHT_TOL
    assert rec["losses_two_node"][-1] < rec["losses_two_node"][0]
    if len(os.sched_getaffinity(0)) >= 2:  # the srun stand-in honours --cpus-per-task=1 per node
        assert [r["n_cpus"] for r in rec["affinity"]] == [1, 1]
        assert rec["affinity"][0]["cpus"] != rec["affinity"][1]["cpus"]
    assert not (out / "work").exists()


def test_read_tensors_sees_model_and_optimizer(tmp_path):
    # the bitwise comparison reads every tensor of a DCP checkpoint, AdamW state included
    from gpu_experiments import checkpoint, config, distributed
    from gpu_experiments.model import GPT, param_groups

    cfg = config.get_config("tiny-cpu")
    torch.manual_seed(0)
    model = GPT(cfg.model)
    optim = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3)
    model(torch.zeros(1, 8, dtype=torch.long)).sum().backward()
    optim.step()
    d = distributed.Dist(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    ck = checkpoint.save(tmp_path, 1, model, optim, {"config": config.to_dict(cfg)}, d)
    t = rehearse_nodes.read_tensors(ck)
    assert torch.equal(t["model.transformer.h.0.attn.c_attn.weight"], model.transformer.h[0].attn.c_attn.weight)
    avgs = [k for k in t if k.startswith("optim.") and k.endswith("exp_avg_sq")]
    assert len(avgs) == len(list(model.parameters()))
