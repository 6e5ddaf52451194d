(* C7 with constant 8 is false: x = (1/2, 1/2), S = {0} would give θ ≥ 2 > 1. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C7_const8_refuted :
  ~ (forall (x : 'I_2 -> rat) S, mass x S + mass x (~: S) != 0 ->
       8 * mass x S * mass x (~: S) / (mass x S + mass x (~: S)) ^+ 2
         <= theta (fun i => x i / (mass x S + mass x (~: S)))).
Proof.
move=> h; have [_ hs] := uniform_distribution Q (isT : (0 < 2)%N).
have ha : mass (uniform Q 2) [set ord0] = 2^-1 by rewrite /mass big_set1.
have := h (uniform Q 2) [set ord0]; rewrite mass_compl // ha.
move=> /(_ (ltac:(by vm_compute))) h1.
have := le_trans h1 (theta_le ler01 (fun S => split_value_le1 _ S)).
by apply/negP; vm_compute.
Qed.
