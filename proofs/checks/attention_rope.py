"""X2, X3 (beyond the paper): C9 and C10 for rotary position embeddings.

X2: the local bound with the per-pair score gradients u_ij = W_Q M_iᵀ k_j and
g_ij = W_K M_jᵀ q_i (numerics.attention_bounds.c9_ext_bound), attacked like C9:
random instances (exact norm for d = 1 by vertex enumeration, ascent otherwise),
Nelder–Mead over X, all weights and the rotary frequencies, and a negative control
that keeps θ of the rotary rows but drops the rotation from a_i (C9's plain a_i
with W_Q W_Kᵀ), which the same search must break.

X3: the length-independent constant with ‖W_Q‖₂‖W_K‖₂ (c10_rope_bound), attacked
like C10 by projected Adam ascent in D_R for growing L; its negative control is
the plain C10 constant (‖W_Q W_Kᵀ‖₂), broken by the same ascent on weights whose
unrotated bilinear form vanishes.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from numerics.attention import MHAWeights, Rotary, mha_forward_ext, mha_jacobian_ext
from numerics.attention_bounds import c9_bound, c9_ext_bound, c10_bound, c10_rope_bound, ext_scores, theta_hi_rows
from numerics.norms import bb_norm

from ..registry import check
from ._ext_search import Family, fam_text, nelder_mead
from ._util import nanmax, refuted, verdict
from .attention_c10 import lipschitz_search


def random_rope_instance(rng, d: int | None = None, L: int | None = None):
    """A random rotary MHA instance: L ≤ 10, d ≤ 8, H ≤ 3, d_k ∈ {2, 4, 6}, frequencies either
    transformers' default (base 10000) or random, either pairing, a random position offset;
    weight and input scales over two decades; q/k/v biases and a causal mask sometimes."""
    L = int(rng.integers(2, 11)) if L is None else L
    d = int(rng.choice([1, 1, 2, 3, 4, 8])) if d is None else d
    H = int(rng.integers(1, 4))
    dk = int(rng.choice([2, 4, 6]))
    s = np.exp(rng.uniform(-1.5, 1.5, 5))
    g = lambda *sh, scale=1.0: rng.standard_normal(sh) * scale / np.sqrt(sh[-2])  # noqa: E731
    bias = rng.random() < 0.3
    b = (lambda *sh: rng.standard_normal(sh)) if bias else (lambda *sh: None)  # noqa: E731
    w = MHAWeights(g(H, d, dk, scale=s[0]), g(H, d, dk, scale=s[1]), g(H, d, 2, scale=s[2]),
                   g(H * 2, d, scale=s[3]), tau=float(np.sqrt(dk)), b_q=b(H, dk), b_k=b(H, dk),
                   b_v=b(H, 2), b_o=b(d), causal=bool(rng.random() < 0.3))
    if rng.random() < 0.5:
        inv = 1.0 / 10000.0 ** (np.arange(0, dk, 2) / dk)
    else:
        inv = np.exp(rng.uniform(-4, 1.5, dk // 2))
    rope = Rotary.from_inv_freq(inv, L, offset=int(rng.integers(0, 5000)),
                                pairing=str(rng.choice(["half", "interleaved"])))
    return rng.standard_normal((L, d)) * s[4], w, rope


def _rotary_theta(X, w, rope):
    """θ_hi of every rotary row, (H, L)."""
    return np.stack([theta_hi_rows(*(lambda s: (s.Z, s.eZ))(ext_scores(X, w, h, rope=rope)))[0] for h in range(w.H)])


def plain_a_bound(X, w, mods):
    """The wrong bound of the negative control: θ of the rotary rows, a_i (and r) of plain C9."""
    return c9_bound(X, w, theta=_rotary_theta(X, w, mods["rope"])).bound


# ----------------------------------------------------------------------------- X2

@check("X2", "float64", scope="random rotary instances L ≤ 10, d ≤ 8, H ≤ 3, d_k ≤ 6, both pairings "
       "(quick: 40; full: 1500)")
def x2_random_instances(tier):
    rng = np.random.default_rng(20260219)
    n = 40 if tier == "quick" else 1500
    ratios, n_exact, viol, order = [], 0, 0, 0
    for _ in range(n):
        X, w, rope = random_rope_instance(rng)
        true, exact = bb_norm(mha_jacobian_ext(X, w, rope=rope), restarts=4, iters=40, rng=rng)
        cen = c9_ext_bound(X, w, rope=rope)
        pair = c9_ext_bound(X, w, rope=rope, form="pair")
        pap = c9_ext_bound(X, w, rope=rope, form="paper")
        n_exact += exact
        viol += (true > cen.bound) + (true > pap.bound)
        order += not (cen.bound <= pair.bound * (1 + 1e-12) and pair.bound <= pap.bound * (1 + 1e-12))
        ratios.append(true / cen.bound)
    q = np.quantile(ratios, [0.5, 0.9, 1.0])
    ok = viol == 0 and order == 0 and bool(np.isfinite(ratios).all())
    return verdict(ok, f"{n} rotary instances ({n_exact} exact, d = 1)",
                   f"{n} instances ({n_exact} exact), {viol} violations, {order} with centred > pair > paper "
                   f"out of order; ratio true/bound (centred): median {q[0]:.3f}, p90 {q[1]:.3f}, max {q[2]:.6f}",
                   instances=n, exact_instances=n_exact, violations=viol, out_of_order=order,
                   ratio_quantiles=[round(float(x), 4) for x in q])


def _x2_families(tier):
    if tier == "quick":
        return [Family(2, 1, 1, 2, rope=True), Family(3, 1, 1, 2, rope=True, bias=True),
                Family(4, 2, 1, 2, rope=True), Family(3, 1, 2, 2, rope=True)]
    return [Family(L, H, d, 2, rope=True, bias=b, causal=c) for L in (2, 3, 4, 6) for H in (1, 2)
            for d in (1, 2) for b in (False, True) for c in (False, True)]


def _x2_bound(X, w, mods):
    return c9_ext_bound(X, w, **mods).bound


@check("X2", "float64", scope="Nelder–Mead over X, weights and rotary frequencies, L ≤ 6, H ≤ 2, d ≤ 2, d_k = 2")
def x2_adversarial(tier):
    r, n, fam = nelder_mead(_x2_families(tier), _x2_bound, seed=29, restarts=1 if tier == "quick" else 2,
                            maxfev=120 if tier == "quick" else 300)
    return verdict(r <= 1.0, f"{n} search evaluations",
                   f"{n} evaluations, best ratio true/bound {r:.9f} at {fam_text(fam)}"
                   + ("; no violation" if r <= 1 else "; VIOLATION"),
                   evaluations=n, best_ratio=round(r, 9))


@check("X2", "float64", scope="same search (250 evaluations per start) against C9's a_i with the rotation "
       "dropped (θ of the rotary rows kept)", negative_control=True, guards=("x2_adversarial", "x2_random_instances"))
def x2_rotation_dropped_refuted(tier):
    r, n, fam = nelder_mead(_x2_families("quick"), plain_a_bound, seed=29, restarts=1, maxfev=250)
    return refuted(math.isfinite(r) and r > 1.0, f"{n} search evaluations",
                   f"C9's a_i without the rotation: best ratio true/bound {r:.4f} after {n} evaluations "
                   f"at {fam_text(fam)}; " + ("refuted" if r > 1 else "NOT refuted"),
                   evaluations=n, best_ratio=round(r, 4))


@check("X2", "float64", scope="rotary tables of both pairings (d_k ≤ 16, 64 positions): M_p orthogonal and "
       "M_iᵀM_j a function of j − i")
def x2_rotary_maps_are_relative_rotations(tier):
    rng = np.random.default_rng(5)
    worst_orth, worst_rel, n = 0.0, 0.0, 0
    for dk in (2, 4, 8, 16):
        for pairing in ("half", "interleaved"):
            inv = 1.0 / 10000.0 ** (np.arange(0, dk, 2) / dk) if dk != 4 else np.exp(rng.uniform(-3, 1, dk // 2))
            rope = Rotary.from_inv_freq(inv, 64, pairing=pairing)
            M = [rope.matrix(p) for p in range(64)]
            for p in range(64):
                worst_orth = nanmax(worst_orth, np.abs(M[p].T @ M[p] - np.eye(dk)).max())
            for _ in range(40):
                i, j, s = (int(t) for t in rng.integers(0, 64 - 8, 3))
                k = int(rng.integers(0, 8))      # (i, i+k) and (s, s+k): the same offset
                worst_rel = nanmax(worst_rel, np.abs(M[i].T @ M[i + k] - M[s].T @ M[s + k]).max())
                n += 1
            worst_orth = nanmax(worst_orth, abs(rope.gain() - 1.0))
    ok = worst_orth < 1e-13 and worst_rel < 1e-12
    return verdict(ok, f"{n} position pairs", f"max |MᵀM − I| and |gain − 1|: {worst_orth:.2e}; "
                   f"max |M_iᵀM_(i+k) − M_sᵀM_(s+k)|: {worst_rel:.2e}",
                   orthogonality_error=float(worst_orth), relative_error=float(worst_rel))


# ----------------------------------------------------------------------------- X3

def _rope_weights(seed: int, d: int = 4, H: int = 2, dk: int = 4, causal: bool = False) -> MHAWeights:
    rng = np.random.default_rng(seed)
    g = lambda *sh: rng.standard_normal(sh) / math.sqrt(sh[-2])  # noqa: E731
    return MHAWeights(g(H, d, dk) * 1.5, g(H, d, dk) * 1.5, g(H, d, dk), g(H * dk, d), tau=math.sqrt(dk),
                      causal=causal, name=f"seed {seed}")


def _inv_freq(dk: int) -> np.ndarray:
    return 1.0 / 100.0 ** (np.arange(0, dk, 2) / dk)     # a small base: every pair turns visibly


def rope_lipschitz_search(w: MHAWeights, L: int, R: float, steps: int, seed: int) -> tuple[float, int]:
    """Best ‖f(X) − f(Y)‖_B/‖X − Y‖_B by Adam ascent with X, Y projected onto D_R (C10's search
    with the rotary forward)."""
    rope = Rotary.from_inv_freq(_inv_freq(w.W_Q.shape[2]), L)

    def forward(Z, t):
        return mha_forward_ext(Z, t["W_Q"], t["W_K"], t["W_V"], t["W_O"], w.tau, causal=w.causal, rope=rope)
    return lipschitz_search(w, L, R, steps, seed, start_R=R, forward=forward)


def _with_threads(fn):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(old)


@check("X3", "float64", scope="projected Adam ascent in D_1 with rotary maps, L = 2…32 (full: 2…256, more "
       "restarts and weights)")
def x3_projected_ascent(tier):
    def run():
        seeds = [21, 22] if tier == "quick" else [21, 22, 23, 24]
        lengths = [2, 4, 8, 16, 32] if tier == "quick" else [2, 4, 8, 16, 32, 64, 128, 256]
        restarts, steps = (2, 60) if tier == "quick" else (6, 250)
        per_L, n, viol, worst = {}, 0, 0, 0.0
        for s in seeds:
            w = _rope_weights(s, causal=(s % 2 == 0))
            bound = c10_rope_bound(w, 1.0)
            for L in lengths:
                for k in range(restarts):
                    r, m = rope_lipschitz_search(w, L, 1.0, steps, seed=1000 * s + 10 * L + k)
                    n += m
                    viol += r > bound
                    worst = nanmax(worst, r / bound)
                    per_L[L] = max(per_L.get(L, 0.0), r / bound)
        ok = viol == 0 and n > 0 and math.isfinite(worst)
        return verdict(ok, f"{n} evaluations, {len(seeds)} weight draws",
                       f"{n} ascent evaluations in D_1, {viol} violations; worst ratio found/bound {worst:.3f}; by L: "
                       + ", ".join(f"{L}: {v:.3f}" for L, v in sorted(per_L.items())),
                       evaluations=n, violations=viol, worst_ratio=round(worst, 4),
                       worst_by_L={str(L): round(v, 4) for L, v in sorted(per_L.items())})
    return _with_threads(run)


@check("X3", "float64", scope="X2's local bound at random points of D_R never exceeds X3's constant "
       "(R ∈ {0.5, 1, 3}, L ≤ 24; quick: 60 points)")
def x3_local_below_global(tier):
    rng = np.random.default_rng(33)
    n = 60 if tier == "quick" else 600
    worst, viol = 0.0, 0
    for t in range(n):
        X, w, rope = random_rope_instance(rng, L=int(rng.integers(2, 25)))
        R = float(rng.choice([0.5, 1.0, 3.0]))
        rms = np.sqrt((X * X).mean(axis=1, keepdims=True))
        X = X * (np.minimum(1.0, R / rms) if t % 2 else R / rms)     # inside D_R, or on its boundary
        G = c10_rope_bound(w, R, gain=rope.gain())
        q = c9_ext_bound(X, w, rope=rope, form="paper").bound / G
        viol += q > 1
        worst = nanmax(worst, q)
    return verdict(viol == 0 and math.isfinite(worst), f"{n} points",
                   f"{n} points, {viol} with local > global; max local/global {worst:.4f}",
                   points=n, violations=viol, max_ratio=round(worst, 4))


def _vanishing_form_weights() -> MHAWeights:
    """d = 4, one head with d_k = 2: W_Q = [a, 0], W_K = [0, b], so W_Q W_Kᵀ = 0 (no score path
    at all without rotation) while W_Q R W_Kᵀ = −sin(φ) a bᵀ ≠ 0 once the pair turns."""
    a = np.array([2.0, -1.0, 0.5, 1.0])
    b = np.array([1.0, 2.0, -1.0, 0.5])
    Wq = np.stack([a, np.zeros(4)], axis=1)[None]
    Wk = np.stack([np.zeros(4), b], axis=1)[None]
    rng = np.random.default_rng(8)
    return MHAWeights(Wq, Wk, rng.standard_normal((1, 4, 2)) / 2, rng.standard_normal((2, 4)) / 2,
                      tau=math.sqrt(2.0), name="vanishing W_Q W_Kᵀ")


@check("X3", "float64", scope="same ascent against the plain C10 constant (‖W_Q W_Kᵀ‖₂, rotation dropped)",
       negative_control=True, guards=("x3_projected_ascent",))
def x3_rotation_dropped_refuted(tier):
    def run():
        w = _vanishing_form_weights()
        plain, rot = c10_bound(w, 1.0), c10_rope_bound(w, 1.0)
        best, n = 0.0, 0
        for L in (4, 8):
            for k in range(2):
                r, m = rope_lipschitz_search(w, L, 1.0, 60, seed=500 + 10 * L + k)
                best, n = max(best, r), n + m
        return refuted(best > plain and best <= rot, f"{n} evaluations",
                       f"ratio found {best:.4f} vs plain C10 constant {plain:.4f} (rotary constant {rot:.4f}): "
                       + ("plain constant refuted" if best > plain else "NOT refuted"),
                       evaluations=n, found=round(best, 4), plain=round(plain, 4), rotary=round(rot, 4))
    return _with_threads(run)
