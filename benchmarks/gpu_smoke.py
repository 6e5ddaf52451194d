"""GPU smoke test for a session with one CUDA device (not run in CI).

A few gpt2-774m updates in bf16 on one GPU with the real code path (train.train,
checkpoint.save, probe.probe_checkpoint), on offline byte-level data (token ids
< 257 fit the 50304 vocabulary).  Prints tokens/s, MFU against the device's
dense bf16 peak (table below, or --peak-tflops), peak memory next to the
memory model's prediction (gpu_experiments/memory_model.py), the probe time of
one checkpoint and the probe overhead ratio at the default cadence (6
checkpoints over 10 000 updates of 524 288 tokens).

    python benchmarks/gpu_smoke.py [--micro-batch 16] [--accum 2] [--steps 6] [--compile]
    python benchmarks/gpu_smoke.py --check-on-cpu tiny-cpu --micro-batch 2 --steps 3   # the script itself

Expected wall time on an H100/H200: about 2-4 minutes (mostly start-up and
the ~9 GB checkpoint write).  Exit status: 0 iff every update had a finite
loss; 1 otherwise; 2 without a CUDA device (one line on stderr; the CPU
rehearsal of the same model is ``python -m gpu_experiments rehearse``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


# Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s from the vendors' data sheets, matched
# against torch.cuda.get_device_name() in this order (first match wins).
BF16_PEAK_TFLOPS = [("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("H200", 989.0),
                    ("GH200", 989.0), ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0)]


def bf16_peak(device_name: str) -> float | None:
    for key, tflops in BF16_PEAK_TFLOPS:
        if key in device_name:
            return tflops
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="gpt2-774m on one CUDA GPU: tokens/s, MFU, peak memory, "
                                             "probe overhead")
    ap.add_argument("--micro-batch", type=int, default=16, help="sequences per forward (default 16)")
    ap.add_argument("--accum", type=int, default=2, help="micro-batches per update (default 2)")
    ap.add_argument("--steps", type=int, default=6, help="updates to time (default 6; the first 2 warm up)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="device bf16 dense peak for MFU (default: looked up from the device name)")
    ap.add_argument("--out", default=None, help="keep the run here (default: a temporary folder)")
    ap.add_argument("--check-on-cpu", metavar="CONFIG", default=None,
                    help="check this script itself: the same steps on CPU with a small config "
                         "(e.g. tiny-cpu); the figures mean nothing for a GPU")
    a = ap.parse_args(argv)
    if min(a.micro_batch, a.accum) < 1 or a.steps < 2:
        print("gpu_smoke: --micro-batch and --accum must be >= 1 and --steps >= 2", file=sys.stderr)
        return 2
    on_gpu = a.check_on_cpu is None
    if on_gpu and not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device is visible (torch.cuda.is_available() is False; torch "
              f"{torch.__version__}); this benchmark needs one NVIDIA GPU. Without one, run "
              "`python -m gpu_experiments rehearse --config gpt2-774m --out DIR` instead.", file=sys.stderr)
        return 2
    # imported only when there is work to do, so the CPU-only refusal is quick
    from gpu_experiments import checkpoint, config, data, memory_model, probe, rehearse, train

    try:
        base = config.get_config(a.check_on_cpu or "gpt2-774m")
    except KeyError as exc:
        print(f"gpu_smoke: {exc.args[0]}", file=sys.stderr)
        return 2
    device = "cuda" if on_gpu else "cpu"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
        name = torch.cuda.get_device_name()
        capacity = torch.cuda.get_device_properties(0).total_memory
        peak_tflops = a.peak_tflops if a.peak_tflops is not None else bf16_peak(name)
    else:
        name, capacity, peak_tflops = "CPU (script check only)", 0, a.peak_tflops
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.out or tmp)
        data.prepare_offline(work / "data")
        T = base.model.block_size
        cfg = config.apply_overrides(base, [
            f"data_dir={work / 'data'}", "dataset=offline", f"micro_batch={a.micro_batch}",
            f"batch_tokens={a.micro_batch * T * a.accum}", f"max_steps={a.steps}",
            f"ckpt_steps={a.steps}", "warmup_steps=2", f"lr_decay_steps={a.steps}",
            f"compile={a.compile}", "log_every=1", f"peak_tflops={peak_tflops or 0.0}"])
        amp = on_gpu and cfg.dtype != "float32"
        peak_s = f"{peak_tflops:g} TFLOP/s bf16 dense" if peak_tflops else "unknown peak (use --peak-tflops)"
        print(f"{cfg.name} smoke: {name} ({peak_s}), micro_batch {a.micro_batch} x accum "
              f"{a.accum} x {T} tokens, {cfg.dtype if amp else 'float32'}, compile={a.compile}", flush=True)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        recs = train.train(cfg, 1, work / "run", device=device)
        t_train = time.perf_counter() - t0
        if on_gpu:
            peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        else:
            peak = reserved = rehearse.peak_rss_bytes()  # whole process, interpreter included
        predicted = memory_model.per_gpu(cfg, "none", 1, capacity, act=2 if amp else 4)
        steady = recs[2:] if len(recs) > 3 else recs[1:]
        tps = statistics.median(r["tokens_per_s"] for r in steady)
        mfu = statistics.median(r["mfu"] for r in steady) if peak_tflops else None
        ck = checkpoint.latest(work / "run")
        tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, T, cfg.probe_seed)
        queries = probe.query_positions(cfg)
        times = []
        for _ in range(2):
            sync()
            t1 = time.perf_counter()
            arrs = probe.probe_checkpoint(cfg, ck, tokens, queries, "smoke", device)
            sync()
            times.append(time.perf_counter() - t1)
        t_probe = min(times)
        t_update_full = base.batch_tokens / tps  # one full-size update (524 288 tokens at gpt2-774m) here
        ratio = len(base.ckpt_steps) * t_probe / (base.max_steps * t_update_full)
        ok = all(torch.isfinite(torch.tensor(r["loss"])) for r in recs)
    mfu_s = f"{100 * mfu:.1f}% of {peak_tflops:g} TFLOP/s" if mfu is not None else "n/a (unknown peak)"
    print(f"tokens/s {tps:,.0f} | MFU {mfu_s} | peak memory {peak / 2**30:.2f} GiB allocated, "
          f"{reserved / 2**30:.2f} GiB reserved (memory model: {predicted['total'] / 2**30:.2f} GiB) | "
          f"wall {t_train:.0f} s for {a.steps} updates")
    print(f"probe: {t_probe:.2f} s/checkpoint ({len(arrs['rows'])} rows, load included); overhead at the "
          f"default cadence on 1 device = {100 * ratio:.4f}% of training (target <= 2%)")
    print(f"losses: {[round(r['loss'], 4) for r in recs]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
