"""Experiment configurations: frozen dataclasses selected by name.

A :class:`RunConfig` holds everything that determines a run (model shape,
optimiser, schedule, batch, data, checkpoint cadence, probe).  It is frozen,
type-checked, serialised into every checkpoint (``extra.json``) and report, and
overridden only through ``key=value`` strings checked against the field types
(:func:`apply_overrides`); an unknown key is an error.

Adding a configuration is one entry in :data:`CONFIGS`.

The paper (arXiv:2602.18849v2) gives no hyperparameters; ``gpt2-774m`` follows
the public recipe listed in shared/MATH.md (Experiments): lr 2.5e-4, warmup
700, 524 288 tokens per update, AdamW (0.9, 0.95), weight decay 0.1, clip 1.0,
N(0, 0.02) init with residual projections scaled by 1/sqrt(2*n_layer), no
dropout, bf16.  What we chose beyond that (schedule shape, horizon, seeds,
probe sizes) is marked "our choice" below.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass


@dataclass(frozen=True)
class GPTConfig:
    """Model shape; the constructor of :class:`gpu_experiments.model.GPT` takes this."""

    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    block_size: int = 1024
    vocab_size: int = 50304  # GPT-2's 50257 padded to a multiple of 64
    bias: bool = True
    post_ln: bool = False  # False: pre-LN (the paper's runs); True: original post-LN


@dataclass(frozen=True)
class RunConfig:
    name: str
    model: GPTConfig
    # --- optimisation (public recipe for gpt2-774m) ---
    lr: float = 2.5e-4
    min_lr_ratio: float = 0.1  # our choice: cosine decay to 10% of peak
    warmup_steps: int = 700
    lr_decay_steps: int = 10_000  # our choice: cosine horizon = max_steps
    max_steps: int = 10_000
    batch_tokens: int = 524_288  # tokens per optimiser update, global
    micro_batch: int = 16  # sequences per rank per forward
    beta1: float = 0.9
    beta2: float = 0.95
    weight_decay: float = 0.1  # applied to >= 2-D weights only
    grad_clip: float = 1.0
    init_std: float = 0.02
    # --- numerics / systems ---
    dtype: str = "bfloat16"  # autocast dtype on CUDA (and FSDP2's param dtype); "float32": none
    compile: bool = False  # torch.compile each Block's forward (works under DDP and FSDP2)
    parallel: str = "ddp"  # "ddp" or "fsdp2" (ignored with one process)
    grad_compression: str = "auto"  # DDP comm hook: "bf16", "none", "auto" = bf16 on CUDA across nodes
    deterministic: bool = True  # torch.use_deterministic_algorithms on CPU
    peak_tflops: float = 989.0  # per device, for MFU (H100/H200 bf16 dense); 0 = unknown
    # --- data ---
    dataset: str = "offline"  # "offline" (pydoc topics, bytes) or a prepared dir name
    data_dir: str = "data/offline"
    # --- checkpoints, evaluation and logging ---
    ckpt_steps: tuple[int, ...] = (0, 100, 300, 1000, 3000, 10_000)  # probe checkpoints RUN/step-N
    resume_every: int = 1000  # resume checkpoints RUN/resume/step-N every N updates (0: none)
    resume_keep: int = 2  # resume checkpoints kept (the newest)
    eval_every: int = 250  # held-out loss every N updates and at the last one (0: never)
    eval_tokens: int = 1_048_576  # held-out tokens per evaluation (whole windows of val.bin)
    log_every: int = 10
    tensorboard: bool = True  # RUN/tensorboard/ event files beside metrics.jsonl (if installed)
    # --- probe (our choice of sizes) ---
    probe_batch: int = 4  # held-out sequences in the fixed probe batch
    probe_queries: int = 8  # sampled query rows per (sequence, layer, head)
    probe_seed: int = 1234
    seeds: tuple[int, ...] = (1, 2, 3)

    @property
    def tokens_per_micro(self) -> int:
        return self.micro_batch * self.model.block_size


GPT2_774M = GPTConfig(n_layer=36, n_head=20, n_embd=1280, block_size=1024, vocab_size=50304)

# Byte-level offline tokenizer: 256 bytes + <|endoftext|> = 257, padded to 320.
_BYTE_VOCAB = 320

CONFIGS: dict[str, RunConfig] = {
    "gpt2-774m": RunConfig(name="gpt2-774m", model=GPT2_774M, dataset="fineweb-10bt",
                           data_dir="data/fineweb-10bt", compile=True),
    # The whole pipeline in a couple of minutes on 2 CPU cores.
    "tiny-cpu": RunConfig(
        name="tiny-cpu",
        model=GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=_BYTE_VOCAB),
        lr=3e-3, warmup_steps=5, lr_decay_steps=40, max_steps=40, batch_tokens=512,
        micro_batch=4, dtype="float32", peak_tflops=0.0, ckpt_steps=(0, 10, 40),
        resume_every=20, eval_every=10, eval_tokens=2048, log_every=5, probe_batch=2, probe_queries=4),
    # About 6 layers, width 256, context 256; three seeds < 1 h on 2 cores.
    "small-cpu": RunConfig(
        name="small-cpu",
        model=GPTConfig(n_layer=6, n_head=4, n_embd=256, block_size=256, vocab_size=_BYTE_VOCAB),
        lr=1e-3, warmup_steps=30, lr_decay_steps=600, max_steps=600, batch_tokens=4096,
        micro_batch=8, dtype="float32", peak_tflops=0.0, ckpt_steps=(0, 20, 60, 200, 600),
        resume_every=100, eval_every=50, eval_tokens=16_384, log_every=10, probe_batch=4, probe_queries=8),
}


def get_config(name: str) -> RunConfig:
    if name not in CONFIGS:
        raise KeyError(f"unknown config {name!r}; known: {', '.join(sorted(CONFIGS))}")
    return CONFIGS[name]


def _parse_value(key: str, text: str, typ):
    """Parse ``text`` as ``typ`` (int, float, bool, str, tuple[int, ...]); ValueError names the key."""
    try:
        if typ is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected a boolean (true/false)")
        if typ is int:
            return int(text.replace("_", ""))
        if typ is float:
            return float(text)
        if typ is str:
            return text
        if typing.get_origin(typ) is tuple:
            return tuple(int(x.replace("_", "")) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ValueError(f"override {key}={text!r}: {exc}") from None
    raise TypeError(f"override {key}: unsupported field type {typ!r}")


def apply_overrides(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """Return ``cfg`` with ``key=value`` overrides applied (``model.n_layer=4`` or ``n_layer=4``).

    Model fields may be given bare (``n_layer=4``) or prefixed (``model.n_layer=4``).
    Unknown keys, malformed items and values of the wrong type raise ValueError.
    """
    run_types = typing.get_type_hints(RunConfig)
    model_types = typing.get_type_hints(GPTConfig)
    run_changes: dict = {}
    model_changes: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r}: expected key=value")
        key, text = item.split("=", 1)
        key = key.strip()
        bare = key[len("model."):] if key.startswith("model.") else key
        if bare in model_types and (key.startswith("model.") or bare not in run_types):
            model_changes[bare] = _parse_value(key, text, model_types[bare])
        elif key in run_types and key not in ("model", "name"):
            run_changes[key] = _parse_value(key, text, run_types[key])
        else:
            raise ValueError(f"override {item!r}: unknown key {key!r}")
    model = dataclasses.replace(cfg.model, **model_changes)
    out = dataclasses.replace(cfg, model=model, **run_changes)
    validate(out)
    return out


def validate(cfg: RunConfig) -> None:
    m = cfg.model
    if m.n_embd % m.n_head:
        raise ValueError(f"config {cfg.name}: n_embd={m.n_embd} not divisible by n_head={m.n_head}")
    if cfg.parallel not in ("ddp", "fsdp2"):
        raise ValueError(f"config {cfg.name}: parallel must be ddp or fsdp2, got {cfg.parallel!r}")
    if cfg.dtype not in ("bfloat16", "float16", "float32"):
        raise ValueError(f"config {cfg.name}: dtype must be bfloat16/float16/float32, got {cfg.dtype!r}")
    if cfg.batch_tokens % cfg.tokens_per_micro:
        raise ValueError(f"config {cfg.name}: batch_tokens={cfg.batch_tokens} is not a multiple of "
                         f"micro_batch*block_size={cfg.tokens_per_micro}")
    if any(s < 0 or s > cfg.max_steps for s in cfg.ckpt_steps):
        raise ValueError(f"config {cfg.name}: ckpt_steps {cfg.ckpt_steps} outside [0, {cfg.max_steps}]")
    if cfg.grad_compression not in ("auto", "none", "bf16"):
        raise ValueError(f"config {cfg.name}: grad_compression must be auto/none/bf16, got {cfg.grad_compression!r}")
    for key in ("resume_every", "eval_every", "eval_tokens", "log_every"):
        if getattr(cfg, key) < (1 if key == "log_every" else 0):
            raise ValueError(f"config {cfg.name}: {key}={getattr(cfg, key)} must be >= {int(key == 'log_every')}")
    if cfg.resume_keep < 1:
        raise ValueError(f"config {cfg.name}: resume_keep={cfg.resume_keep} must be >= 1")
    if cfg.eval_every and cfg.eval_tokens < m.block_size:
        raise ValueError(f"config {cfg.name}: eval_tokens={cfg.eval_tokens} is less than one window "
                         f"(block_size={m.block_size})")


def grad_accum_steps(cfg: RunConfig, world_size: int) -> int:
    """Micro-batches per rank per update so that the global batch is ``batch_tokens``."""
    per_update = cfg.batch_tokens // cfg.tokens_per_micro  # micro-batches, all ranks together
    if per_update % world_size:
        raise ValueError(f"config {cfg.name}: {per_update} micro-batches per update do not split "
                         f"over {world_size} ranks; change micro_batch or batch_tokens")
    return per_update // world_size


# Fields a resumed run may change: how the same computation is carried out, watched or stopped.
# Everything else (model shape, init, data, seed, batch in tokens, schedule, optimizer, precision,
# probe) must equal the checkpoint's config.  max_steps only moves the end of the run (the
# schedule is lr_decay_steps); grad_compression rounds the DDP all-reduce like FSDP2 reorders it.
RESUME_MAY_CHANGE = frozenset({
    "compile", "parallel", "grad_compression", "micro_batch", "deterministic", "peak_tflops",
    "data_dir", "ckpt_steps", "resume_every", "resume_keep", "eval_every", "eval_tokens", "log_every",
    "tensorboard", "max_steps", "seeds",
})


def resume_changes(saved: RunConfig, new: RunConfig) -> tuple[dict, dict]:
    """``(allowed, refused)``: the fields that differ, as ``{key: (saved, new)}`` (model fields as
    ``model.KEY``), split by :data:`RESUME_MAY_CHANGE`."""
    allowed, refused = {}, {}
    for f in dataclasses.fields(RunConfig):
        a, b = getattr(saved, f.name), getattr(new, f.name)
        if f.name == "model":
            for g in dataclasses.fields(GPTConfig):
                if getattr(a, g.name) != getattr(b, g.name):
                    refused[f"model.{g.name}"] = (getattr(a, g.name), getattr(b, g.name))
        elif a != b:
            (allowed if f.name in RESUME_MAY_CHANGE else refused)[f.name] = (a, b)
    return allowed, refused


def to_dict(cfg: RunConfig) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(d: dict) -> RunConfig:
    """Inverse of :func:`to_dict` (as read back from JSON: lists become tuples)."""
    d = dict(d)
    model = GPTConfig(**d.pop("model"))
    for k in ("ckpt_steps", "seeds"):
        if k in d:
            d[k] = tuple(d[k])
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"config dict has unknown keys {sorted(unknown)}")
    out = RunConfig(model=model, **d)
    validate(out)
    return out


def dumps(cfg: RunConfig) -> str:
    return json.dumps(to_dict(cfg), indent=1, sort_keys=True)
