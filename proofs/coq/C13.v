(* C13 (post-LN residual Jacobian has no additive identity), for every L and every
   width d, over any realFieldType.  J_post V = J_LN(y)(V + J_F V) is the chain
   rule for x ↦ LN(x + F(x)), y = x + F(x), taken as the definition
   (LayerNorm.v).  Proved, for ANY map J_F (linear or not), any s_t and eps, and
   γ without zero entries:
   - W = e_t ⊗ (1/γ) is a left null vector: ⟨W, J_post V⟩ = 0 for every V,
     because (1/γ)ᵀ J_LN(y_t) = 0 (C11_left_null);
   - hence W ≠ 0 (d ≥ 1) and ‖(J_post − I)W‖² ≥ ‖W‖², i.e. ‖J_post − I‖₂ ≥ 1:
     ‖(J_post − I)W‖² = ‖J_post W‖² − 2⟨W, J_post W⟩ + ‖W‖² = ‖J_post W‖² + ‖W‖².
   So J_post is never I + E with ‖E‖₂ < 1, whatever F is. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import LayerNorm C11 C12.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C13.
Variables (R : realFieldType) (L d : nat).
Implicit Types (Y V W : 'M[R]_(L, d)) (g : 'I_d -> R) (s : 'I_L -> R).

Lemma frob_ln_tok_null Y g eps s t0 V : (forall k, g k != 0) ->
  frob (tok_inv_gamma g t0) (ln_tok Y g eps s V) = 0.
Proof.
move=> hg; rewrite /frob (bigD1 t0) //= [X in _ + X]big1 ?addr0; last first.
  by move=> t ht; apply: big1 => k _; rewrite [tok_inv_gamma g t0 t k]mxE (negbTE ht) !mul0r.
set J := ln_jac (fun j => Y t0 j) g eps (s t0).
rewrite (eq_bigr (fun k => \sum_l (g k)^-1 * J k l * V t0 l)); last first.
  move=> k _; rewrite [tok_inv_gamma g t0 t0 k]mxE eqxx mul1r ln_tokE mulr_sumr.
  by apply: eq_bigr => l _; rewrite mulrA.
rewrite exchange_big /= big1 // => l _.
have /matrixP/(_ 0 l) := C11_left_null (fun j => Y t0 j) eps (s t0) hg.
rewrite [LHS]mxE [RHS]mxE -/J => h; rewrite -mulr_suml.
rewrite (eq_bigr (fun k => inv_gamma g 0 k * J k l)) ?h ?mul0r // => k _.
by rewrite [inv_gamma g 0 k]mxE.
Qed.

Lemma frob_ge0 W : 0 <= frob W W.
Proof. by apply: sumr_ge0 => t _; apply: sumr_ge0 => k _; rewrite -expr2 sqr_ge0. Qed.

(* ‖B − W‖² = ‖B‖² − 2⟨W, B⟩ + ‖W‖². *)
Lemma frob_sub (B W : 'M[R]_(L, d)) : frob (B - W) (B - W) = frob B B - 2 * frob W B + frob W W.
Proof.
rewrite /frob (eq_bigr (fun t => \sum_k B t k * B t k - 2 * (\sum_k W t k * B t k)
                                 + \sum_k W t k * W t k)) => [|t _].
  by rewrite big_split sumrB /= -mulr_sumr.
have sq (b w : R) : (b - w) * (b - w) = b * b - 2 * (w * b) + w * w by ring.
by rewrite mulr_sumr -sumrB -big_split /=; apply: eq_bigr => k _; rewrite !mxE; apply: sq.
Qed.

Theorem C13_left_null Y g eps s (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) (t0 : 'I_L) :
  (forall k, g k != 0) -> forall V, frob (tok_inv_gamma g t0) (post_ln_jac Y g eps s JF V) = 0.
Proof. by move=> hg V; rewrite /post_ln_jac frob_ln_tok_null. Qed.

Theorem C13_no_identity Y g eps s (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) (t0 : 'I_L) :
  (0 < d)%N -> (forall k, g k != 0) ->
  tok_inv_gamma g t0 != 0 /\
  frob (tok_inv_gamma g t0) (tok_inv_gamma g t0) <=
    frob (post_ln_jac Y g eps s JF (tok_inv_gamma g t0) - tok_inv_gamma g t0)
         (post_ln_jac Y g eps s JF (tok_inv_gamma g t0) - tok_inv_gamma g t0).
Proof.
move=> hd hg; split.
  apply/eqP => /matrixP/(_ t0 (Ordinal hd)); rewrite !mxE eqxx mul1r => /eqP.
  by rewrite invr_eq0 (negbTE (hg _)).
by rewrite frob_sub C13_left_null // mulr0 subr0 ler_paddl ?frob_ge0.
Qed.

End C13.
