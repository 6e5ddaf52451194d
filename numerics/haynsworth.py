"""C14's Haynsworth eigenvalue count, written once over an arithmetic passed in.

For the LayerNorm Jacobian at centred input c (rows of an (n, d) array),
s² = ‖c‖²/d + eps and D = diag(γ²), the matrix A = s² J Jᵀ = D − VVᵀ has, for λ not
among the D_i (numerics.layernorm_spectral's docstring has the derivation),

    #{eigenvalues of A above λ} = #{D_i > λ} + npos(S(λ)) − 2,
    S(λ) = I₂ − Vᵀ(D − λI)⁻¹V,  det S = (1 − a)(1 − b) − κg²/d,  tr S = 2 − a − b,

with α = σ²/s², κ = (2 − α)/(d s²), t_i = D_i − λ, a = Σ D_i/t_i / d,
b = κ Σ D_i c_i²/t_i, g = Σ D_i c_i/t_i.

The same expression is evaluated in three arithmetics: exact (numpy object arrays
of Fractions), float64 (an estimate) and outward-rounded intervals
(numerics.interval), which differ only in how a sign is decided: a point value
has a sign; an interval has one only when it excludes 0.
"""
from __future__ import annotations

import numpy as np

from .interval import Interval


class PointArith:
    """Exact (object arrays of Fraction) or float64 arithmetic: every sign is decided."""

    @staticmethod
    def sq(x):
        return x * x

    @staticmethod
    def sum(x):
        return x.sum(-1)

    @staticmethod
    def lt0(x):
        return np.asarray(x < 0, dtype=bool)

    @staticmethod
    def gt0(x):
        return np.asarray(x > 0, dtype=bool)

    @staticmethod
    def eq0(x):
        return np.asarray(x == 0, dtype=bool)


class IntervalArith:
    """Outward-rounded intervals: a sign is decided only when the interval excludes 0."""

    @staticmethod
    def sq(x: Interval) -> Interval:
        return x.sq()

    @staticmethod
    def sum(x: Interval) -> Interval:
        return x.sum()

    @staticmethod
    def lt0(x: Interval):
        return x.hi < 0

    @staticmethod
    def gt0(x: Interval):
        return x.lo > 0

    @staticmethod
    def eq0(x: Interval):
        return (x.lo == 0) & (x.hi == 0)


POINT, INTERVAL = PointArith(), IntervalArith()


def count_above(ar, c, s2, D, lam) -> np.ndarray:
    """Eigenvalues of A above λ per row, or −1 where the arithmetic cannot decide.

    c: (n, d) centred rows; s2: (n,) = σ² + eps; D: (d,) = γ²; lam: (n,), all in
    the arithmetic ``ar`` (POINT or INTERVAL).  −1 is returned where λ lies on a
    pole (some t_i = 0, or an interval t_i that contains 0) or where the sign of
    det S / tr S is undecided.  Counts are exact whenever they are not −1.
    """
    d = c.shape[-1]
    alpha = ar.sum(ar.sq(c)) / d / s2
    kappa = (2 - alpha) / (d * s2)
    t = D[None, :] - lam[:, None]
    Dt = D[None, :] / t
    a = ar.sum(Dt) / d
    b = kappa * ar.sum(Dt * ar.sq(c))
    g = ar.sum(Dt * c)
    det = (1 - a) * (1 - b) - kappa * ar.sq(g) / d
    tr = 2 - a - b
    neg, pos, zero = ar.lt0(det), ar.gt0(det), ar.eq0(det)
    # npos(S) from det and trace: det < 0 → one positive eigenvalue; det > 0 → both of tr's sign;
    # det = 0 → one zero eigenvalue, the other of tr's sign
    npos = np.where(neg, 1, np.where(pos & ar.gt0(tr), 2,
                    np.where((pos | zero) & (ar.lt0(tr) | ar.eq0(tr)), 0,
                             np.where(zero & ar.gt0(tr), 1, -99))))
    t_pos, t_neg = ar.gt0(t), ar.lt0(t)
    pole = ~(t_pos | t_neg).all(-1)
    return np.where(pole | (npos < 0), -1, t_pos.sum(-1) + npos - 2)
