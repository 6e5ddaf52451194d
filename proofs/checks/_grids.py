"""Exact simplex grids for the exhaustive checks.

A grid point with denominator n is an integer vector k ≥ 0 with Σk = n, i.e.
p = k/n.  Every quantity the checks compare is homogeneous, so they work on
the integers directly:  n²·C(p) = n·diag(k) − kkᵀ and n²·4p(S)(1 − p(S)) =
4·k(S)·(n − k(S)).
"""
from __future__ import annotations

import itertools

import numpy as np

from numerics.signs import sign_matrix
from numerics.theta import theta_bruteforce


def partitions(n: int, L: int, largest: int | None = None):
    """Nonincreasing integer vectors of length L, entries ≥ 0, summing to n.

    θ and the ∞→1 norm of C(p) are invariant under permuting p, so one
    representative per orbit suffices.
    """
    largest = n if largest is None else largest
    if L == 1:
        if n <= largest:
            yield (n,)
        return
    for first in range(min(n, largest), -1, -1):
        if first * L < n:
            break
        for rest in partitions(n - first, L - 1, first):
            yield (first,) + rest


def compositions(n: int, L: int):
    """All integer vectors of length L, entries ≥ 0, summing to n (every grid point)."""
    for bars in itertools.combinations(range(n + L - 1), L - 1):
        prev, out = -1, []
        for b in bars:
            out.append(b - prev - 1)
            prev = b
        out.append(n + L - 1 - prev - 1)
        yield tuple(out)


def scaled_norm_inf_to_one(k: tuple[int, ...]) -> int:
    """n²‖C(k/n)‖_{∞→1} exactly (int64 arithmetic; entries are at most n² ≪ 2^63)."""
    kk = np.asarray(k, dtype=np.int64)
    n = int(kk.sum())
    A = n * np.diag(kk) - np.outer(kk, kk)
    X = sign_matrix(len(k))
    return int(np.abs(X @ A.T).sum(axis=1).max())


def scaled_theta(k: tuple[int, ...]) -> int:
    """n²·θ(k/n) = max_S 4 k(S)(n − k(S)), exactly (numerics.theta's subset enumeration)."""
    n = sum(k)
    v = theta_bruteforce(list(k)).theta * n * n
    if v.denominator != 1:   # n²θ is an integer on the grid; anything else is a bug upstream
        raise ArithmeticError(f"n²θ is not an integer at k = {k}: {v}")
    return int(v)
