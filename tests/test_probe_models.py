"""``certificates probe`` on many architectures: every captured row is transformers' own.

For each architecture a tiny random-weight checkpoint is built offline from transformers'
config class (2 layers, hidden 32, 4 heads, vocabulary 64) and saved with save_pretrained.
The probe runs through the command-line code path; the reference is a separately loaded
eager model called with ``output_attentions=True`` on the same inputs: ``attentions`` for
one stack, ``encoder_attentions``/``decoder_attentions``/``cross_attentions`` for
encoder–decoder models.  Which stack a model's attention belongs to is written into the
table below from what the architecture is, not taken from the code under test.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from certificates.inputs import InputError  # noqa: E402
from certificates.probe_cli import add_probe_parser, run_probe  # noqa: E402

VOCAB, T, TD = 64, 10, 6           # vocabulary, encoder/only tokens, decoder tokens
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64)
RIGHT_PAD = np.array([[1] * T, [1] * (T - 3) + [0] * 3])           # sequence 1: its last 3 tokens are padding
LEFT_PAD = np.array([[1] * T, [0] * 3 + [1] * (T - 3)])


def _ids(seed, shape):
    return np.random.default_rng(seed).integers(3, VOCAB, size=shape)    # ids 0–2: pad/bos/eos of some configs


def _config(name):
    t = transformers
    return {
        "bert": lambda: t.BertConfig(**SMALL, max_position_embeddings=32),
        "gpt2": lambda: t.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32),
        "llama": lambda: t.LlamaConfig(**SMALL, num_key_value_heads=2, max_position_embeddings=32),
        "qwen2": lambda: t.Qwen2Config(**SMALL, num_key_value_heads=2, max_position_embeddings=32),
        # a window of 4 < T: keys more than 3 positions back are masked
        "mistral": lambda: t.MistralConfig(**SMALL, num_key_value_heads=2, max_position_embeddings=32,
                                           sliding_window=4),
        # soft-capping at 5 changes the softmax of these random scores noticeably
        "gemma2": lambda: t.Gemma2Config(**SMALL, num_key_value_heads=2, head_dim=8, max_position_embeddings=32,
                                         attn_logit_softcapping=5.0, final_logit_softcapping=None,
                                         sliding_window=4, pad_token_id=0, bos_token_id=1, eos_token_id=2),
        "phi3": lambda: t.Phi3Config(**SMALL, max_position_embeddings=32, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2),
        "opt": lambda: t.OPTConfig(vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                   num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=32),
        "gpt_neox": lambda: t.GPTNeoXConfig(**SMALL, max_position_embeddings=32),
        # positions start after padding_idx (1): a table of 34 serves 32 tokens
        "roberta": lambda: t.RobertaConfig(**SMALL, max_position_embeddings=34, pad_token_id=1),
        # one layer module shared by both blocks: the layer index counts calls, as output_attentions does
        "albert": lambda: t.AlbertConfig(**SMALL, embedding_size=16, max_position_embeddings=32),
        "electra": lambda: t.ElectraConfig(**SMALL, embedding_size=16, max_position_embeddings=32),
        "distilbert": lambda: t.DistilBertConfig(vocab_size=VOCAB, dim=32, hidden_dim=64, n_layers=2, n_heads=4,
                                                 max_position_embeddings=32),
        "vit": lambda: t.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                   image_size=32, patch_size=8),
        "t5": lambda: t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                 num_heads=4, decoder_start_token_id=0),
        "bart": lambda: t.BartConfig(**SEQ2SEQ, max_position_embeddings=32),
        # 24 input frames → 12 encoder positions after the stride-2 convolution
        # older modeling code (no _can_record_outputs): read from output_attentions
        "bloom": lambda: t.BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4),
        "falcon": lambda: t.FalconConfig(**SMALL, max_position_embeddings=32),
        "deberta-v2": lambda: t.DebertaV2Config(**SMALL, max_position_embeddings=32),
        "mvp": lambda: t.MvpConfig(**SEQ2SEQ, max_position_embeddings=32),
        "whisper": lambda: t.WhisperConfig(**SEQ2SEQ, num_mel_bins=8, max_source_positions=12,
                                           max_target_positions=16, pad_token_id=0, bos_token_id=1,
                                           eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
                                           begin_suppress_tokens=None),
    }[name]()


def _inputs(name) -> dict:
    rng = np.random.default_rng(3)
    if name == "vit":
        return {"pixel_values": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}
    if name == "whisper":
        return {"input_features": rng.standard_normal((2, 8, 24)).astype(np.float32),
                "decoder_input_ids": _ids(4, (2, 5))}
    x = {"input_ids": _ids(1, (2, T))}
    if name in ("t5", "bart", "mvp"):
        x["decoder_input_ids"] = _ids(2, (2, TD))
        x["attention_mask"] = RIGHT_PAD
    if name in ("bart", "mvp"):
        x["decoder_attention_mask"] = np.array([[1] * TD, [1] * (TD - 2) + [0] * 2])
    if name in ("bert", "roberta", "deberta-v2"):
        x["attention_mask"] = RIGHT_PAD
    if name == "bloom":
        x["attention_mask"] = LEFT_PAD
    if name == "qwen2":
        x["attention_mask"] = LEFT_PAD
    return x


# name → (stack of the self-attention for one-stack models (None: encoder–decoder), causal)
ARCH = {"bert": ("encoder", False), "roberta": ("encoder", False), "distilbert": ("encoder", False),
        "albert": ("encoder", False), "electra": ("encoder", False),
        "vit": ("encoder", False), "gpt2": ("decoder", True), "llama": ("decoder", True),
        "qwen2": ("decoder", True), "mistral": ("decoder", True), "gemma2": ("decoder", True),
        "phi3": ("decoder", True), "opt": ("decoder", True), "gpt_neox": ("decoder", True),
        "t5": (None, None), "bart": (None, None), "whisper": (None, None),
        "bloom": ("decoder", True), "falcon": ("decoder", True), "deberta-v2": ("encoder", False),
        "mvp": (None, None)}
BY_IDS = ("gpt2", "llama", "opt", "electra", "falcon")   # these go through --input-ids, the rest --model-inputs
OLDER = ("bloom", "falcon", "deberta-v2", "mvp")   # no _can_record_outputs: captured from output_attentions


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """name → folder of its saved random model (made once per module, seeded)."""
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    made = {}

    def get(name):
        if name not in made:
            torch.manual_seed(0)
            d = tmp_path_factory.mktemp(name)
            transformers.AutoModel.from_config(_config(name)).save_pretrained(d)
            made[name] = d
        return made[name]
    return get


def probe_args(*argv):
    ap = argparse.ArgumentParser()
    add_probe_parser(ap.add_subparsers(dest="cmd"))
    return ap.parse_args(["probe", *map(str, argv)])


def reference(model_dir, inputs) -> dict:
    """(stack, kind) → tuple of per-layer (B, H, Lq, Lk) float arrays, from transformers itself."""
    m = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager", local_files_only=True)
    m.eval()
    kw = {k: torch.as_tensor(v if v.dtype.kind == "f" else v.astype(np.int64)) for k, v in inputs.items()}
    with torch.no_grad():
        o = m(**kw, output_attentions=True)
    if getattr(o, "encoder_attentions", None) is not None:
        return {("encoder", "self"): o.encoder_attentions, ("decoder", "self"): o.decoder_attentions,
                ("decoder", "cross"): o.cross_attentions}
    return {None: o.attentions}


def _real_queries(inputs, stack, kind, encdec, Lq):
    """The query positions of each sequence that are tokens, not padding, per the test's masks."""
    mask = inputs.get("decoder_attention_mask" if encdec and stack == "decoder" else "attention_mask")
    if mask is None or mask.shape[1] != Lq:
        return [np.arange(Lq)] * 2
    return [np.flatnonzero(r) for r in mask]


def _key_mask(inputs, stack, kind, encdec, Lk):
    """Per sequence, the keys that are padding (must hold exact zeros)."""
    name = "decoder_attention_mask" if encdec and stack == "decoder" and kind == "self" else "attention_mask"
    mask = inputs.get(name)
    if mask is None or mask.shape[1] != Lk:
        return [np.zeros(Lk, bool)] * 2
    return [r == 0 for r in mask]


@pytest.mark.parametrize("name", list(ARCH))
def test_rows_equal_output_attentions(build, tmp_path, name):
    d = build(name)
    inputs = _inputs(name)
    out = tmp_path / "out"
    if name in BY_IDS:
        np.save(tmp_path / "ids.npy", inputs["input_ids"])
        src = ["--input-ids", tmp_path / "ids.npy"]
    else:
        np.savez(tmp_path / "inputs.npz", **inputs)
        src = ["--model-inputs", tmp_path / "inputs.npz"]
    assert run_probe(probe_args(d, "-o", out, *src, "--no-progress", "--no-bounds", "--no-verify")) == 0
    from certificates.__main__ import main as cli
    assert cli(["verify", str(out / "certificates"), "--no-progress"]) == 0

    stack1, causal = ARCH[name]
    encdec = stack1 is None
    ref = reference(d, inputs)
    if not encdec:
        ref = {(stack1, "self"): ref[None]}
    with np.load(out / "rows.npz") as z:
        rows = z["rows"]
        meta = {k: z[k] for k in ("layer", "head", "query", "sequence", "seqlen", "stack", "kind")}
    assert rows.dtype == np.float64 and meta["stack"].dtype.kind == "U" and meta["kind"].dtype.kind == "U"
    got = list(zip(meta["stack"].tolist(), meta["kind"].tolist(), *(meta[k].tolist() for k in
                                                                   ("layer", "sequence", "head", "query"))))
    expect = set()
    for (st, kd), layers in ref.items():
        assert len(layers) == 2
        _, H, Lq, _ = layers[0].shape
        for s, qs in enumerate(_real_queries(inputs, st, kd, encdec, Lq)):
            expect |= {(st, kd, l, s, h, int(q)) for l in range(len(layers)) for h in range(H) for q in qs}
    assert set(got) == expect and len(got) == len(expect)          # every real row exactly once
    assert rows.shape[1] == max(a[0].shape[-1] for a in ref.values())  # zero-padded to the widest row
    for i, (st, kd, l, s, h, q) in enumerate(got):
        r = ref[(st, kd)][l][s, h, q].numpy()
        n = int(meta["seqlen"][i])
        assert n == r.shape[0]
        np.testing.assert_allclose(rows[i, :n], r, atol=1e-5, rtol=0)
        assert not rows[i, n:].any()
        assert not rows[i, :n][r == 0].any()                       # the model's exact zeros stay exact
        pad = _key_mask(inputs, st, kd, encdec, n)[s]
        assert not rows[i, :n][pad].any()                          # padded keys: exact zeros
        if (causal and st == "decoder") or (encdec and st == "decoder" and kd == "self"):
            assert not rows[i, q + 1:n].any()                      # causal: nothing above the diagonal
    if name == "mistral":              # sliding window 4: keys q−4 and before are exact zeros
        q = meta["query"]
        far = np.arange(rows.shape[1])[None, :] <= q[:, None] - 4
        assert not rows[far].any() and far.any()
    if name == "vit":                  # 16 patches + CLS
        assert rows.shape[1] == 17
    if encdec:                         # cross rows span the encoder; decoder self rows are padded
        cross = meta["kind"] == "cross"
        assert set(meta["seqlen"][cross].tolist()) == {ref[("encoder", "self")][0].shape[-1]}
        assert set(meta["seqlen"][(meta["stack"] == "decoder") & ~cross].tolist()) == \
            {ref[("decoder", "self")][0].shape[-1]}
    rec = json.loads((out / "probe.json").read_text())
    assert rec["rows"] == len(rows)
    assert {(g["stack"], g["kind"]) for g in rec["attention"]} == set(ref)
    assert rec["captured_from"] == ("output_attentions" if name in OLDER else "attention modules")


def test_padding_drops_query_rows_and_zeroes_keys(build, tmp_path):
    """Left padding on a causal model: the padded queries are gone, padded keys are exact zeros,
    and the real rows are the unpadded model's (to float rounding)."""
    d = build("qwen2")
    inputs = _inputs("qwen2")
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out"
    assert run_probe(probe_args(d, "-o", out, "--model-inputs", tmp_path / "in.npz", "--no-progress",
                                "--no-bounds", "--no-verify")) == 0
    with np.load(out / "rows.npz") as z:
        rows, seq, q = z["rows"], z["sequence"], z["query"]
    assert set(q[seq == 1].tolist()) == set(range(3, T))
    assert not rows[seq == 1][:, :3].any()


def test_heads_and_layers_select_in_every_stack(build, tmp_path):
    d = build("t5")
    np.savez(tmp_path / "in.npz", **_inputs("t5"))
    out = tmp_path / "out"
    assert run_probe(probe_args(d, "-o", out, "--model-inputs", tmp_path / "in.npz", "--layers", "1",
                                "--heads", "0,3", "--max-sequences", "1", "--no-progress", "--no-verify")) == 0
    with np.load(out / "rows.npz") as z:
        assert set(z["layer"].tolist()) == {1} and set(z["head"].tolist()) == {0, 3}
        assert set(z["sequence"].tolist()) == {0}
        assert set(zip(z["stack"].tolist(), z["kind"].tolist())) == {("encoder", "self"), ("decoder", "self"),
                                                                     ("decoder", "cross")}
        assert len(z["rows"]) == 2 * (T + TD + TD)
    b = json.loads((out / "bounds.json").read_text())
    assert b["c9_c10_apply"] is False and "encoder self-attention" in b["why"]


class _Softmaxes(torch.overrides.TorchFunctionMode):
    """Keeps every tensor a softmax call returns (torch.softmax, F.softmax, Tensor.softmax),
    by reference: a mask the model writes into it in place afterwards is seen too."""

    def __init__(self):
        super().__init__()
        self.out = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        r = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "softmax" and torch.is_tensor(r):
            self.out.append(r)
        return r


@pytest.mark.parametrize("name", OLDER)
def test_older_models_rows_are_softmax_outputs_of_their_forward(build, name):
    # a reference that does not go through output_attentions: the model is run once more under
    # a torch function mode that keeps every softmax result; each captured row must be a row
    # of one of them (real queries only: padded ones are dropped), bit for bit after widening
    import certificates
    m = transformers.AutoModel.from_pretrained(build(name), attn_implementation="eager",
                                               local_files_only=True).eval()
    inputs = _inputs(name)
    res = certificates.probe(m, inputs, certify=False)
    kw = {k: torch.as_tensor(v if v.dtype.kind == "f" else v.astype(np.int64)) for k, v in inputs.items()}
    mode = _Softmaxes()
    with torch.no_grad(), mode:
        m(**kw)
    seen = set()
    for t in mode.out:                 # (batch, heads, queries, keys), or (batch·heads, queries, keys)
        seen |= {r.tobytes() for r in t.to(torch.float64).reshape(-1, t.shape[-1]).numpy()}
    assert len(res) > 0
    for i in range(len(res)):
        assert res.rows[i, :res.seqlen[i]].tobytes() in seen, (name, i)


def test_output_stack_reads_causality_from_real_queries():
    from certificates.probe_capture import output_stack
    cfg = argparse.Namespace(is_decoder=None)
    model = argparse.Namespace(config=cfg)
    causal = torch.tril(torch.ones(2, 3, 4, 4))
    causal = causal / causal.sum(-1, keepdim=True)
    dense = torch.full((2, 3, 4, 4), 0.25)
    assert output_stack((causal, causal), model) == "decoder"
    assert output_stack((causal, dense), model) == "encoder"
    padded = causal.clone()
    padded[1, :, 0] = 0.25                 # sequence 1's first query is padding: its row may be anything
    assert output_stack((padded,), model) == "encoder"
    assert output_stack((padded,), model, np.array([[1, 1, 1, 1], [0, 1, 1, 1]])) == "decoder"
    one = torch.ones(2, 3, 1, 1)           # one token: nothing to tell by, the config decides
    assert output_stack((one,), model) == "encoder"
    cfg.is_decoder = True
    assert output_stack((one,), model) == "decoder"


# ----------------------------------------------------------------------------- refusals

def _expect_refusal(argv, out, match):
    with pytest.raises(InputError, match=match) as e:
        run_probe(probe_args(*argv[:1], "-o", out, *argv[1:], "--no-progress"))
    assert "\n" not in str(e.value)
    assert not out.exists()
    return str(e.value)


def test_uncapturable_models_are_refused_before_the_weights(build, tmp_path):
    ids = tmp_path / "ids.npy"
    np.save(ids, _ids(0, (1, 6)))
    out = tmp_path / "out"
    for mt in ("mamba", "resnet"):     # no attention modules declared and no output_attentions: no attention
        d = tmp_path / mt
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"model_type": mt}))
        (d / "model.safetensors").write_bytes(b"not weights")      # never read: refused from the config
        msg = _expect_refusal((d, "--input-ids", ids), out, "declares no module that returns attention weights")
        assert "takes no output_attentions" in msg and "certify" in msg
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    _expect_refusal((unknown, "--input-ids", ids), out, "unknown to transformers")
    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "config.json").write_text(json.dumps({"model_type": "bert", "auto_map": {"AutoModel": "x.Y"}}))
    _expect_refusal((custom, "--input-ids", ids), out, "own modeling code")


def test_outputs_that_are_not_attention_rows_are_refused(tmp_path):
    # older modeling code may return other things under output_attentions: RWKV its time-mix
    # state (3-D), ProphetNet signed weights whose rows do not sum to 1.  Refused, no output
    t = transformers
    torch.manual_seed(0)
    cases = {
        "rwkv": (t.RwkvConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                              intermediate_size=64, context_length=32), "not \\(batch=1, heads, queries, keys\\)"),
        "prophetnet": (t.ProphetNetConfig(vocab_size=VOCAB, hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                          num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4,
                                          num_decoder_attention_heads=4, ngram=2, max_position_embeddings=32),
                       "not attention probabilities"),
    }
    for mt, (cfg, match) in cases.items():
        d = tmp_path / mt
        transformers.AutoModel.from_config(cfg).save_pretrained(d)
        np.savez(tmp_path / "in.npz", input_ids=_ids(0, (1, 6)), decoder_input_ids=_ids(1, (1, 4)))
        if mt == "rwkv":
            np.savez(tmp_path / "in.npz", input_ids=_ids(0, (1, 6)))
        msg = _expect_refusal((d, "--model-inputs", tmp_path / "in.npz"), tmp_path / "out", match)
        assert ("run the model yourself" in msg) == (mt == "rwkv")   # no advice to certify non-probabilities


def test_missing_weights_are_refused(build, tmp_path):
    import shutil

    from safetensors.numpy import load_file, save_file
    d = tmp_path / "bert"
    shutil.copytree(build("bert"), d)
    w = load_file(str(d / "model.safetensors"))
    drop = min(k for k in w if "attention.self.key.weight" in k)
    save_file({k: v for k, v in w.items() if k != drop}, str(d / "model.safetensors"), metadata={"format": "pt"})
    ids = tmp_path / "ids.npy"
    np.save(ids, _ids(0, (1, 6)))
    msg = _expect_refusal((d, "--input-ids", ids), tmp_path / "out", "weights lack 1 ")
    assert drop in msg
    # A masked-LM checkpoint has no pooler: the pooler runs after every attention layer, so
    # its absence changes no row, and the model is probed.
    torch.manual_seed(0)
    mlm = tmp_path / "mlm"
    transformers.BertForMaskedLM(_config("bert")).save_pretrained(mlm)
    out = tmp_path / "out-mlm"
    assert run_probe(probe_args(mlm, "-o", out, "--input-ids", ids, "--no-progress", "--no-bounds",
                                "--no-verify")) == 0
    assert not any("pooler" in k for k in load_file(str(mlm / "model.safetensors")))


def test_inputs_the_model_rejects(build, tmp_path):
    out = tmp_path / "out"
    bad_image = tmp_path / "img.npz"
    np.savez(bad_image, pixel_values=np.zeros((1, 3, 40, 40), np.float32))      # the model takes 32 × 32
    _expect_refusal((build("vit"), "--model-inputs", bad_image), out, "the model rejected the inputs")
    ids = tmp_path / "ids.npy"
    np.save(ids, _ids(0, (2, 8)))
    msg = _expect_refusal((build("t5"), "--input-ids", ids), out, "the model rejected the inputs")
    assert "decoder_input_ids" in msg
    _expect_refusal((build("vit"), "--input-ids", ids), out, "takes no input_ids.*--model-inputs")
    long = tmp_path / "long.npz"
    np.savez(long, input_ids=_ids(0, (1, 40)))
    _expect_refusal((build("qwen2"), "--model-inputs", long), out, "40 tokens exceed the model's 32 positions")
    np.savez(long, input_ids=_ids(0, (1, 33)))        # RoBERTa: 34 rows of positions, 32 usable
    _expect_refusal((build("roberta"), "--model-inputs", long), out, "33 tokens exceed the model's 32 positions")
    other = tmp_path / "other.npz"
    np.savez(other, input_ids=_ids(0, (2, 6)), attention_mask=np.ones((3, 6), np.int64))
    _expect_refusal((build("bert"), "--model-inputs", other), out, "batch length 3")
    np.savez(other, input_ids=_ids(0, (2, 6)), labels=_ids(0, (2, 6)))
    _expect_refusal((build("bert"), "--model-inputs", other), out, "labels: set by probe")
    np.savez(other, input_ids=_ids(0, (2, 6)), pixel_values=np.zeros((2, 3), np.float32))
    _expect_refusal((build("bert"), "--model-inputs", other), out, "pixel_values is not an input of BertModel")
    np.savez(other, input_ids=_ids(0, (2, 6)), attention_mask=np.full((2, 6), 2))
    _expect_refusal((build("bert"), "--model-inputs", other), out, "0 and 1 only")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    _expect_refusal((build("bert"), "--model-inputs", tmp_path / "junk.npz"), out, "cannot read the model inputs")
    np.save(ids, _ids(0, (1, 6)))
    _expect_refusal((build("bert"), "--model-inputs", bad_image, "--max-tokens", "4"), out, "--max-tokens")


def test_roberta_ids_are_cut_to_the_usable_positions(build, tmp_path):
    """--input-ids longer than RoBERTa's 32 usable positions: cut to 32 by default (not 34), and it runs."""
    ids = tmp_path / "ids.npy"
    np.save(ids, _ids(0, (1, 40)))
    out = tmp_path / "out"
    assert run_probe(probe_args(build("roberta"), "-o", out, "--input-ids", ids, "--no-progress", "--no-bounds",
                                "--no-verify", "--layers", "0", "--heads", "0")) == 0
    with np.load(out / "rows.npz") as z:
        assert z["rows"].shape == (32, 32)


# ----------------------------------------------------------------------------- the Python API

def test_python_api_matches_cli_rows(build, tmp_path):
    import certificates
    d = build("bart")
    inputs = _inputs("bart")
    m = transformers.AutoModel.from_pretrained(d, attn_implementation="eager", local_files_only=True).eval()
    res = certificates.probe(m, inputs)
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out"
    assert run_probe(probe_args(d, "-o", out, "--model-inputs", tmp_path / "in.npz", "--no-progress",
                                "--no-bounds", "--no-verify")) == 0
    with np.load(out / "rows.npz") as z:
        np.testing.assert_array_equal(res.rows, z["rows"])
        for k in ("layer", "head", "query", "sequence", "seqlen", "stack", "kind"):
            np.testing.assert_array_equal(getattr(res, k), z[k])
        with np.load(out / "certificates" / "certificates.npz") as c:
            np.testing.assert_array_equal(res.certificates.theta_lo, c["theta_lo"])
            np.testing.assert_array_equal(res.certificates.theta_hi, c["theta_hi"])
    assert res.rows.dtype == np.float64 and len(res) == len(res.rows)


def test_python_api_token_ids_and_validation(build):
    import certificates
    d = build("gpt2")
    m = transformers.AutoModel.from_pretrained(d, attn_implementation="eager", local_files_only=True).eval()
    ids = _ids(5, (2, 7))
    res = certificates.probe(m, torch.as_tensor(ids), layers=[1], heads=[2], certify=False)
    assert res.certificates is None and set(res.layer.tolist()) == {1} and set(res.head.tolist()) == {2}
    with torch.no_grad():
        ref = m(input_ids=torch.as_tensor(ids), output_attentions=True).attentions[1][:, 2].numpy()
    np.testing.assert_allclose(res.rows, ref.reshape(-1, 7), atol=1e-5, rtol=0)
    assert set(res.stack.tolist()) == {"decoder"} and set(res.kind.tolist()) == {"self"}
    with pytest.raises(ValueError, match="outside the vocabulary"):
        certificates.probe(m, np.full((1, 4), VOCAB))
    with pytest.raises(ValueError, match="32 positions"):
        certificates.probe(m, {"input_ids": _ids(0, (1, 40))})
    with pytest.raises(ValueError, match="the model has 2 layers"):
        certificates.probe(m, ids, layers=[2])
    sdpa = transformers.AutoModel.from_pretrained(d, attn_implementation="sdpa", local_files_only=True).eval()
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        certificates.probe(sdpa, ids)
    m.train()
    with pytest.raises(ValueError, match="eval"):
        certificates.probe(m, ids)


def test_capture_threads_follow_free_cores(monkeypatch):
    """With other tasks running, the capture uses the free cores only, and torch's setting returns."""
    from certificates import probe_capture
    from certificates import threads as tk
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(tk, "cpu_count", lambda: 2)
        monkeypatch.setattr(tk, "others_running", lambda: 1)
        with probe_capture.capture_threads() as adjust:
            adjust()
            assert torch.get_num_threads() == 1
            monkeypatch.setattr(tk, "others_running", lambda: 0)
            adjust()
            assert torch.get_num_threads() == 2
            monkeypatch.setattr(tk, "others_running", lambda: 5)
            adjust()
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        monkeypatch.setattr(tk, "others_running", lambda: None)     # no /proc: torch's own choice
        with probe_capture.capture_threads() as adjust:
            adjust()
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_mixture_of_experts_probes_in_float64(tmp_path):
    # Mixtral's default grouped expert matmul has no float64 kernel; with --dtype float64 the
    # probe loads transformers' eager expert loop, and the rows agree with the float32 probe's
    cfg = transformers.MixtralConfig(**SMALL, num_key_value_heads=2, max_position_embeddings=32, num_local_experts=2,
                                     num_experts_per_tok=1)
    torch.manual_seed(0)
    d = tmp_path / "mixtral"
    transformers.AutoModel.from_config(cfg).save_pretrained(d)
    ids = tmp_path / "ids.npy"
    np.save(ids, _ids(0, (1, 6)))
    rows = {}
    for dt in ("float64", "float32"):
        assert run_probe(probe_args(d, "-o", tmp_path / dt, "--input-ids", ids, "--dtype", dt, "--no-progress",
                                    "--no-verify")) == 0
        with np.load(tmp_path / dt / "rows.npz") as z:
            rows[dt] = z["rows"]
    np.testing.assert_allclose(rows["float64"], rows["float32"], atol=1e-5, rtol=0)
    assert not np.array_equal(rows["float64"], rows["float32"])      # really computed in float64


def test_a_float64_failure_is_told_to_use_float32():
    # a model with some other part lacking float64 kernels: the refusal says which option to change
    from certificates.probe_cli import _hint
    ld = argparse.Namespace(is_encoder_decoder=False, forward_params=frozenset())
    assert "--dtype float32" in _hint(ld, [], "float64", "expected scalar type Double but found Float")
    assert _hint(ld, [], "float32", "expected scalar type Double but found Float") == ""
