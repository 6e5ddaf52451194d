(* C1 for every L ≥ 1 and τ > 0, over an arbitrary realType R (Coq 8.16, mathcomp-analysis 0.6.0):
   the derivative of u ↦ softmax(u/τ) is C(p)/τ with p = softmax(u/τ) and C(p) = diag(p) − ppᵀ
   (Cmat of Theta.v).  Stated as the directional derivative in every direction v: the derivative
   at h = 0 of h ↦ softmax((u + h v)/τ)_i is (C(p) v)_i / τ = Cx p v i / τ.  Since p is a
   distribution, C2's bound then speaks of this derivative itself (C2_jacobian below):
   the ℓ1 norm of the derivative along any x in the box |x_i| ≤ 1 is at most θ(p)/τ, with
   equality along some sign vector, i.e. ‖J‖∞→1 = θ(p)/τ for the softmax Jacobian J.

   Proof: softmax_i = e_i · (Σ_j e_j)⁻¹ with e_j(h) = exp((u_j + h v_j)/τ); e_j'(0) = e_j(0) v_j/τ
   (chain rule), so by the product and inverse rules the derivative is
   p_i v_i/τ − p_i (Σ_j p_j v_j)/τ, which is (C(p)v)_i/τ by CxE.  mathcomp-analysis rests on
   three classical axioms (functional and propositional extensionality, constructive indefinite
   description); Print Assumptions names them and proofs/checks/coq.py allows exactly those. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun exp.
From AttnSens Require Import Theta Softmax C2.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C1.
Variables (R : realType) (L : nat).
Implicit Types (u v x : 'I_L -> R).

(* h ↦ (a + h b)/t has derivative b/t at 0. *)
Lemma affine_derive (a b t : R) : is_derive (0 : R) (1 : R) (fun h : R => (a + h * b) / t) (b / t).
Proof.
have -> : (fun h : R => (a + h * b) / t) = cst (a / t) + (b / t) \*: (@idfun R).
  by apply/funext => h; change ((a + h * b) / t = a / t + (b / t) * h); ring.
by apply: is_derive_eq; rewrite add0r [_%:A]mulr1.
Qed.

(* h ↦ exp((a + h b)/t) has derivative exp(a/t) b/t at 0 (chain rule). *)
Lemma exp_affine_derive (a b t : R) :
  is_derive (0 : R) (1 : R) (fun h : R => expR ((a + h * b) / t)) (expR (a / t) * (b / t)).
Proof.
have := @is_derive1_comp _ expR (fun h => (a + h * b) / t) 0 _ _ (is_derive_expR _) (affine_derive a b t).
by rewrite mul0r addr0.
Qed.

(* The algebra left by the product and inverse rules (e = e_i(0), Z = Σ_j e_j(0), K = Σ_j e_j(0) v_j). *)
Lemma quotient_rule (e w K Z t : R) :
  e * (- Z^-1 ^+ 2 * (K / t)) + Z^-1 * (e * (w / t)) = (e / Z * w - e / Z * (K / Z)) / t.
Proof. ring. Qed.

(* C1: the directional derivative of u ↦ softmax(u/τ) along v is (C(p)v)/τ, p = softmax(u/τ). *)
Theorem C1_directional u v (tau : R) (i : 'I_L) : 0 < tau ->
  is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * v j) / tau) i)
    (Cx (softmax (fun j => u j / tau)) v i / tau).
Proof.
move=> t0; pose E j (h : R) := expR ((u j + h * v j) / tau).
have dE j : is_derive (0 : R) (1 : R) (E j) (expR (u j / tau) * (v j / tau)).
  exact: exp_affine_derive.
pose S := \sum_(j < L) E j.
have SE h : S h = \sum_j E j h by rewrite /S fct_sumE.
set Z := \sum_j expR (u j / tau).
have S0 : S 0 = Z by rewrite SE; apply: eq_bigr => j _; rewrite /E mul0r addr0.
have SZ : S 0 != 0 by rewrite S0 lt0r_neq0 // softmax_den_gt0 // (leq_ltn_trans _ (ltn_ord i)).
have dM := is_deriveM (dE i) (is_deriveV SZ (is_derive_sum dE)).
have -> : (fun h : R => softmax (fun j => (u j + h * v j) / tau) i) = E i * (fun h => (S h)^-1).
  apply/funext => h; change (softmax (fun j => (u j + h * v j) / tau) i = E i h * (S h)^-1).
  by rewrite SE.
apply: is_derive_eq; rewrite S0 /E mul0r addr0 CxE /softmax -/Z.
set K := \sum_j expR (u j / tau) * v j.
have K1 : \sum_(j < L) expR (u j / tau) * (v j / tau) = K / tau.
  by rewrite /K mulr_suml; apply: eq_bigr => j _; rewrite mulrA.
have K2 : \sum_j expR (u j / tau) / Z * v j = K / Z.
  by rewrite /K mulr_suml; apply: eq_bigr => j _; rewrite mulrAC.
rewrite K1 K2 -exprVn; exact: quotient_rule.
Qed.

(* C2 for the softmax Jacobian itself: along every x in the box the derivative D exists (C1) and
   ‖D‖₁ ≤ θ(p)/τ (C2_upper, p = softmax(u/τ) being a distribution); along some sign vector
   1_S − 1_Sᶜ it is = θ(p)/τ (C2_attained). *)
Theorem C2_jacobian u (tau : R) : (0 < L)%N -> 0 < tau ->
  (forall x, in_box x -> exists D : 'I_L -> R,
     (forall i, is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * x j) / tau) i) (D i))
     /\ norm1 D <= theta (softmax (fun j => u j / tau)) / tau)
  /\ exists S : {set 'I_L}, exists D : 'I_L -> R,
     (forall i, is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * sv S j) / tau) i) (D i))
     /\ norm1 D = theta (softmax (fun j => u j / tau)) / tau.
Proof.
move=> L0 t0; have hp := softmax_distribution (fun j => u j / tau) L0.
split=> [x hx|].
  exists (fun i => Cx (softmax (fun j => u j / tau)) x i / tau); split.
    by move=> i; exact: C1_directional.
  exact: C2_upper.
have [S eS] := C2_attained hp t0.
exists S, (fun i => Cx (softmax (fun j => u j / tau)) (sv S) i / tau); split=> //.
by move=> i; exact: C1_directional.
Qed.

End C1.
