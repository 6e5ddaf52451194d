(* C11's derivative without the α ĉĉᵀ term is false, in every model R of the reals: at d = 2,
   x = v = (0, 1), γ = (1, 1), β = 0, eps = 0, coordinate 0, the variant and C11_derivative
   would give h ↦ LN(x + hv)_0 two derivatives, (1/s)γ_0 c_0 and (1/s)γ_0 (c_0 − c_0 ‖c‖²/(dσ²)),
   and a derivative is unique (is_derive carries 'D_1 f 0 = value).  They differ by
   (1/s) γ_0 c_0 ‖c‖²/(dσ²) ≠ 0, since c_0 = −1/2 and ‖c‖² > 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun.
From AttnSens Require Import LayerNorm C11 LayerNormDerive.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.
Local Open Scope ring_scope.

Theorem C11_noalpha_refuted (R : realType) :
  ~ (forall (d : nat) (x g b v : 'I_d -> R) (eps : R) (i : 'I_d), 0 < var x + eps ->
       is_derive (0 : R) (1 : R) (fun h : R => layernorm (fun j => x j + h * v j) g b eps i)
         ((Num.sqrt (var x + eps))^-1 * (g i * cen v i))).
Proof.
move=> W; pose x : 'I_2 -> R := fun j => (j : nat)%:R.
pose g : 'I_2 -> R := fun _ => 1; pose b : 'I_2 -> R := fun _ => 0.
have c0 : cen x ord0 = - 2^-1.
  by rewrite /cen /mean !big_ord_recr big_ord0 /x /= !add0r mul1r.
have c0n : cen x ord0 != 0 by rewrite c0 oppr_eq0 invr_eq0 pnatr_eq0.
set S := \sum_l cen x l * cen x l.
have S0 : 0 < S.
  rewrite /S (bigD1 ord0) //=; apply: ltr_paddr.
    by apply: sumr_ge0 => l _; rewrite -expr2 sqr_ge0.
  by rewrite c0 mulrNN mulr_gt0 // invr_gt0 ltr0n.
have hA : 0 < var x + 0.
  by rewrite addr0 /var divr_gt0 ?ltr0n.
have d1 := C11_derivative g b x ord0 hA.
have d2 := W 2%N x g b x 0 ord0 hA.
have := etrans (esym (@derive_val _ _ _ _ _ _ _ d1)) (@derive_val _ _ _ _ _ _ _ d2).
rewrite ln_jac_col -/S; set s := Num.sqrt _.
have sn : s^-1 != 0 by rewrite invr_eq0 gt_eqF // sqrtr_gt0.
move/(mulfI sn)/(mulfI (oner_neq0 R))/eqP; rewrite -subr_eq0 addrAC subrr add0r oppr_eq0.
by apply/negP; rewrite !mulf_neq0 ?invr_eq0 ?mulf_neq0 ?c0n ?(gt_eqF S0) ?(gt_eqF hA) ?pnatr_eq0.
Qed.
