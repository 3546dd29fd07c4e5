"""Kernels as immutable values with an algebra (claims C4, C7, C8, C9, C12).

A kernel ``k`` is a node of an expression tree.  Leaves: :class:`Linear`,
:class:`Constant`, :class:`Polynomial`, :class:`Exponential`,
:class:`Gaussian`, :class:`Laplacian` and :func:`kernel_from_function`.
Combinators: ``k1 + k2`` (:class:`Sum`), ``c * k`` (:class:`Scaled`),
``k1 * k2`` (:class:`Product`), ``k ** m`` (:class:`Power`) and
:func:`exp` (``exp(k)``, or its Taylor series truncated at ``order=M``).

Error bounds use the standard model with gradual underflow,
``fl(a op b) = (a op b)(1 + delta) + eta``, ``|delta| <= u``, ``|eta| <=``
the smallest subnormal, so they hold for tiny inputs too.

Every node answers four questions:

* ``k(X, Y=None)`` -- the (n, m) Gram block ``[k(x_i, y_j)]``, vectorised;
* ``k.error_bound(X, Y=None)`` -- an a-priori entrywise bound on the rounding
  error of that Gram block, propagated through the tree (running error
  analysis in the standard model, Higham ch. 3; see each node);
* ``k.gram_mp(X, Y=None, dps=...)`` -- the same entries in mpmath at ``dps``
  decimal digits, the float inputs taken as exact binary numbers;
* ``k.features(form=...)`` -- the exact finite feature map where the feature
  space is finite (composed through the algebra), else
  :class:`~kernelcheck.errors.InfiniteFeatureSpace` saying how to truncate or
  sample.
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Callable
from itertools import combinations_with_replacement
from typing import Any

import mpmath
import numpy as np

from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_points,
    as_real,
    check_callable,
    check_choice,
    check_size,
    describe,
    result_dtype,
)
from kernelcheck._src.kernels.featuremap import FORMS, ExactFeatureMap
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure

__all__ = [
    "Kernel",
    "Linear",
    "Constant",
    "Polynomial",
    "Exponential",
    "Gaussian",
    "Laplacian",
    "FunctionKernel",
    "kernel_from_function",
    "Sum",
    "Scaled",
    "Product",
    "Power",
    "Exp",
    "exp",
    "monomial_dim",
    "weighted_monomials",
    "unweighted_monomials",
]

#: Largest order accepted by ``exp(k, order=M)`` and degree by powers: beyond
#: it the feature dimension and the factorials leave any useful range.
MAX_ORDER = 64


def monomial_dim(d: int, m: int) -> int:
    """Number of unique degree-``m`` monomials in ``d`` variables, C(d+m-1, m) (claim C8).

    Examples
    --------
    >>> monomial_dim(3, 2)
    6
    """
    d = as_int(d, "d", minimum=1)
    m = as_int(m, "m", minimum=0)
    return math.comb(d + m - 1, m)


def _promote(value: Any, name: str) -> Kernel:
    if isinstance(value, Kernel):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        value = float(value)
        if not math.isfinite(value):  # named here: Constant would call it `c`
            raise InvalidArgument(f"`{name}` must be finite, got {value}")
        return Constant(value)
    raise InvalidArgument(f"`{name}` must be a Kernel or a real number, got {describe(value)}")


def _pair(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """Validate a Gram request: X (n, d), Y (m, d) or None (Y = X)."""
    Xa = as_points(X, "X")
    if Y is None:
        return Xa, Xa, True
    Ya = as_points(Y, "Y")
    if Ya.shape[1] != Xa.shape[1]:
        raise InvalidArgument(
            f"`Y` must have the same number of columns as `X` (d = {Xa.shape[1]}), "
            f"got {describe(Ya)}"
        )
    dt = result_dtype(Xa, Ya)
    return Xa.astype(dt, copy=False), Ya.astype(dt, copy=False), False


class Kernel(abc.ABC):
    """Base class of every kernel node: immutable, hashable, printable as a formula.

    Subclasses implement ``_gram`` (values, always a fresh array the caller
    may update in place), ``_gram_err`` (values and an
    entrywise rounding-error bound), ``_mp`` (mpmath entries) and, when the
    feature space is finite, ``_phi`` / ``_feature_dim`` / ``_phi_ops``.
    """

    __slots__ = ()
    #: precedence for printing: 0 sum, 1 product, 2 power, 3 atom
    _prec = 3

    # ----- immutability -------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __setstate__(self, state: Any) -> None:
        """Restore the slots on unpickling (``__setattr__`` refuses ordinary assignment).

        The default pickle protocol for slotted classes hands ``(None, slots)``.
        Kernels of built-in nodes pickle, so they travel to process pools and
        Dask workers; a :func:`kernel_from_function` kernel pickles when its
        function does (a module-level function, not a lambda).
        """
        slots = state[1] if isinstance(state, tuple) else state
        for key, value in (slots or {}).items():
            object.__setattr__(self, key, value)

    def _set(self, **fields: Any) -> None:
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    @abc.abstractmethod
    def _key(self) -> tuple:
        """Structural identity (type and parameters)."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def _wrap(self, prec: int) -> str:
        text = repr(self)
        return f"({text})" if self._prec < prec else text

    # ----- algebra -------------------------------------------------------------
    def __add__(self, other: Any) -> Kernel:
        return Sum(self, _promote(other, "other"))

    def __radd__(self, other: Any) -> Kernel:
        return Sum(_promote(other, "other"), self)

    def __mul__(self, other: Any) -> Kernel:
        if isinstance(other, Kernel):
            return Product(self, other)
        if isinstance(other, numbers.Real) and not isinstance(other, (bool, np.bool_)):
            return Scaled(float(other), self)
        return NotImplemented

    def __rmul__(self, other: Any) -> Kernel:
        if isinstance(other, numbers.Real) and not isinstance(other, (bool, np.bool_)):
            return Scaled(float(other), self)
        return NotImplemented

    def __pow__(self, m: Any) -> Kernel:
        return Power(self, m)

    # ----- evaluation ----------------------------------------------------------
    def __call__(self, X: Any, Y: Any = None) -> np.ndarray:
        """The Gram block ``G[i, j] = k(x_i, y_j)`` of shape (n, m) (``Y=None``: ``Y = X``).

        Raises
        ------
        InvalidArgument
            For input that is not a finite real (n, d) array, or mismatched d.
        NumericalFailure
            When an entry overflows float64 (e.g. ``exp`` of a large dot
            product); the Gram block is never returned with ``inf`` in it.
        """
        Xa, Ya, _ = _pair(X, Y)
        check_size(Xa.shape[0] * Ya.shape[0], f"the Gram block of {self!r}")
        self._check_dim(Xa.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            G = self._gram(Xa, Ya)
        self._check_result(G)
        return G

    def error_bound(self, X: Any, Y: Any = None) -> np.ndarray:
        """Entrywise a-priori bound on ``|k(X, Y) computed - k(X, Y) exact|``.

        The inputs are taken as exact binary numbers; the bound is propagated
        through the expression tree to first order with the node rules stated
        in each node's docstring, in the unit roundoff of the result dtype.
        """
        Xa, Ya, _ = _pair(X, Y)
        check_size(Xa.shape[0] * Ya.shape[0], f"the Gram block of {self!r}")
        self._check_dim(Xa.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            G, E = self._gram_err(Xa, Ya)
        self._check_result(G)
        return E

    def gram_mp(self, X: Any, Y: Any = None, *, dps: int = 50) -> mpmath.matrix:
        """The Gram block evaluated in mpmath at ``dps`` decimal digits.

        The float entries of ``X`` and ``Y`` are converted exactly (every
        binary float is an mpf); all arithmetic then runs at ``dps`` digits.
        Used by the precision ladder of :func:`kernelcheck.verify.kernel`.
        """
        if not self.supports_mp:
            raise InvalidArgument(
                f"`kernel` {self!r} cannot be evaluated in mpmath; pass mp_function= to "
                "kernel_from_function"
            )
        dps = as_int(dps, "dps", minimum=15, maximum=100000)
        Xa, Ya, _ = _pair(X, Y)
        self._check_dim(Xa.shape[1])
        with mpmath.workdps(dps):
            Xm = [[mpmath.mpf(float(v)) for v in row] for row in Xa]
            Ym = [[mpmath.mpf(float(v)) for v in row] for row in Ya]
            rows = self._mp(Xm, Ym)
            return mpmath.matrix(rows)

    @property
    def supports_mp(self) -> bool:
        """Whether :meth:`gram_mp` is available (True for every built-in node)."""
        return all(child.supports_mp for child in self._children())

    def _children(self) -> tuple[Kernel, ...]:
        return ()

    def _check_dim(self, d: int) -> None:
        for child in self._children():
            child._check_dim(d)

    def _check_result(self, G: np.ndarray) -> None:
        if not np.isfinite(G).all():
            bad = np.argwhere(~np.isfinite(G))[0]
            raise NumericalFailure(
                f"{self!r} overflows {G.dtype} at entry {tuple(int(i) for i in bad)} "
                "(the exact value is beyond the floating-point range); scale the inputs down"
            )

    @abc.abstractmethod
    def _gram(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray: ...

    @abc.abstractmethod
    def _gram_err(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    @abc.abstractmethod
    def _mp(self, X: list, Y: list) -> list: ...

    # ----- feature maps -------------------------------------------------------
    @property
    def has_finite_features(self) -> bool:
        """Whether :meth:`features` returns an exact finite feature map."""
        return False

    def features(self, form: str = "symmetric") -> ExactFeatureMap:
        """The exact feature map ``phi`` with ``phi(X) @ phi(Y).T == k(X, Y)`` (C4).

        Parameters
        ----------
        form : {"symmetric", "tensor"}
            For powers and polynomials: the unique monomials with multinomial
            weights (C(d+m-1, m) coordinates) or the full tensor power (d**m).

        Raises
        ------
        InfiniteFeatureSpace
            For kernels whose feature space is infinite; the message says how
            to truncate (``exp(k, order=M)``) or sample (random features).
        """
        check_choice(form, "form", FORMS)
        self._require_finite()
        return ExactFeatureMap(self, form)

    def feature_dim(self, d: int, form: str = "symmetric") -> int:
        """Output dimension D of ``features(form)`` on inputs of dimension ``d``."""
        check_choice(form, "form", FORMS)
        d = as_int(d, "d", minimum=1)
        self._require_finite()
        return self._feature_dim(d, form)

    def _require_finite(self) -> None:
        if not self.has_finite_features:
            raise InfiniteFeatureSpace(self._infinite_reason())

    def _infinite_reason(self) -> str:
        for child in self._children():
            if not child.has_finite_features:
                return child._infinite_reason()
        return f"{self!r} has no finite feature map"

    def _phi(self, X: np.ndarray, form: str) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - guarded by has_finite_features

    def _feature_dim(self, d: int, form: str) -> int:
        raise NotImplementedError  # pragma: no cover

    def _phi_ops(self, form: str) -> int:
        raise NotImplementedError  # pragma: no cover


# ---------------------------------------------------------------------------
# Leaves
# ---------------------------------------------------------------------------


class Linear(Kernel):
    """The linear kernel ``k(x, y) = x . y`` with ``phi(x) = x`` (claim C7).

    Error model: ``|fl(x . y) - x . y| <= gamma_d (1 + gamma_d) |x| . |y|``.

    Examples
    --------
    >>> import numpy as np
    >>> Linear()(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    array([[11.]])
    """

    __slots__ = ()

    def _key(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return "Linear()"

    def _gram(self, X, Y):
        return X @ Y.T

    def _gram_err(self, X, Y):
        d = X.shape[1]
        g = gamma(d, X.dtype)
        return X @ Y.T, (g * (1 + g)) * (np.abs(X) @ np.abs(Y).T) + d * eta(X.dtype)

    def _mp(self, X, Y):
        return [[mpmath.fdot(x, y) for y in Y] for x in X]

    @property
    def has_finite_features(self) -> bool:
        return True

    def _phi(self, X, form):
        return X.copy()

    def _feature_dim(self, d, form):
        return d

    def _phi_ops(self, form):
        return 0


class Constant(Kernel):
    """The constant kernel ``k(x, y) = c`` with ``phi(x) = [sqrt(c)]`` (c >= 0).

    A negative ``c`` is allowed as a value of the algebra (it is not a kernel,
    and ``features()`` says so); :func:`kernelcheck.verify.kernel` refutes it.

    Error model: exact values; the feature ``sqrt(c)`` has one rounding.
    """

    __slots__ = ("c",)
    c: float

    def __init__(self, c: float):
        self._set(c=as_real(c, "c"))

    def _key(self) -> tuple:
        return (self.c,)

    def __repr__(self) -> str:
        return f"Constant({self.c!r})"

    def _gram(self, X, Y):
        return np.full((X.shape[0], Y.shape[0]), self.c, dtype=result_dtype(X, Y))

    def _gram_err(self, X, Y):
        G = self._gram(X, Y)
        return G, np.zeros_like(G)

    def _mp(self, X, Y):
        c = mpmath.mpf(self.c)
        return [[c for _ in Y] for _ in X]

    @property
    def has_finite_features(self) -> bool:
        return self.c >= 0

    def _infinite_reason(self) -> str:
        return (
            f"{self!r} has a negative value, so it is not a kernel and has no real feature "
            "map (Theorem 1, C5)"
        )

    def _phi(self, X, form):
        return np.full((X.shape[0], 1), math.sqrt(self.c), dtype=X.dtype)

    def _feature_dim(self, d, form):
        return 1

    def _phi_ops(self, form):
        return 1


def _check_degree(m: Any, name: str) -> int:
    return as_int(m, name, minimum=0, maximum=MAX_ORDER)


class Polynomial(Kernel):
    """The polynomial kernel ``k(x, y) = (x . y + c) ** degree`` (claim C8), ``c >= 0``.

    Feature maps: with ``z = [x, sqrt(c)]`` (just ``x`` when ``c = 0``), the
    ``"tensor"`` form is ``z (x) z (x) ... (x) z`` (D = (d + [c > 0]) ** degree);
    the ``"symmetric"`` form keeps each unique monomial ``z ** alpha`` once with
    weight ``sqrt(degree! / alpha!)`` (D = C(D_z + degree - 1, degree)).

    Error model: the inner value ``s = x . y + c`` is accurate to
    ``e_s = gamma_(d+1) (|x| . |y| + |c|)``; the power is taken by repeated
    multiplication (``p <= 2 log2(degree) + 1`` roundings), so
    ``|err| <= degree (|s| + e_s)^(degree-1) e_s + gamma_p |s|^degree``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 1.0]])
    >>> Polynomial(2, c=1.0)(X)
    array([[9.]])
    """

    __slots__ = ("degree", "c")
    degree: int
    c: float

    def __init__(self, degree: int, c: float = 0.0):
        degree = _check_degree(degree, "degree")
        c = as_real(c, "c", nonnegative=True)
        self._set(degree=degree, c=c)

    def _key(self) -> tuple:
        return (self.degree, self.c)

    def __repr__(self) -> str:
        if self.c:
            return f"Polynomial({self.degree}, c={self.c!r})"
        return f"Polynomial({self.degree})"

    def _base(self) -> Kernel:
        return Linear() + Constant(self.c) if self.c else Linear()

    def _equivalent(self) -> Kernel:
        return Power(self._base(), self.degree)

    def _gram(self, X, Y):
        return self._equivalent()._gram(X, Y)

    def _gram_err(self, X, Y):
        return self._equivalent()._gram_err(X, Y)

    def _mp(self, X, Y):
        return self._equivalent()._mp(X, Y)

    @property
    def has_finite_features(self) -> bool:
        return True

    def _phi(self, X, form):
        return self._equivalent()._phi(X, form)

    def _feature_dim(self, d, form):
        return self._equivalent()._feature_dim(d, form)

    def _phi_ops(self, form):
        return self._equivalent()._phi_ops(form)


class Exponential(Kernel):
    """The exponential dot-product kernel ``k(x, y) = exp(scale * x . y)`` (claims C9, C10).

    Its feature space is infinite (C9): ``features()`` raises and points to
    ``exp(scale * Linear(), order=M)`` (Taylor, C12) or random features (C13).
    With ``scale = 1 / sqrt(d)`` it is the softmax kernel of attention (C10).

    Error model: ``s = scale * x . y`` is accurate to
    ``e_s = gamma_(d+1) scale |x| . |y|``; then
    ``|err| <= exp(s + e_s) (expm1(e_s) + 2u)`` (libm's exp is accurate to
    within 1 ulp).
    """

    __slots__ = ("scale",)
    scale: float

    def __init__(self, scale: float = 1.0):
        self._set(scale=as_real(scale, "scale", positive=True))

    def _key(self) -> tuple:
        return (self.scale,)

    def __repr__(self) -> str:
        return "Exponential()" if self.scale == 1.0 else f"Exponential(scale={self.scale!r})"

    def _equivalent(self) -> Kernel:
        inner = Linear() if self.scale == 1.0 else Scaled(self.scale, Linear())
        return Exp(inner, None)

    def _gram(self, X, Y):
        return self._equivalent()._gram(X, Y)

    def _gram_err(self, X, Y):
        return self._equivalent()._gram_err(X, Y)

    def _mp(self, X, Y):
        return self._equivalent()._mp(X, Y)

    def _infinite_reason(self) -> str:
        s = "" if self.scale == 1.0 else f"{self.scale!r} * "
        return (
            f"{self!r} has an infinite feature space (C9). Truncate its Taylor series with "
            f"kernelcheck.kernels.exp({s}Linear(), order=M) (C12), or sample random features "
            f"with kernelcheck.features.PositiveRandomFeatures(dim, num_features, seed=..., "
            f"scale={self.scale!r}) (C13)"
        )


class _DistanceKernel(Kernel):
    """Shared evaluation of ``||x - y||^2`` for the stationary kernels.

    ``d2 = |x|^2 + |y|^2 - 2 x . y``, clipped at 0 (the exact value is >= 0,
    so clipping only reduces the error), accurate to
    ``e_d2 = gamma_(d+3) (|x|^2 + |y|^2 + 2 |x| . |y|)``.
    """

    __slots__ = ("lengthscale",)
    lengthscale: float

    def __init__(self, lengthscale: float = 1.0):
        self._set(lengthscale=as_real(lengthscale, "lengthscale", positive=True))

    def _key(self) -> tuple:
        return (self.lengthscale,)

    def __repr__(self) -> str:
        name = type(self).__name__
        return (
            f"{name}()" if self.lengthscale == 1.0 else f"{name}(lengthscale={self.lengthscale!r})"
        )

    @staticmethod
    def _sqdist(X, Y):
        nx = np.einsum("ij,ij->i", X, X)
        ny = np.einsum("ij,ij->i", Y, Y)
        d2 = nx[:, None] + ny[None, :] - 2.0 * (X @ Y.T)
        np.maximum(d2, 0.0, out=d2)
        return d2

    @staticmethod
    def _sqdist_err(X, Y):
        d = X.shape[1]
        nx = np.einsum("ij,ij->i", X, X)
        ny = np.einsum("ij,ij->i", Y, Y)
        absxy = np.abs(X) @ np.abs(Y).T
        g = gamma(d + 3, X.dtype)
        err = (g * (1 + gamma(d, X.dtype))) * (nx[:, None] + ny[None, :] + 2.0 * absxy)
        err += 3 * d * eta(X.dtype)
        d2 = nx[:, None] + ny[None, :] - 2.0 * (X @ Y.T)
        np.maximum(d2, 0.0, out=d2)
        return d2, err

    @staticmethod
    def _mp_sqdist(x, y):
        return mpmath.fsum((a - b) ** 2 for a, b in zip(x, y))

    def _infinite_reason(self) -> str:
        return (
            f"{self!r} has an infinite feature space; sample random Fourier features for it, "
            "or use kernelcheck.mercer_features on a finite point set (C6)"
        )


class Gaussian(_DistanceKernel):
    """The Gaussian kernel ``k(x, y) = exp(-||x - y||^2 / (2 lengthscale^2))``.

    Infinite feature space.  Error model: with ``d2`` accurate to ``e_d2``
    (see the distance rule), ``|err| <= exp(-(d2 - e_d2)_+ / (2 l^2)) e_d2 / (2 l^2)
    + 3u k``.
    """

    __slots__ = ()

    def _gram(self, X, Y):
        return np.exp(self._sqdist(X, Y) * (-0.5 / self.lengthscale**2))

    def _gram_err(self, X, Y):
        d2, e = self._sqdist_err(X, Y)
        a = 0.5 / self.lengthscale**2
        G = np.exp(-a * d2)
        lo = np.maximum(d2 - e, 0.0)
        u = unit_roundoff(X.dtype)
        return G, np.exp(-a * lo) * (a * e) * (1 + 4 * u) + 4 * u * G + 2 * eta(G.dtype)

    def _mp(self, X, Y):
        a = mpmath.mpf(0.5) / mpmath.mpf(self.lengthscale) ** 2
        return [[mpmath.exp(-a * self._mp_sqdist(x, y)) for y in Y] for x in X]


class Laplacian(_DistanceKernel):
    """The Laplacian kernel ``k(x, y) = exp(-||x - y|| / lengthscale)``.

    Infinite feature space.  Error model: ``|sqrt(a) - sqrt(b)| <=
    min(sqrt(e), e / sqrt(b))`` for ``|a - b| <= e``, so the distance error
    is ``e_r = min(sqrt(e_d2), e_d2 / sqrt(d2)) + 2u r``, and
    ``|err| <= exp(-(r - e_r)_+ / l) e_r / l + 3u k``.
    """

    __slots__ = ()

    def _gram(self, X, Y):
        return np.exp(-np.sqrt(self._sqdist(X, Y)) / self.lengthscale)

    def _gram_err(self, X, Y):
        d2, e = self._sqdist_err(X, Y)
        r = np.sqrt(d2)
        u = unit_roundoff(X.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            by_ratio = np.where(d2 > 0, e / np.where(d2 > 0, r, 1.0), np.inf)
        er = np.minimum(np.sqrt(e), by_ratio) * (1 + 4 * u) + 2 * u * r
        G = np.exp(-r / self.lengthscale)
        lo = np.maximum(r - er, 0.0)
        return G, (
            np.exp(-lo / self.lengthscale) * er / self.lengthscale * (1 + 4 * u)
            + 4 * u * G
            + 2 * eta(G.dtype)
        )

    def _mp(self, X, Y):
        ell = mpmath.mpf(self.lengthscale)
        return [[mpmath.exp(-mpmath.sqrt(self._mp_sqdist(x, y)) / ell) for y in Y] for x in X]


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

    def _gram(self, X, Y):
        n, m = X.shape[0], Y.shape[0]
        dt = result_dtype(X, Y)
        try:
            if self.vectorized:
                out = self.function(X[:, None, :], Y[None, :, :])
                G = np.asarray(out)
            else:
                G = np.empty((n, m), dtype=dt)
                for i in range(n):
                    for j in range(m):
                        G[i, j] = float(self.function(X[i], Y[j]))
        except InvalidArgument:
            raise
        except Exception as exc:
            raise InvalidArgument(f"`f` ({self.name}) raised {type(exc).__name__}: {exc}") from exc
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

    def _mp(self, X, Y):
        out = []
        for i, x in enumerate(X):
            row = []
            for j, y in enumerate(Y):
                try:
                    value = mpmath.mpf(self.mp_function(x, y))
                except Exception as exc:
                    raise InvalidArgument(
                        f"`mp_function` of {self!r} raised {type(exc).__name__}: {exc}"
                    ) from exc
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


# ---------------------------------------------------------------------------
# Combinators
# ---------------------------------------------------------------------------


class _Binary(Kernel):
    """Shared structure of the binary combinators: two children, printed infix."""

    __slots__ = ("left", "right")
    left: Kernel
    right: Kernel
    _symbol = "?"

    def __init__(self, left: Any, right: Any):
        self._set(left=_promote(left, "left"), right=_promote(right, "right"))

    def _key(self) -> tuple:
        return (self.left, self.right)

    def _children(self):
        return (self.left, self.right)

    def __repr__(self) -> str:
        # the right operand is bracketed at equal precedence: a * (b * c) prints as written
        return f"{self.left._wrap(self._prec)} {self._symbol} {self.right._wrap(self._prec + 1)}"


class Sum(_Binary):
    """``k1 + k2``: a kernel (C9's closure rule); features concatenate.

    Error model: ``E = E1 + E2 + u |G|``.
    """

    __slots__ = ()
    _prec = 0
    _symbol = "+"

    def _gram(self, X, Y):
        # a constant side is added as a scalar, without forming its block
        if isinstance(self.right, Constant):
            G = self.left._gram(X, Y)
            G += self.right.c
            return G
        if isinstance(self.left, Constant):
            G = self.right._gram(X, Y)
            G += self.left.c
            return G
        G = self.left._gram(X, Y)
        G += self.right._gram(X, Y)
        return G

    def _gram_err(self, X, Y):
        G1, E1 = self.left._gram_err(X, Y)
        G2, E2 = self.right._gram_err(X, Y)
        G = G1 + G2
        return G, E1 + E2 + unit_roundoff(G.dtype) * np.abs(G) * (1 + 2 * unit_roundoff(G.dtype))

    def _mp(self, X, Y):
        A, B = self.left._mp(X, Y), self.right._mp(X, Y)
        return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]

    @property
    def has_finite_features(self) -> bool:
        return self.left.has_finite_features and self.right.has_finite_features

    def _phi(self, X, form):
        return np.concatenate([self.left._phi(X, form), self.right._phi(X, form)], axis=1)

    def _feature_dim(self, d, form):
        return self.left._feature_dim(d, form) + self.right._feature_dim(d, form)

    def _phi_ops(self, form):
        return max(self.left._phi_ops(form), self.right._phi_ops(form))


class Scaled(Kernel):
    """``c * k``: a kernel for ``c >= 0``; features are ``sqrt(c) phi_k``.

    A negative ``c`` builds a value that is not a kernel (``features()``
    raises; the PSD verdicts refute it).  Error model: ``E = |c| E1 + u |G|``.
    """

    __slots__ = ("c", "kernel")
    c: float
    kernel: Kernel
    _prec = 1

    def __init__(self, c: float, kernel: Any):
        self._set(c=as_real(c, "c"), kernel=_promote(kernel, "kernel"))

    def _key(self) -> tuple:
        return (self.c, self.kernel)

    def _children(self):
        return (self.kernel,)

    def __repr__(self) -> str:
        c = f"({self.c!r})" if self.c < 0 else repr(self.c)
        return f"{c} * {self.kernel._wrap(2)}"

    def _gram(self, X, Y):
        G = self.kernel._gram(X, Y)
        G *= self.c
        return G

    def _gram_err(self, X, Y):
        G1, E1 = self.kernel._gram_err(X, Y)
        G = self.c * G1
        u = unit_roundoff(G.dtype)
        return G, abs(self.c) * E1 * (1 + 2 * u) + u * np.abs(G) + eta(G.dtype)

    def _mp(self, X, Y):
        c = mpmath.mpf(self.c)
        return [[c * v for v in row] for row in self.kernel._mp(X, Y)]

    @property
    def has_finite_features(self) -> bool:
        return self.c >= 0 and self.kernel.has_finite_features

    def _infinite_reason(self) -> str:
        if self.c < 0:
            return (
                f"{self!r} scales by a negative number: it is not a kernel and has no real "
                "feature map (Theorem 1, C5)"
            )
        return self.kernel._infinite_reason()

    def _phi(self, X, form):
        return math.sqrt(self.c) * self.kernel._phi(X, form)

    def _feature_dim(self, d, form):
        return self.kernel._feature_dim(d, form)

    def _phi_ops(self, form):
        return self.kernel._phi_ops(form) + 2


def _kron_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row-wise Kronecker product: row i is ``kron(A[i], B[i])``."""
    return (A[:, :, None] * B[:, None, :]).reshape(A.shape[0], -1)


class Product(_Binary):
    """``k1 * k2``: a kernel (Schur product theorem); features are row-wise Kronecker.

    Error model: ``E = |G1| E2 + |G2| E1 + E1 E2 + u |G|``.
    """

    __slots__ = ()
    _prec = 1
    _symbol = "*"

    def _gram(self, X, Y):
        G = self.left._gram(X, Y)
        G *= self.right._gram(X, Y)
        return G

    def _gram_err(self, X, Y):
        G1, E1 = self.left._gram_err(X, Y)
        G2, E2 = self.right._gram_err(X, Y)
        G = G1 * G2
        u = unit_roundoff(G.dtype)
        return G, (
            (np.abs(G1) * E2 + np.abs(G2) * E1 + E1 * E2) * (1 + 4 * u)
            + u * np.abs(G)
            + eta(G.dtype)
        )

    def _mp(self, X, Y):
        A, B = self.left._mp(X, Y), self.right._mp(X, Y)
        return [[a * b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]

    @property
    def has_finite_features(self) -> bool:
        return self.left.has_finite_features and self.right.has_finite_features

    def _phi(self, X, form):
        return _kron_rows(self.left._phi(X, form), self.right._phi(X, form))

    def _feature_dim(self, d, form):
        return self.left._feature_dim(d, form) * self.right._feature_dim(d, form)

    def _phi_ops(self, form):
        return self.left._phi_ops(form) + self.right._phi_ops(form) + 1


def _int_power(G: np.ndarray, m: int, *, owned: bool = False) -> tuple[np.ndarray, int]:
    """``G ** m`` by binary exponentiation; returns the value and the rounding count.

    With ``owned=True`` the caller hands ``G`` over and it may be updated in
    place (no copy); otherwise ``G`` is left untouched.
    """
    if m == 0:
        return np.ones_like(G), 0
    result: np.ndarray | None = None
    base = G
    ops = 0
    while True:
        if m & 1:
            if result is None:
                result = base if (owned or base is not G) else base.copy()
            else:
                result *= base
                ops += 1
        m >>= 1
        if not m:
            break
        base = base * base
        ops += 1
    assert result is not None
    return result, ops


def weighted_monomials(Z: Any, m: int) -> np.ndarray:
    """The symmetric degree-``m`` feature map of the rows of ``Z`` (claim C8).

    Columns are the unique monomials ``z ** alpha`` (``|alpha| = m``) times
    ``sqrt(m! / alpha!)``, so that ``phi(x) . phi(y) = (z(x) . z(y)) ** m``
    (the multinomial theorem).  Built degree by degree: a degree-j column is a
    degree-(j-1) column whose last variable index is ``<= i`` times ``z_i``
    and ``sqrt(j / alpha_i)``, so the cost is one multiplication per output
    entry (time proportional to the output size).

    ``Z`` is validated (a finite real (n, D) array) and the output size is
    checked up front; an entry beyond the floating-point range raises
    :class:`~kernelcheck.errors.NumericalFailure`.
    """
    Z = as_points(Z, "Z")
    m = _check_degree(m, "m")
    check_size(Z.shape[0] * monomial_dim(Z.shape[1], m), "the monomial feature matrix")
    with np.errstate(over="ignore", invalid="ignore"):
        out = _weighted_monomials(Z, m)
    if not np.isfinite(out).all():
        raise NumericalFailure(
            f"the degree-{m} monomials of `Z` overflow {out.dtype} (max |Z| = "
            f"{float(np.abs(Z).max()):.3g}); scale the inputs down"
        )
    return out


def _weighted_monomials(Z: np.ndarray, m: int) -> np.ndarray:
    """:func:`weighted_monomials` without checks (inputs already validated)."""
    n, D = Z.shape
    if m == 0:
        return np.ones((n, 1), dtype=Z.dtype)
    # blocks[i]: columns whose largest variable is i; mult[i]: alpha_i of each column
    blocks = [Z[:, i : i + 1].copy() for i in range(D)]
    mults = [np.ones(1) for _ in range(D)]
    for j in range(2, m + 1):
        new_blocks, new_mults = [], []
        for i in range(D):
            prev = np.concatenate(blocks[: i + 1], axis=1)
            # the multiplicity of i rises by one in columns that already end in i
            prev_mult = np.concatenate(
                [np.zeros(blocks[l].shape[1]) for l in range(i)] + [mults[i]]
            )
            mult = prev_mult + 1.0
            factor = np.sqrt(j / mult).astype(Z.dtype)
            new_blocks.append(prev * (Z[:, i : i + 1] * factor[None, :]))
            new_mults.append(mult)
        blocks, mults = new_blocks, new_mults
    return np.concatenate(blocks, axis=1)


def unweighted_monomials(X: Any, degree: int) -> np.ndarray:
    """The unique degree-``degree`` monomials of each row, *without* weights.

    This is the map the essay describes in words ("maps out all the unique
    degree m monomials", claim C8).  It has C(d+m-1, m) coordinates but does
    **not** reproduce ``(x . y) ** m`` for m >= 2 and d >= 2: the cross terms
    lack their multinomial coefficients.  Provided so the claim can be
    checked; use ``Polynomial(m).features()`` for the correct map.
    """
    X = as_points(X, "X")
    degree = _check_degree(degree, "degree")
    # Refuse before listing the index tuples: the list alone can exhaust memory.
    check_size(X.shape[0] * math.comb(X.shape[1] + degree - 1, degree), "the monomial matrix")
    check_size(math.comb(X.shape[1] + degree - 1, degree) * degree, "the monomial index table")
    combos = list(combinations_with_replacement(range(X.shape[1]), degree))
    if degree == 0:
        return np.ones((X.shape[0], 1), dtype=X.dtype)
    idx = np.array(combos, dtype=np.intp)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.prod(X[:, idx], axis=2)
    if not np.isfinite(out).all():
        raise NumericalFailure(
            f"the degree-{degree} monomials of `X` overflow {out.dtype} (max |X| = "
            f"{float(np.abs(X).max()):.3g}); scale the inputs down"
        )
    return out


class Power(Kernel):
    """``k ** m``: a kernel for integer ``m >= 0`` (repeated Schur products), claim C8.

    Features: ``"tensor"`` is the m-fold row-wise Kronecker power of
    ``phi_k`` (D_k ** m coordinates); ``"symmetric"`` the unique monomials of
    ``phi_k`` with multinomial weights (C(D_k + m - 1, m)).

    Error model: computed by binary exponentiation with ``p`` roundings,
    ``E = m (|G1| + E1)^(m-1) E1 + gamma_(p+1) |G|``.
    """

    __slots__ = ("kernel", "m")
    kernel: Kernel
    m: int
    _prec = 2

    def __init__(self, kernel: Any, m: Any):
        self._set(kernel=_promote(kernel, "kernel"), m=_check_degree(m, "m"))

    def _key(self) -> tuple:
        return (self.kernel, self.m)

    def _children(self):
        return (self.kernel,)

    def __repr__(self) -> str:
        return f"{self.kernel._wrap(3)} ** {self.m}"

    def _gram(self, X, Y):
        return _int_power(self.kernel._gram(X, Y), self.m, owned=True)[0]

    def _gram_err(self, X, Y):
        G1, E1 = self.kernel._gram_err(X, Y)
        G, ops = _int_power(G1, self.m)
        if self.m == 0:
            return G, np.zeros_like(G)
        prop = self.m * _int_power(np.abs(G1) + E1, self.m - 1)[0] * E1
        return G, (
            prop * (1 + gamma(ops + 3, G.dtype))
            + gamma(ops + 1, G.dtype) * np.abs(G)
            + (ops + 1) * eta(G.dtype)
        )

    def _mp(self, X, Y):
        return [[v**self.m for v in row] for row in self.kernel._mp(X, Y)]

    @property
    def has_finite_features(self) -> bool:
        return self.kernel.has_finite_features

    def _phi(self, X, form):
        Z = self.kernel._phi(X, form)
        if form == "symmetric":
            return _weighted_monomials(Z, self.m)
        out = np.ones((X.shape[0], 1), dtype=Z.dtype)
        for _ in range(self.m):
            out = _kron_rows(out, Z)
        return out

    def _feature_dim(self, d, form):
        Dk = self.kernel._feature_dim(d, form)
        if form == "symmetric":
            return math.comb(Dk + self.m - 1, self.m)
        return Dk**self.m

    def _phi_ops(self, form):
        return self.m * self.kernel._phi_ops(form) + 4 * self.m


class Exp(Kernel):
    """``exp(k)``, or its Taylor series truncated at ``order`` (claims C9, C12).

    ``exp(k)(x, y) = sum_{j >= 0} k(x, y)^j / j!`` is a kernel whenever k is
    (a positive-weighted limit of powers, C9); its feature space is infinite.
    With ``order=M`` the node is the finite sum ``sum_{j <= M} k^j / j!``, a
    kernel for every M with the truncated Taylor feature map
    ``[1, phi, phi^(2) / sqrt(2!), ..., phi^(M) / sqrt(M!)]`` (C12).

    Error model.  Infinite: ``E = exp(G1 + E1) (expm1(E1) + 2u)``.
    Truncated (Horner, 3 roundings a step): with ``T_M`` the truncated series,
    ``E = T_(M-1)(|G1| + E1) E1 + gamma_(3M+1) T_M(|G1|)``.
    """

    __slots__ = ("kernel", "order")
    kernel: Kernel
    order: int | None

    def __init__(self, kernel: Any, order: Any = None):
        kernel = _promote(kernel, "kernel")
        if order is not None:
            order = _check_degree(order, "order")
        self._set(kernel=kernel, order=order)

    def _key(self) -> tuple:
        return (self.kernel, self.order)

    def _children(self):
        return (self.kernel,)

    def __repr__(self) -> str:
        if self.order is None:
            return f"exp({self.kernel!r})"
        return f"exp({self.kernel!r}, order={self.order})"

    @staticmethod
    def _taylor(G: np.ndarray, M: int) -> np.ndarray:
        # Horner, 1 + (out * G) / j for j = M..1, in place on one array
        out = np.ones_like(G)
        for j in range(M, 0, -1):
            out *= G
            out /= j
            out += 1.0
        return out

    def _gram(self, X, Y):
        G1 = self.kernel._gram(X, Y)
        if self.order is None:
            return np.exp(G1, out=G1)
        return self._taylor(G1, self.order)

    def _gram_err(self, X, Y):
        G1, E1 = self.kernel._gram_err(X, Y)
        u = unit_roundoff(G1.dtype)
        if self.order is None:
            G = np.exp(G1)
            return G, np.exp(G1 + E1) * (np.expm1(E1) + 2 * u) * (1 + 4 * u) + eta(G.dtype)
        M = self.order
        G = self._taylor(G1, M)
        if M == 0:
            return G, np.zeros_like(G)
        A = np.abs(G1)
        prop = self._taylor(A + E1, M - 1) * E1
        return G, (
            prop * (1 + gamma(3 * M + 2, G.dtype))
            + gamma(3 * M + 1, G.dtype) * self._taylor(A, M)
            + 3 * M * eta(G.dtype)
        )

    def _mp(self, X, Y):
        rows = self.kernel._mp(X, Y)
        if self.order is None:
            return [[mpmath.exp(v) for v in row] for row in rows]
        M = self.order
        return [
            [mpmath.fsum(v**j / mpmath.factorial(j) for j in range(M + 1)) for v in row]
            for row in rows
        ]

    @property
    def has_finite_features(self) -> bool:
        return self.order is not None and self.kernel.has_finite_features

    def _infinite_reason(self) -> str:
        if self.order is None:
            return (
                f"{self!r} has an infinite feature space (C9): phi(x) = [1, phi_k(x), "
                "phi_k(x)^(2)/sqrt(2!), ...]. Truncate it with exp(k, order=M) (C12), or sample "
                "random features (C13)"
            )
        return self.kernel._infinite_reason()

    def _phi(self, X, form):
        Z = self.kernel._phi(X, form)
        ones = np.ones((X.shape[0], 1), dtype=Z.dtype)
        blocks = [ones]
        tensor = ones
        for j in range(1, self.order + 1):
            if form == "symmetric":
                Pj = _weighted_monomials(Z, j)
            else:
                tensor = _kron_rows(tensor, Z)
                Pj = tensor
            blocks.append((1.0 / math.sqrt(math.factorial(j))) * Pj)
        return np.concatenate(blocks, axis=1)

    def _feature_dim(self, d, form):
        Dk = self.kernel._feature_dim(d, form)
        if form == "symmetric":
            return math.comb(Dk + self.order, self.order)
        return sum(Dk**j for j in range(self.order + 1))

    def _phi_ops(self, form):
        M = self.order or 0
        return M * self.kernel._phi_ops(form) + 4 * M + 4


def exp(kernel: Any, order: int | None = None) -> Exp:
    """``exp(k)``, or its Taylor series truncated at ``order=M`` (claims C9, C12).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Linear
    >>> X = np.array([[0.5, -0.25]])
    >>> k = exp(Linear(), order=2)
    >>> float(k(X)[0, 0]) == 1 + 0.3125 + 0.3125**2 / 2
    True
    >>> k.feature_dim(2)
    6
    """
    return Exp(kernel, order)
