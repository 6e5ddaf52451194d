"""C9/C10 on trained weights: per attention layer, the global bound, the local bound and θ's effect.

    python -m gpu_experiments.attention_bounds --run DIR [--step N] [--seq-len T] [--json FILE]
    python -m gpu_experiments.attention_bounds --checkpoint DIR/step-N [...]

For each layer of a checkpoint: the C10 Lipschitz bound on D_R with R = ‖γ‖_∞ + RMS(β)
of ln_1 (pre-LN only: a post-LN attention input is not a LayerNorm output, so no R),
and the C9 local bound at the layer's actual input (ln_1 of the residual stream on
the run's fixed probe batch, first sequence, float64) with the certified θ_hi and with
θ := 1.  "theta_effect" = median over rows of bound(θ_hi)/bound(θ = 1): how much the θ
factor tightens the local bound.  Precision: as numerics.attention_bounds (upper
bounds under its stated assumptions); activations are those of the float32 CPU forward.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from .nanogpt_weights import from_nanogpt_state_dict, nanogpt_ln1_radius
from numerics.attention_bounds import c9_bound, c10_bound


def attention_inputs(model, tokens: torch.Tensor) -> list[np.ndarray]:
    """The input of every layer's attention for one sequence (T,) of token ids, float64 (T, C)."""
    caps: list = [None] * len(model.transformer.h)
    hooks = [blk.attn.register_forward_pre_hook(lambda _m, args, i=i: caps.__setitem__(i, args[0].detach()))
             for i, blk in enumerate(model.transformer.h)]
    try:
        with torch.no_grad():
            model(tokens[None, :])
    finally:
        for h in hooks:
            h.remove()
    return [c[0].to(torch.float64).cpu().numpy() for c in caps]


def evaluate_model(model, tokens: torch.Tensor) -> list[dict]:
    """Per-layer C9/C10 figures for a nanoGPT-style GPT (see module docstring)."""
    cfg = model.config
    sd = model.state_dict()
    layers = from_nanogpt_state_dict(sd, cfg.n_layer, cfg.n_head, cfg.n_embd)
    inputs = attention_inputs(model, tokens)
    out = []
    for i, (w, X) in enumerate(zip(layers, inputs)):
        loc = c9_bound(X, w)
        one = c9_bound(X, w, theta="one")
        rec = dict(layer=i, seq_len=int(X.shape[0]),
                   local_median=float(np.median(loc.per_row)), local_max=loc.bound,
                   local_median_theta1=float(np.median(one.per_row)),
                   theta_effect=float(np.median(loc.per_row / one.per_row)),
                   theta_median=float(np.median(loc.theta)))
        if not getattr(cfg, "post_ln", False):
            R = nanogpt_ln1_radius(sd, i)
            rec.update(R=R, global_bound=c10_bound(w, R),
                       input_in_D_R=bool(np.sqrt((X * X).mean(axis=1)).max() <= R))
        else:
            rec.update(R=None, global_bound=None, input_in_D_R=None)
        out.append(rec)
    return out


def _format(rows: list[dict]) -> str:
    head = f"{'layer':>5} {'global C10':>12} {'local max':>11} {'local med':>11} {'med θ=1':>11} {'θ effect':>9} {'med θ':>7}"
    lines = [head]
    for r in rows:
        g = "n/a (post-LN)" if r["global_bound"] is None else f"{r['global_bound']:.4g}"
        lines.append(f"{r['layer']:>5} {g:>12} {r['local_max']:>11.4g} {r['local_median']:>11.4g} "
                     f"{r['local_median_theta1']:>11.4g} {r['theta_effect']:>9.3f} {r['theta_median']:>7.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_experiments.attention_bounds", description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="training run directory (uses its latest checkpoint unless --step)")
    src.add_argument("--checkpoint", type=Path, help="a checkpoint folder RUN/step-N")
    ap.add_argument("--step", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=256, help="tokens of the probe sequence to use (default 256)")
    ap.add_argument("--json", type=Path, default=None, help="write the per-layer figures here")
    a = ap.parse_args(argv)

    from gpu_experiments import checkpoint, data
    from gpu_experiments.model import GPT
    from gpu_experiments.probe import run_config

    if a.run is not None:
        cks = dict(checkpoint.list_checkpoints(a.run))
        if not cks:
            print(f"{a.run}: no complete checkpoint (step-N with extra.json)", file=sys.stderr)
            return 2
        step = a.step if a.step is not None else max(cks)
        if step not in cks:
            print(f"{a.run}: no checkpoint for step {step}; have {sorted(cks)}", file=sys.stderr)
            return 2
        run_dir, ckpt = a.run, cks[step]
    else:
        ckpt, run_dir = a.checkpoint, a.checkpoint.parent
    cfg = run_config(run_dir)
    model = GPT(cfg.model, init_std=cfg.init_std)
    meta = checkpoint.load_model_weights(ckpt, model)
    model.eval()
    T = min(a.seq_len, cfg.model.block_size)
    tokens = torch.from_numpy(data.probe_batch(cfg.data_dir, 1, cfg.model.block_size, cfg.probe_seed)[0, :T])
    rows = evaluate_model(model, tokens)
    print(f"{ckpt} (step {meta.get('step')}), sequence length {T}")
    print(_format(rows))
    if a.json is not None:
        a.json.write_text(json.dumps(dict(checkpoint=str(ckpt), step=meta.get("step"), layers=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
