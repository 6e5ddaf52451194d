"""Preemption-safe training: stop signals, resume checkpoints, config changes on resume (CPU, in process)."""
import json
import signal

import pytest
import torch

from gpu_experiments import checkpoint, config, data, probe, train
from gpu_experiments.model import GPT


@pytest.fixture(scope="module")
def ddir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    data.prepare_offline(d)
    return d


def _cfg(ddir, *extra):
    return config.apply_overrides(config.get_config("tiny-cpu"), [
        f"data_dir={ddir}", "max_steps=6", "lr_decay_steps=6", "ckpt_steps=0,6", "resume_every=0",
        "eval_every=0", "tensorboard=false", *extra])


def _weights(ckpt):
    m = GPT(config.from_dict(checkpoint.read_extra(ckpt)["config"]).model)
    checkpoint.load_model_weights(ckpt, m)
    return m.state_dict()


def _same(a, b):
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _signal_during_update(monkeypatch, update: int, signum=signal.SIGUSR1, mb_per_update: int = 2):
    """Deliver ``signum`` to this process while update ``update`` reads its first micro-batch."""
    real = data.TokenStream.batch
    calls = {"n": 0}

    def batch(self, cursor, n):
        if calls["n"] == (update - 1) * mb_per_update:
            signal.raise_signal(signum)
        calls["n"] += 1
        return real(self, cursor, n)

    monkeypatch.setattr(data.TokenStream, "batch", batch)


@pytest.fixture(scope="module")
def straight(ddir, tmp_path_factory):
    run = tmp_path_factory.mktemp("straight")
    recs = train.train(_cfg(ddir), 4, run, quiet=True)
    return run, recs


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_stop_signal_saves_at_the_update_boundary_and_resume_is_bitwise(ddir, tmp_path, monkeypatch, straight,
                                                                        signum):
    run = tmp_path / "r"
    before = signal.getsignal(signum)
    _signal_during_update(monkeypatch, 3, signum)
    with pytest.raises(train.Preempted) as exc:
        train.train(_cfg(ddir), 4, run, quiet=True)
    monkeypatch.undo()
    assert signal.getsignal(signum) is before  # handlers restored
    e = exc.value
    assert e.step == 3 and e.signum == signum and e.exit_code == 128 + signum
    assert e.ckpt == run / "resume" / "step-3" and (e.ckpt / "extra.json").exists()
    assert [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert not (run / "DONE").exists()
    rest = train.train(_cfg(ddir), 4, run, quiet=True)
    assert [r["step"] for r in rest] == [4, 5, 6]
    assert [(r["loss"], r["grad_norm"]) for r in straight[1]] == \
        [tuple(json.loads(ln)[k] for k in ("loss", "grad_norm")) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert _same(straight[0] / "step-6", run / "step-6")
    assert (run / "DONE").exists()


def test_cli_exit_status_after_a_stop_signal(ddir, tmp_path, monkeypatch, capsys):
    _signal_during_update(monkeypatch, 2)
    rc = train.main_train(_cfg(ddir), 4, tmp_path / "r")
    assert rc == 128 + signal.SIGUSR1 == 138
    out = capsys.readouterr().out
    assert "got SIGUSR1: saved" in out and "stopped by SIGUSR1 after update 2" in out


def test_resume_checkpoints_every_n_keep_k_apart_from_probe_checkpoints(ddir, tmp_path, straight):
    cfg = _cfg(ddir, "resume_every=1", "resume_keep=2")
    run = tmp_path / "r"
    train.train(cfg, 4, run, stop_at=4, quiet=True)
    assert [s for s, _ in checkpoint.list_checkpoints(run)] == [0]  # what `probe` reads
    assert [s for s, _ in checkpoint.list_checkpoints(run / "resume")] == [3, 4]  # the newest 2
    assert checkpoint.latest_resumable(run) == run / "resume" / "step-4"
    (run / "resume" / "step-9.tmp").mkdir()  # debris of a kill during a write is cleared by the next save
    rest = train.train(cfg, 4, run, quiet=True)
    assert [r["step"] for r in rest] == [5, 6]
    assert [s for s, _ in checkpoint.list_checkpoints(run / "resume")] == [4, 5]  # none at the last step
    assert not (run / "resume" / "step-9.tmp").exists()
    assert _same(straight[0] / "step-6", run / "step-6")  # resume_every changes nothing in the maths
    rows = probe.probe_run(run, quiet=True)
    assert [p.name for p in rows] == ["step-0.npz", "step-6.npz"]


def test_resume_accepts_systems_changes_and_logs_them(ddir, tmp_path, capsys, straight):
    run = tmp_path / "r"
    train.train(_cfg(ddir, "resume_every=3"), 4, run, stop_at=3, quiet=True)
    new = _cfg(ddir, "resume_every=3", "micro_batch=2", "log_every=1", "peak_tflops=1.5", "eval_every=3",
               "deterministic=false")
    rest = train.train(new, 4, run)
    out = capsys.readouterr().out
    assert "config changed (allowed)" in out and "micro_batch 4 -> 2" in out
    change = json.loads((run / "config_changes.jsonl").read_text().splitlines()[-1])
    assert change["step"] == 3 and change["changes"]["micro_batch"] == [4, 2]
    assert config.from_dict(json.loads((run / "config.json").read_text())) == new  # what probe reads
    # 4 micro-batches of 2 instead of 2 of 4: the same global mean, summed in another order
    ref = straight[1][3:]
    assert max(abs(a["loss"] - b["loss"]) for a, b in zip(rest, ref)) < 1e-5
    assert rest[-1]["mfu"] is not None and rest[-1]["eval_loss"] is not None


@pytest.mark.parametrize("override,match", [
    ("lr=0.1", r"lr 0\.003 -> 0\.1"), ("batch_tokens=1024", "batch_tokens"), ("n_layer=3", "model.n_layer"),
    ("warmup_steps=2", "warmup_steps"), ("beta2=0.99", "beta2"), ("dtype=bfloat16", "dtype"),
    ("dataset=other", "dataset"), ("probe_queries=2", "probe_queries"),
])
def test_resume_refuses_changes_to_the_mathematics(ddir, tmp_path, override, match):
    run = tmp_path / "r"
    train.train(_cfg(ddir), 4, run, stop_at=1, quiet=True)
    with pytest.raises(ValueError, match=f"different config .*{match}"):
        train.train(_cfg(ddir, override), 4, run, quiet=True)
    with pytest.raises(ValueError, match="seed 4, not 5"):
        train.train(_cfg(ddir), 5, run, quiet=True)


def test_resume_may_change_list_is_explicit():
    allowed, refused = config.resume_changes(config.get_config("gpt2-774m"), config.apply_overrides(
        config.get_config("gpt2-774m"), ["compile=false", "parallel=fsdp2", "micro_batch=8", "peak_tflops=312",
                                         "log_every=1", "grad_compression=none", "max_steps=20000"]))
    assert set(allowed) == {"compile", "parallel", "micro_batch", "peak_tflops", "log_every", "grad_compression",
                            "max_steps"} and not refused
    assert {"lr", "batch_tokens", "seeds", "warmup_steps"} & config.RESUME_MAY_CHANGE == {"seeds"}
