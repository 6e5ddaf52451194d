"""GPU smoke test for a session with one CUDA device (not run in CI).

A few gpt2-774m updates in bf16 on one GPU with the real code path (train.train,
checkpoint.save, probe.probe_checkpoint), on offline byte-level data (token ids
< 257 fit the 50304 vocabulary).  Prints tokens/s, MFU, peak memory, the probe
time of one checkpoint and the probe overhead ratio at the default cadence
(6 checkpoints over 10 000 updates of 524 288 tokens).

    python benchmarks/gpu_smoke.py [--micro-batch 16] [--accum 2] [--steps 6] [--compile]

Expected wall time on an H100/H200: about 2-4 minutes (mostly start-up and
the ~9 GB checkpoint write).  Exit status 0 iff every update had a finite loss.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from gpu_experiments import checkpoint, config, data, probe, train  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--out", default=None, help="keep the run here (default: a temporary folder)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = True
    base = config.get_config("gpt2-774m")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.out or tmp)
        data.prepare_offline(work / "data")
        T = base.model.block_size
        cfg = config.apply_overrides(base, [
            f"data_dir={work / 'data'}", "dataset=offline", f"micro_batch={a.micro_batch}",
            f"batch_tokens={a.micro_batch * T * a.accum}", f"max_steps={a.steps}",
            f"ckpt_steps={a.steps}", "warmup_steps=2", f"lr_decay_steps={a.steps}",
            f"compile={a.compile}", "log_every=1"])
        print(f"gpt2-774m smoke: {torch.cuda.get_device_name()}, micro_batch {a.micro_batch} x accum "
              f"{a.accum} x {T} tokens, bf16, compile={a.compile}", flush=True)
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        recs = train.train(cfg, 1, work / "run", device="cuda")
        t_train = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2**30
        steady = recs[2:] if len(recs) > 3 else recs[1:]
        tps = statistics.median(r["tokens_per_s"] for r in steady)
        mfu = statistics.median(r["mfu"] for r in steady)
        ck = checkpoint.latest(work / "run")
        tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, T, cfg.probe_seed)
        queries = probe.query_positions(cfg)
        times = []
        for _ in range(2):
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            arrs = probe.probe_checkpoint(cfg, ck, tokens, queries, "smoke", "cuda")
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t1)
        t_probe = min(times)
        t_update_full = base.batch_tokens / tps  # one full 524 288-token update on this one GPU
        ratio = len(base.ckpt_steps) * t_probe / (base.max_steps * t_update_full)
        ok = all(torch.isfinite(torch.tensor(r["loss"])) for r in recs)
    print(f"tokens/s {tps:,.0f} | MFU {100 * mfu:.1f}% (peak {base.peak_tflops} TFLOP/s) | "
          f"peak memory {peak:.1f} GiB | wall {t_train:.0f} s for {a.steps} updates")
    print(f"probe: {t_probe:.2f} s/checkpoint ({len(arrs['rows'])} rows, load included); overhead at the "
          f"default cadence on 1 GPU = {100 * ratio:.4f}% of training (target <= 2%)")
    print(f"losses: {[round(r['loss'], 4) for r in recs]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
