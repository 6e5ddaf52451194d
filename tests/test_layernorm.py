"""numerics.layernorm: closed form, exact facts, spectral-norm estimate and certified enclosures (C11, C14)."""
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics.interval import Interval
from numerics.layernorm import (ln_forward, ln_jacobian, ln_jacobian_exact, ln_jacobian_sympy, ln_norm_bound,
                                ln_product_norm, ln_sympy_autodiff)
from numerics.layernorm_spectral import (count_eigs_above_exact, ln_spectral_norm, ln_spectral_norm_enclosure,
                                         rho_enclosure)


def test_exact_jacobian_pinned_by_hand():
    # x = (0, 1, 2), γ = 1, eps = 0: c = (−1, 0, 1), σ² = 2/3, P = Π − ccᵀ/2 (worked by hand).
    M, s2 = ln_jacobian_exact([0, 1, 2], [1, 1, 1], 0)
    r = sympy.Rational
    assert s2 == r(2, 3)
    assert M == sympy.Matrix([[r(1, 6), r(-1, 3), r(1, 6)], [r(-1, 3), r(2, 3), r(-1, 3)],
                              [r(1, 6), r(-1, 3), r(1, 6)]])


def test_closed_form_equals_sympy_differentiation():
    x, g = [Fraction(1, 2), -3, 2, Fraction(7, 3)], [2, Fraction(-1, 2), 3, 1]
    for eps in (0, Fraction(1, 100)):
        D = ln_jacobian_sympy(x, g, eps) - ln_sympy_autodiff(x, g, eps)
        assert all(sympy.simplify(v) == 0 for v in D)


def test_rank_and_kernels_exact():
    x, g = [1, -2, 5, 0, 3], [2, -1, 3, 1, Fraction(1, 2)]
    M0, _ = ln_jacobian_exact(x, g, 0)
    M1, _ = ln_jacobian_exact(x, g, Fraction(1, 1000))
    assert M0.rank() == 3 and M1.rank() == 4
    inv_g = sympy.Matrix([[sympy.Rational(1) / sympy.Rational(Fraction(v).numerator, Fraction(v).denominator)
                           for v in g]])
    assert inv_g * M1 == sympy.zeros(1, 5)
    assert M1 * sympy.ones(5, 1) == sympy.zeros(5, 1)


def test_float_closed_form_matches_torch_autograd():
    rng = np.random.default_rng(0)
    for d, eps in ((3, 0.0), (7, 1e-5), (32, 1e-12)):
        x, g = rng.standard_normal(d), rng.standard_normal(d)
        Ja = torch.autograd.functional.jacobian(
            lambda v: torch.nn.functional.layer_norm(v, (d,), torch.tensor(g), None, eps), torch.tensor(x))
        assert np.allclose(ln_jacobian(x, g, eps), Ja.numpy(), rtol=1e-12, atol=1e-13)
        y = torch.nn.functional.layer_norm(torch.tensor(x), (d,), torch.tensor(g), torch.tensor(g), eps)
        assert np.allclose(ln_forward(x, g, g, eps), y.numpy(), rtol=1e-14, atol=1e-14)


def test_spectral_norm_estimate_matches_svd():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 16)) * 3
    g = rng.standard_normal(16)
    ref = np.linalg.norm(ln_jacobian(x, g, 1e-5), 2, axis=(-2, -1))
    assert np.allclose(ln_spectral_norm(x, g, 1e-5), ref, rtol=1e-12)


def test_enclosure_contains_mpmath_singular_value():
    rng = np.random.default_rng(2)
    with mpmath.workdps(40):
        for d, eps in ((2, 0.3), (5, 0.0), (9, 1e-12)):
            x, g = rng.standard_normal(d), rng.standard_normal(d)
            lo, hi, ok = ln_spectral_norm_enclosure(x[None], g, eps)
            ref = max(mpmath.svd_r(ln_jacobian(list(x), list(g), eps, precision="mpmath"), compute_uv=False))
            assert ok[0] and lo[0] <= ref <= hi[0] and hi[0] - lo[0] < 1e-8 * hi[0]


def test_enclosure_for_constant_gamma_is_the_bound():
    # C14 equality: γ constant, d ≥ 3 ⇒ ‖J‖ = γ/s; by hand x = (0, 1, 2), γ = 2, eps = 0: 2/√(2/3) = √6.
    lo, hi, ok = ln_spectral_norm_enclosure(np.array([[0.0, 1.0, 2.0]]), np.full(3, 2.0), 0.0)
    assert ok[0] and lo[0] <= np.sqrt(6) <= hi[0] and hi[0] - lo[0] < 1e-8


def test_count_eigs_exact_matches_sympy_root_count():
    x, g, eps = [1, -2, 5, 0], [2, -1, 3, Fraction(1, 2)], Fraction(1, 100)
    M, _ = ln_jacobian_exact(x, g, eps)
    lam = sympy.Symbol("lam")
    poly = sympy.Poly((M * M.T).charpoly(lam).as_expr(), lam)
    for t in (Fraction(1, 7), Fraction(5, 4), Fraction(17, 5), Fraction(9, 2), Fraction(8, 1)):
        want = poly.count_roots(sympy.Rational(t.numerator, t.denominator), None)
        assert count_eigs_above_exact(x, g, eps, t) == want


def test_rho_enclosure_exact_value():
    # x = (−1, 1): σ² = 1, eps = 0, ‖γ‖∞ = 2 ⇒ ρ = 1/2 exactly.
    lo, hi = rho_enclosure(np.array([[-1.0, 1.0]]), np.array([2.0, 1.0]), 0.0)
    assert lo[0] <= 0.5 <= hi[0] and hi[0] - lo[0] < 1e-15


def test_interval_add_is_outward():
    r = Interval(np.array([0.1])) + Interval(np.array([0.2]))
    exact = Fraction(0.1) + Fraction(0.2)
    assert Fraction(float(r.lo[0])) <= exact <= Fraction(float(r.hi[0])) and r.lo[0] < r.hi[0]


def test_interval_ops_enclose_the_exact_rationals():
    a, b = Interval(np.array([0.1, -3.0]), np.array([0.3, -1.0 / 3])), np.array([1.0 / 7, 2.0])
    A = [(Fraction(float(a.lo[i])), Fraction(float(a.hi[i]))) for i in range(2)]
    for i, bi in enumerate(b):
        B = Fraction(float(bi))
        for op, got in (("+", a + bi), ("-", a - bi), ("*", a * bi), ("/", a / bi), ("r-", bi - a), ("r/", bi / a)):
            ends = {"+": lambda x: x + B, "-": lambda x: x - B, "*": lambda x: x * B, "/": lambda x: x / B,
                    "r-": lambda x: B - x, "r/": lambda x: B / x}[op]
            vals = [ends(A[i][0]), ends(A[i][1])]
            assert Fraction(float(got.lo[i])) <= min(vals) and max(vals) <= Fraction(float(got.hi[i])), op
    s = Interval(np.array([-0.5]), np.array([0.25])).sq()
    assert s.lo[0] == 0.0 and s.hi[0] >= 0.25
    z = Interval(np.array([1.0])) / Interval(np.array([-1.0]), np.array([1.0]))
    assert z.lo[0] == -np.inf and z.hi[0] == np.inf


def test_haynsworth_count_agrees_across_arithmetics():
    # same count, three arithmetics: exact, float64 bisection, interval enclosure (C14)
    x, g = [0.3, -1.25, 2.0, 0.5, -0.75], [1.5, -0.5, 2.0, 1.0, 0.25]
    M, s2 = ln_jacobian_exact(x, g, Fraction(1, 64))
    mpmath.mp.dps = 50
    A = mpmath.matrix([[mpmath.mpf(int(v.p)) / int(v.q) for v in row] for row in (M * M.T).tolist()])
    lam_max = float(max(mpmath.eigsy(A)[0]))    # A = M Mᵀ = s² J Jᵀ
    assert count_eigs_above_exact(x, g, Fraction(1, 64), Fraction(lam_max) * Fraction(999, 1000)) == 1
    assert count_eigs_above_exact(x, g, Fraction(1, 64), Fraction(lam_max) * Fraction(1001, 1000)) == 0
    est = ln_spectral_norm(np.array([x]), np.array(g), 1 / 64)[0]
    lo, hi, ok = ln_spectral_norm_enclosure(np.array([x]), np.array(g), 1 / 64)
    assert ok[0] and lo[0] <= est <= hi[0] and abs(est - np.sqrt(lam_max / float(s2))) < 1e-12


def test_product_norm_matches_matrix_product():
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 6)) for _ in range(3)]
    gs = [rng.standard_normal(6) for _ in range(3)]
    est = ln_product_norm(xs, gs, [1e-5] * 3)
    for t in range(4):
        P = np.eye(6)
        for x, g in zip(xs, gs):
            P = ln_jacobian(x[t], g, 1e-5) @ P
        assert abs(est[t] - np.linalg.norm(P, 2)) < 1e-10 * np.linalg.norm(P, 2)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="width"):
        ln_jacobian(np.zeros(3), np.ones(4), 1e-5)
    with pytest.raises(ValueError, match="non-finite"):
        ln_jacobian(np.array([0.0, np.nan, 1.0]), np.ones(3), 1e-5)
    with pytest.raises(ValueError, match="constant"):
        ln_jacobian_exact([2, 2, 2], [1, 1, 1], 0)


@settings(deadline=None)
@given(st.integers(2, 24), st.sampled_from([0.0, 1e-12, 1e-5, 1.0]), st.integers(0, 2**31 - 1),
       st.floats(-4, 4))
def test_bound_and_enclosure_hypothesis(d, eps, seed, logscale):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d) * 10.0 ** logscale
    g = rng.standard_t(2, size=d)
    ref = np.linalg.norm(ln_jacobian(x, g, eps), 2)
    assert ref <= ln_norm_bound(x, g, eps) * (1 + 1e-12)
    lo, hi, _ = ln_spectral_norm_enclosure(x[None], g, eps)
    assert lo[0] <= ref * (1 + 1e-12) and ref <= hi[0] * (1 + 1e-12)


def test_enclosure_when_variance_underflows_is_inf_not_nan():
    # x = (1e-170, 0, 0, 0), eps = 0: σ² = (3/16)·1e-340 underflows, so the enclosure of
    # σ² + eps reaches 0; the only honest answer is hi = inf, lo = 0, not certified (never NaN).
    x = np.array([[1e-170, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    lo, hi, ok = ln_spectral_norm_enclosure(x, np.ones(4), 0.0)
    assert hi[0] == np.inf and lo[0] == 0.0 and not ok[0]
    # the well-scaled row in the same batch is unaffected: γ = 1, d = 4 ⇒ ‖J‖ = 1/σ = 1/√(5/4) by hand
    assert ok[1] and lo[1] <= 1 / np.sqrt(1.25) <= hi[1]
    rlo, rhi = rho_enclosure(x[:1], np.ones(4), 0.0)
    assert rlo[0] == 0.0 and not np.isnan(rhi[0])
    # ρ = σ exactly here; compare squares exactly: σ² = (3/16)·Fraction(1e-170)²
    assert Fraction(float(rhi[0])) ** 2 >= Fraction(3, 16) * Fraction(1e-170) ** 2


def test_enclosure_tiny_variance_with_eps_is_certified():
    # same x, eps = 1e-5: s² ≥ eps > 0, so the enclosure is finite and certified; ‖J‖ ≤ 1/√eps (C14)
    lo, hi, ok = ln_spectral_norm_enclosure(np.array([[1e-170, 0.0, 0.0, 0.0]]), np.ones(4), 1e-5)
    assert ok[0] and 0 < lo[0] <= hi[0] <= 1 / np.sqrt(1e-5) * (1 + 1e-12)
