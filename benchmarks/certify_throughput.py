"""Rows/s of the certify pipeline against a plain float64 row-sum pass over the same rows.

Prints, for L = 64, 256, 1024, 4096, the throughput of ``certify_batch`` (CPU, numpy +
numba) and of ``R.sum(axis=1)`` on the same float64 softmax rows, and their ratio, all
measured in this one run.  Usage: python benchmarks/certify_throughput.py [--rows N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from certificates.pipeline import certify_batch


def rows(n, L, seed=0):
    lg = np.random.default_rng(seed).normal(size=(n, L)) * 2.5      # attention-like spread
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def best_of(fn, reps=3):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1 << 20, help="float64 elements per L ≈ rows × L (default 2^20)")
    a = ap.parse_args()
    certify_batch(rows(64, 64), 1e-6)           # compile / load the numba kernels outside the timing
    print(f"{'L':>6} {'rows':>7} {'certify rows/s':>15} {'sum rows/s':>12} {'ratio':>8}  regimes(dom/closed/open)")
    for L in (64, 256, 1024, 4096):
        n = max(16, a.rows // L)
        R = rows(n, L, seed=L)
        t_c = best_of(lambda: certify_batch(R, 1e-6), reps=2)
        t_s = best_of(lambda: R.sum(axis=1), reps=5)
        reg = np.bincount(certify_batch(R, 1e-6)["regime"], minlength=3)
        print(f"{L:>6} {n:>7} {n / t_c:>15.0f} {n / t_s:>12.0f} {t_c / t_s:>8.0f}x  {reg.tolist()}")


if __name__ == "__main__":
    main()
