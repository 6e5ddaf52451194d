(* C1's wrong variant "the derivative of u ↦ softmax(u/τ) is C(p), without the 1/τ" is false, in
   every model R of the reals.  It contradicts itself: h ↦ softmax((0 + h v)/2) and
   h ↦ softmax((0 + h (v/2))/1) are the same function, so the variant gives it the derivatives
   C(p)v and C(p)(v/2) = C(p)v/2 (p = softmax(0), uniform), and a derivative is unique
   (is_derive carries 'D_1 f 0 = value).  At L = 2, v = e₀: (C(p)v)₀ = 1/2 − 1/4 = 1/4 ≠ 0.
   The refutation uses neither C1.v nor its proof. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun exp.
From AttnSens Require Import Theta Softmax.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.
Local Open Scope ring_scope.

Theorem C1_notau_refuted (R : realType) :
  ~ (forall (L : nat) (u v : 'I_L -> R) (tau : R) (i : 'I_L), 0 < tau ->
       is_derive (0 : R) (1 : R) (fun h : R => softmax (fun j => (u j + h * v j) / tau) i)
         (Cx (softmax (fun j => u j / tau)) v i)).
Proof.
move=> W; pose u : 'I_2 -> R := fun _ => 0; pose v : 'I_2 -> R := fun j => (j == ord0)%:R.
have d2 := W 2%N u v 2 ord0 (ltr0Sn _ 1).
have d1 := W 2%N u (fun j => v j / 2) 1 ord0 ltr01.
have eqz (h : R) : (fun j => (u j + h * (v j / 2)) / 1) = (fun j => (u j + h * v j) / 2).
  by apply/funext => j; rewrite /u !add0r divr1 mulrA.
have same : (fun h : R => softmax (fun j => (u j + h * (v j / 2)) / 1) ord0)
          = (fun h : R => softmax (fun j => (u j + h * v j) / 2) ord0).
  by apply/funext => h; rewrite eqz.
have pu : (fun j => u j / 1) = (fun j => u j / 2) by apply/funext => j; rewrite /u !mul0r.
rewrite same pu in d1.
pose p := softmax (fun j => u j / 2); pose x := Cx p v ord0.
have : Cx p (fun j => v j / 2) ord0 = x.
  exact: etrans (esym (@derive_val _ _ _ _ _ _ _ d1)) (@derive_val _ _ _ _ _ _ _ d2).
have -> : Cx p (fun j => v j / 2) ord0 = x / 2.
  by rewrite /x /Cx mulr_suml; apply: eq_bigr => j _; rewrite mulrA.
have p_half j : p j = 2^-1.
  by rewrite /p /softmax /u /= !mul0r expR0 sumr_const card_ord mul1r.
have x_gt0 : 0 < x.
  rewrite /x CxE !big_ord_recl big_ord0 !p_half /v /= mulr1 mulr0 !addr0.
  by rewrite -{1}[2^-1]mulr1 -mulrBr mulr_gt0 ?invr_gt0 ?subr_gt0 ?invf_lt1 ?ltr0Sn ?ltr1n.
have : x / 2 < x by rewrite gtr_pmulr // invf_lt1 ?ltr0Sn ?ltr1n.
by rewrite lt_neqAle => /andP [/eqP].
Qed.
