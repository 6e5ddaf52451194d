(* J_LN(x) γ = 0 is false: d = 2, x = (0, 2) (mean 1, c = (−1, 1), σ² = 1),
   eps = 3, s = 2 = √(σ² + eps), γ = (1, 2).  Then P = Π − ccᵀ/8 has rows
   (3/8, −3/8) and (−3/8, 3/8), and the first entry of J_LN(x) γ = (1/2) diag(γ) P γ
   is (1/2)(3/8 − 6/8) = −3/16.  J_LN(x) 1 = 0 holds there (C11_kills_ones). *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta Eval LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C11_gamma_refuted :
  ~ (forall (x g : 'I_2 -> rat) (eps s : rat), ln_jac x g eps s *m (\col_i g i) = 0).
Proof.
move=> h; have /matrixP/(_ ord0 ord0) := h (row 2 [:: 0; 2]) (row 2 [:: 1; 2]) 3 2.
rewrite [LHS]mxE [RHS]mxE !big_ord_recr big_ord0 !ln_jacE !ln_PE !mxE.
rewrite /var /cen /mean !big_ord_recr !big_ord0.
by move/eqP; apply/negP; vm_compute.
Qed.
