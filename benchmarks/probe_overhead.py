"""Probe overhead at the default checkpoint cadence, as a fraction of training time.

Measured in one run: a few training updates of CONFIG (median seconds per
update) and the probe of one checkpoint (load + forward + float64 rows, median
of repeats).  The overhead of the full schedule is then

    ratio = len(ckpt_steps) * t_probe / (max_steps * t_update)

(the probe runs once per checkpoint, training runs max_steps updates).
Target: ratio <= 2% for gpt2-774m.  On a CPU, run the small configs;
on a GPU, benchmarks/gpu_smoke.py reports the same ratio for gpt2-774m.

    python benchmarks/probe_overhead.py [--config tiny-cpu] [--steps 6] [key=value ...]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gpu_experiments import checkpoint, config, data, probe, train


def measure(cfg: config.RunConfig, steps: int, device: str, work: Path) -> dict:
    short = config.apply_overrides(cfg, [f"max_steps={steps}", f"ckpt_steps={steps}",
                                         f"warmup_steps={min(cfg.warmup_steps, steps)}",
                                         f"lr_decay_steps={steps}"])
    recs = train.train(short, 1, work / "run", device=device, quiet=True)
    t_update = statistics.median(r["seconds"] for r in recs[1:])  # first update includes warm-up
    ck = checkpoint.latest(work / "run")
    tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, cfg.model.block_size, cfg.probe_seed)
    queries = probe.query_positions(cfg)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        arrs = probe.probe_checkpoint(short, ck, tokens, queries, "bench", device)
        times.append(time.perf_counter() - t0)
    t_probe = statistics.median(times)
    train_total = cfg.max_steps * t_update
    probe_total = len(cfg.ckpt_steps) * t_probe
    return {"t_update": t_update, "t_probe": t_probe, "rows": len(arrs["rows"]),
            "tokens_per_s": recs[-1]["tokens_per_s"], "ratio": probe_total / train_total}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny-cpu")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="auto")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    if a.device == "auto":
        import torch
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cfg = config.apply_overrides(config.get_config(a.config), a.overrides)
        if cfg.dataset == "offline":
            cfg = config.apply_overrides(cfg, [f"data_dir={work / 'data'}"])
            data.prepare_offline(cfg.data_dir)
        r = measure(cfg, a.steps, a.device, work)
    print(f"config {cfg.name}: {r['t_update'] * 1e3:.1f} ms/update ({r['tokens_per_s']:,.0f} tok/s), "
          f"probe {r['t_probe'] * 1e3:.1f} ms/checkpoint ({r['rows']} rows)")
    print(f"schedule: {cfg.max_steps} updates, {len(cfg.ckpt_steps)} checkpoints probed")
    print(f"probe overhead ratio = {100 * r['ratio']:.3f}% of training time (target <= 2%)")


if __name__ == "__main__":
    main()
