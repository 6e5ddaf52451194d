"""Two-node FSDP2 rehearsal on one CPU machine, through the cluster's own SLURM script.

``python -m gpu_experiments rehearse --config tiny-cpu --nnodes 2 --out DIR`` runs
``gpu_experiments/slurm/train.sbatch`` unchanged with ``DEVICE=cpu`` and two
stand-ins on ``PATH``: ``scontrol show hostnames`` prints 127.0.0.1 and
``srun`` starts its command once per node of the job, in parallel.  So each
"node" is a torchrun agent (c10d rendezvous at 127.0.0.1, one gloo process
each) exactly as the sbatch line starts it on the cluster.

Runs (all the same config, seed and global batch; FSDP2; 2 micro-batches
per rank per update, so accumulation under FSDP2 is exercised):

* ``two-node``: uninterrupted;
* ``two-node-resumed``: the same job stopped after update ``stop_at`` (one
  past the checkpoint, so work is lost and redone) and submitted again;
* ``one-node``: one process, no process group, same global batch.

``resume_bitwise``: the resumed job's losses and gradient norms at every update
and every tensor of its final checkpoint (model and AdamW state) equal the
uninterrupted job's bit for bit.  ``matches_one_node``: losses within
``LOSS_TOL`` and final weights within ``WEIGHT_TOL`` of the one-process run
(FSDP2 reduce-scatters gradients, so summation order differs: not bitwise).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SBATCH = ROOT / "gpu_experiments" / "slurm" / "train.sbatch"
LOSS_TOL = 1e-5  # float32 losses of a few nats: ~100 ulp, far below any real divergence
WEIGHT_TOL = 1e-5
SEED = 1

_SCONTROL = """#!/bin/sh
# rehearsal stand-in for scontrol: only `scontrol show hostnames LIST` (every node is this machine)
if [ "$1 $2" = "show hostnames" ]; then echo 127.0.0.1; exit 0; fi
echo "scontrol stand-in: 'scontrol $*' is not emulated by the CPU rehearsal" >&2
exit 2
"""
# Rehearsal stand-in for srun (written with this interpreter in its #! line).
_SRUN = r'''#!{python}
# Rehearsal stand-in for srun: one task per node of the job, all on this machine, in parallel.
# Honours --kill-on-bad-exit[=0|1] (a failing task stops the others), --ntasks-per-node=1 and
# --cpus-per-task=N / -c N (node i's task is bound to the i-th N CPUs of this machine, so its
# ranks see N CPUs, as under Slurm's core binding); forwards SIGUSR1/SIGTERM/SIGINT to every
# process of the tasks (each task runs in its own process group, as slurmstepd signals a step's
# whole process tree); refuses every other option (exit 2) instead of ignoring it.
import os, signal, subprocess, sys, time

def refuse(msg):
    print("srun stand-in: " + msg, file=sys.stderr)
    sys.exit(2)

args, kill_on_bad_exit, cpus = sys.argv[1:], False, None
while args and args[0].startswith("-"):
    opt = args.pop(0)
    key, eq, val = opt.partition("=")
    if opt == "--":
        break
    if key == "--kill-on-bad-exit":
        kill_on_bad_exit = (val or "1") != "0"
    elif key == "--ntasks-per-node":
        if val != "1":
            refuse(opt + ": only one task per node is emulated")
    elif key in ("--cpus-per-task", "-c"):
        val = val if eq else (args.pop(0) if args else "")
        if not val.isdigit() or int(val) < 1:
            refuse(opt + ": expected a positive integer")
        cpus = int(val)
    else:
        refuse("option " + opt + " is not emulated by the CPU rehearsal")
if not args:
    refuse("no command")
nodes = int(os.environ.get("SLURM_JOB_NUM_NODES", "1"))
avail = sorted(os.sched_getaffinity(0))
if cpus is not None and cpus * nodes > len(avail):
    refuse("--cpus-per-task=%d x %d nodes needs %d CPUs; this machine has %d"
           % (cpus, nodes, cpus * nodes, len(avail)))
procs = []
for i in range(nodes):
    env = dict(os.environ, SLURM_NODEID=str(i), SLURM_PROCID=str(i), SLURM_LOCALID="0",
               SLURM_STEP_NUM_TASKS=str(nodes))
    mask = None
    if cpus is not None:
        env["SLURM_CPUS_PER_TASK"] = str(cpus)
        mask = avail[i * cpus:(i + 1) * cpus]
    bind = (lambda m=mask: os.sched_setaffinity(0, m)) if mask else None
    procs.append(subprocess.Popen(args, env=env, preexec_fn=bind, start_new_session=True))

def signal_tasks(signum):
    for p in procs:
        try:
            os.killpg(p.pid, signum)
        except ProcessLookupError:
            pass

def forward(signum, _frame):
    signal_tasks(signum)

for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, forward)
while [p.poll() for p in procs].count(None):  # poll every task (any() would stop at the first)
    if kill_on_bad_exit and any(p.returncode not in (None, 0) for p in procs):
        signal_tasks(signal.SIGKILL)
    time.sleep(0.05)
signal_tasks(signal.SIGKILL)  # what is left of a finished task (srun ends the whole step)
codes = [p.returncode for p in procs]  # like srun: the highest exit code, else 128 + a signal
exited = [c for c in codes if c > 0]
sys.exit(max(exited) if exited else max([128 - c for c in codes if c < 0], default=0))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shims(bindir: Path) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    for name, text in (("scontrol", _SCONTROL), ("srun", _SRUN.replace("{python}", sys.executable))):
        p = bindir / name
        p.write_text(text)
        p.chmod(0o755)


def launch_line() -> str:
    """The torchrun command of the sbatch script, as written there (recorded in rehearsal.json)."""
    lines = SBATCH.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("srun "))
    out = []
    for ln in lines[start:]:
        out.append(ln.strip().rstrip("\\").strip())
        if not ln.rstrip().endswith("\\"):
            break
    return " ".join(out).removesuffix("&").strip()


def sbatch(name: str, run: Path, args: list[str], work: Path, nnodes: int = 2) -> subprocess.CompletedProcess:
    """Run train.sbatch as SLURM would on ``nnodes`` nodes, all on localhost."""
    env = dict(os.environ, PATH=f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               SLURM_JOB_NODELIST="rehearsal-[0-1]", SLURM_JOB_NUM_NODES=str(nnodes),
               SLURM_GPUS_ON_NODE="1", SLURM_CPUS_PER_TASK="1", SLURM_JOB_ID=f"rehearsal-{uuid.uuid4().hex[:8]}",
               MASTER_PORT=str(_free_port()), DEVICE="cpu", PYTHON=sys.executable, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = ["bash", str(SBATCH), name, str(SEED), str(run), *args]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-10:])
        raise RuntimeError(f"two-node job failed (exit {res.returncode}): {' '.join(cmd[2:5])}\n{tail}")
    return res


def read_tensors(ckpt: Path) -> dict:
    """Every tensor of a DCP checkpoint (model and optimizer state), read into plain CPU tensors."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    from gpu_experiments import checkpoint

    md = checkpoint.SafeReader(str(ckpt)).read_metadata()
    sd = {k: torch.empty(v.size, dtype=v.properties.dtype) for k, v in md.state_dict_metadata.items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load(sd, storage_reader=checkpoint.SafeReader(str(ckpt)), no_dist=True)
    return sd


def _metrics(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines() if ln.strip()]


def rehearse_two_nodes(name: str, out: Path, steps: int, command: str = "", keep_work: bool = False) -> dict:
    import torch

    from gpu_experiments import config, data

    t_start = time.perf_counter()
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    out.mkdir(parents=True, exist_ok=True)
    _shims(work / "bin")
    data.prepare_offline(work / "data")
    base = config.get_config(name)
    k = steps // 2  # checkpoint in the middle; the interruption comes one update later
    stop_at = k + 1
    overrides = [f"data_dir={work / 'data'}", "parallel=fsdp2", f"max_steps={steps}",
                 f"ckpt_steps={k},{steps}", f"batch_tokens={4 * base.tokens_per_micro}", "log_every=1"]
    config.apply_overrides(base, overrides)  # validate before launching anything
    say = lambda msg: print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", flush=True)  # noqa: E731
    seconds = {}

    t0 = time.perf_counter()
    sbatch(name, work / "two-node", overrides, work)
    seconds["two_node"] = time.perf_counter() - t0
    say(f"two-node job: {steps} updates, FSDP2, losses {[m['loss'] for m in _metrics(work / 'two-node')]}")

    t0 = time.perf_counter()
    sbatch(name, work / "two-node-resumed", [*overrides, "--stop-at", str(stop_at)], work)
    stopped_after = len(_metrics(work / "two-node-resumed"))
    again = sbatch(name, work / "two-node-resumed", overrides, work)
    seconds["two_node_interrupted_and_resumed"] = time.perf_counter() - t0
    resumed_msg = "resumed from" in again.stdout
    from gpu_experiments.train import parse_affinity

    affinity = [{k: r[k] for k in ("rank", "cpus", "n_cpus", "slurm_cpus_per_task")}
                for r in sorted(parse_affinity(again.stdout), key=lambda r: r["rank"])]
    say(f"stopped after update {stopped_after}, resubmitted: {'resumed' if resumed_msg else 'NOT resumed'}")

    t0 = time.perf_counter()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    one = subprocess.run([sys.executable, "-m", "gpu_experiments", "train", "--config", name, "--seed",
                          str(SEED), "--out", str(work / "one-node"), "--device", "cpu", *overrides],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if one.returncode != 0:
        raise RuntimeError(f"one-node run failed (exit {one.returncode}): {one.stderr.strip()[-800:]}")
    seconds["one_node"] = time.perf_counter() - t0

    a, b, c = (_metrics(work / r) for r in ("two-node", "two-node-resumed", "one-node"))
    ta, tb = read_tensors(work / "two-node" / f"step-{steps}"), read_tensors(work / "two-node-resumed" / f"step-{steps}")
    tc = read_tensors(work / "one-node" / f"step-{steps}")
    same_metrics = [(x["loss"], x["grad_norm"]) for x in a] == [(x["loss"], x["grad_norm"]) for x in b]
    same_tensors = ta.keys() == tb.keys() and all(torch.equal(ta[n], tb[n]) for n in ta)
    bitwise = len(a) == steps and same_metrics and same_tensors and resumed_msg and stopped_after == stop_at
    loss_diff = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, c)) if len(a) == len(c) == steps else float("inf")
    weights = [n for n in ta if n.startswith("model.")]
    w_diff = max((ta[n] - tc[n]).abs().max().item() for n in weights) if weights else float("inf")
    moved = max((ta[n] - read_tensors(work / "two-node" / f"step-{k}")[n]).abs().max().item() for n in weights)
    matches = loss_diff <= LOSS_TOL and w_diff <= WEIGHT_TOL
    say(f"resume bitwise: {bitwise}; vs one node: max |loss diff| {loss_diff:.3g}, "
        f"max |weight diff| {w_diff:.3g} (tolerance {LOSS_TOL:g} / {WEIGHT_TOL:g})")

    record = {
        "config": name, "command": command, "nnodes": 2, "processes_per_node": 1, "backend": "gloo",
        "rendezvous": "c10d at 127.0.0.1 (torchrun agents started by train.sbatch through an srun stand-in)",
        "launch_line": launch_line(), "parallel": "fsdp2", "seed": SEED, "steps": steps,
        "overrides": [o for o in overrides if not o.startswith("data_dir=")],
        "grad_accum_per_rank": config.grad_accum_steps(config.apply_overrides(base, overrides), 2),
        "affinity": affinity,  # srun stand-in: --cpus-per-task=1, node i bound to the i-th CPU
        "checkpoint_step": k, "stopped_after_update": stopped_after,
        "losses_two_node": [m["loss"] for m in a], "losses_resumed": [m["loss"] for m in b],
        "losses_one_node": [m["loss"] for m in c],
        "resume_bitwise": bitwise, "resume_tensors_compared": len(ta),
        "matches_one_node": matches, "loss_tolerance": LOSS_TOL, "weight_tolerance": WEIGHT_TOL,
        "max_loss_diff_vs_one_node": loss_diff, "max_weight_diff_vs_one_node": w_diff,
        "max_weight_change_since_checkpoint": moved,
        "torch": torch.__version__, "seconds": seconds,
    }
    if not keep_work:
        shutil.rmtree(work)
    record["wall_seconds"] = time.perf_counter() - t_start
    tmp = out / "rehearsal.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, out / "rehearsal.json")
    say(f"wrote {out / 'rehearsal.json'}")
    return record
