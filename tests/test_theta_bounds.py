"""numerics.theta_bounds: the top-K lower bound on δ is certified; KK masks are valid witnesses."""
from fractions import Fraction

import numpy as np
import pytest

from numerics import theta_bounds as tb
from numerics.theta import theta_exact, theta_of_mask


def _rows(seed, n, L, alpha=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(L, alpha), size=n)


def _mask_int(row_mask):
    return sum(1 << j for j, b in enumerate(row_mask) if b)


def test_topk_lower_bound_below_exact_delta():
    n_closed = n_open = 0
    for seed, alpha in ((2, 0.05), (3, 0.3), (4, 2.0)):
        R = _rows(seed, 40, 14, alpha)
        d_lo, M, closes = tb.topk_delta_lower(R, K=6)
        n_closed += int(closes.sum())
        n_open += int((~closes).sum())
        for i in range(R.shape[0]):
            ex = theta_exact(R[i])
            assert Fraction(d_lo[i]) <= ex.delta
            if closes[i]:   # the closing witness is optimal, and its δ is what the bound says
                assert theta_of_mask(R[i], _mask_int(M[i])) == ex.theta
                assert ex.delta - Fraction(d_lo[i]) <= Fraction(1, 10**12) * ex.delta
            else:
                assert not M[i].any()
    assert n_closed >= 10 and n_open >= 10            # both branches exercised


def test_topk_is_exact_when_k_covers_the_row():
    R = _rows(5, 30, 8)
    d_lo, _, closes = tb.topk_delta_lower(R, K=8)
    ex = np.array([float(theta_exact(r).delta) for r in R])
    assert closes.all()
    assert np.all(d_lo <= ex) and np.all(ex - d_lo < 1e-13)


def test_topk_loses_only_a_few_ulps_of_t_near_delta_zero():
    # w = (2^39 + 1, 2^39 − 1)/2^40: δ = 2^-39 exactly (θ = 1 − 2^-78, MATH.md floating-point trap).
    # The lemma's error is absolute, a few u·T (u = 2^-53), not relative to δ.
    R = np.array([[(2.0**39 + 1) / 2**40, (2.0**39 - 1) / 2**40]])
    for K in (1, 2):
        d_lo, _, closes = tb.topk_delta_lower(R, K=K)
        assert closes[0] and 0 < Fraction(d_lo[0]) <= Fraction(1, 2**39)
        assert Fraction(1, 2**39) - Fraction(d_lo[0]) <= Fraction(16, 2**53)


@pytest.mark.parametrize("scale", [2.0**-1000, 2.0**-1060, 2.0**200, 2.0**1000])
def test_topk_is_scale_free(scale):
    # tiny rows are lifted, huge ones lowered, by an exact power of two before the extraction
    R = _rows(11, 20, 10, 0.3)
    d1, _, c1 = tb.topk_delta_lower(R, K=10)
    d2, _, c2 = tb.topk_delta_lower(R * scale, K=10)
    exact_rows = ((R * scale) / scale == R).all(axis=1)   # scaling lost no bits (not subnormal)
    assert exact_rows.any() or scale < 2.0**-1022    # at 2^-1060 every row has subnormal atoms
    for i in range(R.shape[0]):
        assert Fraction(d2[i]) <= theta_exact(R[i] * scale).delta
        if exact_rows[i]:           # the same row up to a power of two: the same bound
            assert c1[i] == c2[i] and d1[i] == d2[i]


def test_topk_huge_row_that_cannot_be_scaled_exactly_is_still_sound():
    # a 2^-1074 atom next to a 2^1000 maximum: scaling down would drop it, so the row keeps
    # δ_lo = 0 (the extraction would overflow) — never a bound from a different row
    R = np.array([[2.0**1000, 2.0**999, 2.0**999, 2.0**-1074]])
    d_lo, _, closes = tb.topk_delta_lower(R, K=4)
    assert Fraction(d_lo[0]) <= theta_exact(R[0]).delta and not closes[0]


def test_topk_without_a_bound_is_zero():
    # many equal atoms: the tail outweighs the top atoms, so the lemma gives nothing
    d_lo, M, closes = tb.topk_delta_lower(np.ones((3, 50)), K=6)
    assert (d_lo == 0).all() and not closes.any() and not M.any()


def test_kk_masks_reach_c5_guarantee():
    # C5: the prefix crossing has δ ≤ m; Karmarkar–Karp is at least as good on these rows
    R = _rows(6, 200, 50, 0.2)
    M = tb.kk_masks(R)
    D = np.abs(np.where(M, R, -R).sum(1)) / R.sum(1)
    assert np.all(D <= R.max(1) / R.sum(1) * (1 + 1e-12))


def test_kk_colouring_realises_the_differencing_value():
    # (8, 7, 6, 5, 4): KK takes 8−7 = 1, 6−5 = 1, 4−1 = 3, 3−1 = 2 (the optimum is 0: 8+7 = 6+5+4);
    # the 2-colouring must realise exactly the differencing value 2
    R = np.array([[8.0, 7, 6, 5, 4]])
    M = tb.kk_masks(R)[0]
    D = abs(sum(R[0, M]) - sum(R[0, ~M]))
    assert D == 2.0


def _comparable(seed, n, atoms, spread, pad=0):
    # `atoms` comparable weights (log-normal spread), zeros appended: the odd-count rows
    rng = np.random.default_rng(seed)
    R = np.exp(rng.normal(size=(n, atoms)) * spread)
    return np.pad(R / R.sum(1, keepdims=True), ((0, 0), (0, pad)))


def test_count_lemma_below_exact_delta_and_attained_when_positive():
    n_closed = n_zero = 0
    for seed, atoms, spread in ((1, 9, 0.02), (2, 13, 0.1), (3, 15, 0.5), (4, 11, 1.0), (5, 12, 0.05)):
        R = _comparable(seed, 25, atoms, spread, pad=3)
        d_lo, M, closes = tb.count_delta_lower(R)
        for i in range(R.shape[0]):
            ex = theta_exact(R[i])
            assert Fraction(d_lo[i]) <= ex.delta
            if closes[i]:        # the k smallest atoms are an optimal witness, matching the bound
                assert M[i].sum() == (atoms + 1) // 2
                assert theta_of_mask(R[i], _mask_int(M[i])) == ex.theta
                assert ex.delta - Fraction(d_lo[i]) <= Fraction(1, 10**12) * ex.delta
                n_closed += 1
            else:
                assert d_lo[i] == 0 and not M[i].any()
                n_zero += 1
        if atoms % 2 == 0:
            assert not closes.any()      # an even count gives nothing
    assert n_closed >= 20 and n_zero >= 20


def test_count_lemma_negative_control_the_largest_atoms_overshoot():
    # the same comparison rejects a wrong variant: 2·(sum of the k LARGEST) − T is not a
    # lower bound on δ·T (it exceeds δ on these rows)
    R = _comparable(7, 25, 13, 0.1)
    over = 0
    for row in R:
        s = np.sort(row)[::-1]
        wrong = Fraction(2 * s[:7].sum() - s.sum()) / Fraction(s.sum())
        over += wrong > theta_exact(row).delta
    assert over >= 20


def test_count_lemma_is_scale_free_and_exact_on_uniform_rows():
    # C3: uniform on an odd count L has δ = 1/L exactly; the lemma gives it (to a few ulps)
    for L in (3, 25, 101):
        for scale in (1.0, 2.0**-1060, 2.0**1000):
            d_lo, _, closes = tb.count_delta_lower(np.pad(np.full((1, L), scale), ((0, 0), (0, 2))))
            assert closes[0]
            assert 0 < Fraction(d_lo[0]) <= Fraction(1, L)
            assert Fraction(1, L) - Fraction(d_lo[0]) <= Fraction(4, 2**52) * Fraction(1, L)


def test_count_lemma_with_top_atoms_is_below_exact_delta_and_settles_near_dominant_rows():
    n_closed = 0
    rows = [_rows(8, 20, 12, a) for a in (0.05, 0.5, 3.0)]
    big = np.concatenate([np.full((20, 1), 0.4985), np.random.default_rng(9).uniform(0.8, 1.2, (20, 15))], 1)
    big[:, 1:] *= 0.5015 / big[:, 1:].sum(1, keepdims=True)   # no small atom fills 1/2 − 0.4985
    rows.append(big)
    for R in rows:
        for K in (1, 4):
            d_lo, M, closes = tb.count_delta_lower(R, K)
            for i in range(R.shape[0]):
                ex = theta_exact(R[i])
                assert Fraction(d_lo[i]) <= ex.delta
                if closes[i]:
                    assert theta_of_mask(R[i], _mask_int(M[i])) == ex.theta
                    n_closed += 1
    assert tb.count_delta_lower(big, 1)[2].all()               # the singleton is optimal, and proved
    assert not tb.count_delta_lower(big, 0)[2].any()           # an even count alone proves nothing
    assert n_closed >= 40
