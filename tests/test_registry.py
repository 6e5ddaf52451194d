"""The registry's status rules, and the committed dashboard against a fresh quick run."""
from pathlib import Path

import pytest

from proofs import claims as _claims  # noqa: F401
from proofs.registry import CLAIMS, Evidence, claim_statuses, own_status

ROOT = Path(__file__).resolve().parent.parent


def ev(status, neg=False):
    e = Evidence(status, "s")
    e.negative_control = neg
    return e


def test_own_status_rules():
    assert own_status([]) == "unchecked"
    assert own_status([ev("pass", neg=True)]) == "unchecked"   # a negative control alone proves nothing
    assert own_status([ev("pass"), ev("skip")]) == "partial"
    assert own_status([ev("pass"), ev("fail", neg=True)]) == "fail"
    assert own_status([ev("pass"), ev("pass", neg=True)]) == "pass"
    assert own_status([ev("skip")]) == "unchecked"


def test_evidence_rejects_unknown_status():
    with pytest.raises(ValueError):
        Evidence("unknown", "s")


def test_dependencies_downgrade_to_partial():
    evidence = {cid: [ev("pass")] for cid in CLAIMS}
    assert set(claim_statuses(evidence).values()) == {"pass"}
    evidence["C1"] = []
    st = claim_statuses(evidence)
    assert st["C1"] == "unchecked" and st["C2"] == "partial"   # C2 uses C1
    assert st["C10"] == "partial"                               # C10 → C9 → C2 → C1, transitively


def test_every_math_md_claim_is_registered():
    expected = [f"C{i}" for i in range(1, 16)] + ["X1", "E1", "E2", "E3"]
    assert sorted(CLAIMS) == sorted(expected)


def test_crashing_check_fails():
    from proofs.registry import Check

    def boom(tier):
        raise RuntimeError("x")

    assert Check("C1", "boom", "exact", boom, False, "quick", "s").run("quick").status == "fail"


@pytest.fixture(scope="session")
def quick_run():
    from proofs.__main__ import run
    from proofs.registry import claim_statuses as cs
    evidence = run("quick", None, progress=False)
    return evidence, cs(evidence)


def test_quick_tier_has_no_failure(quick_run):
    evidence, _ = quick_run
    failed = [(e.claim, e.name, e.detail[:200]) for evs in evidence.values() for e in evs if e.status == "fail"]
    assert failed == []


def test_negative_controls_present_for_exhaustive_and_smt(quick_run):
    evidence, _ = quick_run
    for cid, evs in evidence.items():
        for method in ("z3", "exact"):
            if any(e.method == method and not e.negative_control for e in evs):
                assert any(e.method == method and e.negative_control for e in evs), (cid, method)


def test_paper_checks_md_is_current(quick_run):
    from proofs.dashboard import render_markdown
    evidence, statuses = quick_run
    fresh = render_markdown(evidence, statuses, "quick")
    committed = (ROOT / "paper_checks.md").read_text()
    assert committed == fresh, "paper_checks.md is stale: run `python -m proofs --quick --write-md`"


def test_nan_never_passes_a_tolerance():
    import math
    from proofs.checks._util import nanmax, verdict, worst
    assert worst([0.1, float("nan"), 0.2]) == math.inf      # plain max() would return 0.2
    assert worst([0.1, 0.2]) == 0.2
    assert nanmax(0.0, float("nan")) == math.inf
    assert verdict(float("nan") < 1, "s").status == "fail"
    assert verdict(None, "s").status == "fail"
