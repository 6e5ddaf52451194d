"""The exact θ engine: values worked out by hand, closed forms, exactness on floats.

θ references here are written in the test (every subset in plain Python, or the set of
subset sums as the bits of a Python int), never numerics.theta.best_mask_bruteforce, which
theta_exact itself uses for short rows.
"""
import itertools
import random
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


def _weights_by_fractions(row):
    # the Fraction form of integer_weights (a list of Fractions takes that path), which the
    # float-array form must match
    return integer_weights(to_fractions(row))


def test_integer_weights_of_float_arrays_match_the_fraction_form():
    rng = np.random.default_rng(3)
    rows = [np.zeros(3), np.array([-0.0, 0.0, 1.0]), np.array([5e-324, 1.0]), np.array([1.7976931348623157e308, 1e-300]),
            np.array([2.0 ** -1074, 2.0 ** -1073, 3 * 2.0 ** -1074]), np.array([], dtype=np.float64)]
    for _ in range(300):
        L = int(rng.integers(1, 40))
        x = np.exp(rng.normal(size=L) * rng.choice([0.1, 1.0, 5.0, 40.0]))
        x[rng.random(L) < 0.2] = 0.0
        rows += [x, x.astype(np.float32), x.astype(np.float16), x * 2.0 ** -1060]
    def outcome(f, row):
        try:
            return f(row)
        except ValueError as e:           # float16 casts overflow to inf: the same error wanted
            return str(e)
    for row in rows:
        assert outcome(integer_weights, row) == outcome(_weights_by_fractions, row), row
    for bad in (np.array([0.5, np.nan]), np.array([0.5, -0.1]), np.array([np.inf, 1.0], dtype=np.float32)):
        with pytest.raises(ValueError) as a:
            integer_weights(bad)
        with pytest.raises(ValueError) as b:
            to_fractions(bad)
        assert str(a.value) == str(b.value)


def test_bad_entries_raise():
    with pytest.raises(ValueError):
        to_fractions(np.array([0.5, np.nan]))
    with pytest.raises(ValueError):
        to_fractions(np.array([0.5, -0.1]))
    with pytest.raises(ValueError):
        theta_exact([0, 0])


def theta_reference(w):
    """θ = max over subsets of 4ab/T², every subset, plain Python ints."""
    T = sum(w)
    best = max(4 * a * (T - a) for r in range(len(w) + 1) for a in map(sum, itertools.combinations(w, r)))
    return F(best, T * T)


def theta_dp(w):
    """θ from the set of subset sums (the bits of one Python int): for small totals, any L."""
    T = sum(w)
    reach = 1
    for x in w:
        reach |= reach << x
    d = min(abs(T - 2 * s) for s in range(T + 1) if reach >> s & 1)
    return 1 - F(d, T) ** 2


def test_closed_forms_match_the_reference():
    for L in range(2, 15):
        assert theta_reference([1] * L) == theta_uniform(L)
        assert theta_bruteforce([1] * L).theta == theta_uniform(L)
    rng = np.random.default_rng(0)
    for _ in range(200):
        w = rng.integers(0, 50, size=int(rng.integers(2, 9))).tolist()
        if sum(w) == 0:
            continue
        want = theta_reference(w)
        d = theta_dominant(w)
        if d is not None:
            assert d.theta == want
        assert theta_bruteforce(w).theta == want
        assert theta_exact(w).theta == want
        assert theta_of_mask(w, theta_exact(w).mask) == want
        assert abs(float(want) - theta_float64_bruteforce(np.array(w, float))) < 1e-12


def test_theta_exact_on_every_route_against_the_reference():
    # L ≤ 16: brute force; 17–24: Horowitz–Sahni; > 24: Schroeppel–Shamir (numerics.partition)
    rng = random.Random(3)
    seen = set()
    for L in (3, 9, 16, 17, 20, 24, 25, 31, 40, 56):
        rows = [[1000 + rng.randint(-3, 3) for _ in range(L)],                    # near uniform
                [rng.choice([0, 0, 4, 4, 4, 6, 9]) for _ in range(L)],            # ties, zeros
                [rng.getrandbits(11) for _ in range(L)]]
        left = [rng.getrandbits(9) + 1 for _ in range(L // 2)]                    # near-perfect:
        right = left[:-1] + [left[-1] + 1]                                        # off by one
        rows.append(left + right + [0] * (L % 2))
        for w in rows:
            if sum(1 for x in w if x) < 2:
                continue
            want = theta_reference(w) if L <= 16 else theta_dp(w)
            res = theta_exact([F(x, 2**30) for x in w])
            seen.add(res.method)
            assert res.theta == want, (w, res)
            assert res.theta == 1 - res.delta**2 == theta_of_mask(w, res.mask)
    assert {"bruteforce", "mitm", "ss"} <= seen


def test_theta_exact_L64_planted_row():
    rng = random.Random(4)
    left = [rng.getrandbits(30) + 1 for _ in range(32)]
    cuts = sorted(rng.sample(range(1, sum(left)), 31))
    row = left + [b - a for a, b in zip([0] + cuts, cuts + [sum(left)])]
    rng.shuffle(row)
    res = theta_exact(np.array(row, dtype=np.float64) / 2.0**40)   # exact dyadic floats
    assert res.method == "ss" and res.theta == 1 and res.delta == 0
    assert theta_of_mask(row, res.mask) == 1
    row[0] += 1                                                      # T odd: δ ≥ 1/T
    res = theta_exact(row)
    assert res.delta == F(1, sum(row)) and theta_of_mask(row, res.mask) == res.theta < 1


def test_theta_and_delta_are_consistent():
    rng = np.random.default_rng(1)
    for _ in range(100):
        p = rng.dirichlet(np.ones(int(rng.integers(2, 12))))
        r = theta_exact(p)
        assert r.theta == 1 - r.delta**2
        assert theta_of_mask(p, r.mask) == r.theta
