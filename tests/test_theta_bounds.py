"""numerics.theta_bounds: certified kernels contain the exact values; search kernels return masks."""
from fractions import Fraction

import numpy as np
import torch

from numerics import theta_bounds as tb
from numerics.theta import theta_exact, theta_of_mask


def _rows(seed, n, L, alpha=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(L, alpha), size=n)


def test_witness_bounds_contain_exact_witness_value():
    R = _rows(0, 60, 9)
    M = np.random.default_rng(1).random(R.shape) < 0.5
    lo, whi, glo, ghi = tb.witness_bounds(R, M)
    for i in range(R.shape[0]):
        mask = sum(1 << j for j in range(9) if M[i, j])
        th = theta_of_mask(R[i], mask)
        assert Fraction(lo[i]) <= th <= Fraction(whi[i])
        assert Fraction(glo[i]) <= 1 - th <= Fraction(ghi[i])


def test_witness_bounds_keep_relative_precision_near_one():
    # w = (2^39 + 1, 2^39 − 1)/2^40: δ = 2^-39, θ = 1 − 2^-78 (MATH.md floating-point trap)
    R = np.array([[(2.0**39 + 1) / 2**40, (2.0**39 - 1) / 2**40]])
    lo, whi, glo, ghi = tb.witness_bounds(R, np.array([[True, False]]))
    assert lo[0] < 1.0
    assert Fraction(glo[0]) <= Fraction(1, 2**78) <= Fraction(ghi[0])
    assert ghi[0] < 2.0**-77 and glo[0] > 2.0**-79


def test_near_one_hot_theta_is_not_rounded_to_zero():
    R = np.array([[1.0, 2.0**-60, 2.0**-70]])
    lo, whi, _, _ = tb.witness_bounds(R, np.array([[True, False, False]]))
    exact = theta_exact(R[0]).theta
    assert 0 < Fraction(lo[0]) <= exact <= Fraction(whi[0])
    assert lo[0] > 2.0**-59            # relative precision, not 1 − fl(1)


def test_topk_lower_bound_below_exact_delta():
    for seed, alpha in ((2, 0.05), (3, 0.3), (4, 2.0)):
        R = _rows(seed, 40, 14, alpha)
        d_lo, M, closes = tb.topk_delta_lower(R, K=6)
        for i in range(R.shape[0]):
            ex = theta_exact(R[i])
            assert Fraction(d_lo[i]) <= ex.delta
            if closes[i]:   # the closing witness is optimal
                mask = sum(1 << j for j in range(14) if M[i, j])
                assert abs(float(theta_of_mask(R[i], mask) - ex.theta)) < 1e-12


def test_topk_is_exact_when_k_covers_the_row():
    R = _rows(5, 30, 8)
    d_lo, _, closes = tb.topk_delta_lower(R, K=8)
    ex = np.array([float(theta_exact(r).delta) for r in R])
    assert np.all(d_lo <= ex) and np.all(ex - d_lo < 1e-13)


def test_search_masks_reach_c5_guarantee():
    # C5: the prefix crossing has δ ≤ m; greedy and KK are at least as good on these rows
    R = _rows(6, 200, 50, 0.2)
    T = R.sum(1)
    m = R.max(1)
    for M in (tb.bulk_pass(R)[3], tb.greedy_masks(R), tb.kk_masks(R)):
        D = np.abs(np.where(M, R, -R).sum(1)) / T
        assert np.all(D <= m / T * (1 + 1e-12))


def test_kk_colouring_realises_the_differencing_value():
    # (8, 7, 6, 5, 4): KK takes 8−7 = 1, 6−5 = 1, 4−1 = 3, 3−1 = 2 (the optimum is 0: 8+7 = 6+5+4);
    # the 2-colouring must realise exactly the differencing value 2
    R = np.array([[8.0, 7, 6, 5, 4]])
    M = tb.kk_masks(R)[0]
    D = abs(sum(R[0, M]) - sum(R[0, ~M]))
    assert D == 2.0


def test_torch_forms_match_numpy_on_cpu():
    R = _rows(7, 300, 33, 0.3)
    Rt = torch.as_tensor(R)
    a = tb.bulk_pass(R)[3]
    b = tb.bulk_pass_torch(Rt)[3].numpy()
    assert (a == b).mean() > 0.99
    g = tb.greedy_masks(R)
    gt = tb.greedy_masks_torch(Rt).numpy()
    assert (g == gt).all()
    d, _, _ = tb.topk_delta_lower(R, 8)
    dt, _, _ = tb.topk_delta_lower_torch(Rt, 8)
    assert np.allclose(d, dt.numpy(), rtol=1e-12, atol=1e-15)
