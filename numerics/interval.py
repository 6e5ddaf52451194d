"""Outward-rounded interval arithmetic on float64 arrays (C14's certified enclosures).

An :class:`Interval` holds two float64 arrays ``lo ≤ hi`` that enclose the exact
value elementwise.  Every operation computes its endpoints in round-to-nearest
and then moves them one ulp outward (numerics.rounding), so the enclosure stays
rigorous whatever the inputs' magnitudes.  Division by an interval that contains
0 gives (−inf, +inf).  Only what the Haynsworth count needs is implemented.
"""
from __future__ import annotations

import numpy as np

from .rounding import down, up


class Interval:
    __slots__ = ("lo", "hi")
    __array_ufunc__ = None   # make ndarray ∘ Interval defer to the Interval operators

    def __init__(self, lo, hi=None):
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = self.lo if hi is None else np.asarray(hi, dtype=np.float64)

    @staticmethod
    def of(v) -> "Interval":
        """The point interval [v, v] (v taken at its exact float64 value), or v itself."""
        return v if isinstance(v, Interval) else Interval(v)

    @property
    def shape(self) -> tuple:
        return np.broadcast_shapes(self.lo.shape, self.hi.shape)

    def __getitem__(self, key) -> "Interval":
        return Interval(self.lo[key], self.hi[key])

    def __add__(self, o):
        o = Interval.of(o)
        return Interval(down(self.lo + o.lo), up(self.hi + o.hi))

    __radd__ = __add__

    def __sub__(self, o):
        o = Interval.of(o)
        return Interval(down(self.lo - o.hi), up(self.hi - o.lo))

    def __rsub__(self, o):
        return Interval.of(o) - self

    def __mul__(self, o):
        o = Interval.of(o)
        p = np.stack(np.broadcast_arrays(self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi))
        return Interval(down(p.min(0)), up(p.max(0)))

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = Interval.of(o)
        bad = (o.lo <= 0) & (o.hi >= 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.stack(np.broadcast_arrays(self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi))
        return Interval(np.where(bad, -np.inf, down(p.min(0))), np.where(bad, np.inf, up(p.max(0))))

    def __rtruediv__(self, o):
        return Interval.of(o) / self

    def sq(self) -> "Interval":
        """x², tighter than x·x when the interval straddles 0."""
        a, b = self.lo * self.lo, self.hi * self.hi
        lo = np.where((self.lo <= 0) & (self.hi >= 0), 0.0, np.minimum(a, b))
        return Interval(np.maximum(down(lo), 0.0), up(np.maximum(a, b)))   # a square is ≥ 0

    def sum(self) -> "Interval":
        """Σ over the last axis, term by term with outward rounding (any order is valid)."""
        acc = Interval(np.zeros(self.lo.shape[:-1]))
        for i in range(self.lo.shape[-1]):
            acc = acc + self[..., i]
        return acc
