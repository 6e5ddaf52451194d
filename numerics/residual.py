"""Pre-LN and post-LN residual sublayers and their Jacobians (C12, C13, C15).

Tokens are rows of ``X ∈ R^{L×d}``; Jacobians act on the row-major flattening
(index ``t·d + j``), so a per-token map has a block-diagonal Jacobian.

* pre-LN  ``x ↦ x + F(LN x)``:       ``J_pre  = I + J_F(LN x) · blockdiag J_LN(x_t)``   (C12)
* post-LN ``x ↦ LN(x + F(x))``:      ``J_post = blockdiag J_LN(y_t) · (I + J_F(x))``    (C13)
* N post-LN sublayers:  ``J_total = Π_l blockdiag J_LN(y_l) (I + J_F_l)`` (later layers on
  the left); the term that takes no ``J_F`` is ``Π_l blockdiag J_LN(y_l)`` (C15).

A sublayer F is any torch float64 map (L, d) → (L, d) (the checks build seeded
random attention and MLP blocks in proofs/checks/_sublayers.py); ``J_F`` comes from
autograd, ``J_LN`` from the closed form in :mod:`numerics.layernorm`.  Precision contract: float64 throughout (entrywise
errors of a few ulps times the size of the products).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .layernorm import ln_jacobian

Sublayer = Callable[[torch.Tensor], torch.Tensor]  # (L, d) -> (L, d), float64


@dataclass(frozen=True)
class Norm:
    gamma: torch.Tensor
    beta: torch.Tensor
    eps: float

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(X, (X.shape[-1],), self.gamma, self.beta, self.eps)


def jacobian(f: Sublayer, X: torch.Tensor) -> torch.Tensor:
    """Autograd Jacobian of ``f`` at X, flattened to (L·d, L·d).  float64."""
    n = X.numel()
    J = torch.autograd.functional.jacobian(lambda v: f(v.view_as(X)).reshape(-1), X.reshape(-1), vectorize=True)
    return J.reshape(n, n)


def blockdiag_ln_jacobian(X: torch.Tensor, norm: Norm) -> torch.Tensor:
    """``blockdiag_t J_LN(x_t)`` from the closed form (C11), as (L·d, L·d) float64."""
    blocks = ln_jacobian(X.detach().numpy(), norm.gamma.numpy(), norm.eps)  # (L, d, d)
    return torch.block_diag(*[torch.from_numpy(b) for b in blocks])


def pre_ln(F: Sublayer, norm: Norm) -> Sublayer:
    return lambda X: X + F(norm(X))


def post_ln(F: Sublayer, norm: Norm) -> Sublayer:
    return lambda X: norm(X + F(X))


def pre_ln_jacobian(X: torch.Tensor, F: Sublayer, norm: Norm) -> torch.Tensor:
    """C12 composition ``I + J_F(LN X) · blockdiag J_LN(x_t)``."""
    n = X.numel()
    return torch.eye(n, dtype=X.dtype) + jacobian(F, norm(X).detach()) @ blockdiag_ln_jacobian(X, norm)


def post_ln_jacobian(X: torch.Tensor, F: Sublayer, norm: Norm) -> torch.Tensor:
    """C13 composition ``blockdiag J_LN(y_t) · (I + J_F(X))`` with ``y = X + F(X)``."""
    n = X.numel()
    Y = (X + F(X)).detach()
    return blockdiag_ln_jacobian(Y, norm) @ (torch.eye(n, dtype=X.dtype) + jacobian(F, X))


def post_ln_stack(X: torch.Tensor, layers: list[tuple[Sublayer, Norm]]):
    """Forward through post-LN sublayers; returns the per-layer factors of the chain rule.

    Returns ``(out, lns, ifs)`` with ``lns[l] = blockdiag J_LN(y_l)`` and
    ``ifs[l] = I + J_F_l(x_l)`` (so the Jacobian is Π_l lns[l] @ ifs[l], later on the left).
    """
    lns, ifs = [], []
    n = X.numel()
    for F, norm in layers:
        Y = (X + F(X)).detach()
        lns.append(blockdiag_ln_jacobian(Y, norm))
        ifs.append(torch.eye(n, dtype=X.dtype) + jacobian(F, X))
        X = norm(Y).detach()
    return X, lns, ifs


def chain_product(lns, ifs) -> torch.Tensor:
    """``Π_l lns[l] @ ifs[l]`` with later layers on the left (C15)."""
    J = torch.eye(lns[0].shape[0], dtype=lns[0].dtype)
    for A, B in zip(lns, ifs):
        J = A @ B @ J
    return J


def chain_expansion(lns, jfs):
    """All 2^N terms of ``Π_l J_LN_l (I + J_F_l)``, keyed by the set of layers that take J_F.

    The empty key is the LayerNorm-only term ``Π_l J_LN_l``.  float64.
    """
    N = len(lns)
    n = lns[0].shape[0]
    terms = {}
    for pick in itertools.product((0, 1), repeat=N):
        T = torch.eye(n, dtype=lns[0].dtype)
        for l in range(N):
            T = lns[l] @ (jfs[l] if pick[l] else torch.eye(n, dtype=T.dtype)) @ T
        terms[tuple(l for l in range(N) if pick[l])] = T
    return terms


def offdiag_block_max(J: torch.Tensor, L: int) -> float:
    """Largest |entry| outside the L diagonal d×d token blocks of J."""
    d = J.shape[0] // L
    mask = torch.block_diag(*[torch.ones(d, d, dtype=torch.bool)] * L)
    return float(J.abs().masked_fill(mask, 0).max()) if L > 1 else 0.0


def spectral_norm(J: torch.Tensor) -> float:
    """``‖J‖₂`` by float64 SVD (relative error ~1e-15·cond)."""
    return float(np.linalg.norm(J.detach().numpy(), 2))
