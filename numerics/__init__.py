"""The mathematical kernel: θ exact and bounds, norms, Jacobians, LayerNorm, MHA bounds.

One algorithm, several precisions (Fraction, mpmath, float64, torch), chosen by
argument.  No checks and no I/O live here, apart from :mod:`numerics.jitcache` hashing
this package's own sources to key numba's disk cache.
"""

from numerics import jitcache as _jitcache

_jitcache.install()   # numba's cache for numerics/ follows every source file of it
