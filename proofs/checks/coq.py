"""Coq checks (tier "coq"): C2, C3, C4 and C7 proved for every L over any realFieldType.

The development is proofs/coq/ (files in _CoqProject order).  A run copies it
to a temporary folder, compiles it once per process with a ``coqc`` loop, and
reads ``Print Assumptions`` of every main theorem: a check passes only if the
development compiled and Coq itself reports "Closed under the global context"
(so an ``Admitted``, ``Axiom`` or ``Parameter`` anywhere underneath fails it).

Negative controls (proofs/coq/controls/): per claim a deliberately wrong
variant whose proof attempt (the real proof script) must fail, with coqc's
error located inside the wrong theorem, and a machine-checked refutation of
the wrong variant on a concrete rational counterexample, which must compile
with no assumptions.  A missing coqc is a ``skip`` for every Coq check, never a
pass.  Precision contract: exact (Coq's kernel; rationals are MathComp's rat).
"""
from __future__ import annotations

import atexit
import functools
import itertools
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..registry import Evidence, check

ROOT = Path(__file__).resolve().parents[2]
COQ_DIR = ROOT / "proofs" / "coq"
INSTALL = ("apt-get update && apt-get install -y coq libcoq-mathcomp-algebra "
           "libcoq-mathcomp-algebra-tactics")
NOT_FOUND = f"coqc not found; install: {INSTALL}"
LOGICAL = "AttnSens"
CLOSED = "Closed under the global context"
COMPILE_TIMEOUT = 600  # seconds per file; a timeout is a failure
SCOPE = "every L ≥ 1, any realFieldType (Coq 8.16, MathComp 1.15)"
CLAIM_SCOPES = {
    "C2": SCOPE + ": C2 (a) box bound, (b) attained at a sign vector, ‖C‖∞→1 = θ",
    "C3": SCOPE + ": θ(uniform) = 1 (even L), 1 − 1/L² (odd L)",
    "C4": SCOPE + ": p_i ≥ 1/2 ⇒ θ = 4p_i(1 − p_i)",
    "C7": SCOPE + ": θ(x/(a + b)) ≥ 4ab/(a + b)² for any S; θ = 1 − δ²",
}

# (claim, Coq name, file, readable statement).  θ(p) = max_S 4p(S)(1 − p(S)), C(p) = diag(p) − ppᵀ,
# Δ_L = {p : p_i ≥ 0, Σp = 1}; every statement holds over any realFieldType (ℝ, ℚ, ...).
THEOREMS = (
    ("C2", "C2_upper", "C2.v",
     "∀ L, p ∈ Δ_L, τ > 0, x with |x_i| ≤ 1: ‖(C(p)/τ)x‖₁ ≤ θ(p)/τ"),
    ("C2", "C2_attained", "C2.v",
     "∀ L, p ∈ Δ_L, τ > 0: ∃ S, ‖(C(p)/τ)(1_S − 1_Sᶜ)‖₁ = θ(p)/τ"),
    ("C2", "C2_inf1norm", "C2.v",
     "∀ L, p ∈ Δ_L: max over x ∈ {±1}^L of ‖C(p)x‖₁ = θ(p)"),
    ("C3", "C3_uniform", "C3.v",
     "∀ L ≥ 1: θ(uniform on L atoms) = 1 − 1/L² for odd L, 1 for even L"),
    ("C4", "C4_dominant", "C4.v",
     "∀ L, p ∈ Δ_L, i with p_i ≥ 1/2 (so p_i = max p): θ(p) = 4p_i(1 − p_i)"),
    ("C7", "C7_certificate", "C7.v",
     "∀ L, x ∈ R^L, S with a = Σ_S x_i, b = Σ_Sᶜ x_i, a + b ≠ 0: θ(x/(a + b)) ≥ 4ab/(a + b)²"),
    ("C7", "C7_delta", "C7.v",
     "∀ L, p ∈ Δ_L: θ(p) = 1 − δ(p)² with δ(p) = min_S |p(S) − p(Sᶜ)|"),
)

# claim -> (control file, wrong theorem, refutation file, refuting theorem, what is wrong)
CONTROLS = {
    "C2": ("C2_half.v", "C2_half_wrong", "C2_half_refuted.v", "C2_half_refuted",
           "‖C(p)x‖₁ ≤ θ(p)/2; refuted at p = (1/2, 1/2)"),
    "C3": ("C3_swapped.v", "C3_swapped_wrong", "C3_swapped_refuted.v", "C3_swapped_refuted",
           "parities swapped; refuted at L = 2"),
    "C4": ("C4_nohalf.v", "C4_nohalf_wrong", "C4_nohalf_refuted.v", "C4_nohalf_refuted",
           "θ = 4p_i(1 − p_i) without p_i ≥ 1/2; refuted at uniform L = 4"),
    "C7": ("C7_const8.v", "C7_const8_wrong", "C7_const8_refuted.v", "C7_const8_refuted",
           "certificate 8ab/(a + b)²; refuted at x = (1/2, 1/2), S = {0}"),
}

_FORBIDDEN = re.compile(r"\b(Admitted|admit|Axiom|Axioms|Parameter|Parameters|Conjecture)\b")
_ERROR_AT = re.compile(r'File "\./(?P<file>[^"]+)", line (?P<line>\d+), characters \d+-\d+:\s*\nError:')


# ----------------------------------------------------------------------------- building

def coqc() -> str | None:
    return shutil.which("coqc")


def sources(src: Path = COQ_DIR) -> list[str]:
    """The .v files of the development, in the order _CoqProject lists them."""
    return [ln.strip() for ln in (src / "_CoqProject").read_text().splitlines() if ln.strip().endswith(".v")]


def strip_comments(text: str) -> str:
    """Coq source without (* nested *) comments (so a word in a comment is not flagged)."""
    out, depth, i = [], 0, 0
    while i < len(text):
        two = text[i:i + 2]
        if two == "(*":
            depth, i = depth + 1, i + 2
        elif two == "*)" and depth:
            depth, i = depth - 1, i + 2
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


@dataclass
class Build:
    ok: bool
    workdir: Path
    seconds: dict = field(default_factory=dict)   # file -> compile seconds
    log: str = ""                                  # coqc output of the first failure
    forbidden: list = field(default_factory=list)  # (file, word) found outside comments


def run_coqc(workdir: Path, name: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([coqc(), "-Q", ".", LOGICAL, name], cwd=workdir, capture_output=True,
                              text=True, timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, "", f"timeout after {COMPILE_TIMEOUT} s")


def build(src: Path = COQ_DIR) -> Build:
    """Copy ``src`` (and its controls/) to a temporary folder and compile it once per process."""
    return _build(Path(src).resolve())


@functools.lru_cache(maxsize=None)
def _build(src: Path) -> Build:
    work = Path(tempfile.mkdtemp(prefix="attnsens-coq-"))
    atexit.register(shutil.rmtree, work, True)
    for f in src.glob("*.v"):
        shutil.copy(f, work / f.name)
    for f in (src / "controls").glob("*.v"):
        shutil.copy(f, work / f.name)
    b = Build(True, work)
    for name in sources(src):
        b.forbidden += [(name, m.group(0)) for m in _FORBIDDEN.finditer(strip_comments((src / name).read_text()))]
        t0 = time.perf_counter()
        res = run_coqc(work, name)
        b.seconds[name] = round(time.perf_counter() - t0, 2)
        if res.returncode != 0:
            b.ok, b.log = False, f"{name}: exit {res.returncode}\n{_tail(res.stdout + res.stderr)}"
            break
    return b


def _tail(text: str, lines: int = 15) -> str:
    """The last lines of coqc output, without the warning blocks MathComp's imports print."""
    blocks = re.split(r'(?m)^(?=File ")', text)
    keep = [b.strip() for b in blocks if b.strip() and not re.match(r'File [^\n]*\n(Warning|\[)', b)]
    return "\n".join("\n".join(keep).splitlines()[-lines:])


_probes = itertools.count()


def assumptions(b: Build, names: tuple[str, ...], imports: str) -> dict[str, str]:
    """``Print Assumptions`` of each name, as Coq prints it (one Redirect file per name)."""
    probe = f"pa{next(_probes)}"
    lines = [f"From {LOGICAL} Require Import {imports}."]
    lines += [f'Redirect "{probe}_{n}" Print Assumptions {n}.' for n in names]
    (b.workdir / f"{probe}.v").write_text("\n".join(lines) + "\n")
    res = run_coqc(b.workdir, f"{probe}.v")
    out = {}
    for n in names:
        f = b.workdir / f"{probe}_{n}.out"
        out[n] = f.read_text().strip() if res.returncode == 0 and f.exists() else \
            f"(no output: exit {res.returncode}) {_tail(res.stdout + res.stderr, 5)}"
    return out


def theorem_line(path: Path, name: str) -> int:
    """1-based line of ``Theorem name`` / ``Lemma name`` in ``path`` (0 if absent)."""
    pat = re.compile(rf"^\s*(Theorem|Lemma)\s+{re.escape(name)}\b")
    for i, ln in enumerate(path.read_text().splitlines(), 1):
        if pat.match(ln):
            return i
    return 0


def proof_span(path: Path, name: str) -> tuple[int, int]:
    """Lines of ``name`` from its Theorem line to its closing Qed./Defined./Admitted."""
    start = theorem_line(path, name)
    lines = path.read_text().splitlines()
    for j in range(start - 1 if start else len(lines), len(lines)):
        if re.search(r"\b(Qed|Defined|Admitted)\.\s*$", lines[j]):
            return start, j + 1
    return start, 0


# ----------------------------------------------------------------------------- verdicts

def _main_imports(src: Path) -> str:
    return " ".join(Path(n).stem for n in sources(src))


def main_assumptions(src: Path = COQ_DIR) -> dict[str, str]:
    """Print Assumptions of every theorem in THEOREMS, in one coqc run per process."""
    return _main_assumptions(Path(src).resolve())


@functools.lru_cache(maxsize=None)
def _main_assumptions(src: Path) -> dict[str, str]:
    return assumptions(build(src), tuple(n for _, n, _, _ in THEOREMS), _main_imports(src))


def verify_claim(claim: str, src: Path = COQ_DIR) -> Evidence:
    """Positive check: ``src`` compiles and every main theorem of ``claim`` has no assumptions."""
    names = tuple(n for c, n, _, _ in THEOREMS if c == claim)
    scope = CLAIM_SCOPES[claim]
    if coqc() is None:
        return Evidence("skip", scope, detail=NOT_FOUND)
    b = build(src)
    nums = {"compile_seconds": b.seconds, "theorems": list(names)}
    if not b.ok:
        return Evidence("fail", scope, numbers=nums, detail=f"the development did not compile:\n{b.log}")
    everything = main_assumptions(src)
    pa = {n: everything[n] for n in names}
    nums["print_assumptions"] = pa
    problems = [f"Print Assumptions {n}: {t!r}" for n, t in pa.items() if t != CLOSED]
    problems += [f"{f}: forbidden word {w!r}" for f, w in b.forbidden]
    if problems:
        return Evidence("fail", scope, numbers=nums, detail="; ".join(problems))
    return Evidence("pass", scope, numbers=nums,
                    detail=f"{', '.join(names)}: {CLOSED} (Print Assumptions)")


def refute_claim(claim: str, src: Path = COQ_DIR) -> Evidence:
    """Negative control: the wrong variant's proof fails inside its theorem, and its
    refutation compiles with no assumptions.  Anything else (no coqc, a broken
    development, an error elsewhere) is not a pass."""
    attempt, wrong, refutation, refuter, what = CONTROLS[claim]
    scope = f"wrong variant: {what}"
    if coqc() is None:
        return Evidence("skip", scope, detail=NOT_FOUND)
    b = build(src)
    if not b.ok:
        return Evidence("fail", scope, detail=f"the development did not compile:\n{b.log}")
    res = run_coqc(b.workdir, attempt)
    out = res.stdout + res.stderr
    hits = list(_ERROR_AT.finditer(out))
    start, end = proof_span(b.workdir / attempt, wrong)
    located = bool(hits) and hits[-1]["file"] == attempt and start and start <= int(hits[-1]["line"]) <= end
    nums = {"attempt_exit": res.returncode, "error_line": int(hits[-1]["line"]) if hits else None,
            "wrong_theorem_lines": [start, end]}
    if res.returncode == 0 or not located:
        return Evidence("fail", scope, numbers=nums,
                        detail=f"{attempt}: the wrong variant was not rejected inside {wrong}:\n{_tail(out)}")
    ref = run_coqc(b.workdir, refutation)
    if ref.returncode != 0:
        return Evidence("fail", scope, numbers=nums,
                        detail=f"{refutation} did not compile:\n{_tail(ref.stdout + ref.stderr)}")
    pa = assumptions(b, (refuter,), f"{_main_imports(src)} {Path(refutation).stem}")[refuter]
    nums["print_assumptions"] = {refuter: pa}
    forbidden = _FORBIDDEN.findall(strip_comments((b.workdir / refutation).read_text()))
    if pa != CLOSED or forbidden:
        return Evidence("fail", scope, numbers=nums, detail=f"{refuter}: {pa!r} {forbidden}")
    return Evidence("pass", scope, numbers=nums,
                    detail=f"{wrong} fails at line {nums['error_line']} ({attempt}); {refuter} proved, {CLOSED}")


@check("C2", "coq", scope=CLAIM_SCOPES["C2"], tier="coq")
def c2_coq(tier):
    return verify_claim("C2")


@check("C3", "coq", scope=CLAIM_SCOPES["C3"], tier="coq")
def c3_coq(tier):
    return verify_claim("C3")


@check("C4", "coq", scope=CLAIM_SCOPES["C4"], tier="coq")
def c4_coq(tier):
    return verify_claim("C4")


@check("C7", "coq", scope=CLAIM_SCOPES["C7"], tier="coq")
def c7_coq(tier):
    return verify_claim("C7")


@check("C2", "coq", negative_control=True, guards=("c2_coq",), tier="coq",
       scope="Coq: ‖C(p)x‖₁ ≤ θ(p)/2 must fail to prove and is refuted at p = (1/2, 1/2)")
def c2_coq_negative(tier):
    return refute_claim("C2")


@check("C3", "coq", negative_control=True, guards=("c3_coq",), tier="coq",
       scope="Coq: C3 with the parities swapped must fail to prove and is refuted at L = 2")
def c3_coq_negative(tier):
    return refute_claim("C3")


@check("C4", "coq", negative_control=True, guards=("c4_coq",), tier="coq",
       scope="Coq: C4 without p_i ≥ 1/2 must fail to prove and is refuted at uniform L = 4")
def c4_coq_negative(tier):
    return refute_claim("C4")


@check("C7", "coq", negative_control=True, guards=("c7_coq",), tier="coq",
       scope="Coq: the certificate 8ab/(a + b)² must fail to prove and is refuted at x = (1/2, 1/2)")
def c7_coq_negative(tier):
    return refute_claim("C7")


def coq_theorems() -> list[dict]:
    """The Coq statements for paper_checks.md, with file:line found by scanning the .v files
    (needs no coqc)."""
    out = []
    for claim, name, fname, statement in THEOREMS:
        path = COQ_DIR / fname
        out.append({"claim": claim, "theorem": name, "statement": statement,
                    "file": path.relative_to(ROOT).as_posix(), "line": theorem_line(path, name)})
    return out



# ----------------------------------------------------------------------------- cross-check: Coq definitions against numerics

# Rows with small denominators: MathComp's nat literals are unary, so big numbers are slow.
CROSS_ROWS = (
    (Fraction(1),),
    (Fraction(2, 3), Fraction(1, 3)),
    (Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)),
    (Fraction(1, 7), Fraction(2, 7), Fraction(4, 7)),
    (Fraction(1, 4),) * 4,
    (Fraction(3, 5), Fraction(1, 5), Fraction(1, 10), Fraction(1, 10)),
    (Fraction(1, 10), Fraction(1, 5), Fraction(3, 10), Fraction(1, 10), Fraction(3, 10)),
)


def _q(f: Fraction) -> str:
    return f"({f.numerator}%N%:R / {f.denominator}%N%:R)"


def crosscheck_source(rows=CROSS_ROWS, perturb: Fraction = Fraction(0)) -> tuple[str, list[dict], list[str]]:
    """A .v file stating, per row, θ = theta_exact and ‖C‖∞→1 (at the witness sign vector) =
    inf_to_one_norm, with the values computed here by numerics/ (exact Fractions).  Coq
    proves each by unfolding the abstract definitions of Theta.v and vm_compute over rat."""
    from numerics.softmax import covariance, inf_to_one_norm
    from numerics.theta import theta_exact
    lines = ["From mathcomp Require Import all_ssreflect all_algebra.",
             f"From {LOGICAL} Require Import Theta Eval.", "Local Open Scope ring_scope.", ""]
    table, names = [], []
    for k, row in enumerate(rows):
        L, res = len(row), theta_exact(list(row))
        norm = inf_to_one_norm(covariance(list(row)))
        theta = res.theta + perturb
        lines += [f"Definition r{k} := row {L} [:: {'; '.join(_q(f) for f in row)}].",
                  f"Lemma r{k}_theta : theta r{k} == {_q(theta)}.",
                  f"Proof. by apply: (@theta_eval _ _ _ (of_mask {L} {res.mask})); [all_subsets | witness]. Qed.",
                  f"Lemma r{k}_norm : norm1 (Cx r{k} (sv (of_mask {L} {res.mask}))) == {_q(norm + perturb)}.",
                  "Proof. by norm_at_sign. Qed.", ""]
        names += [f"r{k}_theta", f"r{k}_norm"]
        table.append({"row": [str(f) for f in row], "theta": str(res.theta), "norm": str(norm), "mask": res.mask})
    return "\n".join(lines), table, names


def crosscheck(perturb: Fraction = Fraction(0), rows=CROSS_ROWS, src: Path = COQ_DIR):
    """(exit status, coqc output, table, Print Assumptions) of the generated cross-check file."""
    b = build(src)
    if not b.ok:
        return None, b.log, [], {}
    text, table, names = crosscheck_source(rows, perturb)
    fname = "CrossCheck.v" if perturb == 0 else "CrossCheckWrong.v"
    (b.workdir / fname).write_text(text)
    res = run_coqc(b.workdir, fname)
    pa = assumptions(b, tuple(names), "Theta Eval " + Path(fname).stem) if res.returncode == 0 else {}
    return res.returncode, res.stdout + res.stderr, table, pa


CROSS_SCOPE = (f"θ and ‖C(p)‖∞→1 of {len(CROSS_ROWS)} rational rows (L = 1…5): the Theta.v definitions "
               "evaluated in Coq (vm_compute over rat) = numerics/ exact Fractions")


@check("C2", "coq", scope=CROSS_SCOPE, tier="coq")
def c2_coq_crosscheck(tier):
    if coqc() is None:
        return Evidence("skip", CROSS_SCOPE, detail=NOT_FOUND)
    rc, out, table, pa = crosscheck()
    bad = [n for n, t in pa.items() if t != CLOSED]
    ok = rc == 0 and len(pa) == 2 * len(CROSS_ROWS) and not bad
    return Evidence("pass" if ok else "fail", CROSS_SCOPE, numbers={"rows": table},
                    detail="Coq agrees with numerics.theta and numerics.softmax on every row" if ok
                    else f"exit {rc}; not closed: {bad}\n{_tail(out)}")


@check("C2", "coq", negative_control=True, guards=("c2_coq_crosscheck",), tier="coq",
       scope="the same Coq evaluation with every expected value moved by 1/97 must fail in the first lemma")
def c2_coq_crosscheck_negative(tier):
    scope = "cross-check with expected values + 1/97"
    if coqc() is None:
        return Evidence("skip", scope, detail=NOT_FOUND)
    rc, out, _, _ = crosscheck(Fraction(1, 97))
    if rc is None:
        return Evidence("fail", scope, detail=f"the development did not compile:\n{out}")
    hits = list(_ERROR_AT.finditer(out))
    path = build(COQ_DIR).workdir / "CrossCheckWrong.v"
    start, end = proof_span(path, "r0_theta")
    located = bool(hits) and hits[-1]["file"] == path.name and start <= int(hits[-1]["line"]) <= end
    return Evidence("pass" if rc != 0 and located else "fail", scope,
                    numbers={"exit": rc, "error_line": int(hits[-1]["line"]) if hits else None},
                    detail="rejected inside r0_theta" if rc != 0 and located
                    else f"the wrong values were not rejected where expected:\n{_tail(out)}")
