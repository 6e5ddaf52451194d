"""The training loop: one process or torchrun (DDP / FSDP2), resumable bitwise on CPU.

Loss normalisation (the v2 correction, shared/MATH.md Experiments): the
objective of one update is the mean cross-entropy over *all tokens of the
global batch*.  Each micro-batch contributes ``sum_of_token_losses *
world_size / global_tokens``; DDP/FSDP2 average gradients over ranks (divide by
world_size) and accumulation adds micro-batches, so the gradient is exactly
that of the global mean, whatever the split into ranks x micro-batches.  The sum
is taken by loss.token_loss_sum on the logits in the model's dtype (no float32
copy of the logits; float32 per chunk, float64 accumulation).

Data: update ``u`` reads global windows ``cursor .. cursor + n_micro*micro_batch``
(data.TokenStream); rank ``r``'s micro-batch ``m`` takes block ``r*accum + m``,
so 2 ranks x k micro-batches see exactly the sequences 1 rank x 2k sees.

Checkpoints (checkpoint.py): probe checkpoints ``RUN/step-N`` at ``ckpt_steps``
and resume checkpoints ``RUN/resume/step-N`` every ``resume_every`` updates (the
newest ``resume_keep`` kept).  A restarted run continues from the newest of
either kind; its config may differ from the checkpoint's only in the fields of
``config.RESUME_MAY_CHANGE`` (compile, parallel, micro_batch, ...): the
differences are printed and appended to ``RUN/config_changes.jsonl``, and
``config.json`` is rewritten.  Anything else is refused.

Stop signals: SIGUSR1 (Slurm's ``--signal=B:USR1@N``, forwarded by
slurm/train.sbatch) and SIGTERM (scancel, preemption, the time limit) only set
a flag.  The flag rides on the loss all-reduce, so every rank learns of it at
the same update boundary; then a resume checkpoint is written and
:class:`Preempted` is raised (the CLI exits with 128 + the signal number, 138
or 143, as if killed by it).  train.sbatch requeues the job, which resumes.

Every update appends one record to ``RUN/metrics.jsonl`` (and, when the
tensorboard package is installed, to ``RUN/tensorboard/``): loss, gradient
norm, lr, tokens/s, MFU, peak memory of this rank, seconds, and ``eval_loss``
(the mean loss over ``eval_tokens`` fixed held-out tokens of ``val.bin``,
every ``eval_every`` updates and at the last; null otherwise).
"""
from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from gpu_experiments import checkpoint, config as cfgmod, data, distributed
from gpu_experiments.loss import token_loss_sum, token_loss_sum_nograd
from gpu_experiments.model import GPT, flops_per_token, param_groups

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
# AdamW param-group entries that choose an implementation, not the mathematics: a resumed
# optimizer keeps its own (a fused CUDA checkpoint resumes on CPU and vice versa).
_IMPL_KEYS = ("fused", "foreach", "capturable", "differentiable")


class NonFiniteLoss(RuntimeError):
    pass


class Preempted(RuntimeError):
    """A stop signal arrived; the run saved a resume checkpoint at ``step`` and stopped."""

    def __init__(self, signum: int, step: int, ckpt: Path, rank: int):
        self.signum, self.step, self.ckpt, self.rank = signum, step, ckpt, rank
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name} after update {step}; resume checkpoint {ckpt}; "
                         "rerun the same command (or let Slurm requeue the job) to continue")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _StopFlag:
    """Install handlers for STOP_SIGNALS that only record the first signal (main thread only)."""

    def __init__(self):
        self.signum: int | None = None
        self._old: dict = {}

    def _handler(self, signum, _frame):
        if self.signum is None:
            self.signum = signum

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)
        return False


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


def _cpu_ranges(cpus: list[int]) -> str:
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out) or "?"


def affinity_line(d: distributed.Dist) -> str:
    """One line per rank: the CPUs it may run on (the Slurm rehearsal parses this format)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = []
    return (f"rank {d.rank}/{d.world_size} local {d.local_rank} host {socket.gethostname()} pid {os.getpid()}: "
            f"cpus {_cpu_ranges(cpus)} ({len(cpus)}) | SLURM_CPUS_PER_TASK="
            f"{os.environ.get('SLURM_CPUS_PER_TASK', '-')} | OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')} "
            f"| torch threads {torch.get_num_threads()}")


AFFINITY_RE = re.compile(r"^rank (\d+)/(\d+) local (\d+) host (\S+) pid (\d+): cpus (\S+) \((\d+)\) "
                         r"\| SLURM_CPUS_PER_TASK=(\S+)", re.M)


def parse_affinity(text: str) -> list[dict]:
    """The :func:`affinity_line` lines in a job's output, in order."""
    return [{"rank": int(m[1]), "world": int(m[2]), "local_rank": int(m[3]), "host": m[4], "pid": int(m[5]),
             "cpus": m[6], "n_cpus": int(m[7]), "slurm_cpus_per_task": m[8]} for m in AFFINITY_RE.finditer(text)]


def _peak_memory(d: distributed.Dist) -> int:
    """Peak bytes of this rank since the last call (CUDA allocator), or the process's peak RSS (CPU)."""
    if d.device.type == "cuda":
        b = torch.cuda.max_memory_allocated(d.device)
        torch.cuda.reset_peak_memory_stats(d.device)
        return int(b)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


class _HeldOut:
    """The fixed held-out windows of ``val.bin`` this rank evaluates (equal counts on every rank)."""

    def __init__(self, cfg: cfgmod.RunConfig, d: distributed.Dist):
        self.val = data.load_tokens(data_dir_for(cfg), "val")
        T = self.T = cfg.model.block_size
        avail = (len(self.val) - 1) // T
        if avail < 1:
            raise ValueError(f"{cfg.data_dir}/val.bin: {len(self.val)} tokens, fewer than one window of {T + 1}")
        per_rank = -(-max(1, cfg.eval_tokens // T) // d.world_size)
        total = per_rank * d.world_size
        idx = np.arange(total) * avail // total if total <= avail else np.arange(total) % avail
        mine = idx[d.rank * per_rank:(d.rank + 1) * per_rank]
        self.batches = [mine[i:i + cfg.micro_batch] for i in range(0, len(mine), cfg.micro_batch)]

    def loss(self, model, d: distributed.Dist, amp_dtype, use_autocast: bool) -> float:
        s = torch.zeros(2, dtype=torch.float64, device=d.device)
        T = self.T
        with torch.no_grad():
            for b in self.batches:
                buf = np.stack([self.val[w * T: w * T + T + 1] for w in b]).astype(np.int64)
                x = torch.from_numpy(np.ascontiguousarray(buf[:, :-1])).to(d.device)
                y = torch.from_numpy(np.ascontiguousarray(buf[:, 1:])).to(d.device)
                with torch.autocast(d.device.type, dtype=amp_dtype, enabled=use_autocast):
                    logits = model(x)
                s[0] += token_loss_sum_nograd(logits, y)
                s[1] += y.numel()
                del logits
        distributed.all_reduce_sum(s)
        total, n = s.tolist()
        return total / n


def _tensorboard(out: Path, start_step: int, quiet: bool):
    """A SummaryWriter on RUN/tensorboard (None, with one line, when tensorboard is not installed)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        if not quiet:
            print("tensorboard is not installed: metrics go to metrics.jsonl only "
                  "(pip install tensorboard, or pip install '.[cluster]')", flush=True)
        return None
    return SummaryWriter(str(out / "tensorboard"), purge_step=start_step + 1 if start_step else None)


def _fmt_changes(changes: dict) -> str:
    return ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items())


def train(cfg: cfgmod.RunConfig, seed: int, out_dir: str | Path, stop_at: int | None = None,
          device: str = "auto", quiet: bool = False, on_finish=None) -> list[dict]:
    """Train (or resume) the run in ``out_dir``; return this process's metrics records.

    ``stop_at``: return right after the update that reaches this step (and its
    checkpoint, if scheduled) -- simulates an interruption for tests.
    ``on_finish(model, optimizer)``: called once after the last update, before the
    process group is torn down (the rehearsal hashes the final state with it).
    Raises :class:`NonFiniteLoss` (after keeping the last good checkpoint) on a NaN/inf loss,
    and :class:`Preempted` after saving a resume checkpoint when a stop signal arrived.
    """
    d = distributed.setup(device)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        with _StopFlag() as stop:
            return _train(cfg, seed, Path(out_dir), stop_at, d, quiet, on_finish, stop)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)  # leave global state as found
        distributed.teardown()


def _train(cfg, seed, out, stop_at, d, quiet, on_finish, stop):
    cfgmod.validate(cfg)
    if not quiet:  # one write, so the lines of ranks sharing an output file do not interleave
        sys.stdout.write(affinity_line(d) + "\n")
        sys.stdout.flush()
    if d.device.type == "cpu" and cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    _prepare_data(cfg, d)
    stream = data.TokenStream(data.load_tokens(data_dir_for(cfg), "train"), cfg.model.block_size, seed)
    held_out = _HeldOut(cfg, d) if cfg.eval_every else None
    accum = cfgmod.grad_accum_steps(cfg, d.world_size)
    mb, T = cfg.micro_batch, cfg.model.block_size
    seqs_per_update = cfg.batch_tokens // T

    # The run's previous checkpoint (if any) and its config, checked before anything is built.
    last = checkpoint.latest_resumable(out)
    changes = {}
    if last is not None:
        saved_meta = checkpoint.read_extra(last)
        if saved_meta["seed"] != seed:
            raise ValueError(f"{last}/extra.json: run was started with seed {saved_meta['seed']}, not {seed}; "
                             "use a fresh --out directory")
        changes, refused = cfgmod.resume_changes(cfgmod.from_dict(saved_meta["config"]), cfg)
        if refused:
            raise ValueError(f"{last}/extra.json: run was started with a different config ({_fmt_changes(refused)}); "
                             "only " + ", ".join(sorted(cfgmod.RESUME_MAY_CHANGE)) + " may change on resume; "
                             "use a fresh --out directory")

    torch.manual_seed(seed)  # same on every rank: identical initial weights
    model = GPT(cfg.model, init_std=cfg.init_std).to(d.device)
    n_params = model.num_params(non_embedding=True)
    fpt = flops_per_token(cfg.model, n_params)
    use_autocast = d.device.type == "cuda" and cfg.dtype != "float32"
    amp_dtype = getattr(torch, cfg.dtype)
    if cfg.compile:
        distributed.compile_blocks(model)
    compression = distributed.compression_for(cfg.grad_compression, d)
    wrapped = distributed.wrap(model, cfg.parallel, d, param_dtype=amp_dtype if use_autocast else None,
                               grad_compression=compression if cfg.parallel == "ddp" else "none")
    groups = param_groups(wrapped, cfg.weight_decay)
    optim = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                              **({"fused": True} if d.device.type == "cuda" else {}))
    impl = {k: optim.param_groups[0].get(k) for k in _IMPL_KEYS}
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lr_lambda(cfg))

    step, cursor = 0, 0
    metrics_path = out / "metrics.jsonl"
    if last is not None:
        meta = checkpoint.load(last, wrapped, optim, d)
        for g in optim.param_groups:
            g.update(impl)
        step, cursor = meta["step"], meta["cursor"]
        sched.load_state_dict(meta["scheduler"])
        if d.is_main:
            if metrics_path.exists():  # drop records logged after the checkpoint
                keep = [ln for ln in metrics_path.read_text().splitlines()
                        if ln.strip() and json.loads(ln)["step"] <= step]
                metrics_path.write_text("".join(k + "\n" for k in keep))
            if changes:
                with open(out / "config_changes.jsonl", "a") as f:
                    f.write(json.dumps({"step": step, "checkpoint": str(last), "changes": {
                        k: [list(a) if isinstance(a, tuple) else a, list(b) if isinstance(b, tuple) else b]
                        for k, (a, b) in changes.items()}}) + "\n")
                (out / "config.json").write_text(cfgmod.dumps(cfg))
            if step < cfg.max_steps and (out / "DONE").exists():
                (out / "DONE").unlink()
        if d.is_main and not quiet:
            print(f"resumed from {last} (step {step}, cursor {cursor})", flush=True)
            if changes:
                print(f"resume: config changed (allowed): {_fmt_changes(changes)}", flush=True)
    elif d.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(cfgmod.dumps(cfg))
    if d.is_main and not quiet:
        extras = [f"compile={cfg.compile}", f"parallel={cfg.parallel if d.world_size > 1 else 'none'}",
                  f"world {d.world_size} ({d.nnodes} node(s))", f"accum {accum}",
                  f"autocast {cfg.dtype if use_autocast else 'off'}", f"fused AdamW {bool(impl.get('fused'))}"]
        if cfg.parallel == "ddp" and d.world_size > 1:
            extras.append(f"grad compression {compression}")
        print(f"{cfg.name} seed {seed}: " + ", ".join(extras), flush=True)

    def extra():
        return {"seed": seed, "cursor": cursor, "config": cfgmod.to_dict(cfg),
                "scheduler": sched.state_dict()}

    def save(run_dir, what):
        t0 = time.perf_counter()
        path = checkpoint.save(run_dir, step, wrapped, optim, extra(), d)
        if d.is_main and run_dir != out:
            checkpoint.prune_resume(out, cfg.resume_keep)
        if d.is_main and not quiet:
            print(f"saved {what} checkpoint {path} ({time.perf_counter() - t0:.1f} s)", flush=True)
        return path

    if last is None and 0 in cfg.ckpt_steps:
        save(out, "probe")

    writer = _tensorboard(out, step, quiet) if (d.is_main and cfg.tensorboard) else None
    records = []
    wrapped.train()
    try:
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
                        logits = wrapped(x)  # (mb, T, vocab), model dtype
                    tok_loss = token_loss_sum(logits, y)  # float64 scalar
                    del logits  # only the stored gradient (model dtype) lives on into backward
                    (tok_loss * (d.world_size / cfg.batch_tokens)).backward()
                loss_sum += tok_loss.detach()
            # one all-reduce carries the loss and the stop flag (so every rank stops at this update)
            stats = torch.stack([loss_sum, torch.tensor(0.0 if stop.signum is None else 1.0,
                                                        dtype=torch.float64, device=d.device)])
            loss_total, stopping = distributed.all_reduce_sum(stats).tolist()
            loss = loss_total / cfg.batch_tokens
            if not math.isfinite(loss):
                good = checkpoint.latest_resumable(out)
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
            mem = _peak_memory(d)
            eval_loss = None
            if held_out is not None and (step % cfg.eval_every == 0 or step == cfg.max_steps):
                eval_loss = held_out.loss(wrapped, d, amp_dtype, use_autocast)
            rec = {"step": step, "loss": loss, "grad_norm": float(gnorm), "lr": lr,
                   "tokens_per_s": tps, "mfu": mfu, "peak_mem_bytes": mem, "eval_loss": eval_loss,
                   "seconds": dt}
            records.append(rec)
            if d.is_main:
                with open(metrics_path, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                if writer is not None:
                    for k in ("loss", "grad_norm", "lr", "tokens_per_s", "mfu", "peak_mem_bytes", "eval_loss"):
                        if rec[k] is not None:
                            writer.add_scalar(f"train/{k}" if k != "eval_loss" else "eval/loss", rec[k], step)
                if not quiet and (step % cfg.log_every == 0 or step == 1 or step == cfg.max_steps
                                  or eval_loss is not None):
                    mfu_s = f"{100 * mfu:.1f}%" if mfu is not None else "n/a"
                    ev = f" | eval {eval_loss:.4f}" if eval_loss is not None else ""
                    print(f"step {step:6d}/{cfg.max_steps} | loss {loss:.4f}{ev} | gnorm {float(gnorm):.3f} | "
                          f"lr {lr:.2e} | {tps:,.0f} tok/s | mfu {mfu_s} | "
                          f"{'peak mem' if d.device.type == 'cuda' else 'peak RSS'} {mem / 2**30:.2f} GiB",
                          flush=True)
            saved = None
            if step in cfg.ckpt_steps:
                saved = save(out, "probe")
            elif cfg.resume_every and step % cfg.resume_every == 0 and step < cfg.max_steps:
                saved = save(checkpoint.resume_dir(out), "resume")
            if stopping and step < cfg.max_steps:  # a signal during the last update: just finish
                signum = int(distributed.all_reduce_max(
                    torch.tensor([float(stop.signum or 0)], dtype=torch.float64, device=d.device)).item())
                signum = signum or int(signal.SIGTERM)
                if saved is None:
                    saved = save(checkpoint.resume_dir(out), "resume")
                if d.is_main and not quiet:
                    print(f"rank {d.rank}: got {signal.Signals(signum).name}: saved {saved} after update {step}; "
                          "exiting so the job can be requeued", flush=True)
                raise Preempted(signum, step, saved, d.rank)
    finally:
        if writer is not None:
            writer.close()
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
    except Preempted as exc:
        if exc.rank == 0:
            print(f"train: {exc}", flush=True)
        return exc.exit_code
    return 0
