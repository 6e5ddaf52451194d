"""The registry's status rules, and the committed dashboard against a fresh quick run."""
import shutil
from pathlib import Path

import pytest

from proofs import claims as _claims  # noqa: F401
from proofs.registry import CHECKS, CLAIMS, Evidence, claim_statuses, own_status

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


def test_every_claim_is_registered():
    expected = [f"C{i}" for i in range(1, 16)] + [f"X{i}" for i in range(1, 7)] + ["E1", "E2", "E3"]
    assert sorted(CLAIMS) == sorted(expected)


def test_crashing_check_fails():
    from proofs.registry import Check

    def boom(tier):
        raise RuntimeError("x")

    assert Check("C1", "boom", "exact", boom, False, "quick", "s").run("quick").status == "fail"


HAVE_COQ = shutil.which("coqc") is not None


@pytest.fixture(scope="session")
def quick_run():
    """One quick run of the whole registry (plus the Coq tier where coqc exists), shared."""
    from proofs.__main__ import run
    from proofs.registry import claim_statuses as cs
    evidence = run("quick", None, progress=False, coq=HAVE_COQ)
    return evidence, cs(evidence)


def test_quick_tier_has_no_failure(quick_run):
    evidence, _ = quick_run
    failed = [(e.claim, e.name, e.detail[:200]) for evs in evidence.values() for e in evs if e.status == "fail"]
    assert failed == []


def test_every_exhaustive_smt_and_coq_check_is_guarded():
    # Per check, not per (claim, method): some negative control of the same claim names it.
    from proofs.checks import load_all
    load_all()
    guarded = {(c.claim, g) for c in CHECKS if c.negative_control for g in c.guards}
    names = {(c.claim, c.name) for c in CHECKS}
    for c in CHECKS:
        for g in c.guards:
            assert (c.claim, g) in names, f"{c.name} guards unknown check {g}"
        if c.method in ("exact", "z3", "coq") and not c.negative_control:
            assert (c.claim, c.name) in guarded, f"{c.claim} {c.name} ({c.method}) has no negative control"


def test_every_check_links_to_its_code():
    from proofs.checks import load_all
    load_all()
    for c in CHECKS:
        path, line = c.source.rsplit(":", 1)
        lines = (ROOT / path).read_text().splitlines()
        window = "\n".join(lines[int(line) - 1:int(line) + 12])
        assert f"def {c.func.__name__}(" in window, c.source


def test_claim_texts_are_self_contained():
    # Claim texts, notes and scopes must not send a reader to documents outside the repository.
    from proofs.checks import load_all
    load_all()
    texts = [t for c in CLAIMS.values() for t in (c.statement, c.notes, c.title, *c.assumes)]
    texts += [c.scope for c in CHECKS]
    for t in texts:
        assert "MATH.md" not in t and "shared/" not in t and "ARCHITECTURE" not in t, t


def _perturbed(evidence):
    """The same statuses with every measured number, detail, run scope and timing changed."""
    import copy
    out = {}
    for cid, evs in evidence.items():
        out[cid] = []
        for e in evs:
            f = copy.deepcopy(e)
            f.seconds = e.seconds * 7.3 + 1
            f.numbers = {k: "perturbed" for k in e.numbers}
            f.scope = e.scope + " (1.0785e-15 on this machine)"
            if e.status != "skip":
                f.detail = e.detail + " 1.0785e-15"
            out[cid].append(f)
    return out


def test_dashboard_depends_on_statuses_and_declared_scopes_only(quick_run):
    from proofs.dashboard import render_markdown
    evidence, statuses = quick_run
    a = render_markdown(evidence, statuses, "quick", coq=HAVE_COQ)
    b = render_markdown(_perturbed(evidence), statuses, "quick", coq=HAVE_COQ)
    assert a == b


def test_dashboard_shows_a_failure():
    from proofs.dashboard import render_markdown
    from proofs.checks import load_all
    load_all()
    evidence = {cid: [] for cid in CLAIMS}
    for c in CHECKS:
        if c.tier == "quick":
            e = Evidence("pass", c.scope)
            e.claim, e.name, e.method, e.negative_control = c.claim, c.name, c.method, c.negative_control
            evidence[c.claim].append(e)
    evidence["C4"][0].status = "fail"
    md = render_markdown(evidence, claim_statuses(evidence), "quick")
    assert "| C4 | Dominant-atom regime | ❌ fail |" in md


@pytest.mark.skipif(not HAVE_COQ, reason="the committed dashboard includes the Coq tier: install Coq "
                    "(apt-get install -y coq libcoq-mathcomp-algebra libcoq-mathcomp-algebra-tactics)")
def test_paper_checks_md_is_current(quick_run):
    from proofs.dashboard import render_markdown
    evidence, statuses = quick_run
    fresh = render_markdown(evidence, statuses, "quick", coq=True)
    committed = (ROOT / "paper_checks.md").read_text()
    assert committed == fresh, "paper_checks.md is stale: run `python -m proofs --quick --coq --write-md`"


def test_nan_never_passes_a_tolerance():
    import math
    from proofs.checks._util import nanmax, verdict, worst
    assert worst([0.1, float("nan"), 0.2]) == math.inf      # plain max() would return 0.2
    assert worst([0.1, 0.2]) == 0.2
    assert nanmax(0.0, float("nan")) == math.inf
    assert verdict(float("nan") < 1, "s").status == "fail"
    assert verdict(None, "s").status == "fail"
