(* Negative control for C2: the bound θ(p)/2 is wrong.  The proof script of
   C2_box must fail on it (checked by proofs/checks/coq.py). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C2_half_wrong (R : realFieldType) (L : nat) (p x : 'I_L -> R) :
  distribution p -> in_box x -> norm1 (Cx p x) <= theta p / 2.
Proof.
move=> hp hx; apply: le_trans (norm1_le_vertex p hx) _.
set z := [set i | _]; set y := [set j | _].
rewrite -(ler_pmul2l (_ : 0 < 2)) ?ltr0n //; apply: le_trans (bil_2le _ _ hp) _.
rewrite !bil_sv; try by case: hp.
by rewrite mulr_natl mulr2n ler_add ?theta_ge.
Qed.
