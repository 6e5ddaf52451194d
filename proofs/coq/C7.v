(* C7 (certificates), for every L: a subset S of an arbitrary row x with
   a = x(S), b = x(Sᶜ), a + b ≠ 0 certifies θ(x/(a + b)) ≥ 4ab/(a + b)²; and
   θ = 1 − δ² with δ(p) = min_S |p(S) − p(Sᶜ)| (numerics/theta.py). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C7.
Variables (R : realFieldType) (L : nat).
Implicit Types (p x : 'I_L -> R) (S : {set 'I_L}).

Theorem C7_certificate x S : mass x S + mass x (~: S) != 0 ->
  4 * mass x S * mass x (~: S) / (mass x S + mass x (~: S)) ^+ 2
    <= theta (fun i => x i / (mass x S + mass x (~: S))).
Proof.
move=> hT; apply: le_trans (theta_ge _ S); rewrite le_eqVlt; apply/orP; left.
set T := mass x S + mass x (~: S).
rewrite /split_value (_ : mass (fun i => x i / T) S = mass x S / T); last by rewrite /mass -mulr_suml.
by rewrite /T; apply/eqP; field.
Qed.

Theorem C7_delta p : distribution p -> theta p = 1 - delta p ^+ 2.
Proof.
move=> [p0 hs]; have d0 := delta_ge0 p.
have eS S : split_value p S = 1 - `|mass p S - mass p (~: S)| ^+ 2.
  by rewrite real_normK ?num_real // mass_compl // /split_value; ring.
apply/le_anti/andP; split.
  apply: theta_le => [|S]; first by rewrite subr_ge0 exprn_ile1 ?delta_le1.
  rewrite eS; apply: ler_sub; first exact: lexx.
  rewrite -subr_ge0.
  set d := `|_|; rewrite (_ : _ - _ = (d - delta p) * (d + delta p)); last by ring.
  apply: mulr_ge0; first by rewrite subr_ge0; exact: delta_le.
  by rewrite addr_ge0 ?normr_ge0.
case: (delta_attained p) => [-> | [S ->]]; first by rewrite expr1n subrr theta_ge0.
by rewrite -eS theta_ge.
Qed.

End C7.
