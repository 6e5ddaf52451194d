"""DCP checkpoints ``RUN/step-N/``, written atomically, loaded without executing pickled code.

Two kinds, one format:

* probe checkpoints ``RUN/step-N/`` at the configured ``ckpt_steps``: kept for ever, read by
  ``python -m gpu_experiments probe`` (:func:`list_checkpoints`);
* resume checkpoints ``RUN/resume/step-N/`` every ``resume_every`` updates and when a stop
  signal arrives (train.py); only the newest ``resume_keep`` are kept (:func:`prune_resume`).
  The probe never sees them.  A run resumes from the newest of both kinds (:func:`latest_resumable`).

Layout of one checkpoint folder::

    step-N/.metadata, __*.distcp   DCP: {"model": ..., "optim": AdamW state} (tensors only)
    step-N/rng-rank{R}.json        each rank's torch (and CUDA) RNG state
    step-N/extra.json              step, data cursor, scheduler, param groups, config, world size
                                   (written last: its presence marks a complete checkpoint)

Atomicity: every rank writes into ``step-N.tmp/``; after a barrier rank 0
writes ``extra.json``, fsyncs and renames the folder to ``step-N``.  A kill at
any moment leaves either the previous good checkpoints untouched plus a stale
``.tmp`` folder (removed on the next save) or the complete new one.  This
needs a shared filesystem across nodes (as DCP itself does).

Safety: DCP stores its index (``.metadata``) with pickle.  We read it with a
restricted unpickler that resolves only DCP's own metadata classes, torch
dtypes and ``torch.Size``; anything else is refused.  Tensor payloads are read
by DCP with ``torch.load(weights_only=True)``; non-tensor ("bytes") entries,
which DCP would unpickle unrestricted, are never written and are refused on load.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from gpu_experiments import distributed

FORMAT = "gpu_experiments-ckpt-1"
_STEP_RE = re.compile(r"^step-(\d+)$")
_DEBRIS_RE = re.compile(r"^step-(\d+)\.(tmp|old)$")
RESUME_DIR = "resume"

_ALLOWED = {
    ("torch.distributed.checkpoint.metadata", n) for n in (
        "Metadata", "TensorStorageMetadata", "TensorProperties", "_MEM_FORMAT_ENCODING",
        "ChunkStorageMetadata", "MetadataIndex", "StorageMeta")
} | {("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
     ("torch.serialization", "_get_layout"), ("torch", "Size"),
     ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("collections", "OrderedDict")}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"checkpoint metadata refers to {module}.{name}: not allowed")


class SafeReader(FileSystemReader):
    """FileSystemReader whose metadata is unpickled with an allowlist and must hold tensors only."""

    def read_metadata(self, *args, **kwargs) -> Metadata:
        path = Path(self.path) / ".metadata"
        try:
            with open(path, "rb") as f:
                md = _MetadataUnpickler(f).load()
        except (pickle.UnpicklingError, EOFError, AttributeError) as exc:
            raise ValueError(f"{path}: unsafe or corrupt checkpoint metadata: {exc}") from None
        if not isinstance(md, Metadata):
            raise ValueError(f"{path}: metadata is a {type(md).__name__}, not DCP Metadata")
        for key, entry in md.state_dict_metadata.items():
            if not isinstance(entry, TensorStorageMetadata):
                raise ValueError(f"{path}: entry {key!r} is not a tensor; refusing to unpickle it")
        from torch.distributed.checkpoint.metadata import StorageMeta

        if getattr(md, "storage_meta", None) is None:
            md.storage_meta = StorageMeta()
        md.storage_meta.load_id = self.load_id
        return md


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (``step-N`` folders with ``extra.json``), sorted by step."""
    run = Path(run_dir)
    out = []
    if run.is_dir():
        for p in run.iterdir():
            m = _STEP_RE.match(p.name)
            if m and p.is_dir() and (p / "extra.json").exists():
                out.append((int(m.group(1)), p))
    return sorted(out)


def latest(run_dir: str | Path) -> Path | None:
    """The newest probe checkpoint ``RUN/step-N`` (None if there is none)."""
    cks = list_checkpoints(run_dir)
    return cks[-1][1] if cks else None


def resume_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / RESUME_DIR


def list_resumable(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Probe and resume checkpoints together, sorted by step (a probe checkpoint first on a tie)."""
    both = [(s, 0, p) for s, p in list_checkpoints(run_dir)]
    both += [(s, 1, p) for s, p in list_checkpoints(resume_dir(run_dir))]
    return [(s, p) for s, _, p in sorted(both)]


def latest_resumable(run_dir: str | Path) -> Path | None:
    """The checkpoint a restarted run continues from: the newest of either kind."""
    cks = list_resumable(run_dir)
    return cks[-1][1] if cks else None


def prune_resume(run_dir: str | Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` resume checkpoints and any write debris; rank 0 only."""
    rdir = resume_dir(run_dir)
    gone = [p for _, p in list_checkpoints(rdir)[:-keep]] if keep > 0 else []
    if rdir.is_dir():
        gone += [p for p in rdir.iterdir() if _DEBRIS_RE.match(p.name) and p.is_dir()]
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def _rng_state() -> dict:
    out = {"torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state().tolist()
    return out


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.tensor(state["cuda"], dtype=torch.uint8))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(run_dir: str | Path, step: int, model, optim, extra: dict, d: distributed.Dist) -> Path:
    """Write ``run_dir/step-{step}`` atomically (collective: every rank calls it)."""
    run = Path(run_dir)
    final = run / f"step-{step}"
    tmp = run / f"step-{step}.tmp"
    if d.is_main:
        run.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    distributed.barrier()
    model_sd, optim_sd = get_state_dict(model, optim)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.save({"model": model_sd, "optim": optim_sd["state"]}, checkpoint_id=str(tmp))
    (tmp / f"rng-rank{d.rank}.json").write_text(json.dumps(_rng_state()))
    distributed.barrier()
    if d.is_main:
        groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()}
                  for g in optim_sd["param_groups"]]
        meta = dict(extra, format=FORMAT, step=step, world_size=d.world_size, param_groups=groups)
        with open(tmp / "extra.json", "w") as f:
            f.write(json.dumps(meta, indent=1, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():  # re-saving the same step (e.g. step 0 after a restart): replace it
            old = run / f"step-{step}.old"
            if old.exists():
                shutil.rmtree(old)
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old)
        else:
            os.rename(tmp, final)
        _fsync_dir(run)
    distributed.barrier()
    return final


def read_extra(ckpt: str | Path) -> dict:
    p = Path(ckpt) / "extra.json"
    try:
        meta = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p}: cannot read checkpoint metadata: {exc}") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{p}: format {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def load(ckpt: str | Path, model, optim, d: distributed.Dist) -> dict:
    """Restore model, optimizer state and this rank's RNG from ``ckpt``; return ``extra.json``.

    The checkpoint may have been written with a different world size or DDP/FSDP2
    (DCP reshards); RNG states then fall back to rank 0's.
    """
    ckpt = Path(ckpt)
    meta = read_extra(ckpt)
    SafeReader(str(ckpt)).read_metadata()  # refuse unsafe metadata with our own clear error first
    model_sd, optim_sd = get_state_dict(model, optim)
    state = {"model": model_sd, "optim": optim_sd["state"]}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load(state, storage_reader=SafeReader(str(ckpt)))
    groups = meta["param_groups"]
    if len(groups) != len(optim_sd["param_groups"]):
        raise ValueError(f"{ckpt}: {len(groups)} param groups, optimizer has {len(optim_sd['param_groups'])}")
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    optim_sd["param_groups"] = groups
    set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=optim_sd)
    rng_file = ckpt / f"rng-rank{d.rank}.json"
    if not rng_file.exists():
        rng_file = ckpt / "rng-rank0.json"
    _set_rng_state(json.loads(rng_file.read_text()))
    return meta


def load_model_weights(ckpt: str | Path, model: torch.nn.Module) -> dict:
    """Load only the model tensors into a plain (unwrapped) module, single process; return extra."""
    meta = read_extra(ckpt)
    SafeReader(str(ckpt)).read_metadata()  # refuse unsafe metadata with our own clear error first
    sd = model.state_dict()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load({"model": sd}, storage_reader=SafeReader(str(ckpt)), no_dist=True)
    model.load_state_dict(sd)
    return meta
