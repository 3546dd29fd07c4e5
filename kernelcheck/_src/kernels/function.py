"""Kernels from a user's function (claims C5, C6).

:func:`kernel_from_function` wraps ``f(x, y) -> float`` as a candidate kernel
node (:class:`FunctionKernel`) that :func:`kernelcheck.verify.kernel` can
judge.  The user's function is called through
:func:`~kernelcheck._src.core.validate.call_user`: it receives copies of the
points (so it cannot change the caller's ``X``) and an exception it raises is
reported as ``"`f` (name) raised ..."``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernelcheck._src.core.validate import (
    as_bool,
    call_user,
    check_callable,
    describe,
    result_dtype,
)
from kernelcheck._src.kernels.base import Kernel
from kernelcheck.errors import InvalidArgument

__all__ = ["FunctionKernel", "kernel_from_function"]


class FunctionKernel(Kernel):
    """A user similarity function ``f(x, y) -> float`` viewed as a candidate kernel.

    Made by :func:`kernel_from_function`.  It has no feature map and no
    error model (``error_bound`` raises); ``gram_mp`` works when an
    ``mp_function`` was supplied.
    """

    __slots__ = ("function", "vectorized", "mp_function", "name")
    function: Callable
    vectorized: bool
    mp_function: Callable | None
    name: str

    def __init__(self, function, *, vectorized=False, mp_function=None, name=None):
        check_callable(function, "f")
        if mp_function is not None:
            check_callable(mp_function, "mp_function")
        if name is None:
            name = getattr(function, "__name__", None) or "f"
        if not isinstance(name, str):
            raise InvalidArgument(f"`name` must be a string, got {describe(name)}")
        vectorized = as_bool(vectorized, "vectorized")
        self._set(function=function, vectorized=vectorized, mp_function=mp_function, name=name)

    def _key(self) -> tuple:
        return (self.function, self.vectorized, self.mp_function, self.name)

    def __repr__(self) -> str:
        return f"kernel_from_function({self.name})"

    @property
    def supports_mp(self) -> bool:
        return self.mp_function is not None

    def _call_array(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.asarray(self.function(A, B))

    def _call_float(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(self.function(x, y))

    def _gram(self, X, Y):
        n, m = X.shape[0], Y.shape[0]
        dt = result_dtype(X, Y)
        label = f"`f` ({self.name})"
        # call_user hands the function copies: it cannot change the caller's points
        if self.vectorized:
            G = call_user(self._call_array, label, X[:, None, :], Y[None, :, :])
        else:
            G = np.empty((n, m), dtype=dt)
            for i in range(n):
                for j in range(m):
                    G[i, j] = call_user(self._call_float, label, X[i], Y[j])
        if G.dtype.kind not in "biuf":
            raise InvalidArgument(f"`f` ({self.name}) must return real numbers, got {describe(G)}")
        if G.shape != (n, m):
            raise InvalidArgument(
                f"`f` ({self.name}) with vectorized=True must broadcast inputs of shapes "
                f"({n}, 1, d) and (1, {m}, d) to a result of shape ({n}, {m}), got {describe(G)}"
            )
        # a fresh array: the combinators update Gram blocks in place
        G = G.astype(dt, copy=True)
        if not np.isfinite(G).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(G))[0])
            raise InvalidArgument(
                f"`f` ({self.name}) returned a non-finite value {G[bad]!r} at entry {bad}"
            )
        return G

    def _gram_err(self, X, Y):
        raise InvalidArgument(
            f"`kernel` {self!r} has no rounding-error model; kernelcheck cannot bound its "
            "Gram entries (compose only built-in nodes, or judge with a tolerance of your own)"
        )

    def _call_mp(self, x: list, y: list):
        import mpmath

        assert self.mp_function is not None  # guarded by supports_mp
        return mpmath.mpf(self.mp_function(x, y))

    def _mp(self, X, Y):
        import mpmath

        label = f"`mp_function` of {self!r}"
        out = []
        for i, x in enumerate(X):
            row = []
            for j, y in enumerate(Y):
                # lists of mpf: passed as copies, like the arrays of `f`
                value = call_user(self._call_mp, label, list(x), list(y))
                if not mpmath.isfinite(value):
                    raise InvalidArgument(
                        f"`mp_function` of {self!r} returned a non-finite value {value} at "
                        f"entry ({i}, {j})"
                    )
                row.append(value)
            out.append(row)
        return out

    def _infinite_reason(self) -> str:
        return (
            f"{self!r} is a user function with no known feature map; kernelcheck.mercer_features "
            "builds one on a finite point set (Theorem 2, C6)"
        )


def kernel_from_function(
    f: Callable,
    *,
    vectorized: bool = False,
    mp_function: Callable | None = None,
    name: str | None = None,
) -> FunctionKernel:
    """Wrap a similarity function of two vectors as a candidate kernel.

    Parameters
    ----------
    f : callable
        ``f(x, y) -> float`` for two 1-d arrays of length d.  With
        ``vectorized=True``, ``f(X[:, None, :], Y[None, :, :])`` must return
        the (n, m) block at once (one call instead of n m).
    vectorized : bool
        See above.
    mp_function : callable, optional
        The same function on lists of mpmath numbers, enabling
        :meth:`Kernel.gram_mp` and so the precision ladder of
        :func:`kernelcheck.verify.kernel`.
    name : str, optional
        Printed in ``repr`` and messages; defaults to ``f.__name__``.

    Examples
    --------
    >>> import numpy as np
    >>> k = kernel_from_function(lambda x, y: float(np.tanh(x @ y - 1)), name="tanh")
    >>> k
    kernel_from_function(tanh)
    >>> k(np.zeros((2, 3))).shape
    (2, 2)
    """
    return FunctionKernel(f, vectorized=vectorized, mp_function=mp_function, name=name)
