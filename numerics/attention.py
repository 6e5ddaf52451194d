"""Multi-head attention with explicit per-head weights (C9, C10), and adapters from torch.

Convention (claim C9): rows x_i of X ∈ R^{L×d}; head h has W_Q^h, W_K^h ∈
R^{d×d_k}, W_V^h ∈ R^{d×d_v};  s_ij = q_iᵀk_j with q_i = W_Q^{hT}x_i + b_q^h,
k_j = W_K^{hT}x_j + b_k^h;  P^h = rowsoftmax(S^h/τ) (optionally causal: j ≤ i);
head output P^h(XW_V^h + 1b_v^{hT});  Y = [head_1 … head_H] W_O + 1b_Oᵀ.
The paper's MHA has no biases; they are kept here so that trained weights are
evaluated as they are (numerics/attention_bounds.py says how the bounds treat them).

Precision contract: :func:`mha_forward` is torch float64 (or whatever dtype
the caller passes); the adapters copy weights exactly (widening to float64
is exact).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class MHAWeights:
    """Per-head weights, float64 numpy.  Shapes: W_Q, W_K (H, d, d_k); W_V (H, d, d_v);
    W_O (H·d_v, d_out); biases b_q, b_k (H, d_k), b_v (H, d_v), b_o (d_out) or None."""

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray
    tau: float
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None
    b_o: np.ndarray | None = None
    causal: bool = False
    name: str = field(default="")

    def __post_init__(self):
        for k in ("W_Q", "W_K", "W_V", "W_O", "b_q", "b_k", "b_v", "b_o"):
            v = getattr(self, k)
            if v is None:
                continue
            v = np.asarray(v, dtype=np.float64)
            if not np.isfinite(v).all():
                raise ValueError(f"{self.name or 'MHAWeights'}: {k} has non-finite entries")
            setattr(self, k, v)
        H, d, dk = self.W_Q.shape
        if self.W_K.shape != (H, d, dk):
            raise ValueError(f"{self.name}: W_K shape {self.W_K.shape} != W_Q shape {self.W_Q.shape}")
        if self.W_V.ndim != 3 or self.W_V.shape[:2] != (H, d):
            raise ValueError(f"{self.name}: W_V shape {self.W_V.shape} does not start with (H, d) = {(H, d)}")
        dv = self.W_V.shape[2]
        if self.W_O.ndim != 2 or self.W_O.shape[0] != H * dv:
            raise ValueError(f"{self.name}: W_O shape {self.W_O.shape} needs H·d_v = {H * dv} rows")
        for k, shape in (("b_q", (H, dk)), ("b_k", (H, dk)), ("b_v", (H, dv)), ("b_o", (self.W_O.shape[1],))):
            v = getattr(self, k)
            if v is not None and v.shape != shape:
                raise ValueError(f"{self.name}: {k} has shape {v.shape}, expected {shape}")
        if not (isinstance(self.tau, (int, float)) and math.isfinite(self.tau) and self.tau > 0):
            raise ValueError(f"{self.name}: temperature τ must be a finite positive number, got {self.tau!r}")
        self.tau = float(self.tau)

    @property
    def H(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d(self) -> int:
        return self.W_Q.shape[1]

    @property
    def d_out(self) -> int:
        return self.W_O.shape[1]

    def has_bias(self) -> bool:
        return any(getattr(self, k) is not None for k in ("b_q", "b_k", "b_v", "b_o"))

    def torch(self, requires_grad: bool = False) -> dict:
        """The weights as float64 torch tensors (for autograd over the weights)."""
        out = {}
        for k in ("W_Q", "W_K", "W_V", "W_O", "b_q", "b_k", "b_v", "b_o"):
            v = getattr(self, k)
            out[k] = None if v is None else torch.tensor(v, dtype=torch.float64, requires_grad=requires_grad)
        return out


def mha_forward(X: torch.Tensor, W_Q, W_K, W_V, W_O, tau: float, b_q=None, b_k=None, b_v=None,
                b_o=None, causal: bool = False) -> torch.Tensor:
    """Multi-head attention Y = [P¹(XW_V¹+b_v¹) … Pᴴ(XW_Vᴴ+b_vᴴ)] W_O + b_O for X of shape (L, d).

    Differentiable in X and in every weight; float64 if the inputs are.
    """
    Q = torch.einsum("ld,hdk->hlk", X, W_Q)                       # (H, L, d_k)
    K = torch.einsum("ld,hdk->hlk", X, W_K)
    V = torch.einsum("ld,hdv->hlv", X, W_V)                       # (H, L, d_v)
    if b_q is not None:
        Q = Q + b_q[:, None, :]
    if b_k is not None:
        K = K + b_k[:, None, :]
    if b_v is not None:
        V = V + b_v[:, None, :]
    S = torch.einsum("hik,hjk->hij", Q, K) / tau                   # (H, L, L)
    if causal:
        L = X.shape[0]
        mask = torch.ones(L, L, dtype=torch.bool, device=X.device).tril()
        S = S.masked_fill(~mask, float("-inf"))
    P = torch.softmax(S, dim=-1)
    O = torch.einsum("hij,hjv->ihv", P, V).reshape(X.shape[0], -1)  # (L, H·d_v), heads in order
    Y = O @ W_O
    if b_o is not None:
        Y = Y + b_o
    return Y


def mha(X, w: MHAWeights) -> torch.Tensor:
    """:func:`mha_forward` with the weights of ``w`` (X: (L, d) tensor or array; float64)."""
    X = torch.as_tensor(np.asarray(X, dtype=np.float64) if not torch.is_tensor(X) else X, dtype=torch.float64)
    t = w.torch()
    return mha_forward(X, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, t["b_q"], t["b_k"], t["b_v"],
                       t["b_o"], w.causal)


def attention_probs(X, w: MHAWeights) -> np.ndarray:
    """P^h for every head, shape (H, L, L), float64 (torch softmax; not certified)."""
    X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    t = w.torch()
    Q = torch.einsum("ld,hdk->hlk", X, t["W_Q"])
    K = torch.einsum("ld,hdk->hlk", X, t["W_K"])
    if t["b_q"] is not None:
        Q = Q + t["b_q"][:, None, :]
    if t["b_k"] is not None:
        K = K + t["b_k"][:, None, :]
    S = torch.einsum("hik,hjk->hij", Q, K) / w.tau
    if w.causal:
        L = X.shape[0]
        S = S.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(S, dim=-1).numpy()


def mha_jacobian(X, w: MHAWeights) -> np.ndarray:
    """∂Y/∂X at X by float64 autograd, shape (L, d_out, L, d) (the layout of numerics.norms)."""
    X = torch.as_tensor(np.asarray(X, dtype=np.float64))
    t = w.torch()
    f = lambda Z: mha_forward(Z, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, t["b_q"], t["b_k"],
                              t["b_v"], t["b_o"], w.causal)
    from torch.func import jacrev  # reverse mode, vectorised over outputs: fast for small L·d
    return jacrev(f)(X).detach().numpy()


# ----------------------------------------------------------------------------- adapters

def _split_qkv(in_w: np.ndarray, in_b: np.ndarray | None, E: int, H: int, name: str):
    """Split a packed (3E, E) projection (nn.Linear convention y = x Wᵀ + b) into per-head
    W_Q, W_K, W_V of shape (H, E, E/H), q, k, v in that order along the output dim."""
    if in_w.shape != (3 * E, E):
        raise ValueError(f"{name}: packed q/k/v weight has shape {in_w.shape}, expected {(3 * E, E)}")
    if E % H:
        raise ValueError(f"{name}: embedding width {E} is not divisible by n_head = {H}")
    hd = E // H
    mats, biases = [], []
    for part in range(3):
        Wp = in_w[part * E:(part + 1) * E]                    # (E_out, E_in)
        mats.append(np.stack([Wp[h * hd:(h + 1) * hd].T for h in range(H)]))   # (H, E_in, hd)
        if in_b is not None:
            bp = in_b[part * E:(part + 1) * E]
            biases.append(np.stack([bp[h * hd:(h + 1) * hd] for h in range(H)]))
        else:
            biases.append(None)
    return mats, biases, hd


def as_float64(t) -> np.ndarray:
    """A tensor or array as a float64 numpy array (exact widening from lower precisions)."""
    return t.detach().cpu().to(torch.float64).numpy() if torch.is_tensor(t) else np.asarray(t, np.float64)


def from_torch_mha(m: torch.nn.MultiheadAttention, causal: bool = False) -> MHAWeights:
    """Weights of a ``torch.nn.MultiheadAttention`` (q = k = v = input; τ = √(E/H)).

    Self-attention with kdim = vdim = embed_dim only; add_bias_kv and
    add_zero_attn are refused (they add extra key positions).  Dropout is not
    modelled: compare in eval mode.
    """
    if not m._qkv_same_embed_dim or m.in_proj_weight is None:
        raise ValueError("from_torch_mha: kdim/vdim different from embed_dim are not supported")
    if m.bias_k is not None or m.add_zero_attn:
        raise ValueError("from_torch_mha: add_bias_kv / add_zero_attn are not supported")
    E, H = m.embed_dim, m.num_heads
    (Wq, Wk, Wv), (bq, bk, bv), hd = _split_qkv(as_float64(m.in_proj_weight), None if m.in_proj_bias is None
                                                 else as_float64(m.in_proj_bias), E, H, "nn.MultiheadAttention")
    bo = None if m.out_proj.bias is None else as_float64(m.out_proj.bias)
    return MHAWeights(Wq, Wk, Wv, as_float64(m.out_proj.weight).T, math.sqrt(hd), bq, bk, bv, bo, causal=causal,
                      name="nn.MultiheadAttention")


def from_packed_qkv(w_qkv, b_qkv, w_out, b_out, n_head: int, *, causal: bool, name: str) -> MHAWeights:
    """Attention weights from a packed q/k/v projection and an output projection.

    nn.Linear conventions (y = x Wᵀ + b): ``w_qkv`` is (3E, E) with q, k, v stacked
    along the output dim, ``w_out`` is (E, E); biases may be None.  τ = √(E/H).
    A mis-shaped tensor is a one-line ValueError naming ``name``.
    """
    w_qkv, w_out = as_float64(w_qkv), as_float64(w_out)
    E = w_qkv.shape[1] if w_qkv.ndim == 2 else -1
    (Wq, Wk, Wv), (bq, bk, bv), hd = _split_qkv(w_qkv, None if b_qkv is None else as_float64(b_qkv), E, n_head, name)
    if w_out.shape != (E, E):
        raise ValueError(f"{name}: output projection has shape {w_out.shape}, expected {(E, E)}")
    bo = None if b_out is None else as_float64(b_out)
    return MHAWeights(Wq, Wk, Wv, w_out.T, math.sqrt(hd), bq, bk, bv, bo, causal=causal, name=name)


def ln_image_radius(gamma, beta=None) -> float:
    """R with LN(x) ∈ D_R for every x: ‖γ‖_∞ + RMS(β) (the C10 domain after a pre-LN).

    Why: LN(x) = γ⊙ĉ + β with ‖ĉ‖₂ ≤ √d (ĉ = c/s, ‖c‖² = dσ² ≤ d s²), so
    ‖LN(x)‖₂ ≤ ‖γ‖_∞√d + ‖β‖₂.  float64, rounded up by a relative 1e-12.
    """
    g = as_float64(gamma)
    b = np.zeros_like(g) if beta is None else as_float64(beta)
    return float((np.abs(g).max() + math.sqrt(float((b * b).mean()))) * (1 + 1e-12))
