(* Negative control for the certificate checker (Checker.v): the witness bound with T where
   it needs T² (θ_lo·T ≤ 4AB instead of θ_lo·T² ≤ 4AB).  The proof attempt reduces the
   variant to the proved checker, as a sound variant would be; it must fail at the weakened
   comparison.  Checker_witnessT_refuted.v shows the variant accepts a false certificate. *)
From Coq Require Import ZArith.
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.zify Require Import ssrZ zify.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7 Checker.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Section Weak.
Local Open Scope Z_scope.
Definition check_row_T (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z) : bool :=
  let T := sumZ w in
  let A := sumZ (mask wit w) in
  let B := T - A in
  let T2 := T * T in
  let dominant := T <=? 2 * maxZ w in
  all_nonneg w && (0 <? T) && (size wit =? size w)%nat && (size hd =? size w)%nat &&
  qok lo && qok hi && qok glo && qok ghi && qle lo hi && qle glo ghi &&
  (* WRONG: lo·T ≤ 4AB, T where the bound needs T² *)
  (lo.1 * T <=? 4 * A * B * lo.2) && ((A - B) * (A - B) * ghi.2 <=? ghi.1 * T2) &&
  regime_ok reg dominant lo hi tol &&
  (* upper bounds, when claimed: gap_lo ≤ d²/T² and 1 − d²/T² ≤ θ_hi *)
  (if (hi.1 <? hi.2) || (0 <? glo.1) then
     let d := Z.max (disc_lower w hd) (count_lower w cj) in
     (0 <=? d) && (glo.1 * T2 <=? d * d * glo.2) && ((T2 - d * d) * hi.2 <=? hi.1 * T2)
   else true).

End Weak.
Local Open Scope ring_scope.

Theorem Checker_witnessT_wrong (R : realFieldType) (w : seq Z) (wit hd cj : seq bool)
    (lo hi glo ghi tol : Z * Z) (reg : Z) :
  check_row_T w wit hd cj lo hi glo ghi tol reg = true ->
  let p := fun i : 'I_(size w) => zR R (nth Z0 w i) / zR R (sumZ w) in
  let q := fun a : Z * Z => zR R a.1 / zR R a.2 in
  q lo <= theta p <= q hi /\ q glo <= 1 - theta p <= q ghi.
Proof.
move=> h; apply: (@check_row_sound_size R w wit hd cj lo hi glo ghi tol reg).
move: h; rewrite /check_row_T /check_row; cbv zeta.
move=> /andP[/andP[/andP[/andP[hpre hw1] hw2] hreg] hup].
rewrite hpre hw2 hreg hup !andbT andTb.
move: hw1 => /Z.leb_le hw1; apply/Z.leb_le.
(* lo.1·T ≤ 4AB·lo.2 does not give lo.1·T² ≤ 4AB·lo.2: this is where it fails *)
nia.
Qed.
