"""Hypothesis fuzzing: certify's bounds and verify's replay against the exact solver (at most 24 nonzero atoms)."""
from fractions import Fraction

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.pipeline import certify_batch
from certificates.verify import check_row
from certificates.verify_fast import fast_rows
from numerics.theta import theta_exact

TOLS = (1e-6, 0.0)


def _check(row):
    R = np.asarray(row, dtype=np.float64)[None, :]
    ex = theta_exact(R[0])
    gap = ex.delta ** 2
    for tol in TOLS:
        c = certify_batch(R, tol)
        lo, hi = Fraction(c["theta_lo"][0]), Fraction(c["theta_hi"][0])
        glo, ghi = Fraction(c["gap_lo"][0]), Fraction(c["gap_hi"][0])
        assert lo <= ex.theta <= hi
        assert glo <= gap <= ghi
        if tol == 0.0 and (R[0] > 0).sum() <= 24:          # EXACT_MAX_ATOMS nonzero atoms or fewer
            assert c["regime"][0] in (0, 1, 2)
            assert hi - lo <= Fraction(1, 2**46)           # exact solver or dominant atom: a few dozen ulps
        rec = {k: float(c[k][0]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
        rec["regime"] = int(c["regime"][0])
        rec["mask"] = c["witness"][0].tolist()
        assert check_row(R[0], rec, Fraction(tol), 12) == []
        _fast_agrees(R[0], rec, max(tol, 2.0**-50))


def _tampers(rec):
    """Honest record, then small lies: each must never be passed by the fast path alone."""
    yield dict(rec)
    for k, sgn in (("theta_lo", 1), ("gap_hi", -1), ("theta_hi", -1), ("gap_lo", 1)):
        for steps in (1, 2, 8, 2**20):
            r = dict(rec)
            v = r[k]
            for _ in range(steps if steps < 64 else 1):
                v = float(np.nextafter(v, sgn * np.inf))
            if steps >= 64:
                v = v + sgn * 1e-6
            r[k] = min(max(v, 0.0), 1.0)
            yield r
    for reg in (0, 1, 2):
        yield dict(rec, regime=reg)
    for k in ("p_max", "row_sum"):
        yield dict(rec, **{k: rec[k] * (1 + 2.0**-48)})
    m = list(rec["mask"])
    m[0] = not m[0]
    yield dict(rec, mask=m)


def _fast_agrees(x, rec, tol):
    # soundness of verify_fast: "decided: holds" only where the exact replay finds nothing
    for r in _tampers(rec):
        ok = np.zeros(1, np.int8)
        arr = lambda k: np.array([r[k]], dtype=np.float64)       # noqa: E731
        fast_rows(x[None, :].copy(), np.array([r["mask"]], dtype=np.uint8), arr("theta_lo"), arr("theta_hi"),
                  arr("gap_lo"), arr("gap_hi"), arr("p_max"), arr("row_sum"),
                  np.array([r["regime"]], dtype=np.int8), tol, 12, ok)
        if ok[0]:
            assert check_row(x, r, Fraction(tol), 12) == [], r


@st.composite
def bf16_rows(draw):
    L = draw(st.integers(2, 24))
    v = draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=L, max_size=L))
    t = torch.tensor(v, dtype=torch.float64)
    t = (t / t.sum()) if t.sum() > 0 else torch.ones(L) / L
    return t.to(torch.bfloat16).double().numpy()


@st.composite
def tie_rows(draw):
    L = draw(st.integers(2, 24))
    w = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=L, max_size=L))
    if sum(w) == 0:
        w[0] = 1
    return np.array(w, dtype=np.float64) / sum(w)


@st.composite
def near_half_rows(draw):
    # integer weights over 2^40 whose best split is off by d ∈ {0, 1, 2}: δ = d/T is tiny
    a = draw(st.lists(st.integers(1, 2**40), min_size=1, max_size=11))
    b = draw(st.lists(st.integers(1, 2**40), min_size=1, max_size=11))
    d = draw(st.integers(0, 2))
    fix = sum(a) - sum(b) + d
    if fix > 0:
        b.append(fix)
    elif fix < 0:
        a.append(-fix)
    w = a + b
    return np.array(w, dtype=np.float64) * 2.0**-40


@st.composite
def one_hot_rows(draw):
    L = draw(st.integers(2, 24))
    k = draw(st.integers(0, L - 1))
    ex = draw(st.lists(st.integers(20, 1000), min_size=L, max_size=L))
    zero = draw(st.lists(st.booleans(), min_size=L, max_size=L))
    row = np.array([0.0 if z else 2.0 ** -e for z, e in zip(zero, ex)])
    row[k] = 1.0
    return row


@st.composite
def causal_rows(draw):
    # a causally masked attention row: a softmax over a prefix of 1…24 positions of a row of
    # up to 64 (zeros after it), near uniform or peaked; prefixes of 7–12 atoms are those
    # stage B closes on the lemma over all nonzero atoms
    L = draw(st.integers(1, 64))
    k = draw(st.integers(1, min(L, 24)))
    spread = draw(st.sampled_from([0.05, 0.3, 1.0, 2.5, 5.0]))
    z = np.array(draw(st.lists(st.floats(-3, 3), min_size=k, max_size=k))) * spread
    row = np.zeros(L)
    row[:k] = np.exp(z - z.max())
    return row / row.sum()


@settings(deadline=None)
@given(bf16_rows())
def test_fuzz_bfloat16_rows(row):
    _check(row)


@settings(deadline=None)
@given(tie_rows())
def test_fuzz_exact_ties(row):
    _check(row)


@settings(deadline=None)
@given(near_half_rows())
def test_fuzz_near_half_integer_weights(row):
    _check(row)


@settings(deadline=None)
@given(one_hot_rows())
def test_fuzz_one_hot_and_near_one_hot(row):
    _check(row)


@settings(deadline=None)
@given(causal_rows())
def test_fuzz_causally_masked_rows(row):
    _check(row)


def test_theta_one_minus_two_to_minus_78_is_not_rounded_to_one():
    # non-dominant row: weights 2^38 + 1, 2^38 + 1, 2^38, 2^38 − 1 (total 2^40 + 1); best split off by 1
    w = [2**38 + 1, 2**38 + 1, 2**38, 2**38 - 1]
    R = np.array([w], dtype=np.float64) * 2.0**-40
    c = certify_batch(R, 1e-6)
    d2 = Fraction(1, (2**40 + 1) ** 2)
    assert c["theta_lo"][0] < 1.0
    assert Fraction(c["gap_lo"][0]) <= d2 <= Fraction(c["gap_hi"][0])
    # the dominant-regime version of the example: θ = 1 − 2^-78 exactly
    R2 = np.array([[(2.0**39 + 1) * 2.0**-40, (2.0**39 - 1) * 2.0**-40]])
    c2 = certify_batch(R2, 1e-6)
    assert c2["theta_lo"][0] < 1.0 and c2["regime"][0] == 0
    assert Fraction(c2["gap_lo"][0]) <= Fraction(1, 2**78) <= Fraction(c2["gap_hi"][0])


def test_long_rows_bounds_contain_exact_and_verify():
    # rows longer than the exact-solver limit: the top-K upper bound and witnesses, checked exactly
    rng = np.random.default_rng(0)
    R = rng.dirichlet(np.full(300, 0.02), size=40)
    c = certify_batch(R, 1e-6)
    for i in range(R.shape[0]):
        rec = {k: float(c[k][i]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        assert check_row(R[i], rec, Fraction(1e-6), 12) == []
    assert np.any(c["theta_hi"] < 1) and np.all(c["theta_lo"] > 0)


def test_fast_path_on_long_rows_never_passes_a_tampered_record():
    # the rows verify meets most (L = 64…512, diffuse to concentrated, float32-stored), honest and
    # tampered; the fast path must decide most honest rows and pass nothing the exact replay rejects
    rng = np.random.default_rng(7)
    decided = total = 0
    cases = [(64, 0.5), (256, 3.0), (512, 8.0), (40, "dirichlet"), (300, "dirichlet")]
    for L, scale in cases:
        if scale == "dirichlet":                 # a few large atoms: the top-K lemma closes these
            R = rng.dirichlet(np.full(L, 0.02), size=12)
        else:
            lg = rng.normal(size=(12, L)) * scale
            R = np.exp(lg - lg.max(1, keepdims=True))
        R = (R / R.sum(1, keepdims=True)).astype(np.float32).astype(np.float64)
        c = certify_batch(R, 1e-6)
        for i in range(R.shape[0]):
            rec = {k: float(c[k][i]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
            rec["regime"] = int(c["regime"][i])
            rec["mask"] = c["witness"][i].tolist()
            _fast_agrees(R[i], rec, 1e-6)
            ok = np.zeros(1, np.int8)
            arr = lambda k: np.array([rec[k]])                    # noqa: E731
            fast_rows(R[i:i + 1].copy(), np.array([rec["mask"]], dtype=np.uint8), arr("theta_lo"),
                      arr("theta_hi"), arr("gap_lo"), arr("gap_hi"), arr("p_max"), arr("row_sum"),
                      np.array([rec["regime"]], dtype=np.int8), 1e-6, 12, ok)
            decided += int(ok[0])
            total += 1
    assert decided >= 0.6 * total


def test_count_lemma_rows_verify_exactly_and_tampered_upper_bounds_fail():
    # odd counts (25–41) of comparable atoms, and near-dominant rows (30, 34 atoms), beyond
    # verify's exact search: θ < 1 − 1e-6 truly, closed only by the count lemma, which
    # verify recomputes in integers
    rng = np.random.default_rng(21)
    rows = []
    for atoms in (25, 31, 41):
        R = np.exp(rng.normal(size=(6, atoms)) * 0.01)
        rows.append(np.pad(R / R.sum(1, keepdims=True), ((0, 0), (0, 48 - atoms))))
    for atoms in (30, 34):            # MiniLM-like: one atom just below 1/2, 29–33 others ≥ 0.008
        small = rng.uniform(0.8, 1.2, size=(4, atoms - 1))
        small *= 0.5015 / small.sum(1, keepdims=True)
        R = np.concatenate([np.full((4, 1), 0.4985), small], axis=1)
        rows.append(np.pad(R, ((0, 0), (0, 48 - atoms))))
    R = np.concatenate(rows).astype(np.float32).astype(np.float64)
    c = certify_batch(R, 1e-6, exact_max=0)
    assert (c["regime"] == 1).all() and (c["theta_hi"] < 1 - 1e-6).all()
    for i in range(R.shape[0]):
        ex = theta_exact(R[i])
        assert Fraction(c["theta_lo"][i]) <= ex.theta <= Fraction(c["theta_hi"][i])
        rec = {k: float(c[k][i]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        assert check_row(R[i], rec, Fraction(1e-6), 12) == []
        _fast_agrees(R[i], rec, 1e-6)
        for k, v in (("theta_hi", rec["theta_hi"] - 1e-9), ("gap_lo", rec["gap_lo"] + 1e-9)):
            bad = check_row(R[i], dict(rec, **{k: v}), Fraction(1e-6), 12)
            assert any("not justified" in b for b in bad), (i, k)


@st.composite
def odd_comparable_rows(draw):
    # an odd count of nearly equal integer weights, at any scale, zeros mixed in: the count
    # lemma's territory, down to 2·s_k − T of a single unit (and ≤ 0, where it says nothing)
    n = draw(st.integers(1, 10)) * 2 + 1
    base = draw(st.integers(2, 2**52))
    spread = draw(st.integers(0, 64))
    w = [base + draw(st.integers(-spread, spread)) for _ in range(n)]
    w = [max(v, 1) for v in w]
    zeros = draw(st.integers(0, 3))
    e = draw(st.integers(-1070, 400))
    row = np.array(w + [0] * zeros, dtype=np.float64)
    row = np.ldexp(row, e - int(np.frexp(row.max())[1]))         # max in [2^(e−1), 2^e)
    return draw(st.permutations(row.tolist()))


@st.composite
def near_dominant_rows(draw):
    # one atom just below half the total and no small atom to top it up: its singleton is
    # optimal (as in MiniLM rows with 34 atoms), which only the count lemma with K ≥ 1 sees
    n = draw(st.integers(3, 20))
    smalls = [draw(st.integers(2**20, 2**24)) for _ in range(n - 1)]
    short = draw(st.integers(1, min(smalls) - 1))        # 2·big = T − 2·short: big < T/2
    big = sum(smalls) - 2 * short                          # > 0: at least two smalls exceed short
    row = np.array([big] + smalls, dtype=np.float64) * 2.0 ** draw(st.integers(-1000, 100))
    return draw(st.permutations(row.tolist()))


@settings(deadline=None, max_examples=150)
@given(st.one_of(odd_comparable_rows(), near_dominant_rows()))
def test_fuzz_count_lemma_against_the_exact_oracle(row):
    # certify without the exact solver, and verify with its exact search switched off, so
    # that both use the count lemma; the exact oracle decides
    import certificates.verify as ver
    from numerics.theta_bounds import count_delta_lower
    R = np.asarray(row, dtype=np.float64)[None, :]
    if not (R > 0).any() or not np.isfinite(R).all():
        return
    ex = theta_exact(R[0])
    for K in (0, 1, 3, 12):
        d_lo, M, closes = count_delta_lower(R, K)
        assert Fraction(d_lo[0]) <= ex.delta
        if closes[0]:
            w = sum(1 << j for j, b in enumerate(M[0]) if b)
            assert abs(ex.delta - Fraction(d_lo[0])) <= Fraction(1, 2**40) * max(ex.delta, Fraction(1, 2**60))
            from numerics.theta import theta_of_mask
            assert theta_of_mask(R[0], w) == ex.theta
    c = certify_batch(R, 1e-6, exact_max=0)
    assert Fraction(c["theta_lo"][0]) <= ex.theta <= Fraction(c["theta_hi"][0])
    assert Fraction(c["gap_lo"][0]) <= ex.delta ** 2 <= Fraction(c["gap_hi"][0])
    rec = {k: float(c[k][0]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
    rec["regime"] = int(c["regime"][0])
    rec["mask"] = c["witness"][0].tolist()
    old = ver.EXACT_ATOMS
    try:
        ver.EXACT_ATOMS = 0
        assert check_row(R[0], rec, Fraction(1e-6), 12) == []
        # an upper bound just below the true θ is rejected as unjustified
        below = float(np.nextafter(float(ex.theta), -np.inf))
        while Fraction(below) >= ex.theta:
            below = float(np.nextafter(below, -np.inf))
        lied = dict(rec, theta_lo=0.0, theta_hi=below, gap_lo=0.0, gap_hi=1.0,
                    regime=0 if rec["regime"] == 0 else 2)
        assert any("not justified" in b for b in check_row(R[0], lied, Fraction(1e-6), 12))
    finally:
        ver.EXACT_ATOMS = old
