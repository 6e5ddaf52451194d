"""Exhaustive exact-rational checks of C2–C7 on simplex grids.

All arithmetic is on integers (see _grids.py), so equalities are exact.
Every exhaustive check has a negative control run by the same code.
"""
from __future__ import annotations

from fractions import Fraction

from numerics.softmax import covariance, inf_to_one_norm
from numerics.theta import sawtooth_delta, theta_bruteforce, theta_exact, theta_of_mask, theta_uniform

from ..registry import check
from ._grids import compositions, partitions, scaled_norm_inf_to_one, scaled_theta
from ._util import refuted, verdict

# (L, n): grid denominators per length; quick keeps the whole file to a few seconds.
GRID_QUICK = {2: 200, 3: 120, 4: 60, 5: 40, 6: 30}
GRID_FULL = {2: 600, 3: 300, 4: 120, 5: 72, 6: 48}
TAUS = (Fraction(1, 2), Fraction(1), Fraction(3))


def _grid(tier):
    g = GRID_FULL if tier == "full" else GRID_QUICK
    return g, ", ".join(f"L={L}: n={n}" for L, n in g.items())


def _dominant(k):
    return 2 * max(k) >= sum(k)


@check("C2", "exact", scope="all simplex grid points k/n up to permutation, L ≤ 6 (n = 30…200; "
       "full: 48…600), plus every composition with τ ∈ {1/2, 1, 3} at L ≤ 4")
def c2_grid(tier):
    grid, desc = _grid(tier)
    points = mismatches = 0
    for L, n in grid.items():
        for k in partitions(n, L):
            points += 1
            if scaled_norm_inf_to_one(k) != scaled_theta(k):
                mismatches += 1
    # With τ, in Fractions, every grid point (no symmetry reduction), smaller grids.
    tau_points = 0
    for L, n in {2: 8, 3: 6, 4: 4}.items():
        for k in compositions(n, L):
            p = [Fraction(x, n) for x in k]
            th = theta_exact(p).theta if sum(1 for x in k if x) else None
            for tau in TAUS:
                tau_points += 1
                if th is None or inf_to_one_norm(covariance(p, tau)) != th / tau:
                    mismatches += 1
    return verdict(mismatches == 0, f"L ≤ 6 grids ({desc}); τ ∈ {{1/2, 1, 3}} on all compositions L ≤ 4",
                   f"‖C(p)/τ‖∞→1 = θ(p)/τ exactly at {points} orbit representatives and {tau_points} "
                   f"(p, τ) pairs; mismatches: {mismatches}",
                   points=points, tau_points=tau_points, mismatches=mismatches)


@check("C2", "exact", negative_control=True, guards=("c2_grid",),
       scope="same grids, L = 4…6: the wrong identity ‖C‖∞→1 = 4m(1 − m) without m ≥ 1/2")
def c2_grid_negative(tier):
    grid, _ = _grid(tier)
    found = None
    for L, n in grid.items():
        if L < 4:
            continue
        for k in partitions(n, L):
            m = max(k)
            if scaled_norm_inf_to_one(k) != 4 * m * (n - m):
                found = (k, n)
                break
        if found:
            break
    k, n = found if found else ((), 0)
    return refuted(found is not None, "L = 4…6 grids",
                   f"counterexample p = {tuple(str(Fraction(x, n)) for x in k)}" if found else "",
                   counterexample=[list(k), n] if found else None)


@check("C3", "exact", scope="uniform rows L = 1…12 by brute force; causal zero-padded rows L ≤ 12")
def c3_uniform(tier):
    Lmax = 16 if tier == "full" else 12
    bad = []
    for L in range(1, Lmax + 1):
        if L == 1:
            ok = theta_uniform(1) == 0  # a single atom: every subset has p(S) ∈ {0, 1}
        else:
            ok = theta_bruteforce([1] * L).theta == theta_uniform(L)
        # causal row i of a length-Lmax sequence: i + 1 equal atoms, then zero padding
        if L >= 2:
            padded = [1] * L + [0] * (Lmax - L)
            ok = ok and theta_bruteforce(padded).theta == theta_uniform(L)
        if not ok:
            bad.append(L)
    return verdict(not bad, f"L = 1…{Lmax}",
                   f"θ(uniform_L) = 1 (L even), 1 − 1/L² (L odd ≥ 3), 0 (L = 1) for every L ≤ {Lmax}, "
                   f"also with causal zero padding; failures: {bad or 'none'}", failures=bad)


@check("C3", "exact", negative_control=True, guards=("c3_uniform",),
       scope="L = 2…12: the wrong parity-free claim θ(uniform) = 1 for all L ≥ 2")
def c3_negative(tier):
    bad = [L for L in range(2, 13) if theta_bruteforce([1] * L).theta != 1]
    return refuted(bool(bad), "L = 2…12", f"refuted at L = {bad[:3]}…", refuted_at=bad)


@check("C4", "exact", scope="every grid point with p_max ≥ 1/2, L ≤ 6 (same grids as C2)")
def c4_grid(tier):
    grid, desc = _grid(tier)
    points = bad = 0
    for L, n in grid.items():
        for k in partitions(n, L):
            if _dominant(k):
                points += 1
                m = k[0]
                bad += scaled_theta(k) != 4 * m * (n - m)
    return verdict(bad == 0 and points > 0, f"L ≤ 6 ({desc})",
                   f"θ = 4m(1 − m) at all {points} dominant grid points; violations: {bad}",
                   points=points, violations=bad)


@check("C4", "exact", negative_control=True, guards=("c4_grid",),
       scope="grids L = 4…6 without the hypothesis m ≥ 1/2")
def c4_negative(tier):
    grid, _ = _grid(tier)
    found = next(((k, n) for L, n in grid.items() if L >= 4 for k in partitions(n, L)
                  if scaled_theta(k) != 4 * k[0] * (n - k[0])), None)
    return refuted(found is not None, "L = 4…6 grids",
                   f"counterexample k/n = {found[0]}/{found[1]}" if found else "",
                   counterexample=[list(found[0]), found[1]] if found else None)


@check("C5", "exact", scope="every grid point L ≤ 6 (same grids as C2): both lower bounds, and "
       "the sawtooth minimum on [1/5, 1/2] as a lower bound")
def c5_grid(tier):
    grid, desc = _grid(tier)
    points = bad_simple = bad_saw = saw_points = 0
    for L, n in grid.items():
        for k in partitions(n, L):
            points += 1
            m, th = k[0], scaled_theta(k)            # th = n²θ
            bad_simple += th < 4 * m * (n - m) or th < n * n - m * m
            d = sawtooth_delta(Fraction(m, n))
            if d is not None:
                saw_points += 1
                bad_saw += Fraction(th, n * n) < 1 - d * d
    return verdict(bad_simple == 0 and bad_saw == 0, f"L ≤ 6 ({desc})",
                   f"θ ≥ max(4m(1 − m), 1 − m²) at {points} points; sawtooth lower bound at "
                   f"{saw_points} points with m ∈ [1/5, 1/2]; violations: {bad_simple + bad_saw}",
                   points=points, sawtooth_points=saw_points, violations=bad_simple + bad_saw)


# Extremal rows (found by the exact grid search above) at which θ hits the sawtooth envelope.
_ATTAINED = {
    Fraction(2, 5): [Fraction(2, 5), Fraction(2, 5), Fraction(1, 5)],          # (m, m, 1 − 2m)
    Fraction(3, 10): [Fraction(3, 10)] * 3 + [Fraction(1, 10)],                 # δ* = 4m − 1
    Fraction(1, 3): [Fraction(1, 3)] * 3,                                        # 1 − m² tight
    Fraction(1, 5): [Fraction(1, 5)] * 5,                                        # 1 − m² tight
}


def attainment_misses(delta) -> list[str]:
    """The m of _ATTAINED at which θ(row) ≠ 1 − delta(m)² (exact), after checking max(row) = m."""
    return [str(m) for m, p in _ATTAINED.items() if max(p) != m or theta_exact(p).theta != 1 - delta(m) ** 2]


@check("C5", "exact", scope="attainment: explicit rows at which θ equals the sawtooth minimum")
def c5_attained(tier):
    bad = attainment_misses(sawtooth_delta)
    return verdict(not bad, "m ∈ {2/5, 3/10, 1/3, 1/5}",
                   f"the sawtooth minimum is attained at all 4 explicit rows; failures: {bad or 'none'}",
                   failures=bad)


@check("C5", "exact", negative_control=True, guards=("c5_attained",),
       scope="same rows: attainment of 1 − (δ*·101/100)², a sawtooth 1% off, must fail at every row")
def c5_attained_negative(tier):
    bad = attainment_misses(lambda m: sawtooth_delta(m) * Fraction(101, 100))
    return refuted(len(bad) == len(_ATTAINED), "m ∈ {2/5, 3/10, 1/3, 1/5}",
                   f"θ ≠ 1 − (1.01·δ*)² at m = {', '.join(bad)}" if len(bad) == len(_ATTAINED) else
                   f"the perturbed minimum was 'attained' at {len(_ATTAINED) - len(bad)} row(s)", missed=bad)


@check("C5", "exact", negative_control=True, guards=("c5_grid",),
       scope="grids L ≤ 6, rows with p_max ≤ 1/2: the sharpened bound θ ≥ 1 − (99m/100)²")
def c5_negative(tier):
    # 1 − m² is tight at m = 1/(2k + 1) (uniform rows on an odd number of atoms), so any
    # strengthening must fail there, away from the trivial one-hot rows.
    grid, _ = _grid(tier)
    found = next(((k, n) for L, n in grid.items() for k in partitions(n, L)
                  if 2 * k[0] <= n and 10**4 * scaled_theta(k) < 10**4 * n * n - (99 * k[0]) ** 2), None)
    return refuted(found is not None, "L ≤ 6 grids, p_max ≤ 1/2",
                   f"counterexample k/n = {found[0]}/{found[1]}" if found else "",
                   counterexample=[list(found[0]), found[1]] if found else None)


def padding_changes(pad: int, grid: dict[int, int]) -> tuple[int, int]:
    """(#padded rows, #rows whose θ changed) when atoms of weight ``pad`` are appended or inserted."""
    checked = bad = 0
    for L, n in grid.items():
        for k in partitions(n, L):
            base = theta_bruteforce(list(k)).theta
            for padded in (list(k) + [pad], [pad] + list(k), list(k[:1]) + [pad, pad] + list(k[1:])):
                checked += 1
                bad += theta_bruteforce(padded).theta != base
    return checked, bad


@check("C6", "exact", scope="grids L ≤ 5: zero atoms appended or inserted leave θ unchanged")
def c6_zero_atoms(tier):
    checked, bad = padding_changes(0, {2: 12, 3: 10, 4: 8, 5: 6})
    return verdict(bad == 0 and checked > 0, "L ≤ 5 grids, three paddings each",
                   f"{checked} padded rows, θ unchanged in all; violations: {bad}", checked=checked, violations=bad)


@check("C6", "exact", negative_control=True, guards=("c6_zero_atoms",),
       scope="same code, L ≤ 3 grids: atoms of weight 1/n (not zero) must change θ somewhere")
def c6_zero_atoms_negative(tier):
    checked, bad = padding_changes(1, {2: 12, 3: 10})
    return refuted(bad > 0, "L ≤ 3 grids, three paddings each",
                   f"θ changed on {bad} of {checked} rows padded with weight-1/n atoms" if bad else "",
                   checked=checked, changed=bad)


def _lipschitz_worst(grid: dict[int, int]) -> tuple[Fraction, int]:
    """max |θ(p) − θ(q)| / ‖p − q‖₁ over grid neighbours (one unit of mass moved), and #pairs.

    Grid neighbours are enough: any two grid points are joined by a path of unit
    moves whose ℓ1 lengths add up to their distance, so the ratio over all pairs
    is at most the ratio over neighbours (triangle inequality).
    """
    worst, pairs = Fraction(0), 0
    for L, n in grid.items():
        cache = {}

        def th(k):
            key = tuple(sorted(k, reverse=True))   # θ is permutation invariant
            if key not in cache:
                cache[key] = scaled_theta(key)
            return cache[key]

        for k in compositions(n, L):
            for i in range(L):
                if k[i] == 0:
                    continue
                for j in range(L):
                    if j != i:
                        q = list(k)
                        q[i] -= 1
                        q[j] += 1
                        pairs += 1
                        # n²|Δθ| / (n · 2/n · n) : the move has ℓ1 length 2/n.
                        worst = max(worst, Fraction(abs(th(k) - th(q)), 2 * n))
    return worst, pairs


@check("C6", "exact", scope="every pair of neighbouring grid points, L ≤ 4 (n = 24, 16, 12): "
       "|θ(p) − θ(q)| ≤ 2‖p − q‖₁")
def c6_lipschitz_grid(tier):
    worst, pairs = _lipschitz_worst({2: 24, 3: 16, 4: 12} if tier == "quick" else {2: 60, 3: 30, 4: 20, 5: 12})
    return verdict(worst <= 2, "L ≤ 4 grids", f"largest |Δθ|/‖Δp‖₁ over {pairs} neighbouring pairs is "
                   f"{worst} (≤ 2; the supremum 2 is approached next to one-hot rows)", pairs=pairs, worst=str(worst))


@check("C6", "exact", negative_control=True, guards=("c6_lipschitz_grid",),
       scope="same grids: the too-strong constant 1 (θ 1-Lipschitz)")
def c6_lipschitz_negative(tier):
    worst, pairs = _lipschitz_worst({2: 24, 3: 16, 4: 12})
    return refuted(worst > 1, "L ≤ 4 grids", f"ratio {worst} > 1 found" if worst > 1 else "", worst=str(worst))


def subset_certificates(grid: dict[int, int], scales, certificate) -> tuple[int, int, int]:
    """Every (grid row k·s for s in scales(n), subset S): (#cases, #cases with certificate(row, S) > θ,
    #grid points where the best certificate equals θ)."""
    checked = bad = tight = 0
    for L, n in grid.items():
        for k in partitions(n, L):
            if max(k) == 0:
                continue
            th = Fraction(scaled_theta(k), n * n)
            best = Fraction(0)
            for mask in range(1 << L):
                for scale in scales(n):
                    v = certificate([x * scale for x in k], mask)
                    checked += 1
                    bad += v > th
                    best = max(best, v)
            tight += best == th
    return checked, bad, tight


@check("C7", "exact", scope="every subset of every grid point L ≤ 5, normalised and scaled by 1/2, 3")
def c7_grid(tier):
    grid = {2: 12, 3: 10, 4: 8, 5: 7}
    # row sums 1, 1/2 and 3 (k sums to n)
    checked, bad, tight = subset_certificates(grid, lambda n: (Fraction(1, n), Fraction(1, 2 * n), Fraction(3, n)),
                                               theta_of_mask)
    ok = bad == 0 and tight > 0
    return verdict(ok, "L ≤ 5 grids, every subset, row sums 1, 1/2, 3",
                   f"4ab/(a + b)² ≤ θ for all {checked} (row, S, scale) cases and the best S attains θ; "
                   f"violations: {bad}", checked=checked, violations=bad)


def unnormalised_certificate(row, mask) -> Fraction:
    """4·p(S)·p(Sᶜ) without dividing by (Σp)²: theta_of_mask's value times (Σp)²."""
    return theta_of_mask(row, mask) * sum(row) ** 2


@check("C7", "exact", negative_control=True, guards=("c7_grid",),
       scope="rows summing to 3/2, L ≤ 4: the unnormalised value 4·p(S)·p(Sᶜ) as a certificate")
def c7_negative(tier):
    checked, bad, _ = subset_certificates({3: 6, 4: 8}, lambda n: (Fraction(3, 2 * n),), unnormalised_certificate)
    return refuted(bad > 0, "rows of sum 3/2, L = 3, 4",
                   f"4p(S)p(Sᶜ) exceeds θ on {bad} of {checked} (row, S) cases" if bad else "",
                   checked=checked, violations=bad)
