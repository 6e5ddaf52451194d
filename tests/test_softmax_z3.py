"""Tests of the z3 checks of C2, C4, C5 (proofs/checks/softmax_z3*.py)."""
from fractions import Fraction as F

import z3

from proofs.checks import _z3 as zq
from proofs.checks import softmax_z3 as sz
from proofs.checks import softmax_z3_bounds as sb


class FakeSolver:
    """Stands in for z3.Solver and answers a fixed verdict (unknown = timeout)."""

    def __init__(self, verdict):
        self.verdict = verdict

    def set(self, *args):
        pass

    def add(self, *args):
        pass

    def check(self):
        return self.verdict

    def reason_unknown(self):
        return "timeout"

    def model(self):
        raise AssertionError("no model for a fake")


def test_unknown_is_never_a_pass():
    r = zq.run_query([], solver=FakeSolver(z3.unknown))
    assert r.verdict == "unknown" and r.reason == "timeout"
    t = zq.Tally()
    t.add("fake", r)
    assert zq.proved(t, "s", "fake").status == "fail"
    assert zq.refuted_by_model(t, "s", "fake", lambda m: True).status == "fail"


def test_one_unknown_among_unsats_fails():
    t = zq.Tally()
    t.add("a", zq.run_query([z3.Real("x") < 0, z3.Real("x") > 0]))
    t.add("b", zq.run_query([], solver=FakeSolver(z3.unknown)))
    ev = zq.proved(t, "s", "mixed")
    assert t.results[0].verdict == "unsat"
    assert ev.status == "fail" and "b: unknown" in ev.detail


def test_real_timeout_maps_to_unknown_and_fail():
    # A 1 ms budget on a nonlinear query that z3 does not settle even in a second.
    x, y, z = z3.Reals("x y z")
    q = [x ** 3 + y ** 3 == 9 * z ** 3, x > 0, y > 0, z > 0, x * y * z > 10 ** 12,
         x ** 5 - 7 * y ** 4 + z ** 2 * x == 3]
    r = zq.run_query(q, timeout_ms=1)
    t = zq.Tally()
    t.add("hard", r)
    assert r.verdict == "unknown"
    assert zq.proved(t, "s", "hard").status == "fail"


def test_empty_tally_is_not_a_proof():
    assert zq.proved(zq.Tally(), "s", "nothing").status == "fail"


def test_negative_control_needs_sat_and_replay():
    x = z3.Real("x")
    t = zq.Tally()
    t.add("sat", zq.run_query([x > 1, x < 2]))
    assert t.results[0].verdict == "sat"
    assert zq.refuted_by_model(t, "s", "w", lambda m: 1 < m["x"] < 2).status == "pass"
    # a model that does not replay, or an unsat query, does not refute anything
    assert zq.refuted_by_model(t, "s", "w", lambda m: False).status == "fail"
    u = zq.Tally()
    u.add("unsat", zq.run_query([x > 1, x < 0]))
    assert zq.refuted_by_model(u, "s", "w", lambda m: True).status == "fail"


def test_pair_orbits_cover_all_pairs():
    for L in range(1, 5):
        orbits = sz.pair_orbits(L)
        assert sum(orbits.values()) == 4 ** L
    # by hand: L = 1 has the orbits {(+,+), (−,−)} and {(+,−), (−,+)}
    assert sorted(sz.pair_orbits(1).values()) == [2, 2]


def test_bilinear_matches_hand_value():
    # p = (1/2, 1/4, 1/4), x = (1, −1, 1), y = (1, 1, −1):
    # Σ p x y = 1/2 − 1/4 − 1/4 = 0; Σ p x = 1/2, Σ p y = 1/2 → yᵀCx = −1/4
    p = [F(1, 2), F(1, 4), F(1, 4)]
    assert zq.f_bilinear(p, [1, 1, -1], [1, -1, 1]) == F(-1, 4)


def test_c2_smallest_scope_passes():
    ev = sz.c2_prove([1, 2, 3])
    assert ev.status == "pass"
    assert ev.numbers["orbits"] == 2 + 5 + 8 and ev.numbers["unknown"] == 0


def test_c2_negative_controls_pass_only_by_sat():
    for f in (sz.c2_z3_neg_half, sz.c2_z3_neg_factor, sz.c2_z3_neg_signed):
        ev = f()
        assert ev.status == "pass" and ev.numbers["sat"] >= 1


def test_block_mass_lemma_and_its_wrong_variant():
    assert sz.c2_block_mass_query().verdict == "unsat"
    assert sz.c2_block_mass_query(scale=F(1, 2)).verdict == "sat"


def test_c4_checks():
    assert sb.c4_queries(3).all_unsat()
    assert sb.c4_interval_lemma().all_unsat()
    ev = sb.c4_z3_neg_no_half()
    assert ev.status == "pass"


def test_c5_bounds_small():
    assert sb.below_bound_query(3, lambda m: 1 - m * m).verdict == "unsat"
    # uniform on 3 atoms: θ = 8/9 = 1 − m², so a bound above it is refuted
    assert sb.c5_z3_neg_sharp().status == "pass"
    assert sb.c5_z3_neg_strong().status == "pass"


def test_sawtooth_pieces_are_continuous_and_attained():
    # δ* agrees at the joints 1/3, 2/7, 7/27 (values worked by hand: 1/3, 1/7, 1/9)
    joints = {F(1, 3): F(1, 3), F(2, 7): F(1, 7), F(7, 27): F(1, 9)}
    for k in range(3):
        lo = sb.SAWTOOTH[k][0][0]
        assert sb.SAWTOOTH[k][1](lo) == sb.SAWTOOTH[k + 1][1](lo) == joints[lo]
    # m = 3/10: row (3/10, 3/10, 3/10, 1/10), best split {0, 1} vs rest: δ = 1/5 = 4m − 1
    assert sb.theta_fraction([F(3, 10)] * 3 + [F(1, 10)]) == 1 - F(1, 5) ** 2
    assert sb.sawtooth_attainment(6, 1).all_unsat()
    assert sb.sawtooth_lower(4, 0).verdict == "unsat"


def test_sawtooth_wrong_piece_is_caught():
    # δ* 1% too small (so the θ bound is too strong) must be refuted by the same lower-bound query
    assert sb.sawtooth_lower(4, 0, shrink=F(99, 100)).verdict == "sat"


def test_block_mass_negative_control_refutes_both_queries():
    ev = sz.c2_z3_neg_block_masses()
    assert ev.status == "pass"
    assert ev.numbers["sat"] == 2 and ev.numbers["unknown"] == 0
    # each model replays by hand: the lemma's on the 4-atom row, the identity's at s
    a, b, c, d = (F(ev.numbers["counterexample"]["model"][k]) for k in "abcd")
    p, x, y = [a, b, c, d], [1, 1, -1, -1], [1, -1, 1, -1]
    yx = zq.f_bilinear(p, y, x)
    assert yx > zq.f_bilinear(p, x, x) / 2 and yx > zq.f_bilinear(p, y, y) / 2
    s = F(ev.numbers["identity_counterexample"]["model"]["s"])
    assert 1 - (2 * s - 1) ** 2 != 3 * s * (1 - s)


def test_square_identity_query_right_and_wrong():
    assert sz.c2_square_identity_query().verdict == "unsat"
    assert sz.c2_square_identity_query(3).verdict == "sat"


def test_block_mass_control_fails_without_sat():
    # the positive statement (scale 1) has no model, so refuted_by_model must fail
    t = zq.Tally()
    t.add("right lemma", sz.c2_block_mass_query())
    assert zq.refuted_by_model(t, "s", "w", sz.replay_block_masses(F(1))).status == "fail"


def test_sawtooth_attainment_negative_control_refutes():
    ev = sb.c5_z3_neg_attainment()
    assert ev.status == "pass" and ev.numbers["sat"] == 2
    assert "witness" in ev.numbers["counterexample"]["query"]
    assert "all splits" in ev.numbers["grow_counterexample"]["query"]
    # the all-splits model: θ of the extremal row beats 1 − (1.01·δ*)², checked by hand formula
    m = F(ev.numbers["grow_counterexample"]["model"]["m"])
    assert F(7, 27) <= m <= F(2, 7)
    row = [m] + [(1 - m) / 5] * 5
    assert sb.theta_fraction(row) > 1 - (F(101, 100) * (6 * m - 1) / 5) ** 2


def test_sawtooth_attainment_scaled_targets():
    # right target: all three unsat; δ* × 99/100 leaves "all splits" unsat but the witness sat
    shrunk = sb.sawtooth_attainment(6, 2, F(99, 100))
    verdicts = {lab.split("] ")[1]: r.verdict for lab, r in zip(shrunk.labels, shrunk.results)}
    assert verdicts == {"row": "unsat", "all splits ≤ target": "unsat", "witness": "sat"}
