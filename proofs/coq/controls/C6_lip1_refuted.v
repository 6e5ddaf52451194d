(* θ is not 1-Lipschitz in ℓ1: p = (1, 0), q = (3/4, 1/4) have θ = 0 and 3/4
   but ‖p − q‖₁ = 1/2. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7 Eval.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Lemma row2_distribution (a b : rat) : 0 <= a -> 0 <= b -> a + b == 1 -> distribution (row 2 [:: a; b]).
Proof.
move=> a0 b0 /eqP s; split; last by rewrite !big_ord_recr big_ord0 /= add0r.
by case=> [[|[|k]] hk] //.
Qed.

Theorem C6_lip1_refuted :
  ~ (forall (p q : 'I_2 -> rat), distribution p -> distribution q ->
       `|theta p - theta q| <= norm1 (fun i => p i - q i)).
Proof.
move=> h; set p := row 2 [:: 1; 0]; set q := row 2 [:: 3/4; 1/4].
have hp : theta p == 0.
  by apply: (@theta_eval _ _ _ (of_mask 2 0)); [all_subsets | witness].
have hq : theta q == 3/4.
  by apply: (@theta_eval _ _ _ (of_mask 2 1)); [all_subsets | witness].
have := h p q (@row2_distribution 1 0 ler01 (lexx 0) (ltac:(by vm_compute)))
              (@row2_distribution (3/4) (1/4) (ltac:(by vm_compute)) (ltac:(by vm_compute)) (ltac:(by vm_compute))).
rewrite (eqP hp) (eqP hq) /norm1 ?big_ord_recr ?big_ord0.
by apply/negP; vm_compute.
Qed.
