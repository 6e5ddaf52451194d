"""Two rows' serial chains in lockstep against one row at a time, timed in one run.

Stage A's search has loops whose trip counts differ from row to row: the greedy over the big
atoms (8.3 trips on average on the non-dominant rows of L = 64, spread 2.5) and first fit
after the prefix crossing (11.9 trips, stopping early once |D| ≤ stop).  Each is a chain of
dependent float steps ending in a loop exit that the branch predictor misses.  One proposal
for short rows (issue 27) was to run two rows' chains in one loop, so that the two chains
overlap and a pair of rows pays for one exit instead of two.  This script measures that idea
on the chains alone, before any kernel is rewritten for it:

- ``one``: one row at a time, as stage A does;
- ``lockstep``: two rows in one loop of max(n_a, n_b) trips, a row past its count left
  unchanged by a select (first fit: the loop runs while either row is still going);
- ``min+tails``: the two rows together for min(n_a, n_b) trips, then each row's remaining
  trips on its own.

In stage A about two thousand instructions part one row's chain from the next, too many for
the processor to overlap them; here a row's start is made to depend on the previous row's
result (a multiply by zero) so that ``one`` cannot overlap rows either.  Trip counts are drawn
uniformly from 1…16 (greedy) and 0…24 (first fit), seeded.  All three give bit-identical
results (checked before timing); printed: ns a row, fastest of --reps runs, and each
variant's time over ``one``'s (above 1: slower).

Usage: python benchmarks/lockstep_chains.py [--rows N] [--reps R]
"""
from __future__ import annotations

import argparse
import time

import numba
import numpy as np


@numba.njit(cache=True)
def one(R, NB, NF, stop, out):
    prev = 0.0
    L = R.shape[1]
    for i in range(R.shape[0]):
        D = prev * 0.0                 # this row starts after the previous one ends
        for t in range(NB[i]):         # greedy: the lighter side takes the atom
            D = D + R[i, t] if D <= 0.0 else D - R[i, t]
        E = abs(D) + R[i, L - 1]
        for t in range(NF[i]):         # first fit: an atom joins while it fits
            if E <= stop:
                break
            p = R[i, (L >> 1) + (t % (L >> 1))]
            E = E - p if p <= E else E
        out[i] = E
        prev = E


@numba.njit(cache=True)
def lockstep(R, NB, NF, stop, out):
    prev = 0.0
    L = R.shape[1]
    for i in range(0, R.shape[0] - 1, 2):
        j = i + 1
        Da = prev * 0.0
        Db = prev * 0.0
        na, nb = NB[i], NB[j]
        for t in range(max(na, nb)):
            xa = R[i, t] * np.float64(t < na)     # past its count a row adds +0: unchanged
            xb = R[j, t] * np.float64(t < nb)
            Da = Da + xa if Da <= 0.0 else Da - xa
            Db = Db + xb if Db <= 0.0 else Db - xb
        Ea = abs(Da) + R[i, L - 1]
        Eb = abs(Db) + R[j, L - 1]
        fa, fb = NF[i], NF[j]
        for t in range(max(fa, fb)):
            ga = (t < fa) & (Ea > stop)           # & and |, not and/or: no branch per test
            gb = (t < fb) & (Eb > stop)
            if not (ga | gb):
                break
            pa = R[i, (L >> 1) + (t % (L >> 1))]
            pb = R[j, (L >> 1) + (t % (L >> 1))]
            Ea = Ea - pa if (ga & (pa <= Ea)) else Ea
            Eb = Eb - pb if (gb & (pb <= Eb)) else Eb
        out[i] = Ea
        out[j] = Eb
        prev = Ea + Eb


@numba.njit(cache=True)
def min_tails(R, NB, NF, stop, out):
    prev = 0.0
    L = R.shape[1]
    for i in range(0, R.shape[0] - 1, 2):
        j = i + 1
        Da = prev * 0.0
        Db = prev * 0.0
        na, nb = NB[i], NB[j]
        m = min(na, nb)
        for t in range(m):
            Da = Da + R[i, t] if Da <= 0.0 else Da - R[i, t]
            Db = Db + R[j, t] if Db <= 0.0 else Db - R[j, t]
        for t in range(m, na):
            Da = Da + R[i, t] if Da <= 0.0 else Da - R[i, t]
        for t in range(m, nb):
            Db = Db + R[j, t] if Db <= 0.0 else Db - R[j, t]
        Ea = abs(Da) + R[i, L - 1]
        Eb = abs(Db) + R[j, L - 1]
        fa, fb = NF[i], NF[j]
        t = 0
        while (t < fa) & (t < fb) & ((Ea > stop) | (Eb > stop)):
            pa = R[i, (L >> 1) + (t % (L >> 1))]
            pb = R[j, (L >> 1) + (t % (L >> 1))]
            Ea = Ea - pa if ((Ea > stop) & (pa <= Ea)) else Ea
            Eb = Eb - pb if ((Eb > stop) & (pb <= Eb)) else Eb
            t += 1
        for u in range(t, fa):
            if Ea <= stop:
                break
            p = R[i, (L >> 1) + (u % (L >> 1))]
            Ea = Ea - p if p <= Ea else Ea
        for u in range(t, fb):
            if Eb <= stop:
                break
            p = R[j, (L >> 1) + (u % (L >> 1))]
            Eb = Eb - p if p <= Eb else Eb
        out[i] = Ea
        out[j] = Eb
        prev = Ea + Eb


VARIANTS = {"one": one, "lockstep": lockstep, "min+tails": min_tails}


def chains_input(n, L=64, seed=0):
    """Rows (n, L) of softmax values (spread 2.5), trip counts and first fit's stop."""
    rng = np.random.default_rng(seed)
    lg = rng.normal(size=(n, L)) * 2.5
    R = np.exp(lg - lg.max(axis=1, keepdims=True))
    R /= R.sum(axis=1, keepdims=True)
    NB = rng.integers(1, 17, n)
    NF = rng.integers(0, 25, n)
    return R, NB, NF, 5e-4


def results(R, NB, NF, stop):
    """Each variant's per-row results, as float64 arrays."""
    outs = {}
    for name, f in VARIANTS.items():
        out = np.empty(R.shape[0])
        f(R, NB, NF, stop, out)
        outs[name] = out
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="The comparison is described at the top of this file and in benchmarks/README.md.")
    ap.add_argument("--rows", type=int, default=16384, help="rows of L = 64 (even; default 16384)")
    ap.add_argument("--reps", type=int, default=21, help="timed runs per variant, alternated (default 21)")
    a = ap.parse_args(argv)
    if a.rows < 2 or a.rows % 2:
        ap.error("--rows must be an even number ≥ 2")
    numba.set_num_threads(1)
    R, NB, NF, stop = chains_input(a.rows)
    outs = results(R, NB, NF, stop)
    ref = outs["one"].view(np.int64)
    for name, out in outs.items():
        if not np.array_equal(out.view(np.int64), ref):
            raise SystemExit(f"lockstep_chains: {name} differs from one row at a time "
                             f"in {int((out.view(np.int64) != ref).sum())} rows")
    best = {name: np.inf for name in VARIANTS}
    out = np.empty(a.rows)
    for _ in range(max(a.reps, 1)):
        for name, f in VARIANTS.items():
            t = time.perf_counter()
            f(R, NB, NF, stop, out)
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"{a.rows} rows of L = 64, one thread, fastest of {a.reps} alternated runs; results bit-identical")
    for name in VARIANTS:
        print(f"  {name:10s} {best[name] / a.rows * 1e9:7.1f} ns a row   {best[name] / best['one']:.2f}x one")


if __name__ == "__main__":
    main()
