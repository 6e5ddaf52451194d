"""C11: the LayerNorm Jacobian, exactly (sympy) and against float64 autograd.

J_LN = M/s with M = diag(γ)(Π − ccᵀ/(d s²)) rational (numerics.layernorm), so the
kernel and rank facts are decided in exact rational arithmetic.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import sympy
import torch

from numerics.layernorm import ln_jacobian, ln_jacobian_exact, ln_norm_bound, ln_jacobian_sympy, ln_sympy_autodiff

from ..registry import check
from ._util import nanmax, refuted, verdict

EPS_EXACT = (Fraction(0), Fraction(1, 1000))


def rational_instances(d: int, n: int, seed: int):
    """Seeded exact instances: non-constant x, γ without zeros, not constant."""
    rng = random.Random(seed * 1000 + d)
    out = []
    while len(out) < n:
        x = [Fraction(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(d)]
        g = [Fraction(rng.choice([-1, 1]) * rng.randint(1, 9), rng.randint(1, 3)) for _ in range(d)]
        if len(set(x)) > 1 and len(set(g)) > 1:
            out.append((x, g))
    return out


def c11_facts(x, g, eps) -> dict:
    """Exact C11 facts for one instance; every value is a Python bool or int."""
    d = len(x)
    M, s2 = ln_jacobian_exact(x, g, eps)
    ones = sympy.Matrix([1] * d)
    inv_g = sympy.Matrix([[sympy.Rational(1) / sympy.Rational(v.numerator, v.denominator) for v in g]])
    mean = sum(x, Fraction(0)) / d
    c = sympy.Matrix([sympy.Rational((v - mean).numerator, (v - mean).denominator) for v in x])
    return {"kernel_1": M * ones == sympy.zeros(d, 1), "left_kernel_inv_gamma": inv_g * M == sympy.zeros(1, d),
            "rank": M.rank(), "Jc_zero": M * c == sympy.zeros(d, 1)}


@check("C11", "sympy", scope="d = 2…6, exact rational x, γ; eps ∈ {0, 1/1000}; closed form vs sympy.diff")
def c11_closed_form_and_facts_sympy(tier):
    per_d = 2 if tier == "quick" else 6
    n, bad = 0, []
    for d in range(2, 7):
        for x, g in rational_instances(d, per_d, seed=11):
            for eps in EPS_EXACT:
                n += 1
                # closed form = differentiation of the definition, exactly
                J_closed = ln_jacobian_sympy(x, g, eps)
                J_auto = ln_sympy_autodiff(x, g, eps)
                if any(sympy.simplify(a - b) != 0 for a, b in zip(J_closed, J_auto)):
                    bad.append(f"d={d} eps={eps}: closed form differs from sympy.diff")
                f = c11_facts(x, g, eps)
                want_rank = d - 2 if eps == 0 else d - 1
                if not (f["kernel_1"] and f["left_kernel_inv_gamma"]):
                    bad.append(f"d={d} eps={eps}: kernel fact fails")
                if f["rank"] != want_rank:
                    bad.append(f"d={d} eps={eps}: rank {f['rank']} != {want_rank}")
                if f["Jc_zero"] != (eps == 0):
                    bad.append(f"d={d} eps={eps}: J c = 0 is {f['Jc_zero']}")
    # eps > 0 and x constant (c = 0): J = diag(γ)Π/√eps, still rank d − 1
    for d in range(2, 7):
        n += 1
        M, _ = ln_jacobian_exact([Fraction(3)] * d, [Fraction(k + 1) for k in range(d)], Fraction(1, 1000))
        if M.rank() != d - 1:
            bad.append(f"d={d} constant x: rank {M.rank()} != {d - 1}")
    return verdict(not bad, f"d = 2…6, {n} exact instances",
                   "; ".join(bad[:3]) or f"{n} exact instances: closed form = sympy.diff; J·1 = 0; (1/γ)ᵀJ = 0; "
                   "rank d−2 (eps = 0) and d−1 (eps > 0); J·c = 0 exactly when eps = 0",
                   instances=n, failures=len(bad))


@check("C11", "exact", scope="d = 3…6, eps = 1/1000: the uncorrected rank d − 2", negative_control=True,
       guards=("c11_closed_form_and_facts_sympy",))
def c11_rank_d_minus_2_with_eps_refuted(tier):
    # The wrong variant: "rank d − 2" also for eps > 0 (true only for eps = 0).
    found = []
    for d in range(3, 7):
        x, g = rational_instances(d, 1, seed=12)[0]
        r = c11_facts(x, g, Fraction(1, 1000))["rank"]    # the positive check's exact facts
        if r != d - 2:
            found.append(f"d={d}: rank {r}")
    return refuted(len(found) == 4, "d = 3…6, eps = 1/1000",
                   f"rank d − 2 with eps > 0 refuted at every d ({', '.join(found)})" if len(found) == 4 else "",
                   refuted_at=len(found))


@check("C11", "float64", scope="d ∈ {2,3,8,64,384}, eps ∈ {0, 1e-12, 1e-5, 0.5}: closed form vs torch autograd")
def c11_autograd_float64(tier):
    rng = np.random.default_rng(11)
    reps = 3 if tier == "quick" else 20
    worst, n = 0.0, 0
    for d in (2, 3, 8, 64, 384):
        for eps in (0.0, 1e-12, 1e-5, 0.5):
            for _ in range(reps):
                x = rng.standard_normal(d) * 10.0 ** rng.uniform(-2, 2)
                g = rng.standard_normal(d)
                J = ln_jacobian(x, g, eps)
                xt = torch.tensor(x, requires_grad=True)
                Ja = torch.autograd.functional.jacobian(
                    lambda v: torch.nn.functional.layer_norm(v, (d,), torch.tensor(g), None, eps), xt).numpy()
                # relative to the natural scale ‖γ‖∞/s (J itself is 0 for d = 2, eps = 0)
                worst = nanmax(worst, float(np.abs(J - Ja).max() / ln_norm_bound(x, g, eps)))
                n += 1
    ok = worst < 1e-12
    return verdict(ok, f"{n} float64 instances, d ≤ 384",
                   f"{n} instances: max |closed − autograd| / (‖γ‖∞/s) ≤ 1e{math.ceil(math.log10(max(worst, 1e-300)))} "
                   "(< 1e-12 required)",
                   instances=n, worst_rel=worst)
