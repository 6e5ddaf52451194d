"""numerics.residual: pre-LN / post-LN sublayer Jacobians and the post-LN chain rule (C12, C13, C15)."""
import torch

from numerics.residual import (blockdiag_ln_jacobian, chain_expansion, chain_product, jacobian, offdiag_block_max,
                               post_ln, post_ln_jacobian, post_ln_stack, pre_ln, pre_ln_jacobian, spectral_norm)
from proofs.checks._sublayers import attention_sublayer, mlp_sublayer, random_norm


def _setup(seed=0, L=3, d=6):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(L, d, generator=gen, dtype=torch.float64)
    return gen, X, random_norm(d, gen)


def test_pre_ln_composition_matches_autograd():
    gen, X, norm = _setup()
    for F in (attention_sublayer(6, 2, gen), mlp_sublayer(6, 12, gen)):
        assert torch.allclose(pre_ln_jacobian(X, F, norm), jacobian(pre_ln(F, norm), X), atol=1e-13)


def test_pre_ln_adds_identity_on_ones():
    gen, X, norm = _setup(1)
    J = jacobian(pre_ln(attention_sublayer(6, 2, gen), norm), X)
    one = torch.zeros(18, dtype=torch.float64)
    one[6:12] = 1.0  # token 1 shifted by a constant
    assert torch.allclose(J @ one, one, atol=1e-13)


def test_post_ln_left_kernel_and_gap():
    gen, X, norm = _setup(2)
    F = attention_sublayer(6, 3, gen)
    J = jacobian(post_ln(F, norm), X)
    assert torch.allclose(post_ln_jacobian(X, F, norm), J, atol=1e-13)
    w = torch.zeros(18, dtype=torch.float64)
    w[12:] = 1 / norm.gamma
    assert (w @ J).abs().max() < 1e-13
    assert spectral_norm(J - torch.eye(18, dtype=torch.float64)) >= 1 - 1e-12


def test_blockdiag_ln_jacobian_is_tokenwise_autograd():
    _, X, norm = _setup(3)
    assert torch.allclose(blockdiag_ln_jacobian(X, norm), jacobian(norm, X), atol=1e-13)


def test_chain_rule_and_expansion():
    gen, X, _ = _setup(4)
    layers = [(attention_sublayer(6, 2, gen), random_norm(6, gen)), (mlp_sublayer(6, 12, gen), random_norm(6, gen)),
              (attention_sublayer(6, 3, gen), random_norm(6, gen))]

    def stack(Z):
        for F, n in layers:
            Z = post_ln(F, n)(Z)
        return Z
    J = jacobian(stack, X)
    out, lns, ifs = post_ln_stack(X, layers)
    assert torch.allclose(out, stack(X), atol=1e-14)
    assert torch.allclose(chain_product(lns, ifs), J, atol=1e-12)
    eye = torch.eye(18, dtype=torch.float64)
    terms = chain_expansion(lns, [B - eye for B in ifs])
    assert len(terms) == 8
    assert torch.allclose(sum(terms.values()), J, atol=1e-12)
    assert offdiag_block_max(terms[()], 3) == 0.0 and offdiag_block_max(J, 3) > 1e-3


def test_offdiag_block_max_by_hand():
    A = torch.zeros(4, 4, dtype=torch.float64)
    A[0, 1], A[2, 3], A[0, 3] = 5.0, 6.0, -2.0  # only (0, 3) is outside the 2×2 diagonal blocks
    assert offdiag_block_max(A, 2) == 2.0
