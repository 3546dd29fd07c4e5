"""The precision ladder of ``verify.kernel`` (claims C5, C6).

A negative eigenvalue of a kernel's float Gram is put through the ladder:
the Gram is re-evaluated with ``k.gram_mp(X, dps=...)`` at increasing
precision and the Rayleigh quotient of the witness is recomputed; a value
that comes to ``>= 0`` was rounding, one that stays negative as precision
rises is a real violation (see :mod:`kernelcheck._src.verify.kernels.kernel`).
"""

from __future__ import annotations

import mpmath
import numpy as np

__all__ = ["LADDER_DPS", "precision_ladder", "rayleigh_mp", "rounding_reason"]

#: Decimal precisions of the precision ladder.
LADDER_DPS = (30, 60, 120)


def rayleigh_mp(G, v, dps: int) -> tuple[float, float]:
    """``v^T G v / v^T v`` in mpmath at ``dps`` digits and an error bound.

    The bound assumes each entry of ``G`` is within ``10**(3 - dps)`` of its
    exact value relative to the largest entry (mpmath's own rounding at
    ``dps`` digits, with 1000 ulps of room for the kernel's formula).
    """
    n = len(v)
    with mpmath.workdps(dps + 10):
        vm = [mpmath.mpf(float(x)) if not isinstance(x, int) else mpmath.mpf(x) for x in v]
        num = mpmath.mpf(0)
        absn = mpmath.mpf(0)
        for i in range(n):
            if vm[i] == 0:
                continue
            row = mpmath.fdot([G[i, j] for j in range(n)], vm)
            num += vm[i] * row
            absn += abs(vm[i]) * mpmath.fsum(abs(G[i, j] * vm[j]) for j in range(n))
        den = mpmath.fsum(x * x for x in vm)
        q = num / den
        err = mpmath.mpf(10) ** (3 - dps) * absn / den
        return float(q), float(err)


def rounding_reason(lam: float, q64: float, step: str, qlast: float) -> str:
    """Why a negative eigenvalue of the float Gram is rounding: what the ladder showed.

    The eigenvector's Rayleigh quotient recomputed in float64 (``q64``) may
    be negative, and then shrinks with precision, or already ``>= 0``: both
    are roundings of an exact value ``>= 0`` (which of them a machine gives
    depends on its BLAS), and the reason says which.
    """
    if q64 < 0:
        return (
            f"float64 Gram has lambda_min ~ {lam:.3g} < 0 (witness value {q64:.3g}), which "
            f"shrinks with precision ({step}: {qlast:.3g}): rounding, not a violation"
        )
    return (
        f"float64 Gram has lambda_min ~ {lam:.3g} < 0, but its eigenvector's Rayleigh quotient "
        f"is {q64:.3g} >= 0 in float64 and {qlast:.3g} at {step}: rounding, not a violation"
    )


def precision_ladder(k, X: np.ndarray, v, q64: float) -> tuple[tuple, str, float]:
    """Run the precision ladder on witness ``v``; returns (ladder, verdict, last value)."""
    steps = [("float64", float(q64))]
    values = []
    for dps in LADDER_DPS:
        G = k.gram_mp(X, dps=dps)
        q, err = rayleigh_mp(G, v, dps)
        steps.append((f"dps={dps}", q))
        values.append((q, err))
        if len(values) >= 2:
            (q1, e1), (q2, e2) = values[-2], values[-1]
            if q2 >= -e2:
                return tuple(steps), "rounding", q2
            if q2 < -e2 and abs(q2 - q1) <= 1e-3 * abs(q2) + e1 + e2:
                return tuple(steps), "violation", q2
    q, err = values[-1]
    return tuple(steps), ("rounding" if q >= -err else "inconclusive"), q
