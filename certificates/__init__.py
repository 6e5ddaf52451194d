"""Rigorous two-sided bounds on θ(p) for attention rows (arXiv:2602.18849v2, C2 and C7).

Python API::

    import certificates
    c = certificates.certify(rows, tolerance=1e-6)   # rows: (n, L) numpy array or torch tensor
    c.theta_lo, c.theta_hi, c.gap_lo, c.gap_hi, c.p_max, c.regime, c.witness
    r = certificates.probe(model, inputs)            # a loaded transformers model (eager attention)
    r.rows, r.layer, r.head, r.stack, r.kind, r.certificates

The command line is ``python -m certificates certify|verify|report|probe`` (docs/certificates.md).
The API is imported on first use, so ``import certificates`` stays light and verify never
loads the certify pipeline.
"""
from __future__ import annotations

__all__ = ["Certificates", "certify", "probe"]


def certify(rows, tolerance: float = 1e-6, **kwargs):
    """Certified bounds on θ for every row of ``rows``; see :func:`certificates.api.certify`."""
    from .api import certify as _certify
    return _certify(rows, tolerance, **kwargs)


def probe(model, inputs, **kwargs):
    """Capture and certify every attention row of a loaded model; see :func:`certificates.probe_api.probe`.

    (The command line lives in ``certificates.probe_cli``: a submodule named ``probe`` would
    replace this function as the package attribute when imported.)
    """
    from .probe_api import probe as _probe
    return _probe(model, inputs, **kwargs)


def __getattr__(name):
    if name == "Certificates":
        from .api import Certificates
        return Certificates
    raise AttributeError(f"module 'certificates' has no attribute {name!r}")
