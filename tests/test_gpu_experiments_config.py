"""Configs: frozen, selected by name, type-checked key=value overrides."""
import dataclasses

import pytest

from gpu_experiments import config


def test_gpt2_774m_matches_public_recipe():
    c = config.get_config("gpt2-774m")
    m = c.model
    assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size) == (36, 20, 1280, 1024, 50304)
    assert (c.lr, c.warmup_steps, c.batch_tokens) == (2.5e-4, 700, 524288)
    assert (c.beta1, c.beta2, c.weight_decay, c.grad_clip, c.dtype) == (0.9, 0.95, 0.1, 1.0, "bfloat16")
    assert c.ckpt_steps == (0, 100, 300, 1000, 3000, 10000)
    assert c.seeds == (1, 2, 3)
    assert not m.post_ln


def test_configs_are_frozen_and_known_names():
    c = config.get_config("tiny-cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.lr = 1.0
    assert {"gpt2-774m", "tiny-cpu", "small-cpu"} <= set(config.CONFIGS)
    with pytest.raises(KeyError, match="unknown config"):
        config.get_config("gpt2-xxl")


def test_small_cpu_shape():
    m = config.get_config("small-cpu").model
    assert (m.n_layer, m.n_embd, m.block_size) == (6, 256, 256)


def test_overrides_are_typed():
    c = config.apply_overrides(config.get_config("tiny-cpu"),
                               ["lr=0.5", "n_layer=3", "model.post_ln=true", "ckpt_steps=0,5,40",
                                "parallel=fsdp2", "max_steps=40"])
    assert c.lr == 0.5 and c.model.n_layer == 3 and c.model.post_ln is True
    assert c.ckpt_steps == (0, 5, 40) and c.parallel == "fsdp2"
    assert isinstance(c.max_steps, int)


def test_override_errors():
    base = config.get_config("tiny-cpu")
    with pytest.raises(ValueError, match="unknown key 'learning_rate'"):
        config.apply_overrides(base, ["learning_rate=1"])
    with pytest.raises(ValueError, match="max_steps"):
        config.apply_overrides(base, ["max_steps=ten"])
    with pytest.raises(ValueError, match="boolean"):
        config.apply_overrides(base, ["post_ln=maybe"])
    with pytest.raises(ValueError, match="key=value"):
        config.apply_overrides(base, ["lr"])
    with pytest.raises(ValueError, match="not divisible"):
        config.apply_overrides(base, ["n_head=3"])
    with pytest.raises(ValueError, match="parallel"):
        config.apply_overrides(base, ["parallel=tp"])


def test_grad_accum_split():
    c = config.get_config("gpt2-774m")
    # 524288 tokens = 512 sequences of 1024 = 32 micro-batches of 16
    assert config.grad_accum_steps(c, 8) == 4
    assert config.grad_accum_steps(c, 32) == 1
    with pytest.raises(ValueError, match="do not split"):
        config.grad_accum_steps(c, 3)


def test_dict_roundtrip():
    for c in config.CONFIGS.values():
        import json
        assert config.from_dict(json.loads(config.dumps(c))) == c
