"""Per-GPU memory of a training configuration: parameters, gradients, AdamW, activations.

Everything here is an integer byte count computed from the model as built
(parameter tensors enumerated on the ``meta`` device, so gpt2-774m costs no
memory) and from an explicit list of the tensors autograd saves in one block.
The list is written for *this* model (model.py) and this training loop
(train.py); :func:`measure_saved_bytes` checks it against what autograd
really saves (tests, and the rehearsal at full width).

What is assumed rather than measured (shown in every table):

* AdamW keeps ``exp_avg`` and ``exp_avg_sq`` in the parameter dtype (fp32):
  8 bytes per parameter; gradients are fp32 (4 bytes): the parameters are fp32
  masters.
* DDP and one GPU: under bf16 autocast every Linear weight is cast once per
  forward and the cast copy is kept for backward: 2 bytes per Linear weight.
* DDP (``gradient_as_bucket_view=False``, the default) copies gradients into
  its communication buckets: another 4 bytes per parameter (bf16 compression
  across nodes only adds bucket-sized temporaries).
* FSDP2 (distributed.py: ``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)`` on CUDA) shards fp32 parameters, gradients and optimizer
  state over the W ranks and all-gathers bf16 copies: the root (embeddings,
  ln_f, tied lm_head) stays unsharded from forward to backward; one Block is
  unsharded (and one prefetched) at a time, and so are its unsharded gradients
  before the reduce-scatter.  No autocast weight copies (the weights already are
  bf16).  While gradient sync is off (every micro-batch but the last of an
  update, distributed.no_sync) FSDP2 keeps every unsharded gradient, upcast to
  the fp32 reduce dtype: 4 bytes per parameter whenever an update has more than
  one micro-batch per rank.
* The loss (loss.py) stores one gradient row per token in the logits' dtype and
  upcasts ``CHUNK_TOKENS`` rows at a time (two fp32 chunk buffers); the logits
  themselves are freed when the loss is computed.
* Attention uses a fused kernel (flash / memory-efficient on CUDA, the CPU
  flash kernel on CPU): O(T) saved per head, never the T x T matrix.
* ``reserve_bytes``: CUDA context, NCCL and cuBLAS workspaces (3 GiB, our
  choice) plus 10 % of the activations for allocator fragmentation (our choice).
  Capacities are the nominal decimal figures (80e9, 141e9), below the usable
  amount on H100 80GB / H200 parts, so "fits" is conservative.
"""
from __future__ import annotations

import dataclasses

import torch

from gpu_experiments.config import GPTConfig, RunConfig

GIB = 2**30
RESERVE_FIXED = 3 * GIB  # our choice: CUDA context + NCCL + cuBLAS workspaces
FRAGMENTATION = 0.10  # our choice: allocator slack, as a fraction of activation bytes
ASSUMPTIONS = [
    "fp32 master parameters and gradients (4 + 4 bytes/param), AdamW exp_avg + exp_avg_sq in fp32 (8)",
    "DDP / one GPU: bf16 autocast keeps a bf16 copy of every Linear weight for backward (2 bytes each)",
    "DDP: gradient buckets are a second fp32 copy of the gradients (gradient_as_bucket_view=False)",
    "FSDP2 with MixedPrecisionPolicy(bf16, fp32): params/grads/AdamW sharded over 8 ranks; bf16 root "
    "(wte, wpe, ln_f) unsharded through forward+backward; one bf16 Block unsharded + one prefetched, "
    "with their unsharded grads; with accumulation (> 1 micro-batch per rank) every unsharded grad "
    "in fp32 (4 bytes/param) between micro-batches",
    "loss: one gradient row per token in the logits' dtype + two fp32 buffers of CHUNK_TOKENS rows",
    "fused attention (O(T) per head saved, no T x T matrix); LayerNorm inputs saved in fp32",
    "eager kernels: torch.compile (compile=true) may save fewer tensors; not modelled",
    "activation checkpointing: per Block, keeping each Block's fp32 input; one Block recomputed at a time",
    "reserve: 3 GiB (CUDA context, NCCL, cuBLAS) + 10 % of activations; capacity 80e9 / 141e9 bytes",
]
CLUSTERS = {"8x80GB": (8, 80 * 10**9), "8x141GB": (8, 141 * 10**9)}


def param_count(m: GPTConfig) -> int:
    """Exact parameter count by formula (tied lm_head counted once, wpe included)."""
    C, V, T, L = m.n_embd, m.vocab_size, m.block_size, m.n_layer
    b = 1 if m.bias else 0
    ln = C + b * C
    block = 2 * ln + (C * 3 * C + b * 3 * C) + (C * C + b * C) + (C * 4 * C + b * 4 * C) + (4 * C * C + b * C)
    return V * C + T * C + L * block + ln


def model_param_shapes(m: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Shapes of the real model's parameters (built on the meta device: no memory)."""
    from gpu_experiments.model import GPT

    with torch.device("meta"):
        model = GPT(m)
    return {n: tuple(p.shape) for n, p in model.named_parameters()}  # tied tensor listed once


def cast_weight_count(m: GPTConfig) -> int:
    """Elements autocast copies to bf16 per forward: the Linear weights (tied lm_head = wte)."""
    C = m.n_embd
    return m.n_layer * 12 * C * C + m.vocab_size * C


def block_param_count(m: GPTConfig) -> int:
    return (param_count(m) - param_count(dataclasses.replace(m, n_layer=0))) // m.n_layer


def saved_per_token(m: GPTConfig, act: int) -> dict[str, int]:
    """Bytes autograd saves per token: one Block and the head, ``act`` = 2 (bf16 autocast) or 4 (fp32).

    The residual stream is fp32 in both cases (the embeddings are fp32 and
    autocast returns LayerNorm in fp32), so LayerNorm inputs are 4 bytes.
    """
    C, H, V = m.n_embd, m.n_head, m.vocab_size
    cast = act if act != 4 else 0  # under autocast the Linear input is a separate bf16 copy
    block = (4 * C + 8          # ln_1: input (fp32) + mean, rstd
             + (cast or 4) * C  # c_attn input: LayerNorm output (fp32) or its bf16 cast
             + act * 3 * C      # q, k, v: views of the c_attn output, saved by the attention kernel
             + act * C + 4 * H  # attention output (also the c_proj input: the fused kernels return
                                # it in (B, T, nh, hs) memory order, so .contiguous() copies nothing)
                                # + log-sum-exp per head
             + 4 * C + 8        # ln_2: input + mean, rstd
             + (cast or 4) * C  # c_fc input
             + act * 4 * C      # GELU input (c_fc output)
             + act * 4 * C)     # mlp c_proj input (GELU output)
    head = (4 * C + 8           # ln_f input + stats
            + (cast or 4) * C   # lm_head input
            + act * V           # the loss's stored gradient, in the logits' dtype (loss.py)
            + 3 * 8)            # int64 token ids, positions (upper bound: micro-batch 1), targets
    return {"block": block, "head": head}


def head_live_per_token(m: GPTConfig, act: int) -> dict[str, int]:
    """Logit bytes per token outside autograd's saved set: ``logits`` while the loss is computed."""
    return {"live": act * m.vocab_size, "transient": 0}


def loss_workspace_bytes(m: GPTConfig) -> int:
    """The loss's float32 work space: a chunk copy and logsumexp's temporary, CHUNK_TOKENS rows each."""
    from gpu_experiments.loss import CHUNK_TOKENS

    return 2 * 4 * m.vocab_size * CHUNK_TOKENS


def activation_bytes(m: GPTConfig, micro_batch: int, act: int, checkpointing: bool) -> int:
    """Peak activation bytes of one forward+backward of ``micro_batch`` sequences of ``block_size``.

    Without checkpointing: every Block's saved tensors plus the head.  With per-Block
    activation checkpointing: only each Block's input (fp32 residual, 4C) is kept,
    plus one Block recomputed in full during its backward.  The peak is at the loss:
    everything saved, the logits and the loss's stored gradient and work space.
    """
    tok = micro_batch * m.block_size
    s, h = saved_per_token(m, act), head_live_per_token(m, act)
    blocks = (m.n_layer * 4 * m.n_embd + s["block"]) if checkpointing else m.n_layer * s["block"]
    return tok * (blocks + s["head"] + h["live"] + h["transient"]) + loss_workspace_bytes(m)


def per_gpu(cfg: RunConfig, parallel: str, world: int, capacity: int, micro_batch: int | None = None,
            checkpointing: bool = False, act: int = 2) -> dict:
    """Byte budget of one GPU; ``fits`` iff total + reserve <= capacity."""
    m = cfg.model
    mb = cfg.micro_batch if micro_batch is None else micro_batch
    n = param_count(m)
    p_block = block_param_count(m)
    p_root = n - m.n_layer * p_block
    shard = world if parallel == "fsdp2" else 1
    out = {"params": 4 * n // shard, "grads": 4 * n // shard, "optimizer": 8 * n // shard}
    seqs = cfg.batch_tokens // m.block_size
    accum = max(1, -(-seqs // (mb * world)))  # micro-batches per rank per update
    casts = 2 * cast_weight_count(m) if act == 2 else 0  # autocast's bf16 weight copies
    accum_grads = 0
    if parallel == "ddp":
        extra = casts + 4 * n  # + gradient buckets
    elif parallel == "none":  # one process, no wrapper (benchmarks/gpu_smoke.py)
        extra = casts
    elif parallel == "fsdp2":
        pb = 2 if act == 2 else 4  # all-gathered parameter dtype (MixedPrecisionPolicy bf16 on CUDA)
        extra = pb * p_root * 2  # unsharded root params + its unsharded grads
        extra += pb * p_block * 2 * 2  # one Block unsharded + one prefetched, params and grads
        accum_grads = 4 * n if accum > 1 else 0  # unsharded fp32 grads kept between micro-batches
        extra += accum_grads
    else:
        raise ValueError(f"parallel must be ddp, fsdp2 or none, got {parallel!r}")
    out["parallel_buffers"] = extra
    out["activations"] = activation_bytes(m, mb, act, checkpointing)
    out["total"] = sum(out.values())
    out["reserve"] = RESERVE_FIXED + int(FRAGMENTATION * out["activations"])
    out["micro_batch"] = mb
    out["accum"] = accum
    out["unsharded_accum_grads"] = accum_grads
    out["fits"] = out["total"] + out["reserve"] <= capacity
    return out


def largest_micro_batch(cfg: RunConfig, parallel: str, world: int, capacity: int,
                        checkpointing: bool, divides: bool = False) -> int:
    """Largest micro-batch that fits (0 if none); ``divides``: also split the global batch evenly."""
    seqs = cfg.batch_tokens // cfg.model.block_size
    best = 0
    for mb in range(1, seqs // world + 1):  # not monotone: FSDP2 drops its accumulation grads at accum 1
        if divides and (seqs % (mb * world)):
            continue
        if per_gpu(cfg, parallel, world, capacity, mb, checkpointing)["fits"]:
            best = mb
    return best


def table(cfg: RunConfig) -> list[dict]:
    """One row per (cluster, parallelism, activation checkpointing) at the configured micro-batch."""
    rows = []
    for cluster, (world, cap) in CLUSTERS.items():
        for par in ("ddp", "fsdp2"):
            for ac in (False, True):
                r = per_gpu(cfg, par, world, cap, checkpointing=ac)
                rows.append(dict(r, cluster=cluster, parallel=par, checkpointing=ac, capacity=cap,
                                 largest_micro_batch=largest_micro_batch(cfg, par, world, cap, ac),
                                 largest_dividing=largest_micro_batch(cfg, par, world, cap, ac, True)))
    return rows


def cpu_fp32_prediction(m: GPTConfig, micro_batch: int, baseline: int) -> dict:
    """Predicted peak of the single-process fp32 CPU step (params, grads, AdamW, activations)."""
    n = param_count(m)
    out = {"params": 4 * n, "grads": 4 * n, "optimizer": 8 * n,
           "activations": activation_bytes(m, micro_batch, 4, False), "baseline_rss": baseline}
    out["total"] = sum(out.values())
    return out


_VIEW_FNS = ("TBackward0", "TransposeBackward0", "PermuteBackward0", "ViewBackward0", "ExpandBackward0")


def _is_weight_cast(t: torch.Tensor) -> bool:
    """True for autocast's copy of a parameter (a dtype cast of a leaf, possibly seen through a view)."""
    fn = t.grad_fn
    while fn is not None and type(fn).__name__ in _VIEW_FNS:
        fn = fn.next_functions[0][0]
    if fn is None or not type(fn).__name__.startswith("ToCopyBackward"):
        return False
    src = fn.next_functions[0][0]
    return type(src).__name__ == "AccumulateGrad"


def measure_saved_bytes(m: GPTConfig, micro_batch: int = 1, act: int = 4, seed: int = 0) -> dict:
    """Bytes per token that autograd really saves in one CPU forward (distinct storages).

    ``act`` = 4: fp32; 2: bf16 CPU autocast (the same op policy as CUDA autocast for the
    ops of model.py: Linear in bf16, LayerNorm and the loss in fp32).  Parameters are
    excluded; bf16 weight copies made by autocast are reported apart (``weight_casts``).
    The Blocks' share and the head's are separated by running with ``n_layer`` Blocks
    and with none.  Float results: exact integers divided by the token count.
    """
    from gpu_experiments.loss import token_loss_sum
    from gpu_experiments.model import GPT

    def saved(cfg: GPTConfig) -> tuple[int, int]:
        torch.manual_seed(seed)
        model = GPT(cfg)
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        acts: dict[int, int] = {}
        casts: dict[int, int] = {}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                (casts if _is_weight_cast(t) else acts)[st.data_ptr()] = st.nbytes()
            return t

        x = torch.randint(0, cfg.vocab_size, (micro_batch, cfg.block_size))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=act == 2):
                logits = model(x)
            token_loss_sum(logits, x)  # the training loss (loss.py): saves one gradient row per token
        return sum(acts.values()), sum(casts.values())

    tok = micro_batch * m.block_size
    (a1, c1), (a0, _) = saved(m), saved(dataclasses.replace(m, n_layer=0))
    # Here the targets are the input ids themselves (one storage): the model counts separate
    # targets, so its head figure is 8 bytes per token above this measurement.
    return {"block": (a1 - a0) / (m.n_layer * tok), "head": a0 / tok, "weight_casts": c1}


def markdown_table(cfg: RunConfig) -> str:
    """The per-GPU table of :func:`table` in Markdown (GiB = 2^30 bytes)."""
    g = lambda b: f"{b / GIB:.1f}"  # noqa: E731
    head = ("| GPUs | parallel | act. ckpt | params | grads | AdamW | buffers | activations "
            f"(mb {cfg.micro_batch}) | total + reserve | fits | largest mb (dividing) |")
    lines = [head, "|" + "---|" * 11]
    for r in table(cfg):
        lines.append(f"| {r['cluster']} | {r['parallel']} | {'yes' if r['checkpointing'] else 'no'} | "
                     f"{g(r['params'])} | {g(r['grads'])} | {g(r['optimizer'])} | {g(r['parallel_buffers'])} | "
                     f"{g(r['activations'])} | {g(r['total'] + r['reserve'])} | {'yes' if r['fits'] else 'no'} | "
                     f"{r['largest_micro_batch']} ({r['largest_dividing']}) |")
    return "\n".join(lines)
