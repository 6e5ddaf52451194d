"""Small helpers shared by the check modules."""
from __future__ import annotations

from ..registry import Evidence


def verdict(ok: bool, scope: str, detail: str = "", **numbers) -> Evidence:
    """pass iff ``ok`` is exactly True (a NaN comparison or None is a failure)."""
    return Evidence("pass" if ok is True else "fail", scope, numbers=numbers, detail=detail)


def refuted(found_counterexample: bool, scope: str, detail: str = "", **numbers) -> Evidence:
    """Evidence for a negative control: pass iff the wrong statement was refuted."""
    return Evidence("pass" if found_counterexample is True else "fail", scope, numbers=numbers,
                    detail=detail or ("wrong variant refuted" if found_counterexample
                                      else "wrong variant NOT refuted: the check cannot fail"))


def worst(values) -> float:
    """Largest of ``values``, or +inf if any is NaN or infinite.

    Python's max() silently drops a NaN that is not in first position, which
    would let a broken computation pass a ``worst < tol`` test.
    """
    import math
    out = -math.inf
    for v in values:
        f = float(v)
        if not math.isfinite(f):
            return math.inf
        out = max(out, f)
    return out


def nanmax(a, b) -> float:
    """max(a, b) that turns a NaN on either side into +inf (so a tolerance test fails)."""
    import math
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return max(a, b)


def nanmin(a, b) -> float:
    """min(a, b) that turns a NaN on either side into −inf (so a lower-bound test fails)."""
    import math
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return -math.inf
    return min(a, b)
