(* Negative control for C12: without the identity path, J_F J_LN(x) (a ⊗ 1) = a ⊗ 1
   is wrong (J_LN kills a ⊗ 1, so the left side is 0).  The proof script of
   C12_pre_ln_identity must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11 C12.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C12_noid_wrong (R : realFieldType) (L d : nat) (X : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : {linear 'M[R]_(L, d) -> 'M[R]_(L, d)}) (a : 'I_L -> R) :
  JF (ln_tok X g eps s (tok_const a)) = tok_const a.
Proof. by rewrite /pre_ln_jac ln_tok_const linear0 addr0. Qed.
