"""GPT-2 model: naming, tying, init, attention numerics, post-LN flag."""
import math

import numpy as np
import torch

from gpu_experiments.config import GPTConfig, get_config
from gpu_experiments.model import GPT, param_groups
from gpu_experiments.probe import attention_rows

SMALL = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=12, vocab_size=40)


def test_parameter_names_match_gpt2():
    names = {n for n, _ in GPT(SMALL).named_parameters(remove_duplicate=False)}
    want = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
            "transformer.ln_f.bias", "lm_head.weight"}
    for i in range(2):
        for s in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                  "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                  "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
            want.add(f"transformer.h.{i}.{s}")
    assert names == want


def test_tied_embeddings():
    m = GPT(SMALL)
    assert m.lm_head.weight is m.transformer.wte.weight


def test_774m_parameter_count():
    # GPT-2 large has 774,030,080 parameters at vocab 50257 (public figure);
    # padding the vocab to 50304 adds 47 rows of width 1280.
    with torch.device("meta"):
        m = GPT(get_config("gpt2-774m").model)
    assert m.num_params() == 774_030_080 + 47 * 1280


def test_init_scales():
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=8, n_head=4, n_embd=256, block_size=32, vocab_size=512)
    m = GPT(cfg)
    blk = m.transformer.h[3]
    assert abs(blk.attn.c_attn.weight.std().item() / 0.02 - 1) < 0.02
    assert abs(blk.mlp.c_proj.weight.std().item() / (0.02 / math.sqrt(16)) - 1) < 0.02
    assert abs(blk.attn.c_proj.weight.std().item() / (0.02 / math.sqrt(16)) - 1) < 0.03
    assert blk.attn.c_attn.bias.abs().max().item() == 0.0


def test_weight_decay_groups():
    m = GPT(SMALL)
    decay, no_decay = param_groups(m, 0.1)
    assert all(p.dim() >= 2 for p in decay["params"]) and decay["weight_decay"] == 0.1
    assert all(p.dim() == 1 for p in no_decay["params"]) and no_decay["weight_decay"] == 0.0
    assert sum(p.numel() for g in (decay, no_decay) for p in g["params"]) == m.num_params()


def _naive_probs(q, k):
    """Reference causal softmax with Python loops in float64 (independent of probe.py)."""
    T, hs = q.shape
    out = np.zeros((T, T))
    for i in range(T):
        s = [float(np.dot(q[i], k[j])) / math.sqrt(hs) for j in range(i + 1)]
        mx = max(s)
        e = [math.exp(v - mx) for v in s]
        out[i, :i + 1] = [v / sum(e) for v in e]
    return out


def test_probe_rows_match_naive_softmax_and_sdpa_output():
    torch.manual_seed(1)
    m = GPT(SMALL).double()
    attn = m.transformer.h[0].attn
    x = torch.randn(2, SMALL.block_size, SMALL.n_embd, dtype=torch.float64)
    qkv = attn.c_attn(x).detach()
    queries = np.array([[[1, 5, 11]] * 2] * 2)  # (nh, B, k)
    rows = attention_rows(qkv, SMALL.n_head, queries)
    hs = SMALL.n_embd // SMALL.n_head
    q, k, v = qkv.split(SMALL.n_embd, dim=2)
    for h in range(2):
        for b in range(2):
            ref = _naive_probs(q[b, :, h * hs:(h + 1) * hs].numpy(), k[b, :, h * hs:(h + 1) * hs].numpy())
            for j, qi in enumerate(queries[h, b]):
                assert np.allclose(rows[h, b, j], ref[qi], rtol=1e-12, atol=1e-15)
                assert np.all(rows[h, b, j, qi + 1:] == 0.0)
    # The fused SDPA path computes the same attention: rebuild its output from the naive probabilities.
    y = attn(x).detach()
    heads = []
    for h in range(2):
        pb = [torch.from_numpy(_naive_probs(q[b, :, h * hs:(h + 1) * hs].numpy(),
                                            k[b, :, h * hs:(h + 1) * hs].numpy())) for b in range(2)]
        heads.append(torch.stack([pb[b] @ v[b, :, h * hs:(h + 1) * hs] for b in range(2)]))
    y_ref = attn.c_proj(torch.cat(heads, dim=-1)).detach()
    assert torch.allclose(y, y_ref, rtol=1e-10, atol=1e-12)


def test_post_ln_flag():
    torch.manual_seed(2)
    pre = GPT(SMALL).double()
    post = GPT(GPTConfig(**{**SMALL.__dict__, "post_ln": True})).double()
    post.load_state_dict(pre.state_dict())
    idx = torch.randint(0, SMALL.vocab_size, (2, SMALL.block_size))
    assert not torch.allclose(pre(idx), post(idx))
    blk = post.transformer.h[0]
    x = torch.randn(1, 5, SMALL.n_embd, dtype=torch.float64)
    h = blk.ln_1(x + blk.attn(x))
    assert torch.allclose(blk(x), blk.ln_2(h + blk.mlp(h)))
    blk_pre = pre.transformer.h[0]
    h = x + blk_pre.attn(blk_pre.ln_1(x))
    assert torch.allclose(blk_pre(x), h + blk_pre.mlp(blk_pre.ln_2(h)))


def test_initial_loss_near_uniform():
    torch.manual_seed(3)
    m = GPT(SMALL)
    idx = torch.randint(0, SMALL.vocab_size, (4, SMALL.block_size))
    # Targets independent of the inputs (tied embeddings favour repeating the input token).
    tgt = torch.randint(0, SMALL.vocab_size, (4, SMALL.block_size))
    loss = torch.nn.functional.cross_entropy(m(idx).view(-1, SMALL.vocab_size), tgt.view(-1))
    assert abs(loss.item() - math.log(SMALL.vocab_size)) < 0.1
