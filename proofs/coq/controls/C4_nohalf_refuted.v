(* C4 without p_i ≥ 1/2 is false: uniform on 4 atoms has θ = 1 but 4m(1 − m) = 3/4. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C4_nohalf_refuted :
  ~ (forall (p : 'I_4 -> rat) i0, distribution p -> theta p = 4 * p i0 * (1 - p i0)).
Proof.
move=> h; have := h _ ord0 (uniform_distribution Q (isT : (0 < 4)%N)).
rewrite (C3_uniform _ (isT : (0 < 4)%N)) => /eqP.
by apply/negP; vm_compute.
Qed.
