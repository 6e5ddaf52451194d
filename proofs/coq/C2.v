(* C2 (main theorem) for every L: ‖(C(p)/τ)x‖₁ ≤ θ(p)/τ on the box |x_i| ≤ 1,
   attained at a sign vector; hence ‖C(p)/τ‖∞→1 = θ(p)/τ.  Chain of
   shared/MATH.md, C2: (i) ‖Cx‖₁ = yᵀCx for y = sign(Cx), and yᵀCx is linear in
   x, so it is at most yᵀCz for the sign vector z = sign(Cy); (ii) C is PSD,
   so 2yᵀCz ≤ yᵀCy + zᵀCz; (iii) sᵀCs = 4p(S)(1 − p(S)) ≤ θ for s = 1_S − 1_Sᶜ. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta.
Import Order.TTheory GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section C2.
Variables (R : realFieldType) (L : nat).
Implicit Types (p x : 'I_L -> R).

(* (i): the box maximum of a linear form is at a vertex, coordinate by coordinate. *)
Lemma norm1_le_vertex p x : in_box x ->
  norm1 (Cx p x) <= bil p (sv [set i | 0 <= Cx p (sv [set j | 0 <= Cx p x j]) i])
                          (sv [set j | 0 <= Cx p x j]).
Proof.
move=> hx; set y := sv [set j | 0 <= Cx p x j].
have -> : norm1 (Cx p x) = \sum_i y i * Cx p x i.
  by apply: eq_bigr => i _; rewrite sv_sign.
rewrite sum_y_Cx bil_sym -sum_y_Cx -sum_y_Cx; apply: ler_sum => i _.
rewrite sv_sign; apply: le_trans (ler_norm _) _.
by rewrite normrM ler_pimull ?normr_ge0 ?hx.
Qed.

Theorem C2_box p x : distribution p -> in_box x -> norm1 (Cx p x) <= theta p.
Proof.
move=> hp hx; apply: le_trans (norm1_le_vertex p hx) _.
set z := [set i | _]; set y := [set j | _].
rewrite -(ler_pmul2l (_ : 0 < 2)) ?ltr0n //; apply: le_trans (bil_2le _ _ hp) _.
rewrite !bil_sv; try by case: hp.
by rewrite mulr_natl mulr2n ler_add ?theta_ge.
Qed.

Lemma norm1_scale v (tau : R) : 0 < tau -> norm1 (fun i : 'I_L => v i / tau) = norm1 v / tau.
Proof.
move=> t0; rewrite /norm1 mulr_suml; apply: eq_bigr => i _.
by rewrite normrM normfV (gtr0_norm t0).
Qed.

(* C2 (a): ‖(C/τ)x‖₁ ≤ θ(p)/τ for every x in the box. *)
Theorem C2_upper p (tau : R) x : distribution p -> 0 < tau -> in_box x ->
  norm1 (fun i => Cx p x i / tau) <= theta p / tau.
Proof.
move=> hp t0 hx; rewrite norm1_scale // ler_wpmul2r ?C2_box //.
by rewrite invr_ge0 ltW.
Qed.

Lemma norm1_sv_ge p S : bil p (sv S) (sv S) <= norm1 (Cx p (sv S)).
Proof.
rewrite -sum_y_Cx; apply: ler_sum => i _; apply: le_trans (ler_norm _) _.
by rewrite normrM ler_pimull ?normr_ge0 ?sv_box.
Qed.

(* C2 (b): some sign vector x = 1_S − 1_Sᶜ attains the bound. *)
Theorem C2_attained p (tau : R) : distribution p -> 0 < tau ->
  exists S, norm1 (fun i => Cx p (sv S) i / tau) = theta p / tau.
Proof.
move=> hp t0; have [S eS] := theta_attained p.
exists S; rewrite norm1_scale //; congr (_ / _); apply/le_anti/andP; split.
  exact: C2_box hp (sv_box S).
rewrite eS -bil_sv; last by case: hp.
exact: norm1_sv_ge.
Qed.

(* C2: ‖C(p)‖∞→1 (max over sign vectors, as numerics/softmax.py computes it) = θ(p). *)
Theorem C2_inf1norm p : distribution p -> inf1norm p = theta p.
Proof.
move=> hp; apply/le_anti/andP; split.
  by apply: bigmax_le => [|S]; [exact: theta_ge0 | exact: C2_box hp (sv_box S)].
have [S ->] := theta_attained p.
rewrite -bil_sv; last by case: hp.
exact: le_trans (norm1_sv_ge p S) (bigmax_ge _ S).
Qed.

End C2.
