"""CUDA path (auto-skipped without a GPU): bf16 autocast training and probing on the device."""
import numpy as np
import pytest

from gpu_experiments import checkpoint, config, data, probe, train


@pytest.mark.gpu
def test_bf16_train_and_probe_on_cuda(tmp_path):
    data.prepare_offline(tmp_path / "data")
    cfg = config.apply_overrides(config.get_config("tiny-cpu"), [
        f"data_dir={tmp_path / 'data'}", "dtype=bfloat16", "max_steps=3", "ckpt_steps=0,3"])
    recs = train.train(cfg, 1, tmp_path / "run", device="cuda", quiet=True)
    assert len(recs) == 3 and all(np.isfinite(r["loss"]) for r in recs)
    ck = checkpoint.latest(tmp_path / "run")
    tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, cfg.model.block_size, cfg.probe_seed)
    q = probe.query_positions(cfg)
    gpu = probe.probe_checkpoint(cfg, ck, tokens, q, "g", "cuda")["rows"]
    cpu = probe.probe_checkpoint(config.apply_overrides(cfg, ["dtype=float32"]), ck, tokens, q, "c", "cpu")["rows"]
    assert np.allclose(gpu.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(gpu - cpu).max() < 0.05  # bf16 q, k on the GPU vs float32 on the CPU


@pytest.mark.gpu
def test_cuda_defaults_compile_fused_adamw_chunked_loss(tmp_path, capsys):
    # what gpt2-774m runs with on the cluster, at tiny size: compiled Blocks, fused AdamW,
    # bf16 autocast, the chunked loss, eval and the per-update memory figure
    data.prepare_offline(tmp_path / "data")
    cfg = config.apply_overrides(config.get_config("tiny-cpu"), [
        f"data_dir={tmp_path / 'data'}", "dtype=bfloat16", "compile=true", "max_steps=4", "ckpt_steps=4",
        "eval_every=2", "tensorboard=false", "peak_tflops=989"])
    recs = train.train(cfg, 1, tmp_path / "run", device="cuda")
    out = capsys.readouterr().out
    assert "fused AdamW True" in out and "compile=True" in out and "autocast bfloat16" in out
    assert all(np.isfinite(r["loss"]) and r["peak_mem_bytes"] > 0 and r["mfu"] > 0 for r in recs)
    assert recs[1]["eval_loss"] is not None and recs[-1]["loss"] < recs[0]["loss"]
