(* C8 in the Frobenius norm is false: L = 2, d = 1, P = [[1, 0], [1, 0]]
   (row-stochastic), V = [[1], [0]] give ‖PV‖_F² = 2 > 1 = ‖V‖_F² (both rows
   of PV copy v_0).  The block-∞ bound of C8_row_nonexpansive holds there:
   each row of PV has squared norm 1 = max_j ‖v_j‖². *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7 C8 Eval.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C8_frobenius_refuted :
  ~ (forall (P : 'M[rat]_2) (V : 'M[rat]_(2, 1)) (M : rat),
       (forall i j, 0 <= P i j) -> (forall i, \sum_j P i j = 1) ->
       \sum_j \sum_k V j k ^+ 2 <= M ->
       \sum_i \sum_k (P *m V) i k ^+ 2 <= M).
Proof.
move=> h; set P : 'M[rat]_2 := \matrix_(i, j) (j == ord0)%:R.
set V : 'M[rat]_(2, 1) := \matrix_(i, k) (i == ord0)%:R.
have P0 : forall i j, 0 <= P i j by move=> i j; rewrite mxE ler0n.
have P1 : forall i, \sum_j P i j = 1.
  by move=> i; rewrite !big_ord_recr big_ord0 !mxE; vm_compute.
have hV : \sum_j \sum_k V j k ^+ 2 <= 1.
  by rewrite !big_ord_recr !big_ord0 !mxE; vm_compute.
have := h P V 1 P0 P1 hV.
rewrite !big_ord_recr !big_ord0 !mxE !big_ord_recr !big_ord0 !mxE.
by apply/negP; vm_compute.
Qed.
