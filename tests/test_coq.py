"""The Coq tier: proofs/coq/ and proofs/checks/coq.py.

Without coqc the tests that compile are skipped (with the install line), and the
Coq checks themselves must report skip, never pass.  The default tier compiles
the development once (~15 s); controls, the cross-check and tampered copies
are in the slow tier.
"""
import re
import shutil
from pathlib import Path

import pytest

from proofs.checks import coq, load_all
from proofs.registry import CHECKS

ROOT = Path(__file__).resolve().parent.parent
needs_coq = pytest.mark.skipif(coq.coqc() is None, reason=coq.NOT_FOUND)


def test_theorem_table_points_at_theorem_lines():
    thms = coq.coq_theorems()
    assert {"C2", "C3", "C4", "C7"} <= {t["claim"] for t in thms}
    for t in thms:
        line = (ROOT / t["file"]).read_text().splitlines()[t["line"] - 1]
        assert re.match(rf"(Theorem|Lemma) {t['theorem']}\b", line), (t, line)


def test_every_control_file_holds_its_wrong_theorem_and_refutation():
    for attempt, wrong, refutation, refuter, _ in coq.CONTROLS.values():
        start, end = coq.proof_span(coq.COQ_DIR / "controls" / attempt, wrong)
        assert 0 < start < end
        assert coq.theorem_line(coq.COQ_DIR / "controls" / refutation, refuter) > 0


def test_forbidden_words_are_found_outside_comments_only():
    assert coq._FORBIDDEN.findall(coq.strip_comments("(* Admitted (* admit *) *) Lemma a : True. Admitted.")) \
        == ["Admitted"]
    assert coq._FORBIDDEN.findall(coq.strip_comments("(* no Axiom here *) Lemma b : True. Qed.")) == []


def test_without_coqc_every_coq_check_skips(monkeypatch):
    load_all()
    monkeypatch.setattr(coq, "coqc", lambda: None)
    mine = [c for c in CHECKS if c.method == "coq"]
    assert len(mine) == 10 and all(c.tier == "coq" for c in mine)
    for c in mine:
        ev = c.run("coq")
        assert ev.status == "skip" and coq.INSTALL in ev.detail, (c.name, ev.status)


def test_crosscheck_source_states_the_numerics_values():
    # θ(1/2, 1/3, 1/6) = 1 (S = {0} has mass 1/2), worked by hand; the file must say so.
    text, table, names = coq.crosscheck_source(rows=((coq.Fraction(1, 2), coq.Fraction(1, 3), coq.Fraction(1, 6)),))
    assert table[0]["theta"] == "1" and table[0]["norm"] == "1"
    assert "Lemma r0_theta : theta r0 == (1%N%:R / 1%N%:R)." in text and names == ["r0_theta", "r0_norm"]


@needs_coq
def test_positive_checks_pass_with_no_assumptions():
    for claim in ("C2", "C3", "C4", "C7"):
        ev = coq.verify_claim(claim)
        assert ev.status == "pass", (claim, ev.detail)
        pa = ev.numbers["print_assumptions"]
        assert pa and all(t == coq.CLOSED for t in pa.values())


@needs_coq
@pytest.mark.slow
def test_negative_controls_and_crosscheck_pass():
    for claim in coq.CONTROLS:
        ev = coq.refute_claim(claim)
        assert ev.status == "pass", (claim, ev.detail)
    assert coq.c2_coq_crosscheck("coq").status == "pass"
    assert coq.c2_coq_crosscheck_negative("coq").status == "pass"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "coq"
    shutil.copytree(coq.COQ_DIR, dst)
    return dst


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _set_proof(path: Path, name: str, proof: str) -> None:
    """Replace the proof of theorem ``name`` (Proof. ... Qed.) by ``proof``."""
    head, _, rest = path.read_text().partition(f"Theorem {name}")
    statement, _, body = rest.partition("Proof.")
    assert statement and body
    path.write_text(head + f"Theorem {name}" + statement + proof + body.partition("Qed.")[2])


@needs_coq
@pytest.mark.slow
def test_tampered_development_is_caught(tmp_path):
    # An Admitted main theorem: it compiles, but Print Assumptions names it.
    src = _copy(tmp_path / "a")
    _replace(src / "C4.v", "by apply: mass_ge_atom => //; rewrite in_setC.\nQed.", "Admitted.")
    ev = coq.verify_claim("C4", src)
    assert ev.status == "fail" and "Print Assumptions C4_dominant" in ev.detail
    # A hidden axiom the word scan does not see (a top-level Variable): only Coq can tell.
    src = _copy(tmp_path / "b")
    _replace(src / "C3.v", "Section C3.\n", "Variable cheat : False.\nSection C3.\n")
    _set_proof(src / "C3.v", "C3_uniform", "Proof. case: cheat. Qed.")
    b = coq.build(src)
    ev = coq.verify_claim("C3", src)
    assert b.forbidden == [] and ev.status == "fail" and "cheat" in ev.detail, ev.detail
    # A wrong variant "proved" by Admitted, or an admitted refutation: the control must fail.
    src = _copy(tmp_path / "c")
    _set_proof(src / "controls" / "C4_nohalf.v", "C4_nohalf_wrong", "Proof. Admitted.")
    _set_proof(src / "controls" / "C7_const8_refuted.v", "C7_const8_refuted", "Proof. Admitted.")
    assert coq.refute_claim("C4", src).status == "fail"
    ev = coq.refute_claim("C7", src)
    assert ev.status == "fail" and "C7_const8_refuted" in ev.detail
    # A broken development: no control may pass on it.
    src = _copy(tmp_path / "d")
    _replace(src / "Theta.v", "Definition mass p S", "Definition mass p S :=")
    assert coq.verify_claim("C2", src).status == "fail"
    assert coq.refute_claim("C2", src).status == "fail"
