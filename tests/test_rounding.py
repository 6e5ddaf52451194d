"""numerics.rounding: directed rounding steps, γ_n and Fraction → float rounding."""
from fractions import Fraction

import numpy as np
import pytest

from numerics.rounding import U, down, frac_down, frac_up, gamma, pad_error_term, up


@pytest.mark.parametrize("f", [Fraction(1, 3), Fraction(-1, 3), Fraction(2, 1), Fraction(1, 10 ** 320),
                               Fraction(-7, 2 ** 1080), Fraction(10 ** 300 + 1, 3)])
def test_fraction_rounding_is_directed_and_tight(f):
    lo, hi = frac_down(f), frac_up(f)
    assert Fraction(lo) <= f <= Fraction(hi)
    if Fraction(lo) == f:            # exactly representable: both directions return it
        assert lo == hi
    else:                            # otherwise the two are adjacent floats
        assert float(up(lo)) == hi


def test_steps_are_one_ulp():
    assert Fraction(float(up(1.0))) - 1 == 2 * Fraction(U) and 1 - Fraction(float(down(1.0))) == Fraction(U)
    assert down(0.0) < 0 < up(0.0)
    np.testing.assert_array_equal(up(np.array([1.0, -1.0])), [1 + 2 * U, -1 + U])


def test_gamma_is_rounded_up_and_rejects_nonsense():
    for n in (1, 3, 1000, 10 ** 9):
        exact = n * Fraction(U) / (1 - n * Fraction(U))
        assert Fraction(gamma(n)) >= exact and Fraction(gamma(n)) < exact * (1 + Fraction(1, 2 ** 50))
    with pytest.raises(ValueError):
        gamma(-1)


def test_pad_covers_the_gamma_of_a_billion_ops():
    assert pad_error_term(1.0) - 1.0 > gamma(10 ** 9) * 2
