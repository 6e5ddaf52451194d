"""Data parallelism on CPU with gloo.

* 2 ranks x k micro-batches == 1 rank x 2k (the loss is the mean over the global batch);
* resume after an interruption continues bitwise on 2 ranks;
* FSDP2 (fully_shard) resumes a DDP checkpoint (a config change resume allows), trains and checkpoints;
* slow tier: FSDP2 with compiled Blocks trains like eager DDP; bf16 gradient compression.
Workers are real processes started with torch.distributed.run on 127.0.0.1.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_experiments import checkpoint, config, data, train
from gpu_experiments.model import GPT

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["max_steps=4", "ckpt_steps=0,2,4", "batch_tokens=1024"]  # 4 micro-batches of 4x64 per update


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(out, ddir, *args, nproc=2):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
           "--master_addr=127.0.0.1", f"--master_port={_port()}", "-m", "gpu_experiments", "train",
           "--config", "tiny-cpu", "--seed", "5", "--out", str(out), "--device", "cpu",
           f"data_dir={ddir}", *COMMON, *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def losses(run):
    return [json.loads(ln)["loss"] for ln in (Path(run) / "metrics.jsonl").read_text().splitlines()]


def weights(ckpt):
    m = GPT(config.from_dict(checkpoint.read_extra(ckpt)["config"]).model)
    checkpoint.load_model_weights(ckpt, m)
    return m.state_dict()


@pytest.fixture(scope="module")
def ddir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    data.prepare_offline(d)
    return d


@pytest.fixture(scope="module")
def ddp_run(ddir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    torchrun(out, ddir)
    return out


def test_two_ranks_equal_one_rank_double_accumulation(ddp_run, ddir, tmp_path):
    cfg = config.apply_overrides(config.get_config("tiny-cpu"), [f"data_dir={ddir}", *COMMON])
    assert config.grad_accum_steps(cfg, 2) == 2 and config.grad_accum_steps(cfg, 1) == 4
    train.train(cfg, 5, tmp_path / "one", quiet=True)
    a, b = losses(ddp_run), losses(tmp_path / "one")
    assert len(a) == len(b) == 4
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    wa, wb = weights(ddp_run / "step-4"), weights(tmp_path / "one" / "step-4")
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5
    assert max((wa[k] - weights(ddp_run / "step-0")[k]).abs().max().item() for k in wa) > 1e-3  # it trained


def test_micro_batch_split_does_not_change_loss(ddir, tmp_path):
    base = config.apply_overrides(config.get_config("tiny-cpu"), [f"data_dir={ddir}", *COMMON, "max_steps=2", "ckpt_steps=0"])
    big = config.apply_overrides(base, ["micro_batch=8"])  # 2 micro-batches of 8 instead of 4 of 4
    a = [r["loss"] for r in train.train(base, 9, tmp_path / "a", quiet=True)]
    b = [r["loss"] for r in train.train(big, 9, tmp_path / "b", quiet=True)]
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_resume_two_ranks_bitwise(ddp_run, ddir, tmp_path):
    # The run as a kill after its step-2 checkpoint leaves it: step-0/2, config, two metric lines,
    # plus debris of the interrupted step-4 write.  (The --stop-at path itself is covered in-process.)
    out = tmp_path / "resumed"
    out.mkdir()
    for name in ("step-0", "step-2", "config.json"):
        src = ddp_run / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, out / name)
    lines = (ddp_run / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join(lines[:3]) + "\n")  # step 3 logged, not checkpointed
    (out / "step-4.tmp").mkdir()  # debris of a kill during the next write
    (out / "step-4.tmp" / "__0_0.distcp").write_bytes(b"partial")
    res = torchrun(out, ddir)
    assert "resumed from" in res.stdout
    assert losses(out) == losses(ddp_run)  # bitwise
    wa, wb = weights(ddp_run / "step-4"), weights(out / "step-4")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_fsdp2_resumes_a_ddp_checkpoint(ddp_run, ddir, tmp_path):
    # DDP -> FSDP2 on resume (RESUME_MAY_CHANGE): DCP reshards the DDP checkpoint; FSDP2 then
    # trains updates 3-4 with gradient accumulation and writes a sharded checkpoint.
    out = tmp_path / "fsdp"
    out.mkdir()
    for name in ("step-0", "step-2", "config.json"):
        src = ddp_run / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, out / name)
    lines = (ddp_run / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    res = torchrun(out, ddir, "parallel=fsdp2")
    assert "config changed (allowed): parallel 'ddp' -> 'fsdp2'" in res.stdout
    a, b = losses(ddp_run), losses(out)
    assert a[:2] == b[:2] and max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    wa, wb = weights(ddp_run / "step-4"), weights(out / "step-4")  # sharded DCP loads into a plain model
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5
    assert max((wb[k] - weights(out / "step-2")[k]).abs().max().item() for k in wb) > 1e-3  # it trained


@pytest.mark.slow
def test_fsdp2_with_compiled_blocks_trains_like_eager_ddp(ddp_run, ddir, tmp_path):
    out = tmp_path / "fsdp-compiled"
    torchrun(out, ddir, "parallel=fsdp2", "compile=true")
    a, b = losses(ddp_run), losses(out)
    assert len(b) == 4 and max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    wa, wb = weights(ddp_run / "step-4"), weights(out / "step-4")
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5


@pytest.mark.slow
def test_bf16_gradient_compression(ddp_run, ddir, tmp_path):
    # grad_compression=bf16 (on by default on CUDA across nodes) forced on gloo: the all-reduce
    # really runs in bf16 (not bitwise equal) and stays within bf16 rounding of the fp32 one.
    out = tmp_path / "bf16"
    res = torchrun(out, ddir, "grad_compression=bf16")
    assert "grad compression bf16" in res.stdout
    a, b = losses(ddp_run), losses(out)
    assert a[0] == b[0] and a != b  # the first loss precedes any gradient
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-2
