"""``verify --checker coq``: every certificate row decided by the checker proved in Coq.

proofs/coq/Checker.v defines ``check_row`` over exact integers and proves
``check_row_sound`` (pinned in proofs/coq/Spec.v): a true verdict implies
θ_lo ≤ θ(p) ≤ θ_hi and gap_lo ≤ 1 − θ(p) ≤ gap_hi for p the exact normalisation of the row,
with θ the maximum over all subsets of Theta.v, and that regime 0 marks exactly the rows
with some p_i ≥ 1/2.  proofs/coq/extract/build.sh extracts it to
OCaml (Zarith integers) and links the small text driver of proofs/coq/extract/driver.ml.

This module only turns the folder's float64 values into exact integers and streams them to
that program (format: docs/checker.md), then reads one verdict per row:

* a row x becomes integer weights w_j with x_j = w_j·2^e for one e (:func:`int_weights`;
  every float64 is m·2^k with an integer m < 2^53, read off by numpy.frexp), the claims
  θ_lo, θ_hi, gap_lo, gap_hi and the tolerance their exact ratios n/d
  (``float.as_integer_ratio``); the tests check both against Fraction;
* the witness mask is passed as stored; two search hints are chosen here: the head mask
  (all nonzero atoms when there are at most EXACT_ATOMS, else the topk_K largest, as
  certificates/verify.py does) and the count mask (the ⌈n/2⌉ smallest nonzero atoms).
  Checker.v's theorem holds for any hints, so a bad choice can only make the checker reject.

Every row must be answered ACCEPT for a pass.  A missing program, a crash, a short or
out-of-order answer, or a claim that is not a finite float is a failure (exit 1) or a
clear error (exit 2), never a pass.  What the Coq checker does not cover: verify's
count lemma with K > 0 enumerated top atoms (count_disc_lower(w, K)) is not proved in Coq (the
top-K lemma and the parity form K = 0 are), so a long row whose upper bound only that form
justifies is rejected here and named ("unchecked by the Coq checker").  Folder integrity
(hashes, metadata, summary, row_sum / p_max) is the Python replay's job: ``--checker coq``
runs that replay and this checker, and passes only if both do.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np

from . import inputs as io
from . import readers as rd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "proofs", "coq", "extract", "build.sh")
DEFAULT_BINARY = os.path.join(ROOT, "proofs", "coq", "extract", "_build", "coq-checker")
EXACT_ATOMS = 24          # as certificates/verify.py: rows with ≤ 24 nonzero atoms are solved exactly
CHUNK_ROWS = 512


def binary_path() -> str:
    """The extracted checker: $ATTNSENS_COQ_CHECKER, else proofs/coq/extract/_build/coq-checker."""
    return os.environ.get("ATTNSENS_COQ_CHECKER") or DEFAULT_BINARY


def require_binary() -> str:
    path = binary_path()
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise io.InputError(path, f"the extracted Coq checker is not built; build it with {BUILD} "
                                  "(needs coqc with MathComp, ocamlfind and zarith)")
    return path


# ----------------------------------------------------------------------------- floats → integers

def int_weights(x) -> tuple[list[int], int]:
    """(w, e) with x_j = w_j·2^e exactly, w_j ≥ 0 integers, for a row of finite floats ≥ 0.

    Each x_j = m_j·2^(k_j) with m_j = mantissa·2^53 an integer below 2^53 (numpy.frexp is
    exact); e = min k_j over the nonzero entries and w_j = m_j·2^(k_j − e).  Raises ValueError
    for a negative or non-finite entry.  tests/test_coq_checker.py checks w_j·2^e against
    Fraction(x_j).
    """
    x = np.asarray(x, dtype=np.float64)
    if not (np.isfinite(x).all() and (x >= 0).all()):
        bad = x[~(np.isfinite(x) & (x >= 0))][0]
        raise ValueError(f"row entry {float(bad)!r} is not a finite number ≥ 0")
    mant, ex = np.frexp(x)
    m = np.ldexp(mant, 53).astype(np.int64)            # exact: |mant| < 1 has 53 bits
    k = ex.astype(np.int64) - 53
    nz = m != 0
    e = int(k[nz].min()) if nz.any() else 0
    sh = np.where(nz, k - e, 0)
    return [a << b for a, b in zip(m.tolist(), sh.tolist())], e


def ratio(v) -> tuple[int, int]:
    """(n, d) with v = n/d exactly, d > 0 (ValueError for nan/inf)."""
    n, d = float(v).as_integer_ratio()
    return n, d


def head_mask(w: list[int], K: int) -> list[bool]:
    """The search hint: every nonzero atom if there are ≤ EXACT_ATOMS, else the K largest
    (ties to the lower index), in row order."""
    nz = [j for j, v in enumerate(w) if v]
    if len(nz) > EXACT_ATOMS:
        nz = sorted(nz, key=lambda j: (-w[j], j))[:K]
    keep = set(nz)
    return [j in keep for j in range(len(w))]


def count_mask(w: list[int]) -> list[bool]:
    """The count lemma's hint J: the ⌈n/2⌉ smallest of the n nonzero atoms (ties to the lower
    index), in row order.  For odd n Checker.v's bound 2·w(J) − T is verify's parity bound."""
    nz = sorted((j for j, v in enumerate(w) if v), key=lambda j: (w[j], j))
    keep = set(nz[:(len(nz) + 1) // 2])
    return [j in keep for j in range(len(w))]


def _masks(x, K):
    """(head, count) hints of a float row at once: the order of the floats is that of the weights."""
    x = np.asarray(x, dtype=np.float64)
    nz = np.flatnonzero(x > 0)
    L = x.size
    head = np.zeros(L, bool)
    cnt = np.zeros(L, bool)
    if nz.size <= EXACT_ATOMS:
        head[nz] = True
    else:
        head[nz[np.argsort(-x[nz], kind="stable")[:K]]] = True
    cnt[nz[np.argsort(x[nz], kind="stable")[:(nz.size + 1) // 2]]] = True
    return head, cnt


def _bits(bs) -> str:
    return (np.asarray(bs, dtype=np.uint8) + 48).tobytes().decode("ascii")


def _q(v) -> str:
    n, d = ratio(v)
    return f"{n:x} {d:x}" if n >= 0 else f"-{-n:x} {d:x}"


def row_line(ident, x, mask, lo, hi, glo, ghi, tol, regime, K) -> str:
    """One input line of the extracted checker (docs/checker.md).  ValueError when a value
    cannot be given exactly (a non-finite claim or row entry)."""
    w, _ = int_weights(x)
    L = len(w)
    if len(mask) != L:
        raise ValueError(f"witness mask of length {len(mask)} for L = {L}")
    head, cnt = _masks(x, K)
    return " ".join([str(ident), str(L), *(format(v, "x") for v in w), _bits(mask),
                     _bits(head), _bits(cnt), _q(lo), _q(hi), _q(glo), _q(ghi), _q(tol), str(int(regime))])


# ----------------------------------------------------------------------------- the program

class Checker:
    """The extracted program as a subprocess: feed lines, read one verdict per line."""

    def __init__(self, path=None):
        self.path = path or require_binary()

    def run(self, lines: list[str]) -> list[bool]:
        """Verdicts for ``lines`` (True = ACCEPT), in order.  Raises RuntimeError on anything but
        exactly one well-formed verdict per line with the same ids."""
        ids = [ln.split(" ", 1)[0] for ln in lines]
        proc = subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

        def feed():
            try:
                for ln in lines:
                    proc.stdin.write(ln + "\n")
                proc.stdin.close()
            except BrokenPipeError:
                pass
        t = threading.Thread(target=feed, daemon=True)
        t.start()
        out = proc.stdout.read()
        err = proc.stderr.read()
        t.join()
        rc = proc.wait()
        if rc != 0:
            raise RuntimeError(f"{self.path} exited with status {rc}: {err.strip()[:300]}")
        got = out.splitlines()
        if len(got) != len(lines):
            raise RuntimeError(f"{self.path} answered {len(got)} lines for {len(lines)} rows")
        verdicts = []
        for want, g in zip(ids, got):
            parts = g.split()
            if len(parts) != 2 or parts[0] != want or parts[1] not in ("ACCEPT", "REJECT"):
                raise RuntimeError(f"{self.path}: unexpected answer {g[:80]!r} for row {want}")
            verdicts.append(parts[1] == "ACCEPT")
        return verdicts


# ----------------------------------------------------------------------------- a folder

def _folder_rows(outdir, search):
    """(first global row, float64 rows) per chunk, in certify's order, from the inputs recorded in
    summary.json (found and sha256-checked as verify does; logits inputs replay the certified rows)."""
    from .verify import find_input, load_summary
    summary = load_summary(outdir)
    r0 = 0
    for inp in summary["inputs"]:
        path, why = find_input(outdir, inp, search)
        if why:
            raise io.InputError(outdir, why)
        if inp["kind"] == "logits":
            sp = os.path.join(outdir, inp["certified_rows"]["path"])
            if not os.path.isfile(sp) or io.file_sha256(sp) != inp["certified_rows"]["sha256"]:
                raise io.InputError(sp, "missing or sha256 differs from the one certified")
            try:
                (_, stored), _, _ = rd.read_npy(sp)
            except (rd.ReadError, ValueError, OSError) as exc:
                raise io.InputError(sp, f"cannot read ({exc})") from None
            n = inp["rows"]
            for s in range(0, n, CHUNK_ROWS):
                e = min(n, s + CHUNK_ROWS)
                yield r0 + s, np.ascontiguousarray(stored.read(s, e), dtype=np.float64)
        else:
            src = io.load_source(path, sha256=inp["sha256"])
            for s in range(0, src.n, CHUNK_ROWS):
                e = min(src.n, s + CHUNK_ROWS)
                yield r0 + s, np.ascontiguousarray(io.read_rows(src, s, e), dtype=np.float64)
        r0 += inp["rows"]


def folder_chunks(outdir, search=(), rows=4096):
    """Per chunk of about ``rows`` rows of a folder, in order: (lines for the checker, problems
    found before it runs, number of rows).  Every row gives either a line or a problem."""
    from .verify import load_certificates, load_summary
    summary = load_summary(outdir)
    N, Lmax, K = summary["rows"], summary["L_max"], summary["topk_K"]
    cert = load_certificates(outdir, N, Lmax)
    tol = summary["tolerance"]
    lines, problems, count = [], [], 0
    for a, R in _folder_rows(outdir, search):
        n, L = R.shape
        wit = np.unpackbits(np.asarray(cert["witness"][a:a + n]), axis=-1, bitorder="little")
        for i in range(n):
            g = a + i
            if wit[i, L:].any():
                problems.append(f"row {g}: witness has bits beyond L = {L}")
                continue
            try:
                lines.append(row_line(g, R[i], wit[i, :L], cert["theta_lo"][g], cert["theta_hi"][g],
                                      cert["gap_lo"][g], cert["gap_hi"][g], tol, cert["regime"][g], K))
            except (ValueError, OverflowError) as exc:
                problems.append(f"row {g}: not checkable exactly ({exc})")
        count += n
        if count >= rows:
            yield lines, problems, count
            lines, problems, count = [], [], 0
    if count:
        yield lines, problems, count


def folder_lines(outdir, search=()):
    """(lines, problems, rows) for a whole folder at once (see :func:`folder_chunks`)."""
    lines, problems, n = [], [], 0
    for ln, pr, c in folder_chunks(outdir, search):
        lines += ln
        problems += pr
        n += c
    return lines, problems, n


def _jobs(n_lines, jobs):
    if jobs is None:
        jobs = min(2, os.cpu_count() or 1)
    return max(1, min(int(jobs), max(1, n_lines // 256)))


def run_lines(lines, jobs=None, path=None) -> list[bool]:
    """Verdicts for ``lines``, split over ``jobs`` processes of the extracted checker."""
    chk = Checker(path)
    j = _jobs(len(lines), jobs)
    if j == 1:
        return chk.run(lines)
    parts = [lines[k::j] for k in range(j)]
    res = [None] * j
    errs = []

    def work(k):
        try:
            res[k] = chk.run(parts[k])
        except Exception as exc:          # reported below: a failed worker is never a pass
            errs.append(exc)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(j)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise RuntimeError(str(errs[0]))
    out = [None] * len(lines)
    for k in range(j):
        out[k::j] = res[k]
    return out


def run_coq_check(outdir, search=(), max_report=10, out=None, jobs=None) -> int:
    """Number of problems (0 iff the extracted Coq checker accepted every row of the folder).
    Rows are streamed chunk by chunk; every row must be sent and answered ACCEPT."""
    from .verify import load_summary
    out = sys.stdout if out is None else out
    N = load_summary(outdir)["rows"]
    problems, seen, sent, accepted, skipped = [], 0, 0, 0, 0
    for lines, pre, n in folder_chunks(outdir, search):
        seen += n
        skipped += len(pre)
        problems += pre
        try:
            verdicts = run_lines(lines, jobs) if lines else []
        except RuntimeError as exc:
            problems.append(f"the extracted checker failed: {exc}")
            break
        sent += len(lines)
        accepted += sum(verdicts)
        for ln, ok in zip(lines, verdicts):
            if not ok:
                problems.append(f"row {ln.split(' ', 1)[0]}: rejected by the Coq checker (a claim does not hold, "
                                "or its upper bound needs the count lemma with K > 0, which Checker.v does not "
                                "prove: unchecked by the Coq checker)")
    if seen != N or sent + skipped != N:     # every row is either sent or named above
        problems.append(f"{seen} of {N} rows read, {sent} sent to the checker")
    for p in problems[:max_report]:
        print(f"{outdir}: coq checker: {p}", file=out)
    if len(problems) > max_report:
        print(f"{outdir}: coq checker: … {len(problems) - max_report} more", file=out)
    print(f"{outdir}: coq checker: {'OK' if not problems else 'FAILED'}: {accepted} of {N} rows accepted by "
          f"the extracted Checker.check_row (proved sound: Spec.check_row_sound)", file=out)
    return len(problems)
