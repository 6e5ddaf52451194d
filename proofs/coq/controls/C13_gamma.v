(* Negative control for C13: e_t ⊗ γ (γ in place of 1/γ) as the left null vector
   of J_post is wrong.  The proof script of C13_left_null must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11 C12 C13.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C13_gamma_wrong (R : realFieldType) (L d : nat) (Y : 'M[R]_(L, d)) (g : 'I_d -> R) (eps : R)
  (s : 'I_L -> R) (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) (t0 : 'I_L) :
  (forall k, g k != 0) ->
  forall V, frob (\matrix_(t, k) ((t == t0)%:R * g k)) (post_ln_jac Y g eps s JF V) = 0.
Proof. by move=> hg V; rewrite /post_ln_jac frob_ln_tok_null. Qed.
