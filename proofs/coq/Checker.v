(* A certificate checker over exact integers (issue 25), and its soundness.

   A certificate row (certificates/folder.py) is a float64 row x with claims θ_lo, θ_hi,
   gap_lo, gap_hi, a regime and a witness mask.  Every float64 is a dyadic rational, so the
   row is handed over as integer weights w_i ≥ 0 with x_i = w_i·2^e for one common e (θ is
   scale-free: p = w/Σw is the row's exact normalisation), each claim as a pair (n, d) of
   integers, d > 0, with value n/d, and two masks as lists of booleans in row order: the
   witness S (certify's) and a "head" H (a hint that only steers the search below; any H is
   sound).

   [check_row] is true only if
   - the claims are in order: 0 ≤ θ_lo ≤ θ_hi ≤ 1, 0 ≤ gap_lo ≤ gap_hi ≤ 1;
   - witness (C7): with A = w(S), B = T − A, T = Σw:  θ_lo·T² ≤ 4AB and (A − B)² ≤ gap_hi·T²;
   - the regime: 0 iff 2·max w ≥ T (dominance, C4), 1 (closed) only if θ_hi − θ_lo ≤
     max(tol, 2^-50), 2 (open) only if θ_hi − θ_lo > tol·(1 − 2^-48) and > 2^-51 (what
     certificates/verify.py requires);
   - when an upper bound is claimed (θ_hi < 1 or gap_lo > 0): a number d ≥ 0 with
     gap_lo·T² ≤ d² and (1 − θ_hi)·T² ≤ d², where d = bal(H) − w(Hᶜ) and bal(H) is the least
     |Σ_{i∈H} ±w_i| (computed exactly with pruning).  For every split S,
     |w(S) − w(Sᶜ)| ≥ d (the top-K interval lemma with any head set; H = {argmax} gives the
     dominance bound 2m − T, H = all atoms gives the exact minimum), and
     4p(S)(1 − p(S)) = 1 − ((w(S) − w(Sᶜ))/T)², so θ ≤ 1 − d²/T².
   Every comparison is a cross-multiplication in Z.  [check_row_sound] states what a true
   verdict means for θ of Theta.v, over any realFieldType. *)
From Coq Require Import ZArith.
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.zify Require Import ssrZ zify.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

(* ---------------------------------------------------------------- the checker (in Z) *)
Section Compute.
Local Open Scope Z_scope.

Fixpoint sumZ (w : seq Z) : Z := if w is x :: r then x + sumZ r else 0.
Fixpoint maxZ (w : seq Z) : Z := if w is x :: r then Z.max x (maxZ r) else 0.
Fixpoint all_nonneg (w : seq Z) : bool := if w is x :: r then (0 <=? x) && all_nonneg r else true.

(* bal acc xs rem, with rem = Σxs: the least |acc + Σ ±x| over the signs of xs.  Once
   |acc| ≥ rem the least value is |acc| − rem (every x against acc), so the search stops. *)
Fixpoint bal (acc : Z) (xs : seq Z) (rem : Z) : Z :=
  if rem <=? Z.abs acc then Z.abs acc - rem else
  match xs with
  | [::] => Z.abs acc
  | x :: r => Z.min (bal (acc + x) r (rem - x)) (bal (acc - x) r (rem - x))
  end.

(* The least |Σ_{i∈H} ±w_i| (the first head atom's sign fixed: S and Sᶜ give the same value). *)
Definition bal_top (h : seq Z) : Z := if h is x :: r then bal x r (sumZ r) else 0.

(* A lower bound on |w(S) − w(Sᶜ)| for every S: the head balanced exactly, the tail against it. *)
Definition disc_lower (w : seq Z) (hd : seq bool) : Z :=
  bal_top (mask hd w) - sumZ (mask (map negb hd) w).

(* The count (parity) lemma, with a hint J (a mask): if every atom of J is nonzero and at
   most M = max w(J), every nonzero atom outside J is at least M, and 2|J| ≤ n + 1 for the
   number n of nonzero atoms, then each split puts at least |J| nonzero atoms on one side,
   that side weighs at least w(J), and |w(S) − w(Sᶜ)| ≥ 2·w(J) − T.  With J the (n + 1)/2
   smallest atoms of an odd count this is certificates/verify.py's count_disc_lower(w, 0).
   Any other J gives the bound 0 (no claim). *)
Fixpoint cnt_ok (w : seq Z) (J : seq bool) (M : Z) : bool :=
  match w, J with
  | x :: w', j :: J' => (if j then (0 <? x) && (x <=? M) else (x <=? 0) || (M <=? x)) && cnt_ok w' J' M
  | [::], [::] => true
  | _, _ => false
  end.
Fixpoint nzZ (w : seq Z) (m : seq bool) : Z :=
  match w, m with
  | x :: w', b :: m' => (if b && (0 <? x) then 1 else 0) + nzZ w' m'
  | _, _ => 0
  end.
Fixpoint cntZ (m : seq bool) : Z := if m is b :: m' then (if b then 1 else 0) + cntZ m' else 0.

Definition count_lower (w : seq Z) (J : seq bool) : Z :=
  let M := maxZ (mask J w) in
  if cnt_ok w J M && (0 <=? M) && (2 * cntZ J <=? nzZ w (nseq (size w) true) + 1)
  then 2 * sumZ (mask J w) - sumZ w else 0.

(* A rational claim n/d, d > 0, as a pair (n, d). *)
Definition qle (a b : Z * Z) : bool := a.1 * b.2 <=? b.1 * a.2.
Definition qok (a : Z * Z) : bool := (0 <? a.2) && (0 <=? a.1) && (a.1 <=? a.2).

Definition two48 : Z := Eval compute in 2 ^ 48.
Definition two50 : Z := Eval compute in 2 ^ 50.
Definition two51 : Z := Eval compute in 2 ^ 51.

(* The regime flag, as certificates/verify.py decides it: hi − lo = wd/(hd·ld) with
   wd = hn·ld − ln·hd; tol = tn/td. *)
Definition regime_ok (reg : Z) (dominant : bool) (lo hi tol : Z * Z) : bool :=
  let wd := hi.1 * lo.2 - lo.1 * hi.2 in
  let den := hi.2 * lo.2 in
  (0 <? tol.2) && (0 <=? tol.1) &&
  (if reg =? 0 then dominant
   else if reg =? 1 then negb dominant &&
          ((wd * tol.2 <=? tol.1 * den) || (wd * two50 <=? den))
   else if reg =? 2 then negb dominant &&
          (tol.1 * (two48 - 1) * den <? wd * tol.2 * two48) && (den <? wd * two51)
   else false).

Definition check_row (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z) : bool :=
  let T := sumZ w in
  let A := sumZ (mask wit w) in
  let B := T - A in
  let T2 := T * T in
  let dominant := T <=? 2 * maxZ w in
  all_nonneg w && (0 <? T) && (size wit =? size w)%nat && (size hd =? size w)%nat &&
  qok lo && qok hi && qok glo && qok ghi && qle lo hi && qle glo ghi &&
  (* witness (C7): lo ≤ 4AB/T², (A − B)²/T² ≤ gap_hi *)
  (lo.1 * T2 <=? 4 * A * B * lo.2) && ((A - B) * (A - B) * ghi.2 <=? ghi.1 * T2) &&
  regime_ok reg dominant lo hi tol &&
  (* upper bounds, when claimed: gap_lo ≤ d²/T² and 1 − d²/T² ≤ θ_hi *)
  (if (hi.1 <? hi.2) || (0 <? glo.1) then
     let d := Z.max (disc_lower w hd) (count_lower w cj) in
     (0 <=? d) && (glo.1 * T2 <=? d * d * glo.2) && ((T2 - d * d) * hi.2 <=? hi.1 * T2)
   else true).

End Compute.

(* ---------------------------------------------------------------- facts in Z *)
Section ZFacts.
Local Open Scope Z_scope.

(* Σ ±x_i with sign + where the list s says true (missing signs count as +). *)
Fixpoint sdiff (xs : seq Z) (s : seq bool) : Z :=
  match xs with
  | [::] => 0
  | x :: r => (if head true s then x else - x) + sdiff r (behead s)
  end.

Lemma all_nonneg_mask m w : all_nonneg w -> all_nonneg (mask m w).
Proof.
elim: w m => [|x w IH] [|b m] //=; case/andP=> hx hw; case: b => //=.
  by rewrite hx IH.
by rewrite IH.
Qed.

Lemma sumZ_ge0 w : all_nonneg w -> 0 <= sumZ w.
Proof. by elim: w => //= x w IH /andP[/Z.leb_le hx /IH]; lia. Qed.

Lemma sdiff_le xs s : all_nonneg xs -> Z.abs (sdiff xs s) <= sumZ xs.
Proof.
elim: xs s => [|x r IH] s //= /andP[/Z.leb_le hx hr].
by have := IH (behead s) hr; case: (head true s); lia.
Qed.

Lemma bal_le xs : all_nonneg xs -> forall acc s, bal acc xs (sumZ xs) <= Z.abs (acc + sdiff xs s).
Proof.
elim: xs => [|x r IH] /= hxs acc s.
  by case: Z.leb_spec; lia.
case/andP: hxs => /Z.leb_le hx hr.
have hs := @sdiff_le r (behead s) hr; have h0 := sumZ_ge0 hr.
case: Z.leb_spec => hcut.
  by case: (head true s); lia.
rewrite (_ : x + sumZ r - x = sumZ r); last by lia.
case: (head true s).
  by have := IH hr (acc + x) (behead s); lia.
by have := IH hr (acc - x) (behead s); lia.
Qed.

Lemma sdiff_neg xs s : size s = size xs -> sdiff xs (map negb s) = - sdiff xs s.
Proof. by elim: xs s => [|x r IH] [|b s] //= [hs]; rewrite IH //; case: b => /=; lia. Qed.

Lemma bal_top_le h s : all_nonneg h -> size s = size h -> bal_top h <= Z.abs (sdiff h s).
Proof.
case: h => [|x r] /=; first by lia.
case/andP=> _ hr; case: s => [//|b s] /= [hs].
case: b.
  by have := @bal_le r hr x s; lia.
have := @bal_le r hr x (map negb s); rewrite sdiff_neg //; lia.
Qed.

(* Splitting a signed sum by the head mask. *)
Lemma sdiff_split w s hd : size s = size w -> size hd = size w ->
  sdiff w s = sdiff (mask hd w) (mask hd s) + sdiff (mask (map negb hd) w) (mask (map negb hd) s).
Proof.
elim: w s hd => [|x w IH] [|b s] [|c hd] //= [hs] [hh].
rewrite (IH s hd hs hh); case: c => /=; lia.
Qed.

Lemma size_mask2 (w : seq Z) (s hd : seq bool) : size s = size w -> size hd = size w ->
  size (mask hd s) = size (mask hd w).
Proof. by move=> hs hh; rewrite !size_mask ?hs ?hh. Qed.

Lemma disc_lower_le w hd s : all_nonneg w -> size s = size w -> size hd = size w ->
  disc_lower w hd <= Z.abs (sdiff w s).
Proof.
move=> hw hs hh; rewrite (sdiff_split hs hh) /disc_lower.
have := @bal_top_le (mask hd w) (mask hd s) (all_nonneg_mask hd hw) (size_mask2 hs hh).
have := @sdiff_le (mask (map negb hd) w) (mask (map negb hd) s) (all_nonneg_mask (map negb hd) hw).
lia.
Qed.

Lemma count_main w J m M : all_nonneg w -> cnt_ok w J M -> size m = size w ->
  sumZ (mask J w) + M * (nzZ w m - cntZ J) <= sumZ (mask m w).
Proof.
elim: w J m => [|x w IH] [|j J] [|b m] //; first by move=> _ _ _ /=; lia.
cbn [all_nonneg cnt_ok size] => /andP[/Z.leb_le hx0 hw] /andP[hx hr] [hm].
have := IH J m hw hr hm; move: hx.
case: j; case: b; cbn [andb orb mask sumZ nzZ cntZ];
  case: (Z.ltb_spec 0 x) => ?; case: (Z.leb_spec x M) => ?; case: (Z.leb_spec x 0) => ?;
  case: (Z.leb_spec M x) => ?; cbn [andb orb] => // _; nia.
Qed.

Lemma nz_compl w m : size m = size w ->
  nzZ w m + nzZ w (map negb m) = nzZ w (nseq (size w) true).
Proof. by elim: w m => [|x w IH] [|b m] //= [hm]; rewrite -(IH m hm); case: b => /=; lia. Qed.

Lemma sum_compl w m : size m = size w -> sumZ (mask m w) + sumZ (mask (map negb m) w) = sumZ w.
Proof. by elim: w m => [|x w IH] [|b m] //= [hm]; rewrite -(IH m hm); case: b => /=; lia. Qed.

(* The signed sum of a split: w(S) − w(Sᶜ) = 2·w(S) − T. *)
Lemma sdiff_mask w s : size s = size w -> sdiff w s = sumZ (mask s w) + sumZ (mask s w) - sumZ w.
Proof. by elim: w s => [|x w IH] [|b s] //= [hs]; rewrite IH //; case: b => /=; lia. Qed.

(* 4·A·(T − A) and (A − B)² = (2A − T)², the numerators of θ_S and of 1 − θ_S over T². *)
Definition svZ (A T : Z) : Z := 4 * A * (T - A).
Definition gapZ (A T : Z) : Z := (A + A - T) * (A + A - T).
Definition sqZ (x : Z) : Z := x * x.

Lemma sq_le d D : 0 <= d -> d <= Z.abs D -> d * d <= D * D.
Proof. move=> h0 h1; rewrite -Z.abs_square; nia. Qed.

(* What a true verdict says, in Z. *)
Lemma count_lower_le w J s : all_nonneg w -> size s = size w -> count_lower w J <= Z.abs (sdiff w s).
Proof.
move=> hw hs; rewrite /count_lower; case: ifP => [|_]; last by lia.
case/andP=> /andP[hok /Z.leb_le hM] /Z.leb_le hc.
rewrite sdiff_mask //.
have e1 := nz_compl hs; have e2 := sum_compl hs.
have h1 := count_main hw hok hs.
have h2 := count_main hw hok (etrans (size_map negb s) hs).
set A := sumZ (mask s w) in e2 h1 *; set B := sumZ (mask (map negb s) w) in e2 h2 *.
set c := cntZ J in hc h1 h2 *; set a := nzZ w s in e1 h1 *; set b := nzZ w (map negb s) in e1 h2 *.
have [ha|hb] : c <= a \/ c <= b by lia.
  by have := Z.mul_nonneg_nonneg _ _ hM (proj2 (Z.sub_nonneg _ _) ha); lia.
by have := Z.mul_nonneg_nonneg _ _ hM (proj2 (Z.sub_nonneg _ _) hb); lia.
Qed.

Lemma check_row_Z w wit hd cj lo hi glo ghi tol reg :
  check_row w wit hd cj lo hi glo ghi tol reg = true ->
  let T := sumZ w in let A := sumZ (mask wit w) in
  0 < T /\ size wit = size w /\ (0 < lo.2 /\ 0 < hi.2 /\ 0 < glo.2 /\ 0 < ghi.2) /\
  (0 <= hi.1 /\ glo.1 <= glo.2) /\
  lo.1 * (T * T) <= 4 * A * (T - A) * lo.2 /\
  (A + A - T) * (A + A - T) * ghi.2 <= ghi.1 * (T * T) /\
  forall m, size m = size w -> let a := sumZ (mask m w) in
    4 * a * (T - a) * hi.2 <= hi.1 * (T * T) /\
    4 * a * (T - a) * glo.2 <= (glo.2 - glo.1) * (T * T).
Proof.
rewrite /check_row /qok /qle.
set T := sumZ w; set A := sumZ (mask wit w).
case: lo => ln ld; case: hi => hn hd'; case: glo => gn gd; case: ghi => Gn Gd; cbn [fst snd].
move=> /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[] /andP[].
move=> hw /Z.ltb_lt hT /eqP hs1 /eqP hs2.
move=> /andP[] /andP[] /Z.ltb_lt ? /Z.leb_le ? /Z.leb_le ?.
move=> /andP[] /andP[] /Z.ltb_lt ? /Z.leb_le ? /Z.leb_le ?.
move=> /andP[] /andP[] /Z.ltb_lt ? /Z.leb_le ? /Z.leb_le ?.
move=> /andP[] /andP[] /Z.ltb_lt ? /Z.leb_le ? /Z.leb_le ?.
move=> /Z.leb_le ? /Z.leb_le ? /Z.leb_le hlo /Z.leb_le hghi _ hup.
have [d [d0 hdisc hg hh]] : exists d, [/\ 0 <= d, forall m, size m = size w -> d <= Z.abs (sdiff w m),
    gn * (T * T) <= d * d * gd & (T * T - d * d) * hd' <= hn * (T * T)].
  move: hup; case: ifP => [_ | /negbT].
    case/andP=> /andP[] /Z.leb_le ? /Z.leb_le ? /Z.leb_le ?.
    exists (Z.max (disc_lower w hd) (count_lower w cj)); split=> // m hm.
    by apply: Z.max_lub; [exact: disc_lower_le | exact: count_lower_le].
  rewrite negb_or => /andP[] /negbTE /Z.ltb_ge ? /negbTE /Z.ltb_ge ? _.
  by exists 0; split; try nia.
split; first lia. split; first by []. split; first lia. split; first lia.
split; first lia. split; first lia.
move=> m hm; set a := sumZ (mask m w).
have hD := sq_le d0 (hdisc m hm); rewrite sdiff_mask // -/a -/T in hD.
have e : 4 * a * (T - a) = T * T - (a + a - T) * (a + a - T) by ring.
rewrite e; split; nia.
Qed.

(* The regime flag: 0 exactly for dominant rows (2·max w ≥ T). *)
Lemma maxZ_ge w i : (i < size w)%N -> nth 0 w i <= maxZ w.
Proof. by elim: w i => [|x w IH] [|i] //= hi; [lia | have := IH i hi; lia]. Qed.

Lemma maxZ_attained w : 0 < maxZ w -> exists2 i, (i < size w)%N & nth 0 w i = maxZ w.
Proof.
elim: w => [|x w IH] /=; first by lia.
case: (Z.max_spec x (maxZ w)) => [[hlt ->] /IH [i hi <-]|[hle ->] _].
  by exists i.+1.
by exists 0%N.
Qed.

Lemma check_row_reg w wit hd cj lo hi glo ghi tol reg :
  check_row w wit hd cj lo hi glo ghi tol reg = true -> (reg = 0 <-> sumZ w <= 2 * maxZ w).
Proof.
rewrite /check_row /regime_ok => /andP[/andP[_ /andP[_ h]] _]; move: h.
case: (Z.eqb_spec reg 0) => [-> /Z.leb_le //|h0].
case: (Z.eqb_spec reg 1) => _; first by case/andP=> /negP hd' _; split=> // /Z.leb_le.
case: (Z.eqb_spec reg 2) => _ //; by case/andP=> /andP[/negP hd' _] _; split=> // /Z.leb_le.
Qed.

End ZFacts.


(* ---------------------------------------------------------------- from Z to a realFieldType *)
Local Open Scope ring_scope.

Section Bridge.
Variable R : realFieldType.

Definition zR (z : Z) : R := (int_of_Z z)%:~R.

Lemma int_of_ZD a b : int_of_Z (Z.add a b) = int_of_Z a + int_of_Z b. Proof. by zify. Qed.
Lemma int_of_ZM a b : int_of_Z (Z.mul a b) = int_of_Z a * int_of_Z b. Proof. by zify. Qed.
Lemma int_of_ZB a b : int_of_Z (Z.sub a b) = int_of_Z a - int_of_Z b. Proof. zify; reflexivity. Qed.

Lemma zRD a b : zR (Z.add a b) = zR a + zR b. Proof. by rewrite /zR int_of_ZD intrD. Qed.
Lemma zRM a b : zR (Z.mul a b) = zR a * zR b. Proof. by rewrite /zR int_of_ZM intrM. Qed.
Lemma zRB a b : zR (Z.sub a b) = zR a - zR b. Proof. by rewrite /zR int_of_ZB rmorphB. Qed.

Lemma zR0 : zR Z0 = 0. Proof. by []. Qed.

Lemma zR_le a b : Z.le a b -> zR a <= zR b.
Proof. by move=> h; rewrite /zR ler_int; lia. Qed.

Lemma zR_lt a b : Z.lt a b -> zR a < zR b.
Proof. by move=> h; rewrite /zR ltr_int; lia. Qed.


(* Σ_{i : nth m i} w_i over 'I_(size w), in R, is w(mask m w). *)
Lemma sum_mask (w : seq Z) (m : seq bool) :
  \sum_(i < size w | nth false m i) zR (nth Z0 w i) = zR (sumZ (mask m w)).
Proof.
elim: w m => [|x w IH] m; first by rewrite big_ord0 mask0.
case: m => [|b m].
  rewrite big1 ?mask0s //= => i; by rewrite nth_nil.
rewrite big_mkcond big_ord_recl /= -big_mkcond /=.
rewrite (eq_bigl (fun i : 'I_(size w) => nth false m i)) // IH.
by case: b => //=; rewrite ?zRD ?add0r.
Qed.

Lemma sum_all (w : seq Z) : \sum_(i < size w) zR (nth Z0 w i) = zR (sumZ w).
Proof.
rewrite (eq_bigl (fun i : 'I_(size w) => nth false (nseq (size w) true) i)) ?sum_mask ?mask_true //.
by move=> i; rewrite nth_nseq ltn_ord.
Qed.

End Bridge.

(* ---------------------------------------------------------------- soundness *)
Section Sound.
Variable R : realFieldType.

Let qR (a : Z * Z) : R := zR R a.1 / zR R a.2.

(* From a cross-multiplied comparison to the rational one. *)
Lemma qle_R (n d : Z) (x y : R) : Z.lt Z0 d -> 0 < y ->
  zR R n * y <= x * zR R d -> zR R n / zR R d <= x / y.
Proof.
move=> hd hy h; have hd' : 0 < zR R d by exact: (zR_lt R hd).
by rewrite ler_pdivr_mulr // mulrAC ler_pdivl_mulr.
Qed.

Lemma qge_R (n d : Z) (x y : R) : Z.lt Z0 d -> 0 < y ->
  x * zR R d <= zR R n * y -> x / y <= zR R n / zR R d.
Proof.
move=> hd hy h; have hd' : 0 < zR R d by exact: (zR_lt R hd).
by rewrite ler_pdivr_mulr // mulrAC ler_pdivl_mulr.
Qed.

Lemma lift_le x y n d : Z.lt Z0 y -> Z.lt Z0 d -> Z.le (Z.mul x d) (Z.mul n y) ->
  zR R x / zR R y <= zR R n / zR R d.
Proof.
move=> hy hd h; have hy' := zR_lt R hy; have hd' := zR_lt R hd; rewrite zR0 in hy' hd'.
by rewrite ler_pdivr_mulr // mulrAC ler_pdivl_mulr // -!zRM; exact: zR_le.
Qed.

Lemma zR_ge0 x : Z.le Z0 x -> 0 <= zR R x.
Proof. by move=> h; rewrite -(zR0 R); exact: zR_le. Qed.

(* The sign list of a subset, in row order. *)
Definition set_mask L (S : {set 'I_L}) : seq bool := [seq i \in S | i <- enum 'I_L].

Lemma set_maskE L (S : {set 'I_L}) (i : 'I_L) : nth false (set_mask S) i = (i \in S).
Proof. by rewrite /set_mask (nth_map i) ?nth_ord_enum // size_enum_ord. Qed.

Lemma size_set_mask L (S : {set 'I_L}) : size (set_mask S) = L.
Proof. by rewrite size_map size_enum_ord. Qed.

(* The exact normalisation of a row. *)
Definition rowp (w : seq Z) : 'I_(size w) -> R := fun i => zR R (nth Z0 w i) / zR R (sumZ w).
Arguments rowp : clear implicits.

Lemma zR4 : zR R (Zpos 4%positive) = 4. Proof. by []. Qed.

Lemma split_valueZ (w : seq Z) (m : seq bool) (S : {set 'I_(size w)}) : Z.lt Z0 (sumZ w) ->
  (forall i : 'I_(size w), nth false m i = (i \in S)) ->
  split_value (rowp w) S = zR R (svZ (sumZ (mask m w)) (sumZ w)) / zR R (Z.mul (sumZ w) (sumZ w)).
Proof.
move=> hT hm; set T := sumZ w; have hT' : zR R T != 0 by rewrite gt_eqF // -(zR0 R) zR_lt.
rewrite /split_value.
have -> : mass (rowp w) S = zR R (sumZ (mask m w)) / zR R T.
  rewrite /mass -mulr_suml -sum_mask; congr (_ / _).
  by apply: eq_bigl => i; rewrite hm.
rewrite /svZ !zRM zRB zR4; field; exact: hT'.
Qed.

Lemma gap_valueZ (w : seq Z) (m : seq bool) (S : {set 'I_(size w)}) : Z.lt Z0 (sumZ w) ->
  (forall i : 'I_(size w), nth false m i = (i \in S)) ->
  1 - split_value (rowp w) S = zR R (gapZ (sumZ (mask m w)) (sumZ w)) / zR R (Z.mul (sumZ w) (sumZ w)).
Proof.
move=> hT hm; have hT' : zR R (sumZ w) != 0 by rewrite gt_eqF // -(zR0 R) zR_lt.
rewrite (split_valueZ hT hm) /svZ /gapZ !zRM !zRB !zRD zR4; field; exact: hT'.
Qed.

Lemma check_row_sound_size (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z) :
  check_row w wit hd cj lo hi glo ghi tol reg = true ->
  let p := fun i : 'I_(size w) => zR R (nth Z0 w i) / zR R (sumZ w) in
  qR lo <= theta p <= qR hi /\ qR glo <= 1 - theta p <= qR ghi.
Proof.
move=> /check_row_Z [hT [hs1 [[hld [hhd [hgd hGd]]] [[hhn hgn] [hlo [hghi hup]]]]]] p.
rewrite -/(rowp w) in p *.
have hTT : Z.lt Z0 (Z.mul (sumZ w) (sumZ w)) by nia.
set Sw := [set i : 'I_(size w) | nth false wit i].
have hw : forall i : 'I_(size w), nth false wit i = (i \in Sw) by move=> i; rewrite inE.
have hS : forall S : {set 'I_(size w)}, forall i : 'I_(size w), nth false (set_mask S) i = (i \in S).
  by move=> S i; rewrite set_maskE.
have hup' S := hup (set_mask S) (size_set_mask S).
have eglo : 1 - qR glo = zR R (Z.sub glo.2 glo.1) / zR R glo.2.
  have : zR R glo.2 != 0 by rewrite gt_eqF // -(zR0 R) zR_lt.
  by rewrite /qR zRB => h; field.
have hth_hi : theta p <= qR hi.
  apply: theta_le => [|S]; first by rewrite divr_ge0 // zR_ge0 //; lia.
  rewrite (split_valueZ hT (hS S)); apply: lift_le => //; exact: (proj1 (hup' S)).
have hth_glo : theta p <= 1 - qR glo.
  apply: theta_le => [|S].
    by rewrite eglo divr_ge0 // zR_ge0 //; lia.
  rewrite eglo (split_valueZ hT (hS S)); apply: lift_le => //; exact: (proj2 (hup' S)).
have hth_lo : qR lo <= theta p.
  apply: le_trans (theta_ge p Sw); rewrite (split_valueZ hT hw); exact: lift_le.
have hgap_hi : 1 - theta p <= qR ghi.
  apply: le_trans (_ : 1 - split_value p Sw <= _).
    by rewrite ler_sub // theta_ge.
  rewrite (gap_valueZ hT hw); exact: lift_le.
split; apply/andP; split => //.
by rewrite ler_subr_addl -ler_subr_addr.
Qed.

Lemma zR_le_iff a b : zR R a <= zR R b <-> Z.le a b.
Proof. by rewrite /zR ler_int; split => h; lia. Qed.

Lemma zR2 : zR R (Zpos 2%positive) = 2. Proof. by []. Qed.

(* What the regime flag means: 0 exactly when some atom has p_i ≥ 1/2 (then θ = 4p_i(1 − p_i), C4). *)
Lemma check_row_regime (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z) :
  check_row w wit hd cj lo hi glo ghi tol reg = true ->
  (reg = Z0 <-> exists i : 'I_(size w), 2^-1 <= zR R (nth Z0 w i) / zR R (sumZ w)).
Proof.
move=> h; have [hT _] := check_row_Z h; rewrite (check_row_reg h).
have hT' : 0 < zR R (sumZ w) by rewrite -(zR0 R) zR_lt.
have half a : 2^-1 <= zR R a / zR R (sumZ w) <-> Z.le (sumZ w) (Z.mul (Zpos 2%positive) a).
  by rewrite ler_pdivl_mulr // ler_pdivr_mull ?ltr0n // -zR2 -zRM zR_le_iff.
split.
  move=> hd'; have [i hiw hm] := @maxZ_attained w (ltac:(lia)).
  by exists (Ordinal hiw); apply/half; rewrite /= hm.
by case=> i /half hiw; have := @maxZ_ge w i (ltn_ord i); lia.
Qed.

(* The same for rows of a given length L (the form Spec.v pins). *)
Theorem check_row_sound (L : nat) (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z) :
  size w = L -> check_row w wit hd cj lo hi glo ghi tol reg = true ->
  let p := fun i : 'I_L => zR R (nth Z0 w i) / zR R (sumZ w) in
  (qR lo <= theta p <= qR hi /\ qR glo <= 1 - theta p <= qR ghi) /\
  (reg = Z0 <-> exists i : 'I_L, 2^-1 <= p i).
Proof.
move=> hL; subst L => h; split; first exact: check_row_sound_size h.
exact: check_row_regime h.
Qed.

End Sound.
