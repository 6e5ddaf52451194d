"""Web-text preparation (``data.prepare_parquet``), offline: parquet -> datasets -> uint16 shards.

The cluster reads FineWeb/OpenWebText parquet from the Hub (``data.prepare_hf``); here the same
code reads a local parquet file of ~24 MB of Python's own documentation (``pydoc_data.topics``,
repeated and shuffled), through ``datasets.load_dataset("parquet", data_files=...)``, in a
subprocess whose address space (RLIMIT_AS) leaves less room than a Python list of all token
ids would need.  Tokeniser: the byte-level ``bytes257`` (the GPT-2 BPE files need network).
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("the memory limit is measured through /proc and RLIMIT_AS (Linux)", allow_module_level=True)
pytest.importorskip("datasets", reason="web-text preparation needs `datasets` (pip install datasets pyarrow)")
pytest.importorskip("pyarrow", reason="web-text preparation needs `pyarrow` (pip install datasets pyarrow)")

from gpu_experiments import data  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS_PER_SHARD = 600   # ~7 train shards
VAL_DOCS = 40
EOT = data.EOT_BYTE_LEVEL

# Runs data.prepare_parquet under RLIMIT_AS = (address space after imports) + HEADROOM bytes.
# RLIMIT_AS counts reserved address space, not memory: glibc's per-thread malloc arenas
# (64 MB each), Arrow's jemalloc/mimalloc reservations and 8 MB thread stacks would dominate,
# so the test uses glibc's main arena, Arrow's system allocator and 2 MB stacks (re-exec).
DRIVER = r"""
import json, os, resource, signal, sys
STACK = 2 << 20
soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
if soft == resource.RLIM_INFINITY or soft > STACK:
    resource.setrlimit(resource.RLIMIT_STACK, (STACK, hard))
    os.execv(sys.executable, [sys.executable] + sys.argv)   # thread stacks follow RLIMIT_STACK at exec
args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])
import numpy, pyarrow, pyarrow.parquet, datasets, tiktoken  # noqa: F401  (all imports before the limit)
from gpu_experiments import data

def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

limit = vm_bytes() + args["headroom"]
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    ids = [0] * args["n_tokens"]    # one pointer per token id: the least a Python list of them takes
    control = "fits"
    del ids
except MemoryError:
    control = "MemoryError"
print(json.dumps({"control": control}), flush=True)

def on_event(e):
    if args.get("kill_at") == [e["event"], e["shard"]]:
        os.kill(os.getpid(), signal.SIGKILL)   # no cleanup, no finally: like a node failure

try:
    meta = data.prepare_parquet(args["out"], args["files"], encoding="bytes257", val_docs=args["val_docs"],
                                docs_per_shard=args["docs_per_shard"], num_proc=2, on_event=on_event)
except ValueError as exc:
    print(json.dumps({"error": str(exc)}), flush=True)
    sys.exit(3)
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmPeak:"))
print(json.dumps({"peak_over_base": peak - (limit - args["headroom"]), "headroom": args["headroom"]}))
print(json.dumps({"meta": meta}), flush=True)
"""


def _documents() -> list[str]:
    from pydoc_data.topics import topics

    rng = random.Random(7)
    keys = sorted(topics)
    docs = []
    for r in range(51):  # ~24 MB
        rng.shuffle(keys)
        docs += [f"[{r}:{k}] {topics[k]}" for k in keys]
    docs[5] = "Grüße, λ → ∞ — non-ASCII survives\n" + docs[5]
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("corpus")
    docs = _documents()
    path = d / "docs.parquet"
    pq.write_table(pa.table({"text": docs, "id": list(range(len(docs)))}), path, row_group_size=500)
    n_tokens = sum(len(t.encode("utf-8")) + 1 for t in docs)
    (d / "driver.py").write_text(DRIVER)
    return {"path": str(path), "docs": docs, "n_tokens": n_tokens, "hf_home": str(d / "hf"),
            "driver": str(d / "driver.py")}


def _run(corpus, out: Path, kill_at=None, val_docs=VAL_DOCS) -> subprocess.CompletedProcess:
    args = {"root": str(ROOT), "out": str(out), "files": [corpus["path"]], "n_tokens": corpus["n_tokens"],
            # 7 bytes per token: less than the 8 B per id that a list of Python ints needs at the least
            # (checked first: "control"); the preparation peaks at 3.5-4.5 B/token here, mostly pyarrow
            # reading parquet and the memory-mapped Arrow copy of the text, none of it per token id
            "headroom": 7 * corpus["n_tokens"], "val_docs": val_docs, "docs_per_shard": DOCS_PER_SHARD,
            "kill_at": kill_at}
    env = dict(os.environ, HF_HOME=corpus["hf_home"], HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               MALLOC_ARENA_MAX="1", ARROW_DEFAULT_MEMORY_POOL="system", TOKENIZERS_PARALLELISM="false")
    p = subprocess.run([sys.executable, corpus["driver"], json.dumps(args)], env=env, capture_output=True,
                       text=True, timeout=300)
    first = p.stdout.splitlines()[0] if p.stdout else "{}"
    assert json.loads(first).get("control") == "MemoryError", (p.stdout, p.stderr[-3000:])
    return p


def _ok(p):
    assert p.returncode == 0, (p.stdout, p.stderr[-4000:])
    return json.loads(p.stdout.splitlines()[-1])["meta"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """One uninterrupted preparation (also the first, cache-filling load_dataset) under the limit."""
    out = tmp_path_factory.mktemp("ref") / "data"
    p = _run(corpus, out)
    return {"out": out, "meta": _ok(p), "stderr": p.stderr}


@pytest.fixture(scope="module")
def interrupted(corpus, tmp_path_factory):
    """A preparation SIGKILLed after the first train shard, while the second one is half written."""
    out = tmp_path_factory.mktemp("killed") / "data"
    p = _run(corpus, out, kill_at=["batch", "train-00001"])
    assert p.returncode == -9, (p.returncode, p.stderr[-3000:])
    return out


def _expected(docs, rows) -> np.ndarray:
    parts = []
    for i in rows:
        parts.append(np.frombuffer(docs[i].encode("utf-8"), dtype=np.uint8).astype(np.uint16))
        parts.append(np.array([EOT], dtype=np.uint16))
    return np.concatenate(parts)


def test_tokens_round_trip_in_order_with_held_out_documents(corpus, reference):
    out, meta, docs = reference["out"], reference["meta"], corpus["docs"]
    man = json.loads((out / "manifest.json").read_text())
    val_rows = man["val_rows"]
    train_rows = [i for i in range(len(docs)) if i not in set(val_rows)]
    assert len(val_rows) == VAL_DOCS == meta["val_docs"] and meta["train_docs"] == len(docs) - VAL_DOCS
    train, val = data.load_tokens(out, "train"), data.load_tokens(out, "val")
    assert np.array_equal(train, _expected(docs, train_rows))  # documents in corpus order, EOT after each
    assert np.array_equal(val, _expected(docs, val_rows))
    assert len(train) == meta["train_tokens"] and len(val) == meta["val_tokens"]
    assert len(train) + len(val) == corpus["n_tokens"]
    enc = data.byte_encoding()
    first = train[: np.flatnonzero(train == EOT)[1] + 1].tolist()
    assert enc.decode(first) == f"{docs[train_rows[0]]}<|endoftext|>{docs[train_rows[1]]}<|endoftext|>"
    assert "Grüße, λ → ∞" in enc.decode(_expected(docs, [5]).tolist())
    # train.py's reader and probe see the usual format
    assert data.read_meta(out)["vocab_size"] == 257
    assert data.probe_batch(out, 2, 64, seed=1).shape == (2, 64)
    # shards were folded into train.bin and removed; the manifest keeps their counts and hashes
    assert not (out / "shards").exists() and man["complete"]
    assert len(man["shards"]) == 1 + -(-len(docs) // DOCS_PER_SHARD)
    assert data.verify_prepared(out) == []
    # plain progress lines when stderr is not a terminal
    assert "[prepare] train-00000:" in reference["stderr"]


def test_interrupted_preparation_resumes_to_the_same_bytes(corpus, reference, interrupted, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(interrupted, out)
    man = json.loads((out / "manifest.json").read_text())
    assert sorted(man["shards"]) == ["train-00000", "val-00000"] and not man["complete"]
    half = out / "shards" / "train-00001.bin.tmp"
    ref_man = json.loads((reference["out"] / "manifest.json").read_text())
    assert 0 < half.stat().st_size < 2 * ref_man["shards"]["train-00001"]["tokens"]  # really half written
    assert not (out / "shards" / "train-00001.bin").exists()
    with pytest.raises(FileNotFoundError, match="prepare"):
        data.read_meta(out)  # train.py refuses an unfinished folder
    p = _run(corpus, out)
    assert _ok(p) == reference["meta"]
    assert "resuming: 2/" in p.stderr
    for split in ("train", "val"):
        assert _sha(out / f"{split}.bin") == _sha(reference["out"] / f"{split}.bin")
    assert json.loads((out / "manifest.json").read_text())["shards"] == ref_man["shards"]


def test_corrupt_or_unrecorded_shards_are_detected_and_redone(corpus, reference, interrupted, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(interrupted, out)
    sd = out / "shards"
    good = sd / "train-00000.bin"
    raw = bytearray(good.read_bytes())
    raw[1000] ^= 1  # same size, one bit off
    good.write_bytes(bytes(raw))
    (sd / "train-00001.bin.tmp").rename(sd / "train-00001.bin")  # renamed but never recorded
    p = _run(corpus, out)
    assert _ok(p) == reference["meta"]
    assert "train-00000: sha256 differs" in p.stderr
    for split in ("train", "val"):
        assert _sha(out / f"{split}.bin") == _sha(reference["out"] / f"{split}.bin")
    # a finished folder is checked against the manifest shard by shard
    assert data.verify_prepared(out) == []
    with open(out / "train.bin", "r+b") as f:
        f.seek(2 * (DOCS_PER_SHARD * 5000))  # somewhere in a later shard
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    bad = data.verify_prepared(out)
    assert len(bad) == 1 and "train-" in bad[0]


def test_resume_with_another_plan_is_refused(corpus, interrupted, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(interrupted, out)
    p = _run(corpus, out, val_docs=VAL_DOCS + 1)  # would mix two held-out sets
    assert p.returncode == 3 and "different plan" in p.stdout and "val_docs" in p.stdout


def test_finished_folder_is_returned_without_work(corpus, reference):
    kw = {"encoding": "bytes257", "val_docs": VAL_DOCS, "docs_per_shard": DOCS_PER_SHARD}
    assert data.prepare_parquet(reference["out"], [corpus["path"]], **kw) == reference["meta"]
    with pytest.raises(ValueError, match=r"different plan.*val_docs"):
        data.prepare_parquet(reference["out"], [corpus["path"]], **dict(kw, val_docs=VAL_DOCS + 1))
