"""The training loop's efficient defaults and what it reports: chunked loss, compile, eval loss, logs."""
import importlib.util
import json
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpu_experiments import checkpoint, config, data, distributed, train
from gpu_experiments.loss import token_loss_sum, token_loss_sum_nograd
from gpu_experiments.model import GPT


@pytest.fixture(scope="module")
def ddir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    data.prepare_offline(d)
    return d


def _cfg(ddir, *extra):
    return config.apply_overrides(config.get_config("tiny-cpu"), [
        f"data_dir={ddir}", "max_steps=2", "lr_decay_steps=2", "ckpt_steps=0,2", "tensorboard=false", *extra])


def _weights(ckpt, cfg):
    m = GPT(cfg.model)
    checkpoint.load_model_weights(ckpt, m)
    return m.state_dict()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_loss_equals_cross_entropy_without_a_float32_logits_copy(dtype):
    torch.manual_seed(0)
    V = 37
    x = torch.randn(3, 41, V, dtype=torch.float64).to(dtype).requires_grad_()
    y = torch.randint(0, V, (3, 41))
    keep = x.detach().clone()
    ours = token_loss_sum(x, y, chunk=16)  # 123 tokens: 7 full chunks and a short one
    ours.mul(0.25).backward()
    g_ours = x.grad.clone()
    x.grad = None
    ref = F.cross_entropy(x.double().view(-1, V), y.view(-1), reduction="sum")
    ref.mul(0.25).backward()
    assert torch.equal(x.detach(), keep)  # the logits are never overwritten
    assert ours.dtype == torch.float64 and g_ours.dtype == dtype  # gradient stored in the model dtype
    assert abs(ours.item() - ref.item()) < 1e-4 * abs(ref.item())
    tol = 1e-6 if dtype == torch.float32 else 2e-3  # bf16: one rounding of the stored gradient
    assert (g_ours.double() - x.grad.double()).abs().max().item() < tol
    assert token_loss_sum_nograd(x, y, chunk=5).item() == pytest.approx(ours.item(), rel=1e-12)


def test_every_record_has_throughput_mfu_memory_and_eval(ddir, tmp_path, capsys):
    cfg = _cfg(ddir, "eval_every=1", "eval_tokens=512", "peak_tflops=0.001", "log_every=1")
    recs = train.train(cfg, 3, tmp_path / "r")
    out = capsys.readouterr().out
    for r in recs:
        assert r["tokens_per_s"] > 0 and r["mfu"] > 0 and r["peak_mem_bytes"] > 2**20
        assert r["eval_loss"] is not None and np.isfinite(r["eval_loss"])
    lines = [ln for ln in out.splitlines() if ln.startswith("step ")]
    assert len(lines) == 2 and all("tok/s" in ln and "mfu " in ln and "GiB" in ln and "eval " in ln for ln in lines)
    assert "rank 0/1 local 0" in out and "cpus " in out  # the affinity line

    # the eval loss is the mean token loss over the fixed held-out windows, at the final weights
    model = GPT(cfg.model)
    checkpoint.load_model_weights(tmp_path / "r" / "step-2", model)
    d = distributed.Dist(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    held = train._HeldOut(cfg, d)
    assert sum(len(b) for b in held.batches) == 512 // 64
    val = data.load_tokens(ddir, "val")
    T, tot, n = 64, 0.0, 0
    with torch.no_grad():
        for b in held.batches:
            buf = torch.from_numpy(np.stack([val[w * T: w * T + T + 1] for w in b]).astype(np.int64))
            logits = model(buf[:, :-1])
            tot += F.cross_entropy(logits.double().reshape(-1, logits.size(-1)), buf[:, 1:].reshape(-1),
                                   reduction="sum").item()
            n += buf[:, 1:].numel()
    assert recs[-1]["eval_loss"] == pytest.approx(tot / n, rel=1e-6)
    lines = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [ln["eval_loss"] for ln in lines] == [r["eval_loss"] for r in recs]


def test_eval_windows_split_evenly_over_ranks(ddir):
    cfg = _cfg(ddir, "eval_tokens=640", "micro_batch=4")  # 10 windows -> 5 per rank (FSDP2 needs equal calls)
    parts = [train._HeldOut(cfg, distributed.Dist(rank=r, local_rank=r, world_size=2, device=torch.device("cpu")))
             for r in (0, 1)]
    assert [[len(b) for b in p.batches] for p in parts] == [[4, 1], [4, 1]]
    w0, w1 = (np.concatenate(p.batches) for p in parts)
    assert not set(w0) & set(w1)


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                    reason="tensorboard not installed (pip install tensorboard)")
def test_tensorboard_event_files_beside_metrics(ddir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train.train(_cfg(ddir, "tensorboard=true", "eval_every=2", "eval_tokens=256"), 1, tmp_path / "r", quiet=True)
    acc = EventAccumulator(str(tmp_path / "r" / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/tokens_per_s", "train/peak_mem_bytes", "eval/loss"} <= tags
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2]


def test_without_tensorboard_one_line_and_metrics_only(ddir, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import now raises ImportError
    train.train(_cfg(ddir, "tensorboard=true"), 1, tmp_path / "r")
    out = capsys.readouterr().out
    assert sum("tensorboard is not installed" in ln for ln in out.splitlines()) == 1
    assert not (tmp_path / "r" / "tensorboard").exists() and (tmp_path / "r" / "metrics.jsonl").exists()


def test_compiled_blocks_train_like_eager(ddir, tmp_path):
    # torch.compile of each Block's forward (inductor, on CPU) against eager: float tolerance.
    from torch._dynamo.utils import counters

    counters.clear()
    eager = train.train(_cfg(ddir, "eval_every=0"), 2, tmp_path / "e", quiet=True)
    comp = train.train(_cfg(ddir, "eval_every=0", "compile=true"), 2, tmp_path / "c", quiet=True)
    assert counters["stats"]["unique_graphs"] >= 1  # dynamo really compiled something
    assert max(abs(a["loss"] - b["loss"]) for a, b in zip(eager, comp)) < 1e-5
    we, wc = (_weights(tmp_path / run / "step-2", _cfg(ddir)) for run in ("e", "c"))
    assert max((we[k] - wc[k]).abs().max().item() for k in we) < 1e-5
    assert set(we) == set(wc)  # compile leaves parameter names (and checkpoints) as they are
