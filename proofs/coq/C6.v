(* C6 (zero atoms and continuity), for every L.
   (a) A zero atom can be removed: for any row p on L + 1 atoms with p_i0 = 0,
       θ(p) = θ(p without atom i0) (lift i0 : 'I_L → 'I_L.+1 skips i0).  Every
       subset S has the mass of its trace on the other atoms, and every subset
       of those is the trace of its image; no normalisation is needed.
   (b) θ is 2-Lipschitz in ℓ1 on the simplex: |θ(p) − θ(q)| ≤ 2‖p − q‖₁.  For
       a = p(S), b = q(S) in [0, 1], 4a(1 − a) − 4b(1 − b) = 4(a − b)(1 − a − b)
       and |1 − a − b| ≤ 1; and 2|p(S) − q(S)| ≤ ‖p − q‖₁ because
       p(S) − q(S) = −(p(Sᶜ) − q(Sᶜ)) bounds it by the ℓ1 mass on S and on Sᶜ. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C6.
Variables (R : realFieldType) (L : nat).

(* ---- (a) zero atoms *)
Lemma mass_lift (p : 'I_L.+1 -> R) i0 (S : {set 'I_L.+1}) : p i0 = 0 ->
  mass p S = mass (fun j => p (lift i0 j)) [set j | lift i0 j \in S].
Proof.
move=> z; rewrite /mass !big_mkcond (bigD1_ord i0) //= z if_same add0r.
by rewrite [RHS]big_mkcond; apply: eq_bigr => j _; rewrite inE.
Qed.

Lemma split_lift (p : 'I_L.+1 -> R) i0 (S : {set 'I_L.+1}) : p i0 = 0 ->
  split_value p S = split_value (fun j => p (lift i0 j)) [set j | lift i0 j \in S].
Proof. by move=> z; rewrite /split_value (mass_lift S z). Qed.

Lemma split_imset_lift (p : 'I_L.+1 -> R) (i0 : 'I_L.+1) (T : {set 'I_L}) :
  split_value p (lift i0 @: T) = split_value (fun j => p (lift i0 j)) T.
Proof.
by rewrite /split_value /mass big_imset //= => a b _ _; apply: lift_inj.
Qed.

Theorem C6_zero_atom (p : 'I_L.+1 -> R) i0 : p i0 = 0 ->
  theta p = theta (fun j => p (lift i0 j)).
Proof.
move=> z; apply/le_anti/andP; split.
  apply: theta_le => [|S]; first by rewrite -(split_value0 (fun j => p (lift i0 j))) theta_ge.
  by rewrite (split_lift S z) theta_ge.
apply: theta_le => [|T]; first by rewrite -(split_value0 p) theta_ge.
by rewrite -split_imset_lift theta_ge.
Qed.

(* ---- (b) 2-Lipschitz in ℓ1 *)
Lemma norm_sub01 (x y : R) : 0 <= x <= 1 -> 0 <= y <= 1 -> `|x - y| <= 1.
Proof.
move=> /andP[x0 x1] /andP[y0 y1]; rewrite ler_norml; apply/andP; split.
  by rewrite ler_subr_addr addrC; apply: (le_trans _ x0); rewrite subr_le0.
by rewrite ler_subl_addr; apply: le_trans x1 _; rewrite ler_addl.
Qed.

Lemma split_diff (a b : R) : 0 <= a <= 1 -> 0 <= b <= 1 ->
  `|4 * a * (1 - a) - 4 * b * (1 - b)| <= 4 * `|a - b|.
Proof.
move=> ha hb; rewrite (_ : _ - _ = 4 * (a - b) * ((1 - a) - b)); last by ring.
rewrite !normrM normr_nat ler_pimulr ?mulr_ge0 ?ler0n ?normr_ge0 //.
by apply: norm_sub01 => //; move: ha => /andP[a0 a1]; rewrite subr_ge0 a1 ler_subl_addr ler_addl.
Qed.

Lemma mass01 (p : 'I_L -> R) S : distribution p -> 0 <= mass p S <= 1.
Proof.
move=> [p0 hs]; apply/andP; split; first by apply: sumr_ge0 => i _; exact: p0.
by rewrite -subr_ge0 -(mass_compl S hs); apply: sumr_ge0 => i _; exact: p0.
Qed.

Lemma mass_diff_le (p q : 'I_L -> R) S : distribution p -> distribution q ->
  2 * `|mass p S - mass q S| <= norm1 (fun i => p i - q i).
Proof.
move=> hp hq; have [_ ps] := hp; have [_ qs] := hq.
have hS : `|mass p S - mass q S| <= \sum_(i in S) `|p i - q i|.
  by rewrite /mass -sumrB ler_norm_sum.
have hC : `|mass p S - mass q S| <= \sum_(i in ~: S) `|p i - q i|.
  have -> : mass p S - mass q S = - (mass p (~: S) - mass q (~: S)).
    by rewrite !mass_compl //; ring.
  by rewrite normrN /mass -sumrB ler_norm_sum.
have -> : norm1 (fun i => p i - q i) = \sum_(i in S) `|p i - q i| + \sum_(i in ~: S) `|p i - q i|.
  rewrite /norm1 (bigID (mem S)) /=; congr (_ + _).
  by apply: eq_bigl => i; rewrite in_setC.
by rewrite mulr_natl mulr2n ler_add.
Qed.

Lemma theta_le_lip (p q : 'I_L -> R) : distribution p -> distribution q ->
  theta p <= theta q + 2 * norm1 (fun i => p i - q i).
Proof.
move=> hp hq; have [S ->] := theta_attained p.
apply: le_trans (_ : split_value p S <= split_value q S + 2 * norm1 (fun i => p i - q i)) _.
  rewrite -ler_subl_addl; apply: le_trans (ler_norm _) _.
  rewrite /split_value; apply: le_trans (split_diff (mass01 S hp) (mass01 S hq)) _.
  rewrite (_ : 4 = 2 * 2 :> R); last by rewrite -natrM.
  by rewrite -mulrA ler_pmul2l ?ltr0n // mass_diff_le.
by rewrite ler_add2r theta_ge.
Qed.

Theorem C6_lipschitz (p q : 'I_L -> R) : distribution p -> distribution q ->
  `|theta p - theta q| <= 2 * norm1 (fun i => p i - q i).
Proof.
move=> hp hq; rewrite ler_norml; apply/andP; split.
  rewrite ler_oppl opprB ler_subl_addl.
  rewrite (_ : norm1 (fun i => p i - q i) = norm1 (fun i => q i - p i)).
    exact: theta_le_lip.
  by apply: eq_bigr => i _; rewrite distrC.
by rewrite ler_subl_addl theta_le_lip.
Qed.

End C6.
