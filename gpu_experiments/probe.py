"""Probe attention rows at every checkpoint of a run and hand them to ``certificates``.

For each complete checkpoint ``RUN/step-N`` (oldest first):

* the fixed held-out probe batch (``data.probe_batch``: same windows for every
  checkpoint and every seed, chosen by ``probe_seed``);
* a forward pass with a hook on every layer's ``attn.c_attn`` that captures
  its output (q, k, v in that order) exactly as the model computed it (bf16
  under autocast on CUDA, float32 on CPU); the fused attention kernel is
  never read;
* for every layer and head, ``probe_queries`` query positions per sequence,
  drawn once from ``probe_seed`` (the same positions at every checkpoint,
  uniformly from 1..T-1: position 0 attends to one key only, a trivial row);
* probabilities recomputed in float64: scores = q.k / sqrt(hs) over the keys
  0..query, softmax in float64.  Precision: the upcast of q, k is exact; the
  stored row is float64 softmax (relative error a few ulp).  The certificate
  certifies the exact normalisation of the stored values, whatever they are.

Output ``RUN/rows/step-N.npz`` in the certificates input format: ``rows``
(N, T) float64, causal rows zero-padded to T; metadata arrays ``run`` (str),
``step``, ``layer``, ``head``, ``query``, ``seqlen`` (= T, the probed sequence
length), ``n_keys`` (= query + 1), ``seq`` (index in the probe batch).
``RUN/rows/concentration.json`` holds per-(step, layer) medians of the largest
probability and of the entropy (E1: attention concentrates during training).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from gpu_experiments import checkpoint, config as cfgmod, data
from gpu_experiments.model import GPT


def run_config(run_dir: str | Path) -> cfgmod.RunConfig:
    p = Path(run_dir) / "config.json"
    if not p.exists():
        raise FileNotFoundError(f"{p}: not a training run directory (no config.json)")
    return cfgmod.from_dict(json.loads(p.read_text()))


def query_positions(cfg: cfgmod.RunConfig) -> np.ndarray:
    """(n_layer, n_head, probe_batch, probe_queries) sorted query positions in 1..T-1, seeded."""
    m = cfg.model
    rng = np.random.default_rng([cfg.probe_seed, 11])
    k = min(cfg.probe_queries, m.block_size - 1)
    out = np.empty((m.n_layer, m.n_head, cfg.probe_batch, k), dtype=np.int64)
    for idx in np.ndindex(m.n_layer, m.n_head, cfg.probe_batch):
        out[idx] = np.sort(rng.choice(np.arange(1, m.block_size), size=k, replace=False))
    return out


def attention_rows(qkv: torch.Tensor, n_head: int, queries: np.ndarray) -> np.ndarray:
    """Float64 softmax rows from one layer's c_attn output.

    qkv: (B, T, 3C) as captured; queries: (n_head, B, k).  Returns (n_head, B, k, T)
    float64 with row i zero beyond key ``queries[..., i]`` (causal).
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    q, k, _ = qkv.to(torch.float64).split(C, dim=2)
    q = q.view(B, T, n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
    k = k.view(B, T, n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
    qi = torch.as_tensor(queries, device=qkv.device).permute(1, 0, 2)  # (B, nh, kq)
    qsel = torch.gather(q, 2, qi.unsqueeze(-1).expand(-1, -1, -1, hs))  # (B, nh, kq, hs)
    scores = qsel @ k.transpose(-1, -2) / math.sqrt(hs)  # (B, nh, kq, T), float64
    keys = torch.arange(T, device=qkv.device)
    scores = scores.masked_fill(keys > qi.unsqueeze(-1), float("-inf"))
    p = torch.softmax(scores, dim=-1)  # exp(-inf) = 0: exact zero padding
    return p.permute(1, 0, 2, 3).cpu().numpy()  # (nh, B, kq, T)


@torch.no_grad()
def probe_checkpoint(cfg: cfgmod.RunConfig, ckpt: Path, tokens: np.ndarray, queries: np.ndarray,
                     run_name: str, device: str = "cpu") -> dict[str, np.ndarray]:
    """Rows and metadata for one checkpoint (see module docstring)."""
    model = GPT(cfg.model, init_std=cfg.init_std)
    meta = checkpoint.load_model_weights(ckpt, model)
    return probe_model(cfg, model, tokens, queries, run_name, meta["step"], device)


@torch.no_grad()
def probe_model(cfg: cfgmod.RunConfig, model: GPT, tokens: np.ndarray, queries: np.ndarray,
                run_name: str, step: int, device: str = "cpu") -> dict[str, np.ndarray]:
    """Rows and metadata for a plain (unwrapped, uncompiled) model in memory, labelled ``step``."""
    model.to(device).eval()
    m = cfg.model
    per_layer: list[np.ndarray] = [None] * m.n_layer
    hooks = []
    for li, block in enumerate(model.transformer.h):
        def hook(_mod, _inp, out, li=li):
            per_layer[li] = attention_rows(out.detach(), m.n_head, queries[li])
        hooks.append(block.attn.c_attn.register_forward_hook(hook))
    x = torch.from_numpy(tokens).to(device)
    use_autocast = torch.device(device).type == "cuda" and cfg.dtype != "float32"
    try:
        with torch.autocast(torch.device(device).type, dtype=getattr(torch, cfg.dtype), enabled=use_autocast):
            model(x)
    finally:
        for h in hooks:
            h.remove()
    rows = np.stack(per_layer)  # (L, nh, B, kq, T)
    L, H, B, K, T = rows.shape
    grid = np.indices((L, H, B, K)).reshape(4, -1)
    return {
        "rows": rows.reshape(-1, T),
        "run": np.full(grid.shape[1], run_name),
        "step": np.full(grid.shape[1], step, dtype=np.int64),
        "layer": grid[0].astype(np.int64), "head": grid[1].astype(np.int64),
        "seq": grid[2].astype(np.int64),
        "query": queries.reshape(-1).astype(np.int64),
        "seqlen": np.full(grid.shape[1], T, dtype=np.int64),
        "n_keys": queries.reshape(-1).astype(np.int64) + 1,
    }


def _concentration(arrs: dict) -> list[dict]:
    rows = arrs["rows"]
    pmax = rows.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(rows > 0, rows * np.log(rows), 0.0).sum(axis=1)
    out = []
    for layer in np.unique(arrs["layer"]):
        sel = arrs["layer"] == layer
        out.append({"step": int(arrs["step"][0]), "layer": int(layer),
                    "median_p_max": round(float(np.median(pmax[sel])), 6),
                    "median_entropy": round(float(np.median(ent[sel])), 6),
                    "frac_dominant": round(float(np.mean(pmax[sel] >= 0.5)), 6)})
    return out


def probe_run(run_dir: str | Path, device: str = "cpu", quiet: bool = False) -> list[Path]:
    """Write ``rows/step-N.npz`` for every checkpoint lacking one; return all rows files in step order."""
    run = Path(run_dir)
    cfg = run_config(run)
    cks = checkpoint.list_checkpoints(run)
    if not cks:
        raise FileNotFoundError(f"{run}: no complete checkpoints (step-N/ with extra.json)")
    tokens = data.probe_batch(cfg.data_dir, cfg.probe_batch, cfg.model.block_size, cfg.probe_seed)
    queries = query_positions(cfg)
    rows_dir = run / "rows"
    rows_dir.mkdir(exist_ok=True)
    seed = checkpoint.read_extra(cks[0][1])["seed"]
    run_name = f"{cfg.name}-seed{seed}"
    conc_path = rows_dir / "concentration.json"
    conc = json.loads(conc_path.read_text()) if conc_path.exists() else []
    files = []
    for step, ck in cks:
        dest = rows_dir / f"step-{step}.npz"
        if not dest.exists():
            arrs = probe_checkpoint(cfg, ck, tokens, queries, run_name, device)
            tmp = rows_dir / f"step-{step}.tmp.npz"
            np.savez_compressed(tmp, **arrs)  # causal zero padding compresses away
            os.replace(tmp, dest)
            conc = [c for c in conc if c["step"] != step] + _concentration(arrs)
            conc_path.write_text(json.dumps(sorted(conc, key=lambda c: (c["step"], c["layer"])), indent=1))
            if not quiet:
                print(f"probed {ck.name}: {len(arrs['rows'])} rows -> {dest}", flush=True)
        files.append(dest)
    return files


def certificates_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "certificates", *args]


def certify(rows_files: list[Path], out_dir: Path, report_dir: Path | None = None,
            device: str = "cpu") -> None:
    """Run ``python -m certificates certify`` then ``report`` on the rows files (data flows via files)."""
    cmds = [certificates_cli("certify", *map(str, rows_files), "-o", str(out_dir), "--device", device)]
    if report_dir is not None:
        cmds.append(certificates_cli("report", str(out_dir), "-o", str(report_dir)))
    for cmd in cmds:
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"certificates step failed (exit {res.returncode}): {' '.join(cmd[1:4])} ...\n"
                               + "\n".join(tail))
