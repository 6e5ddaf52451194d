(* C5 (bounds from the largest atom), for every L: with m = p_max,
   θ(p) ≥ 4m(1 − m) (the singleton of a largest atom) and θ(p) ≥ 1 − m².
   The second is greedy signing: walk the atoms in order and put each on the
   lighter side; the signed sum d = p(S) − p(Sᶜ) stays in [−m, m] (if d ≥ 0
   the next atom a ∈ [0, m] goes to Sᶜ and d − a ∈ [−m, m], else to S), and
   4p(S)(1 − p(S)) = 1 − d² ≥ 1 − m². *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C4.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C5.
Variables (R : realFieldType) (L : nat).
Implicit Types (p : 'I_L -> R) (S : {set 'I_L}).

(* ---- the largest atom *)
Lemma pmax_ge p i : p i <= pmax p.
Proof.
have : i \in index_enum (ordinal_finType L) by rewrite mem_index_enum.
rewrite /pmax; elim: (index_enum _) => // j r IH; rewrite inE big_cons le_maxr.
by case/orP=> [/eqP <-|/IH ->]; rewrite ?lexx ?orbT.
Qed.

Lemma pmax_ge0 p : 0 <= pmax p.
Proof. by rewrite /pmax; elim/big_rec: _ => // i x _ hx; rewrite le_maxr hx orbT. Qed.

Lemma pmax_attained p : pmax p = 0 \/ exists i, pmax p = p i.
Proof.
rewrite /pmax; elim/big_rec: _ => [|i x _ [->|[j ->]]]; first by left.
- by rewrite /Order.max; case: ifP => _; [left | right; exists i].
- by rewrite /Order.max; case: ifP => _; right; [exists j | exists i].
Qed.

Theorem C5_pmax_singleton p : distribution p -> 4 * pmax p * (1 - pmax p) <= theta p.
Proof.
move=> hp; case: (pmax_attained p) => [->|[i ->]]; last exact: C5_singleton.
by rewrite mulr0 mul0r theta_ge0.
Qed.

(* ---- greedy signing *)
Lemma sv_set1 S (o i : 'I_L) (b : bool) : i != o ->
  sv (if b then S :\ o else o |: S) i = sv S i :> R.
Proof. by move=> io; rewrite /sv; case: b; rewrite !inE (negbTE io). Qed.

Lemma sv_set1_at S (o : 'I_L) (b : bool) :
  sv (if b then S :\ o else o |: S) o = (if b then -1 else 1) :> R.
Proof. by rewrite /sv; case: b; rewrite !inE eqxx. Qed.

(* The first k atoms can be signed with |Σ_{i<k} ±p_i| ≤ m. *)
Lemma greedy p (m : R) : 0 <= m -> (forall i, 0 <= p i <= m) ->
  forall k, exists S, `|\sum_(i : 'I_L | (i < k)%N) sv S i * p i| <= m.
Proof.
move=> m0 hp; elim=> [|k [S hS]].
  by exists set0; rewrite big_pred0 ?normr0 // => i; rewrite ltn0.
case: (ltnP k L) => hk; last first.
  exists S; rewrite (eq_bigl (fun i : 'I_L => (i < k)%N)) // => i.
  by rewrite (leq_trans (ltn_ord i) hk) (leq_trans (ltn_ord i) (leqW hk)).
set o := Ordinal hk; set d := \sum_(i : 'I_L | (i < k)%N) sv S i * p i in hS.
exists (if 0 <= d then S :\ o else o |: S).
rewrite (bigD1 o) /= ?ltnSn // addrC.
rewrite (eq_bigl (fun i : 'I_L => (i < k)%N)); last first.
  by move=> i; rewrite ltnS leq_eqVlt -val_eqE /=; case: (ltngtP i k).
rewrite (eq_bigr (fun i => sv S i * p i)); last first.
  by move=> i ik; rewrite sv_set1 // -val_eqE /= neq_ltn ik.
rewrite -/d sv_set1_at; have /andP [po pm] := hp o.
move: hS; rewrite !ler_norml => /andP [h1 h2].
case: ifP => hd; rewrite ?mulN1r ?mul1r; apply/andP; split.
- by rewrite ler_subr_addr addrC; apply: (le_trans _ hd); rewrite subr_le0.
- by rewrite ler_subl_addr; apply: le_trans h2 _; rewrite ler_addl.
- by apply: le_trans h1 _; rewrite ler_addl.
- by apply: le_trans pm; rewrite ger_addr ltW // ltNge hd.
Qed.

Theorem C5_pmax_square p : distribution p -> 1 - pmax p ^+ 2 <= theta p.
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

(* C5: θ(p) ≥ max(4m(1 − m), 1 − m²), as the two bounds. *)
Theorem C5_pmax p : distribution p ->
  4 * pmax p * (1 - pmax p) <= theta p /\ 1 - pmax p ^+ 2 <= theta p.
Proof. by move=> hp; split; [exact: C5_pmax_singleton | exact: C5_pmax_square]. Qed.

End C5.
