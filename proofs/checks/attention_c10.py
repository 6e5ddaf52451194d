"""C10: on D_R multi-head attention is Lipschitz in ‖·‖_B with a constant independent of L.

Projected ascent (Adam, float64) on ‖f(X) − f(Y)‖_B/‖X − Y‖_B with both X and Y
projected back into D_R after every step, for L from 2 to 512.  A ratio found is
a true lower bound on the Lipschitz constant, so a ratio above the bound would
refute C10; its absence is evidence.  Negative control: the same search without
the projection (and with R growing) must exceed the bound computed for R = 1,
since dot-product attention is not globally Lipschitz.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from numerics.attention import MHAWeights, mha_forward
from numerics.attention_bounds import c10_bound

from ..registry import check
from ._util import nanmax, refuted, verdict


def _weights(seed: int, d: int = 4, H: int = 2, dk: int = 2, causal: bool = False) -> MHAWeights:
    rng = np.random.default_rng(seed)
    def g(*sh):
        return rng.standard_normal(sh) / math.sqrt(sh[-2])

    return MHAWeights(g(H, d, dk) * 1.5, g(H, d, dk) * 1.5, g(H, d, dk), g(H * dk, d), tau=math.sqrt(dk),
                      causal=causal, name=f"seed {seed}")


def _bnorm(Z: torch.Tensor) -> torch.Tensor:
    return Z.pow(2).sum(dim=1).sqrt().max() / math.sqrt(Z.shape[1])


def _project(Z: torch.Tensor, R: float | None) -> None:
    if R is None:
        return
    rms = Z.pow(2).mean(dim=1, keepdim=True).sqrt()
    Z.mul_(torch.clamp(R / rms.clamp_min(1e-300), max=1.0))


def lipschitz_search(w: MHAWeights, L: int, R: float | None, steps: int, seed: int,
                     start_R: float = 1.0, forward=None) -> tuple[float, int]:
    """Best ratio ‖f(X)−f(Y)‖_B/‖X−Y‖_B found by Adam ascent (projected onto D_R unless
    R is None).  ``forward(Z, t)``: the map f given w's torch tensors t (default: C10's MHA;
    X3 passes the rotary one).  Returns (ratio, evaluations)."""
    gen = torch.Generator().manual_seed(seed)
    t = w.torch()
    if forward is None:
        f = lambda Z: mha_forward(Z, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, causal=w.causal)  # noqa: E731
    else:
        f = lambda Z: forward(Z, t)  # noqa: E731
    X = torch.randn(L, w.d, generator=gen, dtype=torch.float64)
    X = X / X.pow(2).mean(dim=1, keepdim=True).sqrt() * start_R * (0.5 + 0.5 * torch.rand(L, 1, generator=gen, dtype=torch.float64))
    Y = X + 1e-2 * start_R * torch.randn(L, w.d, generator=gen, dtype=torch.float64)
    _project(Y, R)
    X.requires_grad_(True)
    Y.requires_grad_(True)
    opt = torch.optim.Adam([X, Y], lr=0.03 * start_R)
    best, n = 0.0, 0
    for _ in range(steps):
        opt.zero_grad()
        ratio = _bnorm(f(X) - f(Y)) / _bnorm(X - Y)
        n += 1
        if not torch.isfinite(ratio):  # a collapsed search measures nothing: fail, never skip
            raise FloatingPointError(f"non-finite ratio {float(ratio)} at evaluation {n} (L = {L})")
        best = max(best, float(ratio.detach()))
        (-ratio).backward()
        opt.step()
        with torch.no_grad():
            _project(X, R)
            _project(Y, R)
    with torch.no_grad():  # the last iterate, after projection
        r = float(_bnorm(f(X) - f(Y)) / _bnorm(X - Y))
        if not math.isfinite(r):
            raise FloatingPointError(f"non-finite ratio {r} at the last iterate (L = {L})")
        best = max(best, r)
    return best, n + 1


def _lengths(tier):
    return [2, 4, 8, 16, 32, 64] if tier == "quick" else [2, 4, 8, 16, 32, 64, 128, 256, 512]


@check("C10", "float64", scope="projected Adam ascent in D_1, L = 2…64 (full: 2…512, more restarts and weights)")
def c10_projected_ascent(tier):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        R = 1.0
        seeds = [11, 12] if tier == "quick" else [11, 12, 13, 14]
        restarts = 3 if tier == "quick" else 8
        steps = 100 if tier == "quick" else 300
        per_L, n, viol, worst = {}, 0, 0, 0.0
        for s in seeds:
            w = _weights(s, causal=(s % 2 == 0))
            bound = c10_bound(w, R)
            for L in _lengths(tier):
                for k in range(restarts):
                    r, m = lipschitz_search(w, L, R, steps, seed=1000 * s + 10 * L + k)
                    n += m
                    q = r / bound
                    viol += q > 1
                    worst = nanmax(worst, q)
                    per_L[L] = max(per_L.get(L, 0.0), q)
        small = max(v for L, v in per_L.items() if L <= 8)
        large = max(v for L, v in per_L.items() if L >= 32)
        ok = viol == 0 and n > 0 and math.isfinite(worst)
        return verdict(ok, f"{n} evaluations, {len(seeds)} weight draws",
                       f"{n} ascent evaluations in D_1, {viol} violations; worst ratio found/bound {worst:.3f}; "
                       "by L: " + ", ".join(f"{L}: {v:.3f}" for L, v in sorted(per_L.items()))
                       + f" (max over L ≥ 32 is {large / small:.2f}× the max over L ≤ 8)",
                       evaluations=n, violations=viol, worst_ratio=round(worst, 4),
                       worst_by_L={str(L): round(v, 4) for L, v in sorted(per_L.items())})
    finally:
        torch.set_num_threads(old)


@check("C10", "float64", scope="same ascent with inputs of growing size (R = 1, 4, 16) and unprojected",
       negative_control=True, guards=("c10_projected_ascent",))
def c10_unbounded_refuted(tier):
    """The wrong statement: the C10 constant for R = 1 bounds the Lipschitz constant everywhere."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        w = _weights(11)
        b1 = c10_bound(w, 1.0)
        steps = 150 if tier == "quick" else 300
        restarts = 6 if tier == "quick" else 16
        L, n, ladder = 16, 0, []
        for R in (1.0, 4.0, 16.0):
            best = 0.0
            for k in range(restarts):
                r, m = lipschitz_search(w, L, R, steps, seed=100 + k, start_R=R)
                n += m
                best = max(best, r)
            ladder.append(best / b1)
        free, m = lipschitz_search(w, L, None, steps, seed=100, start_R=4.0)
        n += m
        grows = ladder[0] < ladder[1] < ladder[2]
        return refuted(grows and ladder[2] > 1, f"{n} evaluations, L = {L}",
                       f"best ratio / bound(R=1) with inputs in D_R, R = 1, 4, 16: "
                       f"{', '.join(f'{v:.2f}' for v in ladder)} (grows with R: no global constant); "
                       f"unprojected ascent from R = 4: {free / b1:.2f}",
                       evaluations=n, ladder=[round(v, 3) for v in ladder], unprojected=round(free / b1, 3))
    finally:
        torch.set_num_threads(old)
