(* C3 with parities swapped is false at L = 2 (θ = 1, not 3/4). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C3_swapped_refuted :
  ~ (forall L, (0 < L)%N -> theta (uniform Q L) = if odd L then 1 else 1 - (L%:R ^+ 2)^-1).
Proof.
(* θ(uniform 2) = 1 by C3_uniform; the wrong side is 1 − 1/4; they differ. *)
(* (simpl and done on rationals are slow, so the comparison is left to vm_compute) *)
move=> h; have := h 2%N isT; rewrite (C3_uniform _ (isT : (0 < 2)%N)) => /eqP.
by apply/negP; vm_compute.
Qed.
