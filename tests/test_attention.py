"""numerics.attention: the float64 MHA, its Jacobian and the torch / nanoGPT adapters."""
import numpy as np
import pytest
import torch

from gpu_experiments.nanogpt_weights import from_nanogpt_state_dict, nanogpt_ln1_radius
from numerics.attention import MHAWeights, from_packed_qkv, from_torch_mha, ln_image_radius, mha, mha_jacobian


class NanoAttn(torch.nn.Module):
    """A hand-written nanoGPT-style CausalSelfAttention (c_attn, c_proj, n_head, n_embd)."""

    def __init__(self, n_embd, n_head, bias=True):
        super().__init__()
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = torch.nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):                                        # x: (T, C)
        T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=1)
        q, k, v = (t.view(T, self.n_head, C // self.n_head).transpose(0, 1) for t in (q, k, v))  # (nh, T, hs)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(0, 1).reshape(T, C))


class NanoBlock(torch.nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(n_embd)
        self.attn = NanoAttn(n_embd, n_head)


def _nano_sd(n_layer=2, n_embd=8, n_head=2, seed=0):
    torch.manual_seed(seed)
    tr = torch.nn.Module()
    tr.h = torch.nn.ModuleList([NanoBlock(n_embd, n_head) for _ in range(n_layer)])
    root = torch.nn.Module()
    root.transformer = tr
    root.double()
    for p in root.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return root


def test_torch_mha_adapter_matches_module():
    torch.manual_seed(1)
    m = torch.nn.MultiheadAttention(12, 3, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(1, 7, 12, dtype=torch.float64)
    ref = m(x, x, x, need_weights=False)[0][0]
    w = from_torch_mha(m)
    assert w.H == 3 and w.tau == 2.0
    assert torch.allclose(mha(x[0], w), ref, atol=1e-12, rtol=1e-12)


def test_torch_mha_adapter_causal():
    torch.manual_seed(2)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ref = m(x, x, x, attn_mask=mask, need_weights=False)[0][0]
    assert torch.allclose(mha(x[0], from_torch_mha(m, causal=True)), ref, atol=1e-12)


def test_nanogpt_adapter_matches_module():
    root = _nano_sd()
    sd = {"_orig_mod." + k: v for k, v in root.state_dict().items()}   # torch.compile prefix is stripped
    ws = from_nanogpt_state_dict(sd, n_layer=2, n_head=2, n_embd=8)
    x = torch.randn(6, 8, dtype=torch.float64)
    for i, w in enumerate(ws):
        assert w.causal and w.tau == 2.0
        ref = root.transformer.h[i].attn(x)
        assert torch.allclose(mha(x, w), ref, atol=1e-12)


def test_nanogpt_missing_tensor_message():
    with pytest.raises(KeyError, match=r"transformer\.h\.0\.attn\.c_attn\.weight"):
        from_nanogpt_state_dict({}, 1, 2, 8)


def test_ln1_radius_bounds_layernorm_outputs():
    root = _nano_sd()
    R = nanogpt_ln1_radius(root.state_dict(), 1)
    ln = root.transformer.h[1].ln_1
    x = torch.randn(2000, 8, dtype=torch.float64) * torch.logspace(-3, 3, 2000, dtype=torch.float64)[:, None]
    with torch.no_grad():
        rms = ln(x).pow(2).mean(dim=1).sqrt()
    assert float(rms.max()) <= R


def test_ln_image_radius_by_hand_and_packed_shape_errors():
    # ‖γ‖∞ = 3, RMS(β) = 1 ⇒ R = 4 (rounded up by a relative 1e-12)
    R = ln_image_radius(np.array([2.0, -3.0]), np.array([1.0, -1.0]))
    assert 4.0 <= R <= 4.0 * (1 + 2e-12)
    assert ln_image_radius(np.array([0.5, -0.25])) >= 0.5
    with pytest.raises(ValueError, match="output projection"):
        from_packed_qkv(np.zeros((24, 8)), None, np.zeros((8, 7)), None, 2, causal=True, name="blk")


def test_jacobian_matches_finite_differences():
    rng = np.random.default_rng(5)
    H, d, dk = 2, 3, 2
    w = MHAWeights(rng.standard_normal((H, d, dk)), rng.standard_normal((H, d, dk)),
                   rng.standard_normal((H, d, dk)), rng.standard_normal((H * dk, d)), tau=1.3,
                   b_q=rng.standard_normal((H, dk)), causal=True)
    X = rng.standard_normal((4, d))
    J = mha_jacobian(X, w)
    h = 1e-6
    for i, c in [(0, 0), (2, 1), (3, 2)]:
        E = np.zeros_like(X)
        E[i, c] = h
        fd = (mha(X + E, w) - mha(X - E, w)).numpy() / (2 * h)
        assert np.allclose(J[:, :, i, c], fd, atol=1e-7)


def test_weights_shape_error_names_field():
    with pytest.raises(ValueError, match="W_K"):
        MHAWeights(np.zeros((1, 2, 2)), np.zeros((1, 3, 2)), np.zeros((1, 2, 2)), np.zeros((2, 2)), tau=1.0)
    with pytest.raises(ValueError, match="τ"):
        MHAWeights(np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.zeros((2, 2)), tau=0.0)
