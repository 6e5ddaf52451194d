"""C12, C13, C15: pre-LN vs post-LN residual sublayers, against float64 autograd.

Sublayers are one multi-head attention block (mixes tokens) or one GELU MLP
(tokenwise) with seeded random float64 weights (numerics.residual).  Tolerances are
relative to the size of the matrices involved; float64 rounding here is ~1e-15.
"""
from __future__ import annotations

import math

import torch

from numerics.residual import (chain_expansion, chain_product, jacobian, offdiag_block_max, post_ln, post_ln_jacobian,
                               post_ln_stack, pre_ln, pre_ln_jacobian, spectral_norm)

from ..registry import check
from ._sublayers import attention_sublayer, mlp_sublayer, random_norm
from ._util import nanmax, nanmin, refuted, verdict, worst

TOL = 1e-12


def _le(x: float) -> str:
    """A rounding-level error as a power-of-ten ceiling, so the committed text is stable."""
    return f"≤ 1e{math.ceil(math.log10(max(x, 1e-300)))}"


def _cases(tier: str, seed: int):
    """(name, X, F, norm) for L = 3 tokens, d ∈ {6, 8}, attention and MLP sublayers."""
    gen = torch.Generator().manual_seed(seed)
    reps = 2 if tier == "quick" else 10
    out = []
    for r in range(reps):
        for d, heads in ((6, 2), (8, 4)):
            X = torch.randn(3, d, generator=gen, dtype=torch.float64) * (0.1 + 3 * r)
            norm = random_norm(d, gen, eps=(1e-5, 0.0, 1e-12)[r % 3])
            out.append(("attention", X, attention_sublayer(d, heads, gen, causal=bool(r % 2)), norm))
            out.append(("mlp", X, mlp_sublayer(d, 4 * d, gen), norm))
    return out


def _residual_jacobians(wrap, cases):
    """(X, F, norm, J) per case, J the float64 autograd Jacobian of the residual block wrap(F, norm)."""
    for _, X, F, norm in cases:
        yield X, F, norm, jacobian(wrap(F, norm), X)


def _identity_gap(J: torch.Tensor) -> float:
    """‖J − I‖₂: C13's lower bound 1 says a post-LN block never has an additive identity path."""
    return spectral_norm(J - torch.eye(J.shape[0], dtype=J.dtype))


def _rel(A: torch.Tensor, B: torch.Tensor) -> float:
    return float((A - B).abs().max() / max(float(B.abs().max()), 1.0))


@check("C12", "float64", scope="L = 3, d ∈ {6, 8}, attention and MLP sublayers, eps ∈ {0, 1e-12, 1e-5}")
def c12_pre_ln_identity_path(tier):
    worst_comp, worst_one, n = 0.0, 0.0, 0
    for _, X, F, norm in _cases(tier, 12):
        J = jacobian(pre_ln(F, norm), X)                     # autograd of x ↦ x + F(LN x)
        worst_comp = nanmax(worst_comp, _rel(pre_ln_jacobian(X, F, norm), J))
        L, d = X.shape
        for t in range(L):                                   # J_pre (e_t ⊗ 1) = e_t ⊗ 1
            one = torch.zeros(L * d, dtype=X.dtype)
            one[t * d:(t + 1) * d] = 1
            worst_one = nanmax(worst_one, float((J @ one - one).abs().max()) / max(spectral_norm(J), 1.0))
        n += 1
    ok = worst_comp < TOL and worst_one < TOL
    return verdict(ok, f"{n} sublayers, L = 3, d ≤ 8",
                   f"J_pre = I + J_F J_LN to {_le(worst_comp)}; J_pre·1_t = 1_t to {_le(worst_one)} "
                   f"(relative; < {TOL:.0e} required)" if ok else
                   f"composition error {worst_comp:.1e}, identity-path error {worst_one:.1e}",
                   sublayers=n, worst_composition=worst_comp, worst_identity=worst_one)


@check("C13", "float64", scope="L = 3, d ∈ {6, 8}, attention and MLP sublayers, eps ∈ {0, 1e-12, 1e-5}")
def c13_post_ln_left_kernel(tier):
    worst_comp, worst_kernel, min_gap, n = 0.0, 0.0, float("inf"), 0
    for X, F, norm, J in _residual_jacobians(post_ln, _cases(tier, 13)):   # J of x ↦ LN(x + F(x))
        worst_comp = nanmax(worst_comp, _rel(post_ln_jacobian(X, F, norm), J))
        L, d = X.shape
        nJ = spectral_norm(J)
        for t in range(L):                                   # (e_t ⊗ 1/γ)ᵀ J_post = 0
            w = torch.zeros(L * d, dtype=X.dtype)
            w[t * d:(t + 1) * d] = 1 / norm.gamma
            worst_kernel = nanmax(worst_kernel, float((w @ J).norm() / (w.norm() * max(nJ, 1.0))))
        min_gap = nanmin(min_gap, _identity_gap(J))
        n += 1
    ok = worst_comp < TOL and worst_kernel < TOL and min_gap >= 1 - TOL
    return verdict(ok, f"{n} sublayers, L = 3, d ≤ 8",
                   f"J_post = J_LN(I + J_F) to {_le(worst_comp)}; ‖(1/γ)ᵀJ_post‖ {_le(worst_kernel)}; "
                   f"min ‖J_post − I‖₂ = {min_gap:.4f} (≥ 1 required)",
                   sublayers=n, worst_composition=worst_comp, worst_kernel=worst_kernel, min_gap=min_gap)


@check("C13", "float64", scope="pre-LN sublayers with small F: '‖J − I‖₂ ≥ 1' for pre-LN", negative_control=True,
       guards=("c13_post_ln_left_kernel",))
def c13_gap_for_pre_ln_refuted(tier):
    # Wrong variant: the post-LN gap ‖J − I‖₂ ≥ 1 also for pre-LN, measured by the positive
    # check's own Jacobian and gap code with the block wrapper swapped.  With a small branch F
    # the pre-LN Jacobian is I + small, so the gap must fail: the check discriminates.
    gen = torch.Generator().manual_seed(131)
    cases = []
    for d, heads in ((6, 2), (8, 4)):
        X = torch.randn(3, d, generator=gen, dtype=torch.float64)
        norm = random_norm(d, gen)
        for F in (attention_sublayer(d, heads, gen, scale=0.05), mlp_sublayer(d, 4 * d, gen, scale=0.05)):
            cases.append(("pre-LN", X, F, norm))
    gaps = [_identity_gap(J) for *_, J in _residual_jacobians(pre_ln, cases)]
    top = worst(gaps)                                  # +inf if any gap is NaN
    return refuted(top < 0.9, f"{len(gaps)} pre-LN sublayers",
                   f"pre-LN ‖J − I‖₂ ≤ {top:.3f} < 1: the post-LN gap is not a property of every residual"
                   if top < 0.9 else "", max_gap=top)


@check("C15", "float64", scope="post-LN stacks of N ∈ {2, 3} sublayers (4 in full), L = 3, d = 6")
def c15_post_ln_chain_rule(tier):
    gen = torch.Generator().manual_seed(15)
    depths = (2, 3) if tier == "quick" else (2, 3, 4)
    worst_chain, worst_expand, ln_off, total_off, n = 0.0, 0.0, 0.0, float("inf"), 0
    for N in depths:
        for rep in range(2):
            d, L = 6, 3
            layers = [((attention_sublayer(d, 2, gen) if l % 2 == 0 else mlp_sublayer(d, 24, gen)),
                       random_norm(d, gen, eps=1e-5)) for l in range(N)]
            X = torch.randn(L, d, generator=gen, dtype=torch.float64)

            def stack(Z):
                for F, norm in layers:
                    Z = post_ln(F, norm)(Z)
                return Z
            J = jacobian(stack, X)
            _, lns, ifs = post_ln_stack(X, layers)
            worst_chain = nanmax(worst_chain, _rel(chain_product(lns, ifs), J))
            eye = torch.eye(L * d, dtype=torch.float64)
            terms = chain_expansion(lns, [B - eye for B in ifs])
            worst_expand = nanmax(worst_expand, _rel(sum(terms.values()), J))
            ln_only = terms[()]
            ln_off = nanmax(ln_off, offdiag_block_max(ln_only, L))          # exactly 0 expected
            total_off = nanmin(total_off, offdiag_block_max(J, L))          # attention mixes tokens
            n += 1
    ok = worst_chain < TOL and worst_expand < TOL and ln_off == 0.0 and total_off > 1e-6
    return verdict(ok, f"{n} stacks, N ≤ {max(depths)}",
                   f"J_total = Π J_LN(y_l)(I + J_F_l) to {_le(worst_chain)}; the 2^N-term expansion sums to it "
                   f"to {_le(worst_expand)}; LayerNorm-only term has off-diagonal token blocks exactly 0 while "
                   f"J_total's are not (min max-entry {total_off:.2e})",
                   stacks=n, worst_chain=worst_chain, worst_expansion=worst_expand, ln_only_offdiag=ln_off)
