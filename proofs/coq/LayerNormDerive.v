(* C11, the derivative: for every width d, over an arbitrary realType R (Coq 8.16,
   mathcomp-analysis 0.6.0), the closed form ln_jac of LayerNorm.v with s = √(σ² + eps) IS the
   Jacobian of LayerNorm: along every direction v, the derivative at h = 0 of
   h ↦ LN(x + h v)_i is (J_LN(x) v)_i, whenever σ² + eps > 0.
   Proof: with c = Πx, w = Πv, c(x + hv) = c + h w and
   σ²(x + hv) + eps = A + 2Bh + Ch², A = σ² + eps, B = Σ c_k w_k/d, C = Σ w_k²/d.
   The derivative of √ at A > 0 is 1/(2√A) (is_derive_inverse applied to z ↦ z·z near √A > 0),
   so by the chain, inverse and product rules the derivative is
   γ_i (w_i/s − c_i B/s³), s = √A, which is ln_jac_col of C11.v.  mathcomp-analysis rests on
   three classical axioms (functional and propositional extensionality, constructive indefinite
   description); Print Assumptions names them. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From mathcomp.classical Require Import boolp classical_sets functions.
From mathcomp.analysis Require Import reals topology normedtype sequences derive realfun.
From AttnSens Require Import LayerNorm C11.
Import Order.TTheory GRing.Theory Num.Theory.
Import numFieldTopology.Exports numFieldNormedType.Exports.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.
Local Open Scope classical_set_scope.

Section LayerNormDerive.
Variables (R : realType) (d : nat).
Implicit Types (x g b v : 'I_d -> R).

(* √ has derivative 1/(2√y) at y > 0. *)
Lemma is_derive_sqrt (y : R) : 0 < y -> is_derive y 1 (@Num.sqrt R) (2 * Num.sqrt y)^-1.
Proof.
move=> y0; have s0 : 0 < Num.sqrt y by rewrite sqrtr_gt0.
pose f := (fun z : R => z) * (fun z : R => z).
have hsq := is_deriveM (is_derive_id (Num.sqrt y) (1 : R)) (is_derive_id (Num.sqrt y) (1 : R)).
have h1 : {near Num.sqrt y, cancel f (@Num.sqrt R)}.
  near=> z; rewrite /f /= -expr2 sqrtr_sqr ger0_norm //; apply: ltW; near: z.
  exact: (@open_gt R 0 _ s0).
have h2 : {near Num.sqrt y, continuous f}.
  by near=> z; apply: continuousM; exact: cvg_id.
have hl : Num.sqrt y *: (1 : R) + Num.sqrt y *: 1 != 0.
  by rewrite -scalerDr scaler_eq0 negb_or gt_eqF // -mulr2n mulrn_eq0 oner_eq0.
have := is_derive_inverse h1 h2 hsq hl.
rewrite /f mulrfctE -expr2 sqr_sqrtr ?ltW // => h; apply: is_derive_eq h _.
by rewrite -mulr2n mulr_natl [_%:A]mulr1.
Unshelve. all: by end_near. Qed.

Lemma cen_shift x v (h : R) k : cen (fun j => x j + h * v j) k = cen x k + h * cen v k.
Proof.
have r (a b c p q : R) : a + b * c - (p + b * q) = a - p + b * (c - q) by ring.
by rewrite /cen /mean big_split /= -mulr_sumr mulrDl -mulrA r.
Qed.

Lemma var_shift x v eps (h : R) : var (fun j => x j + h * v j) + eps =
  var x + eps + h * (2 * ((\sum_k cen x k * cen v k) / d%:R)) + h * h * ((\sum_k cen v k ^+ 2) / d%:R).
Proof.
have r (c w : R) : (c + h * w) ^+ 2 = c ^+ 2 + h * (2 * (c * w)) + h * h * w ^+ 2 by ring.
rewrite /var (eq_bigr (fun k => cen x k ^+ 2 + h * (2 * (cen x k * cen v k)) + h * h * cen v k ^+ 2));
  last by move=> k _; rewrite cen_shift r.
rewrite !big_split /= -!mulr_sumr.
set S1 := \sum_k cen x k ^+ 2; set S2 := \sum_k cen x k * cen v k; set S3 := \sum_k cen v k ^+ 2.
have r2 (a p q t u e : R) : (a + p * (2 * q) + t * u) * d%:R^-1 + e =
  a * d%:R^-1 + e + p * (2 * (q * d%:R^-1)) + t * (u * d%:R^-1) by ring.
exact: r2.
Qed.

(* The algebra left by the chain, inverse and product rules. *)
Lemma ln_quotient_rule (gi ci wi s B S dd : R) : s != 0 -> dd != 0 -> B = S / dd ->
  gi * (ci * (- (s ^+ 2)^-1 * ((2 * s)^-1 * (2 * B))) + s^-1 * wi) =
  s^-1 * (gi * (wi - ci * S / (dd * s ^+ 2))).
Proof. by move=> hs hd ->; field; rewrite hs hd. Qed.

Theorem C11_derivative x g b v eps (i : 'I_d) : 0 < var x + eps ->
  is_derive (0 : R) (1 : R) (fun h : R => layernorm (fun j => x j + h * v j) g b eps i)
    ((ln_jac x g eps (Num.sqrt (var x + eps)) *m \col_j v j) i 0).
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

End LayerNormDerive.
