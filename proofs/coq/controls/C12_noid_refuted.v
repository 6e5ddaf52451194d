(* J_F J_LN(x) (a ⊗ 1) = a ⊗ 1 is false: L = d = 1, J_F = the identity, a = 1.
   J_LN(x) kills every constant row (ln_tok_const), so the left side is 0 ≠ 1. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import Theta Eval LayerNorm C11 C12.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C12_noid_refuted :
  ~ (forall (X : 'M[rat]_(1, 1)) (g : 'I_1 -> rat) (eps : rat) (s : 'I_1 -> rat)
       (JF : {linear 'M[rat]_(1, 1) -> 'M[rat]_(1, 1)}) (a : 'I_1 -> rat),
       JF (ln_tok X g eps s (tok_const a)) = tok_const a).
Proof.
move=> h; have := h 0 (fun _ => 1) 0 (fun _ => 1) [linear of idfun] (fun _ => 1).
rewrite ln_tok_const => /matrixP/(_ ord0 ord0); rewrite !mxE.
by move/eqP; apply/negP; vm_compute.
Qed.
