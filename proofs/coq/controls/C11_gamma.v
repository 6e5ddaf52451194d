(* Negative control for C11: J_LN(x) γ = 0 (γ in place of the constant vector 1)
   is wrong.  The proof script of C11_kills_ones must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From AttnSens Require Import LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Theorem C11_gamma_wrong (R : realFieldType) (d : nat) (x g : 'I_d -> R) (eps s : R) :
  ln_jac x g eps s *m (\col_i g i) = 0.
Proof. by rewrite /ln_jac -scalemxAl -mulmxA P_ones mulmx0 scaler0. Qed.
