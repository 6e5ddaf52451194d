(* Negative control for C11's derivative: the closed form without the α ĉĉᵀ term,
   (1/s) diag(γ) Π (the derivative if σ² were held fixed), is wrong.  The proof script of
   C11_derivative must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun.
From AttnSens Require Import LayerNorm C11 LayerNormDerive.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.
Local Open Scope ring_scope.

Theorem C11_noalpha_wrong (R : realType) (d : nat) (x g b v : 'I_d -> R) (eps : R) (i : 'I_d) : 0 < var x + eps ->
  is_derive (0 : R) (1 : R) (fun h : R => layernorm (fun j => x j + h * v j) g b eps i)
    ((Num.sqrt (var x + eps))^-1 * (g i * cen v i)).
Proof.
move=> hA; set A := var x + eps; set s := Num.sqrt A.
set B := (\sum_k cen x k * cen v k) / d%:R; set C := (\sum_k cen v k ^+ 2) / d%:R.
pose U := cst (cen x i) + cen v i \*: (@idfun R).
pose Q := cst A + (2 * B) \*: (@idfun R) + C \*: ((@idfun R) * (@idfun R)).
have dU : is_derive (0 : R) (1 : R) U (cen v i).
  by apply: is_derive_eq; rewrite add0r [_%:A]mulr1.
have dQ : is_derive (0 : R) (1 : R) Q (2 * B).
  apply: is_derive_eq; rewrite add0r [_%:A]mulr1.
  by rewrite /idfun /= !scale0r addr0 scaler0 addr0.
have Q0 : Q 0 = A by rewrite /Q !fctE /idfun /= mulr0 !scaler0 !addr0.
have hQ0 : 0 < Q 0 by rewrite Q0.
have dS := is_derive1_comp (is_derive_sqrt hQ0) dQ.
have sQ0 : (Num.sqrt \o Q) 0 != 0 by rewrite /= Q0 gt_eqF // sqrtr_gt0.
have dV := is_deriveV sQ0 dS.
have dM := is_deriveD (is_deriveM (is_derive_cst (g i) (0 : R) (1 : R)) (is_deriveM dU dV))
                      (is_derive_cst (b i) (0 : R) (1 : R)).
have -> : (fun h : R => layernorm (fun j => x j + h * v j) g b eps i) =
          cst (g i) * (U * (fun h => ((Num.sqrt \o Q) h)^-1)) + cst (b i).
  apply/funext => h; rewrite /layernorm cen_shift var_shift -/A -/B -/C !fctE.
  rewrite /U /Q !fctE /idfun /= [cen v i *: h]mulrC [(2 * B) *: h]mulrC [C *: (h * h)]mulrC.
  by rewrite [in RHS]mulrA.
have U0 : U 0 = cen x i by rewrite /U !fctE /idfun /= scaler0 addr0.
have hd : d%:R != 0 :> R by rewrite pnatr_eq0 -lt0n (leq_ltn_trans _ (ltn_ord i)).
have hs : s != 0 by rewrite gt_eqF // sqrtr_gt0.
apply: is_derive_eq dM _; rewrite ln_jac_col /= scaler0 !addr0 -/A U0 Q0 -/s.
have sA : s ^+ 2 = A by rewrite /s sqr_sqrtr // ltW.
rewrite -[in RHS]sA.
exact: (ln_quotient_rule _ _ _ hs hd erefl).
Qed.
