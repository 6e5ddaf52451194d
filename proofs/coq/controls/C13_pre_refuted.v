(* e_t ⊗ 1/γ is not a left null vector of the pre-LN Jacobian: L = d = 1, γ = 1,
   J_F = the identity, V = the constant tangent 1.  J_pre fixes it
   (C12_pre_ln_identity), so ⟨e_0 ⊗ 1/γ, J_pre V⟩ = 1 ≠ 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta Eval LayerNorm C11 C12 C13.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C13_pre_refuted :
  ~ (forall (X : 'M[rat]_(1, 1)) (g : 'I_1 -> rat) (eps : rat) (s : 'I_1 -> rat)
       (JF : {linear 'M[rat]_(1, 1) -> 'M[rat]_(1, 1)}) (t0 : 'I_1),
       (forall k, g k != 0) -> forall V, frob (tok_inv_gamma g t0) (pre_ln_jac X g eps s JF V) = 0).
Proof.
move=> h; have hg : forall k : 'I_1, (fun _ => 1 : rat) k != 0 by move=> k; vm_compute.
have := h 0 (fun _ => 1) 0 (fun _ => 1) [linear of idfun] ord0 hg (tok_const (fun _ => 1)).
rewrite C12_pre_ln_identity /frob !big_ord_recr !big_ord0 !mxE.
by move/eqP; apply/negP; vm_compute.
Qed.
