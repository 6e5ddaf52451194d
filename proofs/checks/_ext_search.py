"""Shared instances and searches for X2–X5 (MHA with rotary maps, score biases, soft-capping).

An instance is (X, weights, mods) with mods the keyword arguments of
numerics.attention.mha_jacobian_ext (rope, score_bias, cap).  The "true" norm is
numerics.norms.bb_norm: exact for d = 1 (vertex enumeration), an ascent LOWER
bound otherwise, so a ratio true/bound above 1 is a real violation and its
absence is evidence only (as in C9's checks).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from numerics.attention import MHAWeights, Rotary, mha_jacobian_ext
from numerics.norms import bb_norm


@dataclass(frozen=True)
class Family:
    """Shape of a searched instance: L tokens, H heads, width d, head width dk (d_v = 1)."""
    L: int
    H: int
    d: int
    dk: int
    rope: bool = False
    bias: bool = False          # query/key biases b_q, b_k
    cap: bool = False           # soft-capping with a searched constant c > 0
    score_bias: bool = False    # a free (L, L) additive score bias
    causal: bool = False

    def n_params(self) -> int:
        L, H, d, dk = self.L, self.H, self.d, self.dk
        return (L * d + 2 * H * d * dk + H * d + H * d + (dk // 2 if self.rope else 0)
                + (2 * H * dk if self.bias else 0) + (1 if self.cap else 0) + (L * L if self.score_bias else 0))

    def unpack(self, v: np.ndarray):
        L, H, d, dk = self.L, self.H, self.d, self.dk
        i = 0

        def take(*shape):
            nonlocal i
            k = int(np.prod(shape))
            out = v[i:i + k].reshape(shape)
            i += k
            return out

        X = take(L, d)
        Wq, Wk, Wv, Wo = take(H, d, dk), take(H, d, dk), take(H, d, 1), take(H, d)
        mods = {}
        if self.rope:
            mods["rope"] = Rotary.from_inv_freq(np.exp(take(dk // 2)), L)
        bq = take(H, dk) if self.bias else None
        bk = take(H, dk) if self.bias else None
        if self.cap:
            mods["cap"] = 0.05 + abs(float(take(1)[0]))
        if self.score_bias:
            mods["score_bias"] = take(L, L) * 3.0
        return X, MHAWeights(Wq, Wk, Wv, Wo, tau=1.0, b_q=bq, b_k=bk, causal=self.causal), mods


def true_norm(X, w, mods, thorough: bool = False) -> tuple[float, bool]:
    J = mha_jacobian_ext(X, w, **mods)
    if thorough:
        return bb_norm(J, restarts=8, iters=80)
    return bb_norm(J, restarts=2, iters=30, rng=np.random.default_rng(0))


def nelder_mead(families, bound, seed: int, restarts: int, maxfev: int, start_scale=(0.5, 3.0),
                starts=()):
    """Maximise true/bound(X, w, mods) by Nelder–Mead over every parameter of each family.

    ``bound(X, w, mods) -> float``.  Each family gets ``restarts`` random starting points;
    ``starts`` adds (family, parameter vector) starting points, perturbed by seeded noise of
    2 % of each entry (plus 0.002).
    The best point of every run is re-evaluated with a thorough ascent.  Returns (best ratio,
    evaluations, best family); a NaN ratio is +inf.
    """
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    count = [0]
    best = (0.0, None)

    def objective(v, fam):
        if np.abs(v).max() > 30:
            return 0.0
        X, w, mods = fam.unpack(v)
        count[0] += 1
        b = bound(X, w, mods)
        return -true_norm(X, w, mods)[0] / b

    runs = [(fam, None) for fam in families for _ in range(restarts)] + list(starts)
    for fam, v0 in runs:
        if v0 is None:
            v0 = rng.standard_normal(fam.n_params()) * rng.uniform(*start_scale)
        else:
            v0 = np.asarray(v0, dtype=np.float64)
            v0 = v0 + 0.02 * (np.abs(v0) + 0.1) * rng.standard_normal(v0.size)
        res = minimize(objective, v0, args=(fam,), method="Nelder-Mead",
                       options=dict(maxfev=maxfev, xatol=1e-10, fatol=1e-12))
        X, w, mods = fam.unpack(res.x)
        r = true_norm(X, w, mods, thorough=True)[0] / bound(X, w, mods)
        if not r <= best[0]:
            best = (r if math.isfinite(r) else math.inf, fam)
    return best[0], count[0], best[1]


def fam_text(f: Family | None) -> str:
    if f is None:
        return "none"
    extra = [k for k in ("rope", "bias", "cap", "score_bias", "causal") if getattr(f, k)]
    return f"L={f.L}, H={f.H}, d={f.d}, d_k={f.dk}" + (f" ({', '.join(extra)})" if extra else "")
