"""The exact θ solver beside other exact number-partitioning solvers, on the same instances.

    python -m benchmarks.exact_peers [--quick] [--rows N] [--cap S] [--Ls 32,40,...] [--sweep]

(from the repository root; the peers come with ``pip install -e .[bench]``).

Instances: rows as in benchmarks/exact_theta.py (softmax of N(0, 1) logits rounded to
float32, and Dirichlet(1) in float64), and the same softmax rounded to bfloat16 (small
totals, many ties: where the peers can finish); dominant rows redrawn; turned into the exact
integers w (one power-of-two denominator, gcd removed).  Every solver gets the same w,
ours through the public theta_exact on the float row (so its time includes the exact
integer conversion).  Solvers, each in its own worker process with a wall-clock cap
(a worker past the cap is killed and the instance counted as a timeout):

  ours      numerics.theta.theta_exact (Schroeppel–Shamir for > 24 atoms)
  numpart   numberpartitioning.complete_karmarkar_karp (pure Python ints: exact)
  prtpy     prtpy.partitioning.complete_karmarkar_karp (float64 sums: run only when
            T < 2^53, where every sum is exact; "n/a" otherwise)
  cpsat     OR-Tools CP-SAT, one worker: maximise Σ w_i x_i subject to Σ w_i x_i ≤ ⌊T/2⌋
            (int64 model: run only when T < 2^53)

Every answer is a subset; its deviation |T − 2s| is recomputed here in exact integers.
A finished peer whose deviation differs from ours is a failure: printed in capitals, and
the exit status is 1.  Times are wall clock of the solve call inside the worker (start-up
and JIT warm-up excluded); the machine may be shared, so read the ratios of one run.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time

import numpy as np

PEERS = ("numpart", "prtpy", "cpsat")
FLOAT_EXACT = 2**53


# ----------------------------------------------------------------------------- workers

def _solver(name: str):
    """(applies(w) -> bool, solve(row, w) -> mask) for one solver, imported in its worker."""
    if name == "ours":
        from numerics import partition
        from numerics.theta import theta_exact
        partition.warm_up()
        return (lambda w: True), (lambda row, w: theta_exact(row).mask)
    if name == "numpart":
        from numberpartitioning import complete_karmarkar_karp

        def solve(row, w):
            last = None
            for last in complete_karmarkar_karp(list(w), return_indices=True):
                pass  # improving partitions; the last one is proved optimal
            return sum(1 << i for i in last.partition[0])
        return (lambda w: True), solve
    if name == "prtpy":
        import prtpy

        def solve(row, w):
            bins = prtpy.partition(algorithm=prtpy.partitioning.complete_karmarkar_karp, numbins=2,
                                   items=dict(enumerate(w)))
            return sum(1 << i for i in bins[0])
        return (lambda w: sum(w) < FLOAT_EXACT), solve
    if name == "cpsat":
        from ortools.sat.python import cp_model

        def solve(row, w):
            m = cp_model.CpModel()
            x = [m.NewBoolVar(f"x{i}") for i in range(len(w))]
            s = sum(int(c) * v for c, v in zip(w, x))
            m.Add(s <= sum(w) // 2)
            m.Maximize(s)
            sol = cp_model.CpSolver()
            sol.parameters.num_workers = 1
            sol.parameters.max_time_in_seconds = 3600.0  # the parent's cap decides
            if sol.Solve(m) != cp_model.OPTIMAL:
                raise RuntimeError("CP-SAT stopped without proving optimality")
            return sum(1 << i for i, v in enumerate(x) if sol.Value(v))
        return (lambda w: sum(w) < FLOAT_EXACT), solve
    raise ValueError(name)


def _worker(name: str, conn) -> None:
    applies, solve = _solver(name)
    conn.send("ready")
    while True:
        task = conn.recv()
        if task is None:
            return
        row, w = task
        if not applies(w):
            conn.send(("n/a", None, 0.0))
            continue
        t0 = time.perf_counter()
        try:
            mask = solve(row, w)
        except Exception as e:  # a peer's own failure is reported, not hidden
            conn.send(("error", f"{type(e).__name__}: {e}", time.perf_counter() - t0))
            continue
        conn.send(("ok", mask, time.perf_counter() - t0))


class Runner:
    """One solver in a worker process; a call past the cap kills it (a new one starts lazily)."""

    def __init__(self, name: str, cap: float):
        self.name, self.cap, self.proc, self.conn = name, cap, None, None

    def _start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(self.name, child), daemon=True)
        self.proc.start()
        if not self.conn.poll(600) or self.conn.recv() != "ready":
            raise SystemExit(f"exact_peers: the {self.name} worker did not start")

    def run(self, row, w):
        if self.proc is None:
            self._start()
        self.conn.send((row, w))
        if self.conn.poll(self.cap):
            return self.conn.recv()
        self.proc.kill()
        self.proc.join()
        self.proc = None
        return "timeout", None, self.cap

    def close(self):
        if self.proc is not None:
            self.conn.send(None)
            self.proc.join(5)
            if self.proc.is_alive():
                self.proc.kill()


# ----------------------------------------------------------------------------- the table

def rows(kind: str, L: int, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """exact_theta's rows, plus softmax-bf16 (8-bit mantissas: small totals, many ties)."""
    if kind != "softmax-bf16":
        from benchmarks.exact_theta import rows as theta_rows
        return theta_rows(kind, L, n, rng)
    import torch
    out = []
    while len(out) < n:
        p = torch.softmax(torch.from_numpy(rng.standard_normal(L)), 0).to(torch.bfloat16).double().numpy()
        if 2 * float(p.max()) < float(p.sum()):
            out.append(p)
    return out


def deviation(w, mask) -> int:
    s = sum(x for i, x in enumerate(w) if mask >> i & 1)
    return abs(sum(w) - 2 * s)


def cell(times, status, n) -> str:
    if status.count("n/a") == n:
        return "n/a"
    done = [t for t, s in zip(times, status) if s == "ok"]
    out = []
    if done:
        out.append(f"{statistics.median(done) * 1e3:.1f}")
    if len(done) < n:
        bad = {s for s in status if s != "ok"}
        out.append(f"{n - len(done)}/{n} " + "/".join(sorted(bad)))
    return " ".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="L = 24, 32, 48; 1 row; cap 5 s")
    ap.add_argument("--rows", type=int, default=None, help="rows per (kind, L); default 3")
    ap.add_argument("--cap", type=float, default=None, help="seconds per solve; default 10")
    ap.add_argument("--Ls", default=None, help="comma-separated lengths; default 16,24,32,40,48,56,64,80,128")
    ap.add_argument("--kinds", default="softmax-f32,dirichlet-f64,softmax-bf16")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--sweep", default="256,512,1024,2048,4096",
                    help="longer lengths timed for ours alone (the largest L within the cap); '' for none")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from numerics.theta import integer_weights

    n = args.rows or (1 if args.quick else 3)
    cap = args.cap or (5.0 if args.quick else 10.0)
    Ls = [int(x) for x in (args.Ls or ("24,32,48" if args.quick else "16,24,32,40,48,56,64,80,128")).split(",")]
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            raise SystemExit(f"exact_peers: unknown peer {p!r} (known: {', '.join(PEERS)})")
    runners = {name: Runner(name, cap) for name in ["ours"] + peers}
    rng = np.random.default_rng(args.seed)
    failures = []
    print(f"cap {cap:g} s per solve, {n} rows per line; times are medians in ms over the rows "
          f"that finished, (×) = peer median / our median on the same rows")
    head = f"{'kind':<14} {'L':>4} {'bits':>5} {'ours ms':>9} {'ours max':>9}"
    print(head + "".join(f" {p:>22}" for p in peers) + "  agreement")
    try:
        for kind in args.kinds.split(","):
            for L in Ls:
                ours_t, ours_s, bits = [], [], []
                res = {p: ([], []) for p in peers}
                agree = 0
                for row in rows(kind, L, n, rng):
                    w = integer_weights(row)
                    bits.append(sum(w).bit_length())
                    st, mask, t = runners["ours"].run(row, w)
                    ours_t.append(t)
                    ours_s.append(st)
                    d_ours = deviation(w, mask) if st == "ok" else None
                    all_ok = True
                    for p in peers:
                        st_p, mask_p, t_p = runners[p].run(row, w)
                        res[p][0].append(t_p)
                        res[p][1].append(st_p)
                        if st_p == "ok" and d_ours is not None and deviation(w, mask_p) != d_ours:
                            all_ok = False
                            failures.append(f"{kind} L={L}: {p} deviation {deviation(w, mask_p)}, "
                                            f"ours {d_ours}")
                    agree += all_ok and d_ours is not None
                line = f"{kind:<14} {L:>4} {max(bits):>5} {cell(ours_t, ours_s, n):>9} "
                line += f"{max(ours_t) * 1e3:>9.1f}" if all(s == "ok" for s in ours_s) else f"{'—':>9}"
                for p in peers:
                    ts, ss = res[p]
                    c = cell(ts, ss, n)
                    both = [(a, b) for a, b, s, so in zip(ts, ours_t, ss, ours_s) if s == so == "ok"]
                    if both:
                        r = statistics.median(a for a, _ in both) / statistics.median(b for _, b in both)
                        c += f" ({r:.0f}×)" if r >= 10 else f" ({r:.2g}×)"
                    line += f" {c:>22}"
                note = "" if all(s == "ok" for s in ours_s) else "  (ours past the cap)"
                print(line + f"  {agree}/{n}{note}", flush=True)
        if args.sweep:
            print(f"\nours alone at longer L (cap {cap:g} s): max ms over {n} rows")
            for kind in args.kinds.split(","):
                largest = None
                for L in (int(x) for x in args.sweep.split(",")):
                    ts, ok = [], True
                    for row in rows(kind, L, n, rng):
                        st, _, t = runners["ours"].run(row, integer_weights(row))
                        ts.append(t)
                        ok = ok and st == "ok"
                    print(f"{kind:<14} {L:>5} {max(ts) * 1e3:>10.1f}" + ("" if ok else "  timeout"), flush=True)
                    if ok:
                        largest = L
                print(f"{kind}: largest swept L with every row within the cap: {largest}")
    finally:
        for r in runners.values():
            r.close()
    if failures:
        print("\nDISAGREEMENT WITH A PEER (an exact answer differs):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
