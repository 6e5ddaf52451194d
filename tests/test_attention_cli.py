"""gpu_experiments.attention_bounds on a small random GPT from gpu_experiments.model."""
import pytest
import torch

from gpu_experiments.nanogpt_weights import from_nanogpt_state_dict
from numerics.attention import mha

model_mod = pytest.importorskip("gpu_experiments.model")
from gpu_experiments.attention_bounds import attention_inputs, evaluate_model  # noqa: E402
from gpu_experiments.config import GPTConfig  # noqa: E402


def _model(post_ln=False):
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=32, vocab_size=64, post_ln=post_ln)
    m = model_mod.GPT(cfg, init_std=0.3).double().eval()
    return m


def test_adapter_reproduces_model_attention():
    m = _model()
    tok = torch.arange(12) % 64
    ws = from_nanogpt_state_dict(m.state_dict(), 2, 2, 16)
    for w, X, blk in zip(ws, attention_inputs(m, tok), m.transformer.h):
        with torch.no_grad():
            ref = blk.attn(torch.from_numpy(X)[None])[0]
        assert torch.allclose(mha(X, w), ref, atol=1e-10)


def test_evaluate_preln_consistency():
    rows = evaluate_model(_model(), torch.arange(20) % 64)
    assert len(rows) == 2
    for r in rows:
        assert r["input_in_D_R"] is True
        assert r["local_max"] <= r["global_bound"]          # C9 at a point of D_R ≤ C10 on D_R
        assert 0 < r["theta_effect"] <= 1
        assert r["local_median"] <= r["local_median_theta1"]


def test_evaluate_postln_has_no_global_bound():
    rows = evaluate_model(_model(post_ln=True), torch.arange(10) % 64)
    assert all(r["global_bound"] is None for r in rows)
