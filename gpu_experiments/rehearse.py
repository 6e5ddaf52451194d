"""CPU dress rehearsal of a cluster run: the real model, the real training path.

``python -m gpu_experiments rehearse --config gpt2-774m --out DIR [--steps N]``, one node:

1. a fresh process trains N updates of micro-batch 1 x block_size tokens with
   train.train (loss normalisation, clipping, schedule, AdamW as on the
   cluster; float32, since autocast is CUDA-only here), writes the DCP
   checkpoint ``step-(N-1)`` and hashes the final model + optimizer state;
2. a second fresh process resumes from that checkpoint (its files hard-linked
   into a new run folder), trains the last update and hashes again:
   ``resume_bitwise`` iff both hashes, the losses and the gradient norms of the
   resumed updates are identical;
3. a third process probes every layer x head at ``step-(N-1)``
   (``probe_batch`` x ``probe_queries`` rows each) into ``DIR/rows/``;
4. the rows are certified (``DIR/certificates/``) and verified in process;
5. ``DIR/rehearsal.json`` holds the figures and the memory model
   (memory_model.py) checked against the measured peak RSS and against the
   bytes autograd saves in one Block at full width.

The scratch folder ``DIR/work/`` (data, checkpoints) is removed at the end
unless ``--keep-work``; what stays in DIR is small enough to commit.
With ``--nnodes 2`` the two-node FSDP2 rehearsal runs instead (rehearse_nodes.py).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

SEED = 1


def rss_bytes() -> int:
    """Current resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def state_digest(model, optim) -> str:
    """sha256 over every model tensor (sorted names) and every AdamW state tensor, byte for byte."""
    import torch

    h = hashlib.sha256()

    def add(name: str, t: torch.Tensor) -> None:
        t = t.detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}:{t.dtype}:{t.numel()};".encode())
        h.update(t.view(torch.uint8).numpy().data)

    for name, t in sorted(model.state_dict().items()):
        add(name, t)
    names = {id(p): n for n, p in model.named_parameters()}
    for group in optim.param_groups:
        for p in group["params"]:
            for k, v in sorted(optim.state[p].items()):
                add(f"optim.{names[id(p)]}.{k}", v)
    return h.hexdigest()


def rehearsal_config(name: str, data_dir: Path, steps: int):
    """The named config with the rehearsal's changes (all listed in rehearsal.json)."""
    from gpu_experiments import config

    base = config.get_config(name)
    T = base.model.block_size
    # compile=false: inductor on a CPU for the full model is neither the cluster's code path nor
    # cheap (compile is rehearsed with tiny-cpu in tests); one held-out sequence at the end
    # rehearses the evaluation; no periodic resume checkpoints (the probe one at N-1 is resumed).
    overrides = ["dataset=offline", f"data_dir={data_dir}", "micro_batch=1", f"batch_tokens={T}",
                 f"max_steps={steps}", f"ckpt_steps={steps - 1}", "probe_batch=1", "probe_queries=1",
                 "log_every=1", "compile=false", f"eval_every={steps}", f"eval_tokens={T}", "resume_every=0"]
    return config.apply_overrides(base, overrides), overrides


# ---------------------------------------------------------------- worker phases (fresh processes)

def _phase_train(a: dict) -> dict:
    import torch

    from gpu_experiments import checkpoint, config, train

    torch.set_num_threads(a["threads"])
    baseline = rss_bytes()
    cfg = config.from_dict(a["config"])
    timings = {"save": [], "load": []}

    def timed(fn, key):
        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            out = fn(*args, **kw)
            timings[key].append(time.perf_counter() - t0)
            return out
        return wrapper

    # train.py reaches checkpoint.save/load through the module, so this times the real calls.
    checkpoint.save = timed(checkpoint.save, "save")
    checkpoint.load = timed(checkpoint.load, "load")
    result = {}

    def finish(model, optim):
        t0 = time.perf_counter()
        result["digest"] = state_digest(model, optim)
        result["digest_seconds"] = time.perf_counter() - t0
        result["n_params"] = sum(p.numel() for p in model.parameters())  # tied tensor once

    recs = train.train(cfg, a["seed"], a["run"], device="cpu", quiet=True, on_finish=finish)
    return dict(result, records=recs, save_seconds=timings["save"], load_seconds=timings["load"],
                baseline_rss_bytes=baseline, peak_rss_bytes=peak_rss_bytes())


def _phase_probe(a: dict) -> dict:
    import numpy as np
    import torch

    from gpu_experiments import config, data, probe

    torch.set_num_threads(a["threads"])
    cfg = config.from_dict(a["config"])
    t0 = time.perf_counter()
    tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, cfg.model.block_size, cfg.probe_seed)
    arrs = probe.probe_checkpoint(cfg, Path(a["ckpt"]), tokens, probe.query_positions(cfg),
                                  a["run_name"], "cpu")
    seconds = time.perf_counter() - t0
    dest = Path(a["rows"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.stem + ".tmp.npz")
    np.savez_compressed(tmp, **arrs)
    os.replace(tmp, dest)
    return {"rows": int(len(arrs["rows"])), "seconds": seconds, "peak_rss_bytes": peak_rss_bytes(),
            "rows_file_bytes": dest.stat().st_size}


def _phase_saved(a: dict) -> dict:
    """Bytes autograd saves per token in one Block and in the head, at full width (memory_model)."""
    import torch

    from gpu_experiments import config, memory_model as mm

    torch.set_num_threads(a["threads"])
    m = dataclasses.replace(config.from_dict(a["config"]).model, n_layer=1)
    out = {}
    for act, key in ((4, "fp32"), (2, "bf16_autocast")):
        meas = mm.measure_saved_bytes(m, act=act)
        pred = mm.saved_per_token(m, act)
        out[key] = {"measured_block": meas["block"], "model_block": pred["block"],
                    "measured_head": meas["head"], "model_head": pred["head"],
                    "measured_weight_casts": meas["weight_casts"],
                    "model_weight_casts": 2 * mm.cast_weight_count(m) if act == 2 else 0}
    return out


PHASES = {"train": _phase_train, "probe": _phase_probe, "saved": _phase_saved}


def spawn(phase: str, args: dict, result_file: Path) -> dict:
    """Run one phase in a fresh interpreter; its result comes back through ``result_file``."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS=str(args["threads"]))
    cmd = [sys.executable, "-m", "gpu_experiments.rehearse", phase, json.dumps(args), str(result_file)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-8:])
        raise RuntimeError(f"rehearsal phase {phase!r} failed (exit {res.returncode}):\n{tail}")
    return json.loads(result_file.read_text())


# ---------------------------------------------------------------- one-node driver

def _git_commit(root: Path) -> dict:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True).stdout.strip())
        return {"commit": head or None, "dirty": dirty}
    except OSError:
        return {"commit": None, "dirty": None}


def _link_checkpoint(src_run: Path, dst_run: Path, step: int) -> None:
    """A fresh run folder holding ``step-K`` (hard links: no copy of ~9 GB), config and metrics."""
    dst_run.mkdir(parents=True)
    for name in ("config.json", "metrics.jsonl"):  # copied: the resumed run rewrites its metrics
        shutil.copy(src_run / name, dst_run / name)
    src, dst = src_run / f"step-{step}", dst_run / f"step-{step}"
    dst.mkdir()
    for f in src.iterdir():
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copy(f, dst / f.name)


def rehearse_one_node(name: str, out: Path, steps: int, threads: int = 2, keep_work: bool = False,
                      command: str = "") -> dict:
    import torch

    from gpu_experiments import config, data, memory_model as mm
    from certificates.__main__ import main as cert_cli

    t_start = time.perf_counter()
    root = Path(__file__).resolve().parents[1]
    work = out / "work"
    data.prepare_offline(work / "data")
    cfg, overrides = rehearsal_config(name, work / "data", steps)
    k = steps - 1
    cfg_d = config.to_dict(cfg)
    common = {"config": cfg_d, "seed": SEED, "threads": threads}
    say = lambda msg: print(f"[{time.perf_counter() - t_start:7.1f} s] {msg}", flush=True)  # noqa: E731

    say(f"{name}: {cfg.model.n_layer} layers x {cfg.model.n_head} heads x width {cfg.model.n_embd}, "
        f"{steps} updates of 1 x {cfg.model.block_size} tokens, checkpoint at step {k}")
    straight = spawn("train", dict(common, run=str(work / "straight")), work / "straight.json")
    ck = work / "straight" / f"step-{k}"
    ck_bytes = sum(f.stat().st_size for f in ck.rglob("*") if f.is_file())
    say(f"uninterrupted run done: losses {[r['loss'] for r in straight['records']]}")
    _link_checkpoint(work / "straight", work / "resumed", k)
    resumed = spawn("train", dict(common, run=str(work / "resumed")), work / "resumed.json")
    tail = straight["records"][k:]
    same = [(a["loss"], a["grad_norm"]) == (b["loss"], b["grad_norm"]) for a, b in zip(tail, resumed["records"])]
    bitwise = straight["digest"] == resumed["digest"] and len(same) == len(tail) > 0 and all(same)
    say(f"resumed from step {k} in a fresh process: bitwise identical = {bitwise}")

    rows = out / "rows" / f"step-{k}.npz"
    pr = spawn("probe", dict(common, ckpt=str(ck), rows=str(rows), run_name=f"{name}-rehearsal"),
               work / "probe.json")
    say(f"probed step-{k}: {pr['rows']} rows in {pr['seconds']:.1f} s")
    certdir = out / "certificates"
    t0 = time.perf_counter()
    rc_cert = cert_cli(["certify", str(rows), "-o", str(certdir)])
    t_cert = time.perf_counter() - t0
    t0 = time.perf_counter()
    rc_verify = cert_cli(["verify", str(certdir)]) if rc_cert == 0 else None
    t_verify = time.perf_counter() - t0
    say(f"certify exit {rc_cert} ({t_cert:.1f} s), verify exit {rc_verify} ({t_verify:.1f} s)")
    summary = json.loads((certdir / "summary.json").read_text()) if rc_cert == 0 else {}

    saved = spawn("saved", common, work / "saved.json")
    full = config.get_config(name)
    measured_peak = max(straight["peak_rss_bytes"], resumed["peak_rss_bytes"])
    pred = mm.cpu_fp32_prediction(cfg.model, 1, straight["baseline_rss_bytes"])
    record = {
        "config": name, "command": command, **_git_commit(root), "torch": torch.__version__,
        "device": "cpu", "threads": threads, "nnodes": 1, "seed": SEED,
        "overrides": [o if not o.startswith("data_dir=") else "data_dir=DIR/work/data" for o in overrides],
        "at_full_size": [
            f"model: {full.model.n_layer} layers x {full.model.n_head} heads x width {full.model.n_embd}, "
            f"context {full.model.block_size}, vocabulary {full.model.vocab_size} (float32 parameters)",
            f"{steps} AdamW updates through train.train, micro-batch 1 x {cfg.model.block_size} tokens",
            f"DCP checkpoint save (step {k}) and load in a fresh process; resumed update(s) compared bitwise",
            f"probe of all {full.model.n_layer} x {full.model.n_head} (layer, head) pairs at step {k}",
        ],
        "not_at_full_size": [
            f"global batch: {cfg.batch_tokens} tokens per update instead of {full.batch_tokens} "
            f"(micro-batch 1 instead of {full.micro_batch}, no accumulation)",
            "precision: float32 on CPU (bf16 autocast and FSDP2's bf16 MixedPrecisionPolicy are CUDA-only "
            "in train.py)",
            "compile: off (eager); torch.compile per Block is tested with tiny-cpu",
            f"evaluation: {cfg.eval_tokens} held-out tokens at the last update instead of {full.eval_tokens} "
            f"every {full.eval_every}",
            "data: offline byte-level text (token ids < 257) instead of tokenised OpenWebText",
            f"probe: {cfg.probe_batch} sequence x {cfg.probe_queries} query row per (layer, head) "
            f"instead of {full.probe_batch} x {full.probe_queries}",
            "parallelism: one process (two-node FSDP2 is rehearsed with tiny-cpu, --nnodes 2)",
        ],
        "n_params": straight["n_params"],
        "n_params_formula": mm.param_count(cfg.model),
        "n_params_vocab50257": mm.param_count(dataclasses.replace(cfg.model, vocab_size=50257)),
        "losses": [r["loss"] for r in straight["records"]],
        "grad_norms": [r["grad_norm"] for r in straight["records"]],
        "lrs": [r["lr"] for r in straight["records"]],
        "step_seconds": [r["seconds"] for r in straight["records"]],
        "resume_from_step": k,
        "resumed_losses": [r["loss"] for r in resumed["records"]],
        "resumed_step_seconds": [r["seconds"] for r in resumed["records"]],
        "state_sha256_uninterrupted": straight["digest"], "state_sha256_resumed": resumed["digest"],
        "resume_bitwise": bitwise,
        "peak_rss_bytes": measured_peak,
        "peak_rss_bytes_by_phase": {"train": straight["peak_rss_bytes"], "resume": resumed["peak_rss_bytes"],
                                    "probe": pr["peak_rss_bytes"]},
        "checkpoint_bytes": ck_bytes,
        "checkpoint_save_seconds": straight["save_seconds"],
        "checkpoint_load_seconds": resumed["load_seconds"],
        "probe_rows": pr["rows"], "probe_seconds": pr["seconds"], "rows_file_bytes": pr["rows_file_bytes"],
        "certify_exit": rc_cert, "certify_seconds": t_cert, "verify_exit": rc_verify, "verify_seconds": t_verify,
        "certificate_regimes": summary.get("regime_counts"),
        "memory_model": {
            "cluster": mm.table(full),
            "cpu_fp32_step": dict(pred, measured_peak_rss=measured_peak,
                                  measured_over_model=measured_peak / pred["total"]),
            "saved_per_token_full_width": saved,
            "assumptions": mm.ASSUMPTIONS,
        },
    }
    if not keep_work:
        shutil.rmtree(work)
    record["wall_seconds"] = time.perf_counter() - t_start
    tmp = out / "rehearsal.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, out / "rehearsal.json")
    say(f"wrote {out / 'rehearsal.json'}")
    print(f"memory model, {name} at micro-batch {full.micro_batch} (GiB per GPU):\n{mm.markdown_table(full)}")
    return record


if __name__ == "__main__":  # worker entry: python -m gpu_experiments.rehearse PHASE ARGS_JSON RESULT_FILE
    _phase, _args, _result = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    _out = PHASES[_phase](_args)
    _result.write_text(json.dumps(_out))
