(* C2's wrong variant θ(p)/2 is false: at p = (1/2, 1/2) a sign vector reaches θ = 1. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C2_half_refuted :
  ~ (forall (p x : 'I_2 -> rat), distribution p -> in_box x -> norm1 (Cx p x) <= theta p / 2).
Proof.
move=> h; have hp := uniform_distribution Q (isT : (0 < 2)%N).
have [S eS] := theta_attained (uniform Q 2).
have := le_trans (norm1_sv_ge (uniform Q 2) S) (h _ _ hp (sv_box S)).
rewrite bil_sv; last by case: hp.
by rewrite -eS C3_uniform //; apply/negP; vm_compute.
Qed.
