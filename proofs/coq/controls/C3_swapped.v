(* Negative control for C3: parities swapped.  The proof script of C3_uniform must fail. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C3_swapped_wrong (R : realFieldType) L : (0 < L)%N ->
  theta (uniform R L) = if odd L then 1 else 1 - (L%:R ^+ 2)^-1.
Proof.
move=> L0; have L0' : L%:R != 0 :> R by rewrite pnatr_eq0 -lt0n.
have hL := odd_double_half L; set n := L./2 in hL.
have hn : (n <= L)%N by rewrite /n -divn2 leq_div.
have hw : split_value (uniform R L) [set i : 'I_L | (i < n)%N] =
          if odd L then 1 else 1 - (L%:R ^+ 2)^-1.
  rewrite split_uniform // card_prefix //.
  have hLR : L%:R = (odd L)%:R + 2 * n%:R :> R.
    by rewrite -[in LHS]hL natrD -muln2 natrM; ring.
  move: L0'; rewrite hLR; case: (odd L) => h /=; field.
  - exact: h.
  - by apply: contraNneq h => ->; rewrite mulr0 addr0.
apply/le_anti/andP; split; last by rewrite -hw theta_ge.
apply: theta_le => [|S].
  case: (odd L) => /=; rewrite ?ler01 // subr_ge0 invf_le1 ?exprn_gt0 ?ltr0n //.
  by rewrite -natrX ler1n expn_gt0 L0.
case: ifP => hodd; last exact: split_value_le1.
rewrite split_uniform //; apply: ler_sub; first exact: lexx.
rewrite -[X in X <= _]mul1r; apply: ler_wpmul2r; first by rewrite invr_ge0 exprn_ge0 ?ler0n.
have -> : L%:R = (n.*2.+1)%:R :> R by rewrite -[in LHS]hL hodd.
exact: odd_gap.
Qed.
