(* C8 (row-stochastic mixing is nonexpansive in the block-∞/RMS norm), for every
   L and every width d.  With P an L×L matrix, P_ij ≥ 0, Σ_j P_ij = 1, V an L×d
   matrix and Y = PV, every row satisfies ‖y_i‖₂² ≤ max_j ‖v_j‖₂² (squared
   norms: ‖X‖_B = max_i ‖x_i‖₂/√d, and the √d cancels).  Per column k, Jensen
   for the square: (Σ_j P_ij V_jk)² ≤ Σ_j P_ij V_jk², which is the variance
   identity of C2's PSD step (bil_psd: Σ_j P_ij (V_jk − y_ik)² ≥ 0 with row i
   of P as the distribution); summing over k and swapping the sums,
   ‖y_i‖² ≤ Σ_j P_ij ‖v_j‖² ≤ Σ_j P_ij M = M. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C8.
Variables (R : realFieldType) (L d : nat).

(* Jensen for the square, one column: (Σ_j p_j v_j)² ≤ Σ_j p_j v_j². *)
Lemma jensen_sq (p v : 'I_L -> R) : distribution p ->
  (\sum_j p j * v j) ^+ 2 <= \sum_j p j * v j ^+ 2.
Proof.
move=> hp; rewrite -subr_ge0 expr2.
rewrite (eq_bigr (fun j => p j * v j * v j)) => [|j _]; last by rewrite expr2 mulrA.
exact: (bil_psd v hp).
Qed.

Theorem C8_row_nonexpansive (P : 'M[R]_L) (V : 'M[R]_(L, d)) (M : R) :
  (forall i j, 0 <= P i j) -> (forall i, \sum_j P i j = 1) ->
  (forall j, \sum_k V j k ^+ 2 <= M) ->
  forall i, \sum_k (P *m V) i k ^+ 2 <= M.
Proof.
move=> P0 P1 hV i; have hp : distribution (fun j => P i j) by split.
apply: (@le_trans _ _ (\sum_k \sum_j P i j * V j k ^+ 2)).
  by apply: ler_sum => k _; rewrite mxE; exact: (jensen_sq (fun j => V j k) hp).
rewrite exchange_big /= -[M]mul1r -(P1 i) mulr_suml; apply: ler_sum => j _.
by rewrite -mulr_sumr ler_wpmul2l.
Qed.

End C8.
