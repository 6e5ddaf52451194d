"""The Coq tier: proofs/coq/ and proofs/checks/coq.py.

Without coqc the tests that compile are skipped (with the install line), and the
Coq checks themselves must report skip, never pass.  The default tier compiles
the development once (~20 s); controls, the cross-check and tampered copies
are in the slow tier (`-m slow`).
"""
import re
import shutil
from pathlib import Path

import pytest

from proofs.checks import coq, load_all
from proofs.registry import CHECKS

ROOT = Path(__file__).resolve().parent.parent
needs_coq = pytest.mark.skipif(coq.coqc() is None, reason=coq.NOT_FOUND)


def test_theorem_table_points_at_spec_lines_and_proofs():
    thms = coq.coq_theorems()
    assert {t["claim"] for t in thms} == set(coq.CLAIM_SCOPES) == {"C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8",
                                                                   "C11", "C12", "C13"}
    for t in thms:
        assert t["file"] == "proofs/coq/Spec.v" and t["statement"]
        line = (ROOT / t["file"]).read_text().splitlines()[t["line"] - 1]
        assert re.match(rf"Theorem {t['theorem']} :", line), (t, line)
        assert coq.theorem_line(coq.COQ_DIR / f"{t['module']}.v", t["theorem"]) > 0, t


def test_spec_is_in_the_pinned_shape():
    assert coq.spec_problems() == []
    assert coq.sources()[-1] == coq.SPEC
    for t in coq.spec_theorems():
        assert t.statement.startswith(("forall (R : realFieldType) (L : nat)", "forall (R : realType) (L : nat)", "forall (R : realFieldType) (d : nat)",
                                       "forall (R : realFieldType) (L d : nat)", "forall (R : realType) (d : nat)")), t


def _spec_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "coq"
    shutil.copytree(coq.COQ_DIR, dst)
    return dst


@pytest.mark.parametrize("old,new,why", [
    ("From AttnSens Require Import Theta Softmax.", "From AttnSens Require Import Theta Softmax C4.",
     "unexpected sentence"),
    ("From AttnSens Require Import Theta Softmax.", "From AttnSens Require Import Theta Softmax C1.",
     "unexpected sentence"),
    ("Local Open Scope ring_scope.", "Local Open Scope ring_scope.\nDefinition four := 4.", "unexpected sentence"),
    ("Local Open Scope ring_scope.", "Local Open Scope ring_scope.\nSection S.", "unexpected sentence"),
    ("(** C7: ∀ L, p ∈ Δ_L: θ(p) = 1 − δ(p)²", "(* C7: ∀ L, p ∈ Δ_L: θ(p) = 1 − δ(p)²", "pinned blocks"),
    ("Proof. exact (@C4.C4_dominant). Qed.", "Proof. by move=> *; apply: C4.C4_dominant. Qed.", "pinned blocks"),
    ("exact (@C7.C7_delta)", "exact (@C7.C7_certificate)", "names must agree"),
])
def test_spec_shape_violations_are_found(tmp_path, old, new, why):
    src = _spec_copy(tmp_path)
    text = (src / coq.SPEC).read_text()
    assert text.count(old) == 1, old
    (src / coq.SPEC).write_text(text.replace(old, new))
    assert any(why in p for p in coq.spec_problems(src)), coq.spec_problems(src)


def test_readme_table_is_generated_from_spec():
    page = (ROOT / "docs" / "coq.md").read_text()
    assert coq.readme_table() in page, "docs/coq.md's Coq table is stale: run `python -m proofs.checks.coq --readme`"


def test_every_control_file_holds_its_wrong_theorem_and_refutation():
    for claim, attempt, wrong, refutation, refuter, _ in coq.CONTROLS.values():
        assert claim in coq.CLAIM_SCOPES
        start, end = coq.proof_span(coq.COQ_DIR / "controls" / attempt, wrong)
        assert 0 < start < end
        assert coq.theorem_line(coq.COQ_DIR / "controls" / refutation, refuter) > 0


def test_forbidden_words_are_found_outside_comments_only():
    def words(text):
        return coq.scan(text)[0]

    assert words("(* Admitted (* admit *) *) Lemma a : True. Admitted.") == ["Admitted"]
    assert words("(* no Axiom here *) Lemma b : True. Qed.") == []
    # Nested comments, and strings lexed as Coq does: "(*" in a string opens no comment.
    assert words('Definition s := "(*". Axiom x : False. (* "*)" Admitted *)') == ["Axiom"]
    assert words("(* (* *) Hypothesis h : False. *) Lemma c : True. Qed.") == []
    for decl in ("Hypothesis cheat : False.", "Hypotheses a b : False.", "Context (h : False).",
                 "Variable cheat : False.", "Variables (R : realFieldType) (hL : (0 < L)%N).",
                 "Parameter x : nat.", "Conjecture c : False.", "Local Axiom a : False.",
                 "Unset Guard Checking.", "Admit Obligations.", "Proof. admit. Qed."):
        assert words(decl), decl


def test_section_variables_only_over_carrier_types():
    assert coq.scan("Section S. Variables (R : realFieldType) (L : nat). End S.") == ([], {"realFieldType", "nat"})
    assert coq.scan("Section S. Variable R : realFieldType. End S.") == ([], {"realFieldType"})
    assert coq.scan("Section S. Variables (R : realFieldType) (p : 'I_L -> R). End S.")[0] == ["Variables"]
    assert coq.section_variable_types("Variables (R : realFieldType) (h : (0 < L)%N)") is None


def test_print_assumptions_output_is_parsed_strictly(monkeypatch):
    assert coq.assumption_names(coq.CLOSED) == []
    # A long type goes on the next line, after the name alone (as for mathcomp-analysis's axioms).
    long = "Axioms:\nboolp.functional_extensionality_dep\n  : forall (A : Type) (B : A -> Type),\n    A -> B\nx.y : nat"
    assert coq.assumption_names(long) == ["boolp.functional_extensionality_dep", "x.y"]
    assert coq.assumption_names("Axioms:\nlonely\nx.y : nat") is None
    assert coq.assumption_names("Axioms:\nx.y : nat\nSection Variables:\n  : nat") is None
    text = "Axioms:\nClassical_Prop.classic : forall P : Prop,\n                         P \\/ ~ P"
    assert coq.assumption_names(text) == ["Classical_Prop.classic"]
    assert coq.assumption_names("Section Variables:\ncheat : False") is None
    assert coq.assumption_names("(no output: exit 1) Error") is None
    assert coq.assumption_problems("C4_dominant", text)          # not allow-listed today
    monkeypatch.setitem(coq.ALLOWED_AXIOMS, "C4_dominant", ("Classical_Prop.classic",))
    assert coq.assumption_problems("C4_dominant", text) == []
    assert coq.assumption_problems("C3_uniform", text)            # the allow-list is per theorem
    shown = {t["theorem"]: t["statement"] for t in coq.coq_theorems()}
    assert shown["C4_dominant"].endswith("[assumes the axioms Classical_Prop.classic]")
    assert "assumes" not in shown["C3_uniform"]


def test_without_coqc_every_coq_check_skips(monkeypatch):
    load_all()
    monkeypatch.setattr(coq, "coqc", lambda: None)
    mine = [c for c in CHECKS if c.method == "coq" and c.func.__module__ == coq.__name__]
    # The empirical claims' replays by the extracted checker (proofs/checks/empirical.py) skip too.
    others = [c for c in CHECKS if c.method == "coq" and c.func.__module__ != coq.__name__]
    assert {c.name for c in others} == {"e2_coq_checked", "e3_coq_checked", "e2_coq_checker_negative",
                                      "e3_coq_checker_negative"}
    for c in others:
        ev = c.run("coq")
        assert ev.status == "skip" and coq.INSTALL in ev.detail, (c.name, ev.status)
    # c1…c8_coq, c11…c13_coq, the cross-check and the extracted checker's run
    # (c7_coq_checker_extracted); a negative control per CONTROLS entry, the cross-check's and
    # the extracted checker's.
    assert len(mine) == len(coq.CLAIM_SCOPES) + 2 + len(coq.CONTROLS) + 2 == 31
    assert all(c.tier == "coq" for c in mine)
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
    for claim in coq.CLAIM_SCOPES:
        ev = coq.verify_claim(claim)
        assert ev.status == "pass", (claim, ev.detail)
        pa = ev.numbers["print_assumptions"]
        assert pa
        for name, text in pa.items():
            # Closed, or exactly the allow-listed axioms (mathcomp-analysis's, for the realType theorems).
            assert sorted(coq.assumption_names(text)) == sorted(coq.ALLOWED_AXIOMS.get(name, ())), (name, text)
        assert ev.numbers["theorems"] == [t.name for t in coq.spec_theorems() if t.claim == claim]


@needs_coq
def test_the_allow_list_is_exact_per_theorem(monkeypatch):
    # Only the realType theorems (mathcomp-analysis) may assume anything, and only its three axioms.
    carriers = {t["theorem"]: t["carrier"] for t in coq.coq_theorems()}
    analysis = {n for n, c in carriers.items() if c == "realType"}
    assert analysis == {"C1_directional", "softmax_distribution", "C2_jacobian", "C11_derivative"}
    assert {n for n in carriers if coq.ALLOWED_AXIOMS.get(n)} == analysis
    assert all(set(coq.ALLOWED_AXIOMS[n]) == set(coq.ANALYSIS_AXIOMS) for n in analysis)
    shown = {t["theorem"]: t["statement"] for t in coq.coq_theorems()}
    assert all("boolp.constructive_indefinite_description" in shown[n] for n in analysis)
    # One axiom off the list: C1's use of it fails the check.
    monkeypatch.setitem(coq.ALLOWED_AXIOMS, "C1_directional", coq.ANALYSIS_AXIOMS[1:])
    ev = coq.verify_claim("C1")
    assert ev.status == "fail" and "axiom boolp.propositional_extensionality is not on the allow-list" in ev.detail
    # One axiom too many: a stale entry, which would mislabel the dashboard, fails too.
    monkeypatch.setitem(coq.ALLOWED_AXIOMS, "C1_directional", coq.ANALYSIS_AXIOMS + ("Classical_Prop.classic",))
    ev = coq.verify_claim("C1")
    assert ev.status == "fail" and "Classical_Prop.classic, which it does not print" in ev.detail


@needs_coq
@pytest.mark.slow
def test_c1_refutation_is_held_to_its_allow_list(monkeypatch):
    assert coq.refute_claim("C1").status == "pass"
    monkeypatch.setitem(coq.ALLOWED_AXIOMS, "C1_notau_refuted", ())
    ev = coq.refute_claim("C1")
    assert ev.status == "fail" and "not on the allow-list" in ev.detail


@needs_coq
@pytest.mark.slow
def test_negative_controls_and_crosscheck_pass():
    for control in coq.CONTROLS:
        ev = coq.refute_claim(control)
        assert ev.status == "pass", (control, ev.detail)
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


_C4_SECTION = "Implicit Types (p : 'I_L -> R) (S : {set 'I_L}).\n\nLemma split_value_compl"
_C4_PREMISES = "distribution p -> 2^-1 <= p i0 ->"
_C4_INTRO = "move=> hp hm; have [p0 hs] := hp."
_C3_INTRO = "move=> L0; have L0' : L%:R != 0 :> R by rewrite pnatr_eq0 -lt0n.\nhave hL"
_C5_PMAX = ("  4 * pmax p * (1 - pmax p) <= theta p /\\ 1 - pmax p ^+ 2 <= theta p.\n"
            "Proof. by move=> hp; split; [exact: C5_pmax_singleton | exact: C5_pmax_square]. Qed.")

_C1_INTRO = "move=> t0; pose E j (h : R) := expR ((u j + h * v j) / tau)."
_C1_END = "rewrite K1 K2 -exprVn; exact: quotient_rule.\nQed."

# name -> (claim, [(file, old, new)], what the failure must name, whether the word scan must be clean)
TAMPERS = {
    # C1 over a realType may use mathcomp-analysis's three axioms, and nothing else: an extra Axiom
    # proving it is named by the word scan and by Print Assumptions,
    "c1_extra_axiom": ("C1", [("C1.v", "Section C1.\n", "Axiom cheat : False.\nSection C1.\n"),
                              ("C1.v", _C1_INTRO, "by case: cheat.\n(* " + _C1_INTRO),
                              ("C1.v", _C1_END, _C1_END.replace("\nQed.", " *)\nQed."))],
                       ["forbidden word 'Axiom'", "Print Assumptions C1_directional", "cheat"], False),
    # and a library axiom that is not on its allow-list (classical logic) by Print Assumptions.
    "c1_library_axiom": ("C1", [("C1.v", "From AttnSens Require Import Theta Softmax C2.\n",
                                 "From AttnSens Require Import Theta Softmax C2.\nFrom Coq Require Classical_Prop.\n"),
                                ("C1.v", _C1_INTRO, "have _ := Classical_Prop.classic True.\n" + _C1_INTRO)],
                         ["Print Assumptions C1_directional", "Classical_Prop.classic is not on the allow-list"], True),
    # The finding of issue 24: a false section Hypothesis becomes a premise of C4_dominant's type;
    # Print Assumptions is closed, so only the word scan and Spec.v can see it (both do).
    "section_hypothesis": ("C4", [
        ("C4.v", _C4_SECTION, _C4_SECTION.replace(
            "\n\nLemma", "\nHypothesis cheat : forall (p : 'I_L -> R) i, theta p = 4 * p i * (1 - p i).\n\nLemma")),
        ("C4.v", _C4_INTRO + "\napply/le_anti", "by move=> _ _; exact: cheat.\n(* apply/le_anti"),
        ("C4.v", "by apply: mass_ge_atom => //; rewrite in_setC.\nQed.",
         "by apply: mass_ge_atom => //; rewrite in_setC. *)\nQed.")],
        ["forbidden word 'Hypothesis'", "Spec.v did not compile", "C4_dominant"], False),
    # A changed hypothesis: p_i ≥ 1/4 is false, so C4.v itself no longer compiles.
    "quarter_hypothesis": ("C4", [("C4.v", _C4_PREMISES, "distribution p -> 4^-1 <= p i0 ->")],
                           ["the development did not compile", "C4.v"], True),
    # A changed hypothesis that still proves (p_i > 1/2, a weaker theorem): only Spec.v sees it.
    "strict_hypothesis": ("C4", [("C4.v", _C4_PREMISES, "distribution p -> 2^-1 < p i0 ->"),
                                 ("C4.v", _C4_INTRO, "move=> hp /ltW hm; have [p0 hs] := hp.")],
                          ["Spec.v did not compile", "C4_dominant"], True),
    # A dropped conjunct (C5_pmax keeps θ ≥ 4m(1 − m) only): only Spec.v sees it.
    "dropped_conjunct": ("C5", [("C5.v", _C5_PMAX, ("  4 * pmax p * (1 - pmax p) <= theta p.\n"
                                                     "Proof. by move=> hp; exact: C5_pmax_singleton. Qed."))],
                         ["Spec.v did not compile", "C5_pmax"], True),
    # An extra Axiom: the word scan and Print Assumptions both name it.
    "extra_axiom": ("C3", [("C3.v", "Section C3.\n", "Axiom cheat : False.\nSection C3.\n"),
                           ("C3.v", _C3_INTRO, "by case: cheat.\n(* have hL"),
                           ("C3.v", "exact: odd_gap.\nQed.", "exact: odd_gap. *)\nQed.")],
                    ["forbidden word 'Axiom'", "Print Assumptions C3_uniform", "cheat"], False),
    # A top-level Variable (an axiom in disguise): the word scan and Print Assumptions.
    "top_level_variable": ("C3", [("C3.v", "Section C3.\n", "Variable cheat : False.\nSection C3.\n"),
                                  ("C3.v", _C3_INTRO, "by case: cheat.\n(* have hL"),
                                  ("C3.v", "exact: odd_gap.\nQed.", "exact: odd_gap. *)\nQed.")],
                           ["forbidden word 'Variable'", "Print Assumptions C3_uniform", "cheat"], False),
    # An Admitted main theorem: the word scan and Print Assumptions.
    "admitted": ("C4", [("C4.v", "by apply: mass_ge_atom => //; rewrite in_setC.\nQed.", "Admitted.")],
                 ["forbidden word 'Admitted'", "Print Assumptions C4_dominant"], False),
    # An axiom from a library (classical logic), with no forbidden word: Print Assumptions only.
    "library_axiom": ("C4", [("C4.v", "From AttnSens Require Import Theta.\n",
                              "From AttnSens Require Import Theta.\nFrom Coq Require Classical_Prop.\n"),
                             ("C4.v", _C4_INTRO, "have _ := Classical_Prop.classic True.\n" + _C4_INTRO)],
                      ["Print Assumptions C4_dominant", "classic", "not on the allow-list"], True),
}


@needs_coq
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_tampered_development_is_caught(tmp_path, name, monkeypatch):
    claim, edits, must_name, scan_clean = TAMPERS[name]
    src = _copy(tmp_path)
    for fname, old, new in edits:
        _replace(src / fname, old, new)
    ev = coq.verify_claim(claim, src)
    assert ev.status == "fail", (name, ev.detail)
    for words in must_name:
        assert words in ev.detail, (name, words, ev.detail)
    assert (coq.build(src).forbidden == []) == scan_clean, coq.build(src).forbidden
    if name == "library_axiom":
        # The allow-list is the one way to accept an axiom, per theorem, and the dashboard names it.
        axiom = next(a for a in coq.assumption_names(coq.main_assumptions(src)["C4_dominant"]) if "classic" in a)
        monkeypatch.setitem(coq.ALLOWED_AXIOMS, "C4_dominant", (axiom,))
        assert coq.verify_claim("C4", src).status == "pass"
        assert axiom in next(t["statement"] for t in coq.coq_theorems() if t["theorem"] == "C4_dominant")


@needs_coq
@pytest.mark.slow
def test_tampered_controls_are_caught(tmp_path):
    # A wrong variant "proved" by Admitted, or an admitted refutation: the control must fail.
    src = _copy(tmp_path / "c")
    _set_proof(src / "controls" / "C4_nohalf.v", "C4_nohalf_wrong", "Proof. Admitted.")
    _set_proof(src / "controls" / "C7_const8_refuted.v", "C7_const8_refuted", "Proof. Admitted.")
    assert coq.refute_claim("C4", src).status == "fail"
    ev = coq.refute_claim("C7", src)
    assert ev.status == "fail" and "C7_const8_refuted" in ev.detail
    # A broken development: no check or control may pass on it.
    src = _copy(tmp_path / "d")
    _replace(src / "Theta.v", "Definition mass p S", "Definition mass p S :=")
    assert coq.verify_claim("C2", src).status == "fail"
    assert coq.refute_claim("C2", src).status == "fail"
