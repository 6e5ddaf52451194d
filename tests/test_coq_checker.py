"""The Coq-proved certificate checker (proofs/coq/Checker.v, extracted; certificates/coq_checker.py).

The extracted program is built once per session from the sources (proofs/coq/extract/build.sh,
about 30 s); without coqc or ocamlfind the tests that run it are skipped, never passed.  The
float → integer conversion is checked against Fraction; verdicts are checked against the
exact oracle (numerics.theta.theta_exact), against the Python replay (certificates.verify),
on the committed folders (one in the default tier, all in the slow tier) and on tampered
records and folders.  The slow tier also runs logits inputs and --tolerance 0 end to end.
"""
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates import coq_checker as cc
from certificates.verify import check_row

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-6
# the θ part of verify.check_row (the Coq checker does not look at p_max / row_sum)
DESCRIPTIVE = ("p_max", "row_sum")


@pytest.fixture(scope="session")
def checker_bin(tmp_path_factory):
    if shutil.which("coqc") is None or shutil.which("ocamlfind") is None:
        pytest.skip("coqc or ocamlfind not found (install coq, libcoq-mathcomp-*, ocaml-findlib, libzarith-ocaml-dev)")
    out = tmp_path_factory.mktemp("coq-checker")
    res = subprocess.run(["sh", str(ROOT / "proofs/coq/extract/build.sh"), str(out)], capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    path = str(out / "coq-checker")
    old = os.environ.get("ATTNSENS_COQ_CHECKER")
    os.environ["ATTNSENS_COQ_CHECKER"] = path
    yield path
    if old is None:
        os.environ.pop("ATTNSENS_COQ_CHECKER", None)
    else:
        os.environ["ATTNSENS_COQ_CHECKER"] = old


def _theta_problems(x, rec):
    return [p for p in check_row(x, rec, Fraction(TOL), 12) if not p.startswith(DESCRIPTIVE)]


def _line(i, x, rec):
    return cc.row_line(i, x, rec["mask"], rec["theta_lo"], rec["theta_hi"], rec["gap_lo"], rec["gap_hi"],
                       TOL, rec["regime"], 12)


# ----------------------------------------------------------------------------- floats → integers

finite = st.one_of(st.floats(0, 1, allow_nan=False), st.floats(0, 2.0**1000, allow_nan=False),
                   st.sampled_from([0.0, 5e-324, 2.0**-1022, 2.0**-1022 - 5e-324, 1.0, 0.5, 2.0**1023]))


@settings(deadline=None)
@given(st.lists(finite, min_size=1, max_size=40))
def test_int_weights_are_the_floats_exactly(row):
    w, e = cc.int_weights(np.array(row))
    scale = Fraction(2) ** e
    assert len(w) == len(row) and all(isinstance(v, int) and v >= 0 for v in w)
    assert all(Fraction(x) == v * scale for x, v in zip(row, w))
    n, d = cc.ratio(row[0])
    assert Fraction(n, d) == Fraction(row[0]) and d > 0 and d & (d - 1) == 0


def test_int_weights_and_ratios_refuse_non_finite():
    for bad in ([1.0, float("nan")], [float("inf")], [-1.0, 2.0]):
        with pytest.raises(ValueError):
            cc.int_weights(np.array(bad))
    for bad in (float("nan"), float("inf")):
        with pytest.raises((ValueError, OverflowError)):
            cc.ratio(bad)


def test_hints_are_the_topk_and_the_small_half():
    w = [5, 0, 3, 9, 1, 1, 7]
    assert cc.count_mask(w) == [False, False, True, False, True, True, False]   # 6 nonzero: the 3 smallest
    assert cc.head_mask(w, 2) == [True, False, True, True, True, True, True]    # ≤ 24 atoms: every nonzero one
    big = list(range(1, 31))
    assert [j for j, b in enumerate(cc.head_mask(big, 3)) if b] == [27, 28, 29]
    # the float-row version row_line uses picks the same atoms (ties included)
    rng = np.random.default_rng(5)
    for L in (5, 24, 25, 40, 256):
        for _ in range(20):
            x = rng.choice([0.0, 2.0**-30, 0.25, 0.5, 1.0, 3.0], size=L) * rng.choice([1.0, rng.random()])
            w, _ = cc.int_weights(x)
            head, cnt = cc._masks(x, 12)
            assert head.tolist() == cc.head_mask(w, 12) and cnt.tolist() == cc.count_mask(w)


def test_missing_program_is_an_error_not_a_pass(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNSENS_COQ_CHECKER", str(tmp_path / "nothing"))
    with pytest.raises(cc.io.InputError, match="not built"):
        cc.require_binary()
    res = subprocess.run([sys.executable, "-m", "certificates", "verify", "results/rehearsal-774m/certificates",
                          "--checker", "coq", "--no-progress"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ATTNSENS_COQ_CHECKER": str(tmp_path / "nothing")})
    assert res.returncode == 2 and "not built" in res.stderr


# ----------------------------------------------------------------------------- the program

def test_driver_refuses_malformed_lines(checker_bin):
    good = "7 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 0"
    for bad in ("7 2 1 3 01 01 3 4 3 4 1 4 1 4 1 100000 0",          # a mask missing
                "7 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 0 9",      # a token too many
                "7 2 1 zz 01 01 00 3 4 3 4 1 4 1 4 1 100000 0",       # not hexadecimal
                "7 2 1 3 012 01 00 3 4 3 4 1 4 1 4 1 100000 0",       # mask of the wrong length
                "7 2 -1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 0"):      # a negative weight
        res = subprocess.run([checker_bin], input=good + "\n" + bad + "\n", capture_output=True, text=True)
        assert res.returncode == 2 and res.stderr.startswith("error: line 2:"), (bad, res.stderr)
        assert res.stdout == "7 ACCEPT\n"


def test_small_rows_by_hand(checker_bin):
    # the row (1, 3): θ = 4·(3/4)·(1/4) = 3/4 exactly (dominant); witness {1}; gap = 1/4
    chk = cc.Checker(checker_bin)
    lines = ["a 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 0",    # exact claims: accepted
             "b 2 1 3 01 01 00 1 1 1 1 0 1 0 1 1 100000 0",    # θ ∈ [1, 1]: false
             "c 2 1 3 00 01 00 3 4 3 4 1 4 1 4 1 100000 0",    # witness ∅ gives θ_S = 0 < θ_lo
             "d 2 1 3 01 01 00 3 4 3 4 1 4 1 4 1 100000 1",    # regime 1 for a dominant row
             "e 2 1 3 01 00 00 3 4 3 4 1 4 1 4 1 100000 0",    # no head: θ_hi < 1 cannot be justified
             "f 2 1 3 01 00 00 3 4 1 1 0 1 1 4 1 100000 0",    # … but θ_hi = 1, gap_lo = 0 needs none
             "g 3 1 1 1 100 111 000 8 9 8 9 1 9 1 9 1 100000 1",   # uniform L = 3: θ = 8/9 (C3)
             "h 3 1 1 1 100 111 000 8 9 8 9 1 9 1 9 1 100000 2",   # … but not open
             "i 3 1 1 1 100 000 100 8 9 8 9 1 9 1 9 1 100000 1"]   # parity hint J = {0}: 2·1 − 3 < 0, no bound
    assert chk.run(lines) == [True, False, False, False, False, True, True, False, False]
    # five equal atoms: the parity hint (the 3 smallest) gives |A − B| ≥ 1, θ ≤ 24/25 exactly
    assert chk.run(["k 5 1 1 1 1 1 11000 00000 11100 18 19 18 19 1 19 1 19 1 100000 1"]) == [True]
    assert chk.run(["l 5 1 1 1 1 1 11000 00000 11000 18 19 18 19 1 19 1 19 1 100000 1"]) == [False]


# ----------------------------------------------------------------------------- committed folders

def _folder_records(outdir):
    """(row, record) for every row of a committed folder."""
    from certificates.verify import load_certificates, load_summary
    s = load_summary(outdir)
    cert = load_certificates(outdir, s["rows"], s["L_max"])
    for a, R in cc._folder_rows(outdir, ()):
        n, L = R.shape
        wit = np.unpackbits(np.asarray(cert["witness"][a:a + n]), axis=-1, bitorder="little")[:, :L]
        for i in range(n):
            g = a + i
            rec = {k: float(cert[k][g]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
            rec["regime"] = int(cert["regime"][g])
            rec["mask"] = wit[i].tolist()
            yield g, R[i], rec


def test_committed_rehearsal_folder_accepted_by_both(checker_bin):
    res = subprocess.run([sys.executable, "-m", "certificates", "verify", "results/rehearsal-774m/certificates",
                          "--checker", "coq", "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "coq checker: OK: 720 of 720 rows accepted" in res.stdout
    assert "OK: 720 rows" in res.stdout


@pytest.mark.slow
def test_every_committed_folder_accepted_by_both(checker_bin):
    dirs = sorted(p.parent for p in (ROOT / "results").rglob("certificates.npz"))
    assert len(dirs) >= 5
    for d in dirs:
        res = subprocess.run([sys.executable, "-m", "certificates", "verify", str(d), "--checker", "coq",
                              "--no-progress"], cwd=ROOT, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "coq checker: OK" in res.stdout and " 0 discrepancies" in res.stdout


def _tampers(rec, L):
    """Lies about a record, each with what it changes."""
    for k, v in (("theta_lo", 1.0), ("theta_lo", float(np.nextafter(rec["theta_hi"], 2.0)))):
        if v > rec["theta_lo"]:
            yield k, dict(rec, **{k: v})
    if rec["theta_hi"] < 1:
        yield "theta_hi", dict(rec, theta_hi=float(np.nextafter(rec["theta_lo"], 0.0)))
    if rec["gap_hi"] > 0:
        yield "gap_hi", dict(rec, gap_hi=0.0)
    for reg in {0, 1, 2} - {rec["regime"]}:
        yield f"regime {reg}", dict(rec, regime=reg)
    for j in (0, L // 2, L - 1):
        m = list(rec["mask"])
        m[j] = 1 - m[j]
        yield f"witness bit {j}", dict(rec, mask=m)


@pytest.mark.parametrize("folder,limit", [("results/rehearsal-774m/certificates", 60),
                                          ("results/small-cpu-postln/seed-1/certificates", 60)])
def test_tampered_committed_rows_rejected_as_python_rejects_them(checker_bin, folder, limit):
    # rows with an upper bound (θ_hi < 1) first: they exercise dominance, exact and parity bounds
    rows = list(_folder_records(str(ROOT / folder)))
    rows.sort(key=lambda r: (r[2]["theta_hi"] >= 1, r[0]))
    lines, expect, what = [], [], []
    for g, x, rec in rows[:limit]:
        for name, bad in _tampers(rec, len(x)):
            lines.append(_line(len(lines), x, bad))
            expect.append(_theta_problems(x, bad) == [])
            what.append((g, name))
    got = cc.Checker(checker_bin).run(lines)
    # every verdict equals the Python replay's (both exact on these rows), and most lies are caught
    assert [w for w, a, b in zip(what, got, expect) if a != b] == []
    assert sum(got) < len(got) // 2 and not any(got[k] for k, w in enumerate(what) if w[1] == "theta_lo")


def test_tampered_folder_rejected_by_the_cli(checker_bin, tmp_path):
    src = ROOT / "results/rehearsal-774m"
    shutil.copytree(src / "certificates", tmp_path / "certificates")
    shutil.copytree(src / "rows", tmp_path / "rows")
    path = tmp_path / "certificates" / "certificates.npz"
    with np.load(path) as z:
        arrs = {k: z[k].copy() for k in z.files}
    r = int(np.argmax(arrs["theta_lo"] < 1.0))
    arrs["theta_lo"][r] = 1.0
    arrs["theta_hi"][r] = 1.0
    np.savez(path, **arrs)
    assert cc.run_coq_check(str(tmp_path / "certificates"), out=open(os.devnull, "w")) == 1
    res = subprocess.run([sys.executable, "-m", "certificates", "verify", str(tmp_path / "certificates"),
                          "--checker", "coq", "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 1
    assert f"coq checker: row {r}: rejected by the Coq checker" in res.stdout
    assert "coq checker: FAILED: 719 of 720" in res.stdout


# ----------------------------------------------------------------------------- fuzzed rows

def _fuzz_rows():
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import test_certificates_fuzz as fz
    finally:
        sys.path.pop(0)
    return st.one_of(fz.bf16_rows(), fz.tie_rows(), fz.near_half_rows(), fz.one_hot_rows(),
                     fz.odd_comparable_rows(), fz.near_dominant_rows())


def _fuzz_tampers(rec):
    yield dict(rec)
    for k, sgn in (("theta_lo", 1), ("gap_hi", -1), ("theta_hi", -1), ("gap_lo", 1)):
        for steps in (1, 8):
            v = rec[k]
            for _ in range(steps):
                v = float(np.nextafter(v, sgn * np.inf))
            yield dict(rec, **{k: min(max(v, 0.0), 1.0)})
        yield dict(rec, **{k: min(max(rec[k] + sgn * 1e-6, 0.0), 1.0)})
    for reg in (0, 1, 2):
        yield dict(rec, regime=reg)
    for j in range(min(3, len(rec["mask"]))):
        m = list(rec["mask"])
        m[j] = 1 - m[j]
        yield dict(rec, mask=m)


@settings(deadline=None, max_examples=60)
@given(_fuzz_rows())
def test_fuzzed_rows_verdicts_are_sound_and_agree_with_python(checker_bin, row):
    from certificates.pipeline import certify_batch
    from numerics.theta import theta_exact
    R = np.asarray(row, dtype=np.float64)[None, :]
    if not (R > 0).any() or not np.isfinite(R).all():
        return
    ex = theta_exact(R[0])
    c = certify_batch(R, TOL)
    rec = {k: float(c[k][0]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
    rec["regime"] = int(c["regime"][0])
    rec["mask"] = c["witness"][0].tolist()
    recs = list(_fuzz_tampers(rec))
    got = cc.Checker(checker_bin).run([_line(k, R[0], r) for k, r in enumerate(recs)])
    assert got[0], "the honest record of a row with ≤ 24 atoms is accepted"
    for ok, r in zip(got, recs):
        # the oracle: an accepted record's claims hold for the exact θ and gap
        if ok:
            assert Fraction(r["theta_lo"]) <= ex.theta <= Fraction(r["theta_hi"]), r
            assert Fraction(r["gap_lo"]) <= ex.delta ** 2 <= Fraction(r["gap_hi"]), r
        assert ok == (_theta_problems(R[0], r) == []), r


def test_long_rows_parity_checked_and_the_count_lemma_with_k_reported_unchecked(checker_bin):
    # odd counts of comparable atoms (25–41): closed by the parity bound, which Checker.v proves;
    # near-dominant rows (30, 34 atoms) need the count lemma with K ≥ 1, which it does not
    from certificates.pipeline import certify_batch
    rng = np.random.default_rng(21)
    parts = []
    for atoms in (25, 31, 41):
        R = np.exp(rng.normal(size=(3, atoms)) * 0.01)
        parts.append(np.pad(R / R.sum(1, keepdims=True), ((0, 0), (0, 48 - atoms))))
    for atoms in (30, 34):
        small = rng.uniform(0.8, 1.2, size=(2, atoms - 1))
        small *= 0.5015 / small.sum(1, keepdims=True)
        parts.append(np.pad(np.concatenate([np.full((2, 1), 0.4985), small], axis=1), ((0, 0), (0, 48 - atoms))))
    R = np.concatenate(parts).astype(np.float32).astype(np.float64)
    c = certify_batch(R, TOL, exact_max=0)
    assert (c["theta_hi"] < 1 - 1e-6).all()
    lines = []
    for i in range(R.shape[0]):
        rec = {k: float(c[k][i]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi")}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        lines.append(_line(i, R[i], rec))
    got = cc.Checker(checker_bin).run(lines)
    assert got == [True] * 9 + [False] * 4


@pytest.mark.slow
def test_logits_and_rows_inputs_and_tolerance_zero_end_to_end(checker_bin, tmp_path):
    # logits inputs replay the certified rows (certified-rows-i.npy); two L in one folder
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "lg.npz", logits=(rng.normal(size=(30, 30)) * 3).astype(np.float32), tau=np.float64(0.7))
    np.savez(tmp_path / "rows.npz", rows=rng.dirichlet(np.ones(9), size=20))
    for tol in ("1e-6", "0"):
        out = tmp_path / f"out-{tol}"
        res = subprocess.run([sys.executable, "-m", "certificates", "certify", str(tmp_path / "lg.npz"),
                              str(tmp_path / "rows.npz"), "-o", str(out), "--tolerance", tol, "--no-progress"],
                             cwd=ROOT, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        res = subprocess.run([sys.executable, "-m", "certificates", "verify", str(out), "--checker", "coq",
                              "--no-progress"], cwd=ROOT, capture_output=True, text=True)
        assert res.returncode == 0 and "coq checker: OK: 50 of 50" in res.stdout, res.stdout + res.stderr
    # the regime of one row changed: both checkers reject, the Coq one names the row
    path = out / "certificates.npz"
    with np.load(path) as z:
        arrs = {k: z[k].copy() for k in z.files}
    arrs["regime"][35] = 2 if arrs["regime"][35] != 2 else 1
    np.savez(path, **arrs)
    res = subprocess.run([sys.executable, "-m", "certificates", "verify", str(out), "--checker", "coq",
                          "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 1 and "coq checker: row 35: rejected" in res.stdout, res.stdout
