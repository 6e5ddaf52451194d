(* The command-line side of the extracted checker: reads rows on stdin, one per line,
   calls Coq_checker.check_row (extracted from proofs/coq/Checker.v) and prints one
   verdict per row.  This file only parses text into integers and lists; the verdict is
   the extracted function's.  Format (docs/checker.md), whitespace-separated tokens:

     ID L W_1 ... W_L WIT HEAD CNT LO_N LO_D HI_N HI_D GLO_N GLO_D GHI_N GHI_D TOL_N TOL_D REG

   ID: any token without white space, echoed back; L: the row length (decimal);
   W_i: the integer weights in hexadecimal (no sign, no prefix); WIT, HEAD, CNT: L
   characters '0'/'1' (the witness mask and the two search hints, the head mask and the
   count mask, in row order); the claims as numerator /
   denominator pairs in hexadecimal, '-' allowed in front of a numerator; REG decimal.
   Output, one line per input line: "ID ACCEPT" or "ID REJECT".  A malformed line prints
   "error: line N: ..." on stderr and ends the program with exit status 2 (no verdict is
   printed for it or for the lines after it). *)

exception Bad of string

let hex tok =
  if tok = "" then raise (Bad "empty number");
  let neg = tok.[0] = '-' in
  let body = if neg then String.sub tok 1 (String.length tok - 1) else tok in
  if body = "" then raise (Bad ("bad number " ^ tok));
  String.iter (fun c -> match c with
      | '0'..'9' | 'a'..'f' | 'A'..'F' -> ()
      | _ -> raise (Bad ("bad hexadecimal number " ^ tok))) body;
  let z = Z.of_string_base 16 body in
  if neg then Z.neg z else z

let dec tok =
  match int_of_string_opt tok with
  | Some n -> n
  | None -> raise (Bad ("bad decimal number " ^ tok))

let bits l tok =
  if String.length tok <> l then
    raise (Bad (Printf.sprintf "mask of length %d for L = %d" (String.length tok) l));
  List.init l (fun i -> match tok.[i] with
      | '0' -> false
      | '1' -> true
      | _ -> raise (Bad ("mask is not 0/1: " ^ tok)))

let check_line toks =
  match toks with
  | id :: ls :: rest ->
    let l = dec ls in
    if l < 1 then raise (Bad "L must be at least 1");
    let a = Array.of_list rest in
    if Array.length a <> l + 14 then
      raise (Bad (Printf.sprintf "%d tokens after L = %d; expected %d" (Array.length a) l (l + 14)));
    let w = List.init l (fun i -> let z = hex a.(i) in
                          if Z.sign z < 0 then raise (Bad "negative weight"); z) in
    let wit = bits l a.(l) and hd = bits l a.(l + 1) and cj = bits l a.(l + 2) in
    let q k = (hex a.(l + 3 + 2 * k), hex a.(l + 4 + 2 * k)) in
    let reg = Z.of_int (dec a.(l + 13)) in
    let ok = Coq_checker.check_row w wit hd cj (q 0) (q 1) (q 2) (q 3) (q 4) reg in
    Printf.printf "%s %s\n" id (if ok then "ACCEPT" else "REJECT")
  | _ -> raise (Bad "too few tokens")

let () =
  let n = ref 0 in
  try
    while true do
      let line = input_line stdin in
      incr n;
      let toks = List.filter (fun s -> s <> "") (String.split_on_char ' ' (String.trim line)) in
      if toks <> [] then check_line toks
    done
  with
  | End_of_file -> exit 0
  | Bad msg -> Printf.eprintf "error: line %d: %s\n" !n msg; exit 2
  | Failure msg | Invalid_argument msg -> Printf.eprintf "error: line %d: %s\n" !n msg; exit 2
