(* C6 without p_i0 = 0 is false: removing atom 0 of the row (1/2, 1) takes θ
   from 1 (S = {0}) to θ((1)) = 0.  (For a distribution the unnormalised
   removal of any atom keeps θ, since S or Sᶜ avoids the atom and
   4a(1 − a) is symmetric under a ↦ 1 − a; so the counterexample is a row
   that does not sum to one, which C6_zero_atom covers.) *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7 Eval.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C6_any_atom_refuted :
  ~ (forall (p : 'I_2 -> rat) (i0 : 'I_2), theta p = theta (fun j => p (lift i0 j))).
Proof.
move=> h; set p := row 2 [:: 1/2; 1].
have hp : theta p == 1.
  by apply: (@theta_eval _ _ _ (of_mask 2 1)); [all_subsets | witness].
have hq : theta (fun j => p (lift ord0 j)) == 0.
  by apply: (@theta_eval _ _ _ (of_mask 1 0)); [all_subsets | witness].
move: hp; rewrite (h p ord0) (eqP hq).
by apply/negP; vm_compute.
Qed.
