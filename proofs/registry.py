"""The claim registry: claims, checks, evidence, and how a status is computed.

A *claim* is one statement of the paper (ids C1…C15, X1, E1–E3).  A *check*
is a plain function registered against a claim id with :func:`check`; it
returns an :class:`Evidence`.  Statuses are computed here and nowhere else:

* a check is ``pass``, ``fail`` or ``skip`` (skip = not measured, with a reason;
  it never counts as a pass);
* a negative control is a check whose job is to refute a deliberately wrong
  statement; it reports ``pass`` when the wrong statement was refuted;
* a claim is ``fail`` if any of its checks failed, ``unchecked`` if none of its
  checks passed, ``partial`` if its own checks passed but something is missing
  (a skipped check, no positive check, or a claim it uses that is not
  ``pass``), and ``pass`` only when all of that holds.
"""
from __future__ import annotations

import dataclasses
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

METHODS = ("sympy", "z3", "exact", "mpmath", "hypothesis", "float64", "empirical", "coq")
CHECK_STATUSES = ("pass", "fail", "skip")
CLAIM_STATUSES = ("pass", "fail", "partial", "unchecked")
# "quick" checks run in every tier; "full" ones only with --full; "coq" ones with --coq or --full.
TIERS = ("quick", "full", "coq")


@dataclass(frozen=True)
class Claim:
    id: str
    title: str
    statement: str
    uses: tuple[str, ...] = ()
    # What the checks do not cover and is taken on trust (shown on the dashboard).
    assumes: tuple[str, ...] = ()
    group: str = ""
    # Commentary shown on the dashboard (qualitative only: measured figures go to --json).
    notes: str = ""
    # "theorem": a statement that checks prove or refute; "measured": a measurement beyond the
    # paper with no hypothesis to accept or reject, whose dashboard status is its verdict.
    kind: str = "theorem"


@dataclass
class Evidence:
    """What one check found.  ``numbers`` must be JSON-serialisable."""

    status: str
    scope: str
    numbers: dict = field(default_factory=dict)
    detail: str = ""
    # For a measured claim: a short categorical outcome (e.g. "condition fails at every token"),
    # shown on the dashboard; it must not carry a measured magnitude.
    verdict: str = ""
    # Filled in by the runner.
    claim: str = ""
    name: str = ""
    method: str = ""
    negative_control: bool = False
    guards: tuple = ()
    tier: str = "quick"
    source: str = ""
    seconds: float = 0.0

    def __post_init__(self):
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"check status must be one of {CHECK_STATUSES}, got {self.status!r}")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Check:
    claim: str
    name: str
    method: str
    func: Callable[..., Evidence]
    negative_control: bool
    tier: str  # "quick": every tier; "full": only with --full; "coq": with --coq or --full
    scope: str  # declared scope: what the dashboard shows (a run's own scope goes to --json)
    guards: tuple[str, ...] = ()  # for a negative control: the names of the checks it guards

    @property
    def source(self) -> str:
        """``path/to/file.py:line`` of the check function, relative to the repository."""
        import os
        code = self.func.__code__
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.relpath(os.path.abspath(code.co_filename), root).replace(os.sep, "/")
        return f"{path}:{code.co_firstlineno}"

    def run(self, tier: str) -> Evidence:
        t0 = time.perf_counter()
        try:
            ev = self.func(tier=tier)
            if not isinstance(ev, Evidence):
                raise TypeError(f"check returned {type(ev).__name__}, not Evidence")
        except Exception as exc:  # a crash is a failure, never a pass
            ev = Evidence("fail", self.scope, detail=f"crashed: {exc!r}\n{traceback.format_exc(limit=4)}")
        ev.claim, ev.name, ev.method = self.claim, self.name, self.method
        ev.negative_control, ev.tier = self.negative_control, self.tier
        ev.guards, ev.source = tuple(self.guards), self.source
        ev.seconds = time.perf_counter() - t0
        return ev


CLAIMS: dict[str, Claim] = {}
CHECKS: list[Check] = []


def add_claim(claim: Claim) -> None:
    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id} registered twice")
    CLAIMS[claim.id] = claim


def check(claim: str, method: str, *, scope: str, negative_control: bool = False,
          tier: str = "quick", name: str | None = None, guards: tuple[str, ...] | list[str] = ()):
    """Register ``func(tier=...) -> Evidence`` as a check of ``claim``.

    ``tier="quick"`` checks run in every tier (a check may do more work when
    called with ``tier="full"``); ``tier="full"`` checks run only with --full;
    ``tier="coq"`` checks run with --coq (and with --full).  A negative control
    names in ``guards`` the positive check(s) whose machinery it exercises.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}")
    if isinstance(guards, str):
        guards = (guards,)
    if guards and not negative_control:
        raise ValueError("only a negative control guards other checks")

    def deco(func):
        CHECKS.append(Check(claim, name or func.__name__, method, func, negative_control, tier, scope,
                            tuple(guards)))
        # A stable order whatever imported the check modules first: by module, then by line.
        CHECKS.sort(key=lambda c: (c.func.__module__, c.func.__code__.co_firstlineno))
        return func

    return deco


def own_status(evidence: list[Evidence]) -> str:
    """Status of a claim from its own evidence only (no dependencies)."""
    if any(e.status == "fail" for e in evidence):
        return "fail"
    positives = [e for e in evidence if not e.negative_control and e.status == "pass"]
    if not positives:
        return "unchecked"
    if any(e.status != "pass" for e in evidence):
        return "partial"
    return "pass"


def claim_statuses(evidence_by_claim: dict[str, list[Evidence]]) -> dict[str, str]:
    """Final status of every claim: own evidence combined with what it uses.

    A claim is ``pass`` only when its own checks all pass and every claim it
    uses (transitively) is ``pass``; otherwise a claim whose own checks pass
    is ``partial``.
    """
    own = {cid: own_status(evidence_by_claim.get(cid, [])) for cid in CLAIMS}
    final: dict[str, str] = {}

    def resolve(cid: str, stack: tuple[str, ...] = ()) -> str:
        if cid in final:
            return final[cid]
        if cid in stack:
            raise ValueError(f"cycle in claim dependencies: {' -> '.join(stack + (cid,))}")
        status = own[cid]
        if status == "pass":
            for dep in CLAIMS[cid].uses:
                if resolve(dep, stack + (cid,)) != "pass":
                    status = "partial"
        final[cid] = status
        return status

    for cid in CLAIMS:
        resolve(cid)
    return final
