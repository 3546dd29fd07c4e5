"""The combinators of the kernel algebra (claims C8, C9, C12).

``k1 + k2`` (:class:`Sum`), ``c * k`` (:class:`Scaled`), ``k1 * k2``
(:class:`Product`), ``k ** m`` (:class:`Power`) and :func:`exp` (``exp(k)``,
or its Taylor series truncated at ``order=M``, :class:`Exp`).  Each node
composes its children's Gram blocks, error bounds, mpmath entries and exact
feature maps; its docstring states its error-propagation rule (first order,
in the unit roundoff of the result dtype, with ``eta`` the smallest subnormal
for underflow; see :mod:`~kernelcheck._src.kernels.base`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import as_real
from kernelcheck._src.kernels.base import Kernel, promote
from kernelcheck._src.kernels.monomials import (
    check_degree,
    int_power,
    weighted_monomials_unchecked,
)
from kernelcheck.errors import InvalidArgument

__all__ = ["Sum", "Scaled", "Product", "Power", "Exp", "exp", "MAX_DEPTH"]

#: The deepest nesting of combinators a kernel expression may have.  Every
#: question about a kernel (``k(X)``, ``error_bound``, ``features``, ``repr``,
#: ``hash``, ``==``, pickling) walks its tree recursively, up to about five
#: Python frames per level: 100 levels stay well inside Python's recursion
#: limit (1000) from any caller's stack, 300 do not.
MAX_DEPTH = 100


def _depth(**children: Kernel) -> int:
    """The depth of a new node over ``children`` (leaves are 0), or InvalidArgument."""
    name, deepest = max(children.items(), key=lambda item: getattr(item[1], "_depth", 0))
    depth = 1 + getattr(deepest, "_depth", 0)
    if depth > MAX_DEPTH:
        raise InvalidArgument(
            f"`{name}` is nested {depth - 1} combinators deep: the kernel expression would be "
            f"{depth} deep, beyond the limit of {MAX_DEPTH} (every question about a kernel "
            "walks its tree recursively). Combine fewer terms, e.g. a power k ** m or "
            "exp(k, order=M) instead of a long product or sum, or a kernel_from_function"
        )
    return depth


class _Binary(Kernel):
    """Shared structure of the binary combinators: two children, printed infix."""

    __slots__ = ("left", "right", "_depth")
    left: Kernel
    right: Kernel
    _symbol = "?"

    def __init__(self, left: Any, right: Any):
        left, right = promote(left, "left"), promote(right, "right")
        self._set(left=left, right=right, _depth=_depth(left=left, right=right))

    def _key(self) -> tuple:
        return (self.left, self.right)

    def _children(self):
        return (self.left, self.right)

    def __repr__(self) -> str:
        # the right operand is bracketed at equal precedence: a * (b * c) prints as written
        return f"{self.left._wrap(self._prec)} {self._symbol} {self.right._wrap(self._prec + 1)}"


class Sum(_Binary, role="sum"):
    """``k1 + k2``: a kernel (C9's closure rule); features concatenate.

    Error model: ``E = E1 + E2 + u |G|``.

    Parameters
    ----------
    left : Kernel or number
        The first kernel (a number is the constant kernel).
    right : Kernel or number
        The second kernel.
    """

    __slots__ = ()
    _prec = 0
    _symbol = "+"

    def _constant_side(self):
        """``(c, other)`` when one side is the constant kernel ``c``, else ``(None, None)``.

        A constant side is added as a scalar, without forming its block; its
        error is exactly 0, so the other side's bound is the sum's ``E1 + E2``.
        """
        c = self.right._as_constant()
        if c is not None:
            return c, self.left
        c = self.left._as_constant()
        return (c, self.right) if c is not None else (None, None)

    def _gram(self, X, Y):
        c, other = self._constant_side()
        if c is not None:
            G = other._gram(X, Y)
            G += c
            return G
        G = self.left._gram(X, Y)
        G += self.right._gram(X, Y)
        return G

    def _gram_err(self, X, Y):
        # E1 + E2 + (u |G|)(1 + 2u), in that order, in arrays of this node's own
        c, other = self._constant_side()
        if c is not None:
            G1, E = other._gram_err(X, Y)
            G = G1 + c
        else:
            G1, E1 = self.left._gram_err(X, Y)
            G2, E2 = self.right._gram_err(X, Y)
            G, E = G1 + G2, E1 + E2
        u = unit_roundoff(G.dtype)
        term = np.abs(G)
        term *= u
        term *= 1 + 2 * u
        return G, np.add(E, term, out=term)

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


class Scaled(Kernel, role="scaled"):
    """``c * k``: a kernel for ``c >= 0``; features are ``sqrt(c) phi_k``.

    A negative ``c`` builds a value that is not a kernel (``features()``
    raises; the PSD verdicts refute it).  Error model: ``E = |c| E1 + u |G|``.

    Parameters
    ----------
    c : float
        The factor (a kernel for ``c >= 0``).
    kernel : Kernel or number
        The kernel k.
    """

    __slots__ = ("c", "kernel", "_depth")
    c: float
    kernel: Kernel
    _prec = 1

    def __init__(self, c: float, kernel: Any):
        c, kernel = as_real(c, "c"), promote(kernel, "kernel")
        self._set(c=c, kernel=kernel, _depth=_depth(kernel=kernel))

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
        import mpmath

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


class Product(_Binary, role="product"):
    """``k1 * k2``: a kernel (Schur product theorem); features are row-wise Kronecker.

    Error model: ``E = |G1| E2 + |G2| E1 + E1 E2 + u |G|``.

    Parameters
    ----------
    left : Kernel or number
        The first kernel (a number is the constant kernel).
    right : Kernel or number
        The second kernel.
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


class Power(Kernel, role="power"):
    """``k ** m``: a kernel for integer ``m >= 0`` (repeated Schur products), claim C8.

    Features: ``"tensor"`` is the m-fold row-wise Kronecker power of
    ``phi_k`` (D_k ** m coordinates); ``"symmetric"`` the unique monomials of
    ``phi_k`` with multinomial weights (C(D_k + m - 1, m)).

    Error model: computed by binary exponentiation with ``p`` roundings,
    ``E = m (|G1| + E1)^(m-1) E1 + gamma_(p+1) |G|``.

    Parameters
    ----------
    kernel : Kernel or number
        The kernel k.
    m : int
        The power, an integer >= 0.
    """

    __slots__ = ("kernel", "m", "_depth")
    kernel: Kernel
    m: int
    _prec = 2

    def __init__(self, kernel: Any, m: Any):
        kernel, m = promote(kernel, "kernel"), check_degree(m, "m")
        self._set(kernel=kernel, m=m, _depth=_depth(kernel=kernel))

    def _key(self) -> tuple:
        return (self.kernel, self.m)

    def _children(self):
        return (self.kernel,)

    def __repr__(self) -> str:
        return f"{self.kernel._wrap(3)} ** {self.m}"

    def _gram(self, X, Y):
        return int_power(self.kernel._gram(X, Y), self.m, owned=True)[0]

    def _gram_err(self, X, Y):
        G1, E1 = self.kernel._gram_err(X, Y)
        G, ops = int_power(G1, self.m)
        if self.m == 0:
            return G, np.zeros_like(G)
        # m (|G1| + E1)^(m-1) E1 (1 + gamma_(p+3)) + gamma_(p+1) |G| + (p + 1) eta, in
        # that order of operations, in two arrays of this node's own (in place: the
        # children's arrays are only read)
        prop = np.abs(G1)
        prop += E1
        prop = int_power(prop, self.m - 1, owned=True)[0]
        prop *= self.m
        prop *= E1
        prop *= 1 + gamma(ops + 3, G.dtype)
        term = np.abs(G)
        term *= gamma(ops + 1, G.dtype)
        prop += term
        prop += (ops + 1) * eta(G.dtype)
        return G, prop

    def _mp(self, X, Y):
        return [[v**self.m for v in row] for row in self.kernel._mp(X, Y)]

    @property
    def has_finite_features(self) -> bool:
        return self.kernel.has_finite_features

    def _phi(self, X, form):
        Z = self.kernel._phi(X, form)
        if form == "symmetric":
            return weighted_monomials_unchecked(Z, self.m)
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

    Parameters
    ----------
    kernel : Kernel or number
        The kernel k (a number is the constant kernel).
    order : int or None, default None
        Truncate the Taylor series at this degree M; None is the infinite series.
    """

    __slots__ = ("kernel", "order", "_depth")
    kernel: Kernel
    order: int | None

    def __init__(self, kernel: Any, order: Any = None):
        kernel = promote(kernel, "kernel")
        if order is not None:
            order = check_degree(order, "order")
        self._set(kernel=kernel, order=order, _depth=_depth(kernel=kernel))

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
        import mpmath

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
                Pj = weighted_monomials_unchecked(Z, j)
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

    Parameters
    ----------
    kernel : Kernel or number
        The kernel k (a number is the constant kernel).
    order : int or None, default None
        Truncate the Taylor series at this degree M; None is the infinite series.

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
