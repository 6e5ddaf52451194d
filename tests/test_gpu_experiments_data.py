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
