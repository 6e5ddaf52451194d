"""Drift test of a committed record, not of code: the full-size rehearsal record results/rehearsal-774m/.

These tests read what a past run wrote (rehearsal.json, its rows and certificates) and check that the
record is internally consistent and still agrees with today's config, memory model and verifier. A
failure means the record and the code have drifted apart (re-run the rehearsal or explain the change),
not necessarily that the code is wrong.
"""
import json
import shutil
from pathlib import Path

import numpy as np

from certificates.__main__ import main as cert_cli
from gpu_experiments import config
from gpu_experiments import memory_model as mm

REC_DIR = Path(__file__).resolve().parents[1] / "results" / "rehearsal-774m"


def _record():
    return json.loads((REC_DIR / "rehearsal.json").read_text())


def test_record_figures_are_consistent():
    r = _record()
    assert r["config"] == "gpt2-774m" and r["nnodes"] == 1
    assert r["n_params"] == r["n_params_formula"] == mm.param_count(config.get_config("gpt2-774m").model)
    assert r["n_params_vocab50257"] == 774_030_080
    assert r["resume_bitwise"] and r["state_sha256_uninterrupted"] == r["state_sha256_resumed"]
    assert r["resumed_losses"] == r["losses"][r["resume_from_step"]:] and len(r["losses"]) >= 2
    assert all(np.isfinite(r["losses"])) and r["certify_exit"] == 0 and r["verify_exit"] == 0
    # the measured peak and the memory model agree where they overlap (float32 CPU step)
    cpu = r["memory_model"]["cpu_fp32_step"]
    assert 0.8 <= cpu["measured_peak_rss"] / cpu["total"] <= 1.1
    for v in r["memory_model"]["saved_per_token_full_width"].values():
        assert v["measured_block"] == v["model_block"] and v["measured_weight_casts"] == v["model_weight_casts"]


def test_every_layer_and_head_was_probed_and_certified():
    r = _record()
    rows = np.load(REC_DIR / "rows" / f"step-{r['resume_from_step']}.npz", allow_pickle=False)
    pairs = set(zip(rows["layer"].tolist(), rows["head"].tolist()))
    assert pairs == {(li, h) for li in range(36) for h in range(20)} and len(rows["rows"]) == r["probe_rows"] == 720
    cert = np.load(REC_DIR / "certificates" / "certificates.npz", allow_pickle=False)
    assert len(cert["theta_lo"]) == 720 and np.all(cert["theta_lo"] <= cert["theta_hi"])


def test_record_is_small_and_holds_no_weights():
    files = [p for p in REC_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 5 * 2**20
    assert not any(p.suffix in (".distcp", ".pt", ".bin", ".safetensors") or p.name == ".metadata" for p in files)
    assert not any(p.name.startswith("step-") and p.is_dir() for p in REC_DIR.rglob("*"))


def test_certificates_verify_and_a_tampered_copy_does_not(tmp_path):
    assert cert_cli(["verify", str(REC_DIR / "certificates")]) == 0
    # negative control: the same folder with one upper bound moved below its lower bound must fail
    shutil.copytree(REC_DIR / "rows", tmp_path / "rows")
    shutil.copytree(REC_DIR / "certificates", tmp_path / "certificates")
    path = tmp_path / "certificates" / "certificates.npz"
    arrs = dict(np.load(path, allow_pickle=False))
    arrs["theta_hi"] = arrs["theta_hi"].copy()
    arrs["theta_hi"][0] = arrs["theta_lo"][0] - 1e-3
    np.savez(path, **arrs)
    assert cert_cli(["verify", str(tmp_path / "certificates")]) != 0
