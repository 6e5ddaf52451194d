"""The trusted core (numerics/trusted.py, docs/soundness.md) against plain references.

References are Python ints and Fractions; ``rnd`` is one correctly rounded float64
operation written as exact rational arithmetic followed by CPython's correctly rounded
int/int division (float(Fraction)), so it does not go through the FPU path under test.
Straight-line float formulas are also compared bit for bit with their own Python source
run on Python floats (``f.py_func``: each operation one IEEE rounding), which catches a
compiler that contracts or reassociates what it must not.  Last, numba against the torch
twin on rows spanning several 64-atom words.
"""
import itertools
import math
from fractions import Fraction as F

import numpy as np
import pytest

from certificates.pipeline import certify_batch
from numerics import trusted as t

U = F(1, 2 ** 53)
KEYS = ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum", "regime", "witness")


def rnd(f: F) -> float:
    """f rounded to the nearest float64, ties to even (CPython's int/int is correctly rounded)."""
    return f.numerator / f.denominator if f else 0.0


def bits(x) -> int:
    return int(np.array(x, np.float64).view(np.int64))


def _rows(rng, n, L):
    """Softmax rows of several spreads, ties, zeros, subnormals and near-dominant rows."""
    out = []
    for k in range(n):
        kind = k % 6
        if kind < 3:
            lg = rng.normal(size=L) * (0.3, 2.5, 8.0)[kind]
            x = np.exp(lg - lg.max())
        elif kind == 3:
            x = rng.integers(0, 4, L).astype(float)
            x[0] = max(x[0], 1.0)
        elif kind == 4:
            x = rng.random(L) ** 6 * 2.0 ** int(rng.integers(-1060, 400))
        else:
            x = rng.random(L)
            x[int(rng.integers(L))] = x.sum() * (1 + rng.choice([-1, 0, 1]) * 2.0 ** -52)
        out.append(x / x.sum() if kind < 3 else x)
    return out


# ----------------------------------------------------------------------------- exact parts

def test_headroom_bits_is_the_integer_ceiling():
    for L in list(range(0, 5000)) + [2 ** k + d for k in range(13, 40) for d in (-3, -2, -1, 0, 1)]:
        c = t.headroom_bits(L)
        assert c == (L + 1).bit_length() + 1          # ⌈log₂(L + 2)⌉ + 1
        assert 2 ** (c - 1) >= L + 2 > 2 ** (c - 2)   # I2's property, and the least such c


def test_max_bits_is_the_max():
    rng = np.random.default_rng(1)
    for L in (1, 2, 3, 4, 5, 7, 64, 65, 127, 128, 129, 300):
        for _ in range(30):
            x = rng.random(L) ** 8 * 2.0 ** int(rng.integers(-1074, 500))
            x[rng.random(L) < 0.3] = 0.0
            x[rng.random(L) < 0.2] = -0.0
            x[rng.random(L) < 0.1] = 2.0 ** -1074
            m = max(F(v) for v in x.tolist())
            assert t.max_bits(x.view(np.int64)) == bits(float(m) + 0.0)    # +0.0 for an all-zero row


def test_splitters_are_the_stated_powers_of_two():
    for ef in range(123, 1530):          # max from 2^-900 to 2^507: TINY up to past MAX_ROW_SUM
        for L in (1, 64, 129, 4097):
            c = t.headroom_bits(L)
            s1, s2, sc = t.splitters(ef, c)
            m_hi = F(2) ** (ef - 1022)           # every max with this field is in [m_hi/2, m_hi)
            assert F(s1) == m_hi * 2 ** c and F(s2) == F(s1) * 2 ** c * U
            assert F(sc) == (F(2) ** (1023 - ef) if ef < 1023 else 1)
            assert 1 <= m_hi / 2 * F(sc) < 2 or ef >= 1023


def test_split_is_error_free_as_stated():
    # I2: q₁ = rnd(σ₁ + x) − σ₁ exactly, q₂ likewise; q₁ ∈ 2uσ₁ℤ, q₂ ∈ uσ₂ℤ, |x − q₁| ≤ uσ₁,
    # |x − q₁ − q₂| ≤ uσ₂
    rng = np.random.default_rng(2)
    for x in _rows(rng, 60, 129):
        L = x.shape[0]
        mb = t.max_bits(x.view(np.int64))
        if np.array(mb).view(np.float64) < t.TINY:
            continue
        s1, s2, _ = t.splitters(mb >> 52, t.headroom_bits(L))
        q1, q2 = np.empty(L), np.empty(L)
        t.extract(x, s1, s2, q1, q2)
        S1, S2 = F(s1), F(s2)
        for v, a, b in zip(x.tolist(), q1.tolist(), q2.tolist()):
            ra = F(rnd(S1 + F(v))) - S1
            rb = F(rnd(S2 + (F(v) - ra))) - S2
            assert (F(a), F(b)) == (ra, rb)
            assert (ra / (2 * U * S1)).denominator == 1 and (rb / (U * S2)).denominator == 1
            assert abs(F(v) - ra) <= U * S1 and abs(F(v) - ra - rb) <= U * S2
            assert t.split(v, s1, s2) == (a, b) == t.split.py_func(v, s1, s2)


def test_exact_sums_are_exact_in_any_order():
    # I3: with the headroom, every partial sum of q₁'s (of q₂'s) is exact
    rng = np.random.default_rng(3)
    for L in (65, 300, 4097):
        for x in _rows(rng, 12, L):
            mb = t.max_bits(x.view(np.int64))
            if np.array(mb).view(np.float64) < t.TINY:
                continue
            s1, s2, _ = t.splitters(mb >> 52, t.headroom_bits(L))
            q1, q2 = np.empty(L), np.empty(L)
            t.extract(x, s1, s2, q1, q2)
            mk = (rng.random(L) < 0.5).astype(np.uint8)
            T1, T2 = t.exact_sum2(q1, q2)
            A1, A2 = t.masked_sum2(q1, q2, mk)
            assert F(T1) == sum(map(F, q1.tolist())) and F(T2) == sum(map(F, q2.tolist()))
            assert F(A1) == sum(F(v) for v, b in zip(q1.tolist(), mk) if b)
            assert F(A2) == sum(F(v) for v, b in zip(q2.tolist(), mk) if b)
            assert t.exact_sum(q1[::-1].copy()) == T1 == t.exact_sum(q1)
            assert 2 * sum(abs(F(v)) for v in q1.tolist()) < F(s1)           # the headroom
            a = int(np.argmax(x))
            one = np.zeros(L, np.uint8)
            one[a] = 1
            assert t.masked_sum2(q1, q2, one) == (q1[a], q2[a])      # the dominant shortcut


# ----------------------------------------------------------------------------- dominance

def test_dominance_terms_and_their_decision():
    rng = np.random.default_rng(4)
    seen = {"dom": 0, "not": 0, "unsure": 0}
    for L in (2, 3, 65, 129, 300):
        for x in _rows(rng, 120, L):
            mb = t.max_bits(x.view(np.int64))
            m = float(np.array(mb).view(np.float64))
            if m < t.TINY:
                continue
            s1, s2, _ = t.splitters(mb >> 52, t.headroom_bits(L))
            q1, q2 = np.empty(L), np.empty(L)
            t.extract(x, s1, s2, q1, q2)
            T1, T2 = t.exact_sum2(q1, q2)
            y, slack = t.dominance_terms(m, T1, T2, s2, L)
            # bit-exact: the formula with each operation correctly rounded
            assert bits(y) == bits(rnd(2 * F(m) - F(rnd(F(T1) + F(T2)))))
            ref = rnd(F(rnd(4 * F(rnd(F(rnd(L * U)) * F(s2))))) + F(rnd(4 * U * F(rnd(2 * F(m))))))
            assert bits(slack) == bits(ref)
            assert (y, slack) == t.dominance_terms.py_func(m, T1, T2, s2, L)
            # sound (I4): the margin never decides wrongly
            truth = 2 * F(m) >= sum(map(F, x.tolist()))
            if y > slack:
                assert truth
                seen["dom"] += 1
            elif y < -slack:
                assert not truth
                seen["not"] += 1
            else:
                seen["unsure"] += 1
            j = int(np.argmax(x))
            assert t.dominant_exact(x, j) == truth
    assert min(seen.values()) > 0, seen               # every branch exercised


def test_dominance_margin_is_needed():
    # negative control: on a long row the remainders the extraction drops (up to L·u·σ₂)
    # outweigh the rounding of T₁ + T₂, and a zero margin calls a row dominant that is not.
    # x = [1, 1 − 2⁻⁴⁸, 2¹⁸ − 2 atoms of 0.9·2⁻⁶⁵]: every small atom falls below σ₂'s grid
    L = 2 ** 18
    x = np.full(L, 0.9 * 2.0 ** -65)
    x[0], x[1] = 1.0, 1.0 - 2.0 ** -48
    excess = -F(2) ** -48 + (L - 2) * F(x[2])        # T − 2m, exactly
    assert excess > 0                                  # not dominant
    mb = t.max_bits(x.view(np.int64))
    s1, s2, _ = t.splitters(mb >> 52, t.headroom_bits(L))
    q1, q2 = np.empty(L), np.empty(L)
    t.extract(x, s1, s2, q1, q2)
    T1, T2 = t.exact_sum2(q1, q2)
    y, slack = t.dominance_terms(1.0, T1, T2, s2, L)
    assert y > 0.0                                     # a zero margin would say dominant
    assert not y > slack and y >= -slack               # I4: undecided, settled exactly
    assert not t.dominant_exact(x, 0)
    c = certify_batch(x[None, :], 1e-6)
    assert c["regime"][0] != 0


def test_first_index_of_max_across_words():
    rng = np.random.default_rng(5)
    for L in (1, 63, 64, 65, 127, 128, 129, 300, 4097):
        for _ in range(20):
            x = rng.integers(0, 5, L).astype(float)
            x[rng.random(L) < 0.5] = 0.0
            x[int(rng.integers(L))] = 7.0
            if rng.random() < 0.5:
                x[int(rng.integers(L))] = 7.0                 # a tie
            xs = x.tolist()
            assert t.first_index_of_max(x.view(np.int64), bits(max(xs))) == xs.index(max(xs))


# ----------------------------------------------------------------------------- outward rounding

def _awkward_floats(rng, n):
    v = list(rng.normal(size=n) * 2.0 ** rng.integers(-1074, 1000, n))
    v += [0.0, -0.0, 2.0 ** -1074, -2.0 ** -1074, 2.0 ** -1022, 2.0 ** -1022 - 2.0 ** -1074, 1.0,
          -1.0, 1.0 - 2.0 ** -53, 2.0 ** 1000, float(np.nextafter(2.0 ** -1022, 0))]
    return [float(x) for x in v]


def test_up_and_dn_bit_exact_and_outward():
    rng = np.random.default_rng(6)
    for x in _awkward_floats(rng, 3000):
        X = F(x)
        ref_up = rnd(X + F(rnd(F(rnd(abs(X) * F(2) ** -52)) + F(2) ** -1074)))
        ref_dn = rnd(X - F(rnd(F(rnd(abs(X) * F(2) ** -52)) + F(2) ** -1074)))
        assert bits(t.up(x)) == bits(ref_up) and bits(t.dn(x)) == bits(ref_dn)
        # I6: at least the next float; at most two ulps away (three just above the
        # subnormal range, where |x|·2⁻⁵² itself rounds)
        nxt, prv = np.nextafter(x, np.inf), np.nextafter(x, -np.inf)
        far = 2 if abs(x) >= 2.0 ** -1000 or abs(x) < 2.0 ** -1022 else 3
        up_max, dn_min = nxt, prv
        for _ in range(far - 1):
            up_max, dn_min = np.nextafter(up_max, np.inf), np.nextafter(dn_min, -np.inf)
        assert nxt <= t.up(x) <= up_max
        assert dn_min <= t.dn(x) <= prv


def _witness_case(rng, L):
    x = _rows(rng, 6, L)[int(rng.integers(6))]
    mb = t.max_bits(x.view(np.int64))
    if np.array(mb).view(np.float64) < t.TINY:
        x = x * 2.0 ** 1000
        mb = t.max_bits(x.view(np.int64))
    mk = (rng.random(L) < 0.5).astype(np.uint8)
    return x, mk


def test_outward_bounds_enclose_theta_and_delta_and_match_plain_python():
    rng = np.random.default_rng(7)
    for L in (2, 3, 65, 128, 300):
        for _ in range(60):
            x, mk = _witness_case(rng, L)
            c = t.headroom_bits(L)
            s1, s2, sc = t.splitters(t.max_bits(x.view(np.int64)) >> 52, c)
            q1, q2 = np.empty(L), np.empty(L)
            t.extract(x, s1, s2, q1, q2)
            A1, A2 = t.masked_sum2(q1, q2, mk)
            T1, T2 = t.exact_sum2(q1, q2)
            got = t.outward_bounds(A1, A2, T1, T2, s2, L, sc)
            assert [bits(v) for v in got] == [bits(v) for v in t.outward_bounds.py_func(
                A1, A2, T1, T2, s2, L, sc)]
            A = sum(F(v) for v, b in zip(x.tolist(), mk) if b)
            T = sum(map(F, x.tolist()))
            th, g = 4 * A * (T - A) / T ** 2, ((2 * A - T) / T) ** 2
            lo, hi, glo, ghi = map(F, got)
            assert lo <= th <= hi and glo <= g <= ghi            # I2, I3, I6, I7
            assert hi - lo <= F(1, 2 ** 40) and ghi - glo <= F(1, 2 ** 40)
            assert t.score_row(x, mk, c, np.empty(L), np.empty(L))[:4] == got


def test_outward_bounds_keep_relative_precision_of_tiny_gaps():
    # θ_S = 1 − 2^-78 on a witness: δ_S² = 2^-78 bracketed within ~2^-40 relative, not rounded to 0
    x = np.array([(2.0 ** 39 + 1) / 2 ** 40, (2.0 ** 39 - 1) / 2 ** 40, 0.0])
    lo, hi, glo, ghi, _ = t.score_row(x, np.array([1, 0, 0], np.uint8), t.headroom_bits(3),
                                      np.empty(3), np.empty(3))
    assert F(glo) <= F(1, 2 ** 78) <= F(ghi) and F(ghi) / F(glo) < 1 + F(1, 2 ** 40)


# ----------------------------------------------------------------------------- upper-bound lemmas

def test_hi_from_delta_lo_is_outward():
    rng = np.random.default_rng(8)
    for d in [0.0, 2.0 ** -1074, 2.0 ** -540, 1.0, 0.5] + list(rng.random(2000) ** 8):
        th, g = t.hi_from_delta_lo(d)
        assert (th, g) == t.hi_from_delta_lo.py_func(d)
        assert F(g) <= F(d) ** 2 and F(th) >= 1 - F(d) ** 2 and th <= 1.0     # I8
        assert bits(g) == bits(max(float(np.nextafter(rnd(F(d) ** 2), -np.inf)), 0.0))
    d = rng.random(50)
    hi, glo = np.empty(50), np.empty(50)
    t.hi_from_delta_lo_rows(d, hi, glo)
    assert all((hi[i], glo[i]) == t.hi_from_delta_lo(d[i]) for i in range(50))


def _ints(x):
    # exact integer weights w with x = w·2^e (a plain reference, no numerics/ code)
    fs = [F(v) for v in x.tolist()]
    den = max(f.denominator for f in fs)
    return [int(f * den) for f in fs]


def _min_disc(w):
    T = sum(w)
    return min(abs(T - 2 * sum(s)) for r in range(len(w) + 1) for s in itertools.combinations(w, r))


def _topk_exact(w, K, order=None):
    # the lemma in integers: max(0, min_ε |Σ ε_i w_(i)| − tail) over the K largest (stable
    # order), or over the atoms ``order`` when given
    order = sorted(range(len(w)), key=lambda i: (-w[i], i))[:K] if order is None else order
    tail = sum(w) - sum(w[i] for i in order)
    best = min(abs(w[order[0]] + sum(s * w[i] for s, i in zip(sg, order[1:])))
               for sg in itertools.product((1, -1), repeat=len(order) - 1))
    return max(0, best - tail)


def test_topk_row_is_below_the_integer_lemma_and_tight():
    rng = np.random.default_rng(9)
    hits = 0
    for L in (5, 9, 65, 129):
        for _ in range(40):
            a = rng.choice([0.02, 0.3, 2.0])
            x = rng.dirichlet(np.full(L, a))
            if rng.random() < 0.3:
                x[: L // 2] = 0.0
            if x.max() < t.TINY:
                continue
            K = int(rng.integers(1, 9))
            d, closes = t.topk_row(x, K, np.zeros(L, np.uint8), np.empty(L), np.empty(L))
            w = _ints(x)
            ref = F(_topk_exact(w, K), sum(w))
            assert F(d) <= ref                                    # I8, I11
            assert F(d) >= ref * (1 - F(1, 2 ** 40)) - F(1, 2 ** 60)   # and not loose
            hits += d > 0
    assert hits > 20


def test_topk_row_matches_plain_python_bit_for_bit():
    # the compiled lemma against the same code run on Python floats (each operation one
    # IEEE rounding): the same d, to the bit, and the same witness
    rng = np.random.default_rng(19)
    for L in (3, 17, 64, 200):
        for _ in range(12):
            x = rng.dirichlet(np.full(L, rng.choice([0.05, 0.5, 3.0])))
            K = int(rng.integers(1, 11))
            m1, m2 = np.zeros(L, np.uint8), np.zeros(L, np.uint8)
            d1, c1 = t.topk_row(x, K, m1, np.empty(L), np.empty(L))
            top = t.top_indices(x, K)
            # the body in Python, its scratch (stage B's, reused across rows) full of NaN:
            # nothing is read from it before it is written
            w = np.full(t.topk_scratch(top.size), np.nan)   # exactly the size it needs
            d2, c2 = t.topk_row_in.py_func(x, top, m2, np.empty(L), np.empty(L), w)
            assert np.float64(d1).view(np.int64) == np.float64(d2).view(np.int64) and c1 == c2
            assert np.array_equal(m1, m2)
            m3 = np.zeros(L, np.uint8)
            w[:] = np.nan
            d3, c3 = t.topk_row_in(x, top, m3, np.empty(L), np.empty(L), w)
            assert np.float64(d1).view(np.int64) == np.float64(d3).view(np.int64) and c1 == c3
            assert np.array_equal(m1, m3)
            with pytest.raises(ValueError, match="scratch shorter"):   # never a silent overrun
                t.topk_row_in(x, top, m3, np.empty(L), np.empty(L), w[:-1])
            a, v = float(rng.normal()), rng.normal(size=int(rng.integers(1, 70)))
            assert t._least_abs_sum(a, v, v.size) == float(np.min(np.abs(a + v)))


def test_topk_row_on_any_atoms_is_a_bound_and_prefixes_are_the_smaller_k():
    # I8 holds for any K atoms (stage B passes prefixes of one sorted top list): the bound
    # on a random subset is below the integer lemma on that subset; and a prefix of
    # top_indices(x, K) gives exactly what topk_row(x, k) gives (the atoms verify replays)
    rng = np.random.default_rng(23)
    for L in (6, 13, 64):
        for _ in range(25):
            x = rng.dirichlet(np.full(L, rng.choice([0.05, 0.5, 3.0])))
            k = int(rng.integers(1, min(L, 9) + 1))
            sub = rng.permutation(L)[:k].astype(np.int64)
            d, _ = t.topk_row_on(x, sub, np.zeros(L, np.uint8), np.empty(L), np.empty(L))
            w = _ints(x)
            assert F(d) <= F(_topk_exact(w, k, sub.tolist()), sum(w))
            top = t.top_indices(x, 12)
            for kk in (1, 3, 6, 12):
                kk = min(kk, L)
                assert np.array_equal(top[:kk], t.top_indices(x, kk))
                m1, m2 = np.zeros(L, np.uint8), np.zeros(L, np.uint8)
                a = t.topk_row(x, kk, m1, np.empty(L), np.empty(L))
                b = t.topk_row_on(x, top[:kk], m2, np.empty(L), np.empty(L))
                assert np.float64(a[0]).view(np.int64) == np.float64(b[0]).view(np.int64)
                assert a[1] == b[1] and np.array_equal(m1, m2)


@pytest.mark.parametrize("form", ["count_interval", "count_interval_plain"])
def test_count_interval_against_every_subset(form):
    rng = np.random.default_rng(10)
    pos = 0
    for _ in range(400):
        n = int(rng.integers(1, 11))
        w = [int(v) for v in rng.integers(1, 1 << int(rng.integers(1, 20)), n)]
        K = int(rng.integers(0, 4))
        d, mask = getattr(t, form)(w, K)
        best = _min_disc(w)
        assert 0 <= d <= best                                     # I8
        if d > 0:
            pos += 1
            A = sum(v for v, b in zip(w, mask) if b)
            assert abs(2 * A - sum(w)) == d == best               # attained: optimal
    assert pos > 40


def test_count_interval_int64_form_matches_the_plain_one():
    # the NumPy form (every number in int64) gives the plain form's (d, mask) exactly, ties
    # and the first-found witness included, up to the largest sums it takes; beyond them
    # count_interval is the plain form itself
    rng = np.random.default_rng(12)
    seen = {"bound": 0, "none": 0, "i64": 0, "plain": 0}
    for it in range(3000):
        n = int(rng.integers(1, 31))
        kind = it % 4
        if kind == 0:       # small weights with many ties
            w = [int(v) for v in rng.integers(1, 6, n)]
        elif kind == 1:     # softmax-like weights over one denominator
            w = [int(v) for v in (np.exp(rng.normal(size=n) * rng.choice([0.3, 1.0, 3.0])) * 2 ** 40).astype(np.int64) + 1]
        elif kind == 2:     # near the int64 form's limit (2·Σw just below or above 2^62)
            w = [int(v) for v in rng.integers(1, 2 ** 56, n)]
            scale = (2 ** int(rng.choice([60, 61, 62]))) // sum(w)
            w = [v * scale + int(rng.integers(0, 3)) for v in w]
        else:               # one dominant atom, or a few big and many small
            w = [int(v) for v in rng.integers(1, 1000, n)]
            w[int(rng.integers(0, n))] *= int(rng.choice([2, 50, 10 ** 6]))
        K = int(rng.integers(0, 14))
        fast = 2 * sum(w) < 2 ** 62
        seen["i64" if fast else "plain"] += 1
        got, ref = t.count_interval(w, K), t.count_interval_plain(w, K)
        assert got == ref, (w, K)
        if fast:
            assert t._count_interval_i64(w, K) == ref
        seen["bound" if ref[0] > 0 else "none"] += 1
    assert min(seen.values()) > 100, seen
    # outside the contract (a zero or negative weight) the plain form answers, whatever the sum
    for w in ([0, 3, 5], [2 ** 62, -(2 ** 62) + 1, 7], [-1, 4]):
        assert t.count_interval(w, 2) == t.count_interval_plain(w, 2)


# ----------------------------------------------------------------------------- closed / open

def test_closed_never_accepts_a_width_above_tol():
    rng = np.random.default_rng(11)
    floor = 2.0 ** -50
    for _ in range(20000):
        tol = float(rng.choice([0.0, 1e-6, 0.5, 0.7, 2.0 ** -52, 1e-300, 5e-324]))
        hi = float(rng.random()) if rng.random() < 0.5 else 1.0
        lo = float(hi - tol * (1 + rng.normal() * 2.0 ** -50)) if rng.random() < 0.7 else float(rng.random())
        lo = min(max(lo, 0.0), hi)
        w = F(hi) - F(lo)
        assert not t.closed(lo, hi, tol) or w <= F(tol)                          # I9
        assert not t.closed(lo, hi, tol, floor) or w <= max(F(tol), F(floor))    # I10
        assert t.within(lo, hi, t.close_threshold(tol)) == t.closed(lo, hi, tol)
    assert bits(t.close_threshold(0.7)) == bits(rnd(F(0.7) * (1 - F(1, 2 ** 50))))


def test_closing_factor_is_needed():
    # negative control: comparing fl(hi − lo) with tol itself accepts widths above tol
    hi, tol = 1.0, 0.75
    lo = 0.25 - 2.0 ** -55                    # a float; 1 − lo = 0.75 + 2^-55 rounds to 0.75
    assert hi - lo <= tol and F(hi) - F(lo) > F(tol) and not t.closed(lo, hi, tol)


def test_lift_tiny_is_exact():
    rng = np.random.default_rng(13)
    R = rng.random((30, 17)) * 2.0 ** rng.integers(-1074, 10, (30, 1)).astype(float)
    R[0] = 0.0
    R[1] = 2.0 ** -1074
    R2, tiny = t.lift_tiny(R)
    for i in range(30):
        m = R[i].max()
        assert tiny[i] == (m < t.TINY)
        if tiny[i] and m > 0:
            k = F(R2[i].max()) / F(m)
            assert k.denominator == 1 and 1 <= R2[i].max() < 2
            assert all(F(a) * k == F(b) for a, b in zip(R[i].tolist(), R2[i].tolist()))
        elif not tiny[i]:
            assert np.array_equal(R2[i], R[i])


# ----------------------------------------------------------------------------- numba vs torch

def _parity_rows(L):
    rng = np.random.default_rng(L)
    n = 200 if L <= 300 else 24
    parts = []
    for sp in (0.2, 1.0, 2.5, 6.0):
        lg = rng.normal(size=(n // 4, L)) * sp
        e = np.exp(lg - lg.max(1, keepdims=True))
        parts.append(e / e.sum(1, keepdims=True))
    ties = np.zeros((4, L))
    ties[:, :] = 0.25
    ties[1, ::2] = 0.0
    ties[2, :] = np.arange(L) % 3 + 1.0
    ties[3, :] = 1.0
    ties[3, L - 1] = L - 1.0                  # 2·max = total: undecided, settled exactly
    tiny = parts[1][:3] * 2.0 ** -1040
    near = parts[0][:4].copy()
    near[:, 0] = near[:, 1:].sum(1) * np.array([1 - 2.0 ** -52, 1.0, 1 + 2.0 ** -52, 1 + 2.0 ** -40])
    return np.concatenate(parts + [ties, tiny, near])


@pytest.mark.parametrize("L", [65, 127, 128, 129, 300, 4097])
def test_torch_twin_is_bit_identical_across_words(L):
    pytest.importorskip("torch")
    R = _parity_rows(L)
    a = certify_batch(R, 1e-6)
    b = certify_batch(R, 1e-6, backend="torch", device="cpu")
    for k in KEYS:
        assert np.array_equal(a[k], b[k]), (L, k)
    assert (a["regime"] == 0).any() and (a["regime"] != 0).any()
    assert math.isfinite(float(a["theta_lo"].sum()))
