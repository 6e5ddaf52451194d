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
    def f(Z):
        return mha_forward(Z, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, t["b_q"], t["b_k"],
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


# ----------------------------------------------------------------------------- beyond the paper (X2–X6)
#
# Scores with position-dependent maps on q and k (rotary embeddings, X2/X3), an additive bias that
# does not depend on X (ALiBi, relative buckets, masks; X4) and logit soft-capping (X5):
#
#   z_ij = cap((M_i q̃_i)ᵀ(M_j k̃_j)/τ) + B_ij ,   q̃_i = W_Qᵀx_i + b_q ,  k̃_j = W_Kᵀx_j + b_k ,
#
# cap(s) = c·tanh(s/c) (the identity without soft-capping), B_ij ∈ R ∪ {−∞} (−∞ masks key j for
# query i), M_p the rotary map of position p.  Values are not rotated.  Same precision contract as
# above: torch float64, not certified.

_PAIRINGS = ("half", "interleaved")


def _rope_partner(dk: int, pairing: str) -> tuple[np.ndarray, np.ndarray]:
    """(perm, sign) with rot(v)[a] = sign[a]·v[perm[a]]: transformers' rotate_half ("half": dim a
    with a + d_k/2) or the RoFormer/GPT-J rotate-every-two ("interleaved": 2a with 2a + 1)."""
    if dk % 2:
        raise ValueError(f"rotary embeddings need an even head width, got d_k = {dk}")
    h = dk // 2
    if pairing == "half":
        perm = np.concatenate([np.arange(h, dk), np.arange(h)])
        sign = np.concatenate([-np.ones(h), np.ones(h)])
    elif pairing == "interleaved":
        perm = np.arange(dk).reshape(h, 2)[:, ::-1].ravel()
        sign = np.tile([-1.0, 1.0], h)
    else:
        raise ValueError(f"unknown rotary pairing {pairing!r}; use one of {_PAIRINGS}")
    return perm, sign


@dataclass
class Rotary:
    """Rotary position maps M_p, p = 0…L−1, as cos/sin tables of shape (L, d_k):

        M_p v = cos[p] ⊙ v + sin[p] ⊙ rot(v),

    rot as in :func:`_rope_partner`.  With transformers' tables (cos[p, a] = cos[p, a + d_k/2] =
    cos(p·ω_a), likewise sin) each pair (a, a + d_k/2) is turned by the angle p·ω_a: after the
    permutation that puts partners side by side, M_p is block-diagonal with 2×2 rotations, hence
    orthogonal (times ``attention_scaling`` where a rope variant sets one).  Nothing here relies on
    that: the local bound (X2) holds for any linear M_p; :meth:`gain` bounds ‖M_p‖₂ for X3.
    """

    cos: np.ndarray
    sin: np.ndarray
    pairing: str = "half"

    def __post_init__(self):
        self.cos = np.asarray(self.cos, dtype=np.float64)
        self.sin = np.asarray(self.sin, dtype=np.float64)
        if self.cos.ndim != 2 or self.cos.shape != self.sin.shape:
            raise ValueError(f"Rotary: cos {self.cos.shape} and sin {self.sin.shape} must be equal (L, d_k) tables")
        if not (np.isfinite(self.cos).all() and np.isfinite(self.sin).all()):
            raise ValueError("Rotary: non-finite cos/sin table")
        self.perm, self.sign = _rope_partner(self.cos.shape[1], self.pairing)

    @classmethod
    def from_inv_freq(cls, inv_freq, L: int, *, offset: int = 0, scale: float = 1.0,
                      pairing: str = "half") -> "Rotary":
        """Tables for positions offset…offset+L−1 from the frequencies ω (d_k/2 of them), float64."""
        w = np.asarray(inv_freq, dtype=np.float64).ravel()
        ang = (np.arange(L, dtype=np.float64) + offset)[:, None] * w[None, :]
        if pairing == "half":
            ang = np.concatenate([ang, ang], axis=1)
        else:
            ang = np.repeat(ang, 2, axis=1)
        return cls(np.cos(ang) * scale, np.sin(ang) * scale, pairing)

    @property
    def L(self) -> int:
        return self.cos.shape[0]

    @property
    def dk(self) -> int:
        return self.cos.shape[1]

    def apply(self, V):
        """M_p v_p for V of shape (..., L, d_k) (numpy or torch)."""
        if torch.is_tensor(V):
            c, s = (torch.as_tensor(t, dtype=V.dtype, device=V.device) for t in (self.cos, self.sin))
            sg = torch.as_tensor(self.sign, dtype=V.dtype, device=V.device)
            return V * c + V[..., torch.as_tensor(self.perm)] * sg * s
        return V * self.cos + V[..., self.perm] * self.sign * self.sin

    def apply_t(self, V, rows=None):
        """M_pᵀ v for V of shape (..., L', d_k), with p = rows (default 0…L−1) along the L' axis.
        (M_pᵀ w)[b] = cos[p,b] w[b] + sin[p,π(b)] sign[π(b)] w[π(b)] since π is an involution."""
        c = self.cos if rows is None else self.cos[rows]
        s = self.sin if rows is None else self.sin[rows]
        return V * c + (V * self.sign * s)[..., self.perm]

    def matrix(self, p: int) -> np.ndarray:
        """M_p as a dense (d_k, d_k) matrix."""
        return self.apply(np.eye(self.dk)[:, None, :].repeat(self.L, axis=1))[:, p, :].T

    def gain(self) -> float:
        """max_p ‖M_p‖₂, from the 2×2 blocks on each partner pair (1 for exact rotations)."""
        a = np.arange(self.dk)
        a = a[a < self.perm]                       # one index per pair
        b = self.perm[a]
        # M_p restricted to (a, b): [[cos_a, sign_a sin_a], [sign_b sin_b, cos_b]]
        blk = np.empty((self.L, a.size, 2, 2))
        blk[..., 0, 0], blk[..., 0, 1] = self.cos[:, a], self.sign[a] * self.sin[:, a]
        blk[..., 1, 0], blk[..., 1, 1] = self.sign[b] * self.sin[:, b], self.cos[:, b]
        return float(np.linalg.norm(blk, ord=2, axis=(-2, -1)).max()) if a.size else 0.0


def softcap(S, c: float | None):
    """c·tanh(S/c) (gemma2's attention logit soft-capping); S unchanged for c = None."""
    if c is None:
        return S
    if not (c > 0 and math.isfinite(c)):
        raise ValueError(f"soft-capping constant must be finite and > 0, got {c!r}")
    return c * (torch.tanh(S / c) if torch.is_tensor(S) else np.tanh(np.asarray(S) / c))


def _bias_tensor(score_bias, H: int, L: int, like: torch.Tensor) -> torch.Tensor | None:
    if score_bias is None:
        return None
    B = torch.as_tensor(np.asarray(score_bias, dtype=np.float64) if not torch.is_tensor(score_bias) else score_bias,
                        dtype=like.dtype, device=like.device)
    if B.shape not in ((L, L), (H, L, L)):
        raise ValueError(f"score bias has shape {tuple(B.shape)}, expected ({L}, {L}) or ({H}, {L}, {L})")
    if torch.isnan(B).any() or (B == float("inf")).any():
        raise ValueError("score bias has NaN or +inf entries")
    return B


def scores_ext(X: torch.Tensor, W_Q, W_K, tau: float, b_q=None, b_k=None, causal: bool = False,
               rope: Rotary | None = None, score_bias=None, cap: float | None = None):
    """z = cap((M q̃)ᵀ(M k̃)/τ) + B (causal: −∞ above the diagonal), shape (H, L, L); differentiable."""
    Q = torch.einsum("ld,hdk->hlk", X, W_Q)
    K = torch.einsum("ld,hdk->hlk", X, W_K)
    if b_q is not None:
        Q = Q + b_q[:, None, :]
    if b_k is not None:
        K = K + b_k[:, None, :]
    L = X.shape[0]
    if rope is not None:
        if rope.L != L or rope.dk != Q.shape[2]:
            raise ValueError(f"rotary tables are {rope.L}×{rope.dk}, the input needs {L}×{Q.shape[2]}")
        Q, K = rope.apply(Q), rope.apply(K)
    S = softcap(torch.einsum("hik,hjk->hij", Q, K) / tau, cap)
    B = _bias_tensor(score_bias, W_Q.shape[0], L, S)
    if B is not None:
        S = S + B
    if causal:
        mask = torch.ones(L, L, dtype=torch.bool, device=X.device).tril()
        S = S.masked_fill(~mask, float("-inf"))
    return S


def mha_forward_ext(X: torch.Tensor, W_Q, W_K, W_V, W_O, tau: float, b_q=None, b_k=None, b_v=None,
                    b_o=None, causal: bool = False, *, rope: Rotary | None = None, score_bias=None,
                    cap: float | None = None) -> torch.Tensor:
    """:func:`mha_forward` with rotary maps, an X-independent score bias and soft-capping
    (X2–X5).  With none of them it computes the same function as :func:`mha_forward`."""
    P = torch.softmax(scores_ext(X, W_Q, W_K, tau, b_q, b_k, causal, rope, score_bias, cap), dim=-1)
    V = torch.einsum("ld,hdv->hlv", X, W_V)
    if b_v is not None:
        V = V + b_v[:, None, :]
    Y = torch.einsum("hij,hjv->ihv", P, V).reshape(X.shape[0], -1) @ W_O
    return Y if b_o is None else Y + b_o


def _as_t64(X) -> torch.Tensor:
    return X.to(torch.float64) if torch.is_tensor(X) else torch.as_tensor(np.asarray(X, dtype=np.float64))


def mha_ext(X, w: MHAWeights, **mods) -> torch.Tensor:
    """:func:`mha_forward_ext` with the weights of ``w``; mods: rope, score_bias, cap."""
    t = w.torch()
    return mha_forward_ext(_as_t64(X), t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, t["b_q"], t["b_k"],
                           t["b_v"], t["b_o"], w.causal, **mods)


def attention_probs_ext(X, w: MHAWeights, **mods) -> np.ndarray:
    """P^h of :func:`mha_forward_ext`, shape (H, L, L), float64 (not certified)."""
    t = w.torch()
    S = scores_ext(_as_t64(X), t["W_Q"], t["W_K"], w.tau, t["b_q"], t["b_k"], w.causal, **_score_mods(mods))
    return torch.softmax(S, dim=-1).numpy()


def _score_mods(mods: dict) -> dict:
    bad = set(mods) - {"rope", "score_bias", "cap"}
    if bad:
        raise TypeError(f"unknown score modifications {sorted(bad)}")
    return mods


def mha_jacobian_ext(X, w: MHAWeights, **mods) -> np.ndarray:
    """∂Y/∂X of :func:`mha_ext` by float64 autograd, shape (L, d_out, L, d)."""
    t = w.torch()
    f = lambda Z: mha_forward_ext(Z, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, t["b_q"], t["b_k"],  # noqa: E731
                                  t["b_v"], t["b_o"], w.causal, **_score_mods(mods))
    from torch.func import jacrev
    return jacrev(f)(_as_t64(X)).detach().numpy()


def score_parts(X, w: MHAWeights, h: int, rope: Rotary | None = None):
    """For head h: rotated queries q_i = M_i q̃_i and keys k_j = M_j k̃_j (L, d_k), and the two
    score gradients of every pair (X2):  ∂s_ij/∂x_i = W_Q M_iᵀ k_j =: u_ij,  ∂s_ij/∂x_j = W_K M_jᵀ q_i
    =: g_ij, each of shape (L, L, d) (s_ij before division by τ).  float64, not certified."""
    X = np.asarray(X, dtype=np.float64)
    Wq, Wk = w.W_Q[h], w.W_K[h]
    Q = X @ Wq + (0.0 if w.b_q is None else w.b_q[h])
    K = X @ Wk + (0.0 if w.b_k is None else w.b_k[h])
    L = X.shape[0]
    if rope is None:
        return Q, K, np.broadcast_to((K @ Wq.T)[None], (L, L, w.d)), np.broadcast_to((Q @ Wk.T)[:, None], (L, L, w.d))
    Q, K = rope.apply(Q), rope.apply(K)
    i = np.arange(L)
    U = rope.apply_t(np.broadcast_to(K[None], (L, L, K.shape[1])), rows=i[:, None]) @ Wq.T    # M_iᵀ k_j
    G = rope.apply_t(np.broadcast_to(Q[:, None], (L, L, Q.shape[1])), rows=i[None, :]) @ Wk.T  # M_jᵀ q_i
    return Q, K, U, G


def mha_jacobian_from_probs(X, w: MHAWeights, P: np.ndarray, *, rope: Rotary | None = None,
                            phi: np.ndarray | None = None) -> np.ndarray:
    """The Jacobian of (biased, rotary, soft-capped) MHA assembled from its attention rows P
    (H, L, L), in the layout of :func:`mha_jacobian` (X4):

      ∂Y_i/∂x_l = Σ_h W_O^{hT} [ P_il W_V^{hT} + Σ_j v_j ∂P_ij/∂x_l ],
      ∂P_i/∂x_l = C(p_i) ∂z_i/∂x_l,  ∂z_ij/∂x_l = φ_ij (δ_il u_ijᵀ + δ_jl g_ijᵀ)/τ,

    φ_ij = sech²(s_ij/(τc)) with soft-capping (``phi``, (H, L, L)), else 1.  The additive score bias
    does not appear: it enters only through P.  float64, not certified."""
    X = np.asarray(X, dtype=np.float64)
    L, d = X.shape
    dv = w.W_V.shape[2]
    J = np.zeros((L, w.d_out, L, d))
    for h in range(w.H):
        _, _, U, G = score_parts(X, w, h, rope)
        V = X @ w.W_V[h] + (0.0 if w.b_v is None else w.b_v[h])       # (L, dv)
        Wo = w.W_O[h * dv:(h + 1) * dv]                                 # (dv, d_out)
        p = P[h]
        ph = np.ones((L, L)) if phi is None else phi[h]
        C = np.einsum("ij,jk->ijk", p, np.eye(L)) - p[:, :, None] * p[:, None, :]   # C(p_i), (L, L, L)
        VC = np.einsum("jv,ijm->ivm", V, C)                              # Σ_j v_j C_i[j, m]
        T1 = np.einsum("ivm,im,imd->ivd", VC, ph, U) / w.tau            # δ_il part
        T2 = np.einsum("ivl,il,ild->ivld", VC, ph, G) / w.tau           # δ_jl part
        T2 = T2 + np.einsum("il,vd->ivld", p, w.W_V[h].T)               # value path
        T2[np.arange(L), :, np.arange(L), :] += T1
        J += np.einsum("ivld,vo->iold", T2, Wo)
    return J


def rmsnorm(x, gamma, eps: float = 0.0) -> np.ndarray:
    """RMSNorm (Llama family), float64: y = γ ⊙ x / √(mean(x²) + eps) over the last axis (X6)."""
    x = np.asarray(x, dtype=np.float64)
    g = as_float64(gamma)
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"rmsnorm: eps must be finite and ≥ 0, got {eps!r}")
    ms = (x * x).mean(axis=-1, keepdims=True) + eps
    if (ms <= 0).any():
        raise ValueError("rmsnorm: x = 0 with eps = 0 has no normalisation")
    return g * x / np.sqrt(ms)


def rmsnorm_radius(gamma) -> float:
    """R with RMSNorm(x) ∈ D_R for every x and every eps ≥ 0: ‖γ‖_∞ (X6), rounded up by 1e-12.

    Why: mean((γ⊙x)²) ≤ ‖γ‖²_∞ mean(x²) ≤ ‖γ‖²_∞ (mean(x²) + eps), so ‖y‖_RMS ≤ ‖γ‖_∞; equality
    needs eps = 0 (or x = 0) and x supported where |γ| is largest.  (Unlike LayerNorm there is no
    centring and no β, so this is the whole radius.)"""
    return float(np.abs(as_float64(gamma)).max() * (1 + 1e-12))


def alibi_bias(H: int, L: int, scale: float = 1.0) -> np.ndarray:
    """ALiBi score bias −m_h·|i − j| with the geometric slopes m_h = 2^(−8(h+1)/H), (H, L, L) (X4)."""
    slopes = scale * 2.0 ** (-8.0 * (np.arange(H) + 1) / H)
    dist = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :]).astype(np.float64)
    return -slopes[:, None, None] * dist[None]


def t5_bucket(rel: np.ndarray, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """T5's relative-position bucket of rel = j − i (the mapping of transformers' T5Attention)."""
    rel = np.asarray(rel, dtype=np.int64)
    out = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        out += (rel > 0).astype(np.int64) * num_buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (np.log(np.maximum(rel, 1) / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return out + np.where(rel < max_exact, rel, large)


def t5_bias(table: np.ndarray, L: int, bidirectional: bool = True, max_distance: int = 128) -> np.ndarray:
    """Score bias B_hij = table[h, bucket(j − i)] for a (H, num_buckets) table, (H, L, L) (X4)."""
    table = np.asarray(table, dtype=np.float64)
    rel = np.arange(L)[None, :] - np.arange(L)[:, None]
    return table[:, t5_bucket(rel, bidirectional, table.shape[1], max_distance)]
