"""Reference formulas the attention tests compute independently of the code under test.

* :func:`brute_linear` -- linear attention by its definition: the Gram block
  ``G = phi_q phi_k^T`` (lower triangle when causal), then ``(G V) / (G 1)``;
* :func:`quotient_bound` -- the bound of a quotient of two computed sums, as
  the docstring of ``attention/common/bounds.py``'s ``quotient_bound`` states it
  (``(E_num + R E_den) / lo1 + r u R (1 + u)``, in float64), shared by the
  linear and kernelized families' bounds.
"""

from __future__ import annotations

import numpy as np

#: The unit roundoff of float64.
U = 2.0**-53


def brute_linear(pq, pk, V, causal):
    """Direct formula: G = phi_q phi_k^T, masked, then (G V) / (G 1); and the normalisers."""
    G = np.einsum("...id,...jd->...ij", pq, pk)
    if causal:
        G = np.tril(G)
    return (G @ V) / G.sum(axis=-1)[..., None], G.sum(axis=-1)


def quotient_bound(absH, E, den, roundings=1):
    """(E_num + R E_den) / lo1 + r u R (1 + u), in float64; inf where lo2 <= 0."""
    E_num, E_den = E[..., :-1], E[..., -1:]
    den = den[..., None]
    lo1, lo2 = den - E_den, den - 2 * E_den
    R = (absH[..., :-1] + E_num) / lo2
    err = (E_num + R * E_den) / lo1 + roundings * U * R * (1 + U)
    return np.where(lo2 > 0, err, np.inf)
