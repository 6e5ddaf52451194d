"""Token data: uint16 memmaps ``train.bin`` / ``val.bin`` + ``meta.json``, and the batch stream.

Two producers, one format (EOT between documents, little-endian uint16):

* :func:`prepare_offline` (CI, laptops): English text that ships with Python
  (``pydoc_data.topics``; optionally the standard-library sources) with a
  byte-level tiktoken Encoding (256 byte tokens + ``<|endoftext|>`` = 256).
* :func:`prepare_hf` (clusters): tiktoken ``gpt2`` over a parquet web-text
  corpus of :data:`CORPORA` (default FineWeb ``sample-10BT``) through
  :func:`prepare_parquet`: ``datasets.load_dataset("parquet")``, batched
  ``datasets.map``, uint16 shards with a sha256 manifest, resumable after a
  crash, then concatenated into the format above.  The Hub part needs
  network; :func:`prepare_parquet` itself is tested offline on a local file.

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
import shutil
import sys
import time
from dataclasses import dataclass
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


# --------------------------------------------------------------------------------------------
# Web-text corpora (clusters): parquet -> resumable uint16 shards -> train.bin / val.bin
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Corpus:
    """A parquet corpus on the Hugging Face Hub: the one place that names what the 774M runs read.

    ``revision`` may be a branch or tag: preparation resolves it to a commit sha once,
    records that sha (and the resolved file list) in ``manifest.json`` and reads every
    file at that commit, so a resumed or repeated preparation sees the same bytes.
    """

    repo: str
    revision: str
    data_files: str  # glob inside the repository at that revision
    text_column: str = "text"
    note: str = ""


CORPORA: dict[str, Corpus] = {
    # Parquet-native; the config ``sample-10BT`` of the dataset card is exactly these files.
    # About 10 B GPT-2 tokens: enough for 10 000 updates x 524 288 tokens (5.2 B) without
    # repeating a document.  The corpus of the public 774M recipe (llm.c) that config.py follows.
    "fineweb-10bt": Corpus("HuggingFaceFW/fineweb", "main", "sample/10BT/*.parquet",
                           note="FineWeb, config sample-10BT"),
    # The Hub's automatic parquet conversion of the script dataset.  The converter stops at
    # about 5 GB per split for large datasets (files under ``partial-train/``), i.e. only part
    # of OpenWebText's ~9 B tokens; preparation refuses such a partial conversion unless
    # ``allow_partial=True``.
    "openwebtext": Corpus("Skylion007/openwebtext", "refs/convert/parquet", "plain_text/*/*.parquet",
                          note="OpenWebText, auto-converted parquet (refs/convert/parquet)"),
}
DEFAULT_CORPUS = "fineweb-10bt"
VAL_DOCS = 4096        # our choice: held-out documents (val.bin), chosen by a fixed seed
VAL_SEED = 20240601    # our choice, fixed before any run
DOCS_PER_SHARD = 250_000  # ~ 0.2-0.3 B GPT-2 tokens, 0.4-0.6 GB per shard
MANIFEST_FORMAT = 1


def get_encoding(name: str):
    """``gpt2`` (tiktoken, downloads its BPE files once into TIKTOKEN_CACHE_DIR) or ``bytes257``."""
    if name == "bytes257":
        return byte_encoding()
    import tiktoken

    return tiktoken.get_encoding(name)


class _Tokenize:
    """Batched ``datasets.map`` function: text -> uint16 ids + EOT per document.

    Picklable (the encoding is rebuilt in each worker), and it never holds more than one
    batch of Python ints.
    """

    def __init__(self, encoding: str, text_column: str):
        self.encoding, self.text_column = encoding, text_column
        self._enc = None

    def __getstate__(self):
        return {"encoding": self.encoding, "text_column": self.text_column}

    def __setstate__(self, state):
        self.__init__(**state)

    def __call__(self, batch):
        if self._enc is None:
            self._enc = get_encoding(self.encoding)
        enc = self._enc
        eot = enc.eot_token
        out = []
        for text in batch[self.text_column]:
            ids = enc.encode_ordinary(text or "")
            a = np.empty(len(ids) + 1, dtype=np.uint16)
            a[:-1] = ids
            a[-1] = eot
            out.append(a)
        return {"ids": out}


class _Progress:
    """A tqdm bar over shards on a terminal; plain ``[prepare] ...`` lines otherwise (logs, Slurm)."""

    def __init__(self, total: int, done: int, desc: str):
        self.total, self.done, self.tokens, self.t0 = total, done, 0, time.time()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=desc, unit="shard", dynamic_ncols=True)

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(f"[prepare] {text}", file=sys.stderr)
        else:
            print(f"[prepare] {text}", file=sys.stderr, flush=True)

    def shard(self, name: str, docs: int, tokens: int) -> None:
        self.done += 1
        self.tokens += tokens
        rate = self.tokens / max(time.time() - self.t0, 1e-9) / 1e6
        if self.bar is not None:
            self.bar.set_postfix_str(f"{name} {tokens:,} tok, {rate:.2f} M tok/s")
            self.bar.update(1)
        else:
            self.note(f"{name}: {docs:,} docs, {tokens:,} tokens "
                      f"({self.done}/{self.total} shards, {rate:.2f} M tok/s)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _sha256_file(path: Path, chunk: int = 1 << 24) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def _shard_names(plan: dict) -> list[str]:
    n_train = -(-plan["n_docs"] // plan["docs_per_shard"])
    return ["val-00000"] + [f"train-{i:05d}" for i in range(n_train)]


def _shard_docs(plan: dict, name: str, val_idx: np.ndarray) -> np.ndarray:
    """Corpus row indices of a shard: the held-out rows, or one contiguous range minus them."""
    if name.startswith("val-"):
        return val_idx
    i = int(name.split("-")[1])
    d = plan["docs_per_shard"]
    rows = np.arange(i * d, min((i + 1) * d, plan["n_docs"]), dtype=np.int64)
    return np.setdiff1d(rows, val_idx, assume_unique=True)


def _val_indices(n_docs: int, val_docs: int, seed: int) -> np.ndarray:
    if not 0 < val_docs < n_docs:
        raise ValueError(f"val_docs={val_docs} must be in (0, {n_docs}) for a corpus of {n_docs} documents")
    return np.sort(np.random.default_rng(seed).choice(n_docs, size=val_docs, replace=False)).astype(np.int64)


def _load_manifest(out: Path, plan: dict, report: _Progress | None) -> dict:
    """The manifest of ``out`` for ``plan``; shards whose file is missing, short or changed are dropped.

    Leftovers of an interrupted run (``*.tmp``, shard files the manifest does not list, the
    tokeniser's scratch files) are deleted: only a shard renamed into place *and* recorded with
    its sha256 counts as complete.
    """
    mpath = out / "manifest.json"
    if mpath.exists():
        man = json.loads(mpath.read_text())
        if man.get("plan") != plan:
            old = man.get("plan") or {}
            diff = sorted(k for k in set(old) | set(plan) if old.get(k) != plan.get(k))
            raise ValueError(f"{out}: holds a preparation with a different plan (differs in {diff}); "
                             "use another --out folder or delete this one")
    else:
        if (out / "meta.json").exists():
            raise ValueError(f"{out}: holds data prepared some other way (meta.json without manifest.json); "
                             "use another --out folder or delete this one")
        man = {"format": MANIFEST_FORMAT, "plan": plan, "shards": {}, "complete": False}
    sdir = out / "shards"
    sdir.mkdir(exist_ok=True)
    shutil.rmtree(out / "work", ignore_errors=True)
    for p in sdir.iterdir():
        if p.name.endswith(".tmp") or p.stem not in man["shards"]:
            p.unlink()
    if man["complete"]:
        raise ValueError(f"{out}: manifest.json says complete but meta.json is missing; delete the folder "
                         "and prepare again")
    for name, ent in sorted(man["shards"].items()):
        p = sdir / f"{name}.bin"
        why = None
        if not p.exists():
            why = "missing"
        elif p.stat().st_size != 2 * ent["tokens"]:
            why = f"{p.stat().st_size} bytes, manifest says {2 * ent['tokens']}"
        elif _sha256_file(p) != ent["sha256"]:
            why = "sha256 differs from the manifest"
        if why:
            if report:
                report.note(f"shard {name}: {why}; preparing it again")
            del man["shards"][name]
            p.unlink(missing_ok=True)
    _write_json_atomic(mpath, man)
    return man


def _list_feature(datasets):
    return getattr(datasets, "List", None) or datasets.Sequence  # List: datasets >= 4


def _write_shard(ds, out: Path, name: str, rows: np.ndarray, plan: dict, num_proc: int,
                 on_event=None) -> dict:
    """Tokenise ``rows`` of ``ds`` and write them to ``shards/NAME.bin`` (via ``NAME.bin.tmp``)."""
    import datasets

    final = out / "shards" / f"{name}.bin"
    if not len(rows):  # only when held-out rows fill a whole shard (tiny corpora)
        final.write_bytes(b"")
        return {"docs": 0, "tokens": 0, "sha256": hashlib.sha256().hexdigest(), "rows": [0, 0]}
    work = out / "work"
    work.mkdir(exist_ok=True)
    piece = ds.select(rows, keep_in_memory=True)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # one bar over shards is enough
    try:
        tok = piece.map(_Tokenize(plan["tokenizer"], plan["text_column"]), batched=True, batch_size=256,
                        remove_columns=piece.column_names, num_proc=num_proc if num_proc > 1 else None,
                        features=datasets.Features({"ids": _list_feature(datasets)(datasets.Value("uint16"))}),
                        cache_file_name=str(work / f"{name}.arrow"), load_from_cache_file=False,
                        new_fingerprint=f"{name}-{len(rows)}", writer_batch_size=256)
    finally:
        if bars:
            datasets.enable_progress_bars()
    tmp = final.with_name(final.name + ".tmp")
    h = hashlib.sha256()
    tokens = docs = 0
    with open(tmp, "wb") as f:
        for chunk in tok.data.table.column("ids").chunks:
            arr = np.ascontiguousarray(chunk.flatten().to_numpy(zero_copy_only=False), dtype="<u2")
            f.write(memoryview(arr))
            h.update(memoryview(arr))
            tokens += len(arr)
            docs += len(chunk)
            if on_event:
                on_event({"event": "batch", "shard": name, "tokens": tokens})
        f.flush()
        os.fsync(f.fileno())
    del tok, piece
    shutil.rmtree(work, ignore_errors=True)
    if docs != len(rows):
        raise RuntimeError(f"shard {name}: tokenised {docs} documents, expected {len(rows)}")
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    return {"docs": docs, "tokens": tokens, "sha256": h.hexdigest(), "rows": [int(rows[0]), int(rows[-1]) + 1]}


def _assemble(out: Path, man: dict, names: list[str], split: str, report: _Progress | None) -> bool:
    """Concatenate the shards of ``split`` into ``split.bin`` (via a temp name), checking each hash.

    Returns False (and forgets the shard) when a shard no longer matches its manifest hash.
    """
    target = out / f"{split}.bin"
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as f:
        for name in names:
            ent = man["shards"][name]
            h = hashlib.sha256()
            with open(out / "shards" / f"{name}.bin", "rb") as src:
                while b := src.read(1 << 24):
                    h.update(b)
                    f.write(b)
            if h.hexdigest() != ent["sha256"]:
                if report:
                    report.note(f"shard {name}: sha256 changed on disk since it was written; preparing it again")
                del man["shards"][name]
                (out / "shards" / f"{name}.bin").unlink(missing_ok=True)
                f.close()
                tmp.unlink()
                return False
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return True


def prepare_parquet(out_dir: str | Path, data_files, *, source: str | None = None,
                    revision: str | None = None, text_column: str = "text", encoding: str = "gpt2",
                    val_docs: int = VAL_DOCS, val_seed: int = VAL_SEED,
                    docs_per_shard: int = DOCS_PER_SHARD, num_proc: int = 8,
                    keep_shards: bool = False, on_event=None) -> dict:
    """Tokenise parquet files (local paths or ``hf://`` URLs) into ``train.bin``/``val.bin``/``meta.json``.

    The files are read with ``datasets.load_dataset("parquet", data_files=...)`` (an Arrow copy of
    the text column lands in the HF datasets cache), tokenised in batches by ``datasets.map``
    (``num_proc`` processes) and written as uint16 shards of ``docs_per_shard`` corpus rows
    under ``OUT/shards/``: each to ``NAME.bin.tmp``, fsynced, renamed, then recorded with its
    token count and sha256 in ``OUT/manifest.json`` (written atomically).  Running it again
    resumes: recorded shards are re-hashed and kept, anything else is redone.  ``val_docs``
    rows chosen with ``val_seed`` are held out (whole documents) into ``val.bin``.  Finally the
    shards are concatenated (hashes checked again) into the single-memmap format that
    :func:`load_tokens` reads, ``meta.json`` is written last, and the shards are deleted unless
    ``keep_shards``.  Peak memory is one tokeniser batch per process plus one Arrow chunk;
    peak disk is twice ``train.bin`` (shards + assembled file) plus the HF cache.

    ``on_event(dict)`` is called after each written chunk and each finished shard (tests use
    it to kill the process at a known point).
    """
    try:
        import datasets
    except ImportError:
        raise SystemExit("preparing web text needs the 'datasets' and 'pyarrow' packages: "
                         "pip install 'datasets>=4' pyarrow") from None

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [str(data_files)] if isinstance(data_files, (str, Path)) else [str(f) for f in data_files]
    lock = open(out / ".lock", "w")
    try:
        import errno
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by the kernel when the process dies
    except ImportError:  # pragma: no cover - not POSIX
        pass
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            lock.close()
            raise RuntimeError(f"{out}: another preparation is running on this folder") from None
        # e.g. ENOLCK on some network file systems: go on without the lock
    try:
        mpath = out / "manifest.json"
        plan = {"source": source or "parquet", "revision": revision, "data_files": files,
                "text_column": text_column, "tokenizer": encoding, "val_docs": val_docs,
                "val_seed": val_seed, "docs_per_shard": docs_per_shard}
        if mpath.exists() and (out / "meta.json").exists():
            man = json.loads(mpath.read_text())
            if man.get("complete"):
                old = man.get("plan") or {}
                diff = sorted(k for k in plan if old.get(k) != plan[k])
                if diff:
                    raise ValueError(f"{out}: holds a preparation with a different plan (differs in {diff}); "
                                     "use another --out folder or delete this one")
                if not keep_shards:  # in case the last run stopped just before deleting them
                    shutil.rmtree(out / "shards", ignore_errors=True)
                shutil.rmtree(out / "work", ignore_errors=True)
                return read_meta(out)

        enc = get_encoding(encoding)
        if enc.n_vocab > 2 ** 16:
            raise ValueError(f"encoding {encoding}: {enc.n_vocab} tokens do not fit uint16")
        ds = datasets.load_dataset("parquet", data_files=files, split="train", columns=[text_column],
                                   num_proc=num_proc if num_proc > 1 and len(files) > 1 else None)
        plan.update(vocab_size=enc.n_vocab, eot=enc.eot_token, n_docs=ds.num_rows)
        val_idx = _val_indices(ds.num_rows, val_docs, val_seed)
        names = _shard_names(plan)
        report = _Progress(len(names), 0, f"prepare {out.name}")
        try:
            for _attempt in range(3):
                man = _load_manifest(out, plan, report)
                report.done = sum(n in man["shards"] for n in names)
                if report.bar is not None:
                    report.bar.n = report.done
                    report.bar.refresh()
                if report.done:
                    report.note(f"resuming: {report.done}/{len(names)} shards already complete")
                for name in names:
                    if name in man["shards"]:
                        continue
                    ent = _write_shard(ds, out, name, _shard_docs(plan, name, val_idx), plan, num_proc, on_event)
                    man["shards"][name] = ent
                    _write_json_atomic(mpath, man)
                    report.shard(name, ent["docs"], ent["tokens"])
                    if on_event:
                        on_event({"event": "shard", "shard": name, **ent})
                train_names = [n for n in names if n.startswith("train-")]
                if _assemble(out, man, ["val-00000"], "val", report) and \
                        _assemble(out, man, train_names, "train", report):
                    break
                _write_json_atomic(mpath, man)
            else:
                raise RuntimeError(f"{out}: shards keep changing on disk; check the file system")
        finally:
            report.close()
        sh = man["shards"]
        meta = {"tokenizer": encoding, "vocab_size": enc.n_vocab, "eot": enc.eot_token, "dtype": "uint16",
                "source": plan["source"], "revision": revision, "n_docs": plan["n_docs"],
                "train_tokens": sum(sh[n]["tokens"] for n in train_names),
                "val_tokens": sh["val-00000"]["tokens"],
                "train_docs": sum(sh[n]["docs"] for n in train_names), "val_docs": sh["val-00000"]["docs"],
                "manifest": "manifest.json"}
        _write_json_atomic(out / "meta.json", meta)
        man["complete"] = True
        man["val_rows"] = val_idx.tolist()
        _write_json_atomic(mpath, man)
        if not keep_shards:
            shutil.rmtree(out / "shards", ignore_errors=True)
        return meta
    finally:
        lock.close()


def verify_prepared(data_dir: str | Path) -> list[str]:
    """Re-hash ``train.bin``/``val.bin`` shard by shard against ``manifest.json``; [] when intact."""
    d = Path(data_dir)
    man = json.loads((d / "manifest.json").read_text())
    names = _shard_names(man["plan"])
    problems = []
    for split, parts in (("val", names[:1]), ("train", names[1:])):
        p = d / f"{split}.bin"
        want = 2 * sum(man["shards"][n]["tokens"] for n in parts if n in man["shards"])
        if not p.exists() or p.stat().st_size != want:
            problems.append(f"{p}: {p.stat().st_size if p.exists() else 'missing'}, manifest says {want} bytes")
            continue
        with open(p, "rb") as f:
            for n in parts:
                ent = man["shards"][n]
                h = hashlib.sha256()
                left = 2 * ent["tokens"]
                while left:
                    b = f.read(min(left, 1 << 24))
                    h.update(b)
                    left -= len(b)
                if h.hexdigest() != ent["sha256"]:
                    problems.append(f"{p}: shard {n} differs from its manifest hash")
    return problems


def resolve_corpus(name: str, revision: str | None = None, allow_partial: bool = False
                   ) -> tuple[str, str, list[str], Corpus]:
    """(corpus key, commit sha, ``hf://`` file URLs at that sha, Corpus) for a key or repo id of :data:`CORPORA`."""
    key = name if name in CORPORA else next((k for k, c in CORPORA.items() if c.repo == name), None)
    if key is None:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)} "
                         f"(or call prepare_parquet with your own parquet files)")
    c = CORPORA[key]
    from fnmatch import fnmatch

    from huggingface_hub import HfApi

    api = HfApi()
    sha = api.dataset_info(c.repo, revision=revision or c.revision).sha
    paths = sorted(p for p in api.list_repo_files(c.repo, repo_type="dataset", revision=sha)
                   if fnmatch(p, c.data_files))
    if not paths:
        raise ValueError(f"{c.repo}@{sha}: no files match {c.data_files!r}")
    partial = [p for p in paths if "/partial-" in p]
    if partial and not allow_partial:
        raise ValueError(f"{c.repo}@{revision or c.revision}: only a partial parquet conversion exists "
                         f"({partial[0]}, ...): the Hub converts about the first 5 GB of a large script "
                         f"dataset.  Use --dataset {DEFAULT_CORPUS} or pass allow_partial=True.")
    return key, sha, [f"hf://datasets/{c.repo}@{sha}/{p}" for p in paths], c


def prepare_hf(out_dir: str | Path, dataset: str = DEFAULT_CORPUS, num_proc: int = 8,
               revision: str | None = None, val_docs: int = VAL_DOCS,
               docs_per_shard: int = DOCS_PER_SHARD, allow_partial: bool = False,
               keep_shards: bool = False) -> dict:  # pragma: no cover - cluster only
    """Tokenise a corpus of :data:`CORPORA` with tiktoken ``gpt2`` (needs network and the cluster extra).

    ``dataset``: a key of :data:`CORPORA` or its repository id.  The branch is resolved to a
    commit once; a resumed preparation reuses the commit and file list in ``manifest.json``.
    """
    out = Path(out_dir)
    mpath = out / "manifest.json"
    prev = json.loads(mpath.read_text())["plan"] if mpath.exists() else None
    key = dataset if dataset in CORPORA else next((k for k, c in CORPORA.items() if c.repo == dataset), dataset)
    if prev and prev.get("source") == key and (revision is None or revision == prev.get("revision")):
        sha, files, corpus = prev["revision"], prev["data_files"], CORPORA[key]
    else:
        key, sha, files, corpus = resolve_corpus(dataset, revision, allow_partial)
    return prepare_parquet(out, files, source=key, revision=sha, text_column=corpus.text_column,
                           encoding="gpt2", val_docs=val_docs, docs_per_shard=docs_per_shard,
                           num_proc=num_proc, keep_shards=keep_shards)


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
