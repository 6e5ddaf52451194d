"""Offline data, memmap format, held-out split, cursor-addressed stream."""
import json

import numpy as np
import pytest

from gpu_experiments import data


@pytest.fixture(scope="module")
def ddir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    data.prepare_offline(d)
    return d


def test_byte_encoding_roundtrip():
    enc = data.byte_encoding()
    s = "Grüße, λ → ∞\n\tdef f(): pass"
    ids = enc.encode_ordinary(s)
    assert ids == list(s.encode("utf-8"))
    assert enc.decode(ids) == s
    assert enc.encode("<|endoftext|>", allowed_special="all") == [256]


def test_memmap_format_and_eot_between_documents(ddir):
    meta = json.loads((ddir / "meta.json").read_text())
    train = np.memmap(ddir / "train.bin", dtype=np.uint16, mode="r")
    val = np.memmap(ddir / "val.bin", dtype=np.uint16, mode="r")
    assert len(train) == meta["train_tokens"] and len(val) == meta["val_tokens"]
    from pydoc_data.topics import topics
    assert meta["train_docs"] + meta["val_docs"] == len(topics)
    assert meta["val_docs"] > 0 and meta["train_docs"] > meta["val_docs"]
    # one EOT after every document, and no other token >= 256
    assert int((train == 256).sum()) == meta["train_docs"] and train[-1] == 256
    assert int((val == 256).sum()) == meta["val_docs"]
    assert int(train.max()) == 256
    total = sum(len(t.encode("utf-8")) + 1 for t in topics.values())
    assert len(train) + len(val) == total


def test_held_out_documents_not_in_train(ddir):
    train = bytes(np.asarray(np.memmap(ddir / "train.bin", dtype=np.uint16, mode="r"), dtype=np.uint8))
    val = np.asarray(np.memmap(ddir / "val.bin", dtype=np.uint16, mode="r"))
    first_doc = bytes(val[:np.argmax(val == 256)].astype(np.uint8))
    assert len(first_doc) > 200 and first_doc not in train


def test_stream_is_cursor_addressed_and_covers_each_epoch():
    tokens = np.arange(1 + 10 * 8, dtype=np.uint16)  # 10 windows of 8 (+1 for the last target)
    s = data.TokenStream(tokens, block_size=8, seed=5)
    x, y = s.batch(0, 10)
    assert sorted(x[:, 0].tolist()) == list(range(0, 80, 8))  # a permutation of all windows
    assert np.array_equal(y, x + 1)  # targets shifted by one
    x2, _ = s.batch(10, 10)
    assert sorted(x2[:, 0].tolist()) == list(range(0, 80, 8)) and not np.array_equal(x, x2)
    a, _ = s.batch(3, 9)
    b, _ = data.TokenStream(tokens, 8, 5).batch(7, 5)
    assert np.array_equal(a[4:], b)  # a fresh stream at any cursor agrees: resume needs only the cursor


def test_probe_batch_fixed_and_held_out(ddir):
    a = data.probe_batch(ddir, 3, 64, seed=1)
    b = data.probe_batch(ddir, 3, 64, seed=1)
    assert a.shape == (3, 64) and np.array_equal(a, b)
    assert not np.array_equal(a, data.probe_batch(ddir, 3, 64, seed=2))


def test_missing_data_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare"):
        data.read_meta(tmp_path)


def test_shards_partition_the_corpus_and_hold_out_val():
    plan = {"n_docs": 1003, "docs_per_shard": 100}
    val = data._val_indices(1003, 17, seed=5)
    assert np.array_equal(val, data._val_indices(1003, 17, seed=5)) and len(set(val.tolist())) == 17
    names = data._shard_names(plan)
    assert names[0] == "val-00000" and names[1:] == [f"train-{i:05d}" for i in range(11)]
    rows = [data._shard_docs(plan, n, val) for n in names]
    assert np.array_equal(rows[0], val)
    train = np.concatenate(rows[1:])
    assert np.all(np.diff(train) > 0)  # corpus order, no repeats
    assert np.array_equal(np.sort(np.concatenate(rows)), np.arange(1003))  # every row exactly once
    with pytest.raises(ValueError, match="val_docs"):
        data._val_indices(10, 10, seed=0)


class _FakeHub:
    """Stands in for huggingface_hub.HfApi: a fixed commit and file list, no network."""

    files: list = []

    def dataset_info(self, repo, revision=None):
        return type("Info", (), {"sha": "0123abcd" * 5})()

    def list_repo_files(self, repo, repo_type=None, revision=None):
        assert repo_type == "dataset" and revision == "0123abcd" * 5  # files read at the resolved commit
        return self.files


def test_corpora_resolve_to_parquet_at_one_commit(monkeypatch):
    import huggingface_hub

    assert data.DEFAULT_CORPUS in data.CORPORA
    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeHub)
    _FakeHub.files = ["README.md", "sample/10BT/001_00000.parquet", "sample/10BT/000_00000.parquet",
                      "sample/100BT/000_00000.parquet", "data/CC-MAIN-2024-10/000_00000.parquet"]
    key, sha, urls, corpus = data.resolve_corpus("fineweb-10bt")
    assert key == "fineweb-10bt" and corpus.repo == "HuggingFaceFW/fineweb" and sha == "0123abcd" * 5
    assert urls == [f"hf://datasets/HuggingFaceFW/fineweb@{sha}/sample/10BT/00{i}_00000.parquet" for i in (0, 1)]
    # OpenWebText through the Hub's parquet conversion: a partial conversion is refused
    _FakeHub.files = ["plain_text/partial-train/0000.parquet", "plain_text/partial-train/0001.parquet"]
    with pytest.raises(ValueError, match="partial"):
        data.resolve_corpus("Skylion007/openwebtext")
    key, _, urls, corpus = data.resolve_corpus("Skylion007/openwebtext", allow_partial=True)
    assert key == "openwebtext" and corpus.revision == "refs/convert/parquet" and len(urls) == 2
    with pytest.raises(ValueError, match="unknown corpus"):
        data.resolve_corpus("someone/else")
