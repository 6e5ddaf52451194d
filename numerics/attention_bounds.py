"""The local (C9) and global (C10) multi-head attention bounds, with a certified θ.

Derivation of C9 (our words; claim C9 in paper_checks.md).  Perturb X by E with max_i ‖e_i‖ ≤ 1.
For head h and row i, with supp(i) the keys row i sees (all j, or j ≤ i if causal):

  d o_i = Σ_j P_ij W_Vᵀe_j + Σ_j dP_ij v_j ,   dP_i = C(p_i) ds_i/τ ,
  ds_ij = e_iᵀ(W_Q k_j) + (W_K q_i)ᵀ e_j     (q, k include their biases).

* first term: ‖·‖ ≤ ‖W_V‖₂ (C8: a convex combination);
* second term: 1ᵀC = 0, so Σ_j dP_ij = 0 and (centring) ‖Σ_j dP_ij v_j‖ ≤ ‖dP_i‖₁ r_i with
  r_i = ½ diam{W_Vᵀx_j : j ∈ supp(i)} (the value bias cancels in differences);
* C2: ‖C u‖₁ ≤ θ(p_i)·min_c ‖u − c1‖_∞ ≤ θ(p_i)·a_i, where either
    paper form:    a_i = max_j ‖W_Q k_j‖ + ‖W_K q_i‖                (c = 0), or
    centred form:  a_i = ½ diam{W_Q k_j : j ∈ supp(i)} + ‖W_K q_i‖   (c = mid-range);
  the centred form is never larger (½ diam ≤ max norm) and the key bias b_k cancels in it;
* rows: ‖dy_i‖ ≤ ‖W_O‖₂ √(Σ_h ‖do_i^h‖²).
Hence ‖J(X)‖_{B→B} ≤ √(d/d_out)·‖W_O‖₂ max_i √(Σ_h (‖W_V^h‖₂ + θ(p_i^h) a_i^h r_i^h/τ)²)
(for d_out = d this is claim C9 as stated; without biases the paper form is exactly it).
The bound increases with θ, so an UPPER bound θ_hi ≥ θ(p_true) is needed: p_true is
the exact softmax of the exact scores, not the float64 row.

C10.  D_R = {max_i RMS(x_i) ≤ R} is convex, so Lip_B ≤ sup_{D_R} ‖J‖_{B→B}.  On D_R:
θ ≤ 1, ‖x_j‖ ≤ √d R, r ≤ ‖W_V‖√d R, and (centred form) a ≤ 2√d R‖W_Q W_Kᵀ‖₂ + ‖W_K b_q‖:
  Lip_B ≤ √(d/d_out)‖W_O‖₂ √(Σ_h ‖W_V^h‖₂² (1 + (2dR²‖A^h‖₂ + √d R‖W_K^h b_q^h‖)/τ)²),
A^h = W_Q^h W_K^{hT}; with b_q = 0 this is claim C10 as stated.  (The paper form adds ‖W_Q b_k‖·√dR/τ.)

Precision contract: bounds are upper bounds, rigorous under the IEEE-754 model for
the float64 products (γ_n error bounds, valid for every summation order) plus two
stated assumptions: numpy's float64 exp has relative error ≤ EXP_REL_ERR, and
LAPACK's σ_max has relative error ≤ SVD_REL_ERR.  Every computed norm is enlarged
by its propagated error; the final value by FINAL_MARGIN.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .attention import MHAWeights, Rotary
from .rounding import ERROR_PAD, U, gamma, pad_error_term, up
from .theta import BRUTE_MAX_L, theta_exact
from .theta_bounds import topk_delta_lower

EXP_REL_ERR = 1e-13      # assumption: far above any libm/numpy float64 exp error (≤ a few ulp)
SVD_REL_ERR = 1e-10      # assumption on LAPACK σ_max (backward stable: error ~ n·u·‖A‖)
FINAL_MARGIN = 1e-10
TAIL_CUT = -650.0        # logits below max − 650 are bounded as a tail (exp would lose precision)
TOPK = 10


# ----------------------------------------------------------------------------- θ upper bounds

def theta_upper_topk(q: np.ndarray, k: int = TOPK) -> float:
    """Certified upper bound on θ of the exact normalisation of a nonnegative float64 row.

    Top-k branching (the interval lemma on the top atoms) through the outward-rounded kernel of
    :func:`numerics.theta_bounds.topk_delta_lower` (δ_lo ≤ δ), then θ ≤ 1 − δ_lo²
    rounded up.
    """
    q = np.asarray(q, dtype=np.float64)
    if int((q > 0).sum()) <= 1:
        return 0.0
    d_lo, _, _ = topk_delta_lower(q[None, :], K=k)
    d = float(d_lo[0])
    sq = math.nextafter(d * d, 0.0) if d > 0 else 0.0        # ≤ δ_lo²
    return min(1.0, float(up(1.0 - sq)))


def theta_hi_row(z: np.ndarray, err: np.ndarray) -> tuple[float, float]:
    """(θ_hi, θ_stored) for the row softmax(z_true) where |ẑ_j − z_true_j| ≤ err_j.

    θ_stored is θ of the stored row e_j = exp(ẑ_j − max ẑ) (exact rational θ via
    theta_exact for ≤ BRUTE_MAX_L atoms, top-k upper bound otherwise).  θ_hi adds
    2·D (C6: θ is 2-Lipschitz in ℓ1), D ≥ ‖e/Σe − p_true‖₁:  each stored entry
    equals exp(z_true_j − c)·ρ_j with |log ρ_j| ≤ η_j = err_j + u|ẑ_j − m̂| + 1.01·EXP_REL_ERR,
    so D ≤ e^{2η} − 1 on the body plus twice the tail mass (logits < m̂ − 650).
    Entries with ẑ = −inf are outside the support (causal mask) and exact zeros.
    """
    sup = np.isfinite(z)
    if not sup.any():
        raise ValueError("attention row has no finite logit")
    zs, es = z[sup], err[sup]
    if not np.isfinite(es).all():
        return 1.0, 1.0
    jm = int(np.argmax(zs))
    t = zs - zs[jm]
    body = t >= TAIL_CUT
    e = np.exp(t[body])
    eta = float(np.max(es[body] + U * np.abs(t[body]) + 1.01 * EXP_REL_ERR))
    tail_mass = float(np.sum(np.exp(t[~body] * (1 - U) + es[~body] + es[jm]))) if (~body).any() else 0.0
    D = math.expm1(2 * eta) * (1 + ERROR_PAD) + 2 * tail_mass   # expm1 error ≤ EXP_REL_ERR ≪ ERROR_PAD
    if e.size <= BRUTE_MAX_L:
        r = theta_exact(e)
        th = float(r.theta)
        th = float(up(th)) if th < 1 else 1.0
    else:
        th = theta_upper_topk(e)
    return min(1.0, float(up(th + 2 * D))), th   # the sum rounded up


# ----------------------------------------------------------------------------- float64 pieces

def _heads(X: np.ndarray, w: MHAWeights):
    """Scores ẑ = S/τ with elementwise error bounds, and the vectors C9 needs, per head."""
    L, d = X.shape
    dk = w.W_Q.shape[2]
    aX = np.abs(X)
    out = []
    for h in range(w.H):
        Wq, Wk, Wv = w.W_Q[h], w.W_K[h], w.W_V[h]
        bq = np.zeros(dk) if w.b_q is None else w.b_q[h]
        bk = np.zeros(dk) if w.b_k is None else w.b_k[h]
        Q, K = X @ Wq + bq, X @ Wk + bk
        eQ = pad_error_term(gamma(d + 1) * (aX @ np.abs(Wq) + np.abs(bq)))
        eK = pad_error_term(gamma(d + 1) * (aX @ np.abs(Wk) + np.abs(bk)))
        S = Q @ K.T
        Z = S / w.tau
        aQ, aK = np.abs(Q), np.abs(K)
        eS = gamma(dk) * (aQ @ aK.T) + eQ @ aK.T + aQ @ eK.T + eQ @ eK.T
        eZ = pad_error_term(eS / w.tau * (1 + U) + U * np.abs(Z))
        # u_j = W_Q k_j and g_i = W_K q_i (rows), v_j = W_Vᵀ x_j, each with a row error norm.
        Uv = K @ Wq.T
        eU = pad_error_term(gamma(dk) * (aK @ np.abs(Wq).T) + eK @ np.abs(Wq).T)
        G = Q @ Wk.T
        eG = pad_error_term(gamma(dk) * (aQ @ np.abs(Wk).T) + eQ @ np.abs(Wk).T)
        V = X @ Wv
        eV = pad_error_term(gamma(d) * (aX @ np.abs(Wv)))
        out.append(dict(Z=Z, eZ=eZ, U=Uv, eU=np.linalg.norm(eU, axis=1), G=G,
                        eG=np.linalg.norm(eG, axis=1), V=V, eV=np.linalg.norm(eV, axis=1)))
    return out


def _row_norm_up(A: np.ndarray, err: np.ndarray) -> np.ndarray:
    return np.linalg.norm(A, axis=1) * (1 + gamma(A.shape[1] + 2)) + err


def _prefix(vals: np.ndarray, causal: bool) -> np.ndarray:
    return np.maximum.accumulate(vals) if causal else np.full_like(vals, vals.max())


def _diam_up(A: np.ndarray, err: np.ndarray, causal: bool) -> np.ndarray:
    """Upper bounds on diam{true a_j : j ∈ supp(i)} for every row i."""
    L, n = A.shape
    g = (A * A).sum(axis=1)
    D2 = g[:, None] + g[None, :] - 2 * (A @ A.T)
    # Gram-route rounding: |error| ≤ (γ_n + 3u)·2(g_i + g_j), generously.
    D2 = D2 + 2.2 * (gamma(n) + 4 * U) * (g[:, None] + g[None, :])
    D = np.sqrt(np.maximum(D2, 0.0)) * (1 + 2 * U) + err[:, None] + err[None, :]
    if causal:
        per_row = np.where(np.tril(np.ones((L, L), dtype=bool)), D, 0.0).max(axis=1)
        return np.maximum.accumulate(per_row)
    return np.full(L, D.max())


_SPECTRAL_CACHE: dict = {}


def spectral_up(A: np.ndarray) -> float:
    """σ_max(A) enlarged by SVD_REL_ERR (float64 LAPACK; see module contract).

    The SVD dominates C9 on real models (W_O and every W_V^h are the same at every
    sequence), so results are remembered by the matrix's exact bytes: equal bytes,
    equal value, never a stale one.
    """
    A = np.ascontiguousarray(A, dtype=np.float64)
    if A.size == 0:
        return 0.0
    key = (A.shape, hashlib.blake2b(A.tobytes(), digest_size=16).digest())
    hit = _SPECTRAL_CACHE.get(key)
    if hit is None:
        if len(_SPECTRAL_CACHE) >= 1024:
            _SPECTRAL_CACHE.clear()
        hit = _SPECTRAL_CACHE[key] = float(np.linalg.norm(A, 2)) * (1 + SVD_REL_ERR)
    return hit


@dataclass
class C9Result:
    bound: float               # the upper bound on ‖J(X)‖_{B→B}
    per_row: np.ndarray        # (L,) the bound's value for each output row
    theta: np.ndarray          # (H, L) θ values used (θ_hi, θ_stored, 1, or as given)
    theta_stored: np.ndarray   # (H, L) θ of the stored float64 rows
    a: np.ndarray              # (H, L)
    r: np.ndarray              # (H, L)


def c9_bound(X, w: MHAWeights, *, theta="certified", form: str = "centred",
             theta_scale: float = 1.0) -> C9Result:
    """C9 at X.  theta: "certified" (θ_hi, a valid upper bound), "stored" (θ of the
    float64 row, not certified), "one" (θ := 1, the bound without the θ factor) or an
    (H, L) array.  form: "paper" or "centred" (see module docstring).  theta_scale
    multiplies θ (negative controls only: < 1 gives a deliberately wrong bound).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != w.d:
        raise ValueError(f"c9_bound: X has shape {X.shape}, expected (L, {w.d})")
    if not np.isfinite(X).all():
        raise ValueError("c9_bound: X has non-finite entries")
    if form not in ("paper", "centred"):
        raise ValueError(f"unknown form {form!r}")
    L = X.shape[0]
    heads = _heads(X, w)
    causal = w.causal
    tril = np.tril(np.ones((L, L), dtype=bool))
    th_used = np.zeros((w.H, L))
    th_st = np.zeros((w.H, L))
    A = np.zeros((w.H, L))
    R = np.zeros((w.H, L))
    total = np.zeros(L)
    for h, hd in enumerate(heads):
        Z = np.where(tril, hd["Z"], -np.inf) if causal else hd["Z"]
        for i in range(L):
            hi, st = theta_hi_row(Z[i], hd["eZ"][i])
            th_st[h, i] = st
            if isinstance(theta, str):
                th_used[h, i] = {"certified": hi, "stored": st, "one": 1.0}[theta]
        if not isinstance(theta, str):
            th_used[h] = np.asarray(theta, dtype=np.float64)[h]
        gnorm = _row_norm_up(hd["G"], hd["eG"])
        if form == "paper":
            first = _prefix(_row_norm_up(hd["U"], hd["eU"]), causal)
        else:
            first = 0.5 * _diam_up(hd["U"], hd["eU"], causal)
        A[h] = first + gnorm
        R[h] = 0.5 * _diam_up(hd["V"], hd["eV"], causal)
        term = spectral_up(w.W_V[h]) + theta_scale * th_used[h] * A[h] * R[h] / w.tau
        total += term * term
    per_row = spectral_up(w.W_O) * np.sqrt(total) * math.sqrt(w.d / w.d_out) * (1 + FINAL_MARGIN)
    return C9Result(float(per_row.max()), per_row, th_used, th_st, A, R)


def _prod_norm_up(A: np.ndarray, b: np.ndarray) -> float:
    """Upper bound on ‖A b‖₂ including the rounding of the float product and of the norm."""
    n = A.shape[1]
    return pad_error_term(float(np.linalg.norm(A @ b)) * (1 + gamma(n + 2))
               + gamma(n + 2) * float(np.linalg.norm(np.abs(A) @ np.abs(b))))


def c10_bound(w: MHAWeights, R: float, *, form: str = "centred") -> float:
    """C10: Lipschitz constant in ‖·‖_B on D_R, independent of L (upper bound; see contract)."""
    if not (R >= 0 and math.isfinite(R)):
        raise ValueError(f"c10_bound: radius R must be finite and ≥ 0, got {R!r}")
    d = w.d
    s = 0.0
    for h in range(w.H):
        Wq, Wk = w.W_Q[h], w.W_K[h]
        # The float products carry rounding error; |fl(AB) − AB| ≤ γ_k |A||B| entrywise, and
        # the spectral norm of that error is at most its Frobenius norm.
        An = spectral_up(Wq @ Wk.T) + pad_error_term(gamma(Wq.shape[1] + 2) * np.linalg.norm(np.abs(Wq) @ np.abs(Wk).T))
        bq = 0.0 if w.b_q is None else _prod_norm_up(Wk, w.b_q[h])
        extra = bq
        if form == "paper":
            extra += 0.0 if w.b_k is None else _prod_norm_up(Wq, w.b_k[h])
        elif form != "centred":
            raise ValueError(f"unknown form {form!r}")
        f = 1 + (2 * d * R * R * An + math.sqrt(d) * R * extra) / w.tau
        s += (spectral_up(w.W_V[h]) * f) ** 2
    return spectral_up(w.W_O) * math.sqrt(s) * math.sqrt(d / w.d_out) * (1 + FINAL_MARGIN)


# ----------------------------------------------------------------------------- beyond the paper (X2–X6)
#
# Scores z_ij = cap(s_ij/τ) + B_ij with s_ij = (M_i q̃_i)ᵀ(M_j k̃_j) (numerics.attention, X2–X5).
#
# X2 (rotary, local).  The C9 derivation goes through with one change: the two score gradients
# depend on the pair, ∂s_ij/∂x_i = W_Q M_iᵀ k_j =: u_ij and ∂s_ij/∂x_j = W_K M_jᵀ q_i =: g_ij
# (q, k rotated, biases included; for exact rotations M_iᵀM_j = R_(j−i)).  C2 needs, for row i and
# a perturbation E with ‖e_l‖ ≤ 1, an offset c with |ds_ij − c| ≤ a_i for every key j in supp(i):
#   ds_ij = e_iᵀu_ij + g_ijᵀe_j, so with c = e_iᵀ W_Q M_iᵀ m_i (any vector m_i),
#   |ds_ij − c| ≤ ‖W_Q M_iᵀ(k_j − m_i)‖ + ‖g_ij‖.
# The proof therefore needs the per-pair maximum a_i = max_j (‖W_Q M_iᵀ(k_j − m_i)‖ + ‖g_ij‖):
#   form="paper":   max_j ‖u_ij‖ + max_j ‖g_ij‖     (m_i = 0; the sum of two maxima, never smaller)
#   form="pair":    max_j (‖u_ij‖ + ‖g_ij‖)          (m_i = 0)
#   form="centred": the smaller of "pair" and the same with m_i = mean of the rotated keys of row i.
# The value side is not rotated, so r_i and the ‖W_V‖ term are C9's; without rotation "paper" is
# C9's paper form.
#
# X4 (X-independent score bias B, masks as −∞).  ∂z_ij/∂x = ∂s_ij/∂x /τ: B enters only through
# P = softmax(z), i.e. through θ of the biased rows and the support supp(i) = {j : B_ij > −∞}.
#
# X5 (soft-capping, cap(t) = c·tanh(t/c)).  ∂z_ij = φ_ij ds_ij/τ, φ_ij = sech²(s_ij/(τc)) ∈ (0, 1].
# Then |dz_ij| ≤ φ_ij(‖u_ij‖ + ‖g_ij‖)/τ ≤ (‖u_ij‖ + ‖g_ij‖)/τ, so the un-centred forms ("paper",
# "pair", and C9's paper form) hold with θ of the capped rows, and "pair" may weight each pair by
# φ_ij.  Centring does NOT survive: φ_ij(e_iᵀu_ij) − c is no longer φ_ij(e_iᵀu_ij − c), so with a
# cap "centred" falls back to "pair" (C9's centred form is not claimed for capped scores).
#
# X3 (rotary, global).  On D_R, ‖u_ij‖ ≤ g²‖W_Q‖₂(‖W_K‖₂√d R + ‖b_k‖), ‖g_ij‖ ≤ g²‖W_K‖₂(‖W_Q‖₂√d R
# + ‖b_q‖), g = max_p ‖M_p‖₂ (1 for rotations), θ ≤ 1, r ≤ ‖W_V‖₂√d R; this uses
# sup_R ‖W_Q R W_Kᵀ‖₂ ≤ ‖W_Q‖₂‖W_K‖₂ over orthogonal R, which involves no position, so the constant
#   ‖W_O‖₂√(d/d_out) √(Σ_h ‖W_V‖₂²(1 + g²(2dR²‖W_Q‖₂‖W_K‖₂ + √d R(‖W_Q‖₂‖b_k‖ + ‖W_K‖₂‖b_q‖))/τ)²)
# does not depend on L.  It also holds with any X-independent bias and with soft-capping (θ ≤ 1
# and φ ≤ 1 throughout).
#
# Precision contract (X2–X5 functions below): float bounds evaluated in float64, NOT certified.
# θ is θ_hi of the stored rows with an estimated (not rigorous) score error; norms carry a
# relative pad; σ_max is LAPACK's enlarged by SVD_REL_ERR.


EXT_REL_PAD = 1e-12
PAIR_BUDGET = 2e9        # multiply-adds per call for the per-pair norms; above it: form "operator"


def theta_hi_rows(Z: np.ndarray, eZ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(θ_hi, θ_stored) per row of an (L, L) logit matrix with error bounds eZ (−∞ = masked)."""
    out = [theta_hi_row(Z[i], eZ[i]) for i in range(Z.shape[0])]
    return np.array([o[0] for o in out]), np.array([o[1] for o in out])


@dataclass
class ExtScores:
    Z: np.ndarray        # (L, L) logits z = cap(s/τ) + B, −∞ outside the support
    eZ: np.ndarray       # (L, L) estimated error bound on Z
    phi: np.ndarray      # (L, L) upper bound on sech²(s/(τc)) (ones without soft-capping)
    support: np.ndarray  # (L, L) bool
    Q: np.ndarray        # (L, d_k) rotated queries
    K: np.ndarray        # (L, d_k) rotated keys


def _rope_abs(A: np.ndarray, rope: Rotary | None) -> np.ndarray:
    return A if rope is None else A * np.abs(rope.cos) + A[..., rope.perm] * np.abs(rope.sin)


def _bias_matrix(score_bias, H: int, L: int, h: int) -> np.ndarray | None:
    if score_bias is None:
        return None
    B = np.asarray(score_bias, dtype=np.float64)
    if B.shape == (H, L, L):
        B = B[h]
    elif B.shape != (L, L):
        raise ValueError(f"score bias has shape {B.shape}, expected ({L}, {L}) or ({H}, {L}, {L})")
    if np.isnan(B).any() or (B == np.inf).any():
        raise ValueError("score bias has NaN or +inf entries")
    return B


def ext_scores(X: np.ndarray, w: MHAWeights, h: int, *, rope: Rotary | None = None, score_bias=None,
               cap: float | None = None) -> ExtScores:
    """Logits of head h under rotary maps, an X-independent bias and soft-capping, float64."""
    L, d = X.shape
    dk = w.W_Q.shape[2]
    Wq, Wk = w.W_Q[h], w.W_K[h]
    bq = np.zeros(dk) if w.b_q is None else w.b_q[h]
    bk = np.zeros(dk) if w.b_k is None else w.b_k[h]
    Q, K = X @ Wq + bq, X @ Wk + bk
    aX = np.abs(X)
    aQ = _rope_abs(aX @ np.abs(Wq) + np.abs(bq), rope)
    aK = _rope_abs(aX @ np.abs(Wk) + np.abs(bk), rope)
    if rope is not None:
        if rope.L != L or rope.dk != dk:
            raise ValueError(f"rotary tables are {rope.L}×{rope.dk}, the input needs {L}×{dk}")
        Q, K = rope.apply(Q), rope.apply(K)
    T = (Q @ K.T) / w.tau
    eT = 2 * gamma(d + dk + 8) * (aQ @ aK.T) / w.tau + 2 * U * np.abs(T)       # estimate, not rigorous
    if cap is None:
        Z, eZ, phi = T, eT, np.ones((L, L))
    else:
        if not (cap > 0 and math.isfinite(cap)):
            raise ValueError(f"soft-capping constant must be finite and > 0, got {cap!r}")
        Z = cap * np.tanh(T / cap)
        eZ = eT + 4 * U * np.abs(Z)                                              # tanh is 1-Lipschitz
        # |d sech²(t/c)/dt| ≤ 0.77/c: the stored φ plus the drift the score error allows
        e = np.exp(-2.0 * np.abs(T / cap))                                        # sech² = 4e/(1 + e)², no overflow
        phi = np.minimum(1.0, 4.0 * e / (1.0 + e) ** 2 * (1 + 1e-12) + 0.77 * eT / cap + 1e-300)
    B = _bias_matrix(score_bias, w.H, L, h)
    support = np.ones((L, L), dtype=bool)
    if B is not None:
        support &= B > -np.inf
        Z = Z + np.where(support, B, 0.0)
        eZ = eZ + 2 * U * np.abs(Z)
    if w.causal:
        support &= np.tril(np.ones((L, L), dtype=bool))
    if not support.any(axis=1).all():
        raise ValueError("an attention row has every key masked")
    Z = np.where(support, Z, -np.inf)
    return ExtScores(Z, np.where(support, eZ, 0.0), phi, support, Q, K)


def _sq_norms(Y: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Upper estimates of ‖W y‖² for the rows y of Y (..., d_k), W of shape (n, d_k): the direct
    product when n ≤ d_k, else the Gram form yᵀ(WᵀW)y with an absolute rounding allowance."""
    n, dk = W.shape
    if n <= dk:
        Z = Y @ W.T
        return (Z * Z).sum(axis=-1) * (1 + gamma(dk + n + 4))
    G, aG = W.T @ W, np.abs(W).T @ np.abs(W)
    aY = np.abs(Y)
    val = np.einsum("...a,ab,...b->...", Y, G, Y)
    err = gamma(n + 2 * dk + 4) * np.einsum("...a,ab,...b->...", aY, aG, aY)
    return np.maximum(val, 0.0) + 2 * err


def _masked_rowmax(A: np.ndarray, support: np.ndarray) -> np.ndarray:
    return np.where(support, A, -np.inf).max(axis=1)


def _value_radius(V: np.ndarray, support: np.ndarray, causal_only: bool) -> np.ndarray:
    """½ diam{v_j : j ∈ supp(i)} per row (a superset of the support for long rows with masks)."""
    L, n = V.shape
    g = (V * V).sum(axis=1)
    D2 = g[:, None] + g[None, :] - 2 * (V @ V.T) + 2.2 * (gamma(n) + 4 * U) * (g[:, None] + g[None, :])
    D = np.sqrt(np.maximum(D2, 0.0)) * (1 + 2 * U)
    if support.all():
        return np.full(L, 0.5 * D.max())
    if causal_only:
        per_row = np.where(np.tril(np.ones((L, L), dtype=bool)), D, 0.0).max(axis=1)
        return 0.5 * np.maximum.accumulate(per_row)
    if L <= 512:
        return np.array([0.5 * D[np.ix_(s, s)].max() for s in support])
    cols = support.any(axis=0)                     # every key some row sees: a superset
    return np.full(L, 0.5 * D[np.ix_(cols, cols)].max())


@dataclass
class C9ExtResult(C9Result):
    a_form: str = ""         # "paper", "pair", "centred" or "operator" (what each head's a used)


def c9_ext_bound(X, w: MHAWeights, *, rope: Rotary | None = None, score_bias=None, cap: float | None = None,
                 theta="certified", form: str = "centred", theta_scale: float = 1.0,
                 pair_budget: float = PAIR_BUDGET) -> C9ExtResult:
    """The local bound X2 (rotary), X4 (X-independent score bias) and X5 (soft-capping) at X:

      ‖J(X)‖_{B→B} ≤ √(d/d_out)‖W_O‖₂ max_i √(Σ_h (‖W_V^h‖₂ + θ(p_i^h) a_i^h r_i^h/τ)²)

    with p_i^h the biased (capped) rows and a_i^h the per-pair form chosen by ``form`` (see the
    derivation above).  theta: "certified" (θ_hi of the stored rows), "stored", "one" or an (H, L)
    array; theta_scale multiplies θ (negative controls only).  When the per-pair norms would cost
    more than ``pair_budget`` multiply-adds, a_i falls back to the operator form
    g(‖W_Q‖₂ max_j ‖k_j‖ + ‖W_K‖₂ ‖q_i‖) (g = rotary gain) and ``a_form`` says "operator".
    Precision: float64, not certified (module notes).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != w.d:
        raise ValueError(f"c9_ext_bound: X has shape {X.shape}, expected (L, {w.d})")
    if not np.isfinite(X).all():
        raise ValueError("c9_ext_bound: X has non-finite entries")
    if form not in ("paper", "pair", "centred"):
        raise ValueError(f"unknown form {form!r}")
    L, d = X.shape
    dk = w.W_Q.shape[2]
    causal_only = score_bias is None
    cost = w.H * L * L * dk * (min(d, dk) + dk) * (2 if form == "centred" else 1)
    used = "operator" if cost > pair_budget else (form if not (form == "centred" and cap is not None) else "pair")
    th_used, th_st = np.zeros((w.H, L)), np.zeros((w.H, L))
    A, R = np.zeros((w.H, L)), np.zeros((w.H, L))
    total = np.zeros(L)
    gain = 1.0 if rope is None else rope.gain()
    for h in range(w.H):
        sc = ext_scores(X, w, h, rope=rope, score_bias=score_bias, cap=cap)
        hi, st = theta_hi_rows(sc.Z, sc.eZ)
        th_st[h] = st
        if isinstance(theta, str):
            th_used[h] = {"certified": hi, "stored": st, "one": np.ones(L)}[theta]
        else:
            th_used[h] = np.asarray(theta, dtype=np.float64)[h]
        Wq, Wk = w.W_Q[h], w.W_K[h]
        if used == "operator":
            kn = np.linalg.norm(sc.K, axis=1) * (1 + gamma(dk + 2))
            qn = np.linalg.norm(sc.Q, axis=1) * (1 + gamma(dk + 2))
            a = gain * (spectral_up(Wq) * _masked_rowmax(np.broadcast_to(kn, (L, L)), sc.support)
                        + spectral_up(Wk) * qn)
        else:
            rows = np.arange(L)
            Kb = np.broadcast_to(sc.K[None], (L, L, dk))
            Yu = Kb if rope is None else rope.apply_t(Kb, rows=rows[:, None])           # M_iᵀ k_j
            Qb = np.broadcast_to(sc.Q[:, None], (L, L, dk))
            Yg = Qb if rope is None else rope.apply_t(Qb, rows=rows[None, :])           # M_jᵀ q_i
            un = np.sqrt(_sq_norms(Yu, Wq))
            gn = np.sqrt(_sq_norms(Yg, Wk))
            if used == "paper":
                a = _masked_rowmax(un, sc.support) + _masked_rowmax(gn, sc.support)
            else:
                phi = sc.phi if cap is not None else 1.0
                a = _masked_rowmax(phi * (un + gn), sc.support)
                if used == "centred":
                    # any centring vector is valid, so the float mean itself is used as m_i
                    cnt = sc.support.sum(axis=1, keepdims=True)
                    m = (sc.support.astype(np.float64) @ sc.K) / cnt                       # (L, d_k) per row
                    Yc = Kb - m[:, None, :]
                    Yc = Yc if rope is None else rope.apply_t(Yc, rows=rows[:, None])
                    uc = np.sqrt(_sq_norms(Yc, Wq)) * (1 + gamma(dk + 8))
                    a = np.minimum(a, _masked_rowmax(uc + gn, sc.support))
        A[h] = a * (1 + EXT_REL_PAD)
        V = X @ w.W_V[h]
        R[h] = _value_radius(V, sc.support, causal_only) * (1 + gamma(d + 4)) * (1 + EXT_REL_PAD)
        term = spectral_up(w.W_V[h]) + theta_scale * th_used[h] * A[h] * R[h] / w.tau
        total += term * term
    per_row = spectral_up(w.W_O) * np.sqrt(total) * math.sqrt(w.d / w.d_out) * (1 + FINAL_MARGIN)
    return C9ExtResult(float(per_row.max()), per_row, th_used, th_st, A, R, a_form=used)


def c10_rope_bound(w: MHAWeights, R: float, *, gain: float = 1.0) -> float:
    """X3: the Lipschitz constant in ‖·‖_B on D_R of MHA with rotary maps of gain ≤ ``gain``
    (max_p ‖M_p‖₂; 1 for exact rotations), with ‖W_Q^h‖₂‖W_K^h‖₂ in place of ‖W_Q^h W_K^{hT}‖₂
    (the supremum over all orthogonal R of ‖W_Q R W_Kᵀ‖₂ is at most that, whatever the length).
    Also valid with any X-independent score bias and with soft-capping.  float64, not certified."""
    if not (R >= 0 and math.isfinite(R)):
        raise ValueError(f"c10_rope_bound: radius R must be finite and ≥ 0, got {R!r}")
    if not (gain >= 0 and math.isfinite(gain)):
        raise ValueError(f"c10_rope_bound: gain must be finite and ≥ 0, got {gain!r}")
    d = w.d
    g2 = gain * gain * (1 + EXT_REL_PAD)
    s = 0.0
    for h in range(w.H):
        nq, nk = spectral_up(w.W_Q[h]), spectral_up(w.W_K[h])
        bq = 0.0 if w.b_q is None else float(np.linalg.norm(w.b_q[h])) * (1 + gamma(w.b_q.shape[1] + 2))
        bk = 0.0 if w.b_k is None else float(np.linalg.norm(w.b_k[h])) * (1 + gamma(w.b_k.shape[1] + 2))
        f = 1 + g2 * (2 * d * R * R * nq * nk + math.sqrt(d) * R * (nq * bk + nk * bq)) / w.tau
        s += (spectral_up(w.W_V[h]) * f) ** 2
    return spectral_up(w.W_O) * math.sqrt(s) * math.sqrt(d / w.d_out) * (1 + FINAL_MARGIN)
