(* The pinned statements: every theorem the dashboard shows, stated here outside
   any section with the definitions of Theta.v only (the theorem files are
   loaded with Require, not Import, so nothing they define or redefine can
   enter a statement below).  Each proof is a plain `exact` of the development's
   theorem, which type-checks only if that theorem's type is this statement up
   to conversion: an extra premise (a section Hypothesis, say), a changed
   hypothesis or a dropped conjunct makes this file fail to compile.

   The line (** Cn: ... *) above each theorem is its readable form; the
   dashboard (paper_checks.md) and the README table are generated from it by
   proofs/checks/coq.py, which also checks that this file holds nothing else:
   imports, scope settings and `Theorem name : statement. Proof. exact
   (@File.name). Qed.` blocks, each with its readable line.
   Δ_L = {p : p_i ≥ 0, Σp = 1} is `distribution`; θ is `theta`.
   C1 and C2_jacobian are over a realType (mathcomp-analysis): softmax is
   Softmax.v's, `is_derive 0 1 f d` says f : R → R is derivable at 0 with
   derivative d; they rest on the classical axioms that mathcomp-analysis
   assumes, which the dashboard names next to them. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.analysis Require Import reals topology normedtype derive.
From AttnSens Require Import Theta Softmax.
From AttnSens Require C1.
From AttnSens Require C2 C3 C4 C5 C6 C7 C8.
From AttnSens Require Checker.
From AttnSens Require LayerNorm C11 LayerNormDerive C12 C13.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.
Local Open Scope ring_scope.

(** C1: ∀ L ≥ 1, u, v ∈ R^L, τ > 0, i, R any realType: d/dh softmax((u + hv)/τ)_i at h = 0 is (C(p)v)_i/τ with p = softmax(u/τ) (the derivative of u ↦ softmax(u/τ) along every direction v is C(p)/τ) *)
Theorem C1_directional : forall (R : realType) (L : nat) (u v : 'I_L -> R) (tau : R) (i : 'I_L),
  0 < tau ->
  is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * v j) / tau) i)
    (Cx (softmax (fun j => u j / tau)) v i / tau).
Proof. exact (@C1.C1_directional). Qed.

(** C1: ∀ L ≥ 1, z ∈ R^L, R any realType: softmax(z) ∈ Δ_L (so C2–C8 apply to p = softmax(u/τ)) *)
Theorem softmax_distribution : forall (R : realType) (L : nat) (z : 'I_L -> R),
  (0 < L)%N -> distribution (softmax z).
Proof. exact (@Softmax.softmax_distribution). Qed.

(** C2: ∀ L, p ∈ Δ_L, τ > 0, x with |x_i| ≤ 1: ‖(C(p)/τ)x‖₁ ≤ θ(p)/τ (the whole box, not only sign vectors) *)
Theorem C2_upper : forall (R : realFieldType) (L : nat) (p : 'I_L -> R) (tau : R) (x : 'I_L -> R),
  distribution p -> 0 < tau -> in_box x -> norm1 (fun i => Cx p x i / tau) <= theta p / tau.
Proof. exact (@C2.C2_upper). Qed.

(** C2: ∀ L, p ∈ Δ_L, τ > 0: ∃ S, ‖(C(p)/τ)(1_S − 1_Sᶜ)‖₁ = θ(p)/τ *)
Theorem C2_attained : forall (R : realFieldType) (L : nat) (p : 'I_L -> R) (tau : R),
  distribution p -> 0 < tau -> exists S : {set 'I_L}, norm1 (fun i => Cx p (sv S) i / tau) = theta p / tau.
Proof. exact (@C2.C2_attained). Qed.

(** C2: ∀ L, p ∈ Δ_L: max over x ∈ {±1}^L of ‖C(p)x‖₁ = θ(p) *)
Theorem C2_inf1norm : forall (R : realFieldType) (L : nat) (p : 'I_L -> R),
  distribution p -> inf1norm p = theta p.
Proof. exact (@C2.C2_inf1norm). Qed.

(** C2: ∀ L ≥ 1, u ∈ R^L, τ > 0, R any realType, p = softmax(u/τ): along every x with |x_i| ≤ 1 the derivative D of h ↦ softmax((u + hx)/τ) at 0 exists and ‖D‖₁ ≤ θ(p)/τ, with equality along some sign vector 1_S − 1_Sᶜ (‖J‖∞→1 = θ(p)/τ for the softmax Jacobian J itself, by C1) *)
Theorem C2_jacobian : forall (R : realType) (L : nat) (u : 'I_L -> R) (tau : R),
  (0 < L)%N -> 0 < tau ->
  (forall x : 'I_L -> R, in_box x -> exists D : 'I_L -> R,
     (forall i, is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * x j) / tau) i) (D i))
     /\ norm1 D <= theta (softmax (fun j => u j / tau)) / tau)
  /\ exists S : {set 'I_L}, exists D : 'I_L -> R,
     (forall i, is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * sv S j) / tau) i) (D i))
     /\ norm1 D = theta (softmax (fun j => u j / tau)) / tau.
Proof. exact (@C1.C2_jacobian). Qed.

(** C3: ∀ L ≥ 1: θ(uniform on L atoms) = 1 − 1/L² for odd L (0 at L = 1), 1 for even L *)
Theorem C3_uniform : forall (R : realFieldType) (L : nat),
  (0 < L)%N -> theta (uniform R L) = (if odd L then 1 - (L%:R ^+ 2)^-1 else 1).
Proof. exact (@C3.C3_uniform). Qed.

(** C4: ∀ L, p ∈ Δ_L, i with p_i ≥ 1/2 (so p_i = max p): θ(p) = 4p_i(1 − p_i) *)
Theorem C4_dominant : forall (R : realFieldType) (L : nat) (p : 'I_L -> R) (i0 : 'I_L),
  distribution p -> 2^-1 <= p i0 -> theta p = 4 * p i0 * (1 - p i0).
Proof. exact (@C4.C4_dominant). Qed.

(** C5: ∀ L, any row p ∈ R^L, any i: θ(p) ≥ 4p_i(1 − p_i) (the singleton {i}) *)
Theorem C5_singleton : forall (R : realFieldType) (L : nat) (p : 'I_L -> R) (i : 'I_L),
  4 * p i * (1 - p i) <= theta p.
Proof. exact (@C4.C5_singleton). Qed.

(** C5: ∀ L, p ∈ Δ_L, m = max_i p_i: θ(p) ≥ 4m(1 − m) and θ(p) ≥ 1 − m² (the second by greedy signing: some S has |p(S) − p(Sᶜ)| ≤ m) *)
Theorem C5_pmax : forall (R : realFieldType) (L : nat) (p : 'I_L -> R),
  distribution p -> 4 * pmax p * (1 - pmax p) <= theta p /\ 1 - pmax p ^+ 2 <= theta p.
Proof. exact (@C5.C5_pmax). Qed.

(** C6: ∀ L, any row p ∈ R^(L+1), i with p_i = 0: θ(p) = θ(p with atom i removed) (so appending or removing zero atoms leaves θ unchanged) *)
Theorem C6_zero_atom : forall (R : realFieldType) (L : nat) (p : 'I_L.+1 -> R) (i0 : 'I_L.+1),
  p i0 = 0 -> theta p = theta (fun j : 'I_L => p (lift i0 j)).
Proof. exact (@C6.C6_zero_atom). Qed.

(** C6: ∀ L, p, q ∈ Δ_L: |θ(p) − θ(q)| ≤ 2‖p − q‖₁ *)
Theorem C6_lipschitz : forall (R : realFieldType) (L : nat) (p q : 'I_L -> R),
  distribution p -> distribution q -> `|theta p - theta q| <= 2 * norm1 (fun i => p i - q i).
Proof. exact (@C6.C6_lipschitz). Qed.

(** C7: ∀ L, x ∈ R^L, S with a = Σ_S x_i, b = Σ_Sᶜ x_i, a + b ≠ 0: θ(x/(a + b)) ≥ 4ab/(a + b)² (no sign condition needed) *)
Theorem C7_certificate : forall (R : realFieldType) (L : nat) (x : 'I_L -> R) (S : {set 'I_L}),
  mass x S + mass x (~: S) != 0 ->
  4 * mass x S * mass x (~: S) / (mass x S + mass x (~: S)) ^+ 2
    <= theta (fun i => x i / (mass x S + mass x (~: S))).
Proof. exact (@C7.C7_certificate). Qed.

(** C7: ∀ L, p ∈ Δ_L: θ(p) = 1 − δ(p)² with δ(p) = min_S |p(S) − p(Sᶜ)| *)
Theorem C7_delta : forall (R : realFieldType) (L : nat) (p : 'I_L -> R),
  distribution p -> theta p = 1 - delta p ^+ 2.
Proof. exact (@C7.C7_delta). Qed.

(** C7: the certificate checker (Checker.v, extracted to OCaml for `verify --checker coq`): for a row of L integer weights w_i ≥ 0, claims given as integer pairs n/d, a witness mask and two search hints (any hints are sound), check_row = true ⇒ θ_lo ≤ θ(p) ≤ θ_hi and gap_lo ≤ 1 − θ(p) ≤ gap_hi for p = w/Σw, and regime 0 iff some p_i ≥ 1/2 *)
Theorem check_row_sound : forall (R : realFieldType) (L : nat) (w : seq BinNums.Z) (wit hd cj : seq bool)
  (lo hi glo ghi tol : BinNums.Z * BinNums.Z) (reg : BinNums.Z),
  size w = L -> Checker.check_row w wit hd cj lo hi glo ghi tol reg = true ->
  let p := fun i : 'I_L => ((ssrZ.int_of_Z (nth BinNums.Z0 w i))%:~R / (ssrZ.int_of_Z (Checker.sumZ w))%:~R : R) in
  let q := fun a : BinNums.Z * BinNums.Z => ((ssrZ.int_of_Z a.1)%:~R / (ssrZ.int_of_Z a.2)%:~R : R) in
  (q lo <= theta p <= q hi /\ q glo <= 1 - theta p <= q ghi) /\ (reg = BinNums.Z0 <-> exists i : 'I_L, 2^-1 <= p i).
Proof. exact (@Checker.check_row_sound). Qed.

(** C8: ∀ L, d, P ∈ R^(L×L) row-stochastic (P_ij ≥ 0, Σ_j P_ij = 1), V ∈ R^(L×d), M with ‖v_j‖₂² ≤ M for every row j: ‖(PV)_i‖₂² ≤ M for every row i (so ‖PV‖_B ≤ ‖V‖_B, ‖X‖_B = max_i ‖x_i‖₂/√d) *)
Theorem C8_row_nonexpansive : forall (R : realFieldType) (L : nat) (d : nat) (P : 'M[R]_L) (V : 'M[R]_(L, d)) (M : R),
  (forall i j, 0 <= P i j) -> (forall i, \sum_j P i j = 1) ->
  (forall j, \sum_k V j k ^+ 2 <= M) ->
  forall i, \sum_k (P *m V) i k ^+ 2 <= M.
Proof. exact (@C8.C8_row_nonexpansive). Qed.

(** C11: ∀ d, x, γ ∈ R^d, eps, s: J_LN(x)·1 = 0, where J_LN(x) := (1/s) diag(γ)(Π − ccᵀ/(d(σ² + eps))) = (1/s) diag(γ)(Π − αĉĉᵀ), Π = I − 11ᵀ/d, c = Πx, σ² = ‖c‖²/d (LayerNorm has s = √(σ² + eps), and this closed form is its derivative: C11_derivative; the facts hold for any s) *)
Theorem C11_kills_ones : forall (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R),
  LayerNorm.ln_jac x g eps s *m LayerNorm.ones = 0.
Proof. exact (@C11.C11_kills_ones). Qed.

(** C11: ∀ d, x, eps, s, γ with no zero entry: (1/γ)ᵀ J_LN(x) = 0 *)
Theorem C11_left_null : forall (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R),
  (forall i, g i != 0) -> LayerNorm.inv_gamma g *m LayerNorm.ln_jac x g eps s = 0.
Proof. exact (@C11.C11_left_null). Qed.

(** C11: ∀ d, x, eps > 0, s ≠ 0, γ with no zero entry: rank J_LN(x) = d − 1 *)
Theorem C11_rank_eps_pos : forall (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R),
  0 < eps -> s != 0 -> (forall i, g i != 0) -> \rank (LayerNorm.ln_jac x g eps s) = (d - 1)%N.
Proof. exact (@C11.C11_rank_eps_pos). Qed.

(** C11: ∀ d, x with σ² ≠ 0 (not constant), s ≠ 0, γ with no zero entry, eps = 0: rank J_LN(x) = d − 2 *)
Theorem C11_rank_eps0 : forall (R : realFieldType) (d : nat) (x g : 'I_d -> R) (s : R),
  LayerNorm.var x != 0 -> s != 0 -> (forall i, g i != 0) -> \rank (LayerNorm.ln_jac x g 0 s) = (d - 2)%N.
Proof. exact (@C11.C11_rank_eps0). Qed.

(** C11: ∀ d, x with σ² ≠ 0, eps ≥ 0, s ≠ 0, γ with no zero entry: J_LN(x) c = 0 exactly when eps = 0 *)
Theorem C11_Jc : forall (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R),
  0 <= eps -> LayerNorm.var x != 0 -> s != 0 -> (forall i, g i != 0) ->
  (LayerNorm.ln_jac x g eps s *m LayerNorm.cvec x == 0) = (eps == 0).
Proof. exact (@C11.C11_Jc). Qed.

(** C11: ∀ d, x, γ, β, v ∈ R^d, eps with σ² + eps > 0, i, R any realType: d/dh LN(x + hv)_i at h = 0 is (J_LN(x) v)_i with s = √(σ² + eps), LN(x)_i = γ_i c_i/√(σ² + eps) + β_i (the closed form is LayerNorm's Jacobian, along every direction v) *)
Theorem C11_derivative : forall (R : realType) (d : nat) (x g b v : 'I_d -> R) (eps : R) (i : 'I_d),
  0 < LayerNorm.var x + eps ->
  is_derive (0 : R) (1 : R) (fun h : R => LayerNorm.layernorm (fun j => x j + h * v j) g b eps i)
    ((LayerNorm.ln_jac x g eps (Num.sqrt (LayerNorm.var x + eps)) *m \col_j v j) i 0).
Proof. exact (@LayerNormDerive.C11_derivative). Qed.

(** C12: ∀ L, d, X ∈ R^(L×d), γ, eps, s_t, any linear J_F on R^(L×d), a ∈ R^L: J_pre(a ⊗ 1) = a ⊗ 1 (so J_pre 1_t = 1_t for each token t), where J_pre V := V + J_F(J_LN V), J_LN acting token by token (the chain rule for x ↦ x + F(LN x) is the definition) *)
Theorem C12_pre_ln_identity : forall (R : realFieldType) (L d : nat) (X : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : {linear 'M[R]_(L, d) -> 'M[R]_(L, d)}) (a : 'I_L -> R),
  LayerNorm.pre_ln_jac X g eps s JF (LayerNorm.tok_const a) = LayerNorm.tok_const a.
Proof. exact (@C12.C12_pre_ln_identity). Qed.

(** C13: ∀ L, d, Y ∈ R^(L×d), eps, s_t, any map J_F, any token t, γ with no zero entry: ⟨e_t ⊗ 1/γ, J_post V⟩ = 0 for every V, where J_post V := J_LN(Y)(V + J_F V) (the chain rule for x ↦ LN(x + F(x)), Y = x + F(x), is the definition) *)
Theorem C13_left_null : forall (R : realFieldType) (L d : nat) (Y : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) (t0 : 'I_L),
  (forall k, g k != 0) -> forall V, LayerNorm.frob (LayerNorm.tok_inv_gamma g t0) (LayerNorm.post_ln_jac Y g eps s JF V) = 0.
Proof. exact (@C13.C13_left_null). Qed.

(** C13: ∀ L, d ≥ 1, Y, eps, s_t, any map J_F, any token t, γ with no zero entry: W = e_t ⊗ 1/γ ≠ 0 and ‖(J_post − I)W‖² ≥ ‖W‖², so ‖J_post − I‖₂ ≥ 1 (no additive identity path) *)
Theorem C13_no_identity : forall (R : realFieldType) (L d : nat) (Y : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) (t0 : 'I_L),
  (0 < d)%N -> (forall k, g k != 0) ->
  LayerNorm.tok_inv_gamma g t0 != 0 /\
  LayerNorm.frob (LayerNorm.tok_inv_gamma g t0) (LayerNorm.tok_inv_gamma g t0) <=
    LayerNorm.frob (LayerNorm.post_ln_jac Y g eps s JF (LayerNorm.tok_inv_gamma g t0) - LayerNorm.tok_inv_gamma g t0)
                   (LayerNorm.post_ln_jac Y g eps s JF (LayerNorm.tok_inv_gamma g t0) - LayerNorm.tok_inv_gamma g t0).
Proof. exact (@C13.C13_no_identity). Qed.
