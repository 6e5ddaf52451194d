"""Every statement of the paper the suite tracks, restated in our own words.

Ids follow shared/MATH.md and never change once used.  A claim lists the
claims its proof uses (so its status can only be ``pass`` when theirs is) and
what is assumed rather than checked.
"""
from .registry import Claim, add_claim

_SOFTMAX = "Softmax sensitivity"
_GEOM = "Attention geometry"
_NORM = "Normalisation placement"
_EMP = "Experiments"

for _c in [
    Claim("C1", "Jacobian of the tempered softmax",
          "For p = softmax(u/τ) with τ > 0, the Jacobian of u ↦ p is C(p)/τ where "
          "C(p) = diag(p) − p pᵀ.", group=_SOFTMAX),
    Claim("C2", "Exact ∞→1 sensitivity (main theorem)",
          "For every length L ≥ 1, logits u and temperature τ > 0, the ∞→1 operator norm of "
          "the softmax Jacobian equals θ(p)/τ, where θ(p) = 4 max_S p(S)(1 − p(S)) over subsets "
          "S of the positions.",
          uses=("C1",), group=_SOFTMAX),
    Claim("C3", "Uniform rows and parity",
          "For the uniform distribution on L atoms, θ = 1 when L is even, 1 − 1/L² when L is odd "
          "and L ≥ 3, and 0 when L = 1; under a causal mask row i has i + 1 atoms, so θ alternates "
          "with the row index.", group=_SOFTMAX),
    Claim("C4", "Dominant-atom regime",
          "If the largest atom m = p_max is at least 1/2, then θ(p) = 4m(1 − m) exactly.",
          group=_SOFTMAX),
    Claim("C5", "θ against p_max",
          "Always θ(p) ≥ max(4m(1 − m), 1 − m²) with m = p_max.  The exact minimum of θ at "
          "fixed m is a sawtooth: 4m(1 − m) on [1/3, 1/2], δ* = 4m − 1 on [2/7, 1/3], "
          "δ* = (6m − 1)/5 on [7/27, 2/7], δ* = (1 − 3m)/2 on [1/5, 7/27] (θ = 1 − δ*²).",
          uses=("C4",),
          assumes=("the sawtooth minimum for general L is a conjecture; it is checked for small L only",),
          group=_SOFTMAX),
    Claim("C6", "Zero atoms and continuity",
          "Appending or removing zero atoms does not change θ, and θ is 2-Lipschitz in the ℓ1 "
          "distance between distributions.", group=_SOFTMAX),
    Claim("C7", "Subset certificates",
          "Any subset S proves θ(p) ≥ 4ab/(a + b)² with a = p(S), b = p(Sᶜ); for a row that does "
          "not sum to one this is θ of its normalisation, so the bitmask S is a replayable "
          "witness.", group=_SOFTMAX),
    Claim("C8", "Row-stochastic mixing is nonexpansive in the block-∞/RMS norm",
          "For a row-stochastic P and any V, ‖PV‖_B ≤ ‖V‖_B where ‖X‖_B = max_i ‖x_i‖₂/√d; the "
          "same fails in the Frobenius norm by a factor up to √L.", group=_GEOM),
    Claim("C9", "Local multi-head attention Jacobian bound",
          "The B→B norm of the multi-head attention Jacobian at X is at most "
          "‖W_O‖₂ · max_i √(Σ_h (‖W_V^h‖₂ + θ(p_i^h) a_i^h r^h/τ)²), with a_i^h and r^h as in "
          "MATH.md: the softmax part enters only through θ of each attention row.",
          uses=("C2", "C8"), group=_GEOM),
    Claim("C10", "Length-independent Lipschitz bound on bounded inputs",
          "On D_R = {X : max_i RMS(x_i) ≤ R} multi-head attention is Lipschitz in ‖·‖_B with "
          "constant ‖W_O‖₂ √(Σ_h ‖W_V^h‖₂² (1 + 2dR²‖W_Q^h W_K^{hT}‖₂/τ)²), independent of L; "
          "without the bound R no such constant exists.",
          uses=("C9",), group=_GEOM),
    Claim("C11", "LayerNorm Jacobian structure",
          "J_LN(x) = (1/s) diag(γ)(Π − α ĉĉᵀ) with α = σ²/(σ² + eps); J_LN 1 = 0, (1/γ)ᵀ J_LN = 0, "
          "rank d − 2 when eps = 0 and d − 1 when eps > 0, and J_LN c = 0 only when eps = 0.",
          group=_NORM),
    Claim("C12", "Pre-LN residual Jacobian has an additive identity",
          "For a pre-LN sublayer x ↦ x + F(LN x), J_pre = I + J_F(LN x) J_LN(x), and J_pre 1 = 1 "
          "for each token.", uses=("C11",), group=_NORM),
    Claim("C13", "Post-LN residual Jacobian has no additive identity",
          "For a post-LN sublayer x ↦ LN(x + F(x)), J_post = J_LN(y)(I + J_F(x)) has the left "
          "kernel vector 1/γ per token, hence ‖J_post − I‖₂ ≥ 1.", uses=("C11",), group=_NORM),
    Claim("C14", "LayerNorm projection lemma",
          "‖J_LN(z)‖₂ ≤ ‖γ‖_∞/√(σ(z)² + eps).  Equality holds exactly when some nonzero v "
          "supported where |γ| is largest is orthogonal to both 1 and the centred input c; a "
          "constant γ with d ≥ 3 is one such case, but not the only one (MATH.md's 'iff γ is "
          "constant' is too strong: γ = (2, 2, 2, 1) attains it).  If σ(z_l)² + eps ≥ "
          "c²‖γ_l‖²_∞ with c > 1 at every one of N layers, the LayerNorm-only product has norm "
          "at most c^(−N).", uses=("C11",), group=_NORM),
    Claim("C15", "Post-LN chain rule",
          "Through N post-LN sublayers the Jacobian is Π_l J_LN(y_l)(I + J_F_l), and its "
          "LayerNorm-only term Π_l J_LN(y_l) is block-diagonal over tokens.",
          uses=("C13",), group=_NORM),
    Claim("X1", "Measured: the projection lemma's condition on a real post-LN model (beyond the paper; pass = measured, verdict in the evidence)",
          "Whether σ(y)² + eps ≥ ‖γ‖²_∞ (ρ > 1) holds for the LayerNorm inputs of a trained "
          "post-LN transformer, measured per token and layer; the paper does not test it.",
          notes='Measured on all-MiniLM-L6-v2 by the check below. On our own trained `small-cpu` checkpoints (step 600, results/x1/postln_probe_trained.txt; not re-run in CI because checkpoints are not committed): in the post-LN run ρ sits near 1 (medians 0.92–1.13 after the first block), the condition holds at every LayerNorm for no token, and the LayerNorm-only product over the 12 block norms is certified ≤ 18.6 with actual per-token norms 6.7–17.4, so it does not contract; in the pre-LN run ρ < 1 for 89–100 % of tokens at every LayerNorm, but there the identity path bypasses the norms (C12).',
          uses=("C14",), group=_NORM),
    Claim("E1", "Attention concentrates during training",
          "In pre-LN GPT-2 early training, mean p_max rises and mean entropy falls from the "
          "first to the last checkpoint, per run and per layer.", notes="CPU scale: `small-cpu` (pre-LN GPT-2, 6 layers, width 256, context 256, byte-level tokens of Python's own documentation), 600 updates of 4096 tokens, 3 seeds, probed at steps 0, 20, 60, 200, 600; see results/README.md. Agrees with the paper: every layer of every seed concentrates. Scale: 2.5 M training tokens is about 0.05 % of one 774M run's budget, so the concentration seen here is the very start of the trend the paper reports.",
          group=_EMP,
          assumes=("measured at CPU scale, not on the paper's 774M runs",
                   "the paper's 'substantially' is not quantified: the check requires a strict rise of p_max and fall of entropy and reports their sizes")),
    Claim("E2", "Median θ certificate stays near one",
          "At every sampled layer and checkpoint the median certified lower bound on θ is near 1.",
          uses=("C7",), notes="CPU scale: `small-cpu` (pre-LN GPT-2, 6 layers, width 256, context 256, byte-level tokens of Python's own documentation), 600 updates of 4096 tokens, 3 seeds, probed at steps 0, 20, 60, 200, 600; see results/README.md. Agrees with the paper. Why it is expected: a long, diffuse row (many atoms, p_max well below 1/2) almost always admits a near-perfect bisection, and C5 already gives θ ≥ 1 − p_max². Scale may matter through sharper heads after longer training (more rows near or above p_max = 1/2) and through longer contexts (1024 keys, which make near-perfect bisections easier still).",
          group=_EMP,
          assumes=("measured at CPU scale, not on the paper's 774M runs",)),
    Claim("E3", "A minority of rows is dominant",
          "A minority of attention rows has p_max ≥ 1/2, and for those θ equals 4m(1 − m).",
          uses=("C4",), notes="CPU scale: `small-cpu` (pre-LN GPT-2, 6 layers, width 256, context 256, byte-level tokens of Python's own documentation), 600 updates of 4096 tokens, 3 seeds, probed at steps 0, 20, 60, 200, 600; see results/README.md. Agrees with the paper: dominant rows are a small minority in every layer (they grow from about 1 % at initialisation to about 5 % at step 600), and each one's certificate is exactly 4m(1 − m). Longer training at 774M scale may raise the fraction; only the cluster runs can tell whether it stays a minority.",
          group=_EMP,
          assumes=("measured at CPU scale, not on the paper's 774M runs",)),
]:
    add_claim(_c)
