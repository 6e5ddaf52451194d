(* Negative control for C4: without p_i ≥ 1/2.  The proof script of C4_dominant must fail. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C4_nohalf_wrong (R : realFieldType) (L : nat) (p : 'I_L -> R) i0 :
  distribution p -> theta p = 4 * p i0 * (1 - p i0).
Proof.
move=> hp; have [p0 hs] := hp.
apply/le_anti/andP; split; last exact: C5_singleton.
apply: theta_le => [|S].
  by rewrite -mulrA mulr_ge0 ?ler0n // mulr_ge0 ?subr_ge0 ?atom_le1.
case: (boolP (i0 \in S)) => hS; first by apply: four_m_decr => //; exact: mass_ge_atom.
rewrite -split_value_compl //; apply: four_m_decr => //.
by apply: mass_ge_atom => //; rewrite in_setC.
Qed.
