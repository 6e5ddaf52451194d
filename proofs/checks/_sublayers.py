"""Seeded random float64 sublayers and LayerNorms: the instances of the C12, C13, C15 checks."""
from __future__ import annotations

import torch

from numerics.residual import Norm, Sublayer


def random_norm(d: int, gen: torch.Generator, eps: float = 1e-5) -> Norm:
    """A LayerNorm with generic γ (no zeros, not constant) and β."""
    gamma = 1.0 + 0.5 * torch.randn(d, generator=gen, dtype=torch.float64)
    return Norm(gamma, 0.1 * torch.randn(d, generator=gen, dtype=torch.float64), eps)


def mlp_sublayer(d: int, hidden: int, gen: torch.Generator, scale: float = 1.0) -> Sublayer:
    """Tokenwise GELU MLP ``W2 gelu(W1 x + b1) + b2`` with random float64 weights."""
    W1 = scale * torch.randn(hidden, d, generator=gen, dtype=torch.float64) / d ** 0.5
    W2 = scale * torch.randn(d, hidden, generator=gen, dtype=torch.float64) / hidden ** 0.5
    b1 = 0.1 * torch.randn(hidden, generator=gen, dtype=torch.float64)
    b2 = 0.1 * torch.randn(d, generator=gen, dtype=torch.float64)
    return lambda X: torch.nn.functional.gelu(X @ W1.T + b1) @ W2.T + b2


def attention_sublayer(d: int, heads: int, gen: torch.Generator, scale: float = 1.0,
                       causal: bool = False) -> Sublayer:
    """Multi-head softmax attention ``[P¹XW_V¹ … P^HXW_V^H] W_O`` (mixes tokens)."""
    if d % heads:
        raise ValueError(f"d={d} is not divisible by heads={heads}")
    W = [scale * torch.randn(d, d, generator=gen, dtype=torch.float64) / d ** 0.5 for _ in range(4)]
    hs = d // heads

    def f(X: torch.Tensor) -> torch.Tensor:
        L = X.shape[0]
        q, k, v = [(X @ W[i]).view(L, heads, hs).transpose(0, 1) for i in range(3)]  # (H, L, hs)
        scores = q @ k.transpose(1, 2) / hs ** 0.5                               # (H, L, L)
        if causal:
            scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v                                   # (H, L, hs)
        return out.transpose(0, 1).reshape(L, d) @ W[3]
    return f
