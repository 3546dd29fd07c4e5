"""Random feature maps of the exponential kernel (claims C13, C17, C18).

Each map estimates ``Exponential(scale)``, ``k(x, y) = exp(scale x . y)``, by
``phi(x) . phi(y)``.  Writing ``x' = sqrt(scale) x`` and ``z = x' + y'``, with
projection rows ``w_i ~ N(0, I_d)`` (i = 1..m):

================================  =====================================================  ======
map                               ``phi(x)``                                             D
================================  =====================================================  ======
:class:`PositiveRandomFeatures`   ``m^-1/2 exp(w_i . x' - |x'|^2 / 2)``  (FAVOR+)        m
:class:`TrigonometricRandomFeatures` ``m^-1/2 exp(|x'|^2 / 2) [sin(w_i . x'), cos(w_i . x')]``  2m
:class:`HyperbolicRandomFeatures` ``(2m)^-1/2 exp(-|x'|^2/2) [exp(w_i . x'), exp(-w_i . x')]`` 2m
:class:`OptimalPositiveRandomFeatures` ``m^-1/2 D exp(A |w_i|^2 + B w_i . x' - |x'|^2/2)`` m
================================  =====================================================  ======

Each is unbiased because ``w . v ~ N(0, |v|^2)`` and ``E exp(t w . v) =
exp(t^2 |v|^2 / 2)`` (C13); the generalized exponential family (FAVOR++,
Likhosherstov et al., "Chefs' Random Tables: Non-Trigonometric Random
Features", NeurIPS 2022) is unbiased for every ``A < 1/4`` with
``B = sqrt(1 - 4A)``, ``D = (1 - 4A)^(d/4)``; ``A = 0`` is FAVOR+.

Theory (C17).  One trial's estimate is the mean of m i.i.d. terms ``Z_i``;
``Z / k(x, y)`` has raw moments ``r_j = E[(Z / k)^j]`` in closed form
(``s = |x' + y'|``, ``t = |x' - y'|``):

* positive: ``r_j = exp(j (j - 1) s^2 / 2)``, so
  ``MSE = k^2 (exp(s^2) - 1) / m`` -- Choromanski et al., "Rethinking
  Attention with Performers", ICLR 2021, Lemma 2:
  ``MSE = exp(|x+y|^2) SM(x,y)^2 (1 - exp(-|x+y|^2)) / m``;
* trigonometric: ``r_j = exp(j t^2/2) 2^-j sum_i C(j,i) exp(-(2i-j)^2 t^2/2)``,
  ``MSE = exp(|x+y|^2) SM(x,y)^-2 (1 - exp(-|x-y|^2))^2 / (2m)`` (same Lemma 2);
* hyperbolic: ``r_j = exp(-j s^2/2) 2^-j sum_i C(j,i) exp((2i-j)^2 s^2/2)``,
  ``MSE = (1 - exp(-s^2)) MSE_positive / 2`` (Performers, Section 2.4);
* generalized exponential: ``log r_j = (j d / 2) log(1 - 4A) - (d/2) log(1 - 4jA)
  + j^2 (1 - 4A) s^2 / (2 (1 - 4jA)) - j s^2 / 2`` for ``4jA < 1`` (infinite
  otherwise); the FAVOR++ choice minimises the average log second moment:
  ``A* = (1 - 2 phi - sqrt((2 phi + 1)^2 + 8 phi)) / 16`` with
  ``phi = mean |x' + y'|^2 / d`` (Likhosherstov et al. 2022, Theorem 4.2).

Orthogonal blocks (C18).  ``orthogonal=True`` draws the rows in blocks of d
mutually orthogonal rows: a Haar orthogonal matrix (QR of a Gaussian matrix,
signs fixed by ``diag(R)``) times independent ``chi_d`` row norms, so every row
is exactly N(0, I_d) marginally (uniform direction times a chi norm) and every
estimate stays unbiased.  The i.i.d. MSE above is then the reference the
orthogonal estimator does not exceed (Choromanski et al. 2021, Theorem 2, for
positive features; measured for the others by the C18 property tests).

Large norms.  ``phi`` is evaluated as ``exp(log_scale)[:, None] * F`` where
``F`` has row maximum 1 (positive maps) or entries in [-1, 1] (trigonometric),
:meth:`~_RandomFeatures.scaled_features` returns both and
:meth:`~_RandomFeatures.estimate` forms ``exp(ls_x + ls_y) (F_x . F_y)``:
the same estimator, with no overflow until the estimate itself leaves the
float range.  In attention the per-query factor ``exp(log_scale(q))`` cancels
between numerator and denominator; the per-key factors do *not* cancel
individually, only their common maximum does (subtract ``max(ls_K)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_points,
    as_real,
    as_rng,
    check_size,
    describe,
)
from kernelcheck._src.kernels.featuremap import FeatureMap
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "PositiveRandomFeatures",
    "TrigonometricRandomFeatures",
    "HyperbolicRandomFeatures",
    "OptimalPositiveRandomFeatures",
    "RandomFeatureSampler",
    "draw_projection",
    "optimal_positive_parameter",
    "ESTIMATORS",
]

_LOG_MAX = math.log(np.finfo(np.float64).max)
_LOG_TINY = math.log(np.finfo(np.float64).tiny)


def draw_projection(
    rng: Any, dim: int, num_features: int, *, orthogonal: bool = False, batch: int | None = None
) -> np.ndarray:
    """Draw projection rows ``w_i``, each exactly N(0, I_dim) marginally (C13, C18).

    Parameters
    ----------
    rng : int, SeedSequence or Generator
        Source of randomness.
    dim, num_features : int
        d and m.
    orthogonal : bool
        i.i.d. rows (False) or blocks of ``dim`` orthogonal rows (True): a Haar
        orthogonal matrix (QR of a Gaussian matrix with the signs of
        ``diag(R)`` moved into Q) whose rows get independent ``chi_dim``
        norms.  ``ceil(m / d)`` independent blocks are stacked and the last is
        truncated to m rows.
    batch : int, optional
        Draw ``batch`` independent projections at once.

    Returns
    -------
    numpy.ndarray
        Shape (m, d), or (batch, m, d).

    Examples
    --------
    >>> W = draw_projection(0, 3, 5, orthogonal=True)
    >>> W.shape
    (5, 3)
    >>> G = W[:3] @ W[:3].T   # rows of one block are orthogonal
    >>> bool(abs(G[0, 1]) < 1e-12)
    True
    """
    rng = as_rng(rng, "rng")
    dim = as_int(dim, "dim", minimum=1)
    m = as_int(num_features, "num_features", minimum=1)
    count = 1 if batch is None else as_int(batch, "batch", minimum=1)
    lead: tuple[int, ...] = () if batch is None else (count,)
    blocks = -(-m // dim)
    per = blocks * dim * dim if orthogonal else m * dim
    check_size(per * count, "the projection")
    if not orthogonal:
        return rng.standard_normal(lead + (m, dim))
    G = rng.standard_normal(lead + (blocks, dim, dim))
    Q, R = np.linalg.qr(G)
    signs = np.sign(np.diagonal(R, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    Q = Q * signs[..., None, :]  # Haar: Q diag(sign R) (Mezzadri 2007)
    # rows of a Haar matrix are uniform on the sphere; chi_d norms make them N(0, I)
    norms = np.sqrt(rng.chisquare(dim, size=lead + (blocks, dim)))
    rows = np.swapaxes(Q, -1, -2) * norms[..., None]
    return rows.reshape(lead + (blocks * dim, dim))[..., :m, :]


def optimal_positive_parameter(sq_norm: float, dim: int) -> float:
    """The FAVOR++ parameter ``A*`` for pairs with mean ``|x' + y'|^2 = sq_norm``.

    ``A* = (1 - 2 phi - sqrt((2 phi + 1)^2 + 8 phi)) / 16``, ``phi = sq_norm / d``:
    the minimiser over ``A`` of the log second moment
    ``d log(1 - 4A) - (d/2) log(1 - 8A) + 2 (1 - 4A) s^2 / (1 - 8A)``
    (Likhosherstov et al. 2022).  Always ``<= 0``; ``A* = 0`` (FAVOR+) at 0.

    Examples
    --------
    >>> optimal_positive_parameter(0.0, 4)
    0.0
    >>> optimal_positive_parameter(4.0, 4) < 0
    True
    """
    s = as_real(sq_norm, "sq_norm", nonnegative=True)
    d = as_int(dim, "dim", minimum=1)
    phi = s / d
    # the same value divided through by 16, with no overflow for any finite sq_norm
    return 0.0625 - phi / 8.0 - math.hypot(phi / 8.0 + 0.0625, math.sqrt(phi / 32.0))


def _log_binomial(j: int, i: np.ndarray) -> np.ndarray:
    return gammaln(j + 1) - gammaln(i + 1) - gammaln(j - i + 1)


class _RandomFeatures(FeatureMap):
    """Common machinery of the random maps of ``Exponential(scale)``."""

    exact = False
    #: features per projection row (1, or 2 for the sin/cos and exp/exp- pairs)
    _per_row = 1
    _short = ""

    def __init__(self, dim, num_features, *, seed, orthogonal=False, scale=1.0):
        self._dim = as_int(dim, "dim", minimum=1)
        self._m = as_int(num_features, "num_features", minimum=1)
        self._orthogonal = as_bool(orthogonal, "orthogonal")
        self._scale = as_real(scale, "scale", positive=True)
        check_size(self._m * self._dim, "the projection")
        W = draw_projection(as_rng(seed), self._dim, self._m, orthogonal=self._orthogonal)
        W.setflags(write=False)
        self._W = W

    # ----- state ------------------------------------------------------------
    @property
    def projection(self) -> np.ndarray:
        """The drawn rows ``w_i`` as a read-only (m, d) array."""
        return self._W

    @property
    def dim(self) -> int:
        """Input dimension d."""
        return self._dim

    @property
    def num_features(self) -> int:
        """Number of projection rows m (the output has ``output_dim(d)`` columns)."""
        return self._m

    @property
    def orthogonal(self) -> bool:
        """Whether the rows were drawn in orthogonal blocks."""
        return self._orthogonal

    @property
    def scale(self) -> float:
        """The scale s of the estimated kernel ``exp(s x . y)``."""
        return self._scale

    @property
    def kernel(self):
        """``Exponential(scale)``, the kernel this map estimates."""
        from kernelcheck._src.kernels.algebra import Exponential

        return Exponential(self._scale)

    def _params(self) -> dict:
        return {}

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self._params().items())
        return (
            f"{type(self).__name__}({self._dim}, {self._m}, orthogonal={self._orthogonal}, "
            f"scale={self._scale!r}{extra})"
        )

    def output_dim(self, d: int) -> int:
        """D = ``per_row * m``; ``d`` must equal the map's input dimension."""
        d = as_int(d, "d", minimum=1)
        if d != self._dim:
            raise InvalidArgument(f"`d` must equal the map's input dimension {self._dim}, got {d}")
        return self._per_row * self._m

    @classmethod
    def sampler(cls, dim, num_features, *, orthogonal=False, scale=1.0, **params):
        """A :class:`RandomFeatureSampler` drawing maps of this class (for
        :func:`kernelcheck.verify.unbiased`, vectorised over trials)."""
        return RandomFeatureSampler(
            cls, dim, num_features, orthogonal=orthogonal, scale=scale, **params
        )

    # ----- evaluation -------------------------------------------------------
    def _prepare(self, X, name: str) -> np.ndarray:
        X = as_points(X, name, dim=self._dim)
        return X * math.sqrt(self._scale)

    def _parts(self, P: np.ndarray, sq: np.ndarray, wsq: np.ndarray):
        """(F, log_scale) from projections P (..., n, m), |x'|^2 (..., n), |w|^2 (..., m)."""
        raise NotImplementedError  # pragma: no cover

    def scaled_features(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(F, log_scale)`` with ``phi(X) = exp(log_scale)[:, None] * F`` exactly.

        ``F`` (n, D) has entries in [-1, 1] with row maximum 1 for the
        positive maps; ``log_scale`` (n,) carries the magnitude.  Never
        overflows for finite input.
        """
        return self._scaled_features(X, "X")

    def _scaled_features(self, X, name: str) -> tuple[np.ndarray, np.ndarray]:
        Xs = self._prepare(X, name)
        check_size(Xs.shape[0] * self._per_row * self._m, "the feature matrix")
        P = Xs @ self._W.T
        sq = np.einsum("ij,ij->i", Xs, Xs)
        wsq = np.einsum("ij,ij->i", self._W, self._W)
        with np.errstate(over="ignore", invalid="ignore"):
            F, ls = self._parts(P, sq, wsq)
        if np.isnan(ls).any() or not np.isfinite(F).all():
            raise NumericalFailure(
                f"{self!r}: the scaled features are not finite (an intermediate overflowed "
                "float64); use smaller inputs or a parameter A of smaller magnitude"
            )
        return F, ls

    def __call__(self, X) -> np.ndarray:
        """``phi(X)``, shape (n, D).

        Raises
        ------
        NumericalFailure
            When a row's features overflow float64, or its largest feature
            underflows below the smallest normal number (the row would be
            returned as zeros); :meth:`scaled_features` and :meth:`estimate`
            still work there.
        """
        F, ls = self.scaled_features(X)
        bad = (ls > _LOG_MAX - 1.0) | (ls < _LOG_TINY)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "overflow" if ls[i] > 0 else "underflow"
            raise NumericalFailure(
                f"{self!r}: the features of row {i} {what} float64 (log scale {ls[i]:.1f}); "
                "use scaled_features(X), log_features(X) or estimate(X, Y), which work in "
                "log space"
            )
        return np.exp(ls)[:, None] * F

    def estimate(self, X, Y=None) -> np.ndarray:
        """The kernel estimate ``phi(X) @ phi(Y).T`` (nx, ny), evaluated in log space.

        ``exp(ls_x[:, None] + ls_y[None, :]) * (F_x @ F_y.T)``: the same
        estimator as ``self(X) @ self(Y).T`` without intermediate overflow.
        """
        FX, lx = self._scaled_features(X, "X")
        FY, ly = (FX, lx) if Y is None else self._scaled_features(Y, "Y")
        with np.errstate(over="ignore"):
            out = np.exp(lx[:, None] + ly[None, :]) * (FX @ FY.T)
        if not np.isfinite(out).all():
            raise NumericalFailure(f"{self!r}: the kernel estimate itself overflows float64")
        return out

    # ----- theory (C17) -----------------------------------------------------
    def _log_raw_ratio(self, j: int, Xs: np.ndarray, Ys: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def theory(self, X, Y=None, *, order: int = 4) -> dict:
        """Closed-form moments of one i.i.d. estimate ``phi(x) . phi(y)`` per pair.

        Returns a dict with ``"mean"`` (nx, ny), the kernel value, and
        ``"central"`` (order + 1, nx, ny), the central moments of the estimate
        divided by ``mean**k`` (index k; ``central[2]`` is the relative MSE).
        Exact for i.i.d. rows; for ``orthogonal=True`` the same numbers are the
        i.i.d. reference (an upper bound on the MSE, C18).
        """
        return _theory(self, X, Y, order)

    def theoretical_mse(self, X, Y=None) -> np.ndarray:
        """Closed-form MSE ``E[(phi(x).phi(y) - k(x, y))^2]`` for i.i.d. rows (C17).

        For ``orthogonal=True`` it is the i.i.d. value, an upper bound (C18).
        See the module docstring for the formulas and their sources.

        Examples
        --------
        >>> import numpy as np
        >>> phi = PositiveRandomFeatures(2, 16, seed=0)
        >>> x = np.array([[0.3, 0.1]]); y = np.array([[0.2, -0.4]])
        >>> s2 = float(((x + y) ** 2).sum()); k = float(np.exp(x @ y.T)[0, 0])
        >>> bool(np.isclose(phi.theoretical_mse(x, y)[0, 0], k**2 * np.expm1(s2) / 16))
        True
        """
        t = _theory(self, X, Y, 2)
        c2 = t["central"][2]
        with np.errstate(over="ignore", invalid="ignore"):
            # a zero relative variance (trigonometric maps at x = y) is a zero MSE even
            # where k(x, y)**2 overflows
            mse = np.where(c2 == 0, 0.0, t["mean"] ** 2 * c2)
        if not np.isfinite(mse).all():
            i, j = (int(v) for v in np.argwhere(~np.isfinite(mse))[0])
            raise NumericalFailure(
                f"{self!r}: the MSE of pair ({i}, {j}) is beyond the float64 range "
                "(k(x, y)^2 times the relative variance over- or underflows); "
                "scale the inputs down"
            )
        return mse


def _exp_checked(fmap, L: np.ndarray) -> np.ndarray:
    """``exp(L)`` in place, refusing rows whose maximum leaves the normal range."""
    if L.size:
        top = L.max(axis=1)
        bad = (top > _LOG_MAX - 1.0) | (top < _LOG_TINY)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "overflow" if top[i] > 0 else "underflow"
            raise NumericalFailure(
                f"{fmap!r}: the features of row {i} {what} float64 (log scale {top[i]:.1f}); "
                "use scaled_features(X), log_features(X) or estimate(X, Y), which work in "
                "log space"
            )
    return np.exp(L, out=L)


def _theory(fmap: _RandomFeatures, X, Y, order: int) -> dict:
    from kernelcheck._src.mc.engine import central_from_raw_ratios, central_moments_of_mean

    order = as_int(order, "order", minimum=2, maximum=8)
    Xs = fmap._prepare(X, "X")
    Ys = Xs if Y is None else fmap._prepare(Y, "Y")
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.exp(Xs @ Ys.T)
        log_r = np.stack([fmap._log_raw_ratio(j, Xs, Ys) for j in range(order + 1)])
        central_z = central_from_raw_ratios(log_r)
    central = central_moments_of_mean(central_z, fmap.num_features)
    return {"mean": mean, "central": central}


def _pair_sq(Xs: np.ndarray, Ys: np.ndarray, sign: float) -> np.ndarray:
    """|x + sign y|^2 for every pair, clipped at 0."""
    sx = np.einsum("ij,ij->i", Xs, Xs)
    sy = np.einsum("ij,ij->i", Ys, Ys)
    return np.maximum(sx[:, None] + sy[None, :] + 2.0 * sign * (Xs @ Ys.T), 0.0)


class PositiveRandomFeatures(_RandomFeatures):
    """Performer positive random features (FAVOR+) of ``exp(scale x . y)`` (C13).

    ``phi(x) = m^(-1/2) [exp(w_i . x' - |x'|^2 / 2)]_(i=1..m)``, ``x' = sqrt(scale) x``,
    ``w_i ~ N(0, I_d)`` (i.i.d. or orthogonal blocks).  Unbiased:
    ``E[phi(x).phi(y)] = exp(-(|x'|^2+|y'|^2)/2) E exp(w.(x'+y')) = exp(x'.y')``.
    MSE (Choromanski et al. 2021, Lemma 2): ``exp(2 x'.y') (exp(|x'+y'|^2) - 1) / m``.

    Parameters
    ----------
    dim : int
        Input dimension d.
    num_features : int
        Number of projection rows m (D = m).
    seed : int, SeedSequence or Generator
        The projection is drawn from it once, at construction.
    orthogonal : bool
        Orthogonal blocks with exactly N(0, I) rows (C18).
    scale : float
        The kernel is ``Exponential(scale)``.

    Examples
    --------
    >>> import numpy as np
    >>> phi = PositiveRandomFeatures(3, 8, seed=1)
    >>> X = np.array([[0.1, 0.2, 0.3]])
    >>> phi(X).shape, bool((phi(X) > 0).all())
    ((1, 8), True)
    """

    _short = "positive"

    def _parts(self, P, sq, wsq):
        M = P.max(axis=-1, keepdims=True)
        F = np.exp(P - M)
        ls = M[..., 0] - 0.5 * sq - 0.5 * math.log(self._m)
        return F, ls

    def log_features(self, X) -> np.ndarray:
        """``log phi(X)`` (n, D), exact in log space for any norm."""
        Xs = self._prepare(X, "X")
        sq = np.einsum("ij,ij->i", Xs, Xs)
        L = Xs @ self._W.T
        L -= (0.5 * sq + 0.5 * math.log(self._m))[:, None]
        return L

    def __call__(self, X) -> np.ndarray:
        """``phi(X)``, shape (n, m): one GEMM, one shift, one exp (in place).

        Raises
        ------
        NumericalFailure
            When a row's features overflow, or its largest feature underflows
            (see :meth:`_RandomFeatures.__call__`).
        """
        L = self.log_features(X)
        return _exp_checked(self, L)

    def _log_raw_ratio(self, j, Xs, Ys):
        return j * (j - 1) * _pair_sq(Xs, Ys, 1.0) / 2.0


class TrigonometricRandomFeatures(_RandomFeatures):
    """Trigonometric (sin/cos) random features of ``exp(scale x . y)`` (C17).

    ``phi(x) = m^(-1/2) exp(|x'|^2 / 2) [sin(w_i . x'), cos(w_i . x')]`` (D = 2m), so
    ``phi(x).phi(y) = exp((|x'|^2+|y'|^2)/2) mean_i cos(w_i.(x'-y'))`` with
    expectation ``exp((|x'|^2+|y'|^2 - |x'-y'|^2)/2) = exp(x'.y')``.
    MSE (Choromanski et al. 2021, Lemma 2):
    ``exp(|x'+y'|^2) exp(-2 x'.y') (1 - exp(-|x'-y'|^2))^2 / (2m)``; zero at x = y.

    Parameters are those of :class:`PositiveRandomFeatures`.

    Examples
    --------
    >>> import numpy as np
    >>> phi = TrigonometricRandomFeatures(2, 4, seed=0)
    >>> phi.output_dim(2)
    8
    >>> x = np.array([[0.5, -0.5]])
    >>> bool(np.isclose(phi.estimate(x)[0, 0], np.exp(0.5)))   # exact at x = y
    True
    """

    _per_row = 2
    _short = "trigonometric"

    def _parts(self, P, sq, wsq):
        F = np.concatenate([np.sin(P), np.cos(P)], axis=-1)
        ls = 0.5 * sq - 0.5 * math.log(self._m)
        return F, ls

    def _log_raw_ratio(self, j, Xs, Ys):
        t2 = _pair_sq(Xs, Ys, -1.0)
        if j == 0:
            return np.zeros_like(t2)
        i = np.arange(j + 1, dtype=float)
        terms = (_log_binomial(j, i) - j * math.log(2.0))[:, None, None] - ((2 * i - j) ** 2)[
            :, None, None
        ] * t2[None] / 2.0
        return j * t2 / 2.0 + logsumexp(terms, axis=0)


class HyperbolicRandomFeatures(_RandomFeatures):
    """Hyperbolic (cosh) positive random features of ``exp(scale x . y)`` (C17).

    ``phi(x) = (2m)^(-1/2) exp(-|x'|^2/2) [exp(w_i . x'), exp(-w_i . x')]`` (D = 2m),
    so ``phi(x).phi(y) = exp(-(|x'|^2+|y'|^2)/2) mean_i cosh(w_i.(x'+y'))``.
    MSE (Choromanski et al. 2021, Section 2.4):
    ``(1 - exp(-|x'+y'|^2)) / 2`` times the MSE of :class:`PositiveRandomFeatures`.

    Parameters are those of :class:`PositiveRandomFeatures`.

    Examples
    --------
    >>> import numpy as np
    >>> phi = HyperbolicRandomFeatures(2, 4, seed=0)
    >>> phi(np.zeros((1, 2))).shape
    (1, 8)
    """

    _per_row = 2
    _short = "hyperbolic"

    def _parts(self, P, sq, wsq):
        M = np.abs(P).max(axis=-1, keepdims=True)
        F = np.concatenate([np.exp(P - M), np.exp(-P - M)], axis=-1)
        ls = M[..., 0] - 0.5 * sq - 0.5 * math.log(2 * self._m)
        return F, ls

    def log_features(self, X) -> np.ndarray:
        """``log phi(X)`` (n, D), exact in log space for any norm."""
        Xs = self._prepare(X, "X")
        sq = np.einsum("ij,ij->i", Xs, Xs)
        P = Xs @ self._W.T
        base = -0.5 * sq[:, None] - 0.5 * math.log(2 * self._m)
        return np.concatenate([P + base, -P + base], axis=1)

    def _log_raw_ratio(self, j, Xs, Ys):
        s2 = _pair_sq(Xs, Ys, 1.0)
        if j == 0:
            return np.zeros_like(s2)
        i = np.arange(j + 1, dtype=float)
        terms = (_log_binomial(j, i) - j * math.log(2.0))[:, None, None] + ((2 * i - j) ** 2)[
            :, None, None
        ] * s2[None] / 2.0
        return -j * s2 / 2.0 + logsumexp(terms, axis=0)


class OptimalPositiveRandomFeatures(_RandomFeatures):
    """FAVOR++ generalized exponential random features of ``exp(scale x . y)`` (C17).

    ``phi(x) = m^(-1/2) D exp(A |w_i|^2 + B w_i . x' - |x'|^2 / 2)`` with
    ``B = sqrt(1 - 4A)``, ``D = (1 - 4A)^(d/4)``, unbiased for every ``A < 1/4``
    (``E exp(2A|w|^2 + B w.z) = (1-4A)^(-d/2) exp(B^2 |z|^2 / (2(1-4A)))``);
    Likhosherstov et al., "Chefs' Random Tables", NeurIPS 2022.  ``A`` is
    chosen in closed form to minimise the variance for pairs with mean
    ``|x' + y'|^2 = sq_norm`` (:func:`optimal_positive_parameter`), unless
    given; ``A = 0`` is :class:`PositiveRandomFeatures`.  Relative second
    moment ``(1-4A)^d (1-8A)^(-d/2) exp(2(1-4A) s^2/(1-8A) - s^2)``, finite
    for ``A < 1/8``.

    Parameters
    ----------
    dim, num_features, seed, orthogonal, scale
        As in :class:`PositiveRandomFeatures` (D = m).
    sq_norm : float
        Mean of ``|x' + y'|^2`` over the pairs the map is tuned for (default 1.0);
        :meth:`fit` computes it from data.
    A : float, optional
        Use this parameter instead of the optimal one (must be < 1/4).

    Examples
    --------
    >>> import numpy as np
    >>> phi = OptimalPositiveRandomFeatures(4, 16, seed=0, sq_norm=2.0)
    >>> phi.A < 0
    True
    >>> X = np.full((2, 4), 0.2)
    >>> bool((phi(X) > 0).all())
    True
    """

    _short = "optimal-positive"

    def __init__(
        self, dim, num_features, *, seed, orthogonal=False, scale=1.0, sq_norm=1.0, A=None
    ):
        super().__init__(dim, num_features, seed=seed, orthogonal=orthogonal, scale=scale)
        self._sq_norm = as_real(sq_norm, "sq_norm", nonnegative=True)
        if A is None:
            A = optimal_positive_parameter(self._sq_norm, self._dim)
        else:
            A = as_real(A, "A")
            if not A < 0.25:
                raise InvalidArgument(f"`A` must be < 1/4 for the estimator to exist, got {A}")
        self._A = float(A)

    @classmethod
    def fit(cls, X, Y, num_features, *, seed, orthogonal=False, scale=1.0):
        """The map tuned for the pairs of ``X`` and ``Y`` (mean ``|x'+y'|^2`` over all pairs)."""
        X = as_points(X, "X")
        Y = as_points(Y, "Y", dim=X.shape[1])
        scale = as_real(scale, "scale", positive=True)
        mx, my = X.mean(axis=0), Y.mean(axis=0)
        sq = scale * (
            np.einsum("ij,ij->i", X, X).mean()
            + np.einsum("ij,ij->i", Y, Y).mean()
            + 2.0 * float(mx @ my)
        )
        return cls(
            X.shape[1],
            num_features,
            seed=seed,
            orthogonal=orthogonal,
            scale=scale,
            sq_norm=max(float(sq), 0.0),
        )

    @property
    def A(self) -> float:
        """The parameter A of the generalized exponential family."""
        return self._A

    @property
    def sq_norm(self) -> float:
        """The mean ``|x'+y'|^2`` the parameter was tuned for."""
        return self._sq_norm

    def _params(self) -> dict:
        return {"sq_norm": self._sq_norm, "A": self._A}

    def _parts(self, P, sq, wsq):
        A = self._A
        a = A * wsq[..., None, :] + math.sqrt(1.0 - 4.0 * A) * P
        M = a.max(axis=-1, keepdims=True)
        F = np.exp(a - M)
        ls = (
            M[..., 0] + 0.25 * self._dim * math.log1p(-4.0 * A) - 0.5 * sq - 0.5 * math.log(self._m)
        )
        return F, ls

    def log_features(self, X) -> np.ndarray:
        """``log phi(X)`` (n, D), exact in log space for any norm."""
        Xs = self._prepare(X, "X")
        wsq = np.einsum("ij,ij->i", self._W, self._W)
        sq = np.einsum("ij,ij->i", Xs, Xs)
        A = self._A
        L = Xs @ self._W.T
        with np.errstate(over="ignore", invalid="ignore"):
            L *= math.sqrt(1.0 - 4.0 * A)
            L += A * wsq[None, :]
            L += (0.25 * self._dim * math.log1p(-4.0 * A) - 0.5 * sq - 0.5 * math.log(self._m))[
                :, None
            ]
        if np.isnan(L).any() or np.isposinf(L).any():
            raise NumericalFailure(
                f"{self!r}: log features overflow float64 (A = {A:.3g}); use a parameter A "
                "of smaller magnitude or smaller inputs"
            )
        return L

    def __call__(self, X) -> np.ndarray:
        """``phi(X)``, shape (n, m), via :meth:`log_features` and one exp in place."""
        return _exp_checked(self, self.log_features(X))

    def _log_raw_ratio(self, j, Xs, Ys):
        s2 = _pair_sq(Xs, Ys, 1.0)
        if j == 0:
            return np.zeros_like(s2)
        A, d = self._A, self._dim
        den = 1.0 - 4.0 * j * A
        if not den > 0:
            return np.full_like(s2, np.inf)
        return (
            0.5 * j * d * math.log1p(-4.0 * A)
            - 0.5 * d * math.log(den)
            + j * j * (1.0 - 4.0 * A) * s2 / (2.0 * den)
            - j * s2 / 2.0
        )


#: Estimator names used by the CLI and reports.
ESTIMATORS = {
    "positive": PositiveRandomFeatures,
    "trigonometric": TrigonometricRandomFeatures,
    "hyperbolic": HyperbolicRandomFeatures,
    "optimal-positive": OptimalPositiveRandomFeatures,
}


class RandomFeatureSampler:
    """Draws random feature maps of one kind; vectorised over trials.

    ``sampler(rng)`` returns a new map drawn from ``rng`` (the
    ``sample`` protocol of :func:`kernelcheck.verify.unbiased`);
    :meth:`batch_estimates` draws many projections at once and evaluates all
    trials' estimates with batched GEMMs; :meth:`theory` gives the closed-form
    moments (C17).

    Examples
    --------
    >>> import numpy as np
    >>> s = PositiveRandomFeatures.sampler(2, 8)
    >>> s(np.random.default_rng(0)).projection.shape
    (8, 2)
    >>> est, bound = s.batch_estimates(np.random.default_rng(0), 5, np.ones((3, 2)) / 4)
    >>> est.shape
    (5, 3, 3)
    """

    #: Largest number of float64 entries one vectorised chunk may hold.
    CHUNK_ELEMENTS = 1 << 22

    def __init__(self, cls, dim, num_features, *, orthogonal=False, scale=1.0, **params):
        if not (isinstance(cls, type) and issubclass(cls, _RandomFeatures)):
            raise InvalidArgument(f"`cls` must be a random feature class, got {describe(cls)}")
        self.cls = cls
        self.params = dict(params)
        # validates every argument once, and gives the theory object
        self._proto = cls(dim, num_features, seed=0, orthogonal=orthogonal, scale=scale, **params)
        self.dim = self._proto.dim
        self.num_features = self._proto.num_features
        self.orthogonal = self._proto.orthogonal
        self.scale = self._proto.scale

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return (
            f"{self.cls.__name__}.sampler({self.dim}, {self.num_features}, "
            f"orthogonal={self.orthogonal}, scale={self.scale!r}{extra})"
        )

    @property
    def kernel(self):
        """The kernel the drawn maps estimate."""
        return self._proto.kernel

    @property
    def theory_kind(self) -> str:
        """``"exact"`` for i.i.d. rows; ``"bound"`` (i.i.d. MSE as upper bound, C18) else."""
        return "bound" if self.orthogonal else "exact"

    def __call__(self, rng):
        return self.cls(
            self.dim,
            self.num_features,
            seed=rng,
            orthogonal=self.orthogonal,
            scale=self.scale,
            **self.params,
        )

    def with_num_features(self, m: int) -> RandomFeatureSampler:
        """The same sampler with m projection rows."""
        return RandomFeatureSampler(
            self.cls, self.dim, m, orthogonal=self.orthogonal, scale=self.scale, **self.params
        )

    def theory(self, X, Y=None, *, order: int = 4) -> dict:
        """Closed-form moments of one estimate (see :meth:`_RandomFeatures.theory`)."""
        return self._proto.theory(X, Y, order=order)

    def theoretical_mse(self, X, Y=None) -> np.ndarray:
        """Closed-form i.i.d. MSE per pair (an upper bound when orthogonal)."""
        return self._proto.theoretical_mse(X, Y)

    def _chunk(self, per_trial: int) -> int:
        return max(1, self.CHUNK_ELEMENTS // max(per_trial, 1))

    def batch_features(self, rng, n: int, Xs_list):
        """Yield ``[(F, ls) for each X']`` for chunks of trials (already scaled inputs)."""
        m, d = self.num_features, self.dim
        D = self._proto._per_row * m
        rows = sum(X.shape[0] for X in Xs_list)
        chunk = self._chunk(m * d + 2 * rows * D)
        sqs = [np.einsum("ij,ij->i", X, X) for X in Xs_list]
        done = 0
        while done < n:
            c = min(chunk, n - done)
            W = draw_projection(rng, d, m, orthogonal=self.orthogonal, batch=c)
            wsq = np.einsum("tij,tij->ti", W, W)
            WT = np.swapaxes(W, -1, -2)
            yield (
                c,
                [self._proto._parts(X @ WT, sq, wsq) for X, sq in zip(Xs_list, sqs, strict=True)],
            )
            done += c

    def batch_estimates(self, rng, n: int, X, Y=None):
        """``n`` independent trials' estimates, shape (n, nx, ny), and a rounding scale.

        The second array bounds ``|phi(x)| . |phi(y)|`` by ``|phi(x)|_2 |phi(y)|_2``
        (Cauchy-Schwarz), the scale of the inner product's rounding error.
        """
        rng = as_rng(rng, "rng")
        n = as_int(n, "n", minimum=1)
        Xs = self._proto._prepare(X, "X")
        Ys = Xs if Y is None else self._proto._prepare(Y, "Y")
        est, bound = [], []
        for _c, ((FX, lx), (FY, ly)) in self.batch_features(rng, n, [Xs, Ys]):
            G = FX @ np.swapaxes(FY, -1, -2)
            L = lx[..., :, None] + ly[..., None, :]
            nx = np.log(np.sqrt(np.einsum("tij,tij->ti", FX, FX)))
            ny = np.log(np.sqrt(np.einsum("tij,tij->ti", FY, FY)))
            with np.errstate(over="ignore"):
                est.append(np.exp(L) * G)
                bound.append(np.exp(L + nx[..., :, None] + ny[..., None, :]))
        return np.concatenate(est), np.concatenate(bound)
