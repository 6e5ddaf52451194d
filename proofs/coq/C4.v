(* C4 (dominant atom), for every L: if some atom has p_i ≥ 1/2 (so it is the
   largest, m = max p), then θ(p) = 4m(1 − m).  Also the singleton half of C5:
   θ(p) ≥ 4p_i(1 − p_i) for every i. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C4.
Variables (R : realFieldType) (L : nat).
Implicit Types (p : 'I_L -> R) (S : {set 'I_L}).

Lemma split_value_compl p S : \sum_i p i = 1 -> split_value p (~: S) = split_value p S.
Proof. by move=> hs; rewrite /split_value mass_compl //; ring. Qed.

(* a ↦ 4a(1 − a) decreases on [1/2, 1]: 4m(1−m) − 4a(1−a) = 4(a − m)(a + m − 1). *)
Lemma four_m_decr (a m : R) : 2^-1 <= m -> m <= a -> 4 * a * (1 - a) <= 4 * m * (1 - m).
Proof.
move=> hm ha; rewrite -subr_ge0 (_ : _ - _ = 4 * (a - m) * (a + m - 1)); last by ring.
rewrite mulr_ge0 ?mulr_ge0 ?ler0n ?subr_ge0 //.
have -> : 1 = 2^-1 + 2^-1 :> R by field.
by rewrite ler_add // (le_trans hm ha).
Qed.

Lemma singleton_split p i : split_value p [set i] = 4 * p i * (1 - p i).
Proof. by rewrite /split_value /mass big_set1. Qed.

(* C5, first half: θ(p) ≥ 4p_i(1 − p_i) for every atom i. *)
Theorem C5_singleton p i : 4 * p i * (1 - p i) <= theta p.
Proof. by rewrite -singleton_split theta_ge. Qed.

Theorem C4_dominant p i0 : distribution p -> 2^-1 <= p i0 ->
  theta p = 4 * p i0 * (1 - p i0).
Proof.
move=> hp hm; have [p0 hs] := hp.
apply/le_anti/andP; split; last exact: C5_singleton.
apply: theta_le => [|S].
  by rewrite -mulrA mulr_ge0 ?ler0n // mulr_ge0 ?subr_ge0 ?atom_le1.
case: (boolP (i0 \in S)) => hS; first by apply: four_m_decr => //; exact: mass_ge_atom.
rewrite -split_value_compl //; apply: four_m_decr => //.
by apply: mass_ge_atom => //; rewrite in_setC.
Qed.

End C4.
