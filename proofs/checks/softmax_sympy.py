"""Symbolic checks (sympy) of C1 and of the quadratic-form step of C2."""
from __future__ import annotations

import sympy as sp

from numerics.signs import sign_tuples

from ..registry import check
from ._util import refuted, verdict


def _softmax_jacobian_residual(L: int, wrong: bool = False) -> sp.Matrix:
    """Symbolic J(u) − C(p)/τ for softmax(u/τ); zero iff C1 holds at this L."""
    u = sp.symbols(f"u0:{L}", real=True)
    tau = sp.symbols("tau", positive=True)
    e = [sp.exp(ui / tau) for ui in u]
    Z = sum(e)
    p = [ei / Z for ei in e]
    J = sp.Matrix(L, L, lambda i, j: sp.diff(p[i], u[j]))
    # C1: C(p) = diag(p) − p pᵀ.  The wrong variant drops the rank-one term.
    C = sp.Matrix(L, L, lambda i, j: (p[i] if i == j else 0) - (0 if wrong else p[i] * p[j]))
    return (J - C / tau).applyfunc(sp.simplify)


@check("C1", "sympy", scope="L = 1…4, symbolic u and τ > 0")
def c1_symbolic(tier):
    Ls = range(1, 5)
    bad = [L for L in Ls if not _softmax_jacobian_residual(L).is_zero_matrix]
    return verdict(not bad, "L = 1…4", f"∂softmax(u/τ)/∂u − C(p)/τ simplifies to 0 for L = 1…4; "
                   f"failures: {bad or 'none'}", failures=bad)


@check("C1", "sympy", negative_control=True, guards=("c1_symbolic",), scope="L = 2, 3: the wrong Jacobian diag(p)/τ")
def c1_symbolic_negative(tier):
    refuted_at = [L for L in (2, 3) if not _softmax_jacobian_residual(L, wrong=True).is_zero_matrix]
    return refuted(refuted_at == [2, 3], "L = 2, 3", "diag(p)/τ differs from the Jacobian at L = 2 and 3"
                   if refuted_at == [2, 3] else "", refuted_at=refuted_at)


def _quadratic_residuals(L: int, normalised: bool):
    """xᵀC(q)x − 4q(S)(1 − q(S)) for every S, x = 1_S − 1_Sᶜ, with q on the simplex or free."""
    q = list(sp.symbols(f"q0:{L}", positive=True))
    if normalised:
        q[-1] = 1 - sum(q[:-1])
    C = sp.Matrix(L, L, lambda i, j: (q[i] if i == j else 0) - q[i] * q[j])
    out = []
    for signs in sign_tuples(L):
        x = sp.Matrix(signs)                             # x_0 = +1: S and Sᶜ give the same form
        a = sum(q[i] for i in range(L) if x[i] == 1)
        out.append(sp.expand((x.T * C * x)[0, 0] - 4 * a * (1 - a)))
    return out, q, C


@check("C2", "sympy", scope="L = 2…5, every subset S, symbolic p on the simplex; unnormalised form")
def c2_quadratic_identity(tier):
    bad = []
    general_bad = []
    for L in range(2, 6):
        res, _, _ = _quadratic_residuals(L, normalised=True)
        if any(r != 0 for r in res):
            bad.append(L)
        # Without Σq = 1 the form is Σq − (ε·q)² (C2, step iii).
        q = sp.symbols(f"q0:{L}", positive=True)
        C = sp.Matrix(L, L, lambda i, j: (q[i] if i == j else 0) - q[i] * q[j])
        for signs in sign_tuples(L):
            x = sp.Matrix(signs)
            eq = sum(x[i] * q[i] for i in range(L))
            if sp.expand((x.T * C * x)[0, 0] - (sum(q) - eq ** 2)) != 0:
                general_bad.append(L)
    ok = not bad and not general_bad
    return verdict(ok, "L = 2…5",
                   "for x = 1_S − 1_Sᶜ, xᵀC(p)x = 4p(S)(1 − p(S)) on the simplex and Σq − (x·q)² off it, "
                   f"for every S and L = 2…5; failures: {sorted(set(bad + general_bad)) or 'none'}")


@check("C2", "sympy", negative_control=True, guards=("c2_quadratic_identity",),
       scope="L = 3: the simplex identity used for an unnormalised q (must not hold)")
def c2_quadratic_identity_negative(tier):
    res, _, _ = _quadratic_residuals(3, normalised=False)
    nonzero = sum(r != 0 for r in res)
    return refuted(nonzero > 0, "L = 3", f"{nonzero} of {len(res)} subsets break the identity without Σq = 1")


@check("C2", "sympy", scope="L = 2…5: C(p) is positive semidefinite on the simplex (step ii)")
def c2_psd(tier):
    # C(p) = Σ_i p_i (e_i − p)(e_i − p)ᵀ when Σp = 1: a sum of PSD rank-one terms, checked symbolically.
    bad = []
    for L in range(2, 6):
        p = list(sp.symbols(f"p0:{L}", positive=True))
        p[-1] = 1 - sum(p[:-1])
        C = sp.Matrix(L, L, lambda i, j: (p[i] if i == j else 0) - p[i] * p[j])
        S = sp.zeros(L, L)
        for i in range(L):
            v = sp.Matrix([(1 if k == i else 0) - p[k] for k in range(L)])
            S += p[i] * v * v.T
        if not (C - S).applyfunc(sp.expand).is_zero_matrix:
            bad.append(L)
    return verdict(not bad, "L = 2…5", "C(p) = Σ_i p_i (e_i − p)(e_i − p)ᵀ symbolically, hence PSD; "
                   f"failures: {bad or 'none'}")
