"""z3 checks of C4 (dominant atom) and C5 (θ against p_max, with the sawtooth).

Query machinery and conventions as in :mod:`proofs.checks._z3`: each
statement's negation must be unsat, an unknown fails, and every negative
control must be sat with a model that replays exactly in Fractions.

Symmetry used (justified once here): θ(p) = max_S 4p(S)(1 − p(S)) is
invariant under permuting positions (S ranges over all subsets) and
4a(1 − a) is unchanged by S ↔ Sᶜ.  So the largest atom may be put at
position 0 (and the row sorted, for C5), and only subsets S not containing
the last position need a constraint.

Precision contract: exact (z3 real arithmetic; rational replay of models).
"""
from __future__ import annotations

from fractions import Fraction

import z3

from numerics.theta import SAWTOOTH, theta_bruteforce

from ..registry import Evidence, check
from ._z3 import (FULL_TIMEOUT_MS, QUERY_TIMEOUT_MS, Tally, both_refuted, model_row, proved, refuted_by_model,
                  run_query, simplex, split, subsets_without_last)

F = Fraction


def theta_fraction(p) -> Fraction:
    """θ of a model's row in exact arithmetic (numerics.theta; replay of nonnegative rows only)."""
    return theta_bruteforce(p).theta


def _is_row(p, nonneg=True) -> bool:
    return p is not None and sum(p) == 1 and (not nonneg or min(p) >= 0)


# ----------------------------------------------------------------------------- C4

def c4_queries(L: int, half: bool = True) -> Tally:
    """∃ p in the simplex, p_0 the largest atom, p_0 ≥ 1/2, S with 4p(S)(1−p(S)) > 4p_0(1−p_0)?

    If p_0 ≥ 1/2 then every other atom is ≤ 1 − p_0 ≤ p_0, so p_0 is the max
    and relabelling makes any row with m ≥ 1/2 of this form.  Positions
    1..L−1 stay symmetric, so S is represented by (0 ∈ S, |S ∖ {0}|).
    ``half=False`` drops p_0 ≥ 1/2 (keeping p_0 ≥ p_i): the negative control.
    """
    tally = Tally()
    for with0 in (True, False):
        for j in range(L):
            S = ([0] if with0 else []) + list(range(1, 1 + j))
            p, cons = simplex(L)
            hyp = [p[0] >= F(1, 2)] if half else [p[0] >= p[i] for i in range(1, L)]
            tally.add(f"L={L} S={S}", run_query([*cons, *hyp, split(p, S) > 4 * p[0] * (1 - p[0])]))
    return tally


def c4_interval_lemma(half: bool = True) -> Tally:
    """The L-independent step of C4, variables a = p(S) and m = p_max only.

    If S holds the max atom then a ≥ m, otherwise S lies in the rest and
    a ≤ 1 − m; with m ≥ 1/2 either way 4a(1 − a) ≤ 4m(1 − m).
    """
    a, m = z3.Reals("a m")
    hyp = [m >= F(1, 2)] if half else [m >= 0]
    tally = Tally()
    tally.add("4a(1−a) > 4m(1−m), a ≥ m or a ≤ 1 − m",
              run_query([*hyp, m <= 1, a >= 0, a <= 1, z3.Or(a >= m, a <= 1 - m),
                         4 * a * (1 - a) > 4 * m * (1 - m)]))
    return tally


@check("C4", "z3", scope="L ≤ 6 (quick), L ≤ 8 (full); and the one-variable lemma for every L")
def c4_z3_dominant(tier="quick"):
    """C4: with m ≥ 1/2 every split is ≤ 4m(1 − m); the singleton {argmax} attains it."""
    tally = c4_interval_lemma()
    top = 6 if tier == "quick" else 8
    for L in range(1, top + 1):
        sub = c4_queries(L)
        tally.results += sub.results
        tally.labels += sub.labels
    return proved(tally, f"L ≤ {top}, and every L via the (a, m) lemma",
                  "C4: 4p(S)(1 − p(S)) ≤ 4m(1 − m) when m ≥ 1/2 (equality at S = {argmax})")


@check("C4", "z3", scope="L = 4 without m ≥ 1/2; (a, m) lemma without m ≥ 1/2", negative_control=True,
       guards=("c4_z3_dominant",))
def c4_z3_neg_no_half(tier="quick"):
    """Without m ≥ 1/2 (uniform on 4 atoms: θ = 1 > 3/4) both encodings must find a model."""
    L = 4
    tally = c4_queries(L, half=False)

    def replay(model):
        p = model_row(model, L)
        return _is_row(p) and p[0] == max(p) and theta_fraction(p) > 4 * p[0] * (1 - p[0])
    ev = refuted_by_model(tally, f"L = {L}", "θ = 4m(1 − m) without m ≥ 1/2", replay)
    lemma = c4_interval_lemma(half=False)

    def replay_lemma(model):
        a, m = model.get("a"), model.get("m")
        return (a is not None and m is not None and 0 <= m <= 1 and 0 <= a <= 1
                and (a >= m or a <= 1 - m) and 4 * a * (1 - a) > 4 * m * (1 - m))
    ev2 = refuted_by_model(lemma, "(a, m)", "(a, m) lemma without m ≥ 1/2", replay_lemma)
    if ev2.status != "pass":
        return ev2
    ev.numbers["lemma_counterexample"] = ev2.numbers["counterexample"]
    ev.detail += f"; {ev2.detail}"
    return ev


# ----------------------------------------------------------------------------- C5: 1 − m²

def sorted_row(L: int):
    """Sorted simplex p_0 ≥ … ≥ p_{L−1} ≥ 0 with m = p_0 (WLOG, see module docstring)."""
    p, cons = simplex(L)
    return p, cons + [p[i] >= p[i + 1] for i in range(L - 1)]


def below_bound_query(L: int, bound, interval=None, timeout_ms: int = QUERY_TIMEOUT_MS):
    """∃ sorted p with every split < bound(m)?  Unsat iff θ ≥ bound(m) on that set."""
    p, cons = sorted_row(L)
    m = p[0]
    if interval is not None:
        cons += [m >= interval[0], m <= interval[1]]
    cons += [split(p, S) < bound(m) for S in subsets_without_last(L)]
    return run_query(cons, timeout_ms=timeout_ms)


def _c5_scopes(tier):
    return range(1, 7) if tier == "quick" else range(1, 9)


@check("C5", "z3", scope="L ≤ 6 (quick), L ≤ 8 (full)")
def c5_z3_pmax_bounds(tier="quick"):
    """C5: θ ≥ 4m(1 − m) (the singleton) and θ ≥ 1 − m² (prefix crossing: δ ≤ m)."""
    tally = Tally()
    ms = QUERY_TIMEOUT_MS if tier == "quick" else FULL_TIMEOUT_MS
    for L in _c5_scopes(tier):
        tally.add(f"L={L} θ < 4m(1−m)", below_bound_query(L, lambda m: 4 * m * (1 - m), timeout_ms=ms))
        tally.add(f"L={L} θ < 1 − m²", below_bound_query(L, lambda m: 1 - m * m, timeout_ms=ms))
    top = max(_c5_scopes(tier))
    return proved(tally, f"L ≤ {top}", "C5: θ ≥ max(4m(1 − m), 1 − m²)")


@check("C5", "z3", scope="L = 4, bound 1 − m²/4", negative_control=True, guards=("c5_z3_pmax_bounds",))
def c5_z3_neg_strong(tier="quick"):
    """Too strong: θ ≥ 1 − m²/4 must be refuted by a model, replayed exactly."""
    L = 4
    tally = Tally()
    tally.add(f"L={L} θ < 1 − m²/4", below_bound_query(L, lambda m: 1 - m * m / 4))

    def replay(model):
        p = model_row(model, L)
        return _is_row(p) and theta_fraction(p) < 1 - max(p) ** 2 / 4
    return refuted_by_model(tally, f"L = {L}", "θ ≥ 1 − m²/4", replay)


@check("C5", "z3", scope="L = 3, m ∈ [1/4, 1/2], bound 1 − (99m/100)²", negative_control=True,
       guards=("c5_z3_pmax_bounds",))
def c5_z3_neg_sharp(tier="quick"):
    """1 − m² is attained at m = 1/3 (uniform on 3 atoms): 1% less δ must be refuted.

    m is kept in [1/4, 1/2] so the model is near that tight point, not the
    trivial one m = 1 (θ = 0).
    """
    L, c, box = 3, F(99, 100), (F(1, 4), F(1, 2))
    tally = Tally()
    tally.add(f"L={L} θ < 1 − (99m/100)²", below_bound_query(L, lambda m: 1 - (c * m) ** 2, interval=box))

    def replay(model):
        p = model_row(model, L)
        return (_is_row(p) and box[0] <= max(p) <= box[1]
                and theta_fraction(p) < 1 - (c * max(p)) ** 2)
    return refuted_by_model(tally, f"L = {L}", "θ ≥ 1 − (99m/100)²", replay)


# ----------------------------------------------------------------------------- C5: the sawtooth

# SAWTOOTH (numerics.theta): per piece (interval, δ*(m), extremal row p(m), witness S with
# |1 − 2p(S)| = δ*), θ_min(m) = 1 − δ*(m)².  Rows are padded with zeros to length L (C6).


def _piece_name(interval) -> str:
    return f"[{interval[0]}, {interval[1]}]"


def sawtooth_attainment(L: int, k: int, dscale: Fraction = F(1)) -> Tally:
    """θ(p(m)) = 1 − δ*(m)² for every m in piece k's interval (p(m) padded to length L).

    Three negations, each unsat: (a) p(m) is a sorted row of the simplex with
    largest atom m; (b) some split exceeds 1 − δ*²; (c) the witness split
    differs from 1 − δ*².  ``dscale`` ≠ 1 replaces δ* by dscale·δ* in the
    target (negative controls): below 1 makes (c) sat, above 1 makes (b) sat.
    """
    (lo, hi), dstar, fam, wit = SAWTOOTH[k]
    m = z3.Real("m")
    row = fam(m)
    row = row + [z3.RealVal(0)] * (L - len(row))
    box = [m >= lo, m <= hi]
    target = 1 - (z3.RealVal(str(dscale)) * dstar(m)) ** 2
    bad_row = z3.Or(z3.Sum(row) != 1, *[row[i] < row[i + 1] for i in range(L - 1)], row[-1] < 0)
    tally = Tally()
    name = _piece_name((lo, hi))
    tally.add(f"L={L} {name} row", run_query([*box, bad_row]))
    tally.add(f"L={L} {name} all splits ≤ target",
              run_query([*box, z3.Or(*[split(row, S) > target for S in subsets_without_last(L)])]))
    tally.add(f"L={L} {name} witness", run_query([*box, split(row, wit) != target]))
    return tally


def sawtooth_lower(L: int, k: int, shrink: Fraction = F(1), timeout_ms: int = QUERY_TIMEOUT_MS):
    """∃ sorted p with max m in piece k's interval and θ(p) < 1 − (shrink·δ*(m))²?"""
    (lo, hi), dstar, _, _ = SAWTOOTH[k]
    return below_bound_query(L, lambda m: 1 - (shrink * dstar(m)) ** 2, interval=(lo, hi),
                             timeout_ms=timeout_ms)


def _sawtooth_exact_points(L: int) -> bool:
    """Independent replay: θ of p(m) in Fractions at both ends and the middle of each piece."""
    for (lo, hi), dstar, fam, _ in SAWTOOTH:
        for m in (lo, (lo + hi) / 2, hi):
            row = fam(m) + [F(0)] * (L - len(fam(m)))
            if theta_fraction(row) != 1 - dstar(m) ** 2 or max(row) != m:
                return False
    return True


def _sawtooth(tier) -> Evidence:
    # Beyond L ≤ 6: the full tier proves the lower bound up to L = 8.
    L, ms = (6, QUERY_TIMEOUT_MS) if tier == "quick" else (8, FULL_TIMEOUT_MS)
    tally = Tally()
    for k in range(len(SAWTOOTH)):
        sub = sawtooth_attainment(6, k)  # piece [7/27, 2/7] needs six atoms
        tally.results += sub.results
        tally.labels += sub.labels
        for n in range(1, L + 1):
            tally.add(f"L={n} {_piece_name(SAWTOOTH[k][0])} lower bound",
                      sawtooth_lower(n, k, timeout_ms=ms))
    ev = proved(tally, f"lower bound L ≤ {L}; attainment L = 6 (and any longer L by zero atoms)",
                "C5 sawtooth: θ ≥ 1 − δ*(m)² on [1/5, 1/2] and equality at the extremal rows")
    exact = _sawtooth_exact_points(6)
    ev.numbers["exact_point_replay"] = exact
    if not exact:
        ev.status = "fail"
        ev.detail += "; exact Fraction replay of an extremal row disagrees"
    return ev


@check("C5", "z3", scope="sawtooth on [1/5, 1/2]: lower bound and attainment L ≤ 6")
def c5_z3_sawtooth(tier="quick"):
    """C5: the exact minimum of θ at fixed m on four sawtooth pieces (small L only)."""
    return _sawtooth("quick")


@check("C5", "z3", scope="sawtooth on [1/5, 1/2]: lower bound L ≤ 8, attainment L = 6", tier="full")
def c5_z3_sawtooth_full(tier="full"):
    """C5 sawtooth with the lower bound up to L = 8 (a conjecture beyond the checked lengths)."""
    return _sawtooth("full")


@check("C5", "z3", scope="L = 6, piece [7/27, 2/7] with δ* shrunk by 1%", negative_control=True,
       guards=("c5_z3_sawtooth", "c5_z3_sawtooth_full"))
def c5_z3_neg_sawtooth(tier="quick"):
    """δ* shrunk by 1% (so the θ bound is too strong) must be refuted by a model."""
    L, k, shrink = 6, 2, F(99, 100)
    tally = Tally()
    tally.add(f"L={L} {_piece_name(SAWTOOTH[k][0])} shrunk δ*", sawtooth_lower(L, k, shrink))
    (lo, hi), dstar, _, _ = SAWTOOTH[k]

    def replay(model):
        p = model_row(model, L)
        return (_is_row(p) and lo <= max(p) <= hi
                and theta_fraction(p) < 1 - (shrink * dstar(max(p))) ** 2)
    return refuted_by_model(tally, f"L = {L}", "sawtooth δ* shrunk by 1%", replay)


def _witness_split(row, wit) -> Fraction:
    a = sum(row[i] for i in wit)
    return 4 * a * (1 - a)


def _attainment_query(L: int, k: int, dscale: Fraction, which: str) -> Tally:
    """Only the attainment query whose label ends in ``which`` (one query, same encoding)."""
    full = sawtooth_attainment(L, k, dscale)
    out = Tally()
    for lab, r in zip(full.labels, full.results):
        if lab.endswith(which):
            out.add(f"{lab} (δ* × {dscale})", r)
    return out


@check("C5", "z3", scope="L = 6, piece [7/27, 2/7]: attainment with δ* × 99/100 and × 101/100",
       negative_control=True, guards=("c5_z3_sawtooth", "c5_z3_sawtooth_full"))
def c5_z3_neg_attainment(tier="quick"):
    """Wrong attainment targets 1 − (c·δ*)² must each be refuted by a model replayed in Fractions.

    c = 99/100: the witness query must be sat (its split is not the target);
    c = 101/100: the all-splits query must be sat (θ(p(m)) exceeds the target).
    """
    L, k = 6, 2
    (lo, hi), dstar, fam, wit = SAWTOOTH[k]

    def row_at(model):
        m = model.get("m")
        if m is None or not lo <= m <= hi:
            return None, None
        row = fam(m) + [F(0)] * (L - len(fam(m)))
        return m, (row if _is_row(row) and max(row) == m else None)

    def replay(c, wrong):
        def check_model(model):
            m, row = row_at(model)
            return row is not None and wrong(row, 1 - (c * dstar(m)) ** 2)
        return check_model
    shrink, grow = F(99, 100), F(101, 100)
    ev = refuted_by_model(_attainment_query(L, k, shrink, "witness"), f"L = {L}",
                          "witness split = 1 − (99δ*/100)²",
                          replay(shrink, lambda row, t: _witness_split(row, wit) != t
                                 and theta_fraction(row) < t))
    ev2 = refuted_by_model(_attainment_query(L, k, grow, "all splits ≤ target"), f"L = {L}",
                           "θ(p(m)) ≤ 1 − (101δ*/100)²",
                           replay(grow, lambda row, t: theta_fraction(row) > t))
    return both_refuted(ev, ev2, "grow_counterexample")
