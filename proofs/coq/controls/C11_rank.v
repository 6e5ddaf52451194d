(* Negative control for C11: rank J_LN(x) = d − 2 also when eps > 0 (the rank of
   the eps = 0 case) is wrong.  The proof script of C11_rank_eps_pos must fail
   on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C11_rank_wrong (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R) :
  0 < eps -> s != 0 -> (forall i, g i != 0) ->
  \rank (ln_jac x g eps s) = (d - 2)%N.
Proof.
move=> he hs hg; rewrite rank_jac //.
have hv : var x + eps != 0.
  rewrite gt_eqF // ltr_paddl // /var mulr_ge0 ?invr_ge0 ?ler0n //.
  by apply: sumr_ge0 => i _; exact: sqr_ge0.
have [d0|hd] := posnP d.
  by move: (\rank _) (rank_leq_row (ln_P x eps)) => r; rewrite d0 leqn0 => /eqP ->.
apply: rank_from_bounds => //; first exact: rank_P_le1.
by apply: rank_P_ge1; rewrite // gt_eqF.
Qed.
