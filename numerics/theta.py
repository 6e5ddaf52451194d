"""θ(p) and the discrepancy δ(p), exactly.

Definitions (the Conventions of paper_checks.md): for a row p of nonnegative weights with total
T > 0 and a subset S with a = p(S), b = T − a,

    θ(p) = max_S 4ab/T²      δ(p) = min_S |a − b|/T      θ = 1 − δ²,

which is θ of the exact normalisation p/T (C7: this is why a row that does not
sum to one is still certified exactly).  Floats are exact dyadic rationals, so
a float row is converted to integers with one common power-of-two denominator
and every result here is an exact :class:`fractions.Fraction`.

Masks are Python ints: bit i set means position i is in S.

Precision contract: every function in this module is exact, except
:func:`theta_float64_bruteforce`, which is plain float64 (for property tests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from .signs import mask_matrix

BRUTE_MAX_L = 20  # 2^19 subset sums: well under a second with numpy int64


@dataclass(frozen=True)
class ThetaResult:
    theta: Fraction
    delta: Fraction
    mask: int          # the witness subset S (bit i = position i); θ = θ_of_mask(row, mask)
    method: str        # "trivial", "dominant", "bruteforce", "mitm" (Horowitz–Sahni) or "ss" (Schroeppel–Shamir)


# ----------------------------------------------------------------------------- exact input

def to_fractions(row) -> list[Fraction]:
    """Exact rational values of a row (floats of any width, ints, Fractions)."""
    if hasattr(row, "detach"):  # torch tensor: bfloat16/float16/float32 widen exactly to float64
        row = row.detach().cpu().double().numpy()
    arr = row
    if isinstance(arr, np.ndarray):
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)  # exact widening (float16/32 → float64)
        elif arr.dtype.kind not in "iu":
            raise TypeError(f"unsupported dtype {arr.dtype}")
        arr = arr.tolist()
    out = []
    for v in arr:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"non-finite entry {v!r}")
        f = Fraction(v)
        if f < 0:
            raise ValueError(f"negative entry {v!r}")
        out.append(f)
    return out


def _fractions(row) -> list[Fraction]:
    if isinstance(row, (list, tuple)) and all(isinstance(v, Fraction) for v in row):
        return list(row)
    return to_fractions(row)


def _ratio(v: float) -> tuple[int, int]:
    # to_fractions' checks, for one float
    if not math.isfinite(v):
        raise ValueError(f"non-finite entry {v!r}")
    if v < 0:
        raise ValueError(f"negative entry {v!r}")
    return v.as_integer_ratio()


def integer_weights(row) -> list[int]:
    """Integers w with w_i / D = row_i for one common denominator D > 0.

    θ, δ and every subset ratio are invariant under scaling, so these integers
    are all the exact solvers need.
    """
    if isinstance(row, np.ndarray) and row.dtype.kind == "f":
        # floats directly, without Fraction objects (about 10× faster, the same integers):
        # each float is n/d exactly with d a power of two (as_integer_ratio, lowest terms,
        # which is what Fraction(v) holds), so the least common denominator is the largest d
        nd = [_ratio(v) for v in row.astype(np.float64).tolist()]
        den = max((d for _, d in nd), default=1)
        w = [n * (den // d) for n, d in nd]
    else:
        fr = _fractions(row)
        den = 1
        for f in fr:
            den = den * f.denominator // math.gcd(den, f.denominator)
        w = [f.numerator * (den // f.denominator) for f in fr]
    g = 0
    for x in w:
        g = math.gcd(g, x)
    return [x // g for x in w] if g > 1 else w


def normalise(row) -> list[Fraction]:
    """The exact normalisation p/Σp of a row."""
    fr = _fractions(row)
    total = sum(fr)
    if total <= 0:
        raise ValueError("row has no positive mass")
    return [f / total for f in fr]


# ----------------------------------------------------------------------------- subsets (C7)

def subset_sums(weights: Sequence[int], mask: int) -> tuple[int, int]:
    a = sum(w for i, w in enumerate(weights) if mask >> i & 1)
    return a, sum(weights) - a


def theta_of_mask(row, mask: int) -> Fraction:
    """C7: 4ab/(a + b)² for S = mask; a lower bound on θ of the row's normalisation."""
    a, b = subset_sums(integer_weights(row), mask)
    return Fraction(4 * a * b, (a + b) ** 2)


def delta_of_mask(row, mask: int) -> Fraction:
    a, b = subset_sums(integer_weights(row), mask)
    return Fraction(abs(a - b), a + b)


def _result(weights: Sequence[int], mask: int, method: str) -> ThetaResult:
    a, b = subset_sums(weights, mask)
    t = a + b
    return ThetaResult(Fraction(4 * a * b, t * t), Fraction(abs(a - b), t), mask, method)


# ----------------------------------------------------------------------------- closed forms

def theta_uniform(L: int) -> Fraction:
    """C3: θ of the uniform row on L atoms."""
    if L < 1:
        raise ValueError("L must be ≥ 1")
    if L == 1:
        return Fraction(0)
    return Fraction(1) if L % 2 == 0 else 1 - Fraction(1, L * L)


def theta_dominant(row) -> ThetaResult | None:
    """C4: if the largest atom m satisfies m ≥ 1/2 then S = {argmax} is optimal, θ = 4m(1 − m).

    Returns None when the row is not in the dominant regime.
    """
    w = integer_weights(row)
    t = sum(w)
    i = max(range(len(w)), key=w.__getitem__)
    if 2 * w[i] < t:
        return None
    return _result(w, 1 << i, "dominant")


# ----------------------------------------------------------------------------- exact solvers

def best_mask_bruteforce(weights: Sequence[int]) -> int:
    """Mask of a subset whose sum is closest to T/2 (exhaustive, L ≤ BRUTE_MAX_L)."""
    L = len(weights)
    if L > BRUTE_MAX_L:
        raise ValueError(f"brute force is limited to L ≤ {BRUTE_MAX_L}, got {L}")
    if L <= 1:
        return 0
    t = sum(weights)
    if max(weights) < 2**62 // L:
        # Position L-1 fixed outside S (S and its complement give the same θ).
        sums = np.zeros(1, dtype=np.int64)
        for w in weights[:-1]:
            sums = np.concatenate([sums, sums + np.int64(w)])
        # |T − 2s| in int64 can overflow only if T ≥ 2^62; guarded above.
        dev = np.abs(np.int64(t) - 2 * sums)
        return int(np.argmin(dev))
    best, best_mask = None, 0
    for mask in range(1 << (L - 1)):
        a = sum(w for i, w in enumerate(weights) if mask >> i & 1)
        d = abs(t - 2 * a)
        if best is None or d < best:
            best, best_mask = d, mask
    return best_mask


def theta_bruteforce(row) -> ThetaResult:
    """θ by enumerating all subsets (exact; L ≤ BRUTE_MAX_L)."""
    w = integer_weights(row)
    if sum(w) == 0:
        raise ValueError("row has no positive mass")
    return _result(w, best_mask_bruteforce(w), "bruteforce")


def theta_exact(row) -> ThetaResult:
    """θ, δ and a witness subset, exactly, by the cheapest exact route.

    Closed forms first (L = 1, dominant atom C4), then brute force for short
    rows, then the exact partition solver (:mod:`numerics.partition`): Horowitz–Sahni
    up to partition.HS_MAX_ATOMS nonzero atoms, Schroeppel–Shamir beyond.
    """
    w = integer_weights(row)
    if not w or sum(w) == 0:
        raise ValueError("row has no positive mass")
    if sum(1 for x in w if x) == 1:
        return _result(w, 0, "trivial")
    dom = theta_dominant([Fraction(x) for x in w])
    if dom is not None:
        return dom
    nz = [i for i, x in enumerate(w) if x]  # C6: zero atoms never matter
    wz = [w[i] for i in nz]
    if len(wz) <= 16 and max(wz) < 2**62 // len(wz):
        # Short rows that fit the vectorised int64 enumeration; everything else (longer
        # rows, or float64 rows whose integer weights exceed int64) goes to the exact
        # partition solver, which handles integers of any size.
        sub, method = best_mask_bruteforce(wz), "bruteforce"
    else:
        from .partition import solve
        sub, _, method = solve(wz)
    mask = 0
    for j, i in enumerate(nz):
        if sub >> j & 1:
            mask |= 1 << i
    return _result(w, mask, method)


def theta_float64_bruteforce(p: np.ndarray) -> float:
    """θ in plain float64 by enumeration (not certified; for property tests)."""
    p = np.asarray(p, dtype=np.float64)
    a = mask_matrix(p.shape[0]).astype(np.float64) @ p
    t = p.sum()
    return float(np.max(4 * a * (t - a)) / (t * t))


# ----------------------------------------------------------------------------- C5: the sawtooth

# The conjectured exact minimum of θ at fixed p_max = m on [1/5, 1/2] (C5): θ_min(m) = 1 − δ*(m)².
# One entry per piece: ((lo, hi), δ*(m), an extremal row p(m) whose largest atom is m, a witness
# subset S of p(m) with |1 − 2p(S)| = δ*(m)).  The maps are plain arithmetic in m, so they
# evaluate on Fractions and on symbolic terms (z3) alike.  Rows may be padded with zero
# atoms to any longer length (C6).
SAWTOOTH = (
    ((Fraction(1, 3), Fraction(1, 2)), lambda m: 1 - 2 * m, lambda m: [m, m, 1 - 2 * m], (0,)),
    ((Fraction(2, 7), Fraction(1, 3)), lambda m: 4 * m - 1, lambda m: [m, m, m, 1 - 3 * m], (0, 1)),
    ((Fraction(7, 27), Fraction(2, 7)), lambda m: (6 * m - 1) / 5, lambda m: [m] + [(1 - m) / 5] * 5, (0, 1, 2)),
    ((Fraction(1, 5), Fraction(7, 27)), lambda m: (1 - 3 * m) / 2, lambda m: [m] + [(1 - m) / 4] * 4, (0, 1)),
)


def sawtooth_delta(m: Fraction) -> Fraction | None:
    """C5's δ*(m) for m ∈ [1/5, 1/2] (the pieces agree at the joints), None outside."""
    for (lo, hi), delta, _, _ in SAWTOOTH:
        if lo <= m <= hi:
            return delta(m)
    return None
