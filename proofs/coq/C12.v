(* C12 (pre-LN residual Jacobian has an additive identity), for every L and every
   width d, over any realFieldType.  J_pre V = V + J_F(J_LN(x) V) is the chain rule
   for x ↦ x + F(LN x), taken as the definition (LayerNorm.v).  Proved: for any
   map J_F that is linear, J_pre fixes every per-token constant direction a ⊗ 1
   (row t of the tangent constant, equal to a_t), in particular e_t ⊗ 1 for each
   token t, because J_LN(x_t) 1 = 0 (C11_kills_ones) and J_F 0 = 0.  This holds
   for any s_t and eps. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C12.
Variables (R : realFieldType) (L d : nat).
Implicit Types (X V : 'M[R]_(L, d)) (g : 'I_d -> R) (s : 'I_L -> R).

Lemma ln_tokE X g eps s V t k :
  ln_tok X g eps s V t k = \sum_l ln_jac (fun j => X t j) g eps (s t) k l * V t l.
Proof. by rewrite [LHS]mxE. Qed.

(* J_LN kills a ⊗ 1, token by token. *)
Lemma ln_tok_const X g eps s (a : 'I_L -> R) : ln_tok X g eps s (tok_const a) = 0.
Proof.
apply/matrixP => t k; rewrite ln_tokE [RHS]mxE.
have /matrixP/(_ k 0) := C11_kills_ones (fun j => X t j) g eps (s t).
rewrite [LHS]mxE [RHS]mxE => h.
rewrite (eq_bigr (fun l => a t * (ln_jac (fun j => X t j) g eps (s t) k l * (ones : 'cV[R]_d) l 0))).
  by rewrite -mulr_sumr h mulr0.
by move=> l _; rewrite [tok_const a t l]mxE [ones l 0]mxE mulr1 mulrC.
Qed.

Theorem C12_pre_ln_identity X g eps s (JF : {linear 'M[R]_(L, d) -> 'M[R]_(L, d)}) (a : 'I_L -> R) :
  pre_ln_jac X g eps s JF (tok_const a) = tok_const a.
Proof. by rewrite /pre_ln_jac ln_tok_const linear0 addr0. Qed.

End C12.
