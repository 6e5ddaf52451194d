(* C3 (uniform parity), for every L ≥ 1: θ(uniform on L atoms) = 1 for even L
   and 1 − 1/L² for odd L (0 for L = 1).  A subset of k atoms has mass k/L and
   1 − 4(k/L)(1 − k/L) = (2k − L)²/L², which is 0 only when L = 2k; for odd L
   the integer 2k − L is odd, so its square is at least 1. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C3.
Variable R : realFieldType.

Lemma mass_uniform L (S : {set 'I_L}) : mass (uniform R L) S = #|S|%:R / L%:R.
Proof. by rewrite /mass sumr_const [RHS]mulrC mulr_natr. Qed.

Lemma uniform_distribution L : (0 < L)%N -> distribution (uniform R L).
Proof.
move=> L0; split=> [i|]; first by rewrite invr_ge0 ler0n.
have -> : \sum_i uniform R L i = mass (uniform R L) setT by apply: eq_bigl => i; rewrite in_setT.
by rewrite mass_uniform cardsT card_ord divff // pnatr_eq0 -lt0n.
Qed.

Lemma card_prefix L k : (k <= L)%N -> #|[set i : 'I_L | (i < k)%N]| = k.
Proof.
move=> kL; have -> : [set i : 'I_L | (i < k)%N] = [set widen_ord kL j | j : 'I_k].
  apply/setP => i; rewrite inE; apply/idP/imsetP => [h|[j _ ->]]; last exact: (ltn_ord j).
  by exists (Ordinal h) => //; apply: val_inj.
by rewrite card_imset ?card_ord // => a b /(congr1 val) /= /val_inj.
Qed.

Lemma split_uniform L (S : {set 'I_L}) : (0 < L)%N ->
  split_value (uniform R L) S = 1 - (2 * #|S|%:R - L%:R) ^+ 2 / L%:R ^+ 2.
Proof.
move=> L0; have L0' : L%:R != 0 :> R by rewrite pnatr_eq0 -lt0n.
by rewrite /split_value mass_uniform; field.
Qed.

(* For odd L = 2n + 1 and any k, (2k − L)² ≥ 1. *)
Lemma odd_gap n k : 1 <= (2 * k%:R - (n.*2.+1)%:R) ^+ 2 :> R.
Proof.
case: (leqP k n) => hk.
  rewrite -(subnKC hk); set j := (n - k)%N.
  rewrite (_ : _ ^+ 2 = ((j.*2.+1) ^ 2)%:R); first by rewrite ler1n expn_gt0.
  by rewrite -!muln2; ring.
rewrite -(subnKC hk); set j := (k - n.+1)%N.
rewrite (_ : _ ^+ 2 = ((j.*2.+1) ^ 2)%:R); first by rewrite ler1n expn_gt0.
by rewrite -!muln2; ring.
Qed.

Theorem C3_uniform L : (0 < L)%N ->
  theta (uniform R L) = if odd L then 1 - (L%:R ^+ 2)^-1 else 1.
Proof.
move=> L0; have L0' : L%:R != 0 :> R by rewrite pnatr_eq0 -lt0n.
have hL := odd_double_half L; set n := L./2 in hL.
have hn : (n <= L)%N by rewrite /n -divn2 leq_div.
(* The witness: the first ⌊L/2⌋ atoms. *)
have hw : split_value (uniform R L) [set i : 'I_L | (i < n)%N] =
          if odd L then 1 - (L%:R ^+ 2)^-1 else 1.
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

End C3.
