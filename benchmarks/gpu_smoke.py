"""GPU smoke test for a session with one CUDA device (not run in CI).

A few gpt2-774m updates in bf16 on one GPU with the real code path (train.train with the
config's defaults: torch.compile per Block, fused AdamW, the chunked loss), on offline
byte-level data (token ids < 257 fit the 50304 vocabulary).  Nothing is written but the
small data files and metrics: no checkpoint (the probe runs on the trained weights in
memory, probe.probe_model).  Prints tokens/s, MFU against the device's dense bf16 peak
(table below, or --peak-tflops), peak memory next to the memory model's prediction
(gpu_experiments/memory_model.py), the probe time of one checkpoint's rows and the probe
overhead at the default cadence (6 checkpoints over 10 000 updates of 524 288 tokens),
and last one summary line starting with ``gpu_smoke |`` to paste into an issue.

    python benchmarks/gpu_smoke.py [--micro-batch 16] [--accum 2] [--steps 6] [--no-compile]
    python benchmarks/gpu_smoke.py --check-on-cpu tiny-cpu --micro-batch 2 --steps 3   # the script itself

Expected wall time on an H100/H200: about 2-4 minutes (start-up and compilation).  Exit
status: 0 iff every update had a finite loss; 1 otherwise; 2 without a CUDA device (one
line on stderr; the CPU rehearsal of the same model is ``python -m gpu_experiments rehearse``).
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
                                             "probe overhead; no checkpoint is written")
    ap.add_argument("--micro-batch", type=int, default=16, help="sequences per forward (default 16)")
    ap.add_argument("--accum", type=int, default=2, help="micro-batches per update (default 2)")
    ap.add_argument("--steps", type=int, default=6, help="updates to time (default 6; the first 2 warm up)")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                    help="torch.compile each Block (default: the config's, on for gpt2-774m)")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="device bf16 dense peak for MFU (default: looked up from the device name)")
    ap.add_argument("--out", default=None, help="keep the data and metrics here (default: a temporary folder)")
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
    from gpu_experiments import config, data, memory_model, probe, train
    from gpu_experiments.model import GPT

    try:
        base = config.get_config(a.check_on_cpu or "gpt2-774m")
    except KeyError as exc:
        print(f"gpu_smoke: {exc.args[0]}", file=sys.stderr)
        return 2
    device = "cuda" if on_gpu else "cpu"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    compile_ = base.compile if a.compile is None else a.compile
    if on_gpu:
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
            "ckpt_steps=", "resume_every=0", "eval_every=0", "tensorboard=false", "warmup_steps=2",
            f"lr_decay_steps={a.steps}", f"compile={compile_}", "log_every=1", f"peak_tflops={peak_tflops or 0.0}"])
        amp = on_gpu and cfg.dtype != "float32"
        peak_s = f"{peak_tflops:g} TFLOP/s bf16 dense" if peak_tflops else "unknown peak (use --peak-tflops)"
        print(f"{cfg.name} smoke: {name} ({peak_s}), micro_batch {a.micro_batch} x accum "
              f"{a.accum} x {T} tokens, {cfg.dtype if amp else 'float32'}, compile={compile_}", flush=True)
        tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, T, cfg.probe_seed)
        queries = probe.query_positions(cfg)
        probed = {}

        def probe_in_memory(model, _optim):  # the trained weights, no checkpoint written
            plain = GPT(cfg.model, init_std=cfg.init_std)
            plain.load_state_dict({k: v.detach().to("cpu") for k, v in model.state_dict().items()})
            times = []
            for _ in range(2):
                sync()
                t1 = time.perf_counter()
                probed["arrs"] = probe.probe_model(cfg, plain, tokens, queries, "smoke", a.steps, device)
                sync()
                times.append(time.perf_counter() - t1)
            probed["seconds"] = min(times)

        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        recs = train.train(cfg, 1, work / "run", device=device, on_finish=probe_in_memory)
        t_train = time.perf_counter() - t0
        peak = max(r["peak_mem_bytes"] for r in recs)  # per update on CUDA; process peak RSS on CPU
        predicted = memory_model.per_gpu(cfg, "none", 1, capacity, act=2 if amp else 4)
        steady = recs[2:] if len(recs) > 3 else recs[1:]
        tps = statistics.median(r["tokens_per_s"] for r in steady)
        mfu = statistics.median(r["mfu"] for r in steady) if peak_tflops else None
        t_probe = probed["seconds"]
        t_update_full = base.batch_tokens / tps  # one full-size update (524 288 tokens at gpt2-774m) here
        ratio = len(base.ckpt_steps) * t_probe / (base.max_steps * t_update_full)
        ok = all(torch.isfinite(torch.tensor(r["loss"])) for r in recs)
        written = sum(f.stat().st_size for f in (work / "run").rglob("*") if f.is_file())
    mfu_s = f"{100 * mfu:.1f}% of {peak_tflops:g} TFLOP/s" if mfu is not None else "n/a (unknown peak)"
    mem_kind = "allocated" if on_gpu else "RSS"
    print(f"tokens/s {tps:,.0f} | MFU {mfu_s} | peak memory {peak / 2**30:.2f} GiB {mem_kind} "
          f"(memory model: {predicted['total'] / 2**30:.2f} GiB) | wall {t_train:.0f} s for {a.steps} updates")
    print(f"probe: {t_probe:.2f} s/checkpoint ({len(probed['arrs']['rows'])} rows, weights in memory, load not "
          f"included); overhead at the default cadence on 1 device = {100 * ratio:.4f}% of training (target <= 2%)")
    print(f"losses: {[round(r['loss'], 4) for r in recs]}; run folder {written / 2**20:.1f} MiB (no checkpoint)")
    print(f"gpu_smoke | {cfg.name} | {name} | torch {torch.__version__} | {cfg.dtype if amp else 'float32'} "
          f"compile={'on' if compile_ else 'off'} | mb {a.micro_batch} x accum {a.accum} x {T} tok | "
          f"{tps:,.0f} tok/s | MFU {f'{100 * mfu:.1f}%' if mfu is not None else 'n/a'} | "
          f"peak {peak / 2**30:.2f} GiB {mem_kind} (model {predicted['total'] / 2**30:.2f}) | "
          f"probe {t_probe:.2f} s = {100 * ratio:.4f}% | loss {recs[0]['loss']:.3f}->{recs[-1]['loss']:.3f} | "
          f"{'OK' if ok else 'NON-FINITE LOSS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
