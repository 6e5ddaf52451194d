"""Memory model of the cluster runs: counts by hand, bytes against autograd."""
import dataclasses
import math

import pytest

from gpu_experiments import config, memory_model as mm

M774 = config.get_config("gpt2-774m").model


def test_gpt2_large_parameter_count_by_hand():
    # GPT-2 large, vocabulary 50257, tied embeddings (the published count):
    C, V, T, L = 1280, 50257, 1024, 36
    block = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C)
    assert block == 19_677_440
    assert V * C + T * C + L * block + 2 * C == 774_030_080
    assert mm.param_count(dataclasses.replace(M774, vocab_size=50257)) == 774_030_080
    # the configured model pads the vocabulary to 50304: 47 more rows of wte
    assert mm.param_count(M774) == 774_030_080 + 47 * 1280 == 774_090_240


# gpt2-774m's width and vocabulary with 2 Blocks (the count is linear in n_layer; the rehearsal
# compares the formula with the full 36-Block model it trains)
@pytest.mark.parametrize("m", [dataclasses.replace(M774, n_layer=2), config.get_config("tiny-cpu").model,
                               config.get_config("small-cpu").model,
                               dataclasses.replace(M774, post_ln=True, bias=False, n_layer=1)])
def test_formula_matches_the_real_model(m):
    shapes = mm.model_param_shapes(m)  # built on the meta device: no memory
    assert mm.param_count(m) == sum(math.prod(s) for s in shapes.values())
    linear = sum(math.prod(s) for n, s in shapes.items() if len(s) == 2 and "wpe" not in n)
    assert mm.cast_weight_count(m) == linear


def test_state_bytes_are_count_times_dtype_size():
    cfg = config.get_config("gpt2-774m")
    n = 774_090_240
    ddp = mm.per_gpu(cfg, "ddp", 8, 80 * 10**9)
    assert (ddp["params"], ddp["grads"], ddp["optimizer"]) == (4 * n, 4 * n, 8 * n)
    assert ddp["params"] == 3_096_360_960
    fsdp = mm.per_gpu(cfg, "fsdp2", 8, 80 * 10**9)
    assert (fsdp["params"], fsdp["grads"], fsdp["optimizer"]) == (4 * n // 8, 4 * n // 8, 8 * n // 8)
    one = mm.per_gpu(cfg, "none", 1, 80 * 10**9)
    assert one["parallel_buffers"] == 2 * mm.cast_weight_count(cfg.model)  # bf16 weight copies only
    assert ddp["parallel_buffers"] == one["parallel_buffers"] + 4 * n  # + DDP gradient buckets
    for r in (ddp, fsdp, one):
        assert r["total"] == sum(r[k] for k in ("params", "grads", "optimizer", "parallel_buffers", "activations"))
    with pytest.raises(ValueError):
        mm.per_gpu(cfg, "zero3", 8, 80 * 10**9)


def test_fsdp2_counts_mixed_precision_and_accumulation():
    # FSDP2 with MixedPrecisionPolicy(bf16, fp32): bf16 unsharded root + 2 Blocks (params and
    # grads), no autocast weight copies, and every unsharded grad in fp32 while accumulating.
    cfg = config.get_config("gpt2-774m")
    m, n = cfg.model, 774_090_240
    p_block = mm.block_param_count(m)
    p_root = n - m.n_layer * p_block
    r = mm.per_gpu(cfg, "fsdp2", 8, 80 * 10**9)  # micro-batch 16: 512 / (16 x 8) = 4 per rank
    assert r["accum"] == 4 and r["unsharded_accum_grads"] == 4 * n
    assert r["parallel_buffers"] == 2 * p_root * 2 + 2 * p_block * 4 + 4 * n
    one_per_rank = mm.per_gpu(cfg, "fsdp2", 8, 80 * 10**9, micro_batch=64)
    assert one_per_rank["accum"] == 1 and one_per_rank["unsharded_accum_grads"] == 0
    fp32 = mm.per_gpu(cfg, "fsdp2", 8, 80 * 10**9, act=4)  # CPU / float32: fp32 all-gathers
    assert fp32["parallel_buffers"] == 4 * p_root * 2 + 4 * p_block * 4 + 4 * n
    assert mm.per_gpu(cfg, "ddp", 8, 80 * 10**9)["accum"] == 4


SMALL = config.GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=128, vocab_size=320)


@pytest.mark.parametrize("m", [config.get_config("tiny-cpu").model, SMALL])
@pytest.mark.parametrize("act", [4, 2])
def test_saved_bytes_match_autograd(m, act):
    meas = mm.measure_saved_bytes(m, act=act)
    pred = mm.saved_per_token(m, act)
    assert meas["block"] == pred["block"]  # exact, per token per Block
    # the head: the model counts targets apart from the input ids (8 bytes); the loss scalar is < 1 byte/token
    assert 0 <= pred["head"] - meas["head"] <= 8
    assert meas["weight_casts"] == (2 * mm.cast_weight_count(m) if act == 2 else 0)


def test_saved_bytes_detect_a_wrong_model():
    # negative control: a Block list missing the GELU input would not match the measurement
    m = config.get_config("tiny-cpu").model
    assert mm.measure_saved_bytes(m, act=4)["block"] != mm.saved_per_token(m, 4)["block"] - 4 * 4 * m.n_embd


def test_activations_scale_and_checkpointing_saves():
    m = M774
    ws = mm.loss_workspace_bytes(m)  # fixed: the loss's fp32 chunk buffers
    assert ws == 2 * 4 * m.vocab_size * 1024
    one, two = (mm.activation_bytes(m, b, 2, False) - ws for b in (1, 2))
    assert two == 2 * one
    # only Block inputs + one Block recomputed; the logits (vocabulary 50304) then dominate
    assert mm.activation_bytes(m, 1, 2, True) < one / 2
    assert mm.activation_bytes(m, 1, 4, False) > one  # fp32 activations are larger


def test_largest_micro_batch_is_the_boundary():
    cfg = config.get_config("gpt2-774m")
    for par in ("ddp", "fsdp2"):
        for ac in (False, True):
            for world, cap in mm.CLUSTERS.values():
                mb = mm.largest_micro_batch(cfg, par, world, cap, ac)
                assert mb >= 1 and mm.per_gpu(cfg, par, world, cap, mb, ac)["fits"]
                if mb < cfg.batch_tokens // 1024 // world:  # the largest that fits, not the last tried
                    assert not any(mm.per_gpu(cfg, par, world, cap, b, ac)["fits"]
                                   for b in range(mb + 1, cfg.batch_tokens // 1024 // world + 1))
                d = mm.largest_micro_batch(cfg, par, world, cap, ac, divides=True)
                assert 1 <= d <= mb and (512 // world) % d == 0
    rows = mm.table(cfg)
    assert len(rows) == 8 and {r["cluster"] for r in rows} == set(mm.CLUSTERS)
    # more memory never lowers the largest micro-batch
    for r80 in (r for r in rows if r["cluster"] == "8x80GB"):
        r141 = next(r for r in rows if r["cluster"] == "8x141GB" and r["parallel"] == r80["parallel"]
                    and r["checkpointing"] == r80["checkpointing"])
        assert r141["largest_micro_batch"] >= r80["largest_micro_batch"]
