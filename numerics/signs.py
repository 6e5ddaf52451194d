"""Sign vectors {±1}^L and subset masks, enumerated once for every exhaustive search.

‖A‖_{∞→1} (C2) and the B→B norm for d_in = 1 (C8–C10) are maxima of convex
functions over a cube, attained at a vertex x ∈ {±1}^L; x and −x give the same
value, so the half with x_0 = +1 suffices.  Subsets S ⊆ {0, …, L−1} are the
same objects: bit i of the mask is set iff x_i = +1.
"""
from __future__ import annotations

import numpy as np


def sign_matrix(L: int, *, half: bool = True) -> np.ndarray:
    """All x ∈ {±1}^L as the rows of an int64 array (with half=False, row r has x_i = −1 iff bit i of r).

    ``half=True`` keeps the 2^(L−1) vectors with x_0 = +1 (enough whenever x and −x
    give the same value); ``half=False`` gives all 2^L.
    """
    if L < 1:
        raise ValueError(f"sign vectors need L ≥ 1, got {L}")
    if half:
        return np.concatenate([np.ones((1 << (L - 1), 1), dtype=np.int64), sign_matrix(L - 1, half=False)],
                              axis=1) if L > 1 else np.ones((1, 1), dtype=np.int64)
    return 1 - 2 * mask_matrix(L)


def mask_matrix(L: int) -> np.ndarray:
    """The 0/1 indicator rows of all 2^L subsets, in mask order (row r = bits of r), int64."""
    idx = np.arange(1 << L, dtype=np.int64)
    return (idx[:, None] >> np.arange(L, dtype=np.int64)) & 1


def sign_tuples(L: int, *, half: bool = True):
    """The rows of :func:`sign_matrix` as tuples of Python ints (for exact and symbolic code)."""
    return [tuple(r) for r in sign_matrix(L, half=half).tolist()]
