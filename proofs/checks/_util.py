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
