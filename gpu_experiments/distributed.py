"""Process groups and data parallelism, applied from outside the model.

One process: no process group, the model is used as is.  Under torchrun
(``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set): gloo on CPU, NCCL on CUDA, and the
model is wrapped with DDP (default) or FSDP2 (``fully_shard`` on every Block,
then on the root).  Both average gradients over ranks; train.py scales the loss
so the result is the mean over all tokens of the global batch.

On CUDA with a bf16 config, FSDP2 gets ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``: the all-gathered (unsharded) parameters are bf16, gradients are
reduce-scattered in fp32 into the fp32 sharded master parameters.  DDP keeps fp32
parameters under autocast; across nodes its gradient all-reduce is compressed to bf16
(:func:`bf16_allreduce_hook`; ``grad_compression``).  :func:`compile_blocks` compiles each
Block's forward in place (parameter names and DCP checkpoints unchanged), before or
after either wrapper.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn


@dataclass(frozen=True)
class Dist:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    local_world_size: int = 1  # processes on this node (torchrun's LOCAL_WORLD_SIZE)

    @property
    def nnodes(self) -> int:
        return max(1, self.world_size // max(1, self.local_world_size))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return dist.is_available() and dist.is_initialized()


def setup(device: str = "auto") -> Dist:
    """Initialise from torchrun's environment (or a single process when it is absent)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if device == "cuda":
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30),
                                device_id=dev if dev.type == "cuda" else None)
    return Dist(rank=rank, local_rank=local, world_size=world, device=dev, local_world_size=local_world)


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum over ranks in place (no-op with one process)."""
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_true(flag: bool, device: torch.device) -> bool:
    """True iff ``flag`` holds on every rank (so all ranks take the same branch)."""
    t = torch.tensor([0.0 if flag else 1.0], device=device)
    return all_reduce_sum(t).item() == 0.0


def bf16_allreduce_hook(process_group, bucket):
    """DDP comm hook: all-reduce each gradient bucket in bf16, the mean written back in fp32.

    torch's ``default_hooks.bf16_compress_hook`` does the same, but DDP refuses that name
    unless NCCL/XCCL is present; this one also runs on gloo, so the CPU tests exercise the
    hook the cluster uses.
    """
    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(dist.get_world_size(group))
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(f):
        buffer.copy_(f.value()[0])
        return buffer

    return fut.then(decompress)


def compression_for(setting: str, d: Dist) -> str:
    """``grad_compression`` resolved: "auto" is bf16 on CUDA when the job spans several nodes."""
    if setting == "auto":
        return "bf16" if d.device.type == "cuda" and d.nnodes > 1 else "none"
    return setting


def wrap(model: nn.Module, parallel: str, d: Dist, param_dtype: torch.dtype | None = None,
         grad_compression: str = "none") -> nn.Module:
    """Apply data parallelism from outside: DDP or FSDP2; identity with one process.

    ``param_dtype`` (FSDP2 only): the dtype of the all-gathered parameters (bf16 on CUDA);
    gradients are reduced in fp32.  ``grad_compression`` (DDP only): "bf16" registers
    :func:`bf16_allreduce_hook` (all-reduce in bf16, result back in the fp32 buckets).
    """
    if d.world_size == 1:
        return model
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [d.local_rank] if d.device.type == "cuda" else None
        ddp = DDP(model, device_ids=ids)
        if grad_compression == "bf16":
            ddp.register_comm_hook(None, bf16_allreduce_hook)
        elif grad_compression != "none":
            raise ValueError(f"grad_compression must be none or bf16 here, got {grad_compression!r}")
        return ddp
    if parallel == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh(d.device.type, (d.world_size,))
        kw = {}
        if param_dtype is not None and param_dtype != torch.float32:
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
        for block in model.transformer.h:
            fully_shard(block, mesh=mesh, **kw)
        fully_shard(model, mesh=mesh, **kw)
        return model
    raise ValueError(f"parallel must be 'ddp' or 'fsdp2', got {parallel!r}")


def compile_blocks(model: nn.Module) -> None:
    """``torch.compile`` every Block's forward in place.

    The Blocks are identical, so one graph serves all of them; the module tree, parameter
    names and state dicts are untouched (checkpoints load with compile on or off), and
    FSDP2's per-Block hooks stay outside the compiled code (they run in ``__call__``).
    """
    for block in model.transformer.h:
        block.forward = torch.compile(block.forward)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under DDP (FSDP2 modifies the module in place, so it is returned as is)."""
    return getattr(model, "module", model)


def no_sync(model: nn.Module, last_micro: bool):
    """Context that skips the gradient all-reduce on all but the last micro-batch."""
    import contextlib

    if last_micro:
        return contextlib.nullcontext()
    if hasattr(model, "no_sync"):  # DDP
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(False)

        @contextlib.contextmanager
        def _restore():
            try:
                yield
            finally:
                model.set_requires_gradient_sync(True)
        return _restore()
    return contextlib.nullcontext()


def all_reduce_max(t: torch.Tensor) -> torch.Tensor:
    """Maximum over ranks in place (no-op with one process)."""
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t
