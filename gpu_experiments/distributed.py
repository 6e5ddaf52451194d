"""Process groups and data parallelism, applied from outside the model.

One process: no process group, the model is used as is.  Under torchrun
(``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set): gloo on CPU, NCCL on CUDA, and the
model is wrapped with DDP (default) or FSDP2 (``fully_shard`` on every Block,
then on the root).  Both average gradients over ranks; train.py scales the loss
so the result is the mean over all tokens of the global batch.
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
    if device == "cuda":
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30),
                                device_id=dev if dev.type == "cuda" else None)
    return Dist(rank=rank, local_rank=local, world_size=world, device=dev)


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


def wrap(model: nn.Module, parallel: str, d: Dist) -> nn.Module:
    """Apply data parallelism from outside: DDP or FSDP2; identity with one process."""
    if d.world_size == 1:
        return model
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [d.local_rank] if d.device.type == "cuda" else None
        return DDP(model, device_ids=ids)
    if parallel == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(d.device.type, (d.world_size,))
        for block in model.transformer.h:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    raise ValueError(f"parallel must be 'ddp' or 'fsdp2', got {parallel!r}")


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
