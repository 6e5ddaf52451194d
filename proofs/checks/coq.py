"""Coq checks (tier "coq"): C2–C8 proved for every L over any realFieldType, C1 over any realType.

The development is proofs/coq/ (files in _CoqProject order).  Its statements are
pinned by proofs/coq/Spec.v: every theorem the dashboard shows is stated there,
outside any section, with the definitions of Theta.v only, and proved by a
plain ``exact`` of the development's theorem, so Spec.v compiles only if that
theorem's type is the pinned statement (an extra premise, such as a section
``Hypothesis``, a changed hypothesis or a dropped conjunct breaks it).  The
readable statements (dashboard, the table in docs/coq.md) are the ``(** Cn: ... *)`` line
above each Spec theorem, parsed here: they are written once.

A run copies the development to a temporary folder, compiles it once per
process with a ``coqc`` loop, and reads ``Print Assumptions`` of every Spec
theorem.  A check passes only if everything compiled, Spec.v has the pinned
shape, no forbidden word (``Admitted``, ``Axiom``, ``Hypothesis``, ``Context``, a
section ``Variable`` over anything but the carrier types ``realFieldType`` and
``nat``, ...) occurs outside comments, and Coq prints "Closed under the global
context" for each theorem, or names exactly the axioms ALLOWED_AXIOMS lists for it (C1's
theorems, over a realType: the three classical axioms mathcomp-analysis assumes).

Negative controls (proofs/coq/controls/): per wrong variant, a proof attempt
(the real proof script) that must fail, with coqc's error located inside the
wrong theorem, and a machine-checked refutation of the wrong variant on a
concrete rational counterexample, which must compile with no assumptions.  A
missing coqc is a ``skip`` for every Coq check, never a pass.  Precision
contract: exact (Coq's kernel; rationals are MathComp's rat).
"""
from __future__ import annotations

import atexit
import functools
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..registry import Evidence, check

ROOT = Path(__file__).resolve().parents[2]
COQ_DIR = ROOT / "proofs" / "coq"
SPEC = "Spec.v"
INSTALL = ("apt-get update && apt-get install -y coq libcoq-mathcomp-algebra "
           "libcoq-mathcomp-algebra-tactics libcoq-mathcomp-analysis")
NOT_FOUND = f"coqc not found; install: {INSTALL}"
LOGICAL = "AttnSens"
CLOSED = "Closed under the global context"
COMPILE_TIMEOUT = 600  # seconds per file; a timeout is a failure
SCOPE = "every L ≥ 1, any realFieldType (Coq 8.16, MathComp 1.15)"
ANALYSIS_SCOPE = "every L ≥ 1, τ > 0, any realType (Coq 8.16, mathcomp-analysis 0.6.0)"
LN_SCOPE = "every width d, any realFieldType (Coq 8.16, MathComp 1.15)"
CLAIM_SCOPES = {
    "C1": ANALYSIS_SCOPE + ": the derivative of u ↦ softmax(u/τ) along every direction v is C(p)v/τ, "
                           "p = softmax(u/τ); softmax(z) ∈ Δ_L",
    "C2": SCOPE + ": C2 (a) box bound, (b) attained at a sign vector, ‖C‖∞→1 = θ; and, over any "
                  "realType with C1, the same for the softmax Jacobian itself (‖J‖∞→1 = θ(p)/τ)",
    "C3": SCOPE + ": θ(uniform) = 1 (even L), 1 − 1/L² (odd L)",
    "C4": SCOPE + ": p_i ≥ 1/2 ⇒ θ = 4p_i(1 − p_i)",
    "C5": SCOPE + ": θ ≥ 4p_i(1 − p_i) for every i; θ ≥ 4m(1 − m) and θ ≥ 1 − m² for m = p_max",
    "C6": SCOPE + ": removing a zero atom leaves θ unchanged; |θ(p) − θ(q)| ≤ 2‖p − q‖₁ on the simplex",
    "C7": SCOPE + ": θ(x/(a + b)) ≥ 4ab/(a + b)² for any S; θ = 1 − δ²; the certificate checker "
                  "Checker.check_row is sound (check_row_sound)",
    "C8": SCOPE + ", every width d: row-stochastic P gives ‖(PV)_i‖₂² ≤ max_j ‖v_j‖₂² (‖PV‖_B ≤ ‖V‖_B)",
    "C11": LN_SCOPE + ": the closed form J_LN is LayerNorm's derivative along every direction (over any "
                      "realType, mathcomp-analysis 0.6.0); J_LN 1 = 0; (1/γ)ᵀ J_LN = 0; rank d − 1 (eps > 0), "
                      "d − 2 (eps = 0, x not constant); J_LN c = 0 iff eps = 0",
    "C12": LN_SCOPE + ", every L: J_pre = I + J_F J_LN (the chain rule as the definition) fixes a ⊗ 1 "
                      "for any linear J_F",
    "C13": LN_SCOPE + ", every L: e_t ⊗ 1/γ is a left null vector of J_post = J_LN(I + J_F) for any J_F, "
                      "so ‖(J_post − I)W‖ ≥ ‖W‖ ≠ 0 (‖J_post − I‖₂ ≥ 1)",
}

# Axioms a Spec theorem (or a control's refutation) may rely on: theorem name -> the axiom names
# exactly as Print Assumptions prints them.  Every other theorem must be closed; an axiom not listed
# fails the check, and so does a listed one that is not printed (a stale entry would mislabel the
# dashboard, which shows the entry next to the theorem).  mathcomp-analysis (expR, limits,
# derivatives) assumes these three in mathcomp.classical.boolp; nothing else is allowed.
ANALYSIS_AXIOMS = ("boolp.propositional_extensionality", "boolp.functional_extensionality_dep",
                   "boolp.constructive_indefinite_description")
ALLOWED_AXIOMS: dict[str, tuple[str, ...]] = {
    "C1_directional": ANALYSIS_AXIOMS,
    "softmax_distribution": ANALYSIS_AXIOMS,
    "C2_jacobian": ANALYSIS_AXIOMS,
    "C11_derivative": ANALYSIS_AXIOMS,
    "C11_noalpha_refuted": ANALYSIS_AXIOMS,
    "C1_notau_refuted": ANALYSIS_AXIOMS,
}

# Section variables are allowed only over these carrier types: an inhabited type with no
# propositional content cannot smuggle a premise, and every Spec statement must bind them.
SECTION_TYPES = ("realFieldType", "realType", "nat")
# What Spec.v may import with Import (the development's theorem files are loaded with Require only).
SPEC_IMPORTS = ("Theta", "Softmax")
SPEC_OPEN_IMPORTS = ("Order.TTheory", "GRing.Theory", "Num.Theory",
                     "numFieldTopology.Exports", "numFieldNormedType.Exports")

# control id -> (claim, control file, wrong theorem, refutation file, refuting theorem, what is wrong)
CONTROLS = {
    "C1": ("C1", "C1_notau.v", "C1_notau_wrong", "C1_notau_refuted.v", "C1_notau_refuted",
           "derivative C(p)v without the 1/τ; refuted in every realType at L = 2, u = 0, v = e₀ "
           "(τ = 2 and τ = 1 give one function two derivatives)"),
    "C2": ("C2", "C2_half.v", "C2_half_wrong", "C2_half_refuted.v", "C2_half_refuted",
           "‖C(p)x‖₁ ≤ θ(p)/2; refuted at p = (1/2, 1/2)"),
    "C3": ("C3", "C3_swapped.v", "C3_swapped_wrong", "C3_swapped_refuted.v", "C3_swapped_refuted",
           "parities swapped; refuted at L = 2"),
    "C4": ("C4", "C4_nohalf.v", "C4_nohalf_wrong", "C4_nohalf_refuted.v", "C4_nohalf_refuted",
           "θ = 4p_i(1 − p_i) without p_i ≥ 1/2; refuted at uniform L = 4"),
    "C5": ("C5", "C5_quarter.v", "C5_quarter_wrong", "C5_quarter_refuted.v", "C5_quarter_refuted",
           "θ ≥ 1 − m²/4; refuted at uniform L = 3 (θ = 8/9 < 35/36)"),
    "C6_zero": ("C6", "C6_any_atom.v", "C6_any_atom_wrong", "C6_any_atom_refuted.v", "C6_any_atom_refuted",
                "removing any atom (no p_i = 0) leaves θ unchanged; refuted at the row (1/2, 1), atom 0"),
    "C6_lip": ("C6", "C6_lip1.v", "C6_lip1_wrong", "C6_lip1_refuted.v", "C6_lip1_refuted",
               "θ 1-Lipschitz in ℓ1; refuted at p = (1, 0), q = (3/4, 1/4)"),
    "C7": ("C7", "C7_const8.v", "C7_const8_wrong", "C7_const8_refuted.v", "C7_const8_refuted",
           "certificate 8ab/(a + b)²; refuted at x = (1/2, 1/2), S = {0}"),
    "C7_checker": ("C7", "Checker_witnessT.v", "Checker_witnessT_wrong", "Checker_witnessT_refuted.v",
                   "Checker_witnessT_refuted",
                   "the certificate checker with θ_lo·T ≤ 4AB (T for T²); refuted at the row (1, 3), θ_lo = 1"),
    "C8": ("C8", "C8_frobenius.v", "C8_frobenius_wrong", "C8_frobenius_refuted.v", "C8_frobenius_refuted",
           "‖PV‖_F² ≤ ‖V‖_F² (Frobenius); refuted at P = [[1, 0], [1, 0]], V = [[1], [0]]"),
    "C11_gamma": ("C11", "C11_gamma.v", "C11_gamma_wrong", "C11_gamma_refuted.v", "C11_gamma_refuted",
                  "J_LN γ = 0 (γ for 1); refuted at d = 2, x = (0, 2), γ = (1, 2), eps = 3, s = 2"),
    "C11_rank": ("C11", "C11_rank.v", "C11_rank_wrong", "C11_rank_refuted.v", "C11_rank_refuted",
                 "rank d − 2 also for eps > 0; refuted at d = 2, x = (0, 2), γ = (1, 1), eps = 3, s = 2"),
    "C11_noalpha": ("C11", "C11_noalpha.v", "C11_noalpha_wrong", "C11_noalpha_refuted.v", "C11_noalpha_refuted",
                    "derivative (1/s) diag(γ) Π v without the α ĉĉᵀ term; refuted in every realType at d = 2, "
                    "x = v = (0, 1), eps = 0 (a derivative is unique)"),
    "C12": ("C12", "C12_noid.v", "C12_noid_wrong", "C12_noid_refuted.v", "C12_noid_refuted",
            "J_F J_LN (a ⊗ 1) = a ⊗ 1 (no identity path); refuted at L = d = 1, J_F = I, a = 1"),
    "C13_gamma": ("C13", "C13_gamma.v", "C13_gamma_wrong", "C13_gamma_refuted.v", "C13_gamma_refuted",
                  "e_t ⊗ γ (γ for 1/γ) left null for J_post; refuted at L = 1, d = 2, y = (0, 2), "
                  "γ = (1, 2), eps = 3, J_F = 0"),
    "C13_pre": ("C13", "C13_pre.v", "C13_pre_wrong", "C13_pre_refuted.v", "C13_pre_refuted",
                "e_t ⊗ 1/γ left null also for pre-LN J_pre; refuted at L = d = 1, γ = 1, J_F = I"),
}

_FORBIDDEN = re.compile(r"\b(Admitted|admit|Admit|Axiom|Axioms|Parameter|Parameters|Conjecture|Hypothesis|"
                        r"Hypotheses|Variable|Variables|Context|bypass_check|Guard\s+Checking|"
                        r"Positivity\s+Checking|Universe\s+Checking|Declare\s+ML\s+Module)\b")
_ERROR_AT = re.compile(r'File "\./(?P<file>[^"]+)", line (?P<line>\d+), characters \d+-\d+:\s*\nError:')


# ----------------------------------------------------------------------------- reading Coq source

def coqc() -> str | None:
    return shutil.which("coqc")


def sources(src: Path = COQ_DIR) -> list[str]:
    """The .v files of the development, in the order _CoqProject lists them (Spec.v last)."""
    return [ln.strip() for ln in (src / "_CoqProject").read_text().splitlines() if ln.strip().endswith(".v")]


def comment_mask(text: str) -> list[bool]:
    """Per character of ``text``: is it inside a (* nested *) comment?  Lexed as Coq does: a
    string literal ("..." with "" for a quote) outside a comment is code, and inside a comment it
    is skipped, so neither "(*" nor "*)" within a string opens or closes a comment."""
    mask, depth, i, n = [False] * len(text), 0, 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while j < n and not (text[j] == '"' and text[j + 1:j + 2] != '"'):
                j += 2 if text[j] == '"' else 1
            mask[i:j + 1] = [depth > 0] * len(mask[i:j + 1])
            i = j + 1
        elif text.startswith("(*", i):
            depth += 1
            mask[i:i + 2] = [True, True]
            i += 2
        elif text.startswith("*)", i) and depth:
            depth -= 1
            mask[i:i + 2] = [True, True]
            i += 2
        else:
            mask[i] = depth > 0
            i += 1
    return mask


def strip_comments(text: str) -> str:
    """Coq source without its comments (see comment_mask), so a word in a comment is not flagged."""
    return "".join(c for c, m in zip(text, comment_mask(text)) if not m)


def sentences(code: str) -> list[str]:
    """Comment-free Coq text split into sentences (a sentence ends at a '.' followed by
    white space or the end), each with white space collapsed."""
    return [" ".join(s.split()) for s in re.split(r"\.(?=\s|$)", code) if s.strip()]


_VARIABLE = re.compile(r"(?:#\[[^\]]*\]\s*)?(?:Local\s+)?Variables?\s+(?P<body>.*)", re.DOTALL)
_BINDER = re.compile(r"\(\s*(?P<names>[A-Za-z_][\w']*(?:\s+[A-Za-z_][\w']*)*)\s*:\s*(?P<type>[^():]+?)\s*\)")


def section_variable_types(sentence: str) -> tuple[str, ...] | None:
    """The types a ``Variable``/``Variables`` sentence declares if every one is a carrier type
    of SECTION_TYPES, else None (the sentence is then forbidden like a ``Hypothesis``)."""
    m = _VARIABLE.fullmatch(sentence)
    if not m:
        return None
    body = m["body"].strip()
    if body.startswith("("):
        if not re.fullmatch(rf"(?:{_BINDER.pattern}\s*)+", body):
            return None
        types = tuple(b["type"] for b in _BINDER.finditer(body))
    else:
        bare = re.fullmatch(r"[A-Za-z_][\w']*(?:\s+[A-Za-z_][\w']*)*\s*:\s*(?P<type>[^():]+?)", body)
        if not bare:
            return None
        types = (bare["type"],)
    return types if all(t in SECTION_TYPES for t in types) else None


def scan(text: str) -> tuple[list[str], set[str]]:
    """(forbidden words outside comments, carrier types of the allowed section variables)."""
    words, carriers = [], set()
    for s in sentences(strip_comments(text)):
        types = section_variable_types(s)
        if types is not None:
            carriers |= set(types)
            continue
        words += [m.group(0) for m in _FORBIDDEN.finditer(s)]
    return words, carriers


@dataclass(frozen=True)
class SpecTheorem:
    claim: str
    name: str        # the Spec theorem (Spec.<name>), the same name as the development's theorem
    readable: str    # the (** Cn: ... *) line, as the dashboard shows it
    statement: str   # the Coq statement
    module: str      # the development file (stem) that proves it
    line: int        # line of ``Theorem name`` in Spec.v


_SPEC_BLOCK = re.compile(
    r"\(\*\*\s*(?P<claim>[A-Z]\d+):\s*(?P<readable>(?:(?!\*\)).)*?)\s*\*\)\s*"
    r"Theorem\s+(?P<name>\w+)\s*:\s*(?P<statement>.*?)\.\s+"
    r"Proof\.\s+exact\s+\(@(?P<module>\w+)\.(?P<target>\w+)\)\.\s+Qed\.", re.DOTALL)


def spec_theorems(src: Path = COQ_DIR) -> list[SpecTheorem]:
    """The pinned statements of Spec.v, in file order (needs no coqc)."""
    text = (Path(src) / SPEC).read_text()
    mask, out = comment_mask(text), []
    for m in _SPEC_BLOCK.finditer(text):
        if mask[m.start("name")]:
            continue  # a block inside a comment states nothing
        out.append(SpecTheorem(m["claim"], m["name"], " ".join(m["readable"].split()),
                               " ".join(m["statement"].split()), m["module"],
                               text.count("\n", 0, m.start("name")) + 1))
    return out


def spec_problems(src: Path = COQ_DIR) -> list[str]:
    """Why Spec.v is not in the pinned shape (empty when it is): only imports, scope settings
    and `Theorem name : statement. Proof. exact (@File.name). Qed.` blocks, each with its
    readable line; no section, no definition, nothing else."""
    src = Path(src)
    text = (src / SPEC).read_text()
    dev = [Path(n).stem for n in sources(src) if n != SPEC]
    problems = []
    allowed = [
        r"From mathcomp(?:\.\w+)* Require Import [\w. ]+",
        rf"From {LOGICAL} Require Import (?:{'|'.join(SPEC_IMPORTS)})(?: (?:{'|'.join(SPEC_IMPORTS)}))*",
        rf"From {LOGICAL} Require (?:{'|'.join(dev)})(?: (?:{'|'.join(dev)}))*",
        rf"Import (?:{'|'.join(map(re.escape, SPEC_OPEN_IMPORTS))})(?: (?:{'|'.join(map(re.escape, SPEC_OPEN_IMPORTS))}))*",
        r"Local Open Scope ring_scope", r"Theorem \w+ : .+", r"Proof", r"exact \(@\w+\.\w+\)", r"Qed",
    ]
    for s in sentences(strip_comments(text)):
        if not any(re.fullmatch(a, s, re.DOTALL) for a in allowed):
            problems.append(f"{SPEC}: unexpected sentence {s[:80]!r}")
    thms = spec_theorems(src)
    n_theorems = len(re.findall(r"(?m)^\s*Theorem\s", strip_comments(text)))
    if len(thms) != n_theorems or n_theorems == 0:
        problems.append(f"{SPEC}: {n_theorems} Theorem sentences but {len(thms)} pinned blocks "
                        "(each Theorem needs its (** Cn: ... *) line and `Proof. exact (@File.name). Qed.`)")
    mask = comment_mask(text)
    for m in _SPEC_BLOCK.finditer(text):
        if mask[m.start("name")]:
            continue
        if m["target"] != m["name"]:
            problems.append(f"{SPEC}: {m['name']} is proved by {m['module']}.{m['target']} (names must agree)")
        if m["module"] not in dev:
            problems.append(f"{SPEC}: {m['name']} cites {m['module']}, not a development file")
    names = [t.name for t in thms]
    problems += [f"{SPEC}: {n} is stated twice" for n in sorted({n for n in names if names.count(n) > 1})]
    # A section variable of the proving file must be bound by the pinned statement.
    for t in thms:
        if t.module in dev:
            _, carriers = scan((src / f"{t.module}.v").read_text())
            for ty in sorted(carriers):
                if not re.search(rf":\s*{re.escape(ty)}\s*\)", t.statement):
                    problems.append(f"{SPEC}: {t.name} does not bind the section variable type {ty} of {t.module}.v")
    return problems


def assumption_names(text: str) -> list[str] | None:
    """The axioms a ``Print Assumptions`` output lists: [] for "Closed under the global
    context", None for anything that is not a plain "Axioms:" list (section variables,
    relaxed checking, an error)."""
    if text == CLOSED:
        return []
    lines = text.splitlines()
    if not lines or lines[0].strip() != "Axioms:":
        return None
    names, body = [], lines[1:]
    for k, ln in enumerate(body):
        if not ln.strip() or ln[0].isspace():
            continue  # a blank line or the continuation of a type
        m = re.match(r"([\w.']+)\s*:", ln)
        if not m:
            # A long type goes on the next line: the name alone, then an indented ": type".
            m = re.fullmatch(r"([\w.']+)\s*", ln)
            if not (m and k + 1 < len(body) and re.match(r"\s+:", body[k + 1])):
                return None
        names.append(m.group(1))
    return names or None


# ----------------------------------------------------------------------------- building

@dataclass
class Build:
    ok: bool
    workdir: Path
    seconds: dict = field(default_factory=dict)   # file -> compile seconds
    log: str = ""                                  # coqc output of the first failure
    failed: str = ""                               # the file that did not compile
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


_REQUIRE = re.compile(rf"\bFrom\s+{LOGICAL}\s+Require\s+(?:(?:Import|Export)\s+)?([^.]*)\.")


def requires(text: str) -> set[str]:
    """The development's modules a file loads (``From AttnSens Require [Import] A B.``)."""
    return {m for grp in _REQUIRE.findall(strip_comments(text)) for m in grp.split()}


def workers() -> int:
    """coqc processes run at once: one per core (coqc itself is single-threaded)."""
    return max(1, os.cpu_count() or 1)


def compile_all(workdir: Path, names: list[str]) -> dict[str, subprocess.CompletedProcess]:
    """Compile ``names`` in ``workdir``, each once its AttnSens dependencies among ``names`` have
    compiled, up to :func:`workers` at a time.  A file whose dependency failed is not run (it has
    no entry).  The result does not depend on the order in which compiles finish."""
    deps = {n: {d + ".v" for d in requires((workdir / n).read_text())} & set(names) for n in names}
    done: dict[str, subprocess.CompletedProcess] = {}
    pending, running = list(names), {}
    with ThreadPoolExecutor(max_workers=workers()) as pool:
        while pending or running:
            blocked = {n for n in pending if any(d in done and done[d].returncode != 0 for d in deps[n])}
            pending = [n for n in pending if n not in blocked]
            for n in [n for n in pending if deps[n] <= {d for d in done if done[d].returncode == 0}]:
                pending.remove(n)
                running[pool.submit(_timed_coqc, workdir, n)] = n
            if not running:
                break                                   # the rest wait on a failed file
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                done[running.pop(fut)] = fut.result()
    return done


def _timed_coqc(workdir: Path, name: str) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    res = run_coqc(workdir, name)
    res.seconds = round(time.perf_counter() - t0, 2)
    return res


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
        b.forbidden += [(name, w) for w in scan((src / name).read_text())[0]]
    results = compile_all(work, sources(src))
    for name in sources(src):                           # the first failure in _CoqProject order
        res = results.get(name)
        if res is not None:
            b.seconds[name] = res.seconds
        if res is None or res.returncode != 0:
            b.ok, b.failed = False, name
            b.log = (f"{name}: exit {res.returncode}\n{_tail(res.stdout + res.stderr)}" if res is not None
                     else f"{name}: not compiled (a file it requires failed)")
            break
    return b


@functools.lru_cache(maxsize=None)
def _control_runs(src: Path) -> dict[str, subprocess.CompletedProcess]:
    """Every control's proof attempt and refutation, compiled at once in the build folder (they
    only load the compiled development, never each other)."""
    b = _build(src)
    files = sorted({f for c in CONTROLS.values() for f in (c[1], c[3])})
    with ThreadPoolExecutor(max_workers=workers()) as pool:
        return dict(zip(files, pool.map(lambda f: run_coqc(b.workdir, f), files)))


def _tail(text: str, lines: int = 15) -> str:
    """The last lines of coqc output, without the warning blocks MathComp's imports print."""
    blocks = re.split(r'(?m)^(?=File ")', text)
    keep = [b.strip() for b in blocks if b.strip() and not re.match(r'File [^\n]*\n(Warning|\[)', b)]
    return "\n".join("\n".join(keep).splitlines()[-lines:])


_probes = itertools.count()


def assumptions(b: Build, names: tuple[str, ...], header: str) -> dict[str, str]:
    """``Print Assumptions`` of each (qualified) name, as Coq prints it, after ``header``."""
    probe = f"pa{next(_probes)}"
    lines = [header] + [f'Redirect "{probe}_{k}" Print Assumptions {n}.' for k, n in enumerate(names)]
    (b.workdir / f"{probe}.v").write_text("\n".join(lines) + "\n")
    res = run_coqc(b.workdir, f"{probe}.v")
    out = {}
    for k, n in enumerate(names):
        f = b.workdir / f"{probe}_{k}.out"
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

def main_assumptions(src: Path = COQ_DIR) -> dict[str, str]:
    """Print Assumptions of every Spec theorem (by name), in one coqc run per process."""
    return _main_assumptions(Path(src).resolve())


@functools.lru_cache(maxsize=None)
def _main_assumptions(src: Path) -> dict[str, str]:
    names = tuple(t.name for t in spec_theorems(src))
    pa = assumptions(build(src), tuple(f"Spec.{n}" for n in names), f"From {LOGICAL} Require Spec.")
    return {n: pa[f"Spec.{n}"] for n in names}


def assumption_problems(name: str, text: str) -> list[str]:
    """Why a theorem's Print Assumptions output is not acceptable (empty when it is): it must
    name exactly the axioms ALLOWED_AXIOMS lists for ``name`` (none: "Closed under the global
    context")."""
    axioms = assumption_names(text)
    if axioms is None:
        return [f"Print Assumptions {name}: {text!r}"]
    allowed = ALLOWED_AXIOMS.get(name, ())
    extra = [a for a in axioms if a not in allowed]
    stale = [a for a in allowed if a not in axioms]
    return ([f"Print Assumptions {name}: axiom {a} is not on the allow-list" for a in extra]
            + [f"Print Assumptions {name}: the allow-list names {a}, which it does not print "
               "(a stale entry would mislabel the dashboard)" for a in stale])


def verify_claim(claim: str, src: Path = COQ_DIR) -> Evidence:
    """Positive check: ``src`` compiles (Spec.v included, so every development theorem has its
    pinned type), Spec.v has the pinned shape, no forbidden word occurs, and every Spec
    theorem of ``claim`` is closed (or uses only allow-listed axioms)."""
    src = Path(src)
    scope = CLAIM_SCOPES[claim]
    if coqc() is None:
        return Evidence("skip", scope, detail=NOT_FOUND)
    names = tuple(t.name for t in spec_theorems(src) if t.claim == claim)
    b = build(src)
    nums = {"compile_seconds": b.seconds, "theorems": list(names)}
    problems = spec_problems(src)
    problems += [f"{f}: forbidden word {w!r} outside comments" for f, w in b.forbidden]
    if not names:
        problems.append(f"{SPEC} pins no theorem for {claim}")
    if not b.ok:
        why = (f"{SPEC} did not compile: a development theorem does not have its pinned statement"
               if b.failed == SPEC else "the development did not compile")
        problems.append(f"{why}:\n{b.log}")
    else:
        everything = main_assumptions(src)
        pa = {n: everything[n] for n in names}
        nums["print_assumptions"] = pa
        for n, t in pa.items():
            problems += assumption_problems(n, t)
    if problems:
        return Evidence("fail", scope, numbers=nums, detail="; ".join(problems))
    used = {n: list(ALLOWED_AXIOMS[n]) for n in names if ALLOWED_AXIOMS.get(n)}
    closed = [n for n in names if n not in used]
    return Evidence("pass", scope, numbers=nums,
                    detail=f"{', '.join(names)}: pinned by {SPEC}; Print Assumptions: "
                    + "; ".join(([f"{', '.join(closed)}: {CLOSED}"] if closed else [])
                                + [f"{n}: only the allowed axioms {', '.join(a)}" for n, a in used.items()]))


def refute_claim(control: str, src: Path = COQ_DIR) -> Evidence:
    """Negative control: the wrong variant's proof fails inside its theorem, and its
    refutation compiles with no assumptions (or exactly those ALLOWED_AXIOMS lists for the
    refuting theorem).  Anything else (no coqc, a broken development, an error elsewhere) is
    not a pass."""
    _, attempt, wrong, refutation, refuter, what = CONTROLS[control]
    scope = f"wrong variant: {what}"
    if coqc() is None:
        return Evidence("skip", scope, detail=NOT_FOUND)
    b = build(src)
    if not b.ok:
        return Evidence("fail", scope, detail=f"the development did not compile:\n{b.log}")
    runs = _control_runs(Path(src).resolve())
    res = runs[attempt]
    out = res.stdout + res.stderr
    hits = list(_ERROR_AT.finditer(out))
    start, end = proof_span(b.workdir / attempt, wrong)
    located = bool(hits) and hits[-1]["file"] == attempt and start and start <= int(hits[-1]["line"]) <= end
    nums = {"attempt_exit": res.returncode, "error_line": int(hits[-1]["line"]) if hits else None,
            "wrong_theorem_lines": [start, end]}
    if res.returncode == 0 or not located:
        return Evidence("fail", scope, numbers=nums,
                        detail=f"{attempt}: the wrong variant was not rejected inside {wrong}:\n{_tail(out)}")
    ref = runs[refutation]
    if ref.returncode != 0:
        return Evidence("fail", scope, numbers=nums,
                        detail=f"{refutation} did not compile:\n{_tail(ref.stdout + ref.stderr)}")
    # The refutation alone (what it needs loads with it): loading the whole development, the
    # mathcomp-analysis part included, for every control would cost seconds each.
    header = f"From {LOGICAL} Require Import {Path(refutation).stem}."
    pa = assumptions(b, (refuter,), header)[refuter]
    nums["print_assumptions"] = {refuter: pa}
    forbidden = scan((b.workdir / refutation).read_text())[0]
    bad = assumption_problems(refuter, pa)
    if bad or forbidden:
        return Evidence("fail", scope, numbers=nums, detail=f"{refuter}: {'; '.join(bad)} {forbidden}")
    axioms = ALLOWED_AXIOMS.get(refuter)
    return Evidence("pass", scope, numbers=nums,
                    detail=f"{wrong} fails at line {nums['error_line']} ({attempt}); {refuter} proved, "
                    + (f"only the allowed axioms {', '.join(axioms)}" if axioms else CLOSED))


@check("C1", "coq", scope=CLAIM_SCOPES["C1"], tier="coq")
def c1_coq(tier):
    return verify_claim("C1")


@check("C2", "coq", scope=CLAIM_SCOPES["C2"], tier="coq")
def c2_coq(tier):
    return verify_claim("C2")


@check("C3", "coq", scope=CLAIM_SCOPES["C3"], tier="coq")
def c3_coq(tier):
    return verify_claim("C3")


@check("C4", "coq", scope=CLAIM_SCOPES["C4"], tier="coq")
def c4_coq(tier):
    return verify_claim("C4")


@check("C5", "coq", scope=CLAIM_SCOPES["C5"], tier="coq")
def c5_coq(tier):
    return verify_claim("C5")


@check("C6", "coq", scope=CLAIM_SCOPES["C6"], tier="coq")
def c6_coq(tier):
    return verify_claim("C6")


@check("C7", "coq", scope=CLAIM_SCOPES["C7"], tier="coq")
def c7_coq(tier):
    return verify_claim("C7")


@check("C8", "coq", scope=CLAIM_SCOPES["C8"], tier="coq")
def c8_coq(tier):
    return verify_claim("C8")


@check("C11", "coq", scope=CLAIM_SCOPES["C11"], tier="coq")
def c11_coq(tier):
    return verify_claim("C11")


@check("C12", "coq", scope=CLAIM_SCOPES["C12"], tier="coq")
def c12_coq(tier):
    return verify_claim("C12")


@check("C13", "coq", scope=CLAIM_SCOPES["C13"], tier="coq")
def c13_coq(tier):
    return verify_claim("C13")


@check("C1", "coq", negative_control=True, guards=("c1_coq",), tier="coq",
       scope="Coq: the softmax derivative C(p)v without the 1/τ must fail to prove and is refuted in every realType")
def c1_coq_negative(tier):
    return refute_claim("C1")


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


@check("C5", "coq", negative_control=True, guards=("c5_coq",), tier="coq",
       scope="Coq: θ ≥ 1 − m²/4 must fail to prove and is refuted at uniform L = 3")
def c5_coq_negative(tier):
    return refute_claim("C5")


@check("C6", "coq", negative_control=True, guards=("c6_coq",), tier="coq",
       scope="Coq: removing an atom without p_i = 0 must fail to prove and is refuted at the row (1/2, 1)")
def c6_coq_negative_zero(tier):
    return refute_claim("C6_zero")


@check("C6", "coq", negative_control=True, guards=("c6_coq",), tier="coq",
       scope="Coq: θ 1-Lipschitz in ℓ1 must fail to prove and is refuted at p = (1, 0), q = (3/4, 1/4)")
def c6_coq_negative_lipschitz(tier):
    return refute_claim("C6_lip")


@check("C7", "coq", negative_control=True, guards=("c7_coq",), tier="coq",
       scope="Coq: the certificate 8ab/(a + b)² must fail to prove and is refuted at x = (1/2, 1/2)")
def c7_coq_negative(tier):
    return refute_claim("C7")


@check("C7", "coq", negative_control=True, guards=("c7_coq",), tier="coq",
       scope="Coq: the certificate checker with T instead of T² in the witness bound must fail to prove "
             "sound and is refuted at the row (1, 3)")
def c7_coq_checker_negative(tier):
    return refute_claim("C7_checker")


# The extracted checker (proofs/coq/extract/): built from the compiled development and run on
# rows whose verdicts are known by hand; a false certificate among them must be rejected.
EXTRACT_DIR = COQ_DIR / "extract"
EXTRACT_LINES = (  # (input line, expected verdict); the row (1, 3): θ = 3/4, gap = 1/4 (C4)
    ("a 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 0", True),
    ("b 2 1 3 01 01 00 1 1 1 1 0 1 0 1 1 100000 0", False),     # θ ∈ [1, 1]: false
    ("c 2 1 3 00 01 00 3 4 3 4 1 4 1 4 1 100000 0", False),     # the witness ∅ does not give θ_lo
    ("d 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 1", False),     # regime 1 for a dominant row
    ("e 3 1 1 1 100 111 000 8 9 8 9 1 9 1 9 1 100000 1", True),   # uniform L = 3: θ = 8/9 (C3)
    ("f 5 1 1 1 1 1 11000 00000 11100 18 19 18 19 1 19 1 19 1 100000 1", True),   # parity: θ = 24/25
    ("g 5 1 1 1 1 1 11000 00000 00000 18 19 18 19 1 19 1 19 1 100000 1", False),  # no hint: unjustified
)


def extracted_checker() -> tuple[str | None, str, str]:
    """(path of the extracted checker built from this tree, or None; "skip" or "fail"; why not).
    Built once per process into a temporary folder by proofs/coq/extract/build.sh."""
    if coqc() is None:
        return None, "skip", NOT_FOUND
    if shutil.which("ocamlfind") is None:
        return None, "skip", ("ocamlfind not found; install: apt-get install -y ocaml-nox ocaml-findlib "
                              "libzarith-ocaml-dev")
    return _build_extracted()


@functools.lru_cache(maxsize=None)
def _build_extracted() -> tuple[str | None, str, str]:
    out = Path(tempfile.mkdtemp(prefix="attnsens-extract-"))
    atexit.register(shutil.rmtree, out, True)
    try:
        res = subprocess.run(["sh", str(EXTRACT_DIR / "build.sh"), str(out)], capture_output=True, text=True,
                             timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "fail", f"build.sh: timeout after {COMPILE_TIMEOUT} s"
    if res.returncode != 0:
        return None, "fail", f"build.sh failed:\n{_tail(res.stdout + res.stderr)}"
    return str(out / "coq-checker"), "", ""


def _extracted_verdicts(scope: str, lines) -> Evidence:
    """Run the extracted checker on (line, expected verdict) pairs: pass iff every verdict is
    the expected one."""
    binary, status, why = extracted_checker()
    if binary is None:
        return Evidence(status, scope, detail=why)
    run = subprocess.run([binary], input="".join(ln + "\n" for ln, _ in lines),
                         capture_output=True, text=True, timeout=60)
    want = [f"{ln.split()[0]} {'ACCEPT' if ok else 'REJECT'}" for ln, ok in lines]
    got = run.stdout.splitlines()
    ok = run.returncode == 0 and got == want
    return Evidence("pass" if ok else "fail", scope, numbers={"verdicts": got},
                    detail="every verdict as expected" if ok
                    else f"exit {run.returncode}; got {got}, expected {want}; {run.stderr[-300:]}")


@check("C7", "coq", tier="coq",
       scope="Checker.check_row extracted to OCaml (Zarith) by proofs/coq/extract/build.sh: builds, and "
             "accepts 3 hand-checked true certificates (dominant, uniform L = 3, parity)")
def c7_coq_checker_extracted(tier):
    return _extracted_verdicts("extracted checker: build and true certificates accepted",
                               [t for t in EXTRACT_LINES if t[1]])


@check("C7", "coq", negative_control=True, guards=("c7_coq_checker_extracted",), tier="coq",
       scope="the extracted checker must reject 4 hand-checked false certificates (θ_lo above θ, an empty "
             "witness, a dominant row labelled closed, a parity bound with no hint)")
def c7_coq_checker_extracted_negative(tier):
    return _extracted_verdicts("extracted checker: false certificates rejected",
                               [t for t in EXTRACT_LINES if not t[1]])


@check("C8", "coq", negative_control=True, guards=("c8_coq",), tier="coq",
       scope="Coq: the Frobenius version ‖PV‖_F ≤ ‖V‖_F must fail to prove and is refuted at P = [[1, 0], [1, 0]], V = [[1], [0]]")
def c8_coq_negative(tier):
    return refute_claim("C8")


@check("C11", "coq", negative_control=True, guards=("c11_coq",), tier="coq",
       scope="Coq: J_LN γ = 0 (γ in place of 1) must fail to prove and is refuted at d = 2")
def c11_coq_negative_gamma(tier):
    return refute_claim("C11_gamma")


@check("C11", "coq", negative_control=True, guards=("c11_coq",), tier="coq",
       scope="Coq: rank J_LN = d − 2 with eps > 0 must fail to prove and is refuted at d = 2, eps = 3")
def c11_coq_negative_rank(tier):
    return refute_claim("C11_rank")


@check("C11", "coq", negative_control=True, guards=("c11_coq",), tier="coq",
       scope="Coq: the LayerNorm derivative without the α ĉĉᵀ term must fail to prove and is refuted at d = 2")
def c11_coq_negative_noalpha(tier):
    return refute_claim("C11_noalpha")


@check("C12", "coq", negative_control=True, guards=("c12_coq",), tier="coq",
       scope="Coq: the pre-LN Jacobian without I fixing a ⊗ 1 must fail to prove and is refuted at L = d = 1")
def c12_coq_negative(tier):
    return refute_claim("C12")


@check("C13", "coq", negative_control=True, guards=("c13_coq",), tier="coq",
       scope="Coq: e_t ⊗ γ as J_post's left null vector must fail to prove and is refuted at L = 1, d = 2")
def c13_coq_negative_gamma(tier):
    return refute_claim("C13_gamma")


@check("C13", "coq", negative_control=True, guards=("c13_coq",), tier="coq",
       scope="Coq: e_t ⊗ 1/γ as a left null vector of the pre-LN J_pre must fail to prove and is refuted at L = d = 1")
def c13_coq_negative_pre(tier):
    return refute_claim("C13_pre")


def coq_theorems(src: Path = COQ_DIR) -> list[dict]:
    """The pinned statements for paper_checks.md, read from Spec.v (needs no coqc): claim,
    theorem, the readable line (with its allowed axioms, if any), the carrier type R ranges
    over (realFieldType, or realType for the analysis theorems), and Spec.v's file:line."""
    out = []
    for t in spec_theorems(src):
        statement = t.readable
        if ALLOWED_AXIOMS.get(t.name):
            statement += f" [assumes the axioms {', '.join(ALLOWED_AXIOMS[t.name])}]"
        path = Path(src) / SPEC
        carrier = re.match(r"forall \(R : (\w+)\)", t.statement)
        out.append({"claim": t.claim, "theorem": t.name, "statement": statement, "module": t.module,
                    "carrier": carrier[1] if carrier else "",
                    "file": path.resolve().relative_to(ROOT).as_posix() if Path(src) == COQ_DIR else str(path),
                    "line": t.line})
    return out


README_BEGIN = "<!-- coq-theorems: generated from proofs/coq/Spec.v by `python -m proofs.checks.coq --readme`; do not edit -->"
README_END = "<!-- end coq-theorems -->"


def readme_table() -> str:
    """The table of proved statements in docs/coq.md, generated from Spec.v."""
    rows = ["| claim | theorem | proof | statement |", "|---|---|---|---|"]
    for t in coq_theorems():
        rows.append(f"| {t['claim']} | `{t['theorem']}` | `{t['module']}.v` | "
                    f"{t['statement'].replace('|', chr(92) + '|')} |")
    return "\n".join([README_BEGIN, *rows, README_END])


def write_readme(path: Path = ROOT / "docs" / "coq.md") -> bool:
    """Replace the generated table in docs/coq.md (the Coq page); True if it changed."""
    text = path.read_text()
    i, j = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    new = text[:i] + readme_table() + text[j:]
    if new != text:
        path.write_text(new)
    return new != text


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
    header = f"From {LOGICAL} Require Import Theta Eval {Path(fname).stem}."
    pa = assumptions(b, tuple(names), header) if res.returncode == 0 else {}
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


if __name__ == "__main__":
    if sys.argv[1:] == ["--readme"]:
        print("docs/coq.md " + ("updated" if write_readme() else "already current"))
    else:
        sys.exit("usage: python -m proofs.checks.coq --readme   (regenerate docs/coq.md's table from Spec.v)")
