(* Negative control for C13: the structural distinction.  The post-LN left null
   vector e_t ⊗ 1/γ is NOT one for the pre-LN Jacobian J_pre = I + J_F J_LN.  The
   proof script of C13_left_null must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11 C12 C13.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C13_pre_wrong (R : realFieldType) (L d : nat) (X : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : {linear 'M[R]_(L, d) -> 'M[R]_(L, d)}) (t0 : 'I_L) :
  (forall k, g k != 0) -> forall V, frob (tok_inv_gamma g t0) (pre_ln_jac X g eps s JF V) = 0.
Proof. by move=> hg V; rewrite /post_ln_jac frob_ln_tok_null. Qed.
