(* Negative control for C7: constant 8 instead of 4.  The proof script of C7_certificate must fail. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C7_const8_wrong (R : realFieldType) (L : nat) (x : 'I_L -> R) S :
  mass x S + mass x (~: S) != 0 ->
  8 * mass x S * mass x (~: S) / (mass x S + mass x (~: S)) ^+ 2
    <= theta (fun i => x i / (mass x S + mass x (~: S))).
Proof.
move=> hT; apply: le_trans (theta_ge _ S); rewrite le_eqVlt; apply/orP; left.
set T := mass x S + mass x (~: S).
rewrite /split_value (_ : mass (fun i => x i / T) S = mass x S / T); last by rewrite /mass -mulr_suml.
by rewrite /T; apply/eqP; field.
Qed.
