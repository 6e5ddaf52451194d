(* C11 (LayerNorm Jacobian structure), for every width d, over any realFieldType.
   J_LN(x) = (1/s) diag(γ) P with P = Π − ccᵀ/(d(σ² + eps)) is the closed form
   of LayerNorm.v (that it is LayerNorm's derivative is LayerNormDerive.v's theorem).
   Proved:
   - J 1 = 0 and 1ᵀP = 0, for any s, eps: Π1 = 0 and cᵀ1 = Σ_i c_i = 0;
   - (1/γ)ᵀ J = 0 when γ has no zero entry: (1/γ)ᵀ diag(γ) = 1ᵀ;
   - rank J = d − 1 when eps > 0, s ≠ 0, γ without zeros.  Upper bound: 1 is in
     the left kernel of P.  Lower bound: P + 11ᵀ/d = I − ccᵀ/(d(σ² + eps)) has
     the inverse I + ccᵀ/(d eps) (Sherman–Morrison, since cᵀc = dσ²), so
     d ≤ rank P + rank(11ᵀ/d) ≤ rank P + 1;
   - rank J = d − 2 when eps = 0, σ² ≠ 0 (x not constant), s ≠ 0, γ without
     zeros.  Upper bound: 1ᵀ and cᵀ are independent rows (K Kᵀ = diag(d, ‖c‖²)
     with K = [1ᵀ; cᵀ]) in the left kernel of P.  Lower bound:
     I = P + 11ᵀ/d + ccᵀ/(dσ²) and each outer product has rank ≤ 1;
   - J c = 0 exactly when eps = 0 (σ² ≠ 0, eps ≥ 0): Pc = (eps/(σ² + eps)) c. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import LayerNorm.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C11.
Variables (R : realFieldType) (d : nat).
Implicit Types (x g : 'I_d -> R).

(* ---- width 0: every matrix with d rows is 0 *)
Lemma mx_empty n (A : 'M[R]_(d, n)) : d = 0%N -> A = 0.
Proof. by move=> d0; apply/matrixP => -[i hi]; exfalso; rewrite d0 ltn0 in hi. Qed.

Lemma natd_neq0 : (0 < d)%N -> d%:R != 0 :> R.
Proof. by rewrite pnatr_eq0 -lt0n. Qed.

Lemma sum_cen x : \sum_i cen x i = 0.
Proof.
have [d0|hd] := posnP d; first by apply: big1 => -[i hi] _; exfalso; rewrite d0 ltn0 in hi.
by rewrite /cen sumrB sumr_const card_ord -mulr_natr /mean divfK ?subrr ?natd_neq0.
Qed.

(* ---- 1×1 products *)
Lemma onesT_ones : (ones : 'cV[R]_d)^T *m ones = (d%:R : R)%:M :> 'M_1.
Proof.
apply/matrixP => i j; rewrite !ord1 !mxE eqxx mulr1n.
by rewrite (eq_bigr (fun _ => 1)) ?sumr_const ?card_ord // => k _; rewrite !mxE mulr1.
Qed.

Lemma onesT_c x : (ones : 'cV[R]_d)^T *m cvec x = 0.
Proof.
apply/matrixP => i j; rewrite !ord1 !mxE.
by rewrite (eq_bigr (fun k => cen x k)) ?sum_cen // => k _; rewrite !mxE mul1r.
Qed.

Lemma cT_ones x : (cvec x)^T *m ones = 0.
Proof. by rewrite -[ones]trmxK -trmx_mul onesT_c trmx0. Qed.

Lemma cT_c x : (cvec x)^T *m cvec x = (\sum_i cen x i ^+ 2)%:M.
Proof.
apply/matrixP => i j; rewrite !ord1 !mxE eqxx mulr1n.
by apply: eq_bigr => k _; rewrite !mxE expr2.
Qed.

(* ---- Π and P on 1 and c *)
Lemma Pi_ones : Pi *m ones = 0 :> 'cV[R]_d.
Proof.
have [d0|hd] := posnP d; first exact: mx_empty.
rewrite /Pi mulmxBl mul1mx -scalemxAl -mulmxA onesT_ones mul_mx_scalar scalerA.
by rewrite mulVf ?natd_neq0 // scale1r subrr.
Qed.

Lemma onesT_Pi : (ones : 'cV[R]_d)^T *m Pi = 0.
Proof.
have [d0|hd] := posnP d; first by apply/trmx_inj; rewrite trmx0; exact: mx_empty.
rewrite /Pi mulmxBr mulmx1 -scalemxAr mulmxA onesT_ones mul_scalar_mx scalerA.
by rewrite mulVf ?natd_neq0 // scale1r subrr.
Qed.

Lemma Pi_c x : Pi *m cvec x = cvec x.
Proof. by rewrite /Pi mulmxBl mul1mx -scalemxAl -mulmxA onesT_c mulmx0 scaler0 subr0. Qed.

Lemma cT_Pi x : (cvec x)^T *m Pi = (cvec x)^T.
Proof. by rewrite /Pi mulmxBr mulmx1 -scalemxAr mulmxA cT_ones mul0mx scaler0 subr0. Qed.

Lemma P_ones x eps : ln_P x eps *m ones = 0.
Proof. by rewrite /ln_P mulmxBl Pi_ones -scalemxAl -mulmxA cT_ones mulmx0 scaler0 subr0. Qed.

Lemma onesT_P x eps : (ones : 'cV[R]_d)^T *m ln_P x eps = 0.
Proof. by rewrite /ln_P mulmxBr onesT_Pi -scalemxAr mulmxA onesT_c mul0mx scaler0 subr0. Qed.

Lemma P_c x eps : ln_P x eps *m cvec x =
  (1 - (d%:R * (var x + eps))^-1 * \sum_i cen x i ^+ 2) *: cvec x.
Proof.
rewrite /ln_P mulmxBl Pi_c -scalemxAl -mulmxA cT_c mul_mx_scalar scalerA.
by rewrite scalerBl scale1r.
Qed.

Lemma cT_P x eps : (cvec x)^T *m ln_P x eps =
  (1 - (d%:R * (var x + eps))^-1 * \sum_i cen x i ^+ 2) *: (cvec x)^T.
Proof.
rewrite /ln_P mulmxBr cT_Pi -scalemxAr mulmxA cT_c mul_scalar_mx scalerA.
by rewrite scalerBl scale1r.
Qed.

(* σ² + eps = (‖c‖² + d eps)/d, so 1 − ‖c‖²/(d(σ² + eps)) = eps/(σ² + eps). *)
Lemma var_eps x eps : (0 < d)%N -> var x + eps = (\sum_i cen x i ^+ 2 + eps * d%:R) / d%:R.
Proof. by move=> hd; rewrite /var mulrDl mulfK ?natd_neq0. Qed.

Lemma var_width x : var x != 0 -> (0 < d)%N.
Proof.
rewrite lt0n; apply: contra => /eqP d0.
by rewrite /var (_ : d%:R = 0) ?invr0 ?mulr0 // d0.
Qed.

Lemma one_minus_alpha x eps : (0 < d)%N -> var x + eps != 0 ->
  1 - (d%:R * (var x + eps))^-1 * (\sum_i cen x i ^+ 2) = eps / (var x + eps).
Proof.
move=> hd; have hd' := natd_neq0 hd; rewrite var_eps //.
set N := _ + eps * _; have -> : \sum_i cen x i ^+ 2 = N - eps * d%:R by rewrite /N addrK.
rewrite mulf_eq0 invr_eq0 (negbTE hd') orbF => hN.
by field; rewrite hN hd'.
Qed.

(* ---- the diagonal factor *)
Lemma row_diag g : (forall i, g i != 0) -> inv_gamma g *m diag_mx (\row_i g i) = ones^T.
Proof. by move=> hg; apply/rowP => j; rewrite mul_mx_diag !mxE mulVf. Qed.

Lemma diag_inv g : (forall i, g i != 0) ->
  diag_mx (inv_gamma g) *m diag_mx (\row_i g i) = 1%:M.
Proof.
move=> hg; rewrite mulmx_diag -diag_const_mx; congr diag_mx.
by apply/rowP => j; rewrite !mxE mulVf.
Qed.

Lemma rank_diag_mul g n (A : 'M[R]_(d, n)) : (forall i, g i != 0) ->
  \rank (diag_mx (\row_i g i) *m A) = \rank A.
Proof.
move=> hg; apply/eqP; rewrite eqn_leq mxrankM_maxr /=.
by rewrite -{1}[A]mul1mx -(diag_inv hg) -mulmxA mxrankM_maxr.
Qed.

Lemma rank_jac x g eps s : s != 0 -> (forall i, g i != 0) ->
  \rank (ln_jac x g eps s) = \rank (ln_P x eps).
Proof. by move=> hs hg; rewrite /ln_jac mxrank_scale_nz ?invr_eq0 // rank_diag_mul. Qed.

(* ---- rank bounds *)
Lemma rank_ker_le m (K : 'M[R]_(m, d)) (A : 'M[R]_d) : K *m A = 0 -> (\rank A + \rank K <= d)%N.
Proof.
move=> KA; have /mxrankS : (K <= kermx A)%MS by apply/sub_kermxP.
by rewrite mxrank_ker leq_subRL // rank_leq_row.
Qed.

Lemma rank_outer (u v : 'cV[R]_d) a : (\rank (a *: (u *m v^T)) <= 1)%N.
Proof. exact: leq_trans (mxrank_scale _ _) (leq_trans (mxrankM_maxl _ _) (rank_leq_col _)). Qed.

Lemma P_decomp x eps : ln_P x eps + d%:R^-1 *: (ones *m ones^T) =
  1%:M - (d%:R * (var x + eps))^-1 *: (cvec x *m (cvec x)^T).
Proof. by rewrite /ln_P /Pi addrAC subrK. Qed.

Lemma rank_P_ge2 x eps : (d <= \rank (ln_P x eps) + 2)%N.
Proof.
have h1 := mxrank_add (ln_P x eps + d%:R^-1 *: (ones *m ones^T))
  ((d%:R * (var x + eps))^-1 *: (cvec x *m (cvec x)^T)).
rewrite {1}P_decomp subrK mxrank1 in h1; apply: leq_trans h1 _.
rewrite -[2%N]/(1 + 1)%N addnA; apply: leq_add; last exact: rank_outer.
by apply: leq_trans (mxrank_add _ _) _; rewrite leq_add2l rank_outer.
Qed.

(* With eps ≠ 0 and σ² + eps ≠ 0, I − ccᵀ/(d(σ² + eps)) is invertible. *)
Lemma rank_P_ge1 x eps : eps != 0 -> var x + eps != 0 -> (d <= \rank (ln_P x eps) + 1)%N.
Proof.
move=> he hv; have [d0|hd] := posnP d; first by rewrite {1}d0.
set a := (d%:R * (var x + eps))^-1; set b := (d%:R * eps)^-1.
set cc := cvec x *m (cvec x)^T; set n2 := \sum_i cen x i ^+ 2.
have cc2 : cc *m cc = n2 *: cc by rewrite mulmxA -(mulmxA (cvec x)) cT_c mul_mx_scalar -scalemxAl.
have hb : b = a + a * (b * n2).
  have hd' := natd_neq0 hd; move: hv; rewrite /a /b /n2 var_eps //.
  set N := _ + eps * _; have -> : \sum_i cen x i ^+ 2 = N - eps * d%:R by rewrite /N addrK.
  rewrite mulf_eq0 invr_eq0 (negbTE hd') orbF => hN.
  by field; rewrite hN hd' he.
have inv : (1%:M - a *: cc) *m (1%:M + b *: cc) = 1%:M.
  rewrite mulmxDr mulmx1 mulmxBl mul1mx -scalemxAl -scalemxAr cc2 !scalerA.
  by rewrite {1}hb scalerDl mulrA addrK subrK.
have [/mxrank_unit hu _] := mulmx1_unit inv.
rewrite -{1}hu -P_decomp; apply: leq_trans (mxrank_add _ _) _.
by rewrite leq_add2l rank_outer.
Qed.

Lemma rank_P_le1 x eps : (0 < d)%N -> (\rank (ln_P x eps) + 1 <= d)%N.
Proof.
move=> hd; have h := rank_ker_le (onesT_P x eps); apply: leq_trans h; rewrite leq_add2l.
rewrite lt0n mxrank_eq0; apply/eqP => /matrixP/(_ 0 (Ordinal hd)).
by rewrite !mxE => /eqP; rewrite oner_eq0.
Qed.

Lemma rank_P_le2 x : var x != 0 -> (\rank (ln_P x 0) + 2 <= d)%N.
Proof.
move=> hv; set n2 := \sum_i cen x i ^+ 2.
have hd := var_width hv.
have hn : n2 != 0 by apply: contra hv => /eqP h; rewrite /var -/n2 h mul0r.
have hd' := natd_neq0 hd.
set K : 'M[R]_(1 + 1, d) := col_mx ones^T (cvec x)^T.
have KP : K *m ln_P x 0 = 0.
  rewrite mul_col_mx onesT_P cT_P addr0 (_ : 1 - _ = 0) ?scale0r ?col_mx0 //.
  by rewrite /var -/n2; apply/eqP; rewrite subr_eq0 eq_sym; apply/eqP; field; rewrite hd' hn.
have /row_freeP hK : exists B, K *m B = 1%:M.
  exists (row_mx (d%:R^-1 *: ones) (n2^-1 *: cvec x)).
  rewrite mul_col_row -!scalemxAr onesT_ones onesT_c cT_ones cT_c !scaler0.
  by rewrite !scale_scalar_mx !mulVf // scalar_mx_block.
by have := rank_ker_le KP; rewrite (eqP hK).
Qed.

Lemma rank_from_bounds r k : (k <= d)%N -> (r + k <= d)%N -> (d <= r + k)%N -> r = (d - k)%N.
Proof. by move=> hk h1 h2; apply/eqP; rewrite -(eqn_add2r k) subnK // eqn_leq h1 h2. Qed.

(* ---- entries (used by the refutations in controls/) *)
Lemma ln_PE x eps k l : ln_P x eps k l =
  (k == l)%:R - d%:R^-1 - cen x k * cen x l / (d%:R * (var x + eps)).
Proof. by rewrite /ln_P /Pi !mxE !big_ord1 !mxE !mulr1 [_ * (cen x k * _)]mulrC. Qed.

Lemma ln_jacE x g eps s k l : ln_jac x g eps s k l = s^-1 * (g k * ln_P x eps k l).
Proof.
rewrite /ln_jac [LHS]mxE mul_diag_mx; congr (_ * _).
by rewrite [LHS]mxE; congr (_ * _); rewrite mxE.
Qed.

(* The directional form J_LN(x) v used by LayerNormDerive.v, with w = Πv:
   (J v)_i = (1/s) γ_i (w_i − c_i (Σ_l c_l w_l)/(d(σ² + eps))). *)
Lemma sum_delta (F : 'I_d -> R) i : \sum_l (i == l)%:R * F l = F i.
Proof.
rewrite (bigD1 i) //= eqxx mul1r big1 ?addr0 // => l hl.
by rewrite eq_sym (negbTE hl) mul0r.
Qed.

Lemma sum_cen_mul x v : \sum_l cen x l * v l = \sum_l cen x l * cen v l.
Proof.
have -> : \sum_l cen x l * cen v l = \sum_l (cen x l * v l - mean v * cen x l).
  by apply: eq_bigr => l _; rewrite [cen v l]/cen mulrBr [cen x l * mean v]mulrC.
by rewrite sumrB -mulr_sumr sum_cen mulr0 subr0.
Qed.

Lemma ln_jac_col x g eps s v i : (ln_jac x g eps s *m \col_j v j) i 0 =
  s^-1 * (g i * (cen v i - cen x i * (\sum_l cen x l * cen v l) / (d%:R * (var x + eps)))).
Proof.
set D := d%:R * (var x + eps).
have alg (si gi dl vl dd ci cl D' : R) :
    si * (gi * (dl - dd - ci * cl / D')) * vl = si * (gi * (dl * vl - dd * vl - ci / D' * (cl * vl))).
  by ring.
rewrite mxE (eq_bigr (fun l => s^-1 * (g i * ((i == l)%:R * v l - d%:R^-1 * v l
                                         - cen x i / D * (cen x l * v l))))) => [|l _]; last first.
  by rewrite ln_jacE ln_PE mxE alg.
rewrite -mulr_sumr -mulr_sumr !sumrB sum_delta -!mulr_sumr [in LHS]sum_cen_mul.
by rewrite [cen v i]/cen /mean [d%:R^-1 * _]mulrC [_ / D * _]mulrAC.
Qed.

(* ---- the theorems *)
Theorem C11_kills_ones x g eps s : ln_jac x g eps s *m ones = 0.
Proof. by rewrite /ln_jac -scalemxAl -mulmxA P_ones mulmx0 scaler0. Qed.

Theorem C11_left_null x g eps s : (forall i, g i != 0) -> inv_gamma g *m ln_jac x g eps s = 0.
Proof. by move=> hg; rewrite /ln_jac -scalemxAr mulmxA row_diag // onesT_P scaler0. Qed.

Theorem C11_rank_eps_pos x g eps s : 0 < eps -> s != 0 -> (forall i, g i != 0) ->
  \rank (ln_jac x g eps s) = (d - 1)%N.
Proof.
move=> he hs hg; rewrite rank_jac //.
have hv : var x + eps != 0.
  rewrite gt_eqF // ltr_paddl // /var mulr_ge0 ?invr_ge0 ?ler0n //.
  by apply: sumr_ge0 => i _; exact: sqr_ge0.
have [d0|hd] := posnP d.
  by move: (\rank _) (rank_leq_row (ln_P x eps)) => r; rewrite d0 leqn0 => /eqP ->.
apply: rank_from_bounds => //; first exact: rank_P_le1.
by apply: rank_P_ge1; rewrite // gt_eqF.
Qed.

Theorem C11_rank_eps0 x g s : var x != 0 -> s != 0 -> (forall i, g i != 0) ->
  \rank (ln_jac x g 0 s) = (d - 2)%N.
Proof.
move=> hv hs hg; rewrite rank_jac //; have h2 := rank_P_le2 hv.
apply: rank_from_bounds => //; last exact: rank_P_ge2.
exact: leq_trans (leq_addl _ _) h2.
Qed.

Theorem C11_Jc x g eps s : 0 <= eps -> var x != 0 -> s != 0 -> (forall i, g i != 0) ->
  (ln_jac x g eps s *m cvec x == 0) = (eps == 0).
Proof.
move=> he hv hs hg.
have hd := var_width hv.
have v0 : 0 < var x.
  rewrite lt_neqAle eq_sym hv /var mulr_ge0 ?invr_ge0 ?ler0n //.
  by apply: sumr_ge0 => i _; exact: sqr_ge0.
have hve : var x + eps != 0 by rewrite gt_eqF // ltr_paddr.
have hc : cvec x != 0.
  apply: contra hv => /eqP c0; rewrite /var big1 ?mul0r // => i _.
  by move/matrixP: c0 => /(_ i 0); rewrite !mxE => ->; rewrite expr0n.
have hDc : diag_mx (\row_i g i) *m cvec x != 0.
  by apply: contra hc => /eqP h; rewrite -[cvec x]mul1mx -(diag_inv hg) -mulmxA h mulmx0.
rewrite /ln_jac -scalemxAl -mulmxA P_c one_minus_alpha // -scalemxAr scalerA.
by rewrite scaler_eq0 (negbTE hDc) orbF !mulf_eq0 !invr_eq0 (negbTE hs) (negbTE hve) /= orbF.
Qed.

End C11.
