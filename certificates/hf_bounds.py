"""C9/C10 for Hugging Face models: weights into numerics' container, radii, and where they apply.

The kernel (numerics/attention.py, numerics/attention_bounds.py) bounds the map
X ↦ [P¹XW_V¹ … PᴴXW_Vᴴ]W_O with scores s_ij = q_iᵀk_j / τ, q = XW_Q + b_q, k = XW_K + b_k,
one fixed bilinear form W_Q^h W_K^{hT} per head.  Which models have exactly that form:

* GPT-2: yes (learned absolute positions are added before the block; q, k, v come from
  one Conv1D, biases are kept; τ = 1/scaling, which covers scale_attn_weights = False
  and scale_attn_by_inverse_layer_idx).  Causal.  C10's radius: the attention input is
  ln_1's output, so R = ‖γ‖_∞ + RMS(β) of ln_1 (pre-LN).
* BERT: yes, bidirectional (causal if is_decoder).  C10's radius: every layer's input is
  a LayerNorm output (embeddings.LayerNorm for layer 0, the previous layer's
  output.LayerNorm after it; post-LN), so the same R formula holds for that LayerNorm.
* Llama: no.  Rotary position embeddings rotate q_i and k_j by position-dependent
  rotations, so s_ij = x_iᵀ W_Q R_{j−i} W_Kᵀ x_j: the bilinear form changes with the
  position pair and neither bound's derivation (nor the kernel) covers it.  GQA alone
  would not be an obstacle (a shared key/value projection is a per-head copy).

Precision contract: weights are copied exactly (float32 → float64 widening); the bounds
are numerics.attention_bounds' (upper bounds under its stated assumptions) at the
float64 widening of the attention inputs the model computed.
"""
from __future__ import annotations

import numpy as np

from numerics.attention import MHAWeights, ln_image_radius
from numerics.attention import as_float64 as _np
from numerics.attention_bounds import c9_bound, c10_bound

from .hf_model import Loaded, get_path

WHY_NOT = {
    "llama": "rotary position embeddings: the score of query i and key j is x_iᵀ W_Q R_(j−i) W_Kᵀ x_j, a "
             "bilinear form that depends on the position pair, while C9/C10 (numerics.attention_bounds) assume "
             "one fixed W_Q^h W_K^hᵀ per head (grouped-query attention alone would be fine: a shared key/value "
             "projection is a per-head copy)",
}
APPLIES = {
    "gpt2": "GPT-2 self-attention is exactly the kernel's MHA (causal, with biases, τ = 1/scaling); "
            "C10's radius R = ‖γ‖∞ + RMS(β) of ln_1, whose output is the attention input (pre-LN)",
    "bert": "BERT self-attention is exactly the kernel's MHA (bidirectional, with biases, τ = 1/scaling; "
            "W_O = attention.output.dense); C10's radius R = ‖γ‖∞ + RMS(β) of the LayerNorm whose output "
            "is the layer's input (embeddings.LayerNorm, then the previous layer's output.LayerNorm; post-LN)",
}


def _per_head(M: np.ndarray, H: int, hd: int) -> np.ndarray:
    """(d, H·hd) columns → (H, d, hd)."""
    return np.stack([M[:, h * hd:(h + 1) * hd] for h in range(H)])


def _bias(b, H, hd):
    return None if b is None else _np(b).reshape(H, hd)


def layer_weights(ld: Loaded, layer: int) -> MHAWeights | None:
    """The layer's attention in numerics' container, or None where C9/C10 do not apply."""
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
    if ld.model_type == "bert":
        s, o = blk.attention.self, blk.attention.output.dense
        hd = s.attention_head_size
        lin = lambda m: _per_head(_np(m.weight).T, H, hd)     # noqa: E731  nn.Linear: y = x Wᵀ + b
        return MHAWeights(lin(s.query), lin(s.key), lin(s.value), _np(o.weight).T, 1.0 / float(s.scaling),
                          _bias(s.query.bias, H, hd), _bias(s.key.bias, H, hd), _bias(s.value.bias, H, hd),
                          None if o.bias is None else _np(o.bias), causal=bool(s.is_causal), name=f"layer {layer}")
    return None


def _ln_radius(ln) -> float:
    """‖γ‖_∞ + RMS(β), rounded up (numerics.attention.ln_image_radius)."""
    bias = getattr(ln, "bias", None)
    return ln_image_radius(_np(ln.weight), None if bias is None else _np(bias))


def layer_radius(ld: Loaded, layer: int) -> float | None:
    blocks = get_path(ld.model, ld.spec.layers)
    if ld.model_type == "gpt2":
        return _ln_radius(blocks[layer].ln_1)
    if ld.model_type == "bert":
        return _ln_radius(ld.model.embeddings.LayerNorm if layer == 0 else blocks[layer - 1].output.LayerNorm)
    return None


class BoundsAccumulator:
    """Per layer, the C9 local bound at every captured token and the C10 global bound."""

    def __init__(self, ld: Loaded, layers: list[int], max_tokens: int | None = None):
        self.ld, self.layers, self.max_tokens = ld, layers, max_tokens
        self.weights = {i: layer_weights(ld, i) for i in layers}
        self.applies = all(w is not None for w in self.weights.values())
        self.c9 = {i: [] for i in layers}       # per token: bound with certified θ_hi
        self.c9_one = {i: [] for i in layers}   # per token: the same bound with θ := 1
        self.theta = {i: [] for i in layers}    # θ_hi used, per head and token
        self.max_rms = {i: 0.0 for i in layers}

    def add(self, layer: int, X: np.ndarray) -> None:
        """X: (L, d) float64 attention input of one sequence."""
        w = self.weights[layer]
        if w is None or (self.max_tokens is not None and sum(map(len, self.c9[layer])) >= self.max_tokens):
            return      # whole sequences until the token budget is reached: C9 costs far more than certify
        loc = c9_bound(X, w)
        one = c9_bound(X, w, theta="one")
        self.c9[layer].append(loc.per_row)
        self.c9_one[layer].append(one.per_row)
        self.theta[layer].append(loc.theta.ravel())
        self.max_rms[layer] = max(self.max_rms[layer], float(np.sqrt((X * X).mean(axis=1)).max()))

    def result(self) -> dict:
        mt = self.ld.model_type
        out = {"model_type": mt, "c9_c10_apply": self.applies,
               "why": APPLIES.get(mt) if self.applies else WHY_NOT.get(mt, "architecture not covered"),
               "what": "C9: upper bound on ‖J_MHA(X)‖_(B→B) at the captured input X of each layer, per "
                       "output token (median and max over tokens), with the certified θ_hi of every row, "
                       "and with θ := 1 (the same bound without the θ factor); theta_factor = median over "
                       "tokens of bound(θ_hi)/bound(θ = 1). C10: the Lipschitz constant in ‖·‖_B on "
                       "D_R = {max_i RMS(x_i) ≤ R}, independent of L, with R = max(R_layernorm = ‖γ‖∞ + RMS(β) of the "
                       "LayerNorm feeding the layer, input_max_rms = the largest RMS among the captured inputs, "
                       "which float rounding can push a hair above R_layernorm); it bounds the θ factor by 1, "
                       "so its θ contribution is that of the worst case. "
                       "Bounds use all heads of a layer, whatever --heads selects, and the first sequences "
                       "until --bounds-tokens tokens per layer (see tokens).",
               "layers": []}
        for i in self.layers:
            rec = {"layer": i}
            w = self.weights[i]
            if w is not None and self.c9[i]:
                loc, one = np.concatenate(self.c9[i]), np.concatenate(self.c9_one[i])
                th = np.concatenate(self.theta[i])
                # Exact LayerNorm outputs lie in D_R; the float32 ones can exceed R by rounding
                # (~1e-7 relative), so R also covers the largest captured input: C10 then holds
                # at every input this probe saw.
                R_ln = layer_radius(self.ld, i)
                R = max(R_ln, self.max_rms[i] * (1 + 1e-12))
                rec.update(tokens=int(loc.size), tau=w.tau, heads=w.H, causal=w.causal,
                           c9_local={"median": float(np.median(loc)), "max": float(loc.max()),
                                     "median_theta_one": float(np.median(one)), "max_theta_one": float(one.max()),
                                     "theta_factor": float(np.median(loc / one)),
                                     "theta_hi_median": float(np.median(th))},
                           c10_global={"R": R, "R_layernorm": R_ln, "input_max_rms": self.max_rms[i],
                                       "bound": c10_bound(w, R)})
            else:
                rec.update(c9_local=None, c10_global=None)
            out["layers"].append(rec)
        return out
