"""The leaves of the kernel algebra (claims C7, C8, C9, C10).

:class:`Linear`, :class:`Constant`, :class:`Polynomial`, :class:`Exponential`,
and the distance kernels :class:`Gaussian` and :class:`Laplacian`.  Each
leaf states its rounding-error model in its docstring (the standard model
with gradual underflow, see :mod:`~kernelcheck._src.kernels.base`).

Adding a leaf: one class here (or in its own module) and one row in
:data:`kernelcheck._src.kernels.catalog.LEAVES`, which the expression parser,
the Hypothesis strategies and the command-line help read.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from kernelcheck._src.core.rounding import eta, gamma, unit_roundoff
from kernelcheck._src.core.validate import as_real, result_dtype
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.combinators import Exp, Power, Scaled
from kernelcheck._src.kernels.monomials import check_degree

__all__ = ["Linear", "Constant", "Polynomial", "Exponential", "Gaussian", "Laplacian"]


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
        E = np.abs(X) @ np.abs(Y).T
        E *= g * (1 + g)  # (g (1 + g)) |X| |Y|^T + d eta, in place
        E += d * eta(X.dtype)
        return X @ Y.T, E

    def _mp(self, X, Y):
        import mpmath

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


class Constant(Kernel, role="constant"):
    """The constant kernel ``k(x, y) = c`` with ``phi(x) = [sqrt(c)]`` (c >= 0).

    A negative ``c`` is allowed as a value of the algebra (it is not a kernel,
    and ``features()`` says so); :func:`kernelcheck.verify.kernel` refutes it.

    Error model: exact values; the feature ``sqrt(c)`` has one rounding.

    Parameters
    ----------
    c : float
        The constant (a kernel for ``c >= 0``).
    """

    __slots__ = ("c",)
    c: float

    def __init__(self, c: float):
        self._set(c=as_real(c, "c"))

    def _key(self) -> tuple:
        return (self.c,)

    def _as_constant(self) -> float:
        return self.c

    def __repr__(self) -> str:
        return f"Constant({self.c!r})"

    def _gram(self, X, Y):
        return np.full((X.shape[0], Y.shape[0]), self.c, dtype=result_dtype(X, Y))

    def _gram_err(self, X, Y):
        G = self._gram(X, Y)
        return G, np.zeros_like(G)

    def _mp(self, X, Y):
        import mpmath

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


class _Formula(Kernel):
    """A leaf that is a formula of other nodes (``_formula()``), which answers every question.

    Values, error bounds (so the error model), mpmath entries and feature
    maps are those of the formula; the leaf keeps its own name, parameters,
    printing and equality.
    """

    __slots__ = ()

    @abc.abstractmethod
    def _formula(self) -> Kernel:
        """The same kernel written with the algebra's other nodes."""

    def _gram(self, X, Y):
        return self._formula()._gram(X, Y)

    def _gram_err(self, X, Y):
        return self._formula()._gram_err(X, Y)

    def _mp(self, X, Y):
        return self._formula()._mp(X, Y)

    @property
    def has_finite_features(self) -> bool:
        return self._formula().has_finite_features

    def _phi(self, X, form):
        return self._formula()._phi(X, form)

    def _feature_dim(self, d, form):
        return self._formula()._feature_dim(d, form)

    def _phi_ops(self, form):
        return self._formula()._phi_ops(form)


class Polynomial(_Formula):
    """The polynomial kernel ``k(x, y) = (x . y + c) ** degree`` (claim C8), ``c >= 0``.

    Feature maps: with ``z = [x, sqrt(c)]`` (just ``x`` when ``c = 0``), the
    ``"tensor"`` form is ``z (x) z (x) ... (x) z`` (D = (d + [c > 0]) ** degree);
    the ``"symmetric"`` form keeps each unique monomial ``z ** alpha`` once with
    weight ``sqrt(degree! / alpha!)`` (D = C(D_z + degree - 1, degree)).

    Error model: the inner value ``s = x . y + c`` is accurate to
    ``e_s = gamma_(d+1) (|x| . |y| + |c|)``; the power is taken by repeated
    multiplication (``p <= 2 log2(degree) + 1`` roundings), so
    ``|err| <= degree (|s| + e_s)^(degree-1) e_s + gamma_p |s|^degree``.

    Parameters
    ----------
    degree : int
        The power, an integer >= 0.
    c : float, default 0.0
        The offset, ``>= 0``.

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
        degree = check_degree(degree, "degree")
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

    def _formula(self) -> Kernel:
        return Power(self._base(), self.degree)


class Exponential(_Formula):
    """The exponential dot-product kernel ``k(x, y) = exp(scale * x . y)`` (claims C9, C10).

    Its feature space is infinite (C9): ``features()`` raises and points to
    ``exp(scale * Linear(), order=M)`` (Taylor, C12) or random features (C13).
    With ``scale = 1 / sqrt(d)`` it is the softmax kernel of attention (C10).

    Error model: ``s = scale * x . y`` is accurate to
    ``e_s = gamma_(d+1) scale |x| . |y|``; then
    ``|err| <= exp(s + e_s) (expm1(e_s) + 2u)`` (libm's exp is accurate to
    within 1 ulp).

    Parameters
    ----------
    scale : float, default 1.0
        The factor of the inner product, ``> 0``.
    """

    __slots__ = ("scale",)
    scale: float

    def __init__(self, scale: float = 1.0):
        self._set(scale=as_real(scale, "scale", positive=True))

    def _key(self) -> tuple:
        return (self.scale,)

    def __repr__(self) -> str:
        return "Exponential()" if self.scale == 1.0 else f"Exponential(scale={self.scale!r})"

    def _formula(self) -> Kernel:
        inner = Linear() if self.scale == 1.0 else Scaled(self.scale, Linear())
        return Exp(inner, None)

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

    ``d2 = |x|^2 + |y|^2 - 2 x . y`` (one GEMM), clipped at 0 (the exact
    value is >= 0, so clipping only reduces the error), accurate to
    ``e_d2 = gamma_(d+3) (1 + gamma_d) (|x|^2 + |y|^2 + 2 |x| . |y|) + 3 d eta``.
    Where that bound says the cancellation may have eaten every digit --
    ``d2 <= 2 gamma_(d+3) (|x|^2 + |y|^2)``: a point with itself, near
    duplicates -- the entry is recomputed from the differences,
    ``sum_k (x_k - y_k)^2``, accurate to ``gamma_(d+2) d2 + 3 d eta`` (no
    larger than ``e_d2``), so equal points are at distance exactly 0 and the
    kernel is exactly 1 there.  When the norms would overflow (entries
    beyond ``sqrt(max / 4d)``, about 1e153 in float64), every entry comes
    from the differences: a difference or square that overflows is ``inf``,
    and so is the distance, whose exact value is then beyond the range too
    (the kernel is 0 to within ``eta``, never NaN).
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
    def _sqdist(X, Y, finish=None):
        return _DistanceKernel._sqdist_err(X, Y, with_err=False, finish=finish)[0]

    @staticmethod
    def _sqdist_err(X, Y, with_err=True, finish=None):
        """Squared distances (and their error bounds): see the distance rule.

        ``finish`` is applied in place to each block of rows once its
        distances (and, with ``with_err``, their bounds: ``finish(d2, err)``)
        are final, while it is cached: an elementwise map from squared
        distances to the kernel's values (and their bounds).
        """
        d = X.shape[1]
        top = max(float(np.max(np.abs(X))), float(np.max(np.abs(Y))))
        g = gamma(d + 3, X.dtype)
        if top > math.sqrt(np.finfo(X.dtype).max / (4 * d)):
            every = np.ones((X.shape[0], Y.shape[0]), dtype=bool)
            d2 = _pairwise_sqdist(X, Y, every).reshape(every.shape)
            err = gamma(d + 2, X.dtype) * d2 + 3 * d * eta(X.dtype) if with_err else None
            if finish is not None:
                finish(d2, err) if with_err else finish(d2)
            return d2, err
        nx = np.einsum("ij,ij->i", X, X)
        ny = np.einsum("ij,ij->i", Y, Y)
        # the n x m results are the products' own arrays, finished a block of rows
        # at a time while cached (each entry the same operations, in the same
        # order, as over whole arrays; only the two GEMMs are n x m)
        d2 = X @ Y.T
        err = np.abs(X) @ np.abs(Y).T if with_err else None
        m = Y.shape[0]
        rows = max(1, _GRAM_BLOCK // max(1, m))
        scale = np.empty((min(rows, X.shape[0]), m), dtype=d2.dtype)
        c_err = g * (1 + gamma(d, X.dtype))
        for r0 in range(0, X.shape[0], rows):
            blk = slice(r0, r0 + rows)
            D2, S = d2[blk], scale[: d2[blk].shape[0]]
            np.add(nx[blk, None], ny[None, :], out=S)  # ||x||^2 + ||y||^2
            D2 *= 2.0  # exact
            np.subtract(S, D2, out=D2)
            np.maximum(D2, 0.0, out=D2)
            if with_err:
                Eb = err[blk]
                Eb *= 2.0  # exact
                Eb += S
                Eb *= c_err
                Eb += 3 * d * eta(X.dtype)
            S *= 2 * g
            doubtful = D2 <= S
            if doubtful.any():
                D2[doubtful] = _pairwise_sqdist(X[blk], Y, doubtful)
                if with_err:  # the recomputed entries carry their own, smaller error
                    Eb[doubtful] = gamma(d + 2, X.dtype) * D2[doubtful] + 3 * d * eta(X.dtype)
            if finish is not None:
                finish(D2, Eb) if with_err else finish(D2)
        return d2, err

    @staticmethod
    def _mp_sqdist(x, y):
        import mpmath

        return mpmath.fsum((a - b) ** 2 for a, b in zip(x, y))

    def _infinite_reason(self) -> str:
        return (
            f"{self!r} has an infinite feature space; sample random Fourier features for it, "
            "or use kernelcheck.mercer_features on a finite point set (C6)"
        )


#: Entries of a block of rows of a distance kernel's Gram (1 MiB of float64), see
#: :meth:`_DistanceKernel._sqdist_err`.
_GRAM_BLOCK = 1 << 17
#: Differences formed per block by :func:`_pairwise_sqdist` (about 64 MiB of float64).
_DIFF_BLOCK = 1 << 23


def _pairwise_sqdist(X: np.ndarray, Y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``sum_k (x_i - y_j)^2`` for the pairs where ``mask`` is True, flat, in ``mask``'s order.

    Formed from the differences in blocks of at most :data:`_DIFF_BLOCK`
    entries; overflow gives ``inf`` (the caller ignores the warning).
    """
    ii, jj = np.nonzero(mask)
    out = np.empty(ii.size, dtype=X.dtype)
    step = max(1, _DIFF_BLOCK // X.shape[1])
    for lo in range(0, ii.size, step):
        diff = X[ii[lo : lo + step]] - Y[jj[lo : lo + step]]
        out[lo : lo + step] = np.einsum("ij,ij->i", diff, diff)
    return out


def _cap(G: np.ndarray, E: np.ndarray, out=None, scratch=None) -> np.ndarray:
    """A distance kernel's bound capped by ``max(G, 1 - G)``: exact and computed values lie
    in [0, 1], so they differ by at most that; NaN (``0 * inf`` in the formula) gives the cap."""
    room = np.subtract(1.0, G, out=scratch)
    return np.fmin(E, np.maximum(G, room, out=room), out=out)


class Gaussian(_DistanceKernel):
    """The Gaussian kernel ``k(x, y) = exp(-||x - y||^2 / (2 lengthscale^2))``.

    Infinite feature space.  The exponent is ``t = ((d2 / l) / l) / 2`` in
    floating point (no ``1 / l^2``, which overflows or vanishes for
    lengthscales beyond about 1e154 or below 1e-154); an exponent that
    overflows is ``inf`` and the kernel exactly 0, as its exact value is to
    within ``eta``.  Error model: with ``d2`` accurate to ``e_d2`` (see the
    distance rule), ``|err| <= exp(-t((d2 - e_d2)_+)) t(e_d2) + 4u k + 2 eta``,
    capped at ``max(k, 1 - k)`` (the exact and the computed value both lie
    in [0, 1]).

    Parameters
    ----------
    lengthscale : float, default 1.0
        The length scale l, ``> 0``.
    """

    __slots__ = ()

    def _exponent(self, d2, out, sign=1.0):
        """``sign ((d2 / l) / l) * 0.5`` into ``out`` (which may be ``d2``).

        Bit for bit that expression: a division by a lengthscale of 1 is exact
        and skipped, and ``(-0.5) x`` is ``-(0.5 x)`` exactly.
        """
        ell = self.lengthscale
        if ell != 1.0:
            d2 = np.divide(d2, ell, out=out)
            d2 /= ell
        return np.multiply(d2, 0.5 * sign, out=out)

    def _gram(self, X, Y):
        def finish(t):  # exp(-t(d2)) in place, each block while cached
            np.exp(self._exponent(t, t, -1.0), out=t)

        return self._sqdist(X, Y, finish)

    def _gram_err(self, X, Y):
        u, tiny = unit_roundoff(X.dtype), 2 * eta(X.dtype)
        scratch: list = []

        def finish(d2, e):
            # G = exp(-t(d2)) into d2 and the capped bound
            # exp(-t((d2 - e)_+)) t(e) (1 + 4u) + 4u G + 2 eta into e, block by block
            if not scratch:
                scratch.extend(np.empty(d2.shape, dtype=d2.dtype) for _ in range(2))
            A, B = (x[: d2.shape[0], : d2.shape[1]] for x in scratch)
            np.subtract(d2, e, out=A)
            np.maximum(A, 0.0, out=A)
            np.exp(self._exponent(A, A, -1.0), out=A)
            A *= self._exponent(e, e)
            A *= 1 + 4 * u
            np.exp(self._exponent(d2, d2, -1.0), out=d2)
            A += np.multiply(d2, 4 * u, out=B)
            A += tiny
            _cap(d2, A, out=e, scratch=B)

        return self._sqdist_err(X, Y, finish=finish)

    def _mp(self, X, Y):
        import mpmath

        a = mpmath.mpf(0.5) / mpmath.mpf(self.lengthscale) ** 2
        return [[mpmath.exp(-a * self._mp_sqdist(x, y)) for y in Y] for x in X]


class Laplacian(_DistanceKernel):
    """The Laplacian kernel ``k(x, y) = exp(-||x - y|| / lengthscale)``.

    Infinite feature space; exactly 1 at distance 0 (equal points have
    ``d2 = 0`` exactly, see the distance rule).  Error model:
    ``|sqrt(a) - sqrt(b)| <= min(sqrt(e), e / sqrt(b))`` for ``|a - b| <= e``,
    so the distance error is ``e_r = min(sqrt(e_d2), e_d2 / sqrt(d2)) + 2u r``,
    and ``|err| <= exp(-(r - e_r)_+ / l) e_r / l + 4u k + 2 eta``, capped at
    ``max(k, 1 - k)``.

    Parameters
    ----------
    lengthscale : float, default 1.0
        The length scale l, ``> 0``.
    """

    __slots__ = ()

    def _gram(self, X, Y):
        ell = self.lengthscale

        def finish(t):  # exp(-sqrt(d2) / l) in place, each block while cached
            np.sqrt(t, out=t)
            t /= ell
            np.exp(np.negative(t, out=t), out=t)

        return self._sqdist(X, Y, finish)

    def _gram_err(self, X, Y):
        d2, e = self._sqdist_err(X, Y)
        r = np.sqrt(d2)
        u = unit_roundoff(X.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            by_ratio = np.where(d2 > 0, e / np.where(d2 > 0, r, 1.0), np.inf)
        er = np.minimum(np.sqrt(e), by_ratio) * (1 + 4 * u) + 2 * u * r
        G = np.exp(-r / self.lengthscale)
        lo = np.maximum(r - er, 0.0)
        E = np.exp(-lo / self.lengthscale) * (er / self.lengthscale) * (1 + 4 * u)
        return G, _cap(G, E + 4 * u * G + 2 * eta(G.dtype))

    def _mp(self, X, Y):
        import mpmath

        ell = mpmath.mpf(self.lengthscale)
        return [[mpmath.exp(-mpmath.sqrt(self._mp_sqdist(x, y)) / ell) for y in Y] for x in X]
