"""``verify``: an independent exact replay of a certificate folder.

Shares no bound code with certify: it imports neither numerics/ nor the pipeline, only
the file loader (whose output it checks against the sha256 of the input files and of the
float64 rows recorded in summary.json).  Rows are streamed chunk by chunk.  Each row first
goes through :mod:`certificates.verify_fast` (exact limb sums, double-double decisions);
a row it does not decide is replayed by :func:`check_row` in exact integer/Fraction
arithmetic, which has the last word:

* each witness S is replayed: θ_S = 4AB/T² ≥ theta_lo and δ_S² ≤ gap_hi (C7);
* the dominant-atom regime is re-decided (2·x_max ≥ T) and its value re-derived (C4);
* every upper bound below 1 (theta_hi < 1 or gap_lo > 0) is re-justified, by an exact
  meet-in-the-middle search when the row has ≤ EXACT_ATOMS nonzero atoms, else by the
  best of the top-K interval lemma recomputed in integers with the K recorded in
  summary.json and the count lemma with K and with 0 top atoms (:func:`count_disc_lower`;
  with 0 and an odd number n of nonzero atoms: one side holds at least (n + 1)/2 of them,
  so |A − B| ≥ 2·(sum of the (n + 1)/2 smallest) − T);
* regime 0 iff dominant; regime 1 (closed) iff hi − lo ≤ max(tolerance, 2^-50), decided as
  certify decides it (regime 2 needs hi − lo > tolerance·(1 − 2^-48) and > 2^-51: certify's
  conservative float test never leaves a narrower row open), so the labels are a function of
  the bounds and the stated tolerance;
* row_sum and p_max within the error bound of the extraction certify computes them from
  (:func:`sum_contract`; 4 ulps plus a term that matters only for L ≳ 10^5).

Besides the rows, every number a reader sees is checked: certificates.npz and metadata.npz
hold exactly their members (one reading, :func:`readers.npz_members`); metadata.npz's carried
columns, ``input_index`` and ``length`` equal what the inputs give, ``entropy`` agrees within
rounding; summary.json's derived numbers (regime counts, median, fraction) are recomputed,
its constants are certify's, and each input's kind, dtype, tau, rows and L are the file's.

Its work is bounded by the data: summary.json fields are validated against what certify
can write (topk_K ≤ MAX_TOPK, so at most 2^(MAX_TOPK−1) sign patterns per row).

``logits`` inputs: the certified float64 rows are replayed from OUTDIR/certified-rows-i.npy
(sha256-checked), so the verdict does not depend on this machine's ``exp``.  Their relation
to the logits is a separate check: each stored entry must lie within LOGIT_REL(L) relative
(plus 2^-1060 absolute) of the softmax recomputed here.  That tolerance assumes only that
both machines' ``exp`` is within 4 ulps and that their sums run in any order (γ_L each);
it is a consistency check of how the rows were made, not part of what is certified.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import sys
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np

from . import folder as fmt
from . import inputs as io
from . import readers as rd
from .outdir import JOURNAL, checkpoint, hold_sigint, ours, settle
from .progress import Progress

EXACT_ATOMS = 24                 # verify's own exact replay (meet in the middle) up to this many atoms
CLOSE_FLOOR = Fraction(fmt.CLOSE_FLOOR)   # closed: hi − lo ≤ max(tolerance, 2^-50)
OPEN_MARGIN = Fraction(1, 2 ** 48)        # certify leaves a row open only if hi − lo > tol·(1 − 2^-48)
MAX_TOPK = 16                    # certify uses 12; anything larger is not a certify output
CHUNK_ELEMS = 1 << 20
HEX = set("0123456789abcdef")


def LOGIT_REL(L: int) -> float:
    # exp within 4 ulps on each side (8u), two sums in any order (2γ_L ≈ 2L·u), one division each
    return (L + 16) * 2.0 ** -52
REL = Fraction(1, 2 ** 51)       # 4 ulps relative, for the descriptive row_sum and p_max


def sum_contract(L: int, wmax: int, T: int):
    """(bound on |row_sum − T|/T, bound on |p_max − m/T|/(m/T)) for a row of length L whose
    integer weights have maximum wmax and total T (any common scale).

    certify's row_sum is fl(T₁ + T₂) of the error-free extraction (numerics.theta_kernels):
    x = q₁ + q₂ + r with |r| ≤ 2^(e + 2c − 106) ≤ m·2^(2c − 105), where m < 2^e ≤ 2m and
    c = ⌈log₂(L + 2)⌉ + 1, so |Σr| ≤ L·m·2^(2c − 105); with the final rounding,
    |row_sum − T| ≤ 2^-53·T + (1 + 2^-53)·|Σr| ≤ 4 ulps·T + L·m·2^(2c − 104).  p_max =
    fl(m/row_sum): relative error ≤ 2ε + 2^-52 when row_sum = T(1 + ε), |ε| ≤ 1/2.
    Rows certify lifts or settles with fsum are correctly rounded, well inside.
    """
    c = (L + 1).bit_length() + 1            # ⌈log₂(L + 2)⌉ + 1, in integers
    eps = REL + Fraction(L * wmax, T) * Fraction(2) ** (2 * c - 104)
    return eps, 2 * eps + Fraction(1, 2 ** 52)


def int_row(x: np.ndarray):
    """(integer weights w, exponent e) with x_j = w_j·2^e exactly."""
    mant, ex = np.frexp(x)
    im = (mant * 2.0 ** 53).astype(np.int64).tolist()
    e2 = (ex.astype(np.int64) - 53)
    nz = x > 0
    e = int(e2[nz].min()) if nz.any() else 0
    sh = np.where(nz, e2 - e, 0).tolist()
    return [m << s for m, s in zip(im, sh)], e


def min_disc_exact(w):
    """min over subsets of |Σ_S w − Σ_{S^c} w| by meet in the middle (exact ints)."""
    T = sum(w)
    h = len(w) // 2

    def sums(part):
        out = [0]
        for v in part:
            out += [s + v for s in out]
        return out
    left, right = sums(w[:h]), sorted(sums(w[h:]))
    best = T
    for a in left:
        # want a + b as close as possible to T/2, i.e. 2(a + b) close to T
        k = bisect.bisect_left(right, (T - 2 * a) // 2)
        for b in right[max(0, k - 1):k + 2]:
            best = min(best, abs(T - 2 * (a + b)))
    return best


def topk_disc_lower(w, K):
    """Top-K interval lemma in integers: a lower bound on the minimal |A − B|."""
    s = sorted(w, reverse=True)
    top, tail = s[:K], sum(s[K:])
    sums = [top[0]]
    for v in top[1:]:
        sums = [x + v for x in sums] + [x - v for x in sums]
    return max(0, min(abs(x) for x in sums) - tail)


def count_disc_lower(w, K):
    """Count lemma in integers: a lower bound on the minimal |A − B| over splits of the
    nonzero weights w.  The K largest weights get every sign pattern (the largest +1); if a
    split puts j of the other m weights (total t) on the + side, they add a value in
    [2·(sum of the j smallest) − t, 2·(sum of the j largest) − t].  The bound is the least
    distance from 0 of any pattern's sum plus any of these intervals (0 if one contains 0).
    With K = 0 and an odd count it is the parity bound 2·(sum of the (n + 1)/2 smallest) − T.
    """
    s = sorted(w, reverse=True)
    K = min(K, len(s))
    top, rest = s[:K], sorted(s[K:])
    t = sum(rest)
    lo, hi = [-t], [-t]
    for v in rest:
        lo.append(lo[-1] + 2 * v)                  # j smallest on the + side
    for v in reversed(rest):
        hi.append(hi[-1] + 2 * v)                  # j largest on the + side
    pats = [top[0]] if K else [0]
    for v in top[1:]:
        pats = [x + v for x in pats] + [x - v for x in pats]
    best = None
    for x in pats:
        # intervals [x + lo[j], x + hi[j]], both ends increasing in j
        j = bisect.bisect_left(hi, -x)
        if j < len(hi) and x + lo[j] <= 0:
            return 0
        cands = ([x + lo[j]] if j < len(hi) else []) + ([-(x + hi[j - 1])] if j > 0 else [])
        m = min(cands)
        best = m if best is None else min(best, m)
    return best


def check_row(x, rec, tol, K):
    """List of problems with one row's record (empty when everything holds)."""
    bad = []
    vals = {k: rec[k] for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
    for k, v in vals.items():
        if not np.isfinite(v):
            return [f"{k} is {v}"]
    lo, hi, glo, ghi = (Fraction(vals[k]) for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi"))
    if not (0 <= lo <= hi <= 1 and 0 <= glo <= ghi <= 1):
        bad.append(f"bounds out of order: θ ∈ [{vals['theta_lo']}, {vals['theta_hi']}], "
                   f"gap ∈ [{vals['gap_lo']}, {vals['gap_hi']}]")
    w, e = int_row(x)
    T = sum(w)
    scale = Fraction(2) ** e
    wmax = max(w)
    eps_sum, eps_max = sum_contract(len(w), wmax, T)
    if abs(Fraction(vals["row_sum"]) - T * scale) > eps_sum * T * scale:
        bad.append(f"row_sum {vals['row_sum']!r} is not Σ of the row")
    if eps_sum > Fraction(1, 2) or abs(Fraction(vals["p_max"]) - Fraction(wmax, T)) > eps_max * Fraction(wmax, T):
        bad.append(f"p_max {vals['p_max']!r} is not max/Σ")
    # witness replay (C7)
    A = sum(v for v, b in zip(w, rec["mask"]) if b)
    B = T - A
    th_w, gap_w = Fraction(4 * A * B, T * T), Fraction((A - B) ** 2, T * T)
    if lo > th_w:
        bad.append(f"theta_lo {vals['theta_lo']!r} exceeds the witness value {float(th_w)!r}")
    if ghi < gap_w:
        bad.append(f"gap_hi {vals['gap_hi']!r} is below the witness gap {float(gap_w)!r}")
    dominant = 2 * wmax >= T
    if dominant != (rec["regime"] == 0):
        bad.append(f"regime {rec['regime']} but the row is {'' if dominant else 'not '}dominant")
    # upper bounds: exact δ*·T (dominant or short rows) or a lower bound on it (top-K, count)
    if hi < 1 or glo > 0:
        nzw = [v for v in w if v]
        if dominant:
            dT = 2 * wmax - T
        elif len(nzw) <= EXACT_ATOMS:
            dT = min_disc_exact(nzw)
        else:
            dT = max(topk_disc_lower(nzw, K), count_disc_lower(nzw, K),
                     count_disc_lower(nzw, 0) if len(nzw) % 2 else 0)
        if glo > Fraction(dT * dT, T * T) or hi < 1 - Fraction(dT * dT, T * T):
            bad.append(f"upper bound θ ≤ {vals['theta_hi']!r} (gap ≥ {vals['gap_lo']!r}) not justified "
                       f"(best re-derived gap lower bound {float(Fraction(dT * dT, T * T))!r})")
    if rec["regime"] == 1 and hi - lo > max(tol, CLOSE_FLOOR):
        bad.append("regime 1 (closed) but hi − lo > max(tolerance, 2^-50)")
    if rec["regime"] == 2 and (hi - lo <= tol * (1 - OPEN_MARGIN) or hi - lo <= CLOSE_FLOOR / 2):
        bad.append("regime 2 (open) but hi − lo is within the tolerance: certify closes such a row")
    if rec["regime"] not in (0, 1, 2):
        bad.append(f"unknown regime {rec['regime']}")
    return bad


def _bad(outdir, msg):
    return io.InputError(os.path.join(outdir, "summary.json"), msg)


def _is_int(v, lo=None, hi=None):
    return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo) and (hi is None or v <= hi)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def _sha_ok(v):
    return isinstance(v, str) and len(v) == 64 and set(v) <= HEX


def load_summary(outdir):
    """summary.json, checked against what certify can write (exit 2 otherwise)."""
    try:
        with open(os.path.join(outdir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise io.InputError(outdir, f"cannot read summary.json ({type(exc).__name__}: {exc})") from None
    if not isinstance(s, dict):
        raise _bad(outdir, f"is a JSON {type(s).__name__}, not an object")
    if s.get("format") != fmt.FORMAT:
        raise _bad(outdir, f"format {s.get('format')!r} is not {fmt.FORMAT!r}")
    checks = [("rows", _is_int(s.get("rows"), 1)), ("L_max", _is_int(s.get("L_max"), 2)),
              ("tolerance", _is_num(s.get("tolerance")) and s.get("tolerance") >= 0),
              ("topk_K", _is_int(s.get("topk_K"), 1, MAX_TOPK)),
              ("inputs", isinstance(s.get("inputs"), list) and len(s["inputs"]) > 0),
              ("rows_sha256", _sha_ok(s.get("rows_sha256"))),
              # constants of the format: a summary stating other values is not certify's
              ("close_floor", s.get("close_floor") == fmt.CLOSE_FLOOR),
              ("exact_max_atoms", s.get("exact_max_atoms") == fmt.EXACT_MAX_ATOMS
               and _is_int(s.get("exact_max_atoms"))),
              ("max_sum_defect", isinstance(s.get("max_sum_defect"), (int, float))
               and not isinstance(s.get("max_sum_defect"), bool) and s["max_sum_defect"] >= 0),
              ("files", isinstance(s.get("files"), list) and all(isinstance(x, str) for x in s["files"]))]
    for k, ok in checks:
        if not ok:
            raise _bad(outdir, f"field {k!r} = {s.get(k)!r} is not what certify writes"
                       + (f" (1 ≤ topk_K ≤ {MAX_TOPK})" if k == "topk_K" else ""))
    seen = set()
    for j, inp in enumerate(s["inputs"]):
        ok = isinstance(inp, dict) and isinstance(inp.get("path"), str) and inp["path"] and \
            _sha_ok(inp.get("sha256")) and inp.get("kind") in ("rows", "logits") and \
            _is_int(inp.get("rows"), 1) and _is_int(inp.get("L"), 2, s["L_max"]) and \
            _is_num(inp.get("tau")) and inp["tau"] > 0 and inp.get("dtype") in io.FLOAT_DTYPES
        if ok and inp["kind"] == "logits":
            cr = inp.get("certified_rows")
            ok = isinstance(cr, dict) and cr.get("path") == f"certified-rows-{j}.npy" and _sha_ok(cr.get("sha256"))
        if not ok:
            raise _bad(outdir, f"inputs[{j}] is malformed (path, sha256, kind, dtype, rows, L, tau"
                       + (", certified_rows" if isinstance(inp, dict) and inp.get("kind") == "logits" else "") + ")")
        if inp["path"] in seen:
            raise _bad(outdir, f"inputs[{j}] repeats {inp['path']!r}")
        seen.add(inp["path"])
    if sum(i["rows"] for i in s["inputs"]) != s["rows"] or max(i["L"] for i in s["inputs"]) != s["L_max"]:
        raise _bad(outdir, "rows / L_max disagree with the inputs listed")
    need = {"certificates.npz", "metadata.npz", "summary.json"} | \
        {i["certified_rows"]["path"] for i in s["inputs"] if i["kind"] == "logits"}
    listed = set(s["files"])
    strange = sorted(f for f in listed if not ours(f))
    if strange or not need <= listed or len(listed) != len(s["files"]):
        raise _bad(outdir, "field 'files' does not list what certify writes"
                   + (f" (not certify's: {strange[0]!r})" if strange else ""))
    return s


NEED = fmt.CERT_DTYPES


def load_certificates(outdir, N, Lmax):
    """The arrays of certificates.npz, headers checked against the format before any data is read.

    Uncompressed members (what certify writes) are memory-mapped; a compressed one is read
    only once its header matches, so a crafted shape cannot make verify allocate more than
    the data.
    """
    path = os.path.join(outdir, "certificates.npz")
    W = (Lmax + 7) // 8
    out = {}
    try:
        infos = rd.npz_members(path, expected=NEED)     # exactly these members, one reading
        with zipfile.ZipFile(path) as z:
            for k, d in NEED.items():
                shape = (N, W) if k == "witness" else (N,)
                info = infos[k]
                m = rd.ZipMember(path, info)
                if m.dtype != np.dtype(d) or tuple(m.shape) != shape or m.fortran:
                    raise io.InputError(path, f"array {k!r} is {m.dtype} {tuple(m.shape)}"
                                              f"{' (Fortran order)' if m.fortran else ''}; the format "
                                              f"requires {d} {shape}")
                m.check_size()                          # exactly the bytes the header promises
                if info.compress_type == zipfile.ZIP_STORED:
                    off = rd.stored_offset(path, info) + m.header_len
                    out[k] = np.memmap(path, dtype=m.dtype, mode="r", offset=off, shape=shape)
                else:
                    with z.open(info) as f:
                        out[k] = np.lib.format.read_array(f, allow_pickle=False)
    except io.InputError:
        raise
    except rd.ReadError as exc:
        raise io.InputError(path, str(exc)) from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise io.InputError(path, f"cannot read ({type(exc).__name__}: {exc})") from None
    return out


def find_input(outdir, inp, search):
    """Path of the input file with the recorded name and sha256: as recorded, else under --inputs."""
    rec = inp["path"]
    first = rec if os.path.isabs(rec) else os.path.join(outdir, rec)
    name = os.path.basename(rec)
    cands = [first]
    for d in search:
        cands.append(os.path.join(d, name))
        for root, _, files in os.walk(d):
            if name in files:
                cands.append(os.path.join(root, name))
    found = [c for c in dict.fromkeys(cands) if os.path.isfile(c)]
    for c in found:
        if io.file_sha256(c) == inp["sha256"]:
            return c, None
    if found:
        return None, f"{found[0]}: sha256 differs from the one certified"
    where = f" or under {', '.join(search)}" if search else "; moved? give --inputs DIR"
    raise io.InputError(first, f"input not found (recorded as {rec!r}{where})")


def _replay_chunk(R, cert, a, tol, K, problems):
    """Check rows R (float64, at their own L) against certificate rows [a, a + len(R))."""
    from .verify_fast import fast_rows
    n, L = R.shape
    b = a + n
    wb = (L + 7) // 8            # only the bytes that cover this file's L; the rest must be zero
    masks = np.unpackbits(np.asarray(cert["witness"][a:b, :wb]), axis=-1, bitorder="little")
    beyond = masks[:, L:].any(axis=1) | np.asarray(cert["witness"][a:b, wb:]).any(axis=1)
    for i in np.flatnonzero(beyond):
        problems.append(f"row {a + i}: witness has bits beyond L = {L}")
    masks = np.ascontiguousarray(masks[:, :L])
    col = {k: np.ascontiguousarray(cert[k][a:b]) for k in NEED if k != "witness"}
    ok = np.zeros(n, np.int8)
    fast_rows(R, masks, col["theta_lo"], col["theta_hi"], col["gap_lo"], col["gap_hi"], col["p_max"],
              col["row_sum"], col["regime"], fmt.close_width(float(tol)), K, ok)
    for i in np.flatnonzero(ok == 0):
        rec = {k: float(col[k][i]) for k in NEED if k not in ("witness", "regime")}
        rec["regime"] = int(col["regime"][i])
        rec["mask"] = masks[i].tolist()
        problems += [f"row {a + i}: {p}" for p in check_row(R[i], rec, tol, K)]
    return int(n - ok.sum())


def _same_input_fields(path, inp, src, problems):
    """summary.json's record of an input must be what the file is (kind, rows, L checked by the caller)."""
    for k, have in (("dtype", src.dtype), ("tau", src.tau), ("metadata_not_carried", src.skipped or None)):
        if inp.get(k) != have:
            problems.append(f"summary.json records {k} = {inp.get(k)!r} for {path}; the file gives {have!r}")


def load_metadata(outdir, sources, N, problems):
    """metadata.npz, checked: exactly the carried columns, input_index, length and entropy (else
    exit 2); every column but entropy equal to what the inputs give (else a discrepancy);
    entropy is checked row by row in the replay."""
    path = os.path.join(outdir, "metadata.npz")
    want = fmt.carried_metadata(sources)
    try:
        got = fmt.read_arrays(path, expected=[*want, "entropy"])
    except rd.ReadError as exc:
        raise io.InputError(path, str(exc)) from None
    ent = got["entropy"]
    if ent.dtype != np.float64 or ent.shape != (N,) or ent.ndim != 1:
        raise io.InputError(path, f"column 'entropy' is {ent.dtype} {ent.shape}; the format requires float64 ({N},)")
    for k, v in want.items():
        g = got[k]
        if g.dtype != v.dtype or g.shape != v.shape:
            raise io.InputError(path, f"column {k!r} is {g.dtype} {g.shape}; the inputs give {v.dtype} {v.shape}")
        if not np.array_equal(g, v, equal_nan=v.dtype.kind == "f"):
            r = int(np.argmax(~((g == v) | ((g != g) & (v != v)))))
            problems.append(f"metadata.npz: row {r}: {k} = {g[r]!r}; the inputs give {v[r]!r}")
    return got


def _defect_check(R, msd, path, a, problems):
    """Every ``rows`` row within the stated max_sum_defect: exact |T − 1| ≤ msd + L·2^-52·T.

    certify tested its float row sum, which is within (L − 1)·2^-53·T of T in any summation
    order, so its rows pass; rows near the limit are decided in exact arithmetic, so the
    verdict does not depend on this machine's summation order.
    """
    if not np.isfinite(msd):
        return
    L = R.shape[1]
    s = R.sum(axis=1)
    unsure = ~(np.abs(s - 1.0) <= msd - L * 2.0 ** -50 * np.maximum(s, 1.0))
    for i in np.flatnonzero(unsure):
        T = sum(Fraction(v) for v in R[i].tolist())
        if abs(T - 1) > Fraction(msd) + L * Fraction(1, 2 ** 52) * T:
            problems.append(f"{path}: row {a + i}: row sum {float(T):.6g} is off 1 by more than "
                            f"max_sum_defect {msd:g}")
            return


def _entropy_check(R, ent, a, problems):
    """The descriptive entropy column agrees with the rows within rounding (folder.entropy_with_tolerance)."""
    e = ent[a:a + R.shape[0]]
    H, tol = fmt.entropy_with_tolerance(R)
    with np.errstate(invalid="ignore"):
        far = ~(np.abs(e - H) <= tol)
    if far.any():
        problems.append(f"row {a + int(np.argmax(far))}: metadata.npz entropy {float(e[np.argmax(far)])!r} "
                        "is not the entropy of the row")


def _logit_check(src, stored, s, e, problems):
    """The stated relation of the stored rows to the logits (consistency, see module docstring)."""
    P = io.softmax_rows(io.read_rows(src, s, e), src.tau, src.path, s)
    far = np.abs(stored - P) > LOGIT_REL(src.L) * P + 2.0 ** -1060
    if far.any():
        r = int(np.argmax(far.any(axis=1)))
        problems.append(f"{src.path}: row {s + r}: certified rows differ from softmax(logits/tau) recomputed "
                        f"here by more than {LOGIT_REL(src.L):.3g} relative")


def _snapshot(outdir):
    """Identity of the files verify reads: certify's install replaces them (new inodes) and
    journals it, so an unchanged snapshot means one folder was read from start to end."""
    out = []
    for name in ("summary.json", "certificates.npz", "metadata.npz", JOURNAL):
        try:
            st = os.stat(os.path.join(outdir, name))
            out.append((name, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((name, None))
    return out


def run_verify(outdir, progress=True, max_report=10, out=None, search=()):
    """Return the number of discrepancies (0 iff everything holds); raises InputError on bad files.

    ``out``: where the findings are printed (default: sys.stdout at call time).
    """
    out = sys.stdout if out is None else out
    settle(outdir)                      # an install a killed certify journalled is finished first
    before = _snapshot(outdir)
    summary = load_summary(outdir)
    N, Lmax = summary["rows"], summary["L_max"]
    cert = load_certificates(outdir, N, Lmax)
    tol, K = Fraction(summary["tolerance"]), summary["topk_K"]
    problems, plan = [], []
    for inp in summary["inputs"]:
        path, why = find_input(outdir, inp, search)
        if why:
            problems.append(why)
            plan.append(None)
            continue
        src = io.load_source(path, sha256=inp["sha256"])     # find_input checked this hash
        if (src.kind, src.n, src.L) != (inp["kind"], inp["rows"], inp["L"]):
            raise io.InputError(path, f"holds {src.n} {src.kind} of L = {src.L}; summary.json says "
                                      f"{inp['rows']} {inp['kind']} of L = {inp['L']}")
        stored = None
        if src.kind == "logits":
            sp = os.path.join(outdir, inp["certified_rows"]["path"])
            if not os.path.isfile(sp) or io.file_sha256(sp) != inp["certified_rows"]["sha256"]:
                problems.append(f"{sp}: missing or sha256 differs from the one certified")
                plan.append(None)
                continue
            try:
                (_, stored), _, _ = rd.read_npy(sp)
            except (rd.ReadError, ValueError, OSError) as exc:
                raise io.InputError(sp, f"cannot read ({exc})") from None
            if stored.shape != (src.n, src.L) or stored.dtype_name != "float64":
                raise io.InputError(sp, f"holds {stored.dtype_name} {stored.shape}, not float64 {(src.n, src.L)}")
        _same_input_fields(path, inp, src, problems)
        plan.append((src, stored))
    meta = None if any(p is None for p in plan) else load_metadata(outdir, [p[0] for p in plan], N, problems)
    h = hashlib.sha256()
    hasher = ThreadPoolExecutor(1, thread_name_prefix="sha256-rows")   # beside the replay (GIL released)
    bar = Progress(N, "verify", enabled=progress)
    try:
        exact = _replay_all(summary, plan, cert, tol, K, problems, h, hasher, bar, Lmax, meta)
    finally:
        hasher.shutdown(wait=True, cancel_futures=True)
    bar.close()
    if not any(p is None for p in plan) and h.hexdigest() != summary["rows_sha256"]:
        problems.append("the float64 rows replayed differ from the certified ones (rows_sha256)")
    for k, v in fmt.derived(cert["theta_lo"], cert["regime"]).items():
        if summary.get(k) != v:
            problems.append(f"summary.json: {k} is {summary.get(k)!r}; the certificates give {v!r}")
    if _snapshot(outdir) != before:
        raise io.InputError(outdir, "changed while it was being verified (a certify --overwrite installed "
                                    "into it); verify again")
    for p in problems[:max_report]:
        print(f"{outdir}: {p}", file=out)
    if len(problems) > max_report:
        print(f"{outdir}: … {len(problems) - max_report} more", file=out)
    print(f"{outdir}: {'OK' if not problems else 'FAILED'}: {N} rows ({exact} replayed in exact arithmetic), "
          f"{len(problems)} discrepancies", file=out)
    return len(problems)


def _replay_all(summary, plan, cert, tol, K, problems, h, hasher, bar, Lmax, meta):
    """Replay every chunk; the rows go to ``h`` in order on the hasher thread (at most one
    chunk waits).  Returns the number of rows replayed in exact arithmetic."""
    r0 = exact = 0
    pending = None
    for inp, p in zip(summary["inputs"], plan):
        if p is None:
            r0 += inp["rows"]
            bar.update(inp["rows"])
            continue
        src, stored = p
        step = max(1, CHUNK_ELEMS // max(src.L, (Lmax + 7) // 8))   # rows × (L or witness bytes) bounded
        for s in range(0, src.n, step):
            e = min(src.n, s + step)
            if stored is None:
                R = io.read_rows(src, s, e)
            else:
                R = np.ascontiguousarray(stored.read(s, e), dtype=np.float64)
                _logit_check(src, R, s, e, problems)
            io.validate(R, src.path, s, None)
            R = np.ascontiguousarray(R)
            if stored is None:
                _defect_check(R, summary["max_sum_defect"], src.path, s, problems)
            if meta is not None:
                _entropy_check(R, meta["entropy"], r0 + s, problems)
            if pending is not None:
                pending.result()
            pending = hasher.submit(h.update, memoryview(R).cast("B"))
            with hold_sigint() as interrupted:     # numba may compile here; see outdir.checkpoint
                exact += _replay_chunk(R, cert, r0 + s, tol, K, problems)
            checkpoint(interrupted)
            bar.update(e - s)
        r0 += src.n
    if pending is not None:
        pending.result()
    return exact
