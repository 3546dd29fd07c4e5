"""Central differences, the independent computation the reference VJPs are tested against."""

from __future__ import annotations

import numpy as np


def central(f, X: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """``(f(X + h e_i) - f(X - h e_i)) / 2h`` for every entry ``i`` of ``X`` (error ``O(h^2)``)."""
    out = np.zeros_like(X)
    for idx in np.ndindex(X.shape):
        Xp, Xm = X.copy(), X.copy()
        Xp[idx] += h
        Xm[idx] -= h
        out[idx] = (f(Xp) - f(Xm)) / (2 * h)
    return out
