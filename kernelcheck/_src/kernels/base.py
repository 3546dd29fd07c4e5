"""The kernel node: the base class every kernel derives from (claims C4, C5).

A kernel ``k`` is a node of an immutable expression tree (the leaves are in
:mod:`~kernelcheck._src.kernels.leaves` and
:mod:`~kernelcheck._src.kernels.function`, the combinators in
:mod:`~kernelcheck._src.kernels.combinators`).  This module holds what every
node shares: immutability, equality and hashing, printing, the operators of
the algebra (``+``, ``*``, ``**``, with numbers promoted to the constant
kernel), the validation of a Gram request, and the four questions every node
answers:

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

Error bounds use the standard model with gradual underflow,
``fl(a op b) = (a op b)(1 + delta) + eta``, ``|delta| <= u``, ``|eta| <=``
the smallest subnormal, so they hold for tiny inputs too.

The operators build nodes of classes defined above this module (``Sum``,
``Scaled``, ``Product``, ``Power``, ``Constant``).  To keep the imports
pointing one way, those classes declare the role they play when they are
defined (``class Sum(_Binary, role="sum")``) and the operators look the role
up; the package ``kernelcheck._src.kernels`` loads every node module, so the
roles are filled before any kernel exists.
"""

from __future__ import annotations

import abc
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.validate import (
    all_finite,
    as_int,
    as_points,
    as_real,
    check_choice,
    describe,
    result_dtype,
)
from kernelcheck._src.kernels.featuremap import EXACT_MAP_FORMS, ExactFeatureMap
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument, NumericalFailure

if TYPE_CHECKING:  # pragma: no cover
    import mpmath

__all__ = ["Kernel", "promote", "ROLES"]

#: The node classes the operators and the promotion of numbers build, by role:
#: ``"constant"``, ``"sum"``, ``"scaled"``, ``"product"``, ``"power"``.  Filled
#: by the classes themselves (``class Sum(_Binary, role="sum")``).
ROLES: dict[str, Callable[..., Kernel]] = {}


def _is_real_number(value: Any) -> bool:
    """A real number: not a bool; a 0-d integer or float array counts as its value."""
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "iuf"
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def promote(value: Any, name: str) -> Kernel:
    """``value`` as a kernel: a kernel as it is, a finite real number as the constant kernel.

    Raises
    ------
    InvalidArgument
        For anything else, naming the argument ``name``.
    """
    if isinstance(value, Kernel):
        return value
    if _is_real_number(value):  # named here: Constant would call it `c`
        return ROLES["constant"](as_real(value, name))
    raise InvalidArgument(f"`{name}` must be a Kernel or a real number, got {describe(value)}")


def _refuse_array(other: Any) -> None:
    """An array operand of ``*`` is refused by name (Python would say only "unsupported")."""
    if isinstance(other, np.ndarray):
        raise InvalidArgument(
            f"`other` must be a real number or a Kernel, got {describe(other)}: an array of "
            "kernels is not a kernel; scale each kernel by a number"
        )


def _gram_request(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray, bool]:
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
    A node class that the operators build declares its role in the class
    statement (``class Sum(_Binary, role="sum")``, see :data:`ROLES`).
    """

    __slots__ = ()
    #: precedence for printing: 0 sum, 1 product, 2 power, 3 atom
    _prec = 3
    #: NumPy defers to the kernel's operators: ``array * k`` reaches ``k.__rmul__``,
    #: which refuses it, instead of an object array of kernels built entry by entry.
    __array_ufunc__ = None

    def __init_subclass__(cls, role: str | None = None, **kwargs: Any) -> None:
        """Record ``cls`` as the node class of ``role`` (see :data:`ROLES`)."""
        super().__init_subclass__(**kwargs)
        if role is not None:
            ROLES[role] = cls

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
        return ROLES["sum"](self, promote(other, "other"))

    def __radd__(self, other: Any) -> Kernel:
        return ROLES["sum"](promote(other, "other"), self)

    def __mul__(self, other: Any) -> Kernel:
        if isinstance(other, Kernel):
            return ROLES["product"](self, other)
        if _is_real_number(other):
            return ROLES["scaled"](as_real(other, "other"), self)
        _refuse_array(other)
        return NotImplemented

    def __rmul__(self, other: Any) -> Kernel:
        if _is_real_number(other):
            return ROLES["scaled"](as_real(other, "other"), self)
        _refuse_array(other)
        return NotImplemented

    def __pow__(self, m: Any) -> Kernel:
        return ROLES["power"](self, m)

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
        Xa, Ya, _ = _gram_request(X, Y)
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

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        Y : array_like, shape (m, d), default None
            Points; None means ``Y = X``.
        """
        Xa, Ya, _ = _gram_request(X, Y)
        check_size(Xa.shape[0] * Ya.shape[0], f"the Gram block of {self!r}")
        self._check_dim(Xa.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            G, E = self._gram_err(Xa, Ya)
        self._check_result(G)
        if not all_finite(E):  # a bound of inf is no bound: no verdict may use it
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(E))[0])
            raise NumericalFailure(
                f"the rounding-error bound of {self!r} overflows {E.dtype} at entry {bad} "
                "(the Gram entry is finite, its error model is not); scale the inputs down"
            )
        return E

    def gram_mp(self, X: Any, Y: Any = None, *, dps: int = 50) -> mpmath.matrix:
        """The Gram block evaluated in mpmath at ``dps`` decimal digits.

        The float entries of ``X`` and ``Y`` are converted exactly (every
        binary float is an mpf); all arithmetic then runs at ``dps`` digits.
        Used by the precision ladder of :func:`kernelcheck.verify.kernel`.
        mpmath is imported here, on first use, not when the kernels are.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        Y : array_like, shape (m, d), default None
            Points; None means ``Y = X``.
        dps : int, default 50
            Decimal digits of the mpmath arithmetic.
        """
        import mpmath

        if not self.supports_mp:
            raise InvalidArgument(
                f"`kernel` {self!r} cannot be evaluated in mpmath; pass mp_function= to "
                "kernel_from_function"
            )
        dps = as_int(dps, "dps", minimum=15, maximum=100000)
        Xa, Ya, _ = _gram_request(X, Y)
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

    def _as_constant(self) -> float | None:
        """The value ``c`` when this node is the constant kernel ``c``, else None."""
        return None

    def _check_dim(self, d: int) -> None:
        for child in self._children():
            child._check_dim(d)

    def _check_result(self, G: np.ndarray) -> None:
        if not all_finite(G):
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
    def _mp(self, X: list, Y: list) -> list:
        """The Gram block as lists of mpmath numbers (the caller set the precision)."""

    # ----- feature maps -------------------------------------------------------
    @property
    def has_finite_features(self) -> bool:
        """Whether :meth:`features` returns an exact finite feature map."""
        return False

    def features(self, form: str = "symmetric") -> ExactFeatureMap:
        """The exact feature map ``phi`` with ``phi(X) @ phi(Y).T == k(X, Y)`` (C4).

        Parameters
        ----------
        form : {"symmetric", "tensor"}, default "symmetric"
            For powers and polynomials: the unique monomials with multinomial
            weights (C(d+m-1, m) coordinates) or the full tensor power (d**m).

        Raises
        ------
        InfiniteFeatureSpace
            For kernels whose feature space is infinite; the message says how
            to truncate (``exp(k, order=M)``) or sample (random features).
        """
        check_choice(form, "form", EXACT_MAP_FORMS)
        self._require_finite()
        return ExactFeatureMap(self, form)

    def feature_dim(self, d: int, form: str = "symmetric") -> int:
        """Output dimension D of ``features(form)`` on inputs of dimension ``d``.

        Parameters
        ----------
        d : int
            Input dimension.
        form : {"symmetric", "tensor"}, default "symmetric"
            The feature map's form (see :meth:`features`).
        """
        check_choice(form, "form", EXACT_MAP_FORMS)
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
