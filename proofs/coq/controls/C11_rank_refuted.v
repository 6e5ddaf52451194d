(* rank J_LN(x) = d − 2 with eps > 0 is false: d = 2, x = (0, 2), γ = (1, 1),
   eps = 3, s = 2.  The claimed rank 0 would make J_LN(x) = 0, but its entry
   (0, 0) is (1/2)·(3/8) = 3/16 (the rank is 1 = d − 1, C11_rank_eps_pos). *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta Eval LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C11_rank_refuted :
  ~ (forall (x g : 'I_2 -> rat) (eps s : rat), 0 < eps -> s != 0 -> (forall i, g i != 0) ->
       \rank (ln_jac x g eps s) = (2 - 2)%N).
Proof.
move=> h; have he : (0 : rat) < 3 by vm_compute.
have hs : (2 : rat) != 0 by vm_compute.
have hg : forall i : 'I_2, row 2 [:: 1; 1] i != 0 by move=> [[|[|i]] hi] //; vm_compute.
have /eqP := h (row 2 [:: 0; 2]) (row 2 [:: 1; 1]) 3 2 he hs hg.
rewrite subnn mxrank_eq0 => /eqP/matrixP/(_ ord0 ord0).
rewrite ln_jacE ln_PE [RHS]mxE /var /cen /mean !big_ord_recr !big_ord0.
by move/eqP; apply/negP; vm_compute.
Qed.
