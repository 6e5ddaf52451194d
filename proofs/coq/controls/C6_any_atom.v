(* Negative control for C6 (zero atoms): removing an atom without p_i0 = 0.
   The proof script of C6_zero_atom must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C6_any_atom_wrong (R : realFieldType) (L : nat) (p : 'I_L.+1 -> R) i0 :
  theta p = theta (fun j => p (lift i0 j)).
Proof.
apply/le_anti/andP; split.
  apply: theta_le => [|S]; first by rewrite -(split_value0 (fun j => p (lift i0 j))) theta_ge.
  by rewrite (split_lift S) theta_ge.
apply: theta_le => [|T]; first by rewrite -(split_value0 p) theta_ge.
by rewrite -split_imset_lift theta_ge.
Qed.
