(* Definitions shared by the proofs of C2–C8 (claim ids as in shared/MATH.md)
   and by the pinned statements of Spec.v, over an arbitrary realFieldType R (so ℝ and ℚ alike) and
   an arbitrary length L.  θ is the same object as numerics/theta.py:
   θ(p) = max over subsets S of 4·p(S)·(1 − p(S)); C(p) = diag(p) − ppᵀ is
   numerics/softmax.py:covariance. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section Defs.
Variables (R : realFieldType) (L : nat).
Implicit Types (p x y z v : 'I_L -> R) (S : {set 'I_L}).

Definition mass p S : R := \sum_(i in S) p i.
Definition split_value p S : R := 4 * mass p S * (1 - mass p S).
(* θ(p): a maximum over all 2^L subsets (0 is a neutral start: every term is
   ≥ 0 for a distribution, and S = ∅ contributes 0). *)
Definition theta p : R := \big[Order.max/0]_(S : {set 'I_L}) split_value p S.
(* δ(p) = min_S |p(S) − p(Sᶜ)| (for a distribution, |p(S) − p(Sᶜ)| ≤ 1). *)
Definition delta p : R := \big[Order.min/1]_(S : {set 'I_L}) `|mass p S - mass p (~: S)|.
Definition Cmat p : 'M[R]_L := \matrix_(i, j) ((i == j)%:R * p i - p i * p j).
Definition Cx p x i : R := \sum_j Cmat p i j * x j.
Definition norm1 v : R := \sum_i `|v i|.
(* The sign vector 1_S − 1_Sᶜ. *)
Definition sv S i : R := if i \in S then 1 else -1.
(* ‖C(p)‖∞→1 as the maximum over sign vectors (numerics/softmax.py:inf_to_one_norm). *)
Definition inf1norm p : R := \big[Order.max/0]_(S : {set 'I_L}) norm1 (Cx p (sv S)).
Definition distribution p := (forall i, 0 <= p i) /\ \sum_i p i = 1.
(* m = p_max, the largest atom (0 is a neutral start: atoms of a distribution are ≥ 0). *)
Definition pmax p : R := \big[Order.max/0]_i p i.
Definition in_box x := forall i, `|x i| <= 1.
(* yᵀC(p)x written out: the covariance of y and x under p. *)
Definition bil p y x : R :=
  \sum_i p i * y i * x i - (\sum_i p i * y i) * (\sum_i p i * x i).

(* ---- finite maxima and minima over subsets *)
Lemma bigmax_ge (F : {set 'I_L} -> R) S : F S <= \big[Order.max/0]_(T : {set 'I_L}) F T.
Proof.
(* max with start 0 is no monoid on R, so bigD1 does not apply: walk the list. *)
have : S \in index_enum (set_of_finType (ordinal_finType L)) by rewrite mem_index_enum.
elim: (index_enum _) => // T r IH; rewrite inE big_cons le_maxr.
by case/orP=> [/eqP <-|/IH ->]; rewrite ?lexx ?orbT.
Qed.

Lemma bigmax_le (F : {set 'I_L} -> R) c :
  0 <= c -> (forall S, F S <= c) -> \big[Order.max/0]_(T : {set 'I_L}) F T <= c.
Proof. by move=> c0 h; elim/big_ind: _ => // u w hu hw; rewrite le_maxl hu hw. Qed.

Lemma bigmax_attained (F : {set 'I_L} -> R) :
  F set0 = 0 -> exists S, \big[Order.max/0]_(T : {set 'I_L}) F T = F S.
Proof.
move=> F0; elim/big_rec: _ => [|T u _ [S ->]]; first by exists set0.
by rewrite /Order.max; case: ifP => _; [exists S | exists T].
Qed.

Lemma bigmin_le (F : {set 'I_L} -> R) S : \big[Order.min/1]_(T : {set 'I_L}) F T <= F S.
Proof.
have : S \in index_enum (set_of_finType (ordinal_finType L)) by rewrite mem_index_enum.
elim: (index_enum _) => // T r IH; rewrite inE big_cons le_minl.
by case/orP=> [/eqP <-|/IH ->]; rewrite ?lexx ?orbT.
Qed.

Lemma bigmin_ge (F : {set 'I_L} -> R) c :
  c <= 1 -> (forall S, c <= F S) -> c <= \big[Order.min/1]_(T : {set 'I_L}) F T.
Proof. by move=> c1 h; elim/big_ind: _ => // u w hu hw; rewrite le_minr hu hw. Qed.

Lemma bigmin_attained (F : {set 'I_L} -> R) :
  let m := \big[Order.min/1]_(T : {set 'I_L}) F T in m = 1 \/ exists S, m = F S.
Proof.
elim/big_rec: _ => [|T u _ [->|[S ->]]]; first by left.
- by rewrite /Order.min; case: ifP => _; [right; exists T | left].
- by rewrite /Order.min; case: ifP => _; right; [exists T | exists S].
Qed.

(* ---- masses *)
Lemma mass_compl p S : \sum_i p i = 1 -> mass p (~: S) = 1 - mass p S.
Proof.
move=> hs; rewrite -hs (bigID (mem S)) /= /mass.
rewrite (eq_bigl (fun i => i \notin S)) => [|i]; last by rewrite in_setC.
by rewrite addrAC subrr add0r.
Qed.

Lemma mass_ge_atom p S i : (forall j, 0 <= p j) -> i \in S -> p i <= mass p S.
Proof.
move=> p0 iS; rewrite /mass (bigD1 i) //= ler_addl.
by apply: sumr_ge0 => j _; exact: p0.
Qed.

Lemma atom_le1 p i : distribution p -> p i <= 1.
Proof.
case=> p0 hs; rewrite -hs (bigD1 i) //= ler_addl.
by apply: sumr_ge0 => j _; exact: p0.
Qed.

Lemma split_value_ge0 p S : distribution p -> 0 <= split_value p S.
Proof.
move=> [p0 hs]; have a0 : 0 <= mass p S by apply: sumr_ge0 => i _; exact: p0.
have b0 : 0 <= 1 - mass p S.
  by rewrite -(mass_compl S hs); apply: sumr_ge0 => i _; exact: p0.
by rewrite /split_value -mulrA mulr_ge0 ?ler0n // mulr_ge0.
Qed.

Lemma split_value0 p : split_value p set0 = 0.
Proof. by rewrite /split_value /mass big_set0 mulr0 mul0r. Qed.

Lemma theta_attained p : exists S, theta p = split_value p S.
Proof. exact: bigmax_attained (split_value0 p). Qed.

Lemma theta_ge p S : split_value p S <= theta p.
Proof. exact: bigmax_ge. Qed.

Lemma theta_le p c : 0 <= c -> (forall S, split_value p S <= c) -> theta p <= c.
Proof. exact: bigmax_le. Qed.

Lemma delta_le p S : delta p <= `|mass p S - mass p (~: S)|.
Proof. exact: bigmin_le. Qed.

Lemma delta_ge0 p : 0 <= delta p.
Proof. by apply: bigmin_ge => [|S]; rewrite ?ler01 ?normr_ge0. Qed.

Lemma delta_le1 p : delta p <= 1.
Proof. by rewrite /delta; elim/big_rec: _ => // S u _ hu; rewrite le_minl hu orbT. Qed.

Lemma delta_attained p : delta p = 1 \/ exists S, delta p = `|mass p S - mass p (~: S)|.
Proof. exact: bigmin_attained. Qed.

Lemma theta_ge0 p : distribution p -> 0 <= theta p.
Proof. by move=> hp; apply: le_trans (bigmax_ge _ set0); exact: split_value_ge0. Qed.

Lemma split_value_le1 p S : split_value p S <= 1.
Proof.
rewrite -subr_ge0 (_ : 1 - split_value p S = (2 * mass p S - 1) ^+ 2).
  exact: sqr_ge0.
by rewrite /split_value; ring.
Qed.

(* ---- C2, steps (ii) and (iii): C as a bilinear form *)
Lemma CxE p x i : Cx p x i = p i * x i - p i * \sum_j p j * x j.
Proof.
rewrite /Cx (eq_bigr (fun j => (i == j)%:R * (p i * x j) - p i * (p j * x j))).
  rewrite sumrB -mulr_sumr (bigD1 i) //= eqxx mul1r big1 ?addr0 // => j ji.
  by rewrite eq_sym (negbTE ji) mul0r.
by move=> j _; rewrite mxE mulrBl !mulrA.
Qed.

Lemma sum_y_Cx p y x : \sum_i y i * Cx p x i = bil p y x.
Proof.
rewrite /bil mulr_suml -sumrB; apply: eq_bigr => i _; rewrite CxE; ring.
Qed.

Lemma bil_sym p y x : bil p y x = bil p x y.
Proof.
rewrite /bil mulrC; congr (_ - _); apply: eq_bigr => i _; ring.
Qed.

(* C is PSD: vᵀCv = Σ p_i (v_i − pᵀv)² when Σp = 1. *)
Lemma bil_var p v : \sum_i p i = 1 ->
  bil p v v = \sum_i p i * (v i - \sum_j p j * v j) ^+ 2.
Proof.
move=> hs; set m := \sum_j p j * v j.
rewrite (eq_bigr (fun i => p i * v i * v i - 2 * m * (p i * v i) + m ^+ 2 * p i)).
  rewrite big_split sumrB /= -!mulr_sumr hs /bil -/m.
  by set A := \sum_i p i * v i * v i; ring.
by move=> i _; ring.
Qed.

Lemma bil_psd p v : distribution p -> 0 <= bil p v v.
Proof.
case=> p0 hs; rewrite bil_var //; apply: sumr_ge0 => i _.
by rewrite mulr_ge0 ?sqr_ge0.
Qed.

Lemma bil_polar p y z :
  bil p (fun i => y i - z i) (fun i => y i - z i) = bil p y y - 2 * bil p y z + bil p z z.
Proof.
have e1 : \sum_i p i * (y i - z i) * (y i - z i) =
          \sum_i p i * y i * y i - 2 * (\sum_i p i * y i * z i) + \sum_i p i * z i * z i.
  rewrite (eq_bigr (fun i => p i * y i * y i - 2 * (p i * y i * z i) + p i * z i * z i)).
    by rewrite big_split sumrB /= -mulr_sumr.
  by move=> i _; ring.
have e2 : \sum_i p i * (y i - z i) = \sum_i p i * y i - \sum_i p i * z i.
  by rewrite -sumrB; apply: eq_bigr => i _; ring.
by rewrite /bil e1 e2; ring.
Qed.

(* 2yᵀCz ≤ yᵀCy + zᵀCz, from (y − z)ᵀC(y − z) ≥ 0. *)
Lemma bil_2le p y z : distribution p -> 2 * bil p y z <= bil p y y + bil p z z.
Proof.
move=> hp; have := bil_psd (fun i => y i - z i) hp; rewrite bil_polar => h.
by rewrite -subr_ge0 (_ : _ + _ - _ = bil p y y - 2 * bil p y z + bil p z z) //; ring.
Qed.

(* C2 step (iii): xᵀCx = 4p(S)(1 − p(S)) for x = 1_S − 1_Sᶜ. *)
Lemma bil_sv p S : \sum_i p i = 1 -> bil p (sv S) (sv S) = split_value p S.
Proof.
move=> hs; have hq : \sum_i p i * sv S i * sv S i = 1.
  by rewrite -hs; apply: eq_bigr => i _; rewrite /sv; case: (i \in S); ring.
have hl : \sum_i p i * sv S i = mass p S - mass p (~: S).
  rewrite (bigID (mem S)) /= /mass; congr (_ + _).
    by apply: eq_bigr => i iS; rewrite /sv iS mulr1.
  rewrite -sumrN; apply: eq_big => [j|j]; first by rewrite in_setC.
  by rewrite /sv => /negbTE ->; rewrite mulrN1.
by rewrite /bil hq hl mass_compl // /split_value; ring.
Qed.

Lemma sv_box S : in_box (sv S).
Proof. by move=> i; rewrite /sv; case: (i \in S); rewrite ?normrN normr1. Qed.

(* The sign of v, as a sign vector: sv S_v i * v i = |v i|. *)
Lemma sv_sign v i : sv [set j | 0 <= v j] i * v i = `|v i|.
Proof.
rewrite /sv inE; case: ifP => h; first by rewrite mul1r ger0_norm.
by rewrite mulN1r ltr0_norm // ltNge h.
Qed.

End Defs.

(* The uniform distribution on L atoms (C3). *)
Definition uniform (R : realFieldType) (L : nat) : 'I_L -> R := fun _ => L%:R^-1.
Arguments uniform : clear implicits.

Arguments sv {R L} S i.
Arguments sv_box {R L} S.
