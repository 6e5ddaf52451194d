"""X2–X6: rotary maps, score biases, soft-capping, RMSNorm radius, and the rotary path of
certificates/hf_bounds.py on tiny random transformers models."""
import math

import numpy as np
import pytest
import torch

from numerics.attention import (MHAWeights, Rotary, alibi_bias, attention_probs_ext, mha, mha_ext, mha_jacobian,
                                mha_jacobian_ext, mha_jacobian_from_probs, rmsnorm, rmsnorm_radius, t5_bias)
from numerics.attention_bounds import c9_bound, c9_ext_bound, c10_bound, c10_rope_bound, ext_scores, theta_hi_rows
from numerics.norms import bb_norm, bb_norm_vertices, block_norm


def _w(rng, H=2, d=1, dk=2, scale=1.0, bias=False, causal=False):
    g = lambda *s: rng.standard_normal(s) * scale  # noqa: E731
    b = (lambda *s: rng.standard_normal(s)) if bias else (lambda *s: None)  # noqa: E731
    return MHAWeights(g(H, d, dk), g(H, d, dk), g(H, d, 1), g(H, d), tau=1.0,
                      b_q=b(H, dk), b_k=b(H, dk), b_v=b(H, 1), b_o=b(d), causal=causal)


def _theta(X, w, **mods):
    return np.stack([theta_hi_rows(*(lambda s: (s.Z, s.eZ))(ext_scores(X, w, h, **mods)))[0] for h in range(w.H)])


# ----------------------------------------------------------------------------- numerics

def test_rotary_matches_transformers_apply_rotary_pos_emb():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, max_position_embeddings=64)
    emb = LlamaRotaryEmbedding(cfg)
    L, dk = 12, 8
    x = torch.zeros(1, dtype=torch.float64)
    cos, sin = emb(x, torch.arange(L)[None])
    rope = Rotary(cos[0].numpy(), sin[0].numpy(), "half")
    q = torch.randn(1, 3, L, dk, dtype=torch.float64)
    k = torch.randn(1, 3, L, dk, dtype=torch.float64)
    qe, ke = apply_rotary_pos_emb(q, k, cos, sin)
    np.testing.assert_allclose(rope.apply(q[0].numpy()), qe[0].numpy(), atol=1e-14)
    np.testing.assert_allclose(rope.apply(k[0]).numpy(), ke[0].numpy(), atol=1e-14)
    ref = Rotary.from_inv_freq(emb.inv_freq.numpy(), L)      # float64 tables from the same frequencies
    np.testing.assert_allclose(ref.cos, rope.cos, atol=1e-6)
    assert abs(rope.gain() - 1) < 1e-6 and abs(ref.gain() - 1) < 1e-14


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotary_maps_orthogonal_relative_and_transpose(pairing):
    rng = np.random.default_rng(0)
    rope = Rotary.from_inv_freq(np.exp(rng.uniform(-3, 1, 3)), 9, offset=17, pairing=pairing)
    M = [rope.matrix(p) for p in range(9)]
    for p in range(9):
        np.testing.assert_allclose(M[p].T @ M[p], np.eye(6), atol=1e-14)
    np.testing.assert_allclose(M[1].T @ M[4], M[3].T @ M[6], atol=1e-13)       # depends on j − i only
    V = rng.standard_normal((9, 6))
    np.testing.assert_allclose(rope.apply_t(V), np.stack([M[p].T @ V[p] for p in range(9)]), atol=1e-14)


def test_ext_forward_without_mods_is_mha():
    rng = np.random.default_rng(1)
    w = _w(rng, H=2, d=3, dk=2, bias=True, causal=True)
    X = rng.standard_normal((5, 3))
    np.testing.assert_array_equal(mha_ext(X, w).numpy(), mha(X, w).numpy())
    np.testing.assert_allclose(mha_jacobian_ext(X, w), mha_jacobian(X, w), atol=1e-15)


def test_x2_bound_dominates_exact_norm_d1_and_forms_are_ordered():
    rng = np.random.default_rng(2)
    for t in range(25):
        w = _w(rng, H=int(rng.integers(1, 3)), dk=2 * int(rng.integers(1, 3)), scale=float(rng.uniform(0.3, 3)),
               bias=t % 2 == 1, causal=t % 3 == 0)
        L = int(rng.integers(2, 8))
        rope = Rotary.from_inv_freq(np.exp(rng.uniform(-2, 1, w.W_Q.shape[2] // 2)), L)
        X = rng.standard_normal((L, 1)) * 2
        true = bb_norm_vertices(mha_jacobian_ext(X, w, rope=rope))[0]
        cen, pair, pap = (c9_ext_bound(X, w, rope=rope, form=f).bound for f in ("centred", "pair", "paper"))
        op = c9_ext_bound(X, w, rope=rope, pair_budget=0)
        assert op.a_form == "operator"
        assert true <= cen <= pair * (1 + 1e-12) <= pap * (1 + 1e-12) <= op.bound * (1 + 1e-9)


def test_x2_without_rotation_is_c9_paper_form():
    rng = np.random.default_rng(3)
    w = _w(rng, H=2, d=2, dk=2, bias=True)
    X = rng.standard_normal((6, 2))
    a, b = c9_ext_bound(X, w, form="paper").bound, c9_bound(X, w, form="paper").bound
    assert abs(a / b - 1) < 1e-9


def test_plain_c9_is_not_a_rotary_bound():
    # W_Q W_Kᵀ = 0: plain C9 sees no score path, the rotated form does
    Wq = np.array([[[1.0, 0.0]]])
    Wk = np.array([[[0.0, 1.0]]])
    w = MHAWeights(Wq * 3, Wk * 3, np.array([[[1.0]]]), np.array([[1.0]]), tau=1.0)
    X = np.array([[1.0], [-1.0], [0.5]])
    rope = Rotary.from_inv_freq(np.array([0.7]), 3)
    true = bb_norm_vertices(mha_jacobian_ext(X, w, rope=rope))[0]
    assert true > c9_bound(X, w, theta=_theta(X, w, rope=rope)).bound * 1.5
    assert true <= c9_ext_bound(X, w, rope=rope).bound


def test_x3_bound_dominates_pairs_and_plain_c10():
    rng = np.random.default_rng(4)
    w = _w(rng, H=2, d=3, dk=4, bias=True)
    R = 1.5
    b = c10_rope_bound(w, R)
    assert b >= c10_bound(w, R)
    for L in (3, 9):
        rope = Rotary.from_inv_freq(np.exp(rng.uniform(-2, 1, 2)), L)
        for _ in range(60):
            X = rng.standard_normal((L, 3))
            X *= R / np.maximum(np.sqrt((X ** 2).mean(axis=1, keepdims=True)), R)
            Y = X + 1e-3 * rng.standard_normal((L, 3))
            Y *= R / np.maximum(np.sqrt((Y ** 2).mean(axis=1, keepdims=True)), R)
            num = block_norm((mha_ext(X, w, rope=rope) - mha_ext(Y, w, rope=rope)).numpy())
            assert num <= b * block_norm(X - Y)
            assert c9_ext_bound(X, w, rope=rope, form="paper").bound <= b


def test_x4_bias_enters_only_through_p():
    rng = np.random.default_rng(5)
    H, L, d = 2, 6, 3
    w = _w(rng, H=H, d=d, dk=2, bias=True)
    X = rng.standard_normal((L, d))
    for B in (alibi_bias(H, L), t5_bias(rng.standard_normal((H, 8)), L, max_distance=16),
              np.where(np.arange(L) % 3 == 1, -np.inf, 0.0)[None, None, :].repeat(L, 1).repeat(H, 0)):
        J = mha_jacobian_ext(X, w, score_bias=B)
        P = attention_probs_ext(X, w, score_bias=B)
        np.testing.assert_allclose(mha_jacobian_from_probs(X, w, P), J, atol=1e-12)
        assert np.abs(mha_jacobian_from_probs(X, w, attention_probs_ext(X, w)) - J).max() > 1e-3
        # a row-constant shift of the bias changes nothing
        np.testing.assert_allclose(mha_jacobian_ext(X, w, score_bias=B + rng.standard_normal((H, L, 1))), J,
                                   atol=1e-12)
        true = bb_norm(J)[0]
        assert true <= c9_bound(X, w, theta=_theta(X, w, score_bias=B)).bound
        assert true <= c9_ext_bound(X, w, score_bias=B).bound


def test_x4_mask_as_float32_min_equals_minus_inf():
    rng = np.random.default_rng(6)
    w = _w(rng, H=1, d=2, dk=2)
    X = rng.standard_normal((4, 2))
    keep = np.array([True, False, True, True])
    Binf = np.where(keep, 0.0, -np.inf)[None].repeat(4, 0)
    Bmin = np.where(keep, 0.0, float(np.finfo(np.float32).min))[None].repeat(4, 0)
    np.testing.assert_allclose(mha_jacobian_ext(X, w, score_bias=Binf), mha_jacobian_ext(X, w, score_bias=Bmin),
                               atol=1e-14)
    assert c9_ext_bound(X, w, score_bias=Bmin).bound >= bb_norm(mha_jacobian_ext(X, w, score_bias=Bmin))[0]


def test_x5_softcap_bound_and_centred_counterexample():
    rng = np.random.default_rng(7)
    for t in range(20):
        w = _w(rng, H=int(rng.integers(1, 3)), dk=2, scale=float(rng.uniform(0.5, 3)), bias=t % 2 == 0)
        X = rng.standard_normal((int(rng.integers(2, 6)), 1)) * 2
        c = float(rng.uniform(0.3, 5))
        true = bb_norm_vertices(mha_jacobian_ext(X, w, cap=c))[0]
        assert true <= c9_bound(X, w, theta=_theta(X, w, cap=c), form="paper").bound
        assert true <= c9_ext_bound(X, w, cap=c).bound
        assert c9_ext_bound(X, w, cap=c).a_form == "pair"          # no centring under a cap
    # W_Q k_j all equal (= 20) while the scores differ: C9's centred form fails under the cap
    w = MHAWeights(np.array([[[1.0, 0.0]]]), np.array([[[0.0, 1.0]]]), np.array([[[1.0]]]), np.array([[1.0]]),
                   tau=1.0, b_q=np.array([[0.0, 1.0]]), b_k=np.array([[20.0, 0.0]]))
    X = np.array([[0.0], [1.5]])
    true = bb_norm_vertices(mha_jacobian_ext(X, w, cap=1.0))[0]
    assert true > 2 * c9_bound(X, w, theta=_theta(X, w, cap=1.0)).bound
    assert true <= c9_bound(X, w, theta=_theta(X, w, cap=1.0), form="paper").bound


def test_x6_rmsnorm_radius_and_transformers_rmsnorm():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    rng = np.random.default_rng(8)
    g = rng.standard_normal(16)
    for eps in (0.0, 1e-6, 1.0):
        for _ in range(50):
            x = rng.standard_normal(16) * 10.0 ** rng.uniform(-5, 5)
            y = rmsnorm(x, g, eps)
            assert math.sqrt((y * y).mean()) <= rmsnorm_radius(g)
    x = np.zeros(16)
    x[np.argmax(np.abs(g))] = 3.0
    assert math.isclose(math.sqrt((rmsnorm(x, g) ** 2).mean()), np.abs(g).max(), rel_tol=1e-15)
    m = LlamaRMSNorm(16, eps=1e-6).to(torch.float64)
    with torch.no_grad():
        m.weight.copy_(torch.as_tensor(g))
        x = rng.standard_normal((3, 16))
        np.testing.assert_allclose(m(torch.as_tensor(x)).numpy(), rmsnorm(x, g, 1e-6), rtol=1e-6)
    with pytest.raises(ValueError):
        rmsnorm(np.zeros(4), np.ones(4), 0.0)


# every RMSNorm class hf_bounds gives a radius, with a model type that uses it as input_layernorm
NORM_MODELS = {"LlamaRMSNorm": "llama", "MistralRMSNorm": "mistral", "Qwen2RMSNorm": "qwen2",
               "GraniteRMSNorm": "granite", "GraniteMoeRMSNorm": "granitemoe", "MixtralRMSNorm": "mixtral",
               "Qwen2MoeRMSNorm": "qwen2_moe", "SmolLM3RMSNorm": "smollm3", "ArceeRMSNorm": "arcee"}


def _norm_class(name, model_type):
    import importlib
    return getattr(importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}"), name)


def _follows_rmsnorm(cls, rng):
    # the class's forward on float64 input against y = γ ⊙ x/√(mean x² + eps), γ random
    # (transformers normalises in float32 inside, hence the tolerance)
    g = rng.standard_normal(16)
    m = cls(16, eps=1e-6).to(torch.float64)
    with torch.no_grad():
        m.weight.copy_(torch.as_tensor(g))
    x = rng.standard_normal((5, 16)) * 10.0 ** rng.uniform(-3, 3, size=(5, 1))
    return np.allclose(m(torch.as_tensor(x)).detach().numpy(), rmsnorm(x, g, 1e-6), rtol=1e-5, atol=0)


def test_every_rmsnorm_class_given_a_radius_computes_the_x6_formula():
    # hf_bounds gives R = ‖γ‖∞ (X6) to the RMSNorm classes it lists: each must compute exactly
    # γ ⊙ x/√(mean x² + eps); Gemma's, with γ stored as an offset from 1, must fail the check
    from certificates import hf_bounds
    assert set(hf_bounds._RMS_NORMS) == set(NORM_MODELS)     # a new entry needs its line here
    # and a LayerNorm model its wiring test below (a non-PyTorch class also its formula test)
    assert set(hf_bounds._LAYER_NORM_MODELS) == {"starcoder2", "olmo"}
    assert set(hf_bounds._PLAIN_LAYER_NORMS) == {"OlmoLayerNorm"}
    rng = np.random.default_rng(12)
    for name, mt in NORM_MODELS.items():
        assert _follows_rmsnorm(_norm_class(name, mt), rng), name
    assert "GemmaRMSNorm" not in hf_bounds._RMS_NORMS
    assert not _follows_rmsnorm(_norm_class("GemmaRMSNorm", "gemma"), rng)


def test_olmo_layer_norm_is_a_layer_norm_without_affine_parameters():
    # hf_bounds gives OlmoLayerNorm R = 1 (γ = 1, β = 0): its forward must be (x − mean)/√(var + eps)
    m = _norm_class("OlmoLayerNorm", "olmo")(16)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((5, 16)) * 10.0 ** rng.uniform(-2, 2, size=(5, 1)) + rng.standard_normal((5, 1))
    c = x - x.mean(-1, keepdims=True)
    ref = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)
    y = m(torch.as_tensor(x, dtype=torch.float32)).double().numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    assert not any(True for _ in m.parameters())
    assert np.sqrt((y * y).mean(-1)).max() <= 1 + 1e-6


@pytest.mark.parametrize("model_type", sorted(set(NORM_MODELS.values()) | {"starcoder2", "olmo"}))
def test_the_attention_input_is_the_norm_output_the_radius_is_taken_from(model_type):
    # X3 takes R from input_layernorm: in a real forward of the model its output must be what
    # the attention module receives, unchanged, and hf_bounds must give it a radius
    import transformers
    from certificates import hf_bounds, hf_model
    transformers.utils.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model(model_type, vocab_size=64, hidden_size=32, intermediate_size=48,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, head_dim=8, pad_token_id=2,
                                            bos_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    m = transformers.AutoModel.from_config(cfg, attn_implementation="eager").eval()
    ld = hf_model.describe(m)
    seen = {}
    hooks = []
    for i, blk in enumerate(m.layers):
        hooks.append(blk.input_layernorm.register_forward_hook(
            lambda mod, a, out, i=i: seen.__setitem__(("norm", i), out.detach().clone())))
        hooks.append(blk.self_attn.register_forward_pre_hook(
            lambda mod, a, kw, i=i: seen.__setitem__(("attn", i), (kw.get("hidden_states", a[0] if a else None))
                                                     .detach().clone()), with_kwargs=True))
    with torch.no_grad():
        m(input_ids=torch.arange(3, 13)[None], use_cache=False)
    for h in hooks:
        h.remove()
    for i in range(2):
        assert torch.equal(seen[("norm", i)], seen[("attn", i)])
        assert hf_bounds.rotary_obstacle(ld, i) is None
        R = hf_bounds.layer_radius(ld, i)
        assert R is not None
        rms = seen[("norm", i)].double().pow(2).mean(-1).sqrt().max().item()
        assert rms <= R * (1 + 1e-5)


# ----------------------------------------------------------------------------- hf_bounds on tiny models

_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.3, head_dim=8,
             moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4, num_local_experts=4,
             pad_token_id=2, bos_token_id=0, eos_token_id=1)


def _tiny(kind: str, **extra):
    """A random float64 model of this type (2 layers, hidden 32, 4 query and 2 key/value heads
    where the config has those), as the probe would describe it."""
    import inspect

    import transformers
    transformers.utils.logging.set_verbosity_error()
    from certificates import hf_model
    if kind not in transformers.CONFIG_MAPPING:        # an older transformers than the list was tested with
        pytest.skip(f"model type {kind} is not in transformers {transformers.__version__}")
    cls = transformers.CONFIG_MAPPING[kind]
    params = inspect.signature(cls.__init__).parameters
    cfg = cls(**{k: v for k, v in _TINY.items() if k in params}, **extra)
    torch.manual_seed(0)
    # the experts' eager loop: the grouped matmul of mixture-of-experts MLPs has no float64 kernel
    # (a transformers without the setting has only the loop)
    experts = {"experts_implementation": "eager"} if hasattr(cfg, "_experts_implementation") else {}
    m = transformers.AutoModel.from_config(cfg, attn_implementation="eager", **experts).to(torch.float64).eval()
    with torch.no_grad():                         # non-trivial RMSNorm weights (init leaves them at 1)
        for name, p in m.named_parameters():
            if name.endswith("layernorm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
    ld = hf_model.describe(m)                     # a Loaded exactly as the probe would build it
    assert ld.spec is not None and ld.n_heads == 4
    return ld


def _modules(ld):
    from certificates.hf_model import get_path
    return [get_path(blk, ld.spec.attn) for blk in get_path(ld.model, ld.spec.layers)]


def _capture(ld, ids):
    """Per layer: the attention input X (L, d), the module's output and its call kwargs."""
    got = {}
    mods = _modules(ld)
    hooks = [m.register_forward_pre_hook(lambda _m, a, k, i=i: got.__setitem__(i, dict(k, x=(a[0] if a else
                                         k["hidden_states"]))), with_kwargs=True) for i, m in enumerate(mods)]
    hooks += [m.register_forward_hook(lambda _m, a, o, i=i: got[i].__setitem__("y", o[0])) for i, m in enumerate(mods)]
    with torch.no_grad():
        ld.model(input_ids=torch.as_tensor(ids)[None], use_cache=False)
    for h in hooks:
        h.remove()
    return got, mods


IDS = np.random.default_rng(7).integers(0, 64, size=10)


# what makes a type's attention differ from plain rotary MHA, turned on where the default leaves it off
_EXTRA = {"mistral": {"sliding_window": 4}, "granite": {"attention_multiplier": 0.3},
          "gemma2": {"attn_logit_softcapping": 5.0, "sliding_window": 4}, "vaultgemma": {"attn_logit_softcapping": 5.0}}


def _rotary_models():
    from certificates import hf_bounds
    return hf_bounds._ROTARY_MODELS


@pytest.mark.parametrize("kind", _rotary_models())
def test_hf_rotary_converter_and_local_bound_vs_real_jacobian(kind):
    # every type on hf_bounds' closed list: the converted weights, rotary maps, window and
    # soft-capping reproduce the module's output and Jacobian, and the local bound holds
    from certificates import hf_bounds
    extra = _EXTRA.get(kind, {})
    ld = _tiny(kind, **extra)
    got, mods = _capture(ld, IDS)
    acc = hf_bounds.BoundsAccumulator(ld, [0, 1])
    assert acc.applies
    for i in (0, 1):
        X = got[i]["x"][0].numpy()
        w, rl = hf_bounds.layer_weights(ld, i), hf_bounds.rotary_layer(ld, i)
        L = X.shape[0]
        rope, B = hf_bounds.rotary_maps(rl, L), hf_bounds.window_bias(rl, L)
        assert (B is not None) == ("sliding_window" in extra and rl.window is not None)
        assert rl.cap == extra.get("attn_logit_softcapping", rl.cap)
        # numerics' rotary MHA with the converted weights is the transformers block (whose eager
        # softmax runs in float32 even in a float64 model: hence the 1e-5 tolerance)
        np.testing.assert_allclose(mha_ext(X, w, rope=rope, score_bias=B, cap=rl.cap).numpy(),
                                   got[i]["y"][0].numpy(), rtol=1e-5, atol=1e-5)
        kw = {k: v for k, v in got[i].items() if k not in ("x", "y", "hidden_states", "cache", "past_key_values")}
        f = lambda Z: mods[i](hidden_states=Z[None], **kw)[0][0]  # noqa: E731
        J = torch.autograd.functional.jacobian(f, torch.as_tensor(X), vectorize=True).numpy()
        np.testing.assert_allclose(J, mha_jacobian_ext(X, w, rope=rope, score_bias=B, cap=rl.cap), rtol=1e-4,
                                   atol=1e-5)
        measured = bb_norm(J, restarts=8, iters=80)[0]
        loc = c9_ext_bound(X, w, rope=rope, score_bias=B, cap=rl.cap)
        assert measured <= loc.bound
        acc.add(i, X)
    res = acc.result()
    assert res["c9_c10_apply"] is True and "X2" in res["why"]
    for i, r in enumerate(res["layers"]):
        assert r["c9_local"]["max"] <= r["c9_local"]["max_theta_one"]
        if hf_bounds.layer_radius(ld, i) is None:      # no checked norm radius: C9 only
            assert r["c10_global"] is None
            continue
        assert r["c9_local"]["max_theta_one"] <= r["c10_global"]["bound"]
        assert r["c10_global"]["R_layernorm"] >= r["c10_global"]["input_max_rms"] * (1 - 1e-12)
        assert abs(r["rotary"]["gain"] - 1) < 1e-5
        if kind not in _EXTRA:
            assert r["rotary"]["a_form"] == ["centred"]


def _plain_rotary_miss(ld, got):
    """How far layer 0's converted map (weights, plain rotary maps; the obstacle bypassed)
    misses the module's captured output."""
    from certificates import hf_bounds
    a = _modules(ld)[0]
    rl = hf_bounds.RotaryLayer(ld.model.rotary_emb, int(a.head_dim), None, None, 1.0, torch.float64)
    X = got[0]["x"][0].numpy()
    y = mha_ext(X, hf_bounds._rotary_weights(ld, 0), rope=hf_bounds.rotary_maps(rl, X.shape[0])).numpy()
    return np.abs(y - got[0]["y"][0].numpy()).max()


@pytest.mark.parametrize("kind", ["helium", "diffllama", "bitnet", "ernie4_5"])
def test_hf_rotary_types_off_the_list_compute_other_maps(kind):
    # why the list is closed: these have q_proj/k_proj/v_proj/o_proj and a rotate_half rotary
    # table, so every structural test passes, yet the converted map misses the module's output
    # (interleaved rotary pairs, two softmaxes, a sub-norm before o_proj); they get no bound
    from certificates import hf_bounds
    assert kind not in hf_bounds._ROTARY_MODELS
    ld = _tiny(kind)
    got, _ = _capture(ld, IDS)
    assert hf_bounds.rotary_obstacle(ld, 0) == "untested" and hf_bounds.layer_weights(ld, 0) is None
    acc = hf_bounds.BoundsAccumulator(ld, [0, 1])
    assert not acc.applies and acc.result()["why"] == hf_bounds.WHY_NOT["untested"]
    assert _plain_rotary_miss(ld, got) > 1e-2


def test_hf_clipped_qkv_says_why_not():
    # OLMo clamps q, k, v to ±clip_qkv: on the list, but not with clipping on.  With a clip the
    # random inputs reach, the converted (unclamped) map misses the module's output
    from certificates import hf_bounds
    ld = _tiny("olmo", clip_qkv=0.05)
    got, _ = _capture(ld, IDS)
    assert hf_bounds.rotary_obstacle(ld, 0) == "clip_qkv"
    res = hf_bounds.BoundsAccumulator(ld, [0, 1]).result()
    assert res["c9_c10_apply"] is False and res["why"] == hf_bounds.WHY_NOT["clip_qkv"]
    assert _plain_rotary_miss(ld, got) > 1e-2


def test_hf_nope_layer_says_why_not():
    # SmolLM3 skips RoPE on every fourth layer (config.no_rope_layers): the rotary maps are not
    # that layer's map (the kernel with them misses the module's output), so it is not bounded
    # and the result says why; the rotary layers keep their bounds and reproduce the module
    import transformers
    from certificates import hf_bounds, hf_model
    transformers.utils.logging.set_verbosity_error()
    cfg = transformers.AutoConfig.for_model("smollm3", vocab_size=64, hidden_size=32, intermediate_size=48,
                                            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, head_dim=8, pad_token_id=2, bos_token_id=0,
                                            eos_token_id=1)
    assert list(cfg.no_rope_layers) == [1, 1, 1, 0]
    torch.manual_seed(0)
    m = transformers.AutoModel.from_config(cfg, attn_implementation="eager").to(torch.float64).eval()
    ld = hf_model.describe(m)
    got, _ = _capture(ld, IDS)
    for i in range(4):
        X = got[i]["x"][0].numpy()
        rl = hf_bounds.rotary_layer(ld, i)
        if i == 3:
            assert rl is None
            assert hf_bounds.rotary_obstacle(ld, i) == "no_rope"
            assert hf_bounds.layer_weights(ld, i) is None
            # what the rotary maps would have given: not the module's output
            rl = hf_bounds.RotaryLayer(m.rotary_emb, 8, None, None, 1.0, torch.float64)
        w = hf_bounds._rotary_weights(ld, i)
        y = mha_ext(X, w, rope=hf_bounds.rotary_maps(rl, X.shape[0])).numpy()
        err = np.abs(y - got[i]["y"][0].numpy()).max()
        assert (err < 1e-8) == (i < 3), (i, err)
    acc = hf_bounds.BoundsAccumulator(ld, [0, 1, 2, 3])
    assert not acc.applies and "NoPE" in acc.result()["why"]


def test_hf_qk_norm_says_why_not():
    from certificates import hf_bounds
    ld = _tiny("qwen3")
    acc = hf_bounds.BoundsAccumulator(ld, [0, 1])
    assert not acc.applies and hf_bounds.layer_weights(ld, 0) is None
    res = acc.result()
    assert res["c9_c10_apply"] is False and res["why"] == hf_bounds.WHY_NOT["qk_norm"]
    assert all(r["c9_local"] is None for r in res["layers"])
