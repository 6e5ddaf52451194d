(* Evaluating the abstract definitions of Theta.v on concrete rational rows
   (issue 11, item 4: the Coq θ and ‖C‖∞→1 must be the objects numerics/ computes).
   Sums over a finite type do not reduce by computation in MathComp (the
   enumeration of 'I_L is opaque), so sums are unfolded by rewriting and the
   2^L subsets are split by cases; each case is closed by vm_compute over rat. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

(* The row s as a function on 'I_L (entries beyond size s are 0). *)
Definition row (L : nat) (s : seq rat) : 'I_L -> rat := fun i => nth 0 s i.
Arguments row : clear implicits.
(* The subset with bit i of the mask set (numerics/theta.py: mask bit i = position i). *)
Definition of_mask (L mask : nat) : {set 'I_L} := [set i : 'I_L | odd (mask %/ 2 ^ i)].

Lemma mass_cases L (p : 'I_L -> rat) S : mass p S = \sum_i (if i \in S then p i else 0).
Proof. by rewrite /mass big_mkcond. Qed.

(* θ(p) = v from: every subset gives at most v, and the witness gives exactly v. *)
Lemma theta_eval L (p : 'I_L -> rat) v W :
  (forall S, split_value p S <= v) -> split_value p W == v -> theta p == v.
Proof.
move=> hle /eqP hw; apply/eqP/le_anti/andP; split; last by rewrite -hw theta_ge.
by apply: theta_le => //; apply: le_trans (hle set0); rewrite split_value0.
Qed.

(* No simpl (/=) here: simpl on rational constants is very slow. *)
Ltac unfold_sums := rewrite ?big_ord_recr ?big_ord0.
(* Closes ∀ S, split_value p S <= v by splitting on the membership of each atom. *)
Ltac all_subsets :=
  let S := fresh "S" in
  move=> S; rewrite /split_value mass_cases; unfold_sums;
  repeat match goal with |- context [if in_mem ?i ?m then _ else _] => case: (in_mem i m) end;
  vm_compute; reflexivity.
Ltac witness := rewrite /split_value mass_cases; unfold_sums; rewrite ?inE; vm_compute; reflexivity.
Ltac norm_at_sign := rewrite /norm1 /Cx /sv; unfold_sums; rewrite ?mxE ?inE; vm_compute; reflexivity.

(* A self-test: p = (1/2, 1/3, 1/6); θ = 1 from S = {0} (mass 1/2). *)
Lemma eval_selftest : theta (row 3 [:: 1/2; 1/3; 1/6]) == 1.
Proof. by apply: (@theta_eval _ _ _ (of_mask 3 1)); [all_subsets | witness]. Qed.
