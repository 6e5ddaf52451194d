"""``verify``: an independent exact replay of a certificate directory.

Shares no bound code with certify: it imports neither numerics.theta_bounds nor
the pipeline, only the file loader (whose output it checks against the sha256 of
the input files and of the float64 rows recorded in summary.json).  Every check
is exact integer/Fraction arithmetic on the dyadic row values:

* each witness S is replayed: θ_S = 4AB/T² ≥ theta_lo and δ_S² ≤ gap_hi (C7);
* the dominant-atom regime is re-decided (2·x_max ≥ T) and its value re-derived (C4);
* every upper bound below 1 (theta_hi < 1 or gap_lo > 0) is re-justified, by an exact
  meet-in-the-middle search when the row has ≤ EXACT_ATOMS nonzero atoms, else by the
  top-K interval lemma recomputed in integers with the K recorded in summary.json;
* regime 0 iff dominant; regime 1 (closed) claims hi − lo ≤ tolerance (regime 2 claims nothing); row_sum and p_max are within 4 ulps.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import sys
from fractions import Fraction

import numpy as np

from . import inputs as io

EXACT_ATOMS = 24
REL = Fraction(1, 2 ** 51)       # 4 ulps relative, for the descriptive row_sum and p_max


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
    if abs(Fraction(vals["row_sum"]) - T * scale) > REL * T * scale:
        bad.append(f"row_sum {vals['row_sum']!r} is not Σ of the row")
    wmax = max(w)
    if abs(Fraction(vals["p_max"]) - Fraction(wmax, T)) > REL * Fraction(wmax, T):
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
    # upper bounds: exact δ*·T (dominant or short rows) or a lower bound on it (top-K)
    if hi < 1 or glo > 0:
        nzw = [v for v in w if v]
        if dominant:
            dT = 2 * wmax - T
        elif len(nzw) <= EXACT_ATOMS:
            dT = min_disc_exact(nzw)
        else:
            dT = topk_disc_lower(nzw, K)
        if glo > Fraction(dT * dT, T * T) or hi < 1 - Fraction(dT * dT, T * T):
            bad.append(f"upper bound θ ≤ {vals['theta_hi']!r} (gap ≥ {vals['gap_lo']!r}) not justified "
                       f"(best re-derived gap lower bound {float(Fraction(dT * dT, T * T))!r})")
    if rec["regime"] == 1 and hi - lo > tol:
        bad.append("regime 1 (closed) but hi − lo > tolerance")
    if rec["regime"] not in (0, 1, 2):
        bad.append(f"unknown regime {rec['regime']}")
    return bad


def run_verify(outdir, progress=True, max_report=10, out=sys.stdout):
    """Return the number of discrepancies (0 iff everything holds); raises InputError on bad files."""
    try:
        with open(os.path.join(outdir, "summary.json")) as f:
            summary = json.load(f)
        with np.load(os.path.join(outdir, "certificates.npz"), allow_pickle=False) as z:
            cert = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as exc:
        raise io.InputError(outdir, f"cannot read the certificate directory ({exc})")
    problems = []
    sources = []
    for inp in summary["inputs"]:
        path = inp["path"] if os.path.isabs(inp["path"]) else os.path.join(outdir, inp["path"])
        src = io.load_source(path)
        if src.sha256 != inp["sha256"]:
            problems.append(f"{inp['path']}: sha256 differs from the one certified")
        sources.append(src)
    N = summary["rows"]
    need = ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "regime", "witness", "row_sum")
    missing = [k for k in need if k not in cert]
    if missing or any(cert[k].shape[0] != N for k in need):
        raise io.InputError(outdir, f"certificates.npz lacks arrays or rows: missing {missing}")
    # The fixed format, exactly: a wider float would be rounded by float() below, a float
    # regime truncated by int().
    want = {k: "float64" for k in ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")}
    want.update(regime="int8", witness="uint8")
    problems += [f"certificates.npz: {k} has dtype {cert[k].dtype}, the format requires {d}"
                for k, d in want.items() if cert[k].dtype != np.dtype(d)]
    tol = Fraction(summary["tolerance"])
    K = int(summary["topk_K"])
    Lmax = int(summary["L_max"])
    h = hashlib.sha256()
    from tqdm import tqdm
    bar = tqdm(total=N, unit="row", disable=not progress or None, file=sys.stderr, desc="verify")
    r = 0
    for src in sources:
        for s in range(0, src.n, 4096):
            R = io.rows_float64(src, s, min(src.n, s + 4096))
            io.validate(R, src.path, s, None)
            if R.shape[1] < Lmax:
                R = np.concatenate([R, np.zeros((R.shape[0], Lmax - R.shape[1]))], axis=1)
            h.update(R.tobytes())
            masks = np.unpackbits(cert["witness"][r:r + R.shape[0]], axis=-1, bitorder="little")
            if masks.shape[1] < Lmax or masks[:, Lmax:].any():
                problems.append(f"rows {r}…: witness has the wrong width or bits beyond L")
            for i in range(R.shape[0]):
                rec = {k: float(cert[k][r]) for k in need if k not in ("witness", "regime")}
                rec["regime"] = int(cert["regime"][r])
                rec["mask"] = masks[i, :Lmax].tolist()
                problems += [f"row {r}: {p}" for p in check_row(R[i], rec, tol, K)]
                r += 1
            bar.update(R.shape[0])
    bar.close()
    if r != N:
        problems.append(f"inputs hold {r} rows, certificates {N}")
    if h.hexdigest() != summary.get("rows_sha256"):
        problems.append("the float64 rows rebuilt from the inputs differ from the certified ones (rows_sha256)")
    for p in problems[:max_report]:
        print(f"{outdir}: {p}", file=out)
    if len(problems) > max_report:
        print(f"{outdir}: … {len(problems) - max_report} more", file=out)
    print(f"{outdir}: {'OK' if not problems else 'FAILED'}: {N} rows, {len(problems)} discrepancies", file=out)
    return len(problems)
