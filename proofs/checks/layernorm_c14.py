"""C14: the LayerNorm projection lemma ‖J_LN‖₂ ≤ ‖γ‖_∞/√(σ² + eps), exactly and in float64.

Why it holds: J = diag(γ)P/s with P = Π − ccᵀ/(d s²) symmetric, eigenvalues 0 (on 1),
eps/s² (on c) and 1 (d − 2 times), so ‖P‖₂ ≤ 1.  Equality needs a v ≠ 0 with Pv = v
(v ⊥ 1, v ⊥ c) supported where |γ| is maximal.  That is the exact equality condition;
"γ constant and d ≥ 3" is sufficient, not necessary (found while writing these checks):
|γ| maximal at ≥ 3 coordinates, or at two coordinates i, j with x_i = x_j, also gives
equality.  The upper bound is certified by P's exact characteristic polynomial (symbolic
in x for small d, and at every instance point); equality additionally by exhibiting v
exactly; strict inequality by the exact Haynsworth eigenvalue count
(numerics.layernorm_spectral.count_eigs_above_exact).
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import sympy

from numerics.layernorm import ln_jacobian, ln_jacobian_exact
from numerics.layernorm_spectral import count_eigs_above_exact, ln_spectral_norm

from ..registry import check
from ._util import nanmax, refuted, verdict


def _centre(x):
    m = sum(x, Fraction(0)) / len(x)
    return [v - m for v in x]


def norm_vs_bound_exact(x, g, eps) -> str:
    """'equal' or 'strict' for ‖J_LN(x)‖₂ vs ‖γ‖_∞/s, each with an exact certificate; else 'undecided'."""
    x, g, eps = [Fraction(v) for v in x], [Fraction(v) for v in g], Fraction(eps)
    d = len(x)
    M, s2 = ln_jacobian_exact(x, g, eps)
    gmax = max(abs(v) for v in g)
    top = [i for i in range(d) if abs(g[i]) == gmax]
    c = _centre(x)
    A = sympy.Matrix([[1] * len(top), [sympy.Rational(c[i].numerator, c[i].denominator) for i in top]])
    for w in A.nullspace():
        v = sympy.zeros(d, 1)
        for k, i in enumerate(top):
            v[i] = w[k]
        G = sympy.diag(*[sympy.Rational(t.numerator, t.denominator) for t in g])
        if M * v == G * v:  # Pv = v, so ‖Jv‖ = ‖Γv‖/s = ‖γ‖∞‖v‖/s: the bound is attained
            return "equal"
    # strict: no eigenvalue of s²JJᵀ above some λ < ‖γ‖∞² (exact count)
    est = float(ln_spectral_norm(np.array([float(t) for t in x]), np.array([float(t) for t in g]), float(eps)))
    lam_est = Fraction(est) ** 2 * s2
    D = {t * t for t in g}
    for lam in [lam_est * (1 + Fraction(1, 10 ** k)) for k in (9, 6, 3)] + [(lam_est + gmax * gmax) / 2]:
        if lam < gmax * gmax and lam not in D and count_eigs_above_exact(x, g, eps, lam) == 0:
            return "strict"
    return "undecided"


def equality_instances(seed: int, per_d: int):
    """(x, γ, eps, label) with labels for the γ pattern; exact rationals, d = 2…6."""
    rng = random.Random(seed)
    out = []
    for d in range(2, 7):
        for eps in (Fraction(0), Fraction(1, 1000)):
            for _ in range(per_d):
                x = [Fraction(rng.randint(-9, 9), rng.randint(1, 3)) for _ in range(d)]
                if len(set(x)) == 1:
                    x[0] += 1
                out.append((x, [Fraction(3, 2)] * d, eps, "constant"))
                g = [Fraction(rng.randint(1, 9), 4) * rng.choice([-1, 1]) for _ in range(d)]
                g[rng.randrange(d)] = Fraction(11, 4)  # max attained once
                out.append((x, g, eps, "max once"))
                if d >= 3:
                    g2 = [Fraction(rng.randint(1, 9), 4) for _ in range(d)]
                    g2[0], g2[1] = Fraction(3), Fraction(-3)  # max twice; equal iff x_0 = x_1
                    out.append((x, g2, eps, "max twice"))
                    out.append(([x[1]] + x[1:], g2, eps, "max twice, x_0 = x_1"))
                if d >= 4:
                    g3 = [Fraction(rng.randint(1, 9), 4) for _ in range(d)]
                    g3[0] = g3[1] = g3[2] = Fraction(3)
                    out.append((x, g3, eps, "max thrice"))
    return out


def p_charpoly_symbolic(d: int) -> bool:
    """True iff P(x) = Π − ccᵀ/(d s²) is symmetric with charpoly λ(λ − eps/s²)(λ − 1)^(d−2)
    as an identity of rational functions in symbolic x_0…x_{d−1} and eps ≥ 0.  Exact (sympy).

    Computed on the polynomial matrix Q = N·P with N = d s² = Σc² + d·eps (a nonzero
    polynomial): χ_Q(μ) = N^d χ_P(μ/N), so the identity above is equivalent to
    χ_Q(μ) = μ(μ − d·eps)(μ − N)^(d−2), a polynomial identity (no rational-function gcds).
    """
    mu, e = sympy.Symbol("mu"), sympy.Symbol("eps", nonnegative=True)
    xs = sympy.symbols(f"x0:{d}", real=True)
    c = [d * v - sum(xs) for v in xs]            # d·c_i: keeps every entry a polynomial
    N = sympy.expand(sum(v * v for v in c) + d ** 3 * e)   # d²·(d s²) = d²·N
    # Q' = d²·N·P = d²N·Π − (d c)(d c)ᵀ; its eigenvalues are d² times those of Q.
    Q = sympy.Matrix(d, d, lambda i, j: sympy.expand(N * ((1 if i == j else 0) - sympy.Rational(1, d))
                                                     - c[i] * c[j]))
    want = mu * (mu - d ** 3 * e) * (mu - N) ** (d - 2)
    return Q == Q.T and sympy.expand(Q.charpoly(mu).as_expr() - want) == 0


def p_norm_at_most_one_exact(x, eps) -> bool:
    """Upper certificate at one point: P(x) symmetric, charpoly λ(λ − eps/s²)(λ − 1)^(d−2)
    and 0 ≤ eps/s² ≤ 1, all exact, hence ‖P‖₂ ≤ 1 and ‖J_LN‖₂ = ‖ΓP‖₂/s ≤ ‖γ‖∞/s."""
    d = len(x)
    P, s2 = ln_jacobian_exact(x, [1] * d, eps)
    lam = sympy.Symbol("lam")
    e = sympy.Rational(Fraction(eps).numerator, Fraction(eps).denominator)
    want = sympy.expand(lam * (lam - e / s2) * (lam - 1) ** (d - 2))
    return P == P.T and 0 <= e / s2 <= 1 and sympy.expand(P.charpoly(lam).as_expr() - want) == 0


@check("C14", "exact", scope="d = 2…6, eps ∈ {0, 1/1000}, γ constant / max once / twice / thrice")
def c14_bound_and_equality_exact(tier):
    per_d = 1 if tier == "quick" else 4
    counts: dict[str, dict[str, int]] = {}
    bad = []
    upper_ok: dict[tuple, bool] = {}
    for x, g, eps, label in equality_instances(14, per_d):
        key = (tuple(x), eps)
        if key not in upper_ok:  # P does not depend on γ: one exact charpoly per (x, eps)
            upper_ok[key] = p_norm_at_most_one_exact(x, eps)
        if not upper_ok[key]:
            bad.append(f"{label} d={len(x)}: exact charpoly of P(x) wrong, no upper certificate")
        r = norm_vs_bound_exact(x, g, eps)
        counts.setdefault(label, {}).setdefault(r, 0)
        counts[label][r] += 1
        if r == "undecided":
            bad.append(f"{label} d={len(x)}: undecided")
        if label == "constant" and len(x) >= 3 and r != "equal":
            bad.append(f"constant γ, d={len(x)}: not equal")
        if label == "max once" and r != "strict":
            bad.append(f"max once d={len(x)}: equality")
        if label in ("max thrice", "max twice, x_0 = x_1") and r != "equal":
            bad.append(f"{label} d={len(x)}: not equal")
    # The bound for every x: the same charpoly as an identity in symbolic x and eps.
    d_sym = 5 if tier == "quick" else 6  # d = 6 costs ~12 s in sympy: full tier only
    for d in range(2, d_sym + 1):
        if not p_charpoly_symbolic(d):
            bad.append(f"symbolic charpoly of P wrong at d={d}")
    n = sum(sum(v.values()) for v in counts.values())
    summary = ", ".join(f"{k}: " + "/".join(f"{m} {r}" for r, m in sorted(v.items())) for k, v in counts.items())
    return verdict(not bad, f"d = 2…6, {n} exact instances", "; ".join(bad[:3]) or (
        f"P = Π − ccᵀ/(d s²) is symmetric with charpoly λ(λ − eps/s²)(λ − 1)^(d−2) as a rational-function "
        f"identity in symbolic x and eps ≥ 0 for d = 2…{d_sym} (so ‖P‖₂ ≤ 1 and the bound holds there for all x), "
        f"and exactly at each of the {len(upper_ok)} instance points x (d = 2…6) with 0 ≤ eps/s² ≤ 1: "
        f"upper certificate ‖J_LN‖₂ ≤ ‖γ‖∞/s on all {n} instances. "
        f"'equal' = that upper certificate plus an exact v ≠ 0 with ‖J_LN v‖ = ‖γ‖∞‖v‖/s; "
        f"'strict' = exact Haynsworth count: no eigenvalue of s²JJᵀ above a rational λ < ‖γ‖∞² "
        f"({summary}). Equality iff some v ≠ 0 supported on argmax|γ| is ⊥ 1 and ⊥ c: "
        "'γ constant, d ≥ 3' is sufficient, not necessary"),
        instances=n, instance_points=len(upper_ok), symbolic_d_max=d_sym, counts=counts)


@check("C14", "exact", scope="d = 2…6: naive ‖J_LN‖₂ = max|γ|/σ", negative_control=True,
       guards=("c14_bound_and_equality_exact",))
def c14_naive_max_gamma_over_sigma_refuted(tier):
    # Wrong variant: equality with σ (eps dropped).  A = s²JJᵀ, so the naive value is
    # λ_max(A) = max|γ|²s²/σ².  eps > 0: λ_mid = (max|γ|² + max|γ|²s²/σ²)/2 lies strictly
    # between max γ_i² (so off every pole) and the naive value; 0 eigenvalues of A above
    # λ_mid (exact Haynsworth count) gives ‖J‖₂ < max|γ|/σ.  eps = 0, |γ| maximal once:
    # s = σ and the exact strict certificate ‖J‖₂ < ‖γ‖∞/s.
    n_eps, n_zero, ref_eps, ref_zero = 0, 0, 0, 0
    for x, g, eps, label in equality_instances(15, 1):
        if label != "max once" and eps == 0:
            continue
        if eps > 0:
            n_eps += 1
            c = _centre([Fraction(v) for v in x])
            sigma2 = sum((t * t for t in c), Fraction(0)) / len(c)
            gmax2 = max(Fraction(v) ** 2 for v in g)
            lam_naive = gmax2 * (sigma2 + eps) / sigma2
            lam_mid = (gmax2 + lam_naive) / 2
            assert gmax2 < lam_mid < lam_naive  # σ² > 0 (x non-constant) and eps > 0
            ref_eps += count_eigs_above_exact(x, g, eps, lam_mid) == 0
        else:
            n_zero += 1
            ref_zero += norm_vs_bound_exact(x, g, eps) == "strict"
    n, n_ref = n_eps + n_zero, ref_eps + ref_zero
    ok = n_ref == n and n_eps > 0 and n_zero > 0
    return refuted(ok, f"d = 2…6, {n} exact instances",
                   f"‖J_LN‖₂ = max|γ|/σ refuted on {n_ref} of {n} exact instances: eps = 1/1000 ({ref_eps} of "
                   f"{n_eps}, all γ patterns) by the exact Haynsworth count, 0 eigenvalues of s²JJᵀ above "
                   f"λ = (max|γ|² + max|γ|²s²/σ²)/2 < max|γ|²s²/σ², so ‖J_LN‖₂ < max|γ|/σ; eps = 0 with |γ| "
                   f"maximal once ({ref_zero} of {n_zero}) by the exact strict certificate ‖J_LN‖₂ < ‖γ‖∞/σ"
                   if ok else "", refuted=n_ref, instances=n, refuted_eps_pos=ref_eps, refuted_eps_zero=ref_zero)


@check("C14", "exact", scope="γ = (2, 2, 2, 1): 'equality only when γ is constant'", negative_control=True,
       guards=("c14_bound_and_equality_exact",))
def c14_equality_only_if_constant_refuted(tier):
    # Wrong variant (the registered wording read as 'only if'): a non-constant γ whose
    # maximum is attained three times reaches the bound exactly.
    r = norm_vs_bound_exact([1, -2, 5, 0], [2, 2, 2, 1], Fraction(1, 1000))
    return refuted(r == "equal", "d = 4, eps = 1/1000",
                   "γ = (2, 2, 2, 1), x = (1, −2, 5, 0): ‖J_LN‖₂ = ‖γ‖∞/s exactly, γ not constant"
                   if r == "equal" else "", result=r)


@check("C14", "float64", scope="d ≤ 384, eps ∈ {0, 1e-12, 1e-5}; products of N ≤ 6 factors")
def c14_bound_and_product_float64(tier):
    rng = np.random.default_rng(14)
    reps = 20 if tier == "quick" else 200
    worst, n = 0.0, 0
    for _ in range(reps):
        d = int(rng.choice([2, 3, 5, 16, 64, 384]))
        eps = float(rng.choice([0.0, 1e-12, 1e-5]))
        x = rng.standard_normal(d) * 10.0 ** rng.uniform(-3, 3)
        g = rng.standard_t(2, size=d)  # heavy tails: a few large |γ_i|
        nrm = np.linalg.norm(ln_jacobian(x, g, eps), 2)
        worst = nanmax(worst, nrm * np.sqrt(np.var(x) + eps) / np.max(np.abs(g)))
        n += 1
    # corollary: s_l ≥ c‖γ_l‖∞ at each of N layers ⇒ ‖Π_l J_LN(z_l)‖₂ ≤ c^(−N)
    worst_prod = 0.0
    for _ in range(reps):
        d, N, cc = int(rng.choice([3, 16, 64])), int(rng.integers(1, 7)), float(rng.choice([1.01, 1.5, 3.0]))
        P = np.eye(d)
        for _ in range(N):
            g = rng.standard_normal(d)
            z = rng.standard_normal(d)
            z *= cc * np.max(np.abs(g)) / np.std(z) * (1 + rng.uniform(0, 0.5))
            P = ln_jacobian(z, g, 1e-5) @ P
        worst_prod = nanmax(worst_prod, np.linalg.norm(P, 2) * cc ** N)
    ok = bool(worst <= 1 + 1e-12 and worst_prod <= 1 + 1e-12)
    return verdict(ok, f"{n} single + {reps} product float64 instances",
                   f"max ‖J‖·s/‖γ‖∞ = {worst:.4f}, max ‖ΠJ‖·c^N = {worst_prod:.4f} (both ≤ 1 + 1e-12 required)",
                   worst_ratio=worst, worst_product_ratio=worst_prod)
