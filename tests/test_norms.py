"""numerics.norms: the block-∞/RMS norm and B→B operator norms (C8–C10)."""
import math
from fractions import Fraction as F

import numpy as np
import pytest

from numerics.norms import (bb_norm, bb_norm_ascent, bb_norm_upper, bb_norm_vertices, block_norm,
                            block_norm_sq_exact)


def test_block_norm_value():
    X = np.array([[3.0, 4.0], [0.0, 1.0]])
    assert block_norm(X) == 5 / math.sqrt(2)


def test_block_norm_sq_exact():
    assert block_norm_sq_exact([[F(1, 2), F(1, 2)], [F(1), F(0)]]) == F(1, 2)


def test_block_norm_rejects_vector():
    with pytest.raises(ValueError, match="shape"):
        block_norm(np.ones(3))


def test_vertices_identity_and_sum():
    L = 5
    J = np.zeros((L, 1, L, 1))
    for k in range(L):
        J[k, 0, k, 0] = 1.0
    assert bb_norm_vertices(J)[0] == 1.0
    J2 = np.ones((L, 1, L, 1))          # every output row is the sum of all inputs: norm L
    assert bb_norm_vertices(J2)[0] == L


def test_vertices_alternating_signs():
    # output row 0 = x0 − x1 + x2; the best vertex must pick opposite signs: norm 3
    J = np.zeros((3, 1, 3, 1))
    J[0, 0, :, 0] = [1.0, -1.0, 1.0]
    val, x = bb_norm_vertices(J)
    assert val == 3.0
    assert abs(float(J[0, 0, :, 0] @ x[:, 0])) == 3.0


def test_vertices_needs_d1():
    with pytest.raises(ValueError, match="d_in = 1"):
        bb_norm_vertices(np.zeros((2, 2, 2, 2)))


def test_ascent_block_diagonal_known_value():
    # J acts on each row by diag(3, 1): ‖J‖_{B→B} = 3 (d_in = d_out)
    L, d = 4, 2
    J = np.zeros((L, d, L, d))
    for k in range(L):
        J[k, :, k, :] = np.diag([3.0, 1.0])
    val, x = bb_norm_ascent(J)
    assert abs(val - 3.0) < 1e-12
    assert abs(bb_norm_upper(J) - 3.0) < 1e-12
    assert np.all(np.linalg.norm(x, axis=1) <= 1 + 1e-12)


def test_ascent_matches_vertices_for_d1():
    rng = np.random.default_rng(3)
    for _ in range(20):
        L = int(rng.integers(2, 8))
        J = rng.standard_normal((L, 1, L, 1))
        exact = bb_norm_vertices(J)[0]
        low = bb_norm_ascent(J, rng=rng)[0]
        assert low <= exact * (1 + 1e-12)
        assert exact <= bb_norm_upper(J) * (1 + 1e-12)


def test_ascent_bracketed_by_upper():
    rng = np.random.default_rng(4)
    for _ in range(10):
        L, din, dout = 3, 3, 2
        J = rng.standard_normal((L, dout, L, din))
        low, x = bb_norm_ascent(J, rng=rng)
        # the witness attains the value
        y = np.einsum("kcid,id->kc", J, x)
        assert abs(np.linalg.norm(y, axis=1).max() * math.sqrt(din / dout) - low) < 1e-9 * low
        assert low <= bb_norm_upper(J) * (1 + 1e-12)


def test_bb_norm_reports_exactness():
    J = np.ones((3, 1, 3, 1))
    assert bb_norm(J) == (3.0, True)
    assert bb_norm(np.ones((2, 2, 2, 2)))[1] is False
