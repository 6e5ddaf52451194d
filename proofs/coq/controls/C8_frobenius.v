(* Negative control for C8: the Frobenius-norm version ‖PV‖_F² ≤ ‖V‖_F² is
   wrong (it fails by a factor up to L).  The proof script of
   C8_row_nonexpansive must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7 C8.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C8_frobenius_wrong (R : realFieldType) (L d : nat) (P : 'M[R]_L) (V : 'M[R]_(L, d)) (M : R) :
  (forall i j, 0 <= P i j) -> (forall i, \sum_j P i j = 1) ->
  \sum_j \sum_k V j k ^+ 2 <= M ->
  \sum_i \sum_k (P *m V) i k ^+ 2 <= M.
Proof.
move=> P0 P1 hV i; have hp : distribution (fun j => P i j) by split.
apply: (@le_trans _ _ (\sum_k \sum_j P i j * V j k ^+ 2)).
  by apply: ler_sum => k _; rewrite mxE; exact: (jensen_sq (fun j => V j k) hp).
rewrite exchange_big /= -[M]mul1r -(P1 i) mulr_suml; apply: ler_sum => j _.
by rewrite -mulr_sumr ler_wpmul2l.
Qed.
