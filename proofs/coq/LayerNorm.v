(* Definitions for C11–C13 (claim ids as in shared/MATH.md): LayerNorm's Jacobian
   in closed form, for every width d, over an arbitrary realFieldType R, and the
   Jacobians of a pre-LN and a post-LN residual sublayer on L tokens.

   LayerNorm (numerics/layernorm.py): LN(x) = γ ⊙ c/s + β with c = Πx,
   Π = I − 11ᵀ/d, σ² = ‖c‖²/d and s = √(σ² + eps).  Its Jacobian is
   J_LN(x) = (1/s) diag(γ) (Π − α ĉĉᵀ), α = σ²/(σ² + eps), ĉ = c/‖c‖, and
   α ĉĉᵀ = ccᵀ/(d(σ² + eps)), which needs no ĉ (so c = 0 is allowed).

   The closed form is defined here as `ln_jac`, with the square root s as an
   argument (a realFieldType has no square root; the theorems of C11.v say
   which of them need s ≠ 0).  That it is the derivative of `layernorm` with
   s = √(σ² + eps) is LayerNormDerive.v's theorem (over a realType, with
   mathcomp-analysis).  Likewise the
   residual Jacobians are defined by the chain rule, with J_F the Jacobian of the
   sublayer F as an arbitrary map on tangents V ∈ R^(L×d):
     pre-LN  x ↦ x + F(LN x):   J_pre V  = V + J_F (J_LN(x) V),
     post-LN x ↦ LN(x + F(x)):  J_post V = J_LN(y) (V + J_F V),   y = x + F(x),
   where J_LN acts token by token (row t of V by J_LN(x_t)). *)
From mathcomp Require Import all_ssreflect all_algebra.
Import GRing.Theory Num.Theory.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Local Open Scope ring_scope.

Section LayerNorm.
Variables (R : realFieldType) (d : nat).
Implicit Types (x g : 'I_d -> R).

Definition mean x : R := (\sum_i x i) / d%:R.
(* c = Πx, the centred input. *)
Definition cen x i : R := x i - mean x.
(* σ², the biased variance. *)
Definition var x : R := (\sum_i cen x i ^+ 2) / d%:R.
Definition ones : 'cV[R]_d := const_mx 1.
Definition cvec x : 'cV[R]_d := \col_i cen x i.
Definition Pi : 'M[R]_d := 1%:M - d%:R^-1 *: (ones *m ones^T).
(* Π − α ĉĉᵀ = Π − ccᵀ/(d(σ² + eps)). *)
Definition ln_P x eps : 'M[R]_d := Pi - (d%:R * (var x + eps))^-1 *: (cvec x *m (cvec x)^T).
(* J_LN(x) = (1/s) diag(γ) (Π − α ĉĉᵀ). *)
Definition ln_jac x g eps s : 'M[R]_d := s^-1 *: (diag_mx (\row_i g i) *m ln_P x eps).
(* The row vector (1/γ)ᵀ. *)
Definition inv_gamma g : 'rV[R]_d := \row_i (g i)^-1.

End LayerNorm.

Arguments ones {R d}.
Arguments Pi {R d}.

(* LayerNorm itself, coordinate i: LN(x)_i = γ_i c_i/√(σ² + eps) + β_i (a real closed field has √).
   LayerNormDerive.v proves that its derivative is the closed form ln_jac with s = √(σ² + eps). *)
Definition layernorm (R : rcfType) (d : nat) (x g b : 'I_d -> R) (eps : R) (i : 'I_d) : R :=
  g i * cen x i / Num.sqrt (var x + eps) + b i.

Section Tokens.
Variables (R : realFieldType) (L d : nat).
Implicit Types (X Y V W : 'M[R]_(L, d)) (g : 'I_d -> R) (s : 'I_L -> R).

(* J_LN per token: row t of the result is J_LN(x_t) v_t (s_t: token t's root). *)
Definition ln_tok X g eps s V : 'M[R]_(L, d) :=
  \matrix_(t, k) \sum_l ln_jac (fun j => X t j) g eps (s t) k l * V t l.
Definition pre_ln_jac X g eps s (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) V : 'M[R]_(L, d) :=
  V + JF (ln_tok X g eps s V).
Definition post_ln_jac Y g eps s (JF : 'M[R]_(L, d) -> 'M[R]_(L, d)) V : 'M[R]_(L, d) :=
  ln_tok Y g eps s (V + JF V).
(* The tangent a ⊗ 1: row t is the constant a_t (a per-token shift). *)
Definition tok_const (a : 'I_L -> R) : 'M[R]_(L, d) := \matrix_(t, k) a t.
(* e_t0 ⊗ (1/γ): 1/γ in row t0, zero elsewhere. *)
Definition tok_inv_gamma g (t0 : 'I_L) : 'M[R]_(L, d) := \matrix_(t, k) ((t == t0)%:R * (g k)^-1).
(* The Frobenius inner product ⟨A, B⟩ = Σ_t Σ_k A_tk B_tk (⟨A, A⟩ = ‖A‖², vec(A)ᵀvec(B)). *)
Definition frob (A B : 'M[R]_(L, d)) : R := \sum_t \sum_k A t k * B t k.

End Tokens.

Arguments tok_const {R L d} a.
