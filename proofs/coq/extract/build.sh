#!/bin/sh
# Build the extracted certificate checker: compile Theta.v and Checker.v, extract
# Checker.check_row to OCaml (Extract.v) and link it with driver.ml against Zarith.
# Usage: proofs/coq/extract/build.sh [BUILD_DIR]   (default: proofs/coq/extract/_build)
# The program is BUILD_DIR/coq-checker.  Needs coqc (with MathComp) and ocamlfind + zarith.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/_build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cp "$here/../Theta.v" "$here/../Checker.v" "$here/Extract.v" "$here/driver.ml" "$out/"
cd "$out"
for f in Theta.v Checker.v Extract.v; do
  coqc -Q . AttnSens "$f" > "$f.log" 2>&1 || { tail -20 "$f.log"; echo "build.sh: coqc $f failed" >&2; exit 1; }
done
ocamlfind ocamlopt -O2 -package zarith -linkpkg coq_checker.mli coq_checker.ml driver.ml -o coq-checker 2> ocaml.log \
  || ocamlfind ocamlopt -package zarith -linkpkg coq_checker.mli coq_checker.ml driver.ml -o coq-checker \
  || { cat ocaml.log; echo "build.sh: ocamlfind ocamlopt failed" >&2; exit 1; }
echo "$out/coq-checker"
