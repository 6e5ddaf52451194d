"""Float64 rounding primitives shared by every certified float computation.

Error model: IEEE-754 binary64, round-to-nearest-even, unit roundoff
u = 2⁻⁵³.  A correctly rounded operation lands within half an ulp of the exact
result, so moving the computed value one ulp outward (:func:`down`, :func:`up`)
gives a rigorous lower/upper bound, in the subnormal range too.  Sums and dot
products of n terms obey Higham's bound |fl(Σ) − Σ| ≤ γ_{n−1} Σ|x| with
γ_n = nu/(1 − nu), for every summation order — which is what makes the bounds
independent of BLAS blocking, SIMD paths and thread counts.

The certificate verifier (certificates/verify.py) keeps its own copy of these
few lines on purpose: it must not share code with what it checks.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

U = 2.0 ** -53
"""Unit roundoff of float64 round-to-nearest."""

ERROR_PAD = 1e-6
"""Relative pad for error terms that are themselves computed in float64 (see :func:`pad_error_term`)."""


def gamma(n: int) -> float:
    """γ_n = nu/(1 − nu) for n ≥ 0 with nu < 1, rounded up (a float ≥ the exact value)."""
    if n < 0 or n * U >= 1:
        raise ValueError(f"gamma({n}): need 0 ≤ n·u < 1")
    return float(np.nextafter(n * U / (1.0 - n * U), np.inf))


def up(x):
    """The next float64 above x (elementwise): ≥ the exact value of one rounded-to-nearest op."""
    return np.nextafter(x, np.inf)


def down(x):
    """The next float64 below x (elementwise): ≤ the exact value of one rounded-to-nearest op."""
    return np.nextafter(x, -np.inf)


def frac_down(f: Fraction) -> float:
    """The largest float64 ≤ the rational f (rounding toward −∞).
    # I12 (docs/soundness.md): float(Fraction) is correctly rounded, so one step down when
    # it landed above f gives the largest float ≤ f."""
    x = float(f)
    return float(down(x)) if Fraction(x) > f else x


def frac_up(f: Fraction) -> float:
    """The smallest float64 ≥ the rational f (rounding toward +∞).  # I12, mirrored."""
    x = float(f)
    return float(up(x)) if Fraction(x) < f else x


def pad_error_term(x):
    """x·(1 + 10⁻⁶): an upper bound on a nonnegative error term from its float64 value.

    Precision contract: x must be the float64 evaluation of an expression built
    from nonnegative inputs by + and × only (no cancellation), at most n ≤ 10⁹
    operations deep.  Its relative error is then ≤ γ_n ≤ 1.2·10⁻⁷ (γ_n bound,
    any evaluation order), which the 10⁻⁶ pad covers together with the rounding
    of the pad multiply itself.  It is not a substitute for outward rounding of
    values that can cancel.
    """
    return x * (1 + ERROR_PAD)
