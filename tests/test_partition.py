"""The exact partition solver (Horowitz–Sahni and Schroeppel–Shamir) against references
written here, independent of numerics (C2, C6, C7).

References: ``python_dev`` (every subset, plain Python ints), ``exhaustive_dev`` (numpy int64
in two base-2^40 limbs, T < 2^100, L ≤ 22) and ``dp_dev`` (the set of subset sums as the bits
of one Python int, for small totals at any L).  None of them shares code with the solver or
with numerics.theta.best_mask_bruteforce.
"""
from fractions import Fraction
import itertools
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from numerics import partition
from numerics.partition import best_mask_mitm, closest_half, compress, lower_bound, solve
from numerics.theta import integer_weights, subset_sums, theta_exact, theta_of_mask

# Every solver path: Horowitz–Sahni ("mitm", the default up to 24 atoms) with 1, 2 and 3 limbs,
# with and without the gcd and gap reductions, with the prefix enumeration forced by a tiny
# budget; Schroeppel–Shamir ("ss") with the same limb counts, and with a budget so small that
# the core has 4 atoms and the rest go through the outer branch and bound.
HS_PATHS = [{}, {"min_limbs": 2}, {"min_limbs": 3, "reduce": False}, {"memory_budget": 200},
            {"min_limbs": 2, "memory_budget": 300, "reduce": False}]
SS_PATHS = [{"method": "ss"}, {"method": "ss", "min_limbs": 2}, {"method": "ss", "memory_budget": 200},
            {"method": "ss", "min_limbs": 3, "memory_budget": 5000, "reduce": False}]
PATHS = HS_PATHS + SS_PATHS
FAST = [{}, {"min_limbs": 2}] + SS_PATHS[:3]


def dev(w, mask):
    a, b = subset_sums(w, mask)
    return abs(a - b)


def python_dev(w):
    """min |T − 2s| over every subset, plain Python (L ≤ ~16)."""
    T = sum(w)
    return min(abs(T - 2 * sum(c)) for r in range(len(w) + 1) for c in itertools.combinations(w, r))


def dp_dev(w):
    """min |T − 2s| from the set of all subset sums, kept as the bits of a Python int (small T)."""
    T = sum(w)
    reach = 1
    for x in w:
        reach |= reach << x
    return min(abs(T - 2 * s) for s in range(T + 1) if reach >> s & 1)


def brute_dev(w):
    if sum(w) < 2**100 and len(w) <= 22 and len(w) > 12:
        return exhaustive_dev(w)
    return python_dev(w) if len(w) <= 12 else dp_dev(w)


def check_row(w, paths=PATHS, want=None):
    want = brute_dev(w) if want is None else want
    for kw in paths:
        mask, d = closest_half(w, **kw)
        assert mask < 1 << len(w)
        assert d == dev(w, mask) == want, (w, kw, d, want)


def test_integer_rows_match_bruteforce():
    rng = random.Random(0)
    for L in range(1, 21):
        for bits in (2, 12, 40, 58):
            check_row([rng.getrandbits(bits) for _ in range(L)], FAST if L > 14 else PATHS)


def test_dirichlet_float64_rows_match_bruteforce():
    rng = np.random.default_rng(1)
    for L in (2, 3, 5, 8, 11, 13):
        for alpha in (1.0, 0.2):
            w = integer_weights(rng.dirichlet(np.full(L, alpha)))
            check_row(w)


def test_float32_and_bfloat16_softmax_rows_match_bruteforce():
    g = torch.Generator().manual_seed(2)
    for L in (6, 12, 17, 20):
        for dtype in (torch.float32, torch.bfloat16):
            for scale in (1.0, 4.0):
                row = torch.softmax(scale * torch.randn(L, generator=g, dtype=torch.float64), 0).to(dtype)
                check_row(integer_weights(row), FAST)


def test_ties_and_zeros():
    check_row([0, 0, 0])
    check_row([0, 5])
    check_row([7, 7])
    check_row([3, 0, 3, 0, 5, 5, 2, 2, 0, 1])
    check_row([1] * 15)
    check_row([1] * 14 + [0])
    rng = random.Random(3)
    for _ in range(20):
        check_row([rng.choice([0, 0, 1, 2, 4, 4]) for _ in range(rng.randint(1, 16))])
    # zero atoms never enter the witness (C6)
    mask, _ = closest_half([0, 4, 0, 4, 0])
    assert mask & 0b10101 == 0


def test_limb_boundaries():
    # totals just below 2^62 (the largest K = 1 row: the doubled sums use the unmasked top limb
    # up to 2^63) and just below 2^124 (the largest K = 2 row), against exhaustive search
    rng = random.Random(10)
    for top in (62, 124):
        for L in (3, 7, 12):
            # comparable atoms (no dominant one), so doubled sums near T straddle 2^top
            w = [rng.randrange(2**top // (2 * L), 3 * 2**top // (2 * L)) for _ in range(L - 1)]
            w.append(2**top - 1 - sum(w))          # T = 2^top − 1, an odd total
            assert sum(w) == 2**top - 1 and 0 <= max(w) < sum(w) // 2
            check_row(w, FAST + [{"reduce": False}, {"method": "ss", "reduce": False}])


def test_huge_exponent_float64_rows():
    tiny = [2.0**-600, 3 * 2.0**-600, 2.0**-1000, 2.0**-1074, 5 * 2.0**-1074, 0.0]
    rows = [[1.0] + tiny,
            [0.3, 0.3, 0.4] + tiny,
            [0.25, 0.25, 0.25, 0.25, 2.0**-600, 2.0**-600],
            [1.0, 1.0, 1.0, 2.0**-300, 2.0**-900, 2.0**-900, 2.0**-1074]]
    rng = np.random.default_rng(4)
    for _ in range(4):  # no bit gaps: a smooth spread of exponents, ~1000 significant bits
        rows.append([float(rng.uniform(0.5, 1)) * 2.0 ** -float(e) for e in np.linspace(0, 1050, 11)]
                    + [0.5, 0.5])
    for row in rows:
        w = integer_weights(row)
        want = python_dev(w)
        check_row(w, want=want)
        res = theta_exact(row)
        assert res.delta == Fraction(want, sum(w))
        assert res.theta == theta_of_mask(row, res.mask) == 1 - res.delta**2


def test_compress_keeps_the_order_of_all_deviations():
    rng = random.Random(5)
    shrunk = 0
    for _ in range(40):
        L = rng.randint(2, 9)
        w = [rng.getrandbits(rng.choice([1, 4, 20])) << rng.choice([0, 0, 30, 200, 900]) for _ in range(L)]
        c = compress(w)
        shrunk += sum(c).bit_length() < sum(w).bit_length()
        signs = list(itertools.product((1, -1), repeat=L))
        before = [abs(sum(e * x for e, x in zip(s, w))) for s in signs]
        after = [abs(sum(e * x for e, x in zip(s, c))) for s in signs]
        for i in range(len(signs)):
            for j in range(len(signs)):
                assert (before[i] < before[j]) == (after[i] < after[j])
    assert shrunk > 10  # the reduction is exercised, not a no-op


def exhaustive_dev(w):
    """min |T − 2s| over all subsets, exactly, for T < 2^100: numpy int64 in two base-2^40 limbs."""
    B = 2**40
    T = sum(w)
    assert T < 2**100
    hi, lo = np.zeros(1, np.int64), np.zeros(1, np.int64)
    for x in w[:-1]:  # the last atom stays outside S (complement symmetry)
        hi, lo = np.concatenate([hi, hi + (x >> 40)]), np.concatenate([lo, lo + (x & (B - 1))])
    dh, dl = (T >> 40) - 2 * hi, (T & (B - 1)) - 2 * lo  # T − 2s = dh·B + dl
    carry = dl // B
    dh, dl = dh + carry, dl - carry * B                  # now 0 ≤ dl < B
    neg = dh < 0
    ah = np.where(neg, np.where(dl > 0, -dh - 1, -dh), dh)  # |T − 2s| = ah·B + al
    al = np.where(neg, np.where(dl > 0, B - dl, 0), dl)
    m = ah.min()
    return int(m) * B + int(al[ah == m].min())


def test_references_agree():
    rng = random.Random(9)
    for _ in range(30):
        w = [rng.getrandbits(rng.choice([5, 50, 80])) for _ in range(rng.randint(1, 10))]
        assert exhaustive_dev(w) == python_dev(w)
    for _ in range(30):
        w = [rng.getrandbits(rng.choice([1, 4, 9])) for _ in range(rng.randint(1, 12))]
        assert dp_dev(w) == python_dev(w) == exhaustive_dev(w)
    # negative control: the references do see a wrong row (one unit off changes the answer)
    assert dp_dev([3, 3]) == 0 and dp_dev([3, 4]) == 1


def test_theta_exact_uses_mitm_and_is_exact():
    rng = np.random.default_rng(6)
    bits = []
    for L, alpha in ((21, 1.0), (21, 0.3), (22, 1.0), (22, 0.3)):
        p = rng.dirichlet(np.full(L, alpha))
        w = integer_weights(p)
        bits.append(sum(w).bit_length())
        res = theta_exact(p)
        assert res.method == "mitm"                  # ≤ 24 atoms: Horowitz–Sahni, as before
        assert dev(w, solve(w, method="ss")[0]) == exhaustive_dev(w)
        assert isinstance(res.theta, Fraction) and isinstance(res.delta, Fraction)
        assert res.theta == 1 - res.delta**2 == theta_of_mask(p, res.mask)
        assert res.delta == Fraction(exhaustive_dev(w), sum(w))
    assert min(bits) <= 62 < max(bits)  # both K = 1 (int64) and K = 2 limbs ran


def planted(rng, n, bits):
    left = [rng.getrandbits(bits) + 1 for _ in range(n)]
    cuts = sorted(rng.sample(range(1, sum(left)), n - 1))  # sum(left) cut into n positive parts
    right = [b - a for a, b in zip([0] + cuts, cuts + [sum(left)])]
    row = left + right
    rng.shuffle(row)
    return row


def test_planted_perfect_partition_L40():
    rng = random.Random(7)
    row = planted(rng, 20, 20)
    w = [Fraction(x, sum(row)) for x in row]
    res = theta_exact(w)
    assert res.method == "ss" and res.delta == 0 and res.theta == 1
    # negative control: one unit more makes the total odd, so δ ≥ 1/T and θ < 1
    row[0] += 1
    res = theta_exact([Fraction(x) for x in row])
    assert res.delta == Fraction(1, sum(row)) and res.theta < 1


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="position 1 is negative"):
        best_mask_mitm([1, -2, 3])
    with pytest.raises(TypeError, match="position 0 is float"):
        best_mask_mitm([0.5, 1])
    with pytest.raises(ValueError, match="unknown method"):
        solve([1, 2], method="greedy")


@settings(deadline=None)
@given(st.lists(st.integers(0, 2**70), min_size=1, max_size=11))
def test_hypothesis_matches_bruteforce(w):
    check_row(w, PATHS[:3])


@pytest.mark.slow
def test_slow_sweep_all_paths():
    rng = random.Random(8)
    for L in range(12, 21):
        for _ in range(6):
            bits = rng.choice([8, 30, 55])
            check_row([rng.getrandbits(bits) for _ in range(L)])
    for n in (22, 24):
        row = planted(rng, n, 40)
        assert closest_half(row)[1] == 0
        assert closest_half(row, min_limbs=3)[1] == 0
        assert closest_half(row, method="ss", min_limbs=3)[1] == 0
    for L in (26, 30, 34, 40):  # beyond Horowitz–Sahni's range: against the subset-sum DP
        for bits in (6, 12):
            check_row([rng.getrandbits(bits) + 1 for _ in range(L)], [{}, {"memory_budget": 2000}])


# ----------------------------------------------------------------------------- Schroeppel–Shamir

def near_uniform(rng, L, base, spread):
    return [base + rng.randint(-spread, spread) for _ in range(L)]


def row_families(rng, L, small):
    """Near-uniform, near-perfect (planted ± 1), tie-heavy and zero-padded rows of length L.

    small: keep the total under ~2^20 so the DP reference is cheap at any L."""
    base = 1000 if small else 2**40
    rows = [near_uniform(rng, L, base, 3), near_uniform(rng, L, base, base // 10)]
    n = L // 2
    p = planted(rng, n, 9 if small else 40) + [0] * (L - 2 * n)
    rows += [p, [x + (i == 0) for i, x in enumerate(p)]]                      # perfect, then T odd
    rows.append([rng.choice([1, 2, 2, 3, 5, 5, 5]) * (1 if small else 2**50) for _ in range(L)])
    rows.append([rng.choice([0, 0, 7, 7, 12]) for _ in range(L)])           # ties and zeros
    rows.append([0, 0] + [rng.getrandbits(10 if small else 50) for _ in range(L - 2)])
    return rows


def test_ss_matches_references_on_row_families():
    rng = random.Random(11)
    for L in (2, 3, 5, 8, 12, 16, 20):
        for w in row_families(rng, L, small=False):
            check_row(w, PATHS if L <= 12 else FAST)
    for L in (25, 32, 48, 64):  # longer rows: small totals, the DP reference
        for w in row_families(rng, L, small=True):
            check_row(w, [{}, {"method": "ss", "memory_budget": 4000}], want=dp_dev(w))


def test_ss_full_layout_and_outer_search(monkeypatch):
    # Quick walks limited to one pair, so the full layout (small heaps, long lists) decides;
    # a core of 4 atoms, so most rows also go through the outer branch and bound.
    monkeypatch.setattr(partition, "QUICK_STEPS", 1)
    monkeypatch.setattr(partition, "BIG_BITS", 3)
    rng = random.Random(12)
    for L in (6, 11, 15, 19):
        for bits in (3, 20, 45, 70):
            w = [rng.getrandbits(bits) for _ in range(L)]
            check_row(w, [{"method": "ss"}, {"method": "ss", "memory_budget": 200},
                          {"method": "ss", "min_limbs": 2}])
    for L in (27, 33):
        w = near_uniform(rng, L, 5000, 40)
        check_row(w, [{"method": "ss"}, {"method": "ss", "min_limbs": 2}], want=dp_dev(w))


def test_lower_bound_is_sound_and_used():
    rng = random.Random(13)
    raised = 0
    for _ in range(300):
        L = rng.randint(1, 12)
        # float-like rows: a few atoms of small exponent carry the low bits
        w = [rng.getrandbits(rng.choice([4, 12, 24])) << rng.choice([0, 0, 4, 9, 17]) for _ in range(L)]
        lb, opt = lower_bound(w), python_dev(w)
        assert sum(w) % 2 <= lb <= opt
        raised += lb > sum(w) % 2
    assert raised > 20  # the residue bound is exercised, not a no-op
    # a hand case: one odd atom (3) and the rest ≡ 0 mod 16 force |T − 2s| ≡ ±3 (mod 16)
    w = [3] + [16 * x for x in (5, 9, 11, 13, 17, 21)]
    assert lower_bound(w) == python_dev(w) == 3


def test_negative_control_a_wrong_bound_is_caught(monkeypatch):
    # A solver told that a too-high deviation is optimal stops early; the references catch it.
    rng = random.Random(14)
    rows = [[rng.getrandbits(30) for _ in range(rng.randint(26, 30))] for _ in range(6)]
    wrong = 0
    monkeypatch.setattr(partition, "lower_bound", lambda w: sum(w) // 8)
    for w in rows:
        wrong += closest_half(w)[1] != dp_dev_or_exhaustive(w)
    assert wrong >= 1


def dp_dev_or_exhaustive(w):
    """A reference for 26–30 atoms of 30 bits: meet in the middle over Python sets."""
    T = sum(w)
    h = len(w) // 2
    left = sorted({sum(c) for r in range(h + 1) for c in itertools.combinations(w[:h], r)})
    best = T
    import bisect
    for r in range(len(w) - h + 1):
        for c in itertools.combinations(w[h:], r):
            s = sum(c)
            k = bisect.bisect_left(left, (T - 2 * s) // 2)
            for x in left[max(0, k - 1): k + 2]:
                best = min(best, abs(T - 2 * (s + x)))
    return best


def test_giving_up_is_an_error_not_an_answer(monkeypatch):
    monkeypatch.setattr(partition, "MAX_LEAVES", 1)
    rng = random.Random(15)
    with pytest.raises(ValueError, match="no optimum proved"):
        for _ in range(20):  # an odd-total row whose first leaf misses the bound
            w = [rng.getrandbits(40) | 1 for _ in range(9)]
            closest_half(w, method="ss", memory_budget=200)


def test_L64_planted_perfect_partition():
    rng = random.Random(16)
    for bits in (20, 40, 52):
        row = planted(rng, 32, bits)
        m, d, method = solve(row)
        assert method == "ss" and d == dev(row, m) == 0          # 0 is the least possible
        row[rng.randrange(64)] += 1                               # T odd: ≥ 1 by parity
        m, d, _ = solve(row)
        assert d == dev(row, m) == 1
    # the same rows as exact dyadic floats through theta_exact
    row = planted(rng, 32, 30)
    res = theta_exact([Fraction(x, 2**40) for x in row])
    assert res.method == "ss" and res.theta == 1 and theta_of_mask(row, res.mask) == 1


def test_softmax_rows_L64_against_the_bound():
    # float32 softmax rows at L = 64: the answer is proved by the residue bound (found = bound)
    g = torch.Generator().manual_seed(17)
    for _ in range(3):
        row = torch.softmax(torch.randn(64, generator=g, dtype=torch.float64), 0).to(torch.float32)
        w = integer_weights(row)
        m, d, _ = solve(w)
        assert d == dev(w, m) == lower_bound(w)
