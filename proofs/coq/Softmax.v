(* The tempered softmax over an arbitrary realType R (ℝ of mathcomp-analysis, or any other model
   of the reals), for C1 and the pinned statements of Spec.v:
     softmax z i = exp(z_i) / Σ_j exp(z_j),
   so softmax(u/τ) is `softmax (fun j => u j / tau)`.  It is numerics/softmax.py:softmax without
   the max-shift (which changes nothing in exact arithmetic).  For L ≥ 1 it is a distribution in
   the sense of Theta.v, so C2–C8 apply to p = softmax(u/τ). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.analysis Require Import reals sequences exp.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section Softmax.
Variables (R : realType) (L : nat).
Implicit Types (z : 'I_L -> R).

Definition softmax z (i : 'I_L) : R := expR (z i) / \sum_j expR (z j).

Lemma softmax_den_gt0 z : (0 < L)%N -> 0 < \sum_j expR (z j).
Proof.
move=> L0; rewrite (bigD1 (Ordinal L0)) //= ltr_paddr ?expR_gt0 //.
by apply: sumr_ge0 => j _; rewrite ltW ?expR_gt0.
Qed.

Lemma softmax_distribution z : (0 < L)%N -> distribution (softmax z).
Proof.
move=> L0; have Z0 := softmax_den_gt0 z L0; split=> [i|].
  by rewrite /softmax divr_ge0 // ltW ?expR_gt0.
by rewrite /softmax -mulr_suml mulfV // lt0r_neq0.
Qed.

End Softmax.
