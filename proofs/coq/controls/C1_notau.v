(* Negative control for C1: the derivative of u ↦ softmax(u/τ) without the 1/τ (C(p) instead of
   C(p)/τ) is wrong.  The proof script of C1_directional must fail on it, in its last step
   (checked by proofs/checks/coq.py); C1_notau_refuted.v refutes it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun exp.
From AttnSens Require Import Theta Softmax C1.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.
Local Open Scope ring_scope.

Theorem C1_notau_wrong (R : realType) (L : nat) (u v : 'I_L -> R) (tau : R) (i : 'I_L) : 0 < tau ->
  is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * v j) / tau) i)
    (Cx (softmax (fun j => u j / tau)) v i).
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
