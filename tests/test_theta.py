"""The exact θ engine: values worked out by hand, closed forms, exactness on floats."""
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from numerics.theta import (integer_weights, normalise, theta_bruteforce, theta_dominant, theta_exact,
                            theta_float64_bruteforce, theta_of_mask, theta_uniform, to_fractions)


def test_hand_values():
    # (1/2, 1/3, 1/6): {1/2} vs {1/3, 1/6} splits evenly → θ = 1.
    assert theta_exact([F(1, 2), F(1, 3), F(1, 6)]).theta == 1
    # (0.6, 0.3, 0.1): dominant, θ = 4·0.6·0.4 = 0.96.
    assert theta_exact([F(3, 5), F(3, 10), F(1, 10)]).theta == F(24, 25)
    # (1, 1, 1): best split 1 vs 2 → 4·(1/3)(2/3) = 8/9.
    assert theta_exact([1, 1, 1]).theta == F(8, 9)
    # (5, 4, 3, 3, 1) sum 16: {5, 3} = 8 → θ = 1.
    assert theta_exact([5, 4, 3, 3, 1]).theta == 1
    # A single atom: every split is trivial.
    assert theta_exact([0, 7, 0]).theta == 0


def test_near_half_is_not_rounded():
    # δ = 2⁻³⁹ exactly, so θ = 1 − 2⁻⁷⁸, which float64 cannot tell from 1.
    row = np.array([0.5 + 2.0**-40, 0.5 - 2.0**-40])
    r = theta_exact(row)
    assert r.theta == 1 - F(1, 2**78) and r.delta == F(1, 2**39)
    assert float(r.theta) == 1.0


def test_float_rows_are_taken_exactly():
    row = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    fr = to_fractions(row)
    assert fr[0] == F(float(np.float32(0.1)))          # the float32 value, not 1/10
    w = integer_weights(row)
    assert [F(x, sum(w)) for x in w] == normalise(row)
    bf = torch.tensor([0.3, 0.3, 0.4], dtype=torch.bfloat16)
    assert to_fractions(bf) == [F(float(x)) for x in bf.float()]


def test_bad_entries_raise():
    with pytest.raises(ValueError):
        to_fractions(np.array([0.5, np.nan]))
    with pytest.raises(ValueError):
        to_fractions(np.array([0.5, -0.1]))
    with pytest.raises(ValueError):
        theta_exact([0, 0])


def test_closed_forms_match_bruteforce():
    for L in range(2, 15):
        assert theta_bruteforce([1] * L).theta == theta_uniform(L)
    rng = np.random.default_rng(0)
    for _ in range(200):
        w = rng.integers(0, 50, size=int(rng.integers(2, 9))).tolist()
        if sum(w) == 0:
            continue
        d = theta_dominant(w)
        b = theta_bruteforce(w)
        if d is not None:
            assert d.theta == b.theta
        assert theta_exact(w).theta == b.theta
        assert theta_of_mask(w, theta_exact(w).mask) == b.theta
        assert abs(float(b.theta) - theta_float64_bruteforce(np.array(w, float))) < 1e-12


def test_theta_and_delta_are_consistent():
    rng = np.random.default_rng(1)
    for _ in range(100):
        p = rng.dirichlet(np.ones(int(rng.integers(2, 12))))
        r = theta_exact(p)
        assert r.theta == 1 - r.delta**2
        assert theta_of_mask(p, r.mask) == r.theta
