"""Read the attention weights of this project's GPT-2 checkpoints (nanoGPT layout).

These readers name one experiment's checkpoint layout, so they live with the code
that trains it; the math (``from_packed_qkv``, ``ln_image_radius``) is in numerics.
"""
from __future__ import annotations

from numerics.attention import MHAWeights, as_float64, from_packed_qkv, ln_image_radius


def strip_prefix(sd: dict) -> dict:
    """Drop wrappers such as '_orig_mod.' (torch.compile) or 'module.' (DDP) before 'transformer.'."""
    out = {}
    for k, v in sd.items():
        i = k.find("transformer.")
        out[k[i:] if i >= 0 else k] = v
    return out


def from_nanogpt_state_dict(sd: dict, n_layer: int, n_head: int, n_embd: int) -> list[MHAWeights]:
    """Per-layer attention weights of a nanoGPT-style GPT (causal, τ = √(n_embd/n_head)).

    Reads transformer.h.{i}.attn.c_attn.{weight,bias} (q, k, v split along the
    output dim) and transformer.h.{i}.attn.c_proj.{weight,bias}; biases are
    optional.  A missing or mis-shaped tensor is a one-line error naming it.
    """
    sd = strip_prefix(sd)
    layers = []
    for i in range(n_layer):
        p = f"transformer.h.{i}.attn."
        for k in (p + "c_attn.weight", p + "c_proj.weight"):
            if k not in sd:
                raise KeyError(f"state dict has no tensor {k!r} (n_layer = {n_layer})")
        w = as_float64(sd[p + "c_attn.weight"])
        if w.shape != (3 * n_embd, n_embd):
            raise ValueError(f"{p}c_attn.weight: packed q/k/v weight has shape {w.shape}, "
                             f"expected {(3 * n_embd, n_embd)}")
        wo = as_float64(sd[p + "c_proj.weight"])
        if wo.shape != (n_embd, n_embd):
            raise ValueError(f"{p}c_proj.weight has shape {wo.shape}, expected {(n_embd, n_embd)}")
        layers.append(from_packed_qkv(w, sd.get(p + "c_attn.bias"), wo,
                                      sd.get(p + "c_proj.bias"), n_head, causal=True, name=f"layer {i}"))
    return layers


def nanogpt_ln1_radius(sd: dict, layer: int) -> float:
    """:func:`ln_image_radius` of block ``layer``'s ln_1 in a nanoGPT state dict (pre-LN, C10)."""
    sd = strip_prefix(sd)
    p = f"transformer.h.{layer}.ln_1."
    if p + "weight" not in sd:
        raise KeyError(f"state dict has no tensor {p + 'weight'!r}")
    return ln_image_radius(sd[p + "weight"], sd.get(p + "bias"))
