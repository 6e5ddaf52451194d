(* e_t ⊗ γ is not a left null vector of J_post: L = 1, d = 2, y = (0, 2), eps = 3,
   s = 2, γ = (1, 2), J_F = 0, V = e_0 (the tangent with V_00 = 1, else 0).  Then
   J_post V = J_LN(y) e_0 and ⟨γ, J_LN(y) e_0⟩ = (1/2) Σ_k γ_k² P_k0
   = (1/2)(3/8 − 4·3/8) = −9/16 ≠ 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta Eval LayerNorm C11 C12 C13.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C13_gamma_refuted :
  ~ (forall (Y : 'M[rat]_(1, 2)) (g : 'I_2 -> rat) (eps : rat) (s : 'I_1 -> rat)
       (JF : 'M[rat]_(1, 2) -> 'M[rat]_(1, 2)) (t0 : 'I_1),
       (forall k, g k != 0) ->
       forall V, frob (\matrix_(t, k) ((t == t0)%:R * g k)) (post_ln_jac Y g eps s JF V) = 0).
Proof.
move=> h; have hg : forall k : 'I_2, row 2 [:: 1; 2] k != 0 by move=> [[|[|i]] hi] //; vm_compute.
have := h (\matrix_(t, k) row 2 [:: 0; 2] k) (row 2 [:: 1; 2]) 3 (fun _ => 2) (fun _ => 0) ord0 hg
  (\matrix_(t, k) (k == ord0)%:R).
rewrite /frob /post_ln_jac !big_ord_recr !big_ord0 !ln_tokE !big_ord_recr !big_ord0.
rewrite !ln_jacE !ln_PE /var /cen /mean !big_ord_recr !big_ord0 !mxE.
by move/eqP; apply/negP; vm_compute.
Qed.
