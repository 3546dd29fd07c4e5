"""Kernels from a user's function (claims C5, C6).

:func:`kernel_from_function` wraps ``f(x, y) -> float`` as a candidate kernel
node (:class:`FunctionKernel`) that :func:`kernelcheck.verify.kernel` can
judge.  The user's function is called through
:func:`~kernelcheck._src.core.calls.call_user`: it receives copies of the
points (so it cannot change the caller's ``X``) and an exception it raises is
reported as ``"`f` (name) raised ..."``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.pairs import call_user_pairs
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_real,
    check_callable,
    describe,
    result_dtype,
)
from kernelcheck._src.kernels.base import Kernel
from kernelcheck.errors import InvalidArgument

__all__ = ["FunctionKernel", "kernel_from_function"]


class FunctionKernel(Kernel):
    """A user similarity function ``f(x, y) -> float`` viewed as a candidate kernel.

    Made by :func:`kernel_from_function`.  It has no feature map; its error
    model is the ``error_bound`` it was given (without one ``error_bound``
    raises); ``gram_mp`` works when an ``mp_function`` was supplied.

    Parameters
    ----------
    function : callable
        ``f(x, y) -> float`` (see :func:`kernel_from_function`).
    vectorized : bool, default False
        ``f`` takes broadcast arrays and returns the whole block.
    blocks : bool, default False
        ``f(X, Y)`` takes the two point sets and returns the Gram block.
    mp_function : callable or None, default None
        The same function on mpmath numbers.
    name : str or None, default None
        Printed in ``repr`` and messages.
    error_bound : float or callable or None, default None
        The rounding-error model of ``f`` (see :func:`kernel_from_function`).
    """

    __slots__ = ("function", "vectorized", "blocks", "mp_function", "name", "bound")
    function: Callable
    vectorized: bool
    blocks: bool
    mp_function: Callable | None
    name: str
    bound: float | Callable | None

    def __init__(
        self,
        function,
        *,
        vectorized=False,
        blocks=False,
        mp_function=None,
        name=None,
        error_bound=None,
    ):
        check_callable(function, "f")
        if mp_function is not None:
            check_callable(mp_function, "mp_function")
        if name is None:
            name = getattr(function, "__name__", None) or "f"
        if not isinstance(name, str):
            raise InvalidArgument(f"`name` must be a string, got {describe(name)}")
        vectorized = as_bool(vectorized, "vectorized")
        blocks = as_bool(blocks, "blocks")
        if vectorized and blocks:
            raise InvalidArgument(
                "`vectorized` and `blocks` exclude each other: `blocks=True` is for "
                "f(X, Y) -> (n, m) on two point sets, `vectorized=True` for a broadcasting f"
            )
        if error_bound is not None and not callable(error_bound):
            error_bound = as_real(error_bound, "error_bound", nonnegative=True)
        self._set(
            function=function,
            vectorized=vectorized,
            blocks=blocks,
            mp_function=mp_function,
            name=name,
            bound=error_bound,
        )

    def _key(self) -> tuple:
        return (
            self.function,
            self.vectorized,
            self.blocks,
            self.mp_function,
            self.name,
            self.bound,
        )

    def __repr__(self) -> str:
        return f"kernel_from_function({self.name})"

    @property
    def supports_mp(self) -> bool:
        return self.mp_function is not None

    def _call_array(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.asarray(self.function(A, B))

    def _gram(self, X, Y):
        n, m = X.shape[0], Y.shape[0]
        dt = result_dtype(X, Y)
        label = f"`f` ({self.name})"
        # call_user hands the function copies: it cannot change the caller's points
        if self.blocks:
            G = call_user(self._call_array, label, X, Y)
        elif self.vectorized:
            G = call_user(self._call_array, label, X[:, None, :], Y[None, :, :])
        else:
            G = np.empty((n, m), dtype=dt)
            call_user_pairs(self.function, label, X, Y, G)
        if G.dtype.kind not in "biuf":
            raise InvalidArgument(f"`f` ({self.name}) must return real numbers, got {describe(G)}")
        if G.shape != (n, m):
            how = (
                f"with blocks=True must map point sets of shapes ({n}, d) and ({m}, d)"
                if self.blocks
                else f"with vectorized=True must broadcast inputs of shapes ({n}, 1, d) and "
                f"(1, {m}, d)"
            )
            raise InvalidArgument(
                f"`f` ({self.name}) {how} to a result of shape ({n}, {m}), got {describe(G)}"
            )
        # a fresh array: the combinators update Gram blocks in place
        G = G.astype(dt, copy=True)
        if not np.isfinite(G).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(G))[0])
            raise InvalidArgument(
                f"`f` ({self.name}) returned a non-finite value {G[bad]!r} at entry {bad}"
            )
        return G

    def gram_extended(self, X) -> np.ndarray | None:
        """The Gram of ``f`` on ``X``, points and arithmetic in ``numpy.longdouble``, or None.

        A function without an error model can still be asked what its Gram
        is in a wider format: the same formula evaluated on long double
        points (64 significand bits on x86, ``u = 2^-64``, 2048 times
        float64's precision) errs about 2048 times less.  ``f`` is called as
        :meth:`_gram` calls it (pairs, broadcast or blocks), through
        :func:`~kernelcheck._src.core.validate.call_user`.

        Parameters
        ----------
        X : numpy.ndarray, shape (n, d)
            The points (float64).

        Returns
        -------
        numpy.ndarray of numpy.longdouble, shape (n, n), or None
            None where no wider evaluation exists: the platform's long double
            is float64 itself, or ``f`` does not keep it (raises, returns
            another dtype, a non-finite or misshapen result, or only float64
            numbers -- it computed in float64 inside).
        """
        if np.finfo(np.longdouble).nmant <= np.finfo(np.float64).nmant:
            return None
        L = np.asarray(X, dtype=np.longdouble)
        n = L.shape[0]
        label = f"`f` ({self.name}) on long double points"
        try:
            if self.blocks:
                G = call_user(self._call_array, label, L, L)
            elif self.vectorized:
                G = call_user(self._call_array, label, L[:, None, :], L[None, :, :])
            else:
                G = np.empty((n, n), dtype=np.longdouble)
                for i in range(n):
                    for j in range(n):
                        v = call_user(self.function, label, L[i].copy(), L[j].copy())
                        if not isinstance(v, np.longdouble):
                            return None
                        G[i, j] = v
        except InvalidArgument:
            return None
        if not isinstance(G, np.ndarray) or G.dtype != np.longdouble or G.shape != (n, n):
            return None
        if not np.isfinite(G).all() or np.array_equal(G.astype(np.float64), G):
            return None
        return G

    def _gram_err(self, X, Y):
        if self.bound is None:
            raise InvalidArgument(
                f"`kernel` {self!r} has no rounding-error model; kernelcheck cannot bound its "
                "Gram entries (pass error_bound= to kernel_from_function, compose only built-in "
                "nodes, or judge with a tolerance of your own)"
            )
        G = self._gram(X, Y)
        shape = (X.shape[0], Y.shape[0])
        if not callable(self.bound):
            return G, np.full(shape, float(self.bound))
        label = f"`error_bound` of {self!r}"
        E = as_array(call_user(self.bound, label, X, Y), "error_bound(X, Y)")
        if E.shape != shape or E.dtype.kind not in "biuf":
            raise InvalidArgument(
                f"`error_bound` of {self!r} must return a real array of shape {shape} "
                f"(one bound per Gram entry), got {describe(E)}"
            )
        E = np.asarray(E, dtype=np.float64)
        if not (np.isfinite(E).all() and (E >= 0).all()):
            raise InvalidArgument(
                f"`error_bound` of {self!r} must return finite bounds >= 0, got min "
                f"{float(np.nanmin(E)) if np.isfinite(E).any() else float('nan'):.3g}"
            )
        return G, E

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
    blocks: bool = False,
    mp_function: Callable | None = None,
    name: str | None = None,
    error_bound: float | Callable | None = None,
) -> FunctionKernel:
    """Wrap a similarity function as a candidate kernel, a target of every verifier.

    Parameters
    ----------
    f : callable
        ``f(x, y) -> float`` for two 1-d arrays of length d.  With
        ``vectorized=True``, ``f(X[:, None, :], Y[None, :, :])`` must return
        the (n, m) block at once (one call instead of n m); with
        ``blocks=True``, ``f(X, Y)`` takes the two point sets of shapes
        (n, d) and (m, d) and returns the (n, m) Gram block (for example
        ``lambda X, Y: np.exp(X @ Y.T)``).
    vectorized : bool, default False
        ``f`` takes broadcast arrays ``X[:, None, :]``, ``Y[None, :, :]`` and
        returns the (n, m) block (at most one of ``vectorized`` and ``blocks``).
    blocks : bool, default False
        ``f(X, Y)`` takes the two point sets and returns the (n, m) Gram block.
    error_bound : float or callable or None, default None
        The kernel's rounding-error model: an upper bound of
        ``|f computed - f exact|`` for every entry (a float >= 0), or
        ``error_bound(X, Y) -> (n, m)`` array of entrywise bounds >= 0.  With
        it the kernel has :meth:`~kernelcheck.kernels.Kernel.error_bound`, so
        :func:`kernelcheck.verify.kernel` sets its tolerance from it and
        :func:`kernelcheck.verify.unbiased` / ``feature_map`` accept it as a
        target.
    mp_function : callable or None, default None
        The same function on lists of mpmath numbers, enabling
        :meth:`Kernel.gram_mp` and so the precision ladder of
        :func:`kernelcheck.verify.kernel`.
    name : str or None, default None
        Printed in ``repr`` and messages; defaults to ``f.__name__``.

    Examples
    --------
    >>> import numpy as np
    >>> k = kernel_from_function(lambda x, y: float(np.tanh(x @ y - 1)), name="tanh")
    >>> k
    kernel_from_function(tanh)
    >>> k(np.zeros((2, 3))).shape
    (2, 2)
    >>> e = kernel_from_function(lambda X, Y: np.exp(X @ Y.T), blocks=True, error_bound=1e-15)
    >>> float(e.error_bound(np.zeros((2, 3)))[0, 1])
    1e-15
    """
    return FunctionKernel(
        f,
        vectorized=vectorized,
        blocks=blocks,
        mp_function=mp_function,
        name=name,
        error_bound=error_bound,
    )
