(* The checker variant of Checker_witnessT.v (θ_lo·T ≤ 4AB, T where the witness bound needs
   T²) accepts a false certificate: the row (1, 3) with witness {1} and θ_lo = θ_hi = 1,
   while θ(1/4, 3/4) = 3/4 (every subset gives at most 3/4). *)
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

Definition w0 : seq Z := [:: 1; 3].
Definition one : Z * Z := (1, 1).
Definition zero : Z * Z := (0, 1).
Definition tol0 : Z * Z := (1, 1048576).
End Weak.

From AttnSens Require Import Eval.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem Checker_witnessT_refuted :
  ~ (forall (R : realFieldType) (w : seq Z) (wit hd cj : seq bool) (lo hi glo ghi tol : Z * Z) (reg : Z),
      check_row_T w wit hd cj lo hi glo ghi tol reg = true ->
      let p := fun i : 'I_(size w) => zR R (nth Z0 w i) / zR R (sumZ w) in
      let q := fun a : Z * Z => zR R a.1 / zR R a.2 in
      q lo <= theta p <= q hi /\ q glo <= 1 - theta p <= q ghi).
Proof.
move=> h.
have := h Q w0 [:: false; true] [:: true; true] [:: false; false] one one zero one tol0 Z0 erefl.
move=> /= [/andP[hlo _] _].
have hle : theta (fun i : 'I_2 => zR Q (nth Z0 w0 i) / zR Q (sumZ w0)) <= 3%:R / 4%:R.
  apply: theta_le; first by vm_compute.
  all_subsets.
have := le_trans hlo hle.
by vm_compute.
Qed.
