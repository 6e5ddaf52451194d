"""numerics.attention_bounds: certified θ_hi, the C9 local bound and the C10 global bound."""
import math

import numpy as np

from numerics.attention import MHAWeights, mha, mha_jacobian
from numerics.attention_bounds import c9_bound, c10_bound, theta_hi_row, theta_upper_topk
from numerics.norms import bb_norm_vertices, block_norm
from numerics.theta import theta_exact


def _w(rng, H=2, d=1, dk=1, scale=1.0, bias=False, causal=False):
    def g(*s):
        return rng.standard_normal(s) * scale

    b = (lambda *s: rng.standard_normal(s)) if bias else (lambda *s: None)
    return MHAWeights(g(H, d, dk), g(H, d, dk), g(H, d, dk), g(H * dk, d), tau=1.0,
                      b_q=b(H, dk), b_k=b(H, dk), b_v=b(H, dk), b_o=b(d), causal=causal)


def test_theta_hi_known_rows():
    # p = (1/4, 1/4, 1/2): θ = 1 (S = {2});  p = (3/4, 1/4): θ = 3/4 (C4)
    hi, st = theta_hi_row(np.log(np.array([1.0, 1.0, 2.0])), np.zeros(3))
    assert hi >= 1.0 - 1e-15 and hi <= 1.0
    hi, st = theta_hi_row(np.log(np.array([3.0, 1.0])), np.zeros(2))
    assert 0.75 <= hi <= 0.75 + 1e-11
    hi, _ = theta_hi_row(np.array([0.0]), np.zeros(1))
    assert hi < 1e-11                       # one atom: θ = 0


def test_theta_hi_grows_with_score_error():
    z = np.log(np.array([3.0, 1.0]))
    lo_err = theta_hi_row(z, np.full(2, 1e-12))[0]
    hi_err = theta_hi_row(z, np.full(2, 1e-3))[0]
    assert 0.75 < lo_err < hi_err <= 1.0


def test_theta_hi_causal_mask_ignores_masked():
    z = np.array([0.0, math.log(3.0), -np.inf, -np.inf])
    assert 0.75 <= theta_hi_row(z, np.zeros(4))[0] <= 0.75 + 1e-11


def test_theta_hi_is_upper_bound_of_true_softmax():
    rng = np.random.default_rng(0)
    for _ in range(50):
        z = rng.standard_normal(int(rng.integers(2, 9))) * 3
        p = np.exp(z - z.max())
        hi, _ = theta_hi_row(z, np.zeros_like(z))
        assert hi >= float(theta_exact(p).theta) - 1e-15


def test_topk_is_upper_bound_and_exact_for_dominant():
    rng = np.random.default_rng(1)
    for _ in range(40):
        q = rng.exponential(size=int(rng.integers(2, 16))) ** 3
        assert theta_upper_topk(q) >= float(theta_exact(q).theta)
    q = np.array([0.7, 0.1, 0.1, 0.1])
    assert abs(theta_upper_topk(q, k=1) - 4 * 0.7 * 0.3) < 1e-12


def test_topk_long_uniform_is_one():
    assert theta_upper_topk(np.ones(100)) == 1.0


def test_c9_bound_exceeds_exact_norm_d1():
    rng = np.random.default_rng(2)
    for t in range(30):
        w = _w(rng, H=int(rng.integers(1, 4)), scale=float(rng.uniform(0.3, 3)), bias=t % 2 == 1,
               causal=t % 3 == 0)
        X = rng.standard_normal((int(rng.integers(2, 8)), 1)) * 2
        true = bb_norm_vertices(mha_jacobian(X, w))[0]
        cen, pap = c9_bound(X, w), c9_bound(X, w, form="paper")
        assert true <= cen.bound <= pap.bound * (1 + 1e-12)
        assert cen.bound <= c9_bound(X, w, theta="one").bound


def test_c9_theta_factor_matters_when_saturated():
    # near one-hot rows: θ ≈ 0 and the bound drops towards ‖W_O‖‖W_V‖-like values
    rng = np.random.default_rng(3)
    w = _w(rng, H=1, scale=4.0)
    X = rng.standard_normal((5, 1)) * 4
    r = c9_bound(X, w)
    assert r.bound < c9_bound(X, w, theta="one").bound
    assert np.all(r.theta >= r.theta_stored)


def test_c10_bound_dominates_random_pairs():
    rng = np.random.default_rng(4)
    w = _w(rng, H=2, d=3, dk=2)
    R = 1.5
    b = c10_bound(w, R)
    for _ in range(200):
        X = rng.standard_normal((6, 3))
        X *= R / np.maximum(np.sqrt((X ** 2).mean(axis=1, keepdims=True)), R)
        Y = X + 1e-3 * rng.standard_normal((6, 3))
        Y *= R / np.maximum(np.sqrt((Y ** 2).mean(axis=1, keepdims=True)), R)
        num = block_norm((mha(X, w) - mha(Y, w)).numpy())
        assert num <= b * block_norm(X - Y)


def test_c10_matches_formula_without_bias():
    # one head, d = 1: ‖W_O‖‖W_V‖(1 + 2R²|q k|/τ) by hand
    w = MHAWeights(np.array([[[2.0]]]), np.array([[[3.0]]]), np.array([[[0.5]]]), np.array([[4.0]]), tau=2.0)
    expect = 4.0 * 0.5 * (1 + 2 * 1 * 1.0 * 6.0 / 2.0)
    assert expect <= c10_bound(w, 1.0) <= expect * (1 + 1e-9)


def test_c10_centred_not_larger_than_paper_with_key_bias():
    rng = np.random.default_rng(5)
    w = _w(rng, H=2, d=2, dk=2, bias=True)
    assert c10_bound(w, 1.0) <= c10_bound(w, 1.0, form="paper")
