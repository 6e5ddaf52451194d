(* Extraction of the certificate checker (Checker.check_row) to OCaml.  Coq's Z (and the
   positive numbers under it) become Zarith's arbitrary-precision integers through the
   standard library's ExtrOcamlZBigInt (its Big_int_Z module is Zarith's); lists, booleans
   and pairs become OCaml's.  Nothing else is mapped: every other function the checker
   calls (mask, map, size, the comparisons derived from Z.compare) is extracted as proved.
   Built by build.sh, which compiles this file next to copies of Theta.v and Checker.v. *)
From Coq Require Extraction.
From Coq Require Import ExtrOcamlBasic ExtrOcamlZBigInt.
From AttnSens Require Checker.

Extraction Language OCaml.
Extraction "coq_checker.ml" Checker.check_row.
