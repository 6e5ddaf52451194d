"""The whole experiment: seeds -> train -> probe -> certify -> report, resumable.

Layout under ``OUT``::

    OUT/reproduce.json             config, seeds, stage status (rewritten after each stage)
    OUT/seed-S/                    a training run (config.json, metrics.jsonl, step-N/, DONE)
    OUT/seed-S/rows/step-N.npz     probe rows (certificates input format)
    OUT/seed-S/certificates/       python -m certificates certify output
    OUT/report/                    python -m certificates report over all seeds

Every stage is skipped when its output is complete (``DONE``, rows files,
``certificates/summary.json``, ``report/``), and training resumes from its last
checkpoint, so rerunning the same command after an interruption continues.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from gpu_experiments import checkpoint, config as cfgmod, probe, train



class ConfigMismatch(ValueError):
    """OUT already holds a run of another config (bad input: exit 2)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_seed(cfg: cfgmod.RunConfig, seed: int, run_dir: Path, nproc: int, overrides: list[str],
                device: str) -> None:
    if nproc <= 1:
        rc = train.main_train(cfg, seed, run_dir, device=device)
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
               "--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "gpu_experiments", "train",
               "--config", cfg.name, "--seed", str(seed), "--out", str(run_dir), "--device", device,
               *overrides]
        rc = subprocess.run(cmd).returncode
    if rc != 0:
        raise SystemExit(f"reproduce: training seed {seed} failed (exit {rc}); rerun to resume "
                         f"from {checkpoint.latest_resumable(run_dir) or 'scratch'}")


def reproduce(name: str, out: str | Path, overrides: list[str] = (), nproc: int = 1,
              device: str = "auto", certify: bool = True) -> dict:
    """Run every stage that is not complete yet; return the status dict written to reproduce.json."""
    cfg = cfgmod.apply_overrides(cfgmod.get_config(name), list(overrides))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    status_path = out / "reproduce.json"
    status = {"config": json.loads(cfgmod.dumps(cfg)), "overrides": list(overrides), "stages": {}}
    if status_path.exists():
        old = json.loads(status_path.read_text())
        if old["config"] != status["config"]:
            raise ConfigMismatch(f"{status_path}: {out} holds a different config; use a fresh --out")
        status["stages"] = old.get("stages", {})

    def mark(key, value):
        status["stages"][key] = value
        tmp = status_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
        os.replace(tmp, status_path)

    import torch
    probe_device = device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    cert_dirs = []
    for seed in cfg.seeds:
        run_dir = out / f"seed-{seed}"
        if not (run_dir / "DONE").exists():
            print(f"== train seed {seed} -> {run_dir}", flush=True)
            _train_seed(cfg, seed, run_dir, nproc, list(overrides), device)
        mark(f"seed-{seed}/train", "done")
        print(f"== probe seed {seed}", flush=True)
        rows = probe.probe_run(run_dir, device=probe_device)
        mark(f"seed-{seed}/probe", [str(r.relative_to(out)) for r in rows])
        cert = run_dir / "certificates"
        cert_dirs.append(cert)
        if certify and not (cert / "summary.json").exists():
            print(f"== certify seed {seed}", flush=True)
            try:
                probe.certify(rows, cert, device=probe_device)
            except RuntimeError as exc:
                mark(f"seed-{seed}/certify", f"failed: {exc}")
                raise SystemExit(f"reproduce: {exc}")
        if certify:
            mark(f"seed-{seed}/certify", "done")
    if certify:
        report = out / "report"
        if not report.exists():
            print(f"== report -> {report}", flush=True)
            cmd = probe.certificates_cli("report", *map(str, cert_dirs), "-o", str(report))
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                mark("report", f"failed: {(res.stderr or res.stdout).strip()[-500:]}")
                raise SystemExit(f"reproduce: certificates report failed (exit {res.returncode})")
        mark("report", "done")
    return status
