"""The fused certify kernels against exact arithmetic (C4, C5, C7) and across backends."""
import os
from fractions import Fraction

import numba
import numpy as np
import pytest
import torch

from certificates import threads as th
from certificates.pipeline import certify_batch
from certificates.verify import check_row
from numerics import theta_kernels as tk
from numerics import theta_refine as tr
from numerics import trusted
from numerics.theta import theta_exact, theta_of_mask

KEYS = ("theta_lo", "theta_hi", "gap_lo", "gap_hi", "p_max", "row_sum")


def _softmax(seed, n, L, scale):
    lg = np.random.default_rng(seed).normal(size=(n, L)) * scale
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _near_perfect(seed, n, L):
    # integer weights over 2^40 whose best split is off by d ∈ {0, 1, 2}: θ = 1 − tiny
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = rng.integers(1, 2**40, size=L // 2)
        b = rng.integers(1, 2**40, size=L - L // 2 - 1)
        fix = int(a.sum()) - int(b.sum()) + int(rng.integers(0, 3))
        w = np.concatenate([a, b, [abs(fix) + 1]]).astype(np.float64)
        out.append(w * 2.0**-40)
    return np.array(out)


def _oracle_rows():
    rng = np.random.default_rng(0)
    parts = [_softmax(1, 30, 14, 3.0), _softmax(2, 30, 20, 0.3), _near_perfect(3, 30, 16),
             rng.dirichlet(np.full(18, 0.1), size=30), rng.dirichlet(np.full(12, 5.0), size=30),
             torch.softmax(torch.randn(20, 16, dtype=torch.float64) * 2, -1).to(torch.bfloat16).double().numpy()]
    R = np.concatenate([np.pad(p, ((0, 0), (0, 20 - p.shape[1]))) for p in parts])
    odd = np.full((4, 20), 1.0)                        # uniform rows of odd and even counts (C3)
    odd[0, 19:] = 0
    odd[1, 5:] = 0
    one_hot = np.zeros((3, 20))
    one_hot[:, 3] = 1.0
    one_hot[0, 7], one_hot[1, 9], one_hot[2, 1] = 2.0**-60, 2.0**-1000, 2.0**-1074
    scaled = np.concatenate([R[:10] * 2.0**-1060, R[10:20] * 2.0**400, R[20:30] * 2.0**-700])
    tie = np.zeros((2, 20))
    tie[0, :3] = [0.5, 0.25, 0.25]                     # 2m = T exactly: dominant
    tie[1, :4] = [2.0**-1, 2.0**-2, 2.0**-2 + 2.0**-50, 0.0]    # 2m < T by 2^-50
    # atoms far below the extraction grid (their remainders are what the bound's e covers)
    deep = np.zeros((3, 20))
    deep[0, :3] = [1.0, 1.0, 2.0**-200]
    deep[1, :4] = [0.5, 0.25, 0.25, 2.0**-300]
    deep[2, :5] = [0.25, 0.25, 0.25, 0.25, 2.0**-60 + 2.0**-170]
    return np.concatenate([R, odd, one_hot, scaled, deep, tie])


@pytest.mark.parametrize("tol", [1e-6, 0.0])
def test_bounds_contain_exact_theta_and_verify_accepts(tol):
    R = _oracle_rows()
    c = certify_batch(R, tol)
    for i, row in enumerate(R):
        ex = theta_exact(row)
        lo, hi = Fraction(c["theta_lo"][i]), Fraction(c["theta_hi"][i])
        glo, ghi = Fraction(c["gap_lo"][i]), Fraction(c["gap_hi"][i])
        assert lo <= ex.theta <= hi, i
        assert glo <= ex.delta ** 2 <= ghi, i
        mask = sum(1 << j for j in range(R.shape[1]) if c["witness"][i, j])
        assert lo <= theta_of_mask(row, mask)
        rec = {k: float(c[k][i]) for k in KEYS}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        assert check_row(row, rec, Fraction(tol), 12) == [], i
    assert c["regime"][-2] == 0 and c["regime"][-1] != 0


def test_evaluator_parts_are_exact_up_to_the_stated_remainder():
    # (A1 + A2, T1 + T2) differ from the exact sums by ≤ L·u·σ₂ (module docstring)
    rng = np.random.default_rng(4)
    for scale in (1.0, 2.0**-700, 2.0**300):
        R = rng.dirichlet(np.full(37, 0.3), size=20) * scale
        M = (rng.random(R.shape) < 0.5).astype(np.uint8)
        L = R.shape[1]
        c = trusted.headroom_bits(L)
        for i in range(R.shape[0]):
            x = R[i]
            s1, s2, _ = trusted.splitters(trusted.max_bits(x.view(np.int64)) >> 52, c)
            q1, q2 = np.empty(L), np.empty(L)
            trusted.extract(x, s1, s2, q1, q2)
            A1, A2 = trusted.masked_sum2(q1, q2, M[i])
            T1, T2 = trusted.exact_sum2(q1, q2)
            exA = sum(Fraction(v) for v, b in zip(x, M[i]) if b)
            exT = sum(Fraction(v) for v in x)
            rem = Fraction(L) * Fraction(2) ** -53 * Fraction(s2)
            assert abs(Fraction(A1) + Fraction(A2) - exA) <= rem
            assert abs(Fraction(T1) + Fraction(T2) - exT) <= rem
            assert Fraction(T1) == sum(Fraction(v) for v in q1)      # no rounding at all


def test_evaluator_keeps_relative_precision_of_tiny_gaps():
    # θ = 1 − 2^-78: δ = 2^-39 must be bracketed within a factor 2, not rounded to 0
    R = np.array([[(2.0**39 + 1) / 2**40, (2.0**39 - 1) / 2**40, 0.0]])
    out = np.empty((1, 6))
    tk.evaluate(R, np.array([[1, 0, 0]], np.uint8), out)
    assert out[0, 0] < 1.0
    assert Fraction(out[0, 2]) <= Fraction(1, 2**78) <= Fraction(out[0, 3])
    assert out[0, 3] < 2.0**-77 and out[0, 2] > 2.0**-79


def test_topk_lemma_is_below_exact_delta_and_its_closing_witness_is_optimal():
    rng = np.random.default_rng(5)
    R = np.concatenate([rng.dirichlet(np.full(16, a), size=30) for a in (0.05, 0.3, 2.0)])
    M = np.zeros(R.shape, np.uint8)
    d_lo, closes = np.zeros(R.shape[0]), np.zeros(R.shape[0], np.bool_)
    tr.topk_lemma(R, 6, M, d_lo, closes)
    assert closes.any()
    for i, row in enumerate(R):
        ex = theta_exact(row)
        assert Fraction(d_lo[i]) <= ex.delta
        if closes[i]:
            mask = sum(1 << j for j in range(16) if M[i, j])
            assert abs(float(theta_of_mask(row, mask) - ex.theta)) < 1e-12


def test_diffuse_odd_rows_get_near_optimal_witnesses():
    # many comparable atoms, odd count (the committed rows left open by Karmarkar–Karp)
    rng = np.random.default_rng(6)
    R = np.exp(rng.normal(size=(40, 29)) * 0.3)
    R /= R.sum(1, keepdims=True)
    c = certify_batch(np.pad(R, ((0, 0), (0, 3))), 1e-6, exact_max=0)   # no exact solver
    gaps = [float(theta_exact(r).delta ** 2) for r in R]
    ours = 1 - c["theta_lo"]
    assert np.median(ours) < 1e-6 and np.all(ours <= np.maximum(20 * np.array(gaps), 1e-6))
    assert (c["regime"] == 1).all()          # the count lemma supplies the upper bounds


def test_results_do_not_depend_on_threads_or_row_order(monkeypatch):
    R = np.concatenate([_softmax(7, 300, 48, 2.5), _near_perfect(8, 20, 48)])
    perm = np.random.default_rng(9).permutation(R.shape[0])
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = certify_batch(R, 1e-6)                       # the serial kernels
        monkeypatch.setattr(th, "PAR_MIN", 0)            # the prange kernels, even for this batch
        monkeypatch.setattr(th, "LOAD_AWARE", False)     # ... whatever the machine's load
        numba.set_num_threads(max(1, min(2, numba.config.NUMBA_NUM_THREADS)))
        assert th.threaded(R) or numba.get_num_threads() == 1
        b = certify_batch(R[perm], 1e-6)
    finally:
        numba.set_num_threads(old)
    for k in (*KEYS, "regime", "witness"):
        assert np.array_equal(a[k][perm], b[k]), k


def _guess_rows():
    # stage A counts a row's big atoms (≥ max/16) before marking them when its total is
    # > 0.375·16·max at L = 64 (a guess that it is diffuse: > 16 big atoms); every way the
    # guess and the count can fall, at and around the cut, must give the same outputs
    rows = np.zeros((5, 64))
    rows[:, 0] = 1.0
    rows[0, 1:11] = 0.5                 # guessed (total 7.7), 11 big: not diffuse
    rows[0, 11:] = 2.0**-5
    rows[1, 1:16] = 0.9                 # guessed, 16 big, the cut itself: not diffuse
    rows[1, 16:] = 0.06
    rows[2, 1:16] = 0.9                 # guessed, 17 big, one exactly at max/16: diffuse
    rows[2, 16] = 2.0**-4
    rows[2, 17:] = 0.06
    rows[3, 1:18] = 2.0**-4             # not guessed (total 2.06), 18 big: diffuse
    rows[4, 1:17] = 2.0**-4             # not guessed, 17 big: diffuse, the fewest there are
    return rows


def _parity(device):
    R = np.concatenate([_softmax(10, 200, 64, 3.0), _softmax(11, 100, 64, 0.2), _guess_rows(),
                        _softmax(14, 1500, 64, 2.5),          # many take the backward first fit
                        np.pad(_near_perfect(12, 20, 30), ((0, 0), (0, 34))),
                        np.random.default_rng(13).dirichlet(np.full(64, 0.05), size=50),
                        np.full((2, 64), 0.25), np.eye(64)[:3] * 2.0**-1040,
                        # 2·max = total exactly: dominance undecided by the margin, settled
                        # exactly and redone (also after the lift of a tiny row)
                        np.pad([[2.0, 1.0, 1.0], [2.0**-1040, 2.0**-1041, 2.0**-1041]], ((0, 0), (0, 61)))])
    a = certify_batch(R, 1e-6)
    b = certify_batch(R, 1e-6, backend="torch", device=device)
    for k in (*KEYS, "regime", "witness"):
        assert np.array_equal(a[k], b[k]), k


def test_torch_backend_is_bit_identical_on_cpu():
    _parity("cpu")


@pytest.mark.gpu
def test_torch_backend_is_bit_identical_on_cuda():
    _parity("cuda")


@pytest.mark.slow
def test_committed_reproduction_rows_verify_and_mostly_close():
    # every committed row replays in verify's exact check; the open share is issue 13's goal
    # (≤ 0.1 %; 1.8 % before the count lemma closed the diffuse odd rows whose θ is truly
    # below 1 − 10⁻⁶, none since)
    import glob
    import os

    from certificates import inputs as io
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, "results", "small-cpu*", "seed-*", "rows", "step-*.npz")))
    if not paths:
        pytest.skip("no committed rows")
    R = np.concatenate([io.rows_float64(s, 0, s.n) for s in map(io.load_source, paths)])
    c = certify_batch(R, 1e-6)
    for i in range(0, R.shape[0], 7):
        rec = {k: float(c[k][i]) for k in KEYS}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        assert check_row(R[i], rec, Fraction(1e-6), 12) == [], i
    assert np.mean(c["regime"] == 2) <= 0.001


def test_stage_a_alone_closes_almost_all_softmax_rows():
    # the fused pass (greedy, prefix crossing, first fit both ways, C5) must leave under 1 %
    # of non-dominant attention-like rows for the slower second stage at tolerance 1e-6
    from numerics import theta_fused as tf
    R = _softmax(15, 3000, 64, 2.5)
    n, L = R.shape
    M, cols, state = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
    tf.stage_a(R, np.full(n, -1, np.int8), 3, 0.5e-3, 1e-6, M, cols, state)
    nd = state != 0
    assert nd.sum() > 1500 and not np.isin(state, (3, 4)).any()
    assert np.mean(1.0 - cols[0, nd] > 1e-6) < 0.01
    assert np.array_equal(state[nd] == 2, 1.0 - cols[0, nd] > 1e-6)


def test_serial_and_threaded_drivers_have_their_own_cache_entries():
    # numba's disk cache is keyed by function name and line: one Python function jitted
    # twice (serial and parallel) shares one entry, and the serial form then ran threaded code
    from numerics import theta_fused as tf
    for ser, par in ((tf._stage_a_ser, tf._stage_a_par), (tk._evaluate_ser, tk._evaluate_par)):
        assert ser.py_func is not par.py_func
        assert ser.py_func.__code__.co_firstlineno != par.py_func.__code__.co_firstlineno
        assert not ser.targetoptions.get("parallel") and par.targetoptions.get("parallel")


def _tie_heavy(rng, n):
    # small integers (many exact ties), the same at 1e-300 (sums round, so ordered sums
    # can become equal), and reals
    kind = rng.integers(0, 3)
    v = rng.integers(0, 4, n).astype(float) if kind < 2 else rng.random(n) ** 3
    return v * 1e-300 if kind == 1 else v


def test_top_indices_match_a_stable_sort():
    rng = np.random.default_rng(11)
    for _ in range(3000):
        x = _tie_heavy(rng, int(rng.integers(1, 90)))
        x[rng.random(x.shape[0]) < 0.2] = -0.0 if rng.random() < 0.5 else 0.0
        K = int(rng.integers(1, 20))
        assert np.array_equal(trusted.top_indices(x, K), np.argsort(-x, kind="stable")[:K])


def test_top_into_gives_the_reference_atoms_in_the_reference_order():
    # pass 1's faster selection must pick exactly trusted.top_indices' atoms (verify replays
    # the lemma on the K largest); one set of scratch arrays for every row, left dirty by
    # the row before, as in the kernel
    rng = np.random.default_rng(13)
    ti, tv, ci, tm = np.empty(400, np.int64), np.empty(400), np.empty(400, np.int64), np.empty(400)
    for t in range(4000):
        L = int(rng.integers(1, 300))
        x = _tie_heavy(rng, L) if t % 2 else _softmax(t, 1, L, float(rng.choice([0.3, 2.5, 8.0])))[0]
        x[rng.random(L) < 0.1] = 0.0
        K = int(rng.integers(1, min(L, 20) + 1))
        top = ti[:K]
        tr.top_into(x, top, tv, ci, tm)
        ref = trusted.top_indices(x, K)
        assert np.array_equal(top, ref) and np.array_equal(ref, np.argsort(-x, kind="stable")[:K])


def test_mitm_in_reused_scratch_matches_a_fresh_run():
    # pass 1 runs the split on one workspace for every row: what a row leaves there must not
    # change the next row's mask or D
    rng = np.random.default_rng(14)
    L, kk = 64, 12
    nf, ni = tr.mitm_scratch(L, kk)
    wf, wi = rng.random(nf) * 1e3, rng.integers(-5, 5, ni)          # garbage to start with
    for t in range(300):
        x = _softmax(t, 1, L, float(rng.choice([0.3, 2.5, 5.0])))[0] if t % 3 else _tie_heavy(rng, L)
        k = int(rng.integers(1, kk + 1))
        top = trusted.top_indices(x, k)
        m1, m2 = np.empty(L, np.uint8), np.empty(L, np.uint8)
        d1 = tr._mitm_row_on(x, top, 3, m1, wf, wi)
        d2 = tr._mitm_row(x, top, 3, m2)                              # its own fresh arrays
        assert np.array_equal(m1, m2) and (d1 == d2 or (np.isnan(d1) and np.isnan(d2)))


def test_half_sums_match_a_stable_sort_of_every_signed_sum():
    # each sum formed left to right (bit i set: +v_i), then sorted with ties by mask: the
    # merge-built lists must reproduce this exactly, ties included
    rng = np.random.default_rng(12)
    for _ in range(1500):
        v = _tie_heavy(rng, int(rng.integers(0, 9)))
        h = v.shape[0]
        sums = np.empty(1 << h)
        for t in range(1 << h):
            a = 0.0
            for i in range(h):
                a += v[i] if (t >> i) & 1 else -v[i]
            sums[t] = a
        o = np.argsort(sums, kind="stable")
        s, m = tr._half_sums(v)
        assert np.array_equal(m, o) and np.array_equal(s, sums[o])


def test_threads_are_used_only_while_a_core_is_free(monkeypatch):
    R = np.zeros((th.PAR_MIN // 64, 64))
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    monkeypatch.setattr(th, "cpu_count", lambda: 2)
    monkeypatch.setattr(th, "_others_recent", lambda: th.others_running())   # no caching here
    for others, expect in ((0, True), (1, False), (3, False)):
        monkeypatch.setattr(th, "others_running", lambda o=others: o)
        assert th.threaded(R) is expect
    monkeypatch.setattr(th, "cpu_count", lambda: 8)
    monkeypatch.setattr(th, "others_running", lambda: 6)
    assert th.threaded(R) and not th.threaded(R[:1])        # small batches stay serial


def test_the_load_reading_is_reused_for_a_few_milliseconds(monkeypatch):
    reads = iter([0, 3])
    monkeypatch.setattr(th, "others_running", lambda: next(reads))
    monkeypatch.setattr(th, "_SEEN", [-1.0, None])
    assert th._others_recent(max_age=60.0) == 0
    assert th._others_recent(max_age=60.0) == 0          # within max_age: not read again
    assert th._others_recent(max_age=0.0) == 3           # older than max_age: read again


def _most_others_seen(samples=50):
    # the largest count of other runnable tasks over a second (a busy task shows at once)
    import time
    seen = []
    for _ in range(samples):
        seen.append(th.others_running())
        time.sleep(0.02)
    return max(seen)


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs Linux /proc")
def test_another_busy_process_counts_as_load():
    import subprocess
    import sys
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert _most_others_seen() >= 1          # the child is runnable from its first loop
    finally:
        busy.kill()
        busy.wait()


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs Linux /proc")
def test_our_own_busy_helper_thread_counts_as_load():
    # certify hashes its rows on a helper thread beside the kernels: that thread keeps a
    # core busy, so it must count (numba's own OpenMP workers must not)
    import hashlib
    import threading
    buf = bytes(32 << 20)
    done = threading.Event()

    def hash_until_done():
        h = hashlib.sha256()
        while not done.is_set():
            h.update(buf)                        # releases the GIL for the whole buffer

    helper = threading.Thread(target=hash_until_done)
    helper.start()
    try:
        assert _most_others_seen() >= 1
    finally:
        done.set()
        helper.join()


def test_best_swap_finds_the_best_exchange():
    # the two-pointer scan over the row's stable order must reach the least |D − 2(x_i − x_j)|
    # over all i ∈ S, j ∉ S (x_j > 0), computed the same way, or keep D when none is smaller
    rng = np.random.default_rng(21)
    for _ in range(400):
        L = int(rng.integers(2, 40))
        x = _tie_heavy(rng, L)
        mk = (rng.random(L) < 0.5).astype(np.uint8)
        D = float(np.sum(np.where(mk == 1, x, -x)))
        o = np.argsort(x, kind="stable")
        m2 = mk.copy()
        got = tr._best_swap(x, m2, D, o, np.empty(L + 1, np.int64), np.empty(L + 1, np.int64))
        cands = [abs(D - 2.0 * (x[i] - x[j])) for i in range(L) for j in range(L)
                 if mk[i] == 1 and mk[j] == 0 and x[j] > 0]
        best = min([abs(D)] + cands)
        assert abs(got) == best or (best == abs(D) and got == D)
        if got != D:                                  # one atom left S, one joined
            assert (m2 != mk).sum() == 2 and m2.sum() == mk.sum()


def test_stage_b_skips_the_top_k_lemma_only_where_it_gives_nothing():
    # stage_b_rows skips the lemma when the float total is ≥ (K + 1)·max·(1 + 4L·2⁻⁵³):
    # there the exact lemma must return no bound and no witness
    rng = np.random.default_rng(31)
    K, hits = 12, 0
    for _ in range(3000):
        L = int(rng.integers(13, 80))
        x = rng.random(L) ** rng.uniform(0.2, 6.0)
        if rng.random() < 0.5:                    # rows right at the threshold T ≈ 13·max
            x[:13] = 1.0
            x[13:] = x[13:] / x[13:].sum() * float(rng.choice([1e-15, 1e-9, 1e-3]))
        T, m = float(np.sum(x)), float(x.max())
        if T >= (K + 1) * m * (1.0 + 4.0 * L * 2.0 ** -53):
            hits += 1
            d, closes = trusted.topk_row(x, K, np.zeros(L, np.uint8), np.empty(L), np.empty(L))
            assert d == 0.0 and not closes
    assert hits > 500


def test_stable_argsort_rows_matches_numpy_stable_sort():
    # the quicksort with its ties put in index order must equal a stable sort exactly,
    # also on rows of many ties, signed zeros and uniform rows (one long run)
    rng = np.random.default_rng(41)
    for t in range(120):
        L, n = int(rng.integers(1, 300)), int(rng.integers(1, 12))
        R = np.stack([_tie_heavy(rng, L) for _ in range(n)])
        R[rng.random((n, L)) < 0.2] = -0.0 if t % 2 else 0.0
        if t % 10 == 0:
            R[0] = 0.25
        assert np.array_equal(tr.stable_argsort_rows(R), np.argsort(R, axis=1, kind="stable"))


def test_prefix_crossing_matches_a_running_sum():
    # the first k with 2·(q_0 + … + q_k) ≥ target, by a plain running sum, both ways stage A
    # finds it (prefix_crossing, and crossing_in_prefix over prefix_sums) (the q's are
    # integers here, so every sum is exact, as the extraction's parts are); targets on,
    # between and beyond the prefix sums, zeros and signed zeros included
    rng = np.random.default_rng(13)
    for _ in range(4000):
        L = int(rng.integers(1, 90))
        q = rng.integers(0, 4, L).astype(float) * (rng.random(L) < 0.7)
        pre = np.cumsum(q)
        target = float(rng.choice([2.0 * pre[rng.integers(0, L)], 2.0 * pre[rng.integers(0, L)] + 1.0,
                                   rng.uniform(-1.0, 2.0 * pre[-1] + 2.0), 0.0, -0.0, 2.0 * pre[-1] + 1.0]))
        k, c, before = L, float(pre[-1]), float(pre[-1])
        for j in range(L):
            if 2.0 * pre[j] >= target:
                k, c, before = j, float(pre[j]), float(pre[j - 1]) if j else 0.0
                break
        assert tk.prefix_crossing(q, L, target) == (k, c, before)
        # short rows take it from prefix sums made before the target is known: the same sums
        # (exact), and the same crossing
        ps = np.full(L + 3, np.nan)
        tk.prefix_sums(q, L, ps)
        assert np.array_equal(ps[:L], pre) and np.isnan(ps[L:]).all()
        assert tk.crossing_in_prefix(ps, L, target) == (k, c, before)
        # a NaN target (never reached through the validated entry points) crosses nowhere
        assert tk.crossing_in_prefix(ps, L, np.nan) == (L, pre[-1], pre[-1])


def test_witness_bits_expand_to_the_plain_byte_mask():
    # stage A writes its witness bits to the uint8 mask eight atoms at a time (a multiply
    # spreading a byte of bits over eight bytes, stored as one word); the plain loop, bit j
    # of word j // 64 to byte j, must give the same bytes, at every length and at any
    # byte offset (a row of M starts unaligned when L is not a multiple of 8), and no byte
    # outside the row may change
    from numerics.theta_fused import _expand
    rng = np.random.default_rng(17)
    for L in list(range(1, 140)) + [255, 256, 257, 1000, 4096]:
        nwd = (L + 63) // 64
        for _ in range(3):
            Sw = rng.integers(0, 2**63, nwd, dtype=np.uint64) | (rng.integers(0, 2, nwd, dtype=np.uint64) << 63)
            Sw[rng.random(nwd) < 0.2] = 0
            off = int(rng.integers(0, 8))
            buf = np.full(L + 16, 7, np.uint8)
            _expand(Sw, buf[off:off + L])
            want = np.array([(int(Sw[j // 64]) >> (j % 64)) & 1 for j in range(L)], np.uint8)
            assert np.array_equal(buf[off:off + L], want), (L, off)
            assert (buf[:off] == 7).all() and (buf[off + L:] == 7).all(), (L, off)


def test_witness_bits_expand_by_the_plain_loop_on_a_big_endian_host(monkeypatch):
    # where a word's bytes are not in atom order, _expand writes every byte by the plain
    # loop; its Python form runs that branch here
    from numerics import theta_fused as tf
    monkeypatch.setattr(tf, "LITTLE_ENDIAN", False)
    rng = np.random.default_rng(19)
    for L in (1, 7, 8, 9, 64, 65, 130):
        Sw = rng.integers(0, 2**63, (L + 63) // 64, dtype=np.uint64)
        buf = np.full(L + 2, 7, np.uint8)
        tf._expand.py_func(Sw, buf[1:L + 1])
        want = np.array([(int(Sw[j // 64]) >> (j % 64)) & 1 for j in range(L)], np.uint8)
        assert np.array_equal(buf[1:L + 1], want) and buf[0] == 7 and buf[-1] == 7, L


def test_signed_sums_equal_the_plain_loop_bit_for_bit():
    # the top-K lemma's half sums, built by doubling, against each sum formed by its own
    # loop over the atoms (sign −1 where the bit is set), compared as bit patterns
    rng = np.random.default_rng(14)
    for _ in range(300):
        L = int(rng.integers(2, 40))
        q1 = rng.integers(0, 2 ** 20, L) * 2.0 ** -20 * (rng.random(L) < 0.8)
        q2 = rng.integers(-2 ** 10, 2 ** 10, L) * 2.0 ** -60
        K = int(rng.integers(2, min(L, 13) + 1))
        top = rng.permutation(L)[:K]
        h = (K + 1) // 2
        for a, b in ((0, h), (h, K)):
            n = 1 << (b - a - (1 if a == 0 else 0))
            out = np.empty(n)
            trusted.signed_sums(q1, q2, top, a, b, out, np.empty(n))
            ref = np.empty(n)
            for t in range(n):
                a1, a2, lo = (q1[top[0]], q2[top[0]], 1) if a == 0 else (0.0, 0.0, a)
                for i in range(lo, b):
                    sg = 1.0 - 2.0 * ((t >> (i - lo)) & 1)
                    a1 += sg * q1[top[i]]
                    a2 += sg * q2[top[i]]
                ref[t] = a1 + a2
            assert out.tobytes() == ref.tobytes()


def test_quick_swap_takes_the_best_exchange_among_its_candidates():
    # the sort-free exchange of stage B's pass 1: among the first W nonzero atoms of S and
    # of S^c (index order) it must reach the least |D − 2x_i + 2x_j| (formed as
    # (D − 2x_i) + 2x_j), or keep the mask when no pair improves on |D|
    rng = np.random.default_rng(41)
    moved = 0
    for _ in range(600):
        L = int(rng.integers(2, 90))
        x = _tie_heavy(rng, L) if rng.random() < 0.5 else np.exp(rng.normal(size=L) * rng.uniform(0.1, 2))
        mk = (rng.random(L) < 0.5).astype(np.uint8)
        W = int(rng.integers(1, 40))
        lanes = [0.0] * 4                  # D as the kernel forms it: four running sums,
        for j in range(L):                 # the atoms past the last block of 4 in lane 0
            k = j % 4 if j < L - L % 4 else 0
            lanes[k] += x[j] if mk[j] else -x[j]
        D = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
        S = [j for j in range(L) if mk[j] == 1 and x[j] > 0][:W]
        C = [j for j in range(L) if mk[j] == 0 and x[j] > 0][:W]
        best = min([abs(D)] + [abs((D - 2.0 * x[i]) + 2.0 * x[j]) for i in S for j in C])
        m2 = mk.copy()
        got = tr._quick_swap(x, m2, W, 1, 0.0, np.empty(L + 1, np.int64), np.empty(L + 1, np.int64), np.empty(2 * W))
        if best < abs(D):
            moved += 1
            assert abs(got) == best
            gone, came = np.flatnonzero(mk & ~m2), np.flatnonzero(m2 & ~mk)
            assert len(gone) == 1 and len(came) == 1 and gone[0] in S and came[0] in C
            assert abs((D - 2.0 * x[gone[0]]) + 2.0 * x[came[0]]) == best
        else:
            assert got == D and np.array_equal(m2, mk)
        # with a stop, the scan may end at the first S atom whose best partner reaches it
        stop = abs(D) * float(rng.uniform(0, 0.5))
        m3 = mk.copy()
        got = tr._quick_swap(x, m3, W, 1, stop, np.empty(L + 1, np.int64), np.empty(L + 1, np.int64), np.empty(2 * W))
        assert abs(got) <= stop or abs(got) == best
    assert moved > 300


def test_exchange_window_takes_the_best_exchange_in_its_window():
    # stage A's exchange: among the nonzero atoms with index in [j0, j0 + span), an atom i of S and an
    # atom j of S^c reaching the least |(D − 2x_i) + 2x_j|, or the mask kept when no pair
    # improves on |D|; with a stop, the first S atom (index order) whose best partner reaches
    # it, and that partner the first attaining the value
    rng = np.random.default_rng(43)
    moved = 0
    for _ in range(600):
        L = int(rng.integers(2, 90))
        x = _tie_heavy(rng, L) if rng.random() < 0.5 else np.exp(rng.normal(size=L) * rng.uniform(0.1, 2))
        x[rng.random(L) < 0.1] = 0.0
        mk = (rng.random(L) < 0.5).astype(np.uint8)
        span = int(rng.integers(1, 80))
        j0 = int(rng.integers(0, L))
        D = float(rng.normal()) * float(x.max())
        E = min(span, L - j0, 64)                # a window is at most 64 atoms (one bit word)
        S = [i for i in range(j0, j0 + E) if mk[i] == 1 and x[i] > 0]
        C = [j for j in range(j0, j0 + E) if mk[j] == 0 and x[j] > 0]
        val = {(i, j): abs((D - 2.0 * x[i]) + 2.0 * x[j]) for i in S for j in C}
        best = min([abs(D)] + list(val.values()))
        m2 = mk.copy()
        got = tk.exchange_window(x, m2, j0, span, 1, 0.0, D, np.empty(max(E, 1)), np.empty(max(E, 1)))
        if best < abs(D):
            moved += 1
            i = min(i for i in S if min(val[i, j] for j in C) == best)
            j = min(j for j in C if val[i, j] == best)
            assert got == (D - 2.0 * x[i]) + 2.0 * x[j]
            assert np.flatnonzero(mk != m2).tolist() == sorted([i, j])
        else:
            assert got == D and np.array_equal(m2, mk)
        stop = abs(D) * float(rng.uniform(0, 0.5))
        m3 = mk.copy()
        got = tk.exchange_window(x, m3, j0, span, 1, stop, D, np.empty(max(E, 1)), np.empty(max(E, 1)))
        first = [i for i in S if min(val[i, j] for j in C) <= stop] if C else []
        if first:
            i = first[0]
            j = min(j for j in C if val[i, j] == min(val[i, q] for q in C))
            assert got == (D - 2.0 * x[i]) + 2.0 * x[j] and abs(got) <= stop
        else:
            assert abs(got) == best
    assert moved > 300


def test_stage_a_closes_near_uniform_rows_with_its_exchange():
    # diffuse rows (attention near initialisation): first fit finds no atom small enough,
    # the exchange pass closes them in stage A; every row verifies
    from numerics import theta_fused as tf
    for L, scale in ((64, 0.3), (64, 1.0), (256, 0.3)):
        R = _softmax(62, 2000, L, scale)
        n = R.shape[0]
        M, cols, state = np.empty((n, L), np.uint8), np.empty((6, n)), np.empty(n, np.int8)
        tf.stage_a(R, np.full(n, -1, np.int8), 0, 0.5e-3, 1e-6, M, cols, state)
        assert np.mean(state == 1) > 0.99, (L, scale)
        for i in range(0, n, 97):
            assert Fraction(cols[0, i]) <= theta_of_mask(R[i], sum(1 << j for j in range(L) if M[i, j]))


def _oracle_families(seed):
    # near-uniform softmax rows (all atoms comparable: stage B's pass 1 closes them),
    # near-perfect partitions (θ = 1 − tiny) and tie-heavy rows, L ≤ 40
    rng = np.random.default_rng(seed)
    rows = []
    for L in (7, 12, 19, 25, 32, 40):
        rows += list(_softmax(seed + L, 3, L, 0.3)) + list(_softmax(seed + 2 * L, 2, L, 1.0))
        rows += list(_near_perfect(seed + 3 * L, 2, L))
        rows += [_tie_heavy(rng, L) for _ in range(2)]
    rows = [r if r.max() > 0 else np.eye(1, r.shape[0])[0] for r in rows]
    return [np.pad(r, (0, 40 - r.shape[0])) for r in rows]


@pytest.mark.parametrize("exact_max", [0, None])
def test_bounds_contain_exact_theta_on_near_uniform_near_perfect_and_tie_heavy_rows(exact_max):
    # certify_batch's [θ_lo, θ_hi] (and the gap bounds) must contain the exact θ of
    # numerics.theta.theta_exact, with and without the exact solver stepping in (with it
    # off, the searches and lemmas alone must stay sound), and verify must accept each row
    R = np.array(_oracle_families(51))
    c = certify_batch(R, 1e-6, exact_max=exact_max)
    closed = 0
    for i, row in enumerate(R):
        ex = theta_exact(row)
        assert Fraction(c["theta_lo"][i]) <= ex.theta <= Fraction(c["theta_hi"][i]), i
        assert Fraction(c["gap_lo"][i]) <= ex.delta ** 2 <= Fraction(c["gap_hi"][i]), i
        rec = {k: float(c[k][i]) for k in KEYS}
        rec["regime"] = int(c["regime"][i])
        rec["mask"] = c["witness"][i].tolist()
        assert check_row(row, rec, Fraction(1e-6), 12) == [], i
        closed += rec["regime"] != 2
    assert closed >= 0.9 * R.shape[0]


def test_stage_b_pass_one_closes_near_uniform_rows_without_the_sort():
    # diffuse rows with the witness stage A would have without its exchange (the index-order
    # prefix short of T/2): the quick exchange alone (pass 2's searches switched off by an
    # empty list of rows left) must close nearly all of them
    R = _softmax(61, 2000, 64, 0.3)
    n, L = R.shape
    cs = np.cumsum(R, axis=1)
    M = (cs < 0.5 * cs[:, -1:]).astype(np.uint8)
    ev = np.empty((n, 6))
    tk.evaluate(R, M, ev)
    cols = np.stack([ev[:, 0], np.ones(n), np.zeros(n), ev[:, 3]])
    op = np.flatnonzero(~trusted.closed(cols[0], cols[1], 1e-6))
    assert op.size > 1900                          # that witness alone leaves nearly all open
    Ro, Mo = np.ascontiguousarray(R[op]), np.ascontiguousarray(M[op])
    lo, hi, glo, ghi = (np.ascontiguousarray(cols[k, op]) for k in range(4))
    tr._stage_b_quick_ser(Ro, 12, tr.QUICK_W, tr.QUICK_ROUNDS, 0.25e-3, 0, 0, trusted.close_threshold(1e-6),
                          lo, hi, glo, ghi, Mo)
    assert np.mean(trusted.closed(lo, hi, 1e-6)) > 0.99
    for t in range(0, op.size, 50):                # each kept witness proves its theta_lo
        assert Fraction(lo[t]) <= theta_of_mask(Ro[t], sum(1 << j for j in range(L) if Mo[t, j]))


def test_borrowed_views_read_and_write_the_owners_data():
    # numerics.borrowed: a view with no owner pointer sees and changes the same memory
    # (2-D, slices, another dtype's view), so kernels on borrowed views compute the same
    import numba

    from numerics.borrowed import borrow

    @numba.njit
    def use(a, b):
        v = borrow(a)
        w = borrow(b)
        s = 0.0
        for i in range(v.shape[0]):
            r = v[i, 1:]
            for j in range(r.shape[0]):
                s += r[j]
            w[i] = v[i, 0] * 2.0
        return s, v.view(np.int64)[0, 0], v.shape[0], v.shape[1]

    a = np.random.default_rng(3).random((5, 7))
    b = np.zeros(5)
    s, bits0, n, L = use(a, b)
    assert s == sum(float(a[i, j]) for i in range(5) for j in range(1, 7))
    assert bits0 == a.view(np.int64)[0, 0] and (n, L) == a.shape
    assert np.array_equal(b, a[:, 0] * 2.0)


def test_exchange_partner_is_the_first_attaining_the_least_value():
    # stage A's exchange finds its partner by first_equal (an integer min reduction over
    # the values pair_min left in w) instead of stepping q up while |c + b2[q]| != v: the
    # same index on ties, +inf entries (S's atoms) and a match at q = 0, with w fresh or not
    rng = np.random.default_rng(29)
    w = np.empty(64)
    wi = w.view(np.int64)
    for t in range(3000):
        nb = int(rng.integers(1, 65))
        b2 = 2.0 * rng.choice([0.125, 0.25, 0.375, 0.5], nb) if t % 3 == 0 else 2.0 * rng.random(nb)
        b2[rng.random(nb) < 0.4] = np.inf
        b2[int(rng.integers(0, nb))] = 2.0 * rng.random()        # one finite partner at least
        c = -float(rng.choice(b2[np.isfinite(b2)])) + (0.0 if t % 2 else rng.normal() * 1e-3)
        v = tk.pair_min(c, b2, nb, w, wi)
        q = 0
        while abs(c + b2[q]) != v:                                # the plain reference
            q += 1
        assert tk.first_equal(c, v, b2, nb, w, wi, False) == q
        w[:] = rng.random(64)                                     # w left by another atom
        assert tk.first_equal(c, v, b2, nb, w, wi, True) == q


def _exchange_reference(x, mk, j0, span, rounds, stop, D):
    # stage A's exchange as first written: every S atom's least value by a full scan
    E = min(span, x.shape[0] - j0, 64)
    for _ in range(rounds):
        if abs(D) <= stop:
            break
        xs, ms = x[j0:j0 + E], mk[j0:j0 + E]
        b2 = np.where((xs > 0.0) & (ms == 0), 2.0 * xs, np.inf)
        best, bp = abs(D), -1
        for p in np.flatnonzero((xs > 0.0) & (ms == 1)):
            v = float(np.min(np.abs((D - 2.0 * xs[p]) + b2)))
            if v < best:
                best, bp = v, p
                if best <= stop:
                    break
        if bp < 0:
            break
        c = D - 2.0 * xs[bp]
        bq = int(np.flatnonzero(np.abs(c + b2) == best)[0])
        mk[j0 + bp], mk[j0 + bq] = 0, 1
        D = c + b2[bq]
    return D


def test_exchange_window_matches_the_full_scan():
    # the exchange skips the scan of an S atom whose least value the extreme partners fix
    # (every c + b ≥ 0, or every finite one ≤ 0): same moves and D as scanning all of them,
    # on diffuse and peaked rows, zeros, ties, windows inside longer rows and no partner
    rng = np.random.default_rng(31)
    b2, w = np.empty(64), np.empty(64)
    for t in range(1500):
        L = int(rng.integers(1, 130))
        sp = float(rng.choice([0.0, 0.3, 1.0, 2.5, 5.0, 12.0]))
        x = _softmax(t, 1, L, sp)[0] if t % 4 else _tie_heavy(rng, L)
        x[rng.random(L) < 0.1] = 0.0
        mk = (rng.random(L) < float(rng.choice([0.0, 0.3, 0.5, 1.0]))).astype(np.uint8)
        j0 = int(rng.integers(0, max(L - 64, 0) + 1))
        D = float(np.sum(np.where(mk == 1, x, -x)))
        stop = float(rng.choice([0.0, 1e-4, 5e-4, 1e-2])) * float(x.sum())
        m1, m2 = mk.copy(), mk.copy()
        d1 = tk.exchange_window(x, m1, j0, 64, 2, stop, D, b2, w)
        d2 = _exchange_reference(x, m2, j0, 64, 2, stop, D)
        assert np.array_equal(m1, m2) and d1 == d2, (t, L, sp)
