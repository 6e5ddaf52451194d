"""Timing of the exact θ solver (numerics.theta.theta_exact → numerics.partition).

    python -m benchmarks.exact_theta [--quick] [--rows N] [--seed S] [--wide]

(from the repository root, or anywhere after ``pip install -e .``).

Rows: Dirichlet(1) in float64, and softmax of N(0, 1) logits rounded to
float32.  Dominant rows (p_max ≥ 1/2, closed form C4) are redrawn, so every
timed row with L > 20 goes through the exact partition solver (Horowitz–Sahni up to
24 atoms, Schroeppel–Shamir beyond; the method column says which).  Brute force
(numerics.theta.best_mask_bruteforce) only runs for L ≤ 20, so the two are
compared on the same rows at L = 16 and 20, in this run.  JIT compilation (or
loading numba's cache) is timed separately.  Timings are wall clock on one
core; the machine may be shared, so read ratios, not absolutes.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
import torch

from numerics import partition
from numerics.theta import best_mask_bruteforce, integer_weights, subset_sums, theta_exact


def rows(kind: str, L: int, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    while len(out) < n:
        if kind == "dirichlet-f64":
            p = rng.dirichlet(np.ones(L))
        else:
            logits = torch.from_numpy(rng.standard_normal(L))
            p = torch.softmax(logits, 0).to(torch.float32).numpy()
        if 2 * float(p.max()) < float(p.sum()):  # not dominant: the solver has real work
            out.append(p)
    return out


def timed(f, *args):
    t0 = time.perf_counter()
    r = f(*args)
    return time.perf_counter() - t0, r


def limbs(w: list[int]) -> int:
    t = sum(partition.compress(w))
    return 1 if t < 2**62 else -(-(t.bit_length() + 1) // partition.LIMB_BITS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="L = 24, 32, 40 and fewer rows")
    ap.add_argument("--rows", type=int, default=None, help="rows per (L, kind); default 3 (quick: 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wide", action="store_true",
                    help="also time one L = 48 row with ~1000 significant bits (worst case, ~1.3 GiB)")
    args = ap.parse_args(argv)
    n = args.rows or (2 if args.quick else 3)
    Ls = [24, 32, 40] if args.quick else list(range(24, 49, 4))
    kinds = ["dirichlet-f64", "softmax-f32"]
    rng = np.random.default_rng(args.seed)

    t_jit, _ = timed(partition.warm_up)
    print(f"JIT warm-up (compile or load cache, limb counts K = 1, 2, 3): {t_jit:.2f} s\n")

    print("brute force vs meet in the middle, same rows (L ≤ 20 is brute force's limit)")
    print(f"{'L':>3} {'kind':<14} {'bits':>5} {'brute path':<11} {'brute ms':>9} {'mitm ms':>9} {'ratio':>8}")
    for L in (16, 20):
        for kind in kinds:
            for p in rows(kind, L, 1 if L == 20 else n, rng):
                w = [x for x in integer_weights(p) if x]
                tb, mb = timed(best_mask_bruteforce, w)
                tm, mm = timed(partition.best_mask_mitm, w)
                db, dm = (abs(a - b) for a, b in (subset_sums(w, mb), subset_sums(w, mm)))
                if db != dm:
                    raise SystemExit(f"MISMATCH at L={L} {kind}: brute {db} mitm {dm}")
                path = "int64" if max(w) < 2**62 // len(w) else "python-int"
                print(f"{L:>3} {kind:<14} {sum(w).bit_length():>5} {path:<11} {tb * 1e3:>9.2f} {tm * 1e3:>9.3f} {tb / tm:>8.1f}")

    print("\ntheta_exact on non-dominant rows (mitm: Horowitz–Sahni, ss: Schroeppel–Shamir)")
    print(f"{'L':>3} {'kind':<14} {'rows':>4} {'bits':>5} {'limbs':>5} {'method':>6} {'median ms':>10} {'max ms':>9}")
    for L in Ls:
        for kind in kinds:
            ts, bits, ks, methods = [], [], [], set()
            for p in rows(kind, L, n, rng):
                w = integer_weights(p)
                t, res = timed(theta_exact, p)
                if res.method not in ("mitm", "ss"):
                    raise SystemExit(f"expected the partition solver at L={L}, got {res.method}")
                ts.append(t)
                bits.append(sum(w).bit_length())
                ks.append(limbs(w))
                methods.add(res.method)
            print(f"{L:>3} {kind:<14} {len(ts):>4} {max(bits):>5} {max(ks):>5} {'/'.join(sorted(methods)):>6} "
                  f"{statistics.median(ts) * 1e3:>10.2f} {max(ts) * 1e3:>9.2f}")
    if args.wide:
        # 40 atoms with exponents spread evenly over 1060 bits (no gap to compress) + 8 atoms ~ 1
        p = [float(rng.uniform(0.5, 1)) * 2.0 ** -float(e) for e in np.linspace(0, 1060, 40)]
        p += [float(x) for x in rng.uniform(0.5, 1, 8)]
        w = integer_weights(p)
        t, res = timed(theta_exact, p)
        print(f"\nwide row L = 48: {sum(w).bit_length()} bits, {limbs(w)} limbs after compression, "
              f"method {res.method}, {t:.2f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of this process: {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
