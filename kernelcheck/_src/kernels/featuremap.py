"""Feature maps: ``phi(X)`` returns an (n, D) array whose inner products
reproduce (exact maps) or estimate (random maps) a kernel (claim C4).

The base class fixes the interface every map shares; :class:`ExactFeatureMap`
is the map a finite kernel returns from ``k.features()``.

This module sits below the kernel classes (``Kernel.features()`` builds an
:class:`ExactFeatureMap`) and never imports them: a map's kernel is anything
with the node interface :class:`KernelNode`, which every kernelcheck kernel has.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import feature_product_bound
from kernelcheck._src.core.validate import as_int, as_points, check_choice, describe
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = ["FeatureMap", "ExactFeatureMap", "KernelNode", "EXACT_MAP_FORMS"]

#: The values of ``form`` of an exact feature map (``k.features(form)``), the
#: layout of its monomial coordinates: ``"symmetric"`` keeps each unique
#: monomial once with the multinomial weight ``sqrt(m! / alpha!)``
#: (C(d+m-1, m) coordinates for degree m); ``"tensor"`` keeps every ordered
#: product (d**m coordinates).  Not the attention forms
#: (:data:`kernelcheck.attention.FORMS`).
EXACT_MAP_FORMS = ("symmetric", "tensor")


@runtime_checkable
class KernelNode(Protocol):
    """What a feature map needs of its kernel: the node interface of every kernelcheck kernel.

    Evaluation (``k(X, Y)``, ``k.error_bound(X, Y)``) and the finite-feature
    hooks the exact map composes (``_require_finite`` raises
    :class:`~kernelcheck.errors.InfiniteFeatureSpace` for an infinite feature
    space; ``_phi``, ``_feature_dim``, ``_phi_ops`` build the features, count
    them and count the roundings behind one entry).  Declared here so that
    this module needs no kernel class.
    """

    def __call__(self, X: Any, Y: Any = None) -> np.ndarray: ...

    def error_bound(self, X: Any, Y: Any = None) -> np.ndarray: ...

    def _require_finite(self) -> None: ...

    def _phi(self, X: np.ndarray, form: str) -> np.ndarray: ...

    def _feature_dim(self, d: int, form: str) -> int: ...

    def _phi_ops(self, form: str) -> int: ...


class FeatureMap(abc.ABC):
    """A map ``phi: R^d -> R^D`` applied row-wise: ``phi(X)`` has shape (n, D).

    Attributes
    ----------
    kernel : KernelNode
        The kernel the map reproduces (``exact=True``) or estimates.
    exact : bool
        ``phi(X) @ phi(Y).T == kernel(X, Y)`` up to rounding (True), or only
        in expectation over the map's randomness (False).
    """

    exact: bool = True

    @property
    @abc.abstractmethod
    def kernel(self) -> KernelNode:
        """The kernel this map reproduces or estimates."""

    @abc.abstractmethod
    def output_dim(self, d: int) -> int:
        """Number of features D for inputs of dimension ``d``, without building them.

        Parameters
        ----------
        d : int
            Input dimension.
        """

    @abc.abstractmethod
    def __call__(self, X) -> np.ndarray:
        """Apply the map to each row of ``X`` (shape (n, d)); returns (n, D)."""


class ExactFeatureMap(FeatureMap):
    """The exact, finite feature map of a kernel node (claims C4, C7, C8, C9, C12).

    Built by ``k.features(form)``; composes through the algebra: a sum
    concatenates, ``c * k`` multiplies by ``sqrt(c)``, a product takes the
    row-wise Kronecker product, a power ``m`` takes degree-m monomials (with
    multinomial weights in the symmetric form), and ``exp(k, order=M)`` stacks
    the powers ``0..M`` weighted by ``1 / sqrt(j!)`` (the truncated Taylor map).

    Error model.  Every feature entry is a product of at most ``ops`` rounded
    operations on exact inputs, so it carries a relative error of at most
    ``gamma_ops``; an inner product of two such D-vectors is then accurate to
    ``gamma_(D + 2 ops) |phi(x)| . |phi(y)|`` (Higham, ch. 3).  See
    :meth:`error_bound`.  A feature beyond the floating-point range raises
    :class:`~kernelcheck.errors.NumericalFailure` (never an ``inf`` feature).

    Parameters
    ----------
    kernel : Kernel
        The kernel whose exact map this is (it must have finite features).
    form : {"symmetric", "tensor"}, default "symmetric"
        The symmetric (unique monomials, weighted) or tensor (Kronecker) form.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import Polynomial
    >>> phi = Polynomial(2).features()
    >>> X = np.array([[1.0, 2.0], [3.0, -1.0]])
    >>> bool(np.allclose(phi(X) @ phi(X).T, Polynomial(2)(X)))
    True
    >>> phi.output_dim(2)
    3
    """

    exact = True

    def __init__(self, kernel: KernelNode, form: str = "symmetric"):
        if not isinstance(kernel, KernelNode):
            raise InvalidArgument(f"`kernel` must be a kernelcheck Kernel, got {describe(kernel)}")
        check_choice(form, "form", EXACT_MAP_FORMS)
        kernel._require_finite()
        self._kernel = kernel
        self.form = form

    @property
    def kernel(self) -> KernelNode:
        return self._kernel

    @property
    def ops(self) -> int:
        """Bound on the rounded operations behind one feature entry (the error model)."""
        return self._kernel._phi_ops(self.form)

    def output_dim(self, d: int) -> int:
        """Number of features D for inputs of dimension ``d``, without building them.

        Parameters
        ----------
        d : int
            Input dimension.
        """
        d = as_int(d, "d", minimum=1)
        return self._kernel._feature_dim(d, self.form)

    def __call__(self, X) -> np.ndarray:
        X = as_points(X, "X")
        D = self.output_dim(X.shape[1])
        check_size(X.shape[0] * D, f"the feature matrix of {self!r} for X of shape {X.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            P = self._kernel._phi(X, self.form)
        if not np.isfinite(P).all():
            row, col = (int(i) for i in np.argwhere(~np.isfinite(P))[0])
            raise NumericalFailure(
                f"{self!r} overflows {P.dtype} at feature {col} of row {row} (the exact value "
                "is beyond the floating-point range); scale the inputs down"
            )
        return P

    def error_bound(self, X, Y=None) -> np.ndarray:
        """Entrywise bound on ``|fl(phi(X) @ phi(Y).T) - k(X, Y)|`` (exact k).

        ``gamma_(D + 2 ops) (1 + gamma_D) (|phi(X)| @ |phi(Y)|.T)``, the
        feature entries' relative errors (``ops`` each) and the length-D inner
        product's rounding, in the unit roundoff of the result dtype
        (:func:`~kernelcheck._src.core.rounding.feature_product_bound`).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        Y : array_like, shape (m, d), default None
            Points; None means ``Y = X``.
        """
        PX = self(X)
        PY = PX if Y is None else self(Y)
        return feature_product_bound(PX, PY, self.ops)

    def __repr__(self) -> str:
        return f"({self._kernel!r}).features(form={self.form!r})"

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, ExactFeatureMap)
            and other._kernel == self._kernel
            and other.form == self.form
        )

    def __hash__(self) -> int:
        return hash((ExactFeatureMap, self._kernel, self.form))
