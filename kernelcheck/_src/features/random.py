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

Large norms.  Every map is evaluated in log space, with no overflow until the
estimate itself leaves the float range (see
:mod:`kernelcheck._src.features.base`, which holds the machinery the maps
share: the projection draw, the evaluation, the theory and the sampler).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from kernelcheck._src.core.validate import as_int, as_points, as_real
from kernelcheck._src.features.base import RandomFeatures, check_log_scale, draw_projection
from kernelcheck.errors import InvalidArgument, NumericalFailure

#: ``draw_projection`` (its home is :mod:`~kernelcheck._src.features.base`) is
#: listed here too: it draws the rows of every map of this module.
__all__ = [
    "PositiveRandomFeatures",
    "TrigonometricRandomFeatures",
    "HyperbolicRandomFeatures",
    "OptimalPositiveRandomFeatures",
    "draw_projection",
    "optimal_positive_parameter",
    "ESTIMATORS",
]


def optimal_positive_parameter(sq_norm: float, dim: int) -> float:
    """The FAVOR++ parameter ``A*`` for pairs with mean ``|x' + y'|^2 = sq_norm``.

    ``A* = (1 - 2 phi - sqrt((2 phi + 1)^2 + 8 phi)) / 16``, ``phi = sq_norm / d``:
    the minimiser over ``A`` of the log second moment
    ``d log(1 - 4A) - (d/2) log(1 - 8A) + 2 (1 - 4A) s^2 / (1 - 8A)``
    (Likhosherstov et al. 2022).  Always ``<= 0``; ``A* = 0`` (FAVOR+) at 0.

    Parameters
    ----------
    sq_norm : float
        The mean of ``|x' + y'|^2`` over the pairs (``x' = sqrt(scale) x``).
    dim : int
        Input dimension d.

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


def _exp_checked(fmap, L: np.ndarray) -> np.ndarray:
    """``exp(L)`` in place, refusing rows whose maximum leaves the normal range."""
    if L.size:
        check_log_scale(fmap, L.max(axis=1))
    return np.exp(L, out=L)


def _pair_sq(Xs: np.ndarray, Ys: np.ndarray, sign: float) -> np.ndarray:
    """|x + sign y|^2 for every pair, clipped at 0."""
    sx = np.einsum("ij,ij->i", Xs, Xs)
    sy = np.einsum("ij,ij->i", Ys, Ys)
    return np.maximum(sx[:, None] + sy[None, :] + 2.0 * sign * (Xs @ Ys.T), 0.0)


class PositiveRandomFeatures(RandomFeatures):
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
    orthogonal : bool, default False
        Orthogonal blocks with exactly N(0, I) rows (C18).
    scale : float, default 1.0
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
    #: ``log phi(x)_i = w_i . x' + (a term of x alone)``: the sampler may factor the
    #: per-point term out of the features (``ChunkEstimates`` in features/base.py)
    _unshifted = True

    def _parts(self, P, sq, wsq):
        # In place: both callers pass a fresh product X W^T they never use
        # again (RandomFeatures._scaled_features, RandomFeatureSampler.batch_features),
        # so F overwrites it instead of being a second array of its size
        # (tests/features: the shared buffer, and the callers' results unchanged).
        M = P.max(axis=-1, keepdims=True)
        P -= M
        np.exp(P, out=P)
        ls = M[..., 0] - 0.5 * sq - 0.5 * math.log(self._m)
        return P, ls

    def log_features(self, X) -> np.ndarray:
        """``log phi(X)`` (n, D), exact in log space for any norm.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        """
        Xs = self._prepare_features(X, "X")
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
            (see :meth:`RandomFeatures.__call__`).
        """
        L = self.log_features(X)
        return _exp_checked(self, L)

    def _log_raw_ratio(self, j, Xs, Ys):
        return j * (j - 1) * _pair_sq(Xs, Ys, 1.0) / 2.0


class TrigonometricRandomFeatures(RandomFeatures):
    """Trigonometric (sin/cos) random features of ``exp(scale x . y)`` (C17).

    ``phi(x) = m^(-1/2) exp(|x'|^2 / 2) [sin(w_i . x'), cos(w_i . x')]`` (D = 2m), so
    ``phi(x).phi(y) = exp((|x'|^2+|y'|^2)/2) mean_i cos(w_i.(x'-y'))`` with
    expectation ``exp((|x'|^2+|y'|^2 - |x'-y'|^2)/2) = exp(x'.y')``.
    MSE (Choromanski et al. 2021, Lemma 2):
    ``exp(|x'+y'|^2) exp(-2 x'.y') (1 - exp(-|x'-y'|^2))^2 / (2m)``; zero at x = y.

    Parameters are those of :class:`PositiveRandomFeatures`.

    Parameters
    ----------
    dim : int
        Input dimension d.
    num_features : int
        Number of projection rows m (D = 2m).
    seed : int, SeedSequence or Generator
        The projection is drawn from it once, at construction.
    orthogonal : bool, default False
        Orthogonal blocks with exactly N(0, I) rows (C18).
    scale : float, default 1.0
        The kernel is ``Exponential(scale)``.

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


class HyperbolicRandomFeatures(RandomFeatures):
    """Hyperbolic (cosh) positive random features of ``exp(scale x . y)`` (C17).

    ``phi(x) = (2m)^(-1/2) exp(-|x'|^2/2) [exp(w_i . x'), exp(-w_i . x')]`` (D = 2m),
    so ``phi(x).phi(y) = exp(-(|x'|^2+|y'|^2)/2) mean_i cosh(w_i.(x'+y'))``.
    MSE (Choromanski et al. 2021, Section 2.4):
    ``(1 - exp(-|x'+y'|^2)) / 2`` times the MSE of :class:`PositiveRandomFeatures`.

    Parameters are those of :class:`PositiveRandomFeatures`.

    Parameters
    ----------
    dim : int
        Input dimension d.
    num_features : int
        Number of projection rows m (D = 2m).
    seed : int, SeedSequence or Generator
        The projection is drawn from it once, at construction.
    orthogonal : bool, default False
        Orthogonal blocks with exactly N(0, I) rows (C18).
    scale : float, default 1.0
        The kernel is ``Exponential(scale)``.

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
        """``log phi(X)`` (n, D), exact in log space for any norm.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        """
        Xs = self._prepare_features(X, "X")
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


class OptimalPositiveRandomFeatures(RandomFeatures):
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
    dim : int
        Input dimension d.
    num_features : int
        Number of projection rows m (D = m).
    seed : int, SeedSequence or Generator
        The projection is drawn from it once, at construction.
    orthogonal : bool, default False
        Orthogonal blocks with exactly N(0, I) rows (C18).
    scale : float, default 1.0
        The kernel is ``Exponential(scale)``.
    sq_norm : float, default 1.0
        Mean of ``|x' + y'|^2`` over the pairs the map is tuned for (default 1.0);
        :meth:`fit` computes it from data.
    A : float or None, default None
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
        """The map tuned for the pairs of ``X`` and ``Y`` (mean ``|x'+y'|^2`` over all pairs).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        Y : array_like, shape (m, d)
            Points; ``A`` is tuned for the pairs of X and Y.
        num_features : int
            Number of projection rows m.
        seed : int, SeedSequence or Generator
            The projection is drawn from it once.
        orthogonal : bool, default False
            Orthogonal blocks with exactly N(0, I) rows (C18).
        scale : float, default 1.0
            The kernel is ``Exponential(scale)``.
        """
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
        """``log phi(X)`` (n, D), exact in log space for any norm.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Points.
        """
        Xs = self._prepare_features(X, "X")
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
