"""C9: the θ-aware local MHA Jacobian bound, attacked with float64 autograd Jacobians.

True ‖J(X)‖_{B→B}: exact for d = 1 (vertex enumeration), a LOWER bound for d > 1
(alternating ascent) — so a violation found is real, while the absence of one is
evidence only.  The bound attacked is the tightest form we have (centred, with the
certified θ_hi); the paper form is never smaller, so it is covered too.  The
negative control runs the same search against θ/4 and must break it.
"""
from __future__ import annotations

import math

import numpy as np

from numerics.attention import MHAWeights, mha_jacobian
from numerics.attention_bounds import c9_bound
from numerics.norms import bb_norm

from ..registry import check
from ._util import refuted, verdict


def random_instance(rng, d: int | None = None, L: int | None = None) -> tuple[np.ndarray, MHAWeights]:
    """A random MHA instance with L ≤ 12, d ≤ 16, H ≤ 4; weight and input scales spread over
    two decades so rows range from uniform to saturated; biases and causal masks sometimes."""
    L = int(rng.integers(2, 13)) if L is None else L
    d = int(rng.choice([1, 1, 2, 3, 4, 8, 16])) if d is None else d
    H = int(rng.integers(1, 5))
    dk, dv = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    s = np.exp(rng.uniform(-1.5, 1.5, 5))

    def g(*shape, scale=1.0):
        return rng.standard_normal(shape) * scale / np.sqrt(shape[-2])

    bias = rng.random() < 0.3
    b = (lambda *sh: rng.standard_normal(sh)) if bias else (lambda *sh: None)
    w = MHAWeights(g(H, d, dk, scale=s[0]), g(H, d, dk, scale=s[1]), g(H, d, dv, scale=s[2]),
                   g(H * dv, d, scale=s[3]), tau=float(np.sqrt(dk)), b_q=b(H, dk), b_k=b(H, dk),
                   b_v=b(H, dv), b_o=b(d), causal=bool(rng.random() < 0.3))
    X = rng.standard_normal((L, d)) * s[4]
    return X, w


def _ratios(X, w, rng):
    J = mha_jacobian(X, w)
    true, exact = bb_norm(J, restarts=4, iters=40, rng=rng)
    cen = c9_bound(X, w)
    pap = c9_bound(X, w, form="paper")
    return true, exact, true / cen.bound, true / pap.bound


@check("C9", "float64", scope="random instances L ≤ 12, d ≤ 16, H ≤ 4 (quick: 60; full: 2500)")
def c9_random_instances(tier):
    rng = np.random.default_rng(20260218)
    n = 60 if tier == "quick" else 2500
    r_cen, r_pap, n_exact, viol = [], [], 0, 0
    for _ in range(n):
        X, w = random_instance(rng)
        true, exact, rc, rp = _ratios(X, w, rng)
        n_exact += exact
        viol += (rc > 1) + (rp > 1)
        r_cen.append(rc)
        r_pap.append(rp)
    q = np.quantile(r_cen, [0.5, 0.9, 0.99, 1.0])
    ok = viol == 0 and n > 0 and bool(np.isfinite(r_cen).all()) and bool(np.isfinite(r_pap).all())
    return verdict(ok, f"{n} random instances ({n_exact} exact, d = 1)",
                   f"{n} instances ({n_exact} with the exact norm, {n - n_exact} with an ascent lower bound), "
                   f"{viol} violations; ratio true/bound (centred form): median {q[0]:.3f}, p90 {q[1]:.3f}, "
                   f"p99 {q[2]:.3f}, max {q[3]:.6f}; paper form max {max(r_pap):.6f}",
                   instances=n, exact_instances=n_exact, violations=viol,
                   ratio_quantiles_centred=[round(float(x), 4) for x in q],
                   ratio_max_paper=round(float(max(r_pap)), 4))


# ----------------------------------------------------------------------------- adversarial search

def _unpack(v, L, H, d, bias):
    """Parameter vector → (X, weights) with d_k = d_v = 1 (d = 1: the exact norm is available)."""
    i = 0

    def take(*shape):
        nonlocal i
        k = int(np.prod(shape))
        out = v[i:i + k].reshape(shape)
        i += k
        return out

    X = take(L, d)
    Wq, Wk, Wv = take(H, d, 1), take(H, d, 1), take(H, d, 1)
    Wo = take(H, d)
    bq = take(H, 1) if bias else None
    bk = take(H, 1) if bias else None
    return X, MHAWeights(Wq, Wk, Wv, Wo, tau=1.0, b_q=bq, b_k=bk)


def _n_params(L, H, d, bias):
    return L * d + 4 * H * d + (2 * H if bias else 0)


def adversarial_search(tier: str, theta_scale: float, seed: int):
    """Nelder–Mead on the ratio ‖J‖/bound over X and all weights (d = 1: exact ‖J‖;
    d = 2: ascent lower bound).  Returns (best ratio, instances evaluated, best config)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    configs = [(L, H, d, bias) for L in (2, 3, 4, 6) for H in (1, 2) for d in (1, 2) for bias in (False, True)]
    restarts = 1 if tier == "quick" else 2
    maxfev = 120 if tier == "quick" else 300
    if tier == "quick":
        configs = [(2, 1, 1, False), (3, 2, 1, True), (4, 1, 1, False), (2, 1, 2, False)]
    count = [0]
    best = (0.0, None)

    def objective(v, cfg):
        L, H, d, bias = cfg
        X, w = _unpack(v, L, H, d, bias)
        if np.abs(v).max() > 50:
            return 0.0
        J = mha_jacobian(X, w)
        true = bb_norm(J, restarts=2, iters=30, rng=np.random.default_rng(0))[0]
        b = c9_bound(X, w, theta="stored", theta_scale=theta_scale).bound
        count[0] += 1
        return -true / b

    for cfg in configs:
        for _ in range(restarts):
            v0 = rng.standard_normal(_n_params(*cfg)) * rng.uniform(0.5, 3)
            res = minimize(objective, v0, args=(cfg,), method="Nelder-Mead",
                           options=dict(maxfev=maxfev, xatol=1e-10, fatol=1e-12))
            # Re-evaluate the best point with the certified θ_hi and a thorough ascent.
            L, H, d, bias = cfg
            X, w = _unpack(res.x, L, H, d, bias)
            true = bb_norm(mha_jacobian(X, w), restarts=8, iters=80)[0]
            r = true / c9_bound(X, w, theta="certified", theta_scale=theta_scale).bound
            if not r <= best[0]:  # a NaN ratio becomes +inf: it fails the positive check
                best = (r if math.isfinite(r) else math.inf, cfg)
    return best[0], count[0], best[1]


@check("C9", "float64", scope="Nelder–Mead over X and weights, L ≤ 6, H ≤ 2, d ≤ 2 (d_k = d_v = 1)")
def c9_adversarial(tier):
    r, n, cfg = adversarial_search(tier, 1.0, seed=7)
    return verdict(r <= 1.0, f"{n} search evaluations",
                   f"Nelder–Mead over X and all weights: {n} evaluations, best ratio true/bound "
                   f"{r:.9f} (at L, H, d, bias = {cfg}); no violation" if r <= 1 else
                   f"VIOLATION: ratio {r:.9f} at L, H, d, bias = {cfg}",
                   evaluations=n, best_ratio=round(r, 9), best_config=list(cfg) if cfg else None)


@check("C9", "float64", scope="same search against the bound with θ replaced by θ/4", negative_control=True,
       guards=("c9_adversarial",))
def c9_theta_quarter_refuted(tier):
    r, n, cfg = adversarial_search("quick", 0.25, seed=7)  # the quick budget already refutes it
    return refuted(math.isfinite(r) and r > 1.0, f"{n} search evaluations",
                   f"bound with θ/4: best ratio true/bound {r:.4f} after {n} evaluations "
                   f"(at L, H, d, bias = {cfg}); " + ("refuted" if r > 1 else "NOT refuted"),
                   evaluations=n, best_ratio=round(r, 4))
