"""The meet-in-the-middle partition solver against exhaustive search (C2, C6, C7)."""
from fractions import Fraction
import itertools
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from numerics.partition import best_mask_mitm, closest_half, compress
from numerics.theta import (best_mask_bruteforce, integer_weights, subset_sums, theta_bruteforce,
                            theta_exact, theta_of_mask)

# Every solver path: 1, 2 and 3 limbs (one kernel pair, compiled per K), with and without
# the gcd and gap reductions, and with the prefix enumeration forced by a tiny budget.
PATHS = [{}, {"min_limbs": 2}, {"min_limbs": 3, "reduce": False}, {"memory_budget": 200},
         {"min_limbs": 2, "memory_budget": 300, "reduce": False}]


def dev(w, mask):
    a, b = subset_sums(w, mask)
    return abs(a - b)


def brute_dev(w):
    return dev(w, best_mask_bruteforce(w))


def check_row(w, paths=PATHS):
    want = brute_dev(w)
    for kw in paths:
        mask, d = closest_half(w, **kw)
        assert mask < 1 << len(w)
        assert d == dev(w, mask) == want, (w, kw, d, want)


def test_integer_rows_match_bruteforce():
    rng = random.Random(0)
    for L in range(1, 21):
        for bits in (2, 12, 40, 58):
            check_row([rng.getrandbits(bits) for _ in range(L)], PATHS[:2] if L > 14 else PATHS)


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
                check_row(integer_weights(row), PATHS[:2])


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
            check_row(w, PATHS[:2] + [{"reduce": False}])


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
        check_row(w)
        res = theta_exact(row)
        assert res.theta == theta_bruteforce(row).theta
        assert res.theta == theta_of_mask(row, res.mask)


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


def test_exhaustive_reference_is_exact():
    rng = random.Random(9)
    for _ in range(30):
        w = [rng.getrandbits(rng.choice([5, 50, 80])) for _ in range(rng.randint(1, 10))]
        assert exhaustive_dev(w) == brute_dev(w)


def test_theta_exact_uses_mitm_and_is_exact():
    rng = np.random.default_rng(6)
    bits = []
    for L, alpha in ((21, 1.0), (21, 0.3), (22, 1.0), (22, 0.3)):
        p = rng.dirichlet(np.full(L, alpha))
        w = integer_weights(p)
        bits.append(sum(w).bit_length())
        res = theta_exact(p)
        assert res.method == "mitm"
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
    assert res.method == "mitm" and res.delta == 0 and res.theta == 1
    # negative control: one unit more makes the total odd, so δ ≥ 1/T and θ < 1
    row[0] += 1
    res = theta_exact([Fraction(x) for x in row])
    assert res.delta == Fraction(1, sum(row)) and res.theta < 1


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="position 1 is negative"):
        best_mask_mitm([1, -2, 3])
    with pytest.raises(TypeError, match="position 0 is float"):
        best_mask_mitm([0.5, 1])


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
