(* Negative control for C6 (continuity): θ 1-Lipschitz in ℓ1 is wrong.  The
   proof script of C6_lipschitz must fail on it. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From AttnSens Require Import Theta C2 C3 C4 C5 C6 C7.
Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Notation Q := rat_realFieldType.

Theorem C6_lip1_wrong (R : realFieldType) (L : nat) (p q : 'I_L -> R) :
  distribution p -> distribution q -> `|theta p - theta q| <= norm1 (fun i => p i - q i).
Proof.
move=> hp hq; rewrite ler_norml; apply/andP; split.
  rewrite ler_oppl opprB ler_subl_addl.
  rewrite (_ : norm1 (fun i => p i - q i) = norm1 (fun i => q i - p i)).
    exact: theta_le_lip.
  by apply: eq_bigr => i _; rewrite distrC.
by rewrite ler_subl_addl theta_le_lip.
Qed.
