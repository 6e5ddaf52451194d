"""The training loop: one process or torchrun (DDP / FSDP2), resumable bitwise on CPU.

Loss normalisation (the v2 correction, shared/MATH.md Experiments): the
objective of one update is the mean cross-entropy over *all tokens of the
global batch*.  Each micro-batch contributes ``sum_of_token_losses *
world_size / global_tokens``; DDP/FSDP2 average gradients over ranks (divide by
world_size) and accumulation adds micro-batches, so the gradient is exactly
that of the global mean, whatever the split into ranks x micro-batches.

Data: update ``u`` reads global windows ``cursor .. cursor + n_micro*micro_batch``
(data.TokenStream); rank ``r``'s micro-batch ``m`` takes block ``r*accum + m``,
so 2 ranks x k micro-batches see exactly the sequences 1 rank x 2k sees.
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from gpu_experiments import checkpoint, config as cfgmod, data, distributed
from gpu_experiments.model import GPT, flops_per_token, param_groups


class NonFiniteLoss(RuntimeError):
    pass


def lr_lambda(cfg: cfgmod.RunConfig):
    """Linear warmup to ``lr`` over ``warmup_steps``, cosine to ``min_lr_ratio * lr`` at ``lr_decay_steps``."""
    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if step >= cfg.lr_decay_steps:
            return cfg.min_lr_ratio
        t = (step - cfg.warmup_steps) / max(1, cfg.lr_decay_steps - cfg.warmup_steps)
        return cfg.min_lr_ratio + 0.5 * (1.0 - cfg.min_lr_ratio) * (1.0 + math.cos(math.pi * t))
    return f


def data_dir_for(cfg: cfgmod.RunConfig) -> Path:
    return Path(cfg.data_dir)


def _prepare_data(cfg: cfgmod.RunConfig, d: distributed.Dist) -> dict:
    ddir = data_dir_for(cfg)
    if cfg.dataset == "offline" and d.is_main:
        data.ensure_offline(ddir)
    distributed.barrier()
    meta = data.read_meta(ddir)
    if meta["vocab_size"] > cfg.model.vocab_size:
        raise ValueError(f"{ddir}/meta.json: tokenizer vocab {meta['vocab_size']} > model vocab_size "
                         f"{cfg.model.vocab_size}")
    return meta


def train(cfg: cfgmod.RunConfig, seed: int, out_dir: str | Path, stop_at: int | None = None,
          device: str = "auto", quiet: bool = False, on_finish=None) -> list[dict]:
    """Train (or resume) the run in ``out_dir``; return this process's metrics records.

    ``stop_at``: return right after the update that reaches this step (and its
    checkpoint, if scheduled) -- simulates an interruption for tests.
    ``on_finish(model, optimizer)``: called once after the last update, before the
    process group is torn down (the rehearsal hashes the final state with it).
    Raises :class:`NonFiniteLoss` (after keeping the last good checkpoint) on a NaN/inf loss.
    """
    d = distributed.setup(device)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        return _train(cfg, seed, Path(out_dir), stop_at, d, quiet, on_finish)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)  # leave global state as found
        distributed.teardown()


def _train(cfg, seed, out, stop_at, d, quiet, on_finish=None):
    cfgmod.validate(cfg)
    if d.device.type == "cpu" and cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    _prepare_data(cfg, d)
    stream = data.TokenStream(data.load_tokens(data_dir_for(cfg), "train"), cfg.model.block_size, seed)
    accum = cfgmod.grad_accum_steps(cfg, d.world_size)
    mb, T = cfg.micro_batch, cfg.model.block_size
    seqs_per_update = cfg.batch_tokens // T

    torch.manual_seed(seed)  # same on every rank: identical initial weights
    model = GPT(cfg.model, init_std=cfg.init_std).to(d.device)
    n_params = model.num_params(non_embedding=True)
    fpt = flops_per_token(cfg.model, n_params)
    wrapped = distributed.wrap(model, cfg.parallel, d)
    groups = param_groups(wrapped, cfg.weight_decay)
    optim = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lr_lambda(cfg))
    runner = torch.compile(wrapped) if cfg.compile else wrapped
    use_autocast = d.device.type == "cuda" and cfg.dtype != "float32"
    amp_dtype = getattr(torch, cfg.dtype)

    step, cursor = 0, 0
    last = checkpoint.latest(out)
    metrics_path = out / "metrics.jsonl"
    if last is not None:
        meta = checkpoint.load(last, wrapped, optim, d)
        saved = cfgmod.from_dict(meta["config"])
        if saved != cfg or meta["seed"] != seed:
            raise ValueError(f"{last}/extra.json: run was started with a different config or seed; "
                             "use a fresh --out directory")
        step, cursor = meta["step"], meta["cursor"]
        sched.load_state_dict(meta["scheduler"])
        if d.is_main and metrics_path.exists():  # drop records logged after the checkpoint
            keep = [ln for ln in metrics_path.read_text().splitlines()
                    if ln.strip() and json.loads(ln)["step"] <= step]
            metrics_path.write_text("".join(k + "\n" for k in keep))
        if d.is_main and not quiet:
            print(f"resumed from {last} (step {step}, cursor {cursor})", flush=True)
    elif d.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(cfgmod.dumps(cfg))

    def extra():
        return {"seed": seed, "cursor": cursor, "config": cfgmod.to_dict(cfg),
                "scheduler": sched.state_dict()}

    if last is None and 0 in cfg.ckpt_steps:
        checkpoint.save(out, 0, wrapped, optim, extra(), d)

    records = []
    wrapped.train()
    while step < cfg.max_steps and (stop_at is None or step < stop_at):
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=d.device, dtype=torch.float64)
        for m in range(accum):
            first = cursor + (d.rank * accum + m) * mb
            x, y = stream.batch(first, mb)
            x = torch.from_numpy(x).to(d.device, non_blocking=True)
            y = torch.from_numpy(y).to(d.device, non_blocking=True)
            with distributed.no_sync(wrapped, m == accum - 1):
                with torch.autocast(d.device.type, dtype=amp_dtype, enabled=use_autocast):
                    logits = runner(x)  # (mb, T, vocab)
                tok_loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1),
                                           reduction="sum")
                (tok_loss * (d.world_size / cfg.batch_tokens)).backward()
            loss_sum += tok_loss.detach().double()
        loss = distributed.all_reduce_sum(loss_sum).item() / cfg.batch_tokens
        if not math.isfinite(loss):
            good = checkpoint.latest(out)
            raise NonFiniteLoss(f"non-finite loss {loss} at update {step + 1} (seed {seed}); training "
                                f"stopped; last good checkpoint: {good or 'none'}")
        gnorm = torch.nn.utils.clip_grad_norm_(wrapped.parameters(), cfg.grad_clip)
        if hasattr(gnorm, "full_tensor"):
            gnorm = gnorm.full_tensor()
        lr = sched.get_last_lr()[0]
        optim.step()
        sched.step()
        optim.zero_grad(set_to_none=True)
        step += 1
        cursor += seqs_per_update
        if d.device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        tps = cfg.batch_tokens / dt
        mfu = fpt * tps / (cfg.peak_tflops * 1e12 * d.world_size) if cfg.peak_tflops > 0 else None
        rec = {"step": step, "loss": loss, "grad_norm": float(gnorm), "lr": lr,
               "tokens_per_s": tps, "mfu": mfu, "seconds": dt}
        records.append(rec)
        if d.is_main:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            if not quiet and (step % cfg.log_every == 0 or step == 1 or step == cfg.max_steps):
                mfu_s = f"{100 * mfu:.1f}%" if mfu is not None else "n/a"
                print(f"step {step:6d}/{cfg.max_steps} | loss {loss:.4f} | gnorm {float(gnorm):.3f} | "
                      f"lr {lr:.2e} | {tps:,.0f} tok/s | mfu {mfu_s}", flush=True)
        if step in cfg.ckpt_steps:
            checkpoint.save(out, step, wrapped, optim, extra(), d)
    if d.is_main and step >= cfg.max_steps:
        (out / "DONE").write_text(f"{step}\n")
    if on_finish is not None:
        on_finish(wrapped, optim)
    return records


def main_train(cfg, seed, out, stop_at=None, device="auto") -> int:
    try:
        train(cfg, seed, out, stop_at=stop_at, device=device)
    except NonFiniteLoss as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0
