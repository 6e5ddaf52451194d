"""The negative controls of proofs/checks run the machinery of the checks they guard, and that
machinery tells the right statement from the wrong one."""
from fractions import Fraction as F

import numpy as np

from numerics.signs import mask_matrix, sign_matrix, sign_tuples
from numerics.softmax import entropy_float64, jacobian_float64
from numerics.theta import SAWTOOTH, sawtooth_delta, theta_bruteforce, theta_of_mask
from proofs.checks import attention_c8, softmax_exact, softmax_numeric


def test_c1_naive_diagonal_is_what_the_check_rejects():
    assert softmax_numeric.near_one_hot_error("complement") < softmax_numeric.NEAR_ONE_HOT_TOL
    assert softmax_numeric.near_one_hot_error("naive") > 0.5
    u = np.array([1.0, -0.5, 2.0])       # away from the trap both diagonals agree
    np.testing.assert_allclose(jacobian_float64(u, diagonal="naive"), jacobian_float64(u), rtol=1e-14, atol=1e-16)


def test_c5_attainment_helper_separates_the_true_and_perturbed_sawtooth():
    assert softmax_exact.attainment_misses(sawtooth_delta) == []
    assert len(softmax_exact.attainment_misses(lambda m: sawtooth_delta(m) * F(101, 100))) == 4


def test_c6_padding_helper_sees_a_nonzero_atom():
    n, changed = softmax_exact.padding_changes(0, {2: 6, 3: 6})
    assert n > 0 and changed == 0
    assert softmax_exact.padding_changes(1, {2: 6})[1] > 0


def test_c7_subset_helper_rejects_the_unnormalised_certificate():
    scales = lambda n: (F(3, 2 * n),)     # noqa: E731  rows of sum 3/2
    checked, bad, tight = softmax_exact.subset_certificates({3: 4}, scales, theta_of_mask)
    assert checked > 0 and bad == 0 and tight > 0
    assert softmax_exact.subset_certificates({3: 4}, scales, softmax_exact.unnormalised_certificate)[1] > 0


def test_c8_frobenius_through_the_block_norm():
    X = [[F(1), F(2)], [F(0), F(-1)]]
    assert attention_c8.frobenius_sq(X) == F(1 + 4 + 0 + 1, 4)       # ‖X‖_F²/(L·d), by hand


def test_sign_and_mask_enumeration():
    assert sign_tuples(2) == [(1, 1), (1, -1)]
    full = sign_matrix(3, half=False)
    assert len({tuple(r) for r in full.tolist()}) == 8 and set(np.unique(full)) == {-1, 1}
    half = sign_matrix(4)
    assert (half[:, 0] == 1).all() and len({tuple(r) for r in half.tolist()}) == 8
    assert mask_matrix(2).tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]


def test_sawtooth_pieces_meet_and_rows_attain():
    # joints worked by hand: δ*(1/3) = 1/3, δ*(2/7) = 1/7, δ*(7/27) = 1/9
    assert [sawtooth_delta(m) for m in (F(1, 3), F(2, 7), F(7, 27))] == [F(1, 3), F(1, 7), F(1, 9)]
    assert sawtooth_delta(F(1, 6)) is None and sawtooth_delta(F(3, 5)) is None
    for (lo, hi), delta, row, _ in SAWTOOTH:
        m = (lo + hi) / 2
        assert theta_bruteforce(row(m)).theta == 1 - delta(m) ** 2


def test_entropy_rows():
    assert entropy_float64([1.0, 1.0]) == np.log(2)
    np.testing.assert_allclose(entropy_float64(np.array([[2.0, 0.0], [1.0, 3.0]])),
                               [0.0, -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))], rtol=1e-15)
