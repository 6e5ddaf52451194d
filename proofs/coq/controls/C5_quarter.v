(* Negative control for C5: the bound 1 − m²/4 is wrong.  The proof script of
   C5_pmax_square must fail on it (checked by proofs/checks/coq.py). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C5_quarter_wrong (R : realFieldType) (L : nat) (p : 'I_L -> R) :
  distribution p -> 1 - pmax p ^+ 2 / 4 <= theta p.
Proof.
move=> hp; have [p0 hs] := hp.
have [S hS] := greedy (pmax_ge0 p) (fun i => introT andP (conj (p0 i) (pmax_ge p i))) L.
apply: le_trans (theta_ge p S).
have e : \sum_(i : 'I_L | (i < L)%N) sv S i * p i = mass p S - mass p (~: S).
  rewrite (eq_bigl (fun _ => true)); last by move=> i; exact: ltn_ord.
  rewrite (bigID (mem S)) /= /mass; congr (_ + _).
    by apply: eq_bigr => i iS; rewrite /sv iS mul1r.
  rewrite -sumrN; apply: eq_big => [j|j]; first by rewrite in_setC.
  by rewrite /sv => /negbTE ->; rewrite mulN1r.
rewrite e in hS; rewrite (_ : split_value p S = 1 - (mass p S - mass p (~: S)) ^+ 2); last first.
  by rewrite mass_compl // /split_value; ring.
rewrite ler_sub // -[_ ^+ 2]real_normK ?num_real // ler_expn2r ?nnegrE ?normr_ge0 //.
exact: pmax_ge0.
Qed.
