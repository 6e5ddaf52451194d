"""C9/C10 for Hugging Face models: weights into numerics' container, radii, and where they apply.

The kernel (numerics/attention.py, numerics/attention_bounds.py) bounds the map
X ↦ [P¹XW_V¹ … PᴴXW_Vᴴ]W_O with scores s_ij = q_iᵀk_j / τ, q = XW_Q + b_q, k = XW_K + b_k,
one fixed bilinear form W_Q^h W_K^{hT} per head (C9, C10), and its rotary extension
s_ij = (M_i q_i)ᵀ(M_j k_j) / τ with position maps M_p (X2, X3), optionally with masks as
an X-independent score bias (X4) and soft-capping (X5).  Which models have which form:

* GPT-2: C9/C10 (learned absolute positions are added before the block; q, k, v come from
  one Conv1D, biases are kept; τ = 1/scaling, which covers scale_attn_weights = False
  and scale_attn_by_inverse_layer_idx).  Causal.  C10's radius: the attention input is
  ln_1's output, so R = ‖γ‖_∞ + RMS(β) of ln_1 (pre-LN).
* BERT, and RoBERTa, XLM-RoBERTa, CamemBERT and data2vec-text, which use BERT's modules
  (POST_LN_ENCODERS): C9/C10, bidirectional (causal if is_decoder).  C10's radius: every
  layer's input is a LayerNorm output (embeddings.LayerNorm for layer 0, the previous
  layer's output.LayerNorm after it; post-LN), so the same R formula holds for that LayerNorm.
* Llama, and the same code path for Mistral/Qwen2-style attention (q_proj, k_proj, v_proj,
  o_proj, grouped-query attention by repeating key/value heads, rotary embeddings from
  the model's rotary_emb): X2/X3.  transformers applies RoPE as q·cos + rotate_half(q)·sin,
  which pairs dimension a with a + d_k/2; after the permutation that puts partners side by
  side this is a block-diagonal 2×2 rotation (times the rope type's attention_scaling).
  The cos/sin tables are taken from model.rotary_emb at positions 0…L−1 (what the probe's
  forward uses), widened to float64.  Causal, plus a sliding window where the layer has
  one (as a −∞ score bias, X4).  X3's radius: the attention input is input_layernorm's
  output, an RMSNorm, so R = ‖γ‖_∞ (X6), for the RMSNorm classes of _RMS_NORMS (Llama,
  Mistral, Qwen2 and their mixture-of-experts forms, Granite, SmolLM3, Arcee;
  Granite scales its scores by attention_multiplier, so τ is its inverse), or a LayerNorm
  (PyTorch's in Starcoder2, OLMo's without affine parameters), R = ‖γ‖_∞ + RMS(β); with
  another norm class the layer gets X2 and no X3.  Where the scores are normalised inside
  (QK-norm: q_norm/k_norm, e.g. Qwen3) or only part of each head is rotated, no bound is
  derived and the result says so; likewise for q, k, v clamped to ±clip_qkv (OLMo), and
  for every model type off _ROTARY_MODELS, the closed list whose conversion is tested
  against the module's output and Jacobian (the same module layout hides other maps).

Precision contract: weights are copied exactly (float32 → float64 widening); the C9/C10
bounds are numerics.attention_bounds' (upper bounds under its stated assumptions) at the
float64 widening of the attention inputs the model computed; the rotary X2/X3 bounds are
float64 evaluations, not certified (numerics.attention_bounds, X2–X5).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from numerics.attention import MHAWeights, Rotary, ln_image_radius, rmsnorm_radius
from numerics.attention import as_float64 as _np
from numerics.attention_bounds import FINAL_MARGIN, c9_bound, c9_ext_bound, c10_bound, c10_rope_bound, spectral_up

from .hf_model import Loaded, get_path

# One sentence per kind of layer the bounds do not cover (keys: what the layer has).
WHY_NOT = {
    "qk_norm": "QK-norm: queries and keys are normalised (q_norm/k_norm) before the scores, which changes the "
               "score derivative; neither C9/C10 nor their rotary forms X2/X3 are derived for it",
    "no_rope": "a layer that applies no rotary embedding while the model has rotary tables (NoPE layers, e.g. "
               "every fourth SmolLM3 layer): the rotary bounds would use maps the layer does not apply",
    "partial_rotary": "partial rotary embeddings: only part of each head is rotated, a layout the rotary "
                      "bounds (X2/X3) are not wired for",
    "rotary_layout": "the rotary tables do not have transformers' rotate_half layout (cos and sin equal on "
                     "dimensions a and a + d_k/2), so the maps are not known to be rotations",
    "stacks": "several attention stacks (encoder–decoder) or shared blocks: the bounds are wired for one "
              "stack of self-attention blocks, so encoder self-attention, decoder self-attention and "
              "cross-attention are not bounded here",
    "unknown": "architecture not covered",
    "untested": "a rotary model type whose conversion to the X2/X3 kernel is not among those tested to reproduce "
                "the attention module and its Jacobian (tests/test_attention_rope.py): the same module layout "
                "hides other maps (DiffLlama's two softmaxes, BitNet's sub-norm, Helium's and ERNIE 4.5's "
                "interleaved rotary pairs, QK norms under other names), so no bound is given",
    "clip_qkv": "the queries, keys and values are clamped to ±config.clip_qkv before the scores (OLMo, OLMoE), "
                "a map C9/C10 and X2/X3 are not derived for",
}
# Rotary model types whose conversion (the projections, the rotary maps, the sliding window, the
# soft-capping) reproduces the attention module's output and Jacobian on a random model of each
# (tests/test_attention_rope.py, test_hf_rotary_converter_and_local_bound_vs_real_jacobian, which
# runs this whole list).  A closed list: other types with q_proj/k_proj/v_proj/o_proj and a
# rotary_emb pass every structural test above and still compute other maps
_ROTARY_MODELS = ("arcee", "aria_text", "cwm", "exaone", "falcon_h1", "gemma", "gemma2", "granite", "granitemoe",
                  "granitemoeshared", "hyperclovax", "internlm3", "iquestcoder", "jais2", "llama", "ministral",
                  "ministral3", "mistral", "mixtral", "olmo", "phimoe", "qwen2", "qwen2_moe", "seed_oss",
                  "smollm3", "solar_open", "starcoder2", "vaultgemma")
_ROTARY_APPLIES = ("rotary attention (q_proj/k_proj/v_proj/o_proj, grouped-query heads repeated, RoPE from the "
                   "model's rotary_emb with rotate_half pairing of dimension a with a + d_k/2) is the kernel's MHA "
                   "with position maps: the local bound is X2 (per-pair score gradients, θ of the rotary rows; a "
                   "sliding window enters as a −∞ score bias, X4), the global one X3 (‖W_Q‖₂‖W_K‖₂ in place of "
                   "‖W_Q W_Kᵀ‖₂, independent of L); R = ‖γ‖∞ of input_layernorm, an RMSNorm (X6); float64 "
                   "bounds, not certified")
APPLIES = {
    "llama": _ROTARY_APPLIES,
    "mistral": _ROTARY_APPLIES,
    "qwen2": _ROTARY_APPLIES,
    "gpt2": "GPT-2 self-attention is exactly the kernel's MHA (causal, with biases, τ = 1/scaling); "
            "C10's radius R = ‖γ‖∞ + RMS(β) of ln_1, whose output is the attention input (pre-LN)",
    "bert": "BERT self-attention is exactly the kernel's MHA (bidirectional, with biases, τ = 1/scaling; "
            "W_O = attention.output.dense); C10's radius R = ‖γ‖∞ + RMS(β) of the LayerNorm whose output "
            "is the layer's input (embeddings.LayerNorm, then the previous layer's output.LayerNorm; post-LN)",
}
# Post-LN encoders with BERT's modules (attention.self.query/key/value, attention.output.dense,
# embeddings.LayerNorm, output.LayerNorm) and absolute positions added before embeddings.LayerNorm;
# tests/test_probe.py checks on each that the converted weights reproduce the module and that
# every layer's input is the LayerNorm output its radius is taken from
POST_LN_ENCODERS = ("bert", "roberta", "xlm-roberta", "camembert", "data2vec-text")
for _mt in POST_LN_ENCODERS[1:]:
    APPLIES[_mt] = APPLIES["bert"].replace("BERT self-attention", f"{_mt} self-attention (BERT's modules)")


def _per_head(M: np.ndarray, H: int, hd: int) -> np.ndarray:
    """(d, H·hd) columns → (H, d, hd)."""
    return np.stack([M[:, h * hd:(h + 1) * hd] for h in range(H)])


def _bias(b, H, hd):
    return None if b is None else _np(b).reshape(H, hd)


# ----------------------------------------------------------------------------- rotary layers (X2–X6)

_PROJ = ("q_proj", "k_proj", "v_proj", "o_proj")
# RMSNorm classes whose forward is y = γ ⊙ x/√(mean x² + eps) with no offset on γ (Gemma's 1 + γ is not),
# and whose output is the attention input of the decoder layer; tests/test_attention_rope.py checks each
# class against numerics.attention.rmsnorm
_RMS_NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "GraniteRMSNorm", "GraniteMoeRMSNorm",
              "MixtralRMSNorm", "Qwen2MoeRMSNorm", "SmolLM3RMSNorm", "ArceeRMSNorm")
# rotary models whose input_layernorm is a LayerNorm over the hidden axis, its output the attention
# input (the wiring is tested per model type in tests/test_attention_rope.py, so the list is closed):
# PyTorch's own class (Starcoder2), or one of _PLAIN_LAYER_NORMS, whose forward is F.layer_norm
# without weight or bias (γ = 1, β = 0; the test checks each against the formula)
_LAYER_NORM_MODELS = ("starcoder2", "olmo")
_PLAIN_LAYER_NORMS = ("OlmoLayerNorm",)


@dataclass
class RotaryLayer:
    """What X2/X3 need beyond the weights: the model's rotary embedding, the layer's sliding
    window (keys j with i − j ≥ window are masked) and its soft-capping constant."""
    rotary_emb: object
    head_dim: int
    window: int | None
    cap: float | None
    attention_scaling: float
    dtype: object              # the model dtype: the tables are computed for hidden states of it


def _attn(ld: Loaded, layer: int):
    return get_path(get_path(ld.model, ld.spec.layers)[layer], ld.spec.attn)


def _model_dtype(ld: Loaded):
    return next(ld.model.parameters()).dtype


def _rotary_tables(rotary_emb, L: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin (L, d_k) as the model's forward computes them for positions 0…L−1 (rotary_emb
    called with hidden states of the model dtype, as in LlamaModel.forward), widened to float64."""
    import torch
    buf = getattr(rotary_emb, "inv_freq", None)
    device = buf.device if torch.is_tensor(buf) else "cpu"
    x = torch.zeros(1, device=device, dtype=dtype)
    with torch.no_grad():
        cos, sin = rotary_emb(x, torch.arange(L, device=device)[None])
    return _np(cos[0]), _np(sin[0])


def rotary_obstacle(ld: Loaded, layer: int) -> str | None:
    """None when the layer is rotary attention the X2/X3 bounds cover, else a WHY_NOT key."""
    if getattr(ld, "is_encoder_decoder", False) or getattr(ld, "spec", None) is None:
        return "stacks"
    if not ld.n_heads or not ld.n_kv_heads:
        return "unknown"
    a = _attn(ld, layer)
    if not all(hasattr(a, k) for k in _PROJ) or getattr(ld.model, "rotary_emb", None) is None \
            or not hasattr(a, "head_dim") or not hasattr(a, "scaling"):
        return "unknown"
    if hasattr(a, "q_norm") or hasattr(a, "k_norm"):
        return "qk_norm"
    if not getattr(a, "use_rope", True):   # e.g. SmolLM3's NoPE layers (config.no_rope_layers)
        return "no_rope"
    try:
        cos, sin = _rotary_tables(ld.model.rotary_emb, 3, _model_dtype(ld))
    except Exception:          # e.g. multimodal rotary embeddings that want other position ids
        return "unknown"
    hd = int(a.head_dim)
    if cos.ndim != 2:
        return "rotary_layout"
    if cos.shape[-1] != hd:
        return "partial_rotary"
    h = hd // 2
    if hd % 2 or not (np.array_equal(cos[:, :h], cos[:, h:]) and np.array_equal(sin[:, :h], sin[:, h:])):
        return "rotary_layout"
    if getattr(ld.model.config, "clip_qkv", None) is not None:
        return "clip_qkv"
    if ld.model_type not in _ROTARY_MODELS:
        return "untested"
    return None


def rotary_layer(ld: Loaded, layer: int) -> RotaryLayer | None:
    """The rotary part of a covered layer, or None (non-rotary or not covered)."""
    if ld.model_type == "gpt2" or ld.model_type in POST_LN_ENCODERS or rotary_obstacle(ld, layer) is not None:
        return None
    a, cfg = _attn(ld, layer), ld.model.config
    window = getattr(a, "sliding_window", None)
    if ld.model_type == "mistral":
        window = getattr(cfg, "sliding_window", None)      # Mistral masks every layer when it is set
    cap = getattr(a, "attn_logit_softcapping", None) or getattr(cfg, "attn_logit_softcapping", None)
    return RotaryLayer(ld.model.rotary_emb, int(a.head_dim), None if window is None else int(window),
                       None if cap is None else float(cap),
                       float(getattr(ld.model.rotary_emb, "attention_scaling", 1.0)), _model_dtype(ld))


def rotary_maps(rl: RotaryLayer, L: int) -> Rotary:
    """The model's rotary maps M_0…M_(L−1) (rotate_half pairing) as numerics' Rotary."""
    cos, sin = _rotary_tables(rl.rotary_emb, L, rl.dtype)
    return Rotary(cos, sin, "half")


def window_bias(rl: RotaryLayer, L: int) -> np.ndarray | None:
    """−∞ on keys outside the sliding window (j ≤ i − window), None when nothing is masked."""
    if rl.window is None or L <= rl.window:
        return None
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    return np.where(j > i - rl.window, 0.0, -np.inf)


def _rotary_weights(ld: Loaded, layer: int) -> MHAWeights:
    """q/k/v/o projections per query head (a key/value head repeated for its query group, as
    transformers' repeat_kv does: query head h reads key/value head h // (H / H_kv))."""
    a = _attn(ld, layer)
    H, Hkv, hd = ld.n_heads, ld.n_kv_heads, int(a.head_dim)
    if H % Hkv:
        raise ValueError(f"layer {layer}: {H} query heads are not a multiple of {Hkv} key/value heads")
    rep = H // Hkv
    kv = [h // rep for h in range(H)]
    lin = lambda m: _np(m.weight).T                          # noqa: E731  nn.Linear: y = x Wᵀ + b
    Wq, Wk, Wv = lin(a.q_proj), lin(a.k_proj), lin(a.v_proj)
    col = lambda M, g: M[:, g * hd:(g + 1) * hd]             # noqa: E731
    bias = lambda m, idx: (None if m.bias is None else np.stack([_np(m.bias)[g * hd:(g + 1) * hd] for g in idx]))  # noqa: E731
    return MHAWeights(np.stack([col(Wq, h) for h in range(H)]), np.stack([col(Wk, g) for g in kv]),
                      np.stack([col(Wv, g) for g in kv]), lin(a.o_proj), 1.0 / float(a.scaling),
                      bias(a.q_proj, range(H)), bias(a.k_proj, kv), bias(a.v_proj, kv),
                      None if a.o_proj.bias is None else _np(a.o_proj.bias), causal=True, name=f"layer {layer}")


def layer_obstacle(ld: Loaded, layer: int) -> str | None:
    """None when a bound covers the layer, else the WHY_NOT key saying why not."""
    if ld.model_type == "gpt2" or ld.model_type in POST_LN_ENCODERS:
        return None
    return rotary_obstacle(ld, layer)


def layer_weights(ld: Loaded, layer: int) -> MHAWeights | None:
    """The layer's attention in numerics' container, or None where no bound applies (for a
    rotary layer: the projections before rotation; see :func:`rotary_layer`)."""
    blk = get_path(ld.model, ld.spec.layers)[layer]
    H = ld.n_heads
    if ld.model_type == "gpt2":
        a = blk.attn
        E, hd = a.embed_dim, a.head_dim
        W, b = _np(a.c_attn.weight), a.c_attn.bias          # Conv1D: y = x W + b, W is (E, 3E)
        bq, bk, bv = (None,) * 3 if b is None else (_np(b[i * E:(i + 1) * E]).reshape(H, hd) for i in range(3))
        return MHAWeights(_per_head(W[:, :E], H, hd), _per_head(W[:, E:2 * E], H, hd), _per_head(W[:, 2 * E:], H, hd),
                          _np(a.c_proj.weight), 1.0 / float(a.scaling), bq, bk, bv,
                          None if a.c_proj.bias is None else _np(a.c_proj.bias), causal=True, name=f"layer {layer}")
    if ld.model_type in POST_LN_ENCODERS:
        s, o = blk.attention.self, blk.attention.output.dense
        hd = s.attention_head_size
        lin = lambda m: _per_head(_np(m.weight).T, H, hd)     # noqa: E731  nn.Linear: y = x Wᵀ + b
        return MHAWeights(lin(s.query), lin(s.key), lin(s.value), _np(o.weight).T, 1.0 / float(s.scaling),
                          _bias(s.query.bias, H, hd), _bias(s.key.bias, H, hd), _bias(s.value.bias, H, hd),
                          None if o.bias is None else _np(o.bias), causal=bool(s.is_causal), name=f"layer {layer}")
    if rotary_obstacle(ld, layer) is None:
        return _rotary_weights(ld, layer)
    return None


def _ln_radius(ln) -> float:
    """‖γ‖_∞ + RMS(β), rounded up (numerics.attention.ln_image_radius); γ = 1 without affine."""
    w, bias = getattr(ln, "weight", None), getattr(ln, "bias", None)
    return ln_image_radius(np.ones(ln.normalized_shape) if w is None else _np(w), None if bias is None else _np(bias))


def layer_radius(ld: Loaded, layer: int) -> float | None:
    blocks = get_path(ld.model, ld.spec.layers)
    if ld.model_type == "gpt2":
        return _ln_radius(blocks[layer].ln_1)
    if ld.model_type in POST_LN_ENCODERS:
        return _ln_radius(ld.model.embeddings.LayerNorm if layer == 0 else blocks[layer - 1].output.LayerNorm)
    norm = getattr(blocks[layer], "input_layernorm", None)
    if norm is not None and type(norm).__name__ in _RMS_NORMS:
        return rmsnorm_radius(_np(norm.weight))          # X6: RMS of an RMSNorm output ≤ ‖γ‖∞
    torch_ln = type(norm).__name__ == "LayerNorm" and type(norm).__module__.startswith("torch.nn")
    if ld.model_type in _LAYER_NORM_MODELS and (torch_ln or type(norm).__name__ in _PLAIN_LAYER_NORMS) \
            and len(getattr(norm, "normalized_shape", ())) == 1:
        return _ln_radius(norm)      # a LayerNorm over the hidden axis: ‖γ‖∞ + RMS(β) (1 without affine)
    return None


def _theta_one_rows(loc, w: MHAWeights) -> np.ndarray:
    """The local bound's rows with θ := 1, from the a and r that the θ_hi bound used."""
    vn = np.array([spectral_up(w.W_V[h]) for h in range(w.H)])[:, None]
    total = ((vn + loc.a * loc.r / w.tau) ** 2).sum(axis=0)
    return spectral_up(w.W_O) * np.sqrt(total) * math.sqrt(w.d / w.d_out) * (1 + FINAL_MARGIN)


class BoundsAccumulator:
    """Per layer, the C9 (rotary: X2) local bound at every captured token and the C10 (X3) global bound."""

    def __init__(self, ld: Loaded, layers: list[int], max_tokens: int | None = None):
        self.ld, self.layers, self.max_tokens = ld, layers, max_tokens
        self.obstacles = {i: layer_obstacle(ld, i) for i in layers}
        self.weights = {i: layer_weights(ld, i) if self.obstacles[i] is None else None for i in layers}
        self.rotary = {i: rotary_layer(ld, i) if self.weights[i] is not None else None for i in layers}
        self.applies = all(w is not None for w in self.weights.values())
        self.c9 = {i: [] for i in layers}       # per token: bound with certified θ_hi
        self.c9_one = {i: [] for i in layers}   # per token: the same bound with θ := 1
        self.theta = {i: [] for i in layers}    # θ_hi used, per head and token
        self.max_rms = {i: 0.0 for i in layers}
        self.gain = {i: 0.0 for i in layers}    # rotary layers: largest ‖M_p‖₂ of the tables used
        self.a_forms = {i: set() for i in layers}
        self._maps: dict = {}

    def _rotary_maps(self, rl: RotaryLayer, L: int) -> Rotary:
        key = (id(rl.rotary_emb), L)
        if key not in self._maps:
            self._maps[key] = rotary_maps(rl, L)
        return self._maps[key]

    def add(self, layer: int, X: np.ndarray) -> None:
        """X: (L, d) float64 attention input of one sequence."""
        w = self.weights[layer]
        if w is None or (self.max_tokens is not None and sum(map(len, self.c9[layer])) >= self.max_tokens):
            return      # whole sequences until the token budget is reached: C9 costs far more than certify
        rl = self.rotary[layer]
        if rl is None:
            loc = c9_bound(X, w)
            one = c9_bound(X, w, theta="one").per_row
        else:
            rope = self._rotary_maps(rl, X.shape[0])
            loc = c9_ext_bound(X, w, rope=rope, score_bias=window_bias(rl, X.shape[0]), cap=rl.cap)
            one = _theta_one_rows(loc, w)
            self.gain[layer] = max(self.gain[layer], rope.gain())
            self.a_forms[layer].add(loc.a_form)
        self.c9[layer].append(loc.per_row)
        self.c9_one[layer].append(one)
        self.theta[layer].append(loc.theta.ravel())
        self.max_rms[layer] = max(self.max_rms[layer], float(np.sqrt((X * X).mean(axis=1)).max()))

    def _why(self) -> str:
        mt = self.ld.model_type
        if self.applies:
            return APPLIES.get(mt, _ROTARY_APPLIES)
        kinds = sorted({k for k in self.obstacles.values() if k is not None})
        return "; ".join(WHY_NOT.get(k, WHY_NOT["unknown"]) for k in kinds) or WHY_NOT["unknown"]

    def result(self) -> dict:
        mt = self.ld.model_type
        out = {"model_type": mt, "c9_c10_apply": self.applies,
               "why": self._why(),
               "what": "C9: upper bound on ‖J_MHA(X)‖_(B→B) at the captured input X of each layer, per "
                       "output token (median and max over tokens), with the certified θ_hi of every row, "
                       "and with θ := 1 (the same bound without the θ factor); theta_factor = median over "
                       "tokens of bound(θ_hi)/bound(θ = 1). C10: the Lipschitz constant in ‖·‖_B on "
                       "D_R = {max_i RMS(x_i) ≤ R}, independent of L, with R = max(R_layernorm = ‖γ‖∞ + RMS(β) of the "
                       "LayerNorm feeding the layer, input_max_rms = the largest RMS among the captured inputs, "
                       "which float rounding can push a hair above R_layernorm); it bounds the θ factor by 1, "
                       "so its θ contribution is that of the worst case. For rotary layers the local bound is X2 "
                       "and the global one X3 (R_layernorm is then ‖γ‖∞ of the RMSNorm feeding the layer, X6, or "
                       "‖γ‖∞ + RMS(β) where that norm is a LayerNorm; "
                       "gain is the largest ‖M_p‖₂ of the rotary maps, 1 up to float rounding for plain RoPE; "
                       "a_form says which per-pair form X2 used); those are float64 values, not certified. "
                       "Bounds use all heads of a layer, whatever --heads selects, and the first sequences "
                       "until --bounds-tokens tokens per layer (see tokens).",
               "layers": []}
        for i in self.layers:
            rec = {"layer": i}
            w = self.weights[i]
            if w is not None and self.c9[i]:
                loc, one = np.concatenate(self.c9[i]), np.concatenate(self.c9_one[i])
                th = np.concatenate(self.theta[i])
                rec.update(tokens=int(loc.size), tau=w.tau, heads=w.H, causal=w.causal,
                           c9_local={"median": float(np.median(loc)), "max": float(loc.max()),
                                     "median_theta_one": float(np.median(one)), "max_theta_one": float(one.max()),
                                     "theta_factor": float(np.median(loc / one)),
                                     "theta_hi_median": float(np.median(th))})
                # Exact LayerNorm outputs lie in D_R; the float32 ones can exceed R by rounding
                # (~1e-7 relative), so R also covers the largest captured input: C10 then holds
                # at every input this probe saw.
                R_ln = layer_radius(self.ld, i)
                if R_ln is None:
                    rec.update(c10_global=None, why_no_global="the attention input is not the output of a "
                               "LayerNorm or RMSNorm this code knows, so there is no radius R")
                else:
                    R = max(R_ln, self.max_rms[i] * (1 + 1e-12))
                    rec.update(c10_global={"R": R, "R_layernorm": R_ln, "input_max_rms": self.max_rms[i],
                                           "bound": self._global(i, w, R)})
                rl = self.rotary[i]
                if rl is not None:
                    rec["rotary"] = {"gain": self._gain(i), "a_form": sorted(self.a_forms[i]),
                                     "sliding_window": rl.window, "softcap": rl.cap}
            else:
                rec.update(c9_local=None, c10_global=None)
            out["layers"].append(rec)
        return out

    def _gain(self, layer: int) -> float:
        """Gain for X3, for every length: the rope type's attention_scaling (1 for plain RoPE) with a
        1e-6 allowance for the model's float32 cos/sin tables, or more if a table seen had more."""
        rl = self.rotary[layer]
        return max(rl.attention_scaling * (1 + 1e-6), self.gain[layer])

    def _global(self, layer: int, w: MHAWeights, R: float) -> float:
        if self.rotary[layer] is None:
            return c10_bound(w, R)
        return c10_rope_bound(w, R, gain=self._gain(layer))
