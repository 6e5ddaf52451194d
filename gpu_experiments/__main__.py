"""Command line: ``python -m gpu_experiments {configs,prepare,train,probe,reproduce}``.

    python -m gpu_experiments configs [NAME] [key=value ...]     list / show (dry run: validates)
    python -m gpu_experiments prepare --source offline|hf [--out DIR]
    python -m gpu_experiments train --config NAME [--seed N] [--out DIR] [key=value ...]
    torchrun --nproc_per_node=K -m gpu_experiments train ...
    python -m gpu_experiments probe --run DIR [--no-certify]
    python -m gpu_experiments reproduce --config NAME --out DIR [--nproc K] [key=value ...]
    python -m gpu_experiments rehearse --config NAME --out DIR [--steps N] [--nnodes K] [--slurm]

``train`` exits 0 when done, 2 on bad input or a non-finite loss, and 128 + the signal number
(138 SIGUSR1, 143 SIGTERM) after a stop signal made it save a resume checkpoint and stop.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from pathlib import Path


class BadInput(Exception):
    """Bad input or usage: one line on stderr and exit 2 (as in every CLI of this project)."""


def _cfg(name: str, overrides: list[str]):
    from gpu_experiments import config

    try:
        return config.apply_overrides(config.get_config(name), overrides)
    except (KeyError, ValueError) as exc:  # bad input: one line, exit 2 like every CLI here
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gpu_experiments",
        description="GPT-2 (pre-LN; post-LN variant) training, DCP checkpoints and attention probes, "
                    "on a GPU cluster or a CPU, feeding the certificates. Exit codes: 0 ok, 1 a run or "
                    "verification failed, 2 bad input or usage.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    c = sub.add_parser("configs", help="list configs, or print one (with overrides) as JSON")
    c.add_argument("name", nargs="?", help="config to print (gpt2-774m, tiny-cpu, small-cpu); omit to list all")
    c.add_argument("overrides", nargs="*", metavar="key=value",
                   help="typed overrides, e.g. n_layer=4 (unknown keys and wrong types are errors)")

    p = sub.add_parser("prepare", help="write train.bin/val.bin/meta.json token memmaps")
    p.add_argument("--source", choices=["offline", "hf"], default="offline",
                   help="offline: Python's own pydoc text, byte-level tokens (no network); "
                        "hf: a public web-text corpus (cluster only, needs the datasets package)")
    p.add_argument("--out", default=None, help="default: data/offline or data/fineweb-10bt")
    p.add_argument("--dataset", default="fineweb-10bt",
                   help="corpus name from gpu_experiments.data.CORPORA (with --source hf; default fineweb-10bt)")
    p.add_argument("--stdlib", action="store_true", help="offline: add the stdlib sources to the corpus")
    p.add_argument("--num-proc", type=int, default=8, help="tokeniser processes (with --source hf)")

    t = sub.add_parser("train", help="train one seed (single process or under torchrun)")
    t.add_argument("--config", required=True, help="config name (see `configs`)")
    t.add_argument("--seed", type=int, default=1, help="training seed (default 1)")
    t.add_argument("--out", default=None, help="default: runs/CONFIG/seed-N")
    t.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto: cuda when available, else cpu")
    t.add_argument("--stop-at", type=int, default=None, help="stop after this step (simulated interruption)")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="typed config overrides")

    pr = sub.add_parser("probe", help="rows files for each checkpoint, then certify and report")
    pr.add_argument("--run", required=True, help="a run folder written by `train` (holds config.json, step-N/)")
    pr.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the probe forward runs")
    pr.add_argument("--no-certify", action="store_true", help="write the rows files only")

    r = sub.add_parser("reproduce", help="seeds -> train -> probe -> certify -> report (resumable)")
    r.add_argument("--config", required=True, help="config name (see `configs`)")
    r.add_argument("--out", required=True, help="output folder; rerunning resumes what is missing")
    r.add_argument("--nproc", type=int, default=1, help="train each seed with torchrun on K local processes")
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto: cuda when available, else cpu")
    r.add_argument("--no-certify", action="store_true", help="train and probe only")
    r.add_argument("overrides", nargs="*", metavar="key=value", help="typed config overrides (e.g. seeds=1)")

    rh = sub.add_parser("rehearse", help="CPU dress rehearsal of a cluster run; writes DIR/rehearsal.json")
    rh.add_argument("--config", required=True, help="config name (gpt2-774m: the full-size model)")
    rh.add_argument("--out", required=True, help="output folder (must not hold an earlier rehearsal)")
    rh.add_argument("--steps", type=int, default=None,
                    help="optimizer updates (default 2 on one node, at least 2; 6 with --nnodes 2, at least 3; "
                         "60 with --slurm, at least 10)")
    rh.add_argument("--nnodes", type=int, default=1, choices=[1, 2],
                    help="1: full-size single-process rehearsal; 2: two torchrun agents with FSDP2 via "
                         "gpu_experiments/slurm/train.sbatch on localhost")
    rh.add_argument("--slurm", action="store_true",
                    help="start a local Slurm (slurm-wlm + munge, as root), submit train.sbatch with sbatch, "
                         "preempt it with SIGUSR1, let it requeue and resume; compare with an uninterrupted job")
    rh.add_argument("--threads", type=int, default=2, help="torch CPU threads of each one-node process (default 2; "
                         "the two-node processes use 1 each)")
    rh.add_argument("--keep-work", action="store_true",
                    help="keep DIR/work (data, DCP checkpoints: about 9 GB at gpt2-774m)")

    a = ap.parse_args(argv)
    # DCP warns on every single-process save/load; the situation is intended here.
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")

    if a.cmd == "configs":
        from gpu_experiments import config

        if a.name is None:
            for name, cfg in config.CONFIGS.items():
                m = cfg.model
                print(f"{name:10s} layers={m.n_layer} heads={m.n_head} width={m.n_embd} "
                      f"context={m.block_size} steps={cfg.max_steps} batch_tokens={cfg.batch_tokens}")
            return 0
        print(config.dumps(_cfg(a.name, a.overrides)))
        return 0

    if a.cmd == "prepare":
        from gpu_experiments import data

        if a.source == "offline":
            meta = data.prepare_offline(a.out or "data/offline", include_stdlib=a.stdlib)
        else:
            try:
                meta = data.prepare_hf(a.out or f"data/{a.dataset}", dataset=a.dataset, num_proc=a.num_proc)
            except ValueError as exc:                    # unknown corpus, partial conversion, other plan
                print(f"error: prepare: {exc}", file=sys.stderr)
                return 2
        print(meta)
        return 0

    if a.cmd == "train":
        from gpu_experiments import train

        cfg = _cfg(a.config, a.overrides)
        out = Path(a.out or f"runs/{cfg.name}/seed-{a.seed}")
        return train.main_train(cfg, a.seed, out, stop_at=a.stop_at, device=a.device)

    if a.cmd == "probe":
        from gpu_experiments import probe

        run = Path(a.run)
        try:
            rows = probe.probe_run(run, device=a.device)
            if not a.no_certify:
                probe.certify(rows, run / "certificates", run / "report", device=a.device)
        except (FileNotFoundError, ValueError) as exc:   # no such run, malformed run: bad input
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except RuntimeError as exc:                      # certify or verify failed on good input
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    if a.cmd == "reproduce":
        from gpu_experiments import config, reproduce

        _cfg(a.config, a.overrides)  # validate before starting anything
        try:
            reproduce.reproduce(a.config, a.out, a.overrides, nproc=a.nproc, device=a.device,
                                certify=not a.no_certify)
        except reproduce.ConfigMismatch as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if a.cmd == "rehearse":
        try:
            return _rehearse(a, argv)
        except BadInput as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 2


def _rehearse(a, argv) -> int:
    from gpu_experiments import memory_model as mm, rehearse

    cfg = _cfg(a.config, [])
    if a.slurm:
        if a.nnodes != 1:
            raise BadInput("--slurm runs one node (this machine); --nnodes 2 is the stand-in rehearsal")
        steps = a.steps if a.steps is not None else 60
        if steps < 10:
            raise BadInput(f"--steps must be >= 10 with --slurm (the job is preempted after a few updates), got {steps}")
    else:
        steps = a.steps if a.steps is not None else (2 if a.nnodes == 1 else 6)
    if steps < 2:
        raise BadInput(f"--steps must be >= 2 (a resume needs an update after the checkpoint), got {steps}")
    if a.nnodes == 2 and steps < 3:
        raise BadInput(f"--steps must be >= 3 with --nnodes 2 (checkpoint, interruption, resume), got {steps}")
    if a.threads < 1:
        raise BadInput(f"--threads must be >= 1, got {a.threads}")
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} exists and is not a directory")
    if (out / "rehearsal.json").exists() or (out / "certificates").exists() or (out / "rows").exists():
        raise BadInput(f"--out {out} already holds a rehearsal; use a fresh folder")
    command = "python -m gpu_experiments " + " ".join(argv if argv is not None else sys.argv[1:])
    # every process builds the whole float32 model before any sharding (memory model, CPU step)
    need = (2 if a.slurm else a.nnodes) * mm.cpu_fp32_prediction(cfg.model, 1, 0)["total"]
    avail = rehearse.available_bytes()
    if avail is not None and avail < 1.1 * need:
        raise BadInput(f"{cfg.name} rehearsal needs about {1.1 * need / 2**30:.1f} GiB of free memory "
                         f"(memory model, float32 CPU step), {avail / 2**30:.1f} GiB available")
    if a.slurm:
        from gpu_experiments import rehearse_slurm

        try:
            rehearse_slurm.check_available()
        except rehearse_slurm.SlurmUnavailable as exc:
            raise BadInput(str(exc)) from None
        try:
            rec = rehearse_slurm.rehearse_slurm(cfg.name, out, steps, command=command, keep_work=a.keep_work)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except (KeyboardInterrupt, rehearse_slurm.Interrupted) as exc:
            print(f"error: interrupted ({str(exc) or 'Ctrl-C'}); the local Slurm was stopped", file=sys.stderr)
            return 1
        return 0 if rec["preempted_and_resumed"] and rec["resume_bitwise"] and rec["affinity_ok"] else 1
    if a.nnodes == 2:
        from gpu_experiments import rehearse_nodes

        try:
            rec = rehearse_nodes.rehearse_two_nodes(cfg.name, out, steps, command=command, keep_work=a.keep_work)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0 if rec["resume_bitwise"] and rec["matches_one_node"] else 1
    out.mkdir(parents=True, exist_ok=True)
    if (out / "work").exists():  # scratch of an interrupted rehearsal: never resumed, always redone
        import shutil

        shutil.rmtree(out / "work")
    try:
        rec = rehearse.rehearse_one_node(cfg.name, out, steps, threads=a.threads, keep_work=a.keep_work,
                                         command=command)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    ok = rec["resume_bitwise"] and rec["certify_exit"] == 0 and rec["verify_exit"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
