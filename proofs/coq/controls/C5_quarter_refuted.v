(* C5's wrong variant 1 − m²/4 is false: uniform on 3 atoms has m = 1/3 and
   θ = 8/9 < 1 − 1/36. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C5_quarter_refuted :
  ~ (forall (p : 'I_3 -> rat), distribution p -> 1 - pmax p ^+ 2 / 4 <= theta p).
Proof.
move=> h; have hp := uniform_distribution Q (isT : (0 < 3)%N).
have hm : pmax (uniform Q 3) = 3%:R^-1.
  apply/le_anti/andP; split; last exact: (pmax_ge (uniform Q 3) ord0).
  rewrite /pmax; elim/big_ind: _ => [|x y hx hy|i _].
  - by rewrite invr_ge0 ler0n.
  - by rewrite le_maxl hx hy.
  - exact: lexx.
have := h _ hp; rewrite hm (C3_uniform _ (isT : (0 < 3)%N)).
by apply/negP; vm_compute.
Qed.
