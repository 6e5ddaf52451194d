"""Certification throughput as ratios to reading the rows, all measured in this one run.

1. ``certify_batch`` (numba, CPU) vs ``R.sum(axis=1)`` on the same float64 softmax rows,
   L = 64, 256, 1024, 4096, with the share of rows closed at tolerance 1e-6: on one thread
   (its wall time is its CPU cost) and on all of numba's threads (forced, whatever the
   machine's load; a CPU-time ratio is not shown: OpenMP workers spin after a region, and
   the kernel charges their time late);
2. the ``certify`` CLI end to end on a float32 softmax ``.npy`` vs a fresh process that
   loads the file and sums its rows;
3. ``verify`` on that certificate folder vs the same load-and-sum process;
4. with ``--spreads`` (or ``--only-spreads``, alone): certify_batch on one thread for the
   logit spreads 0.3, 1.0 (diffuse rows like those near initialisation), 2.5 and 5.0
   (peaked), L = 64…4096, with the share of rows closed and the share stage A leaves to
   stage B (``--minima``: beside each median of pairs, the ratio of the minima of the same
   runs);
5. with ``--floor`` (alone): stage A on one thread beside the same stage A with its search
   skipped (every row forced dominant, for timing only), both over the row sum: the
   trusted steps' share, which no change of search can remove;
6. with ``--causal`` (alone): certify_batch on one thread on causally masked rows — row
   length T, each row attending to a random prefix (the rest exact zeros), as in a decoder
   at initialisation — and on short full rows (L = 8, 16, 32), where far more rows need
   stage B's upper bounds than at L ≥ 64;
7. with ``--threads`` (alone): certify_batch's own speed-up, one thread against all of
   numba's threads (forced), runs alternated and medians compared, beside the speed-ups of
   two compute-only parallel loops measured in the same run, before and after: they touch
   no memory, so where they fall short of the thread count the machine's cores were not
   free, and the certify figure of that run says nothing about the kernel.  One runs a
   single dependent chain a task (latency-bound: it reads 2 even on two hyperthreads of
   one core), the other eight independent chains (it fills a core's floating-point units,
   so two threads sharing one core read about 1).

Usage: python benchmarks/certify_throughput.py [--elems N] [--cli-rows N | --gib] [--skip-cli]
       [--stages] [--spreads | --only-spreads [--minima] | --floor | --causal | --threads] [--reps N]
Wall-clock times.  Kernel table: each certify run is paired with a row sum timed just
before it, back to back after an untimed sum (its rows warm in cache: the strictest
yardstick), and the median of 15 such ratios is shown; a shared machine's slow spells then
hit both sides of a ratio alike (a best-of-N of each side, taken at different moments,
swung from 7x to 13x between runs at L = 64).  The CLI rows: best of 3.  The load (and how
many other tasks are running at that moment) is printed with the table, because other
processes on the machine change every ratio.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

from certificates.pipeline import certify_batch
from certificates import threads
from numerics import theta_fused as tf


def rows(n, L, seed=0, dtype=np.float64, spread=2.5):
    # softmax of normal logits; 2.5: an attention-like spread (the goal's rows), smaller is
    # more diffuse (rows near initialisation), larger more peaked
    lg = np.random.default_rng(seed).normal(size=(n, L)) * spread
    e = np.exp(lg - lg.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).astype(dtype)


def best_of(fn, reps=3, clock=time.perf_counter):
    t = []
    for _ in range(reps):
        t0 = clock()
        fn()
        t.append(clock() - t0)
    return min(t)


def paired_times(fns, yard, reps=15, clock=time.perf_counter):
    """([yard's times], [fn's times]) for each fn: each fn run paired with a yard run timed
    just before it (after an untimed one, so its data are warm); the fns take turns
    (a, b, c, a, b, c, …)."""
    r = [([], []) for _ in fns]
    for _ in range(reps):
        for k, fn in enumerate(fns):
            yard()
            t0 = clock()
            yard()
            t1 = clock()
            fn()
            t2 = clock()
            r[k][0].append(t1 - t0)
            r[k][1].append(t2 - t1)
    return r


def paired_ratios(fns, yard, reps=15, clock=time.perf_counter):
    """Median over reps of fn's time / yard's time, each fn run paired with a yard run
    timed just before it (:func:`paired_times`)."""
    return [float(np.median(np.divide(f, y))) for y, f in paired_times(fns, yard, reps, clock)]


def ratio_of_minima(y, f):
    """The fastest fn run over the fastest yard run, from the same paired runs.  A slow
    spell only adds time, so each minimum is that side's undisturbed cost; beside the
    median of pairs it shows whether the two sides felt a run's spells alike: where the two
    figures part (on the shared machines, by up to a factor 1.9 at L ≥ 256), the memory-bound row
    sum and the compute-bound certify were slowed differently, and neither figure alone is
    the machine's."""
    return float(np.min(f) / np.min(y))


def load():
    others = threads.others_running()
    return ("load average %.2f %.2f %.2f on %d cores" % (*os.getloadavg(), threads.cpu_count())
            + ("" if others is None else f"; {others} other tasks running now"))


def kernel_table(elems, stages=False):
    certify_batch(rows(64, 64), 1e-6)           # compile / load the numba kernels outside the timing
    nt = numba.get_num_threads()
    print(f"{'L':>6} {'rows':>7} {'closed':>9} {'1 thread':>9} {f'{nt} threads':>10} {'sum ns/row':>11}"
          f"  regimes(dom/closed/open)   (ratios: certify_batch time / R.sum(axis=1) time)")
    for L in (64, 256, 1024, 4096):
        n = max(16, elems // L)
        R = rows(n, L, seed=L)

        def one():
            numba.set_num_threads(1)
            try:
                certify_batch(R, 1e-6)
            finally:
                numba.set_num_threads(nt)

        def every():                # the threaded kernels whatever the load (printed above)
            threads.LOAD_AWARE, old = False, threads.LOAD_AWARE
            try:
                certify_batch(R, 1e-6)
            finally:
                threads.LOAD_AWARE = old

        # each run is paired with a row sum timed just before it, its rows warm in cache
        # from an untimed sum (the strictest yardstick: a sum right after certify measured
        # ~1.5x slower)
        t_s = best_of(lambda: R.sum(axis=1), reps=REPS)      # for the ns/row column
        runs = [one, every]
        if stages:                 # stage A alone (the fused pass), one thread, paired too
            M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
            force = np.full(n, -1, np.int8)

            def stage_a():
                numba.set_num_threads(1)
                try:
                    tf.stage_a(R, force, 3, 5e-4, 1e-6, M, cols, st)
                finally:
                    numba.set_num_threads(nt)
            runs.append(stage_a)
        t = paired_ratios(runs, lambda: R.sum(axis=1), reps=REPS)
        reg = np.bincount(certify_batch(R, 1e-6)["regime"], minlength=3)
        closed = 1 - reg[2] / n
        print(f"{L:>6} {n:>7} {100 * closed:>8.2f}% {t[0]:>8.1f}x {t[1]:>9.1f}x"
              f" {t_s / n * 1e9:>11.0f}  {reg.tolist()}", flush=True)
        if stages:
            print(f"{'':>6} of which stage A (1 thread) {t[2]:5.1f}x", flush=True)


def _spread_cells(elems, width, cell):
    """One thread, each L of SPREAD_LS a line and each spread of SPREADS a cell of that
    line: cell(R, n, L) formats the cell for the softmax rows R (n × L) of that spread."""
    nt = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for L in SPREAD_LS:
            n = max(16, elems // L)
            cells = [cell(rows(n, L, seed=L, spread=sp), n, L) for sp in SPREADS]
            print(f"{L:>6} " + " ".join(f"{c:>{width}}" for c in cells), flush=True)
    finally:
        numba.set_num_threads(nt)


def spread_table(elems, reps=7, clock=time.perf_counter, minima=False):
    """Every spread, one thread, L = 64…4096: certify_batch time / row-sum time (the median
    of ``reps`` paired runs, as in the kernel table; with ``minima`` also the ratio of the
    minima of those same runs, :func:`ratio_of_minima`), the share of rows closed at 1e-6
    and the share stage A leaves open for stage B."""
    what = "thread CPU time" if clock is time.thread_time else "wall time"
    stat = f"median of {reps} paired ratios" + (", then the ratio of their minima" if minima else "")
    width = 31 if minima else 24
    print(f"\nLogit spreads, one thread, {what} ({stat}; closed %, stage B %):\n{'L':>6} "
          + " ".join(f"{f'spread {sp}':>{width}}" for sp in SPREADS))

    def cell(R, n, L):
        y, f = paired_times([lambda: certify_batch(R, 1e-6)], lambda: R.sum(axis=1), reps=reps, clock=clock)[0]
        t = float(np.median(np.divide(f, y)))
        reg = np.bincount(certify_batch(R, 1e-6)["regime"], minlength=3)
        M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
        tf.stage_a(R, np.full(n, -1, np.int8), 3, 5e-4, 1e-6, M, cols, st)
        lo = f" {ratio_of_minima(y, f):>5.1f}x" if minima else ""
        return f"{t:>6.1f}x{lo} ({100 * (1 - reg[2] / n):6.2f}%, {100 * np.mean(st == 2):4.1f}%)"

    _spread_cells(elems, width, cell)


def causal_rows(n, T, seed=0, spread=2.5):
    # softmax over a random prefix 0..k of each row (k uniform in 0..T−1), zeros after it
    rng = np.random.default_rng(seed)
    lg = rng.normal(size=(n, T)) * spread
    keep = np.arange(T)[None, :] <= rng.integers(0, T, size=n)[:, None]
    e = np.where(keep, np.exp(lg - lg.max(1, keepdims=True)), 0.0)
    return e / e.sum(1, keepdims=True)


CAUSAL_TS = (64, 256, 1024)
SHORT_LS = (8, 16, 32)


def causal_table(elems, reps=7):
    """One thread: certify_batch over the row sum (median of ``reps`` paired ratios) on
    causally masked rows of length T and on short full rows, every spread, with the share
    of rows closed at 1e-6 and the share stage A leaves to stage B."""
    print(f"\nCausal and short rows, one thread, wall time (median of {reps} paired ratios; closed %, "
          f"stage B %):\n{'rows':>12} " + " ".join(f"{f'spread {sp}':>24}" for sp in SPREADS))
    nt = numba.get_num_threads()
    numba.set_num_threads(1)

    def cell(R):
        n, L = R.shape
        t = paired_ratios([lambda: certify_batch(R, 1e-6)], lambda: R.sum(axis=1), reps=reps)[0]
        reg = np.bincount(certify_batch(R, 1e-6)["regime"], minlength=3)
        M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
        tf.stage_a(R, np.full(n, -1, np.int8), 3, 5e-4, 1e-6, M, cols, st)
        return f"{t:>6.1f}x ({100 * (1 - reg[2] / n):6.2f}%, {100 * np.mean(st == 2):4.1f}%)"

    try:
        for T in CAUSAL_TS:
            n = max(16, elems // T)
            cells = [cell(causal_rows(n, T, seed=T, spread=sp)) for sp in SPREADS]
            print(f"{f'causal {T}':>12} " + " ".join(f"{c:>24}" for c in cells), flush=True)
        for L in SHORT_LS:
            n = max(16, (elems // 4) // L)
            cells = [cell(rows(n, L, seed=L, spread=sp)) for sp in SPREADS]
            print(f"{f'L = {L}':>12} " + " ".join(f"{c:>24}" for c in cells), flush=True)
    finally:
        numba.set_num_threads(nt)


@numba.njit(parallel=True, cache=True)
def _alu(n, out):
    # a dependent multiply-add chain per task: no memory traffic, so its speed-up is the
    # share of the cores this process really got
    for t in numba.prange(out.shape[0]):
        x = 1.0 + t
        for _ in range(n):
            x = x * 1.0000001 + 1e-9
        out[t] = x


@numba.njit(parallel=True, cache=True)
def _alu_wide(n, out):
    # eight independent chains per task, which keep a core's floating-point units busy: two
    # threads that the host runs on the two hyperthreads of one core share those units, so
    # this speed-up falls towards 1 there, where the one-chain loop above still reads 2
    for t in numba.prange(out.shape[0]):
        x0 = 1.0 + t
        x1, x2, x3, x4, x5, x6, x7 = x0 + 1, x0 + 2, x0 + 3, x0 + 4, x0 + 5, x0 + 6, x0 + 7
        for _ in range(n):
            x0 = x0 * 1.0000001 + 1e-9
            x1 = x1 * 1.0000001 + 1e-9
            x2 = x2 * 1.0000001 + 1e-9
            x3 = x3 * 1.0000001 + 1e-9
            x4 = x4 * 1.0000001 + 1e-9
            x5 = x5 * 1.0000001 + 1e-9
            x6 = x6 * 1.0000001 + 1e-9
            x7 = x7 * 1.0000001 + 1e-9
        out[t] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


@numba.njit(parallel=True, cache=True)
def _par_sum(R, out):
    # the row sum on numba's threads: how far the rows' memory traffic alone scales
    for i in numba.prange(R.shape[0]):
        s = 0.0
        for j in range(R.shape[1]):
            s += R[i, j]
        out[i] = s


def floor_table(elems, reps=15):
    """Stage A's floor, one thread, L = 64…4096, every spread: stage A as certify runs it,
    and stage A with every row's dominance forced (force = 1, so each row takes the
    singleton: the max, the extraction, the exact sums, the dominance terms and the outward
    rounding, and no search), each the median of ``reps`` ratios over a warm row sum timed
    just before it, runs alternated.  The forced run's bounds are wrong for rows that are
    not dominant and are thrown away: it times the trusted steps, the part of stage A that
    no change of search can remove."""
    print(f"\nStage A and its floor (no search), one thread, wall time (median of {reps} paired ratios):\n"
          f"{'L':>6} " + " ".join(f"{f'spread {sp}':>19}" for sp in SPREADS) + "   (stage A / floor)")

    def cell(R, n, L):
        M, cols, st = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
        free, forced = np.full(n, -1, np.int8), np.full(n, 1, np.int8)
        full, floor = paired_ratios([lambda: tf.stage_a(R, free, 3, 5e-4, 1e-6, M, cols, st),
                                     lambda: tf.stage_a(R, forced, 3, 5e-4, 1e-6, M, cols, st)],
                                    lambda: R.sum(axis=1), reps=reps)
        return f"{full:>6.1f}x / {floor:>4.1f}x"

    _spread_cells(elems, 19, cell)


def thread_table(elems, reps=9):
    """certify_batch, one thread against all of numba's threads (forced, whatever the
    load): the median wall time of each over ``reps`` alternated runs, and their ratio;
    beside it the same ratio for a parallel row sum of the same rows (what their memory
    traffic allows), and first and last for a compute-only loop (the cores' ceiling)."""
    nt = numba.get_num_threads()
    out = np.empty(8 * nt)

    def ceiling(f):
        t = {1: [], nt: []}
        for _ in range(reps):
            for k in (1, nt):
                numba.set_num_threads(k)
                t0 = time.perf_counter()
                f(400_000, out)
                t[k].append(time.perf_counter() - t0)
        numba.set_num_threads(nt)
        return float(np.median(t[1]) / np.median(t[nt]))

    def ceilings():
        return (f"compute-only loops, speed-up on {nt} threads: {ceiling(_alu):.2f} (one dependent "
                f"chain a task), {ceiling(_alu_wide):.2f} (eight independent chains)")

    _alu(10, out)
    _alu_wide(10, out)
    print(f"\nThreads: certify_batch on 1 and on {nt} threads (median of {reps} alternated runs each)\n"
          f"{ceilings()}  (the machine's ceilings now)")
    print(f"{'L':>6} {'spread':>7} {'1 thread':>10} {f'{nt} threads':>11} {'speed-up':>9} {'row sum speed-up':>17}")
    old = threads.LOAD_AWARE
    threads.LOAD_AWARE = False
    try:
        for L in SPREAD_LS:
            n = max(16, elems // L)
            for sp in (0.3, 2.5):
                R = rows(n, L, seed=L, spread=sp)
                sums = np.empty(n)
                certify_batch(R, 1e-6)
                _par_sum(R, sums)
                t = {(f, k): [] for f in (0, 1) for k in (1, nt)}
                for _ in range(reps):
                    for k in (1, nt):
                        numba.set_num_threads(k)
                        t0 = time.perf_counter()
                        certify_batch(R, 1e-6)
                        t1 = time.perf_counter()
                        _par_sum(R, sums)
                        t[0, k].append(t1 - t0)
                        t[1, k].append(time.perf_counter() - t1)
                numba.set_num_threads(nt)
                a, b = (float(np.median(t[0, k])) for k in (1, nt))
                rs = float(np.median(t[1, 1]) / np.median(t[1, nt]))
                print(f"{L:>6} {sp:>7} {1e3 * a:>8.2f}ms {1e3 * b:>9.2f}ms {a / b:>8.2f}x {rs:>16.2f}x",
                      flush=True)
    finally:
        threads.LOAD_AWARE = old
        numba.set_num_threads(nt)
    print(f"{ceilings()}  (again, after)")


SPREADS = (0.3, 1.0, 2.5, 5.0)
SPREAD_LS = (64, 256, 1024, 4096)
REPS = 15               # paired runs per ratio in the kernel table (the median is shown)


# The child reports its own peak RSS (VmHWM of its address space, which exec resets) at
# exit: a forked child's ru_maxrss would start from this benchmark's footprint instead.
_HWM = ("import atexit, runpy, sys\n"
        "def _hwm():\n"
        "    try:\n"
        "        kb = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
        "    except (OSError, IndexError):\n"
        "        kb = '-1'\n"
        "    sys.stderr.write('\\nPEAK-KB ' + kb + '\\n')\n"
        "atexit.register(_hwm)\n"
        "sys.argv = sys.argv[1:]\n"
        "if sys.argv[0] == '-c':\n"
        "    sys.argv = sys.argv[1:]\n"
        "    exec(compile(sys.argv[0], '<read>', 'exec'))\n"
        "else:\n"
        "    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def _run(args):
    """(wall seconds, peak RSS in bytes or None) of one fresh ``python`` process running
    ``-m MODULE …`` or ``-c CODE …``."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _HWM, *(args[1:] if args[0] == "-m" else args)],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    kb = int(p.stderr.rsplit("PEAK-KB ", 1)[1].split()[0]) if "PEAK-KB " in p.stderr else -1
    return dt, (kb * 1024 if kb >= 0 else None)


def cli_table(n, L=1024, reps=2):
    with tempfile.TemporaryDirectory(prefix="certify-bench-") as d:
        path = os.path.join(d, "rows.npy")
        step = 8192
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, L))
        for s in range(0, n, step):                # written in pieces: bounded memory here too
            out[s:s + step] = rows(min(step, n - s), L, seed=s, dtype=np.float32)
        out.flush()
        del out
        gib = n * L * 4 / 2**30
        read = ("import numpy as np, sys; x = np.load(sys.argv[1]); "
                "s = x.sum(axis=1, dtype=np.float64); print(s.shape[0])")
        read_runs = [_run(["-c", read, path]) for _ in range(reps)]
        od = [os.path.join(d, f"out{r}") for r in range(reps)]
        cert_runs = [_run(["-m", "certificates", "certify", path, "-o", o, "--no-progress"]) for o in od]
        ver = _run(["-m", "certificates", "verify", od[0], "--no-progress"])
        t_read = min(t for t, _ in read_runs)
        print(f"\nCLI on {n} x {L} float32 softmax rows ({gib:.3f} GiB .npy), fresh processes "
              f"(best of {reps} wall; peak RSS of that process):")
        for name, (t, rss) in (("load + row sums", min(read_runs)), ("certify", min(cert_runs)),
                               ("verify", ver)):
            ratio = "" if name.startswith("load") else f"   ratio {t / t_read:6.1f}x"
            mem = f"{rss / 2**20:7.0f} MiB" if rss else "    n/a"
            print(f"  {name:<18}{t:8.2f} s   peak RSS {mem}{ratio}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elems", type=int, default=1 << 20, help="float64 entries per L (default 2^20)")
    ap.add_argument("--cli-rows", type=int, default=16384, help="rows of L = 1024 for the CLI run (default 16384 = 64 MiB)")
    ap.add_argument("--gib", action="store_true", help="the 1 GiB CLI case: 262144 rows of L = 1024")
    ap.add_argument("--skip-cli", action="store_true", help="only the certify_batch table")
    ap.add_argument("--stages", action="store_true", help="also give stage A's share of the one-thread time")
    ap.add_argument("--spreads", action="store_true",
                    help="also time other logit spreads (diffuse rows near initialisation, peaked rows), one thread")
    ap.add_argument("--only-spreads", action="store_true",
                    help="only the spread table (no kernel table, no CLI): the quick check")
    ap.add_argument("--floor", action="store_true",
                    help="only the floor table: stage A on one thread beside stage A with the search "
                         "skipped (every row forced dominant, timing only), over the same row sum: how "
                         "much of stage A a change of search could remove")
    ap.add_argument("--causal", action="store_true",
                    help="only the causal table: causally masked rows (random prefixes of T = 64, 256, "
                         "1024, zeros after) and short full rows (L = 8, 16, 32), one thread, every spread")
    ap.add_argument("--reps", type=int, default=7, help="paired runs per spread-table ratio (default 7)")
    ap.add_argument("--thread-time", action="store_true",
                    help="time the one-thread spread table by the calling thread's CPU time (numba's serial "
                         "kernels run on it): on a shared, oversubscribed machine this leaves out the time "
                         "other processes hold the core, which wall time counts")
    ap.add_argument("--minima", action="store_true",
                    help="in the spread table, also the ratio of the minima of the same paired runs "
                         "(fastest certify over fastest row sum): where it parts from the median of "
                         "pairs, slow spells of a shared machine hit the row sum and certify unlike")
    ap.add_argument("--threads", action="store_true",
                    help="only the thread table: certify_batch on one thread against all of numba's, with "
                         "a compute-only loop's speed-up as the machine's ceiling at that moment")
    a = ap.parse_args()
    print(load())
    if a.floor:
        certify_batch(rows(64, 64), 1e-6)
        floor_table(a.elems, a.reps)
        print(load())
        return
    if a.causal:
        certify_batch(rows(64, 64), 1e-6)
        causal_table(a.elems, a.reps)
        print(load())
        return
    if a.threads:
        certify_batch(rows(64, 64), 1e-6)
        thread_table(a.elems, max(a.reps, 3))
        print(load())
        return
    if a.only_spreads:
        certify_batch(rows(64, 64), 1e-6)
        spread_table(a.elems, a.reps, time.thread_time if a.thread_time else time.perf_counter, a.minima)
        print(load())
        return
    kernel_table(a.elems, a.stages)
    if a.spreads:
        spread_table(a.elems, a.reps, time.thread_time if a.thread_time else time.perf_counter, a.minima)
    if not a.skip_cli:
        cli_table(262144 if a.gib else a.cli_rows)
    print(load())


if __name__ == "__main__":
    main()
