"""Checkpoints: atomic writes, safe loading, single-process resume, non-finite stop."""
import json
import os
import pickle

import pytest
import torch

from gpu_experiments import checkpoint, config, data, train
from gpu_experiments.model import GPT


@pytest.fixture(scope="module")
def ddir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    data.prepare_offline(d)
    return d


def _cfg(ddir, *extra):
    return config.apply_overrides(config.get_config("tiny-cpu"),
                                  [f"data_dir={ddir}", "max_steps=4", "ckpt_steps=0,2,4", *extra])


def _weights(ckpt):
    m = GPT(config.from_dict(checkpoint.read_extra(ckpt)["config"]).model)
    checkpoint.load_model_weights(ckpt, m)
    return m.state_dict()


def test_resume_single_process_bitwise(ddir, tmp_path):
    cfg = _cfg(ddir)
    full = train.train(cfg, 7, tmp_path / "a", quiet=True)
    part = train.train(cfg, 7, tmp_path / "b", stop_at=2, quiet=True)
    assert [r["step"] for r in part] == [1, 2]
    rest = train.train(cfg, 7, tmp_path / "b", quiet=True)
    assert [r["loss"] for r in full] == [r["loss"] for r in part + rest]
    wa, wb = _weights(tmp_path / "a" / "step-4"), _weights(tmp_path / "b" / "step-4")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(ln)["step"] for ln in lines] == [1, 2, 3, 4]
    assert not torch.are_deterministic_algorithms_enabled()  # global state restored


def test_interrupted_write_keeps_last_good(ddir, tmp_path, monkeypatch):
    cfg = _cfg(ddir)
    run = tmp_path / "r"
    train.train(cfg, 3, run, stop_at=2, quiet=True)
    real_save = checkpoint.dcp.save

    def dying_save(state, checkpoint_id):
        real_save(state, checkpoint_id=checkpoint_id)
        raise KeyboardInterrupt("killed during write")

    monkeypatch.setattr(checkpoint.dcp, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        train.train(cfg, 3, run, quiet=True)
    monkeypatch.undo()
    assert [s for s, _ in checkpoint.list_checkpoints(run)] == [0, 2]
    assert (run / "step-4.tmp").exists() and not (run / "step-4").exists()
    rest = train.train(cfg, 3, run, quiet=True)  # resumes from step-2, replaces the stale .tmp
    assert [r["step"] for r in rest] == [3, 4]
    assert [s for s, _ in checkpoint.list_checkpoints(run)] == [0, 2, 4]
    assert not (run / "step-4.tmp").exists()


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_loading_refuses_pickled_code(ddir, tmp_path):
    cfg = _cfg(ddir, "max_steps=2", "ckpt_steps=0")
    train.train(cfg, 1, tmp_path / "r", stop_at=0, quiet=True)
    ck = tmp_path / "r" / "step-0"
    assert _weights(ck)  # loads fine as written
    (ck / ".metadata").write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(ValueError, match="posix.system|os.system|not allowed"):
        _weights(ck)


def test_config_mismatch_on_resume(ddir, tmp_path):
    train.train(_cfg(ddir), 1, tmp_path / "r", stop_at=0, quiet=True)
    with pytest.raises(ValueError, match="different config"):
        train.train(_cfg(ddir, "lr=0.1"), 1, tmp_path / "r", quiet=True)


def test_non_finite_loss_stops_and_keeps_checkpoint(ddir, tmp_path):
    # init_std=1e20 makes q.k overflow to inf, so the first loss is NaN.
    cfg = _cfg(ddir, "init_std=1e20")
    with pytest.raises(train.NonFiniteLoss, match="non-finite loss .* last good checkpoint: .*step-0"):
        train.train(cfg, 1, tmp_path / "r", quiet=True)
    assert [s for s, _ in checkpoint.list_checkpoints(tmp_path / "r")] == [0]


def test_lr_schedule():
    c = config.get_config("gpt2-774m")
    f = train.lr_lambda(c)
    assert f(0) == pytest.approx(1 / 700) and f(699) == pytest.approx(1.0)
    assert f(700) == pytest.approx(1.0) and f(10_000) == pytest.approx(0.1)
    assert f(5350) == pytest.approx(0.55)  # half-way through the cosine
