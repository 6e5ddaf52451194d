"""X1 (beyond the paper): does C14's condition ρ = √(var(y) + eps)/‖γ‖_∞ > 1 hold on real models?

Method "empirical": X1 is a measurement on a real trained model, not a theorem,
so its dashboard status is the measured outcome (claim kind "measured").  Like
E1–E3, the check reads a committed measurement, ``results/x1/minilm.json``,
written by ``python -m gpu_experiments.postln_probe --contrast --json …`` on
all-MiniLM-L6-v2; tests/test_x1_minilm.py reruns the probe on the real weights
and requires it to reproduce that file.  The numbers in it are certified where
stated: ρ and ‖J_LN‖₂ are enclosed in outward-rounded interval arithmetic at the
exact float64 LayerNorm inputs; the actual norm of the LayerNorm-only product is
a float64 power iteration.

The check fails (never passes) when the file is malformed or its internal
cross-checks are violated, and is skipped when the file is absent.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..registry import Evidence, check

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENT = ROOT / "results" / "x1" / "minilm.json"

_MINILM_SCOPE = ("all-MiniLM-L6-v2 (post-LN BERT, 6 layers, width 384), 252 WordPiece tokens of Python's "
                 "pydoc topics, float64 forward, 13 LayerNorms; committed measurement results/x1/minilm.json")
_GPT_SCOPE = ("contrast: randomly initialised GPT-2-style models (6 layers, width 384, N(0, 0.02) init, γ = 1), "
              "pre-LN and post-LN, 256 byte tokens of the same text; same file")


def load_measurement(path: Path | None = None) -> dict | None:
    """The committed measurement, or None when the file is absent."""
    path = MEASUREMENT if path is None else path
    if not path.exists():
        return None
    return json.loads(path.read_text())


def consistency_problems(m: dict) -> list[str]:
    """Cross-checks of one probe whose failure means a bug, not a verdict."""
    bad = []
    for s in m["per_ln"]:
        if not s["slack_max"] <= 1 + 1e-12:  # a NaN fails too
            bad.append(f"{s['name']}: ‖J_LN‖₂ lower enclosure exceeds 1/ρ (C14 violated?)")
        if s["certified"] != s["tokens"]:
            bad.append(f"{s['name']}: only {s['certified']}/{s['tokens']} ‖J_LN‖₂ enclosures certified")
        q = s["rho_q"]
        if not q["q00"] <= q["q50"] <= q["q100"]:
            bad.append(f"{s['name']}: ρ quantiles out of order")
    prod = m.get("product")
    if prod is not None:
        if not prod["norm_max"] <= prod["bound_exact"] * (1 + 1e-9):
            bad.append("float64 product norm exceeds the certified product bound")
        if not prod["bound_exact"] <= prod["bound_lemma"] * (1 + 1e-12):
            bad.append("exact-norm product bound exceeds the lemma's Π 1/ρ")
        if not 0 <= m["tokens_condition_all"] <= m["positions"]:
            bad.append("tokens_condition_all out of range")
    return bad


def condition_verdict(m: dict) -> str:
    """Categorical outcome over depth, from an integer count (no magnitude)."""
    held, n = m["tokens_condition_all"], m["positions"]
    if held == n:
        return "condition holds at every token"
    if held == 0:
        return "condition fails at every token"
    return "condition holds at some tokens only"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _read(scope: str) -> tuple[dict | None, Evidence | None]:
    try:
        doc = load_measurement()
    except (OSError, ValueError) as exc:
        return None, Evidence("fail", scope, detail=f"{_shown(MEASUREMENT)}: unreadable: {exc}")
    if doc is None:
        return None, Evidence("skip", scope, detail=f"{_shown(MEASUREMENT)} not found; run "
                              "`python -m gpu_experiments.postln_probe --contrast --json results/x1/minilm.json`")
    return doc, None


@check("X1", "empirical", scope=_MINILM_SCOPE)
def x1_minilm_condition(tier):
    doc, ev = _read(_MINILM_SCOPE)
    if ev is not None:
        return ev
    try:
        m = doc["minilm"]
        bad = consistency_problems(m)
        # The forward has no offline reference; a paraphrase must be closer than an unrelated sentence.
        if not m["paraphrase_cos"] > m["unrelated_cos"] + 0.3:
            bad.append("forward looks wrong: paraphrase not closer than an unrelated sentence")
        if len(m["per_ln"]) != 13 or m["product"]["layers"] != 12:
            bad.append("expected 13 LayerNorms and a product over the 12 residual ones")
    except (KeyError, TypeError) as exc:
        return Evidence("fail", _MINILM_SCOPE, detail=f"malformed measurement: missing {exc}")
    if bad:
        return Evidence("fail", _MINILM_SCOPE, detail="; ".join(bad))
    outcome = condition_verdict(m)
    detail = (f"{m['positions']} token positions; the lemma's condition (ρ > 1 at all 12 residual LNs, certified) "
              f"holds at {m['tokens_condition_all']}; certified LayerNorm-only product bound "
              f"{m['product']['bound_exact']:.4g}; actual per-token norm ≤ {m['product']['norm_max']:.4g}")
    return Evidence("pass", _MINILM_SCOPE, numbers=m, detail=detail, verdict=f"MiniLM: {outcome}")


@check("X1", "empirical", scope=_GPT_SCOPE)
def x1_random_gpt_contrast(tier):
    doc, ev = _read(_GPT_SCOPE)
    if ev is not None:
        return ev
    try:
        pre, post = doc["contrast"]["pre_ln"], doc["contrast"]["post_ln"]
        bad = consistency_problems(post) + consistency_problems(pre)
        if "product" in pre:
            bad.append("a pre-LN model has no LayerNorm-only product (C12)")
        if "product" not in post:
            bad.append("the post-LN model's LayerNorm-only product is missing")
        outcome = condition_verdict(post)
        finite = all(math.isfinite(s["rho_q"]["q50"]) for s in pre["per_ln"] + post["per_ln"])
    except (KeyError, TypeError) as exc:
        return Evidence("fail", _GPT_SCOPE, detail=f"malformed measurement: missing {exc}")
    if not finite:
        bad.append("non-finite ρ")
    if bad:
        return Evidence("fail", _GPT_SCOPE, detail="; ".join(bad))
    return Evidence("pass", _GPT_SCOPE, numbers=doc["contrast"], verdict=f"random post-LN: {outcome}",
                    detail=f"random-init post-LN: {outcome} ({post['tokens_condition_all']} of "
                           f"{post['positions']} positions)")
