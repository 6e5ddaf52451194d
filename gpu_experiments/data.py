"""Token data: uint16 memmaps ``train.bin`` / ``val.bin`` + ``meta.json``, and the batch stream.

Two producers, one format (EOT between documents, little-endian uint16):

* :func:`prepare_offline` (CI, laptops): English text that ships with Python
  (``pydoc_data.topics``; optionally the standard-library sources) with a
  byte-level tiktoken Encoding (256 byte tokens + ``<|endoftext|>`` = 256).
* :func:`prepare_hf` (clusters): tiktoken ``gpt2`` over a public web-text
  corpus through HF ``datasets`` (default ``Skylion007/openwebtext``).  Real
  code, not run in CI (needs network and ``pip install datasets``).

Held-out split: whole documents go to ``val.bin`` (never seen in training);
the probe batch comes from there.

The stream (:class:`TokenStream`) cuts ``train.bin`` into non-overlapping
windows of ``block_size + 1`` tokens, visits them in a seeded permutation per
epoch and is addressed by a *cursor* = number of windows consumed globally, so
a checkpoint stores one integer and resume is exact.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

EOT_BYTE_LEVEL = 256


def byte_encoding():
    """A tiktoken Encoding with one token per byte and ``<|endoftext|>`` = 256 (no merges)."""
    import tiktoken

    return tiktoken.Encoding(
        name="bytes257",
        pat_str=r"[\s\S]+",  # one piece per text: there are no merges to respect boundaries for
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={"<|endoftext|>": EOT_BYTE_LEVEL},
    )


def offline_documents(include_stdlib: bool = False) -> list[tuple[str, str]]:
    """(name, text) pairs in a fixed order: pydoc topics, then optionally stdlib ``*.py`` files."""
    from pydoc_data.topics import topics

    docs = [(f"pydoc:{k}", topics[k]) for k in sorted(topics)]
    if include_stdlib:
        root = Path(os.__file__).parent
        for p in sorted(root.glob("*.py")):
            docs.append((f"stdlib:{p.name}", p.read_text(encoding="utf-8", errors="replace")))
    return docs


def _split(names: list[str], val_fraction: float) -> list[bool]:
    """Deterministic held-out choice per document (by name hash), so the split never depends on order."""
    out = []
    for n in names:
        h = int.from_bytes(hashlib.sha256(n.encode()).digest()[:8], "little")
        out.append(h / 2**64 < val_fraction)
    return out


def _write_bin(path: Path, chunks: list[np.ndarray]) -> int:
    n = int(sum(len(c) for c in chunks))
    tmp = path.with_suffix(".bin.tmp")
    arr = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(max(n, 1),))
    i = 0
    for c in chunks:
        arr[i:i + len(c)] = c
        i += len(c)
    arr.flush()
    del arr
    os.replace(tmp, path)
    return n


def _encode_docs(enc, eot: int, texts) -> np.ndarray:
    ids = enc.encode_ordinary(texts)
    return np.array(ids + [eot], dtype=np.uint16)


def prepare_offline(out_dir: str | Path, val_fraction: float = 0.1,
                    include_stdlib: bool = False) -> dict:
    """Write ``train.bin``, ``val.bin``, ``meta.json`` from Python's own text.  Deterministic."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    enc = byte_encoding()
    docs = offline_documents(include_stdlib)
    held = _split([n for n, _ in docs], val_fraction)
    train = [_encode_docs(enc, EOT_BYTE_LEVEL, t) for (n, t), h in zip(docs, held) if not h]
    val = [_encode_docs(enc, EOT_BYTE_LEVEL, t) for (n, t), h in zip(docs, held) if h]
    meta = {"tokenizer": "bytes257", "vocab_size": 257, "eot": EOT_BYTE_LEVEL, "dtype": "uint16",
            "source": "pydoc_data.topics" + ("+stdlib" if include_stdlib else ""),
            "python": sys.version.split()[0],
            "train_tokens": _write_bin(out / "train.bin", train),
            "val_tokens": _write_bin(out / "val.bin", val),
            "train_docs": len(train), "val_docs": len(val)}
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return meta


def prepare_hf(out_dir: str | Path, dataset: str = "Skylion007/openwebtext",
               val_fraction: float = 0.0005, num_proc: int = 8) -> dict:  # pragma: no cover - cluster only
    """Tokenise a HF web-text corpus with tiktoken ``gpt2`` into the same memmap format.

    Not run in CI: needs network and ``pip install datasets``.  Documents are split
    by the same name-hash rule as offline data (name = dataset row index).
    """
    try:
        import datasets
    except ImportError:
        raise SystemExit("prepare --source hf needs the 'datasets' package: pip install datasets")
    import tiktoken

    enc = tiktoken.get_encoding("gpt2")
    eot = enc.eot_token
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ds = datasets.load_dataset(dataset, split="train", num_proc=num_proc)
    ds = ds.map(lambda row, i: {"ids": enc.encode_ordinary(row["text"]) + [eot],
                                "held": _split([f"{dataset}:{i}"], val_fraction)[0]},
                with_indices=True, remove_columns=ds.column_names, num_proc=num_proc)
    meta = {"tokenizer": "gpt2", "vocab_size": enc.n_vocab, "eot": eot, "dtype": "uint16",
            "source": dataset}
    for split, want in (("train", False), ("val", True)):
        part = ds.filter(lambda r: r["held"] == want, num_proc=num_proc)
        lengths = np.array([len(x) for x in part["ids"]], dtype=np.int64)
        n = int(lengths.sum())
        tmp = out / f"{split}.bin.tmp"
        arr = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(n,))
        i = 0
        for shard in range(1024):  # write in shards to bound memory
            piece = part.shard(num_shards=1024, index=shard, contiguous=True)
            if len(piece):
                ids = np.concatenate([np.asarray(x, dtype=np.uint16) for x in piece["ids"]])
                arr[i:i + len(ids)] = ids
                i += len(ids)
        arr.flush()
        del arr
        os.replace(tmp, out / f"{split}.bin")
        meta[f"{split}_tokens"] = n
    (out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return meta


def read_meta(data_dir: str | Path) -> dict:
    p = Path(data_dir) / "meta.json"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no prepared data; run `python -m gpu_experiments prepare`")
    return json.loads(p.read_text())


def ensure_offline(data_dir: str | Path) -> dict:
    """Prepare offline data if missing (cheap: a few seconds); return meta."""
    if not (Path(data_dir) / "meta.json").exists():
        return prepare_offline(data_dir)
    return read_meta(data_dir)


def load_tokens(data_dir: str | Path, split: str) -> np.memmap:
    p = Path(data_dir) / f"{split}.bin"
    if not p.exists():
        raise FileNotFoundError(f"{p}: missing; run `python -m gpu_experiments prepare`")
    return np.memmap(p, dtype=np.uint16, mode="r")


class TokenStream:
    """Windows of ``block_size + 1`` tokens in a seeded per-epoch permutation, addressed by cursor."""

    def __init__(self, tokens: np.ndarray, block_size: int, seed: int):
        self.tokens = tokens
        self.block_size = block_size
        self.seed = seed
        self.n_windows = (len(tokens) - 1) // block_size
        if self.n_windows < 1:
            raise ValueError(f"only {len(tokens)} tokens: fewer than one window of {block_size + 1}")
        self._perm_epoch = -1
        self._perm = None

    def _window(self, g: int) -> int:
        epoch, j = divmod(g, self.n_windows)
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_windows)
            self._perm_epoch = epoch
        return int(self._perm[j])

    def batch(self, cursor: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets (n, block_size) int64 for global windows cursor .. cursor+n-1."""
        T = self.block_size
        rows = [self.tokens[w * T: w * T + T + 1] for w in (self._window(cursor + i) for i in range(n))]
        buf = np.stack(rows).astype(np.int64)
        return np.ascontiguousarray(buf[:, :-1]), np.ascontiguousarray(buf[:, 1:])


def probe_batch(data_dir: str | Path, n: int, block_size: int, seed: int) -> np.ndarray:
    """The fixed held-out probe batch: ``n`` windows of ``block_size`` tokens from ``val.bin``."""
    val = load_tokens(data_dir, "val")
    if len(val) < block_size:
        raise ValueError(f"{data_dir}/val.bin: {len(val)} tokens < block_size {block_size}")
    starts = np.random.default_rng([seed, 7]).choice(len(val) - block_size + 1, size=n, replace=n > len(val) - block_size + 1)
    return np.stack([val[s:s + block_size] for s in sorted(starts)]).astype(np.int64)
