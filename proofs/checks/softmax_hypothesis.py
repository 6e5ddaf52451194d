"""Property-based checks (hypothesis, derandomised so the dashboard is stable).

A falsifying example raises inside the property; the registry turns that
into a failing check with the example in its detail.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numerics.softmax import inf_to_one_norm_float64, jacobian_float64, softmax_float64
from numerics.theta import theta_exact, theta_float64_bruteforce, theta_of_mask, to_fractions

from ..registry import check
from ._util import verdict

_logit = st.floats(-30, 30, allow_nan=False, allow_infinity=False)


def _run(prop, examples: int) -> int:
    settings(max_examples=examples, derandomize=True, database=None, deadline=None,
             suppress_health_check=list(HealthCheck))(prop)()
    return examples


@check("C2", "hypothesis", scope="float64, L = 1…10, logits in [−30, 30], τ ∈ [0.1, 10]")
def c2_hypothesis(tier):
    @given(st.lists(_logit, min_size=1, max_size=10), st.floats(0.1, 10.0))
    def prop(u, tau):
        u = np.array(u)
        p = softmax_float64(u, tau)
        norm = inf_to_one_norm_float64(jacobian_float64(u, tau)) if len(u) > 1 else 0.0
        th = theta_float64_bruteforce(p)
        # Error: a few ulps per entry of J and per subset sum, accumulated over ≤ 2^9 terms.
        assert abs(norm - th / tau) <= 1e-12 * (1 + th / tau), (list(u), tau, norm, th / tau)

    n = _run(prop, 1000 if tier == "full" else 200)
    return verdict(True, f"{n} examples", f"‖J_τ‖∞→1 = θ/τ to 1e-12 on {n} generated rows")


_weights = st.lists(st.integers(0, 2**20), min_size=2, max_size=14).filter(lambda w: sum(w) > 0)


@check("C6", "hypothesis", scope="exact θ of integer rows L ≤ 14, zero atoms at random positions")
def c6_zero_atoms_hypothesis(tier):
    @given(_weights, st.lists(st.integers(0, 20), max_size=4))
    def prop(w, positions):
        base = theta_exact(w).theta
        padded = list(w)
        for pos in positions:
            padded.insert(pos % (len(padded) + 1), 0)
        assert theta_exact(padded).theta == base

    n = _run(prop, 300 if tier == "full" else 80)
    return verdict(True, f"{n} examples", f"θ unchanged by inserted zero atoms on {n} generated rows")


@check("C6", "hypothesis", scope="exact θ, pairs of rational rows L ≤ 12: |θ(p) − θ(q)| ≤ 2‖p − q‖₁")
def c6_lipschitz_hypothesis(tier):
    @given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=2, max_size=12))
    def prop(pairs):
        a = [x for x, _ in pairs]
        b = [y for _, y in pairs]
        if sum(a) == 0 or sum(b) == 0:
            return
        p = [Fraction(x, sum(a)) for x in a]
        q = [Fraction(y, sum(b)) for y in b]
        dist = sum(abs(x - y) for x, y in zip(p, q))
        assert abs(theta_exact(p).theta - theta_exact(q).theta) <= 2 * dist

    n = _run(prop, 300 if tier == "full" else 80)
    return verdict(True, f"{n} examples", f"2-Lipschitz in ℓ1 held exactly on {n} generated pairs")


@check("C7", "hypothesis", scope="float32 rows L ≤ 16 (exact dyadic values), random subsets")
def c7_hypothesis(tier):
    @given(st.lists(st.floats(0, 1, width=32, allow_nan=False), min_size=2, max_size=16),
           st.integers(0, 2**16 - 1))
    def prop(row, mask):
        row = np.array(row, dtype=np.float32)
        if row.sum() == 0:
            return
        mask &= (1 << len(row)) - 1
        res = theta_exact(row)
        assert theta_of_mask(row, mask) <= res.theta          # any subset is a lower bound
        assert theta_of_mask(row, res.mask) == res.theta      # the witness replays exactly
        fr = to_fractions(row)
        a = sum(fr[i] for i in range(len(fr)) if mask >> i & 1)
        t = sum(fr)
        assert theta_of_mask(row, mask) == 4 * a * (t - a) / (t * t)

    n = _run(prop, 400 if tier == "full" else 100)
    return verdict(True, f"{n} examples", f"subset certificates are lower bounds and witnesses replay on {n} rows")
