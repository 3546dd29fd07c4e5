"""The precision ladder of ``verify.kernel`` (claims C5, C6).

A negative eigenvalue of a kernel's float Gram is put through the ladder:
the Gram is re-evaluated with ``k.gram_mp(X, dps=...)`` at increasing
precision and the Rayleigh quotient of the witness is recomputed; a value
that comes to ``>= 0`` was rounding, one that stays negative as precision
rises is a real violation (see :mod:`kernelcheck._src.verify.kernels.kernel`).

A kernel with neither an mpmath evaluation nor an error model is judged by
:func:`unmodelled_witness`: a long double re-evaluation where the function
keeps that format, else a margin no rounding-level error reaches.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from kernelcheck._src.core.rounding import gamma, unit_roundoff

__all__ = [
    "LADDER_DPS",
    "precision_ladder",
    "rayleigh_mp",
    "rounding_reason",
    "unmodelled_witness",
]

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


def _float_witness(v) -> np.ndarray:
    """The witness scaled to ``max |v_i| = 1`` as float64 (exact integers or floats alike)."""
    items = [Fraction(int(x)) if isinstance(x, int) else Fraction(float(x)) for x in v]
    top = max(abs(x) for x in items)
    return np.array([float(x / top) for x in items])


def _rayleigh_ld(G, w: np.ndarray) -> tuple[float, float]:
    """``w^T G w / w^T w`` and ``|w|^T |G| |w| / w^T w``, both in long double arithmetic."""
    wl = np.asarray(w, dtype=np.longdouble)
    Gl = np.asarray(G, dtype=np.longdouble)
    den = wl @ wl
    return float(wl @ Gl @ wl / den), float(np.abs(wl) @ np.abs(Gl) @ np.abs(wl) / den)


def unmodelled_witness(k, X: np.ndarray, G: np.ndarray, v, tol: float):
    """Judge a float witness of a kernel that has no error model: ``(ladder, verdict, value, why)``.

    The float Gram ``G`` of such a kernel (no ``error_bound``, no
    ``mp_function``) can be negative by its own rounding by any amount: a
    formula that cancels -- the Gaussian written ``exp(-(|a|^2 + |b|^2 - 2
    a.b) / 2)`` loses ``log10 |a|^2`` digits -- makes a true kernel's Gram
    indefinite far beyond the float resolution.  So a witness ``v`` with
    ``q64 = v^T G v / v^T v < -tol`` convicts only when confirmed:

    1. **Long double.**  Where ``k.gram_extended(X)`` re-evaluates the
       function in a wider format (``u' = 2^-64`` against ``u = 2^-53``),
       the same formula errs about ``u / u'`` times less; the change
       ``|q64 - q'|`` measures the float64 evaluation's error, and ``e' =
       2 (u' / u) |q64 - q'| + gamma_(2n+4)(u') s`` (``s = |v|^T |G| |v| /
       v^T v``, the quotient's own rounding in long double) the wider
       one's.  ``q' >= -e'``: the negative value was rounding (``passed``);
       ``q' + e' < -tol``: it stays beyond the float resolution in the wider
       format, a violation; otherwise inconclusive.
    2. **Without a wider evaluation** (the function returns float64 for
       long double input, or the platform has no wider long double) the
       float64 evidence alone convicts only beyond ``sqrt(u) s``: an
       evaluation that keeps at least half of float64's digits in every
       entry cannot move the quotient that far, and no formula loses more
       without being useless; a smaller negative value is inconclusive,
       "rounding-level", and the remedy is an error model
       (``kernel_from_function(..., error_bound=)``) or an mpmath evaluation
       (``mp_function=``).

    A function that returns long double but computes part of its formula in
    float64 inside repeats float64's rounding in "long double" and defeats
    step 1; ``gram_extended`` refuses a result made only of float64 numbers.

    Parameters
    ----------
    k : kernel or callable
        The kernel (a ``FunctionKernel``, or a plain ``f(X) -> Gram``).
    X : numpy.ndarray, shape (n, d)
        The points.
    G : numpy.ndarray, shape (n, n)
        The float64 Gram the witness was found on.
    v : sequence of float or int
        The witness.
    tol : float
        The tolerance of the float verdict (``v`` beat ``-tol``).

    Returns
    -------
    tuple
        ``(ladder, verdict, value, why)``: the quotient by precision, one of
        ``"violation"``, ``"rounding"``, ``"inconclusive"``, the last
        quotient, and the reason in words.
    """
    w = _float_witness(v)
    q64, s = _rayleigh_ld(G, w)
    steps = [("float64", q64)]
    ext = _extended_gram(k, X)
    if ext is not None:
        q, _ = _rayleigh_ld(ext, w)
        steps.append(("longdouble", q))
        u, u_ext = unit_roundoff(np.float64), 2.0 ** -(np.finfo(np.longdouble).nmant + 1)
        e = 2.0 * (u_ext / u) * abs(q64 - q) + gamma(2 * len(w) + 4, np.float64) * (u_ext / u) * s
        where = f"in long double the witness value is {q:.3g} (float64: {q64:.3g}, error ~ {e:.2g})"
        if q >= -e:
            return tuple(steps), "rounding", q, f"{where}: rounding, not a violation"
        if q + e < -tol:
            return tuple(steps), "violation", q, f"{where}: it stays beyond -tol = {-tol:.3g}"
        return tuple(steps), "inconclusive", q, f"{where}: neither rounding nor beyond -tol"
    margin = math.sqrt(unit_roundoff(np.float64)) * s
    if q64 < -margin:
        why = f"{q64:.3g} < -sqrt(u) |v|^T |G| |v| / v^T v = {-margin:.3g}: beyond any rounding"
        return tuple(steps), "violation", q64, why
    why = (
        f"{q64:.3g} is rounding-level (within sqrt(u) |v|^T |G| |v| / v^T v = {margin:.3g}) and "
        "the function has no error model and no wider evaluation: pass error_bound= or "
        "mp_function= to kernel_from_function to decide"
    )
    return tuple(steps), "inconclusive", q64, why


def _extended_gram(k, X: np.ndarray):
    """``k.gram_extended(X)`` where the kernel has it, None otherwise."""
    extended = getattr(k, "gram_extended", None)
    return extended(X) if callable(extended) else None
