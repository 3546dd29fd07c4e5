"""What every random feature map of the exponential kernel shares (claims C13, C17, C18).

* :func:`draw_projection`: the projection rows ``w_i``, each exactly
  N(0, I_d) marginally, i.i.d. or in orthogonal blocks (C13, C18);
* :class:`RandomFeatures`: the base class of the maps of
  :mod:`kernelcheck._src.features.random` -- their state, the log-space
  evaluation, and the closed-form theory (C17) built from each map's raw
  moment ratios with :mod:`kernelcheck._src.features.moments`;
* :class:`RandomFeatureSampler`: draws maps of one class, vectorised over
  trials (the ``sample`` protocol of :func:`kernelcheck.verify.unbiased`).

Large norms.  ``phi`` is evaluated as ``exp(log_scale)[:, None] * F`` where
``F`` has row maximum 1 (positive maps) or entries in [-1, 1] (trigonometric),
:meth:`RandomFeatures.scaled_features` returns both and
:meth:`RandomFeatures.estimate` forms ``exp(ls_x + ls_y) (F_x . F_y)``:
the same estimator, with no overflow until the estimate itself leaves the
float range.  In attention the per-query factor ``exp(log_scale(q))`` cancels
between numerator and denominator; the per-key factors do *not* cancel
individually, only their common maximum does (subtract ``max(ls_K)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import precision
from kernelcheck._src.core.seeds import as_rng
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_points,
    as_real,
    describe,
)
from kernelcheck._src.features.moments import central_from_raw_ratios, central_moments_of_mean
from kernelcheck._src.kernels.featuremap import FeatureMap
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = [
    "RandomFeatures",
    "RandomFeatureSampler",
    "ChunkEstimates",
    "draw_projection",
    "check_log_scale",
    "ORTHOGONAL_WORKING_COPIES",
]

_FLOAT64 = precision(np.float64)
_LOG_MAX = math.log(_FLOAT64.max)
_LOG_TINY = math.log(_FLOAT64.tiny)


def check_log_scale(fmap: Any, top: np.ndarray) -> None:
    """Refuse rows whose largest feature, ``exp(top[i])``, leaves the normal float64 range.

    A row above ``log(max) - 1`` overflows; a row below ``log(tiny)`` would be
    returned as (sub)normal garbage or zeros.  Raises :class:`NumericalFailure`
    naming the first such row and pointing at the log-space methods.
    """
    bad = (top > _LOG_MAX - 1.0) | (top < _LOG_TINY)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "overflow" if top[i] > 0 else "underflow"
        raise NumericalFailure(
            f"{fmap!r}: the features of row {i} {what} float64 (log scale {top[i]:.1f}); "
            "use scaled_features(X), log_features(X) or estimate(X, Y), which work in "
            "log space"
        )


def draw_projection(
    rng: Any, dim: int, num_features: int, *, orthogonal: bool = False, batch: int | None = None
) -> np.ndarray:
    """Draw projection rows ``w_i``, each exactly N(0, I_dim) marginally (C13, C18).

    Parameters
    ----------
    rng : int, SeedSequence or Generator
        Source of randomness.
    dim : int
        The input dimension d (columns).
    num_features : int
        The number of rows m.
    orthogonal : bool, default False
        i.i.d. rows (False) or blocks of ``dim`` orthogonal rows (True): a Haar
        orthogonal matrix (QR of a Gaussian matrix with the signs of
        ``diag(R)`` moved into Q) whose rows get independent ``chi_dim``
        norms.  ``ceil(m / d)`` independent blocks are stacked and the last is
        truncated to m rows.
    batch : int or None, default None
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
    copies = ORTHOGONAL_WORKING_COPIES if orthogonal else 1
    what = f" and its {copies - 1} working copies" if copies > 1 else ""
    check_size(copies * per * count, f"the projection{what}")
    if not orthogonal:
        return rng.standard_normal(lead + (m, dim))
    Q = haar_factor(rng.standard_normal(lead + (blocks, dim, dim)))
    # rows of a Haar matrix are uniform on the sphere; chi_d norms make them N(0, I)
    norms = np.sqrt(rng.chisquare(dim, size=lead + (blocks, dim)))
    rows = np.swapaxes(Q, -1, -2) * norms[..., None]
    return rows.reshape(lead + (blocks * dim, dim))[..., :m, :]


#: Arrays of the projection's size an orthogonal draw counts on: at most four
#: are held at once (the Gaussian blocks, the Q and R of their QR, Q with R's
#: signs moved into it), beside small ones (the signs, the chi norms); one
#: more covers those.
ORTHOGONAL_WORKING_COPIES = 5

#: Largest block size d, and fewest blocks per unit of d, for which
#: :func:`haar_factor` runs Gram-Schmidt on the whole batch instead of one
#: LAPACK QR per block.
_GS_MAX_DIM = 8
_GS_MIN_BLOCKS_PER_DIM = 64


def haar_factor(G: np.ndarray) -> np.ndarray:
    """``Q`` of ``G = Q R`` with ``diag(R) >= 0``, for each (d, d) block of ``G`` (C18).

    For a Gaussian ``G`` this ``Q`` is Haar distributed (Mezzadri 2007): the
    QR factor with the signs of ``diag(R)`` moved into Q, as LAPACK's
    Householder QR computes it (with a zero diagonal entry kept as +1).

    Small blocks in large batches (``d <= 8``, at least ``64 d`` blocks) are
    orthonormalised column by column for the whole batch at once, by
    classical Gram-Schmidt with one reorthogonalisation (CGS2): each column
    of Q is the next column of G less its projection on the columns before,
    normalised, which for a nonsingular block is the unique Q with positive
    ``diag(R)``.  On a 2-core AVX2 EPYC, a batch of 8192 4 x 4 blocks took
    5.2 ms this way, its certificate below included, against 16 ms for
    NumPy's batched QR (one LAPACK call per block); 1024 8 x 8 blocks 4.0
    against 5.2 ms, and 64 of them 0.93 against 0.45 ms (hence the batch
    size rule).

    Every block done this way is then certified orthogonal: ``max |Q^T Q - I|``
    at most ``4 d u``.  CGS2 keeps ``|Q^T Q - I| = O(u)`` while
    ``u kappa(G)`` is well below 1 (Giraud, Langou and Rozloznik 2005);
    measured over 10^5 Gaussian blocks its largest was 6u at d = 2, 4 and 8,
    against 9u-14u for LAPACK's QR.  A block that fails the bound (an
    ill-conditioned or singular block, whose zero column gives NaN) is
    recomputed by LAPACK's Householder QR, orthogonal to O(u) for any G.
    """
    d = G.shape[-1]
    if d > _GS_MAX_DIM or G.size // (d * d) < _GS_MIN_BLOCKS_PER_DIM * d:
        return _haar_lapack(G)
    Q = np.empty_like(G)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(d):
            v = G[..., :, j].copy()
            if j:
                Qj = Q[..., :, :j]
                for _ in range(2):  # twice is enough (CGS2)
                    v -= np.einsum("...ij,...j->...i", Qj, np.einsum("...ij,...i->...j", Qj, v))
            Q[..., :, j] = v / np.sqrt(np.einsum("...i,...i->...", v, v))[..., None]
        # max |Q^T Q - I| by pairs of columns (a (d, d) product per block in one
        # einsum took 4.2 ms for the 8192 blocks above, the d (d + 1) / 2 dots 0.8 ms)
        off = np.zeros(G.shape[:-2])
        for i in range(d):
            for j in range(i, d):
                e = np.einsum("...k,...k->...", Q[..., :, i], Q[..., :, j])
                np.maximum(off, np.abs(e - 1.0 if i == j else e), out=off)  # NaN stays NaN
    redo = ~(off <= 4 * d * (np.finfo(G.dtype).eps / 2))  # NaN fails too
    if redo.any():
        Q[redo] = _haar_lapack(G[redo])
    return Q


def _haar_lapack(G: np.ndarray) -> np.ndarray:
    Q, R = np.linalg.qr(G)
    signs = np.sign(np.diagonal(R, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return Q * signs[..., None, :]  # Haar: Q diag(sign R) (Mezzadri 2007)


class RandomFeatures(FeatureMap):
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
        from kernelcheck._src.kernels.leaves import Exponential

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

    def _prepare_features(self, X, name: str) -> np.ndarray:
        """:meth:`_prepare`, refusing before any work a feature matrix this process cannot hold."""
        Xs = self._prepare(X, name)
        check_size(Xs.shape[0] * self._per_row * self._m, "the feature matrix")
        return Xs

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
        Xs = self._prepare_features(X, name)
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
        check_log_scale(self, ls)
        return np.exp(ls)[:, None] * F

    def estimate(self, X, Y=None) -> np.ndarray:
        """The kernel estimate ``phi(X) @ phi(Y).T`` (nx, ny), evaluated in log space.

        ``exp(ls_x[:, None] + ls_y[None, :]) * (F_x @ F_y.T)``: the same
        estimator as ``self(X) @ self(Y).T`` without intermediate overflow.
        """
        nx = as_points(X, "X", dim=self._dim).shape[0]
        ny = nx if Y is None else as_points(Y, "Y", dim=self._dim).shape[0]
        check_size(2 * nx * ny, f"the kernel estimate ({nx} x {ny}) and its scale")
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
        See the docstring of :mod:`kernelcheck._src.features.random` for the
        formulas and their sources.

        Examples
        --------
        >>> import numpy as np
        >>> from kernelcheck.features import PositiveRandomFeatures
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


def _theory(fmap: RandomFeatures, X, Y, order: int) -> dict:
    order = as_int(order, "order", minimum=2, maximum=8)
    Xs = fmap._prepare(X, "X")
    Ys = Xs if Y is None else fmap._prepare(Y, "Y")
    nx, ny = Xs.shape[0], Ys.shape[0]
    check_size((order + 2) * nx * ny, f"the {order + 1} moments and the mean of {nx} x {ny} pairs")
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.exp(Xs @ Ys.T)
        log_r = np.stack([fmap._log_raw_ratio(j, Xs, Ys) for j in range(order + 1)])
        central_z = central_from_raw_ratios(log_r)
    central = central_moments_of_mean(central_z, fmap.num_features)
    return {"mean": mean, "central": central}


class RandomFeatureSampler:
    """Draws random feature maps of one kind; vectorised over trials.

    ``sampler(rng)`` returns a new map drawn from ``rng`` (the
    ``sample`` protocol of :func:`kernelcheck.verify.unbiased`);
    :meth:`batch_estimates` draws many projections at once and evaluates all
    trials' estimates with batched GEMMs; :meth:`theory` gives the closed-form
    moments (C17).

    Parameters
    ----------
    cls : type
        The random feature map class (e.g. ``PositiveRandomFeatures``); usually
        built by its ``sampler`` class method.
    dim : int
        The input dimension d.
    num_features : int
        The number of projection rows m.
    orthogonal : bool, default False
        Orthogonal blocks of rows (C18) instead of i.i.d. rows.
    scale : float, default 1.0
        The kernel's scale: ``exp(scale x . y)``.
    **params
        Further keyword arguments of the map class.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.features import PositiveRandomFeatures
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
        if not (isinstance(cls, type) and issubclass(cls, RandomFeatures)):
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
        """The same sampler with m projection rows.

        Parameters
        ----------
        m : int
            The new number of projection rows.
        """
        return RandomFeatureSampler(
            self.cls, self.dim, m, orthogonal=self.orthogonal, scale=self.scale, **self.params
        )

    def theory(self, X, Y=None, *, order: int = 4) -> dict:
        """Closed-form moments of one estimate (see :meth:`RandomFeatures.theory`).

        Parameters
        ----------
        X : array_like, shape (nx, d)
            Points.
        Y : array_like, shape (ny, d), default None
            Points; None means ``Y = X``.
        order : int, default 4
            The highest moment computed.
        """
        return self._proto.theory(X, Y, order=order)

    def theoretical_mse(self, X, Y=None) -> np.ndarray:
        """Closed-form i.i.d. MSE per pair (an upper bound when orthogonal).

        Parameters
        ----------
        X : array_like, shape (nx, d)
            Points.
        Y : array_like, shape (ny, d), default None
            Points; None means ``Y = X``.
        """
        return self._proto.theoretical_mse(X, Y)

    def _chunk(self, per_trial: int) -> int:
        return max(1, self.CHUNK_ELEMENTS // max(per_trial, 1))

    def _draws(self, rng, n: int, rows: int):
        """Yield ``(c, W)``: the projections of consecutive chunks of ``c`` trials.

        The chunk size depends only on the sampler and ``rows``, the number of
        points (so every evaluation path draws the same stream for the same seed).
        """
        m, d = self.num_features, self.dim
        D = self._proto._per_row * m
        check_size(rows * D, f"the features of one trial ({rows} points x {D} features)")
        chunk = self._chunk(m * d + 2 * rows * D)
        done = 0
        while done < n:
            c = min(chunk, n - done)
            yield c, draw_projection(rng, d, m, orthogonal=self.orthogonal, batch=c)
            done += c

    def _chunk_parts(self, W: np.ndarray, Xs_list, sqs):
        """The maps' ``(F, log_scale)`` parts of every point set for the projections ``W``."""
        wsq = np.einsum("tij,tij->ti", W, W)
        WT = np.swapaxes(W, -1, -2)
        return [self._proto._parts(X @ WT, sq, wsq) for X, sq in zip(Xs_list, sqs, strict=True)]

    def batch_features(self, rng, n: int, Xs_list):
        """Yield ``[(F, ls) for each X']`` for chunks of trials (already scaled inputs).

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of the projections.
        n : int
            The number of independent trials.
        Xs_list : list of numpy.ndarray
            Inputs already scaled by the map (``_prepare``), one array per point set.
        """
        rows = sum(X.shape[0] for X in Xs_list)
        sqs = [np.einsum("ij,ij->i", X, X) for X in Xs_list]
        for c, W in self._draws(rng, n, rows):
            yield c, self._chunk_parts(W, Xs_list, sqs)

    def batch_estimates(self, rng, n: int, X, Y=None):
        """``n`` independent trials' estimates, shape (n, nx, ny), and a rounding scale.

        The second array bounds ``|phi(x)| . |phi(y)|`` by ``|phi(x)|_2 |phi(y)|_2``
        (Cauchy-Schwarz), the scale of the inner product's rounding error.
        ``Y=None`` is ``Y = X`` (the same numbers).

        Parameters
        ----------
        rng : numpy.random.Generator
            Source of the projections.
        n : int
            The number of independent trials.
        X : array_like, shape (nx, d)
            Points.
        Y : array_like, shape (ny, d), default None
            Points; None means ``Y = X``.
        """
        rng = as_rng(rng, "rng")
        n = as_int(n, "n", minimum=1)
        Xs = self._proto._prepare(X, "X")
        Ys = Xs if Y is None else self._proto._prepare(Y, "Y")
        nx, ny = Xs.shape[0], Ys.shape[0]
        check_size(
            2 * n * nx * ny, f"the estimates of {n} trials of {nx} x {ny} pairs and their scales"
        )
        # each chunk is written into its rows of the two results (no list of
        # chunks concatenated at the end: two result-sized copies fewer)
        est = np.empty((n, Xs.shape[0], Ys.shape[0]))
        bound = np.empty_like(est)
        chunk = ChunkEstimates(self, Xs, Ys)
        done = 0
        for c, W in self._draws(rng, n, Xs.shape[0] + Ys.shape[0]):
            chunk(W, est[done : done + c], bound[done : done + c])
            done += c
        return est, bound


#: The unshifted evaluation is used only where each row's largest feature
#: ``exp(w . x')`` lies in ``[2^-_UNSHIFTED_LOG2, 2^_UNSHIFTED_LOG2]``: a normal
#: float64 number whose squares, products and sums of m terms stay finite.
_UNSHIFTED_LOG2 = 480


class ChunkEstimates:
    """The estimates and rounding scales of one chunk of trials, from its projections.

    ``ChunkEstimates(sampler, X', Y')(W, est, bound)`` fills ``est`` and
    ``bound`` (c, nx, ny) for the projections ``W`` (c, m, d) of c trials.

    The general (*shifted*) path evaluates each map's ``(F, log_scale)``
    parts (every row of F shifted by its maximum, so nothing overflows for
    any input) and forms ``exp(ls_x + ls_y) (F_x . F_y)``.

    The *unshifted* path, for maps with ``_unshifted`` (positive features,
    ``log phi(x)_i = w_i . x' + (a term of x alone)``), factors the per-point
    scales out of the features::

        phi(x) . phi(y) = exp(-(|x'|^2 + |y'|^2) / 2) / m * sum_i exp(w_i . x') exp(w_i . y')

    so the factor multiplies the small (nx, ny) result instead of the (n, m)
    features, and the features ``E = exp(W [X'; Y']^T)`` come from ONE
    product and ONE exp in place, with no per-row shift (the shifted path
    makes two products, and subtracts each row's maximum first: two more
    passes over the features).

    Why it is the same estimate: without the shift ``E`` holds the shifted
    features times ``exp(row max)``, so the paths differ only in rounding (the
    exp's relative error does not depend on the shift, and the product's
    absolute error in the exponent is the same) -- *as long as nothing leaves
    the normal range*.  That is checked on small results only:

    * once per call, the factor ``exp(-(|x'|^2 + |y'|^2) / 2) / m`` must be a
      normal number for every pair (else a large-norm pair's factor would
      underflow to 0 while its sum is large);
    * per block of trials (:attr:`BLOCK_ELEMENTS`), every squared row norm
      ``|E_x|^2`` (needed anyway for the rounding scale) must lie in
      ``[m 2^-960, 2^960]``: then the row's largest feature is in
      ``[2^-480, 2^480]`` (``max^2 <= |E_x|^2 <= m max^2``), so no feature
      overflowed (an ``inf`` makes the norm ``inf``; a NaN fails the
      comparison), the largest is a full-precision normal number, the
      products ``E_x E_y`` and their sums of m terms stay below ``m 2^960``,
      and entries that underflowed are below ``2^-1022``, negligible against
      the row.  A block that fails is evaluated by the shifted path from the
      same projections (the other blocks keep the unshifted numbers).

    tests/features/test_batch_paths.py checks that the two paths agree to
    rounding, and that inputs failing each guard (projections whose features
    over- or underflow; pairs whose factor underflows) still get the log-space
    estimate.
    """

    def __init__(self, sampler: RandomFeatureSampler, Xs: np.ndarray, Ys: np.ndarray):
        self.sampler, self.Xs, self.Ys = sampler, Xs, Ys
        self.sqs = [np.einsum("ij,ij->i", A, A) for A in (Xs, Ys)]
        m = sampler.num_features
        self.factor = None
        if getattr(sampler._proto, "_unshifted", False) and Xs.size and Ys.size:
            log_factor = -0.5 * (self.sqs[0][:, None] + self.sqs[1][None, :]) - math.log(m)
            if log_factor.min() > _LOG_TINY + 1.0:
                self.factor = np.exp(log_factor)
        self.ZT = np.concatenate([Xs, Ys]).T
        # the squared row norms that prove every row maximum in range (see above)
        self.lo, self.hi = m * 2.0 ** (-2 * _UNSHIFTED_LOG2), 2.0 ** (2 * _UNSHIFTED_LOG2)

    #: Feature entries of one block of trials of the unshifted path (1 MiB of
    #: float64): the features, their squares and their products are formed
    #: while the block is in cache.  Per-trial results do not depend on it.
    BLOCK_ELEMENTS = 1 << 17

    def __call__(self, W: np.ndarray, e: np.ndarray, b: np.ndarray) -> None:
        if self.factor is None:
            self.shifted(W, e, b)
            return
        step = max(1, self.BLOCK_ELEMENTS // (W.shape[-2] * self.ZT.shape[1]))
        for a in range(0, W.shape[0], step):
            z = slice(a, a + step)
            if not self.unshifted(W[z], e[z], b[z]):
                self.shifted(W[z], e[z], b[z])

    def unshifted(self, W: np.ndarray, e: np.ndarray, b: np.ndarray) -> bool:
        """The unshifted path; False (``e`` and ``b`` untouched) if a block guard fails."""
        assert self.factor is not None
        E = W @ self.ZT  # (c, m, nx + ny): every point's projections, one product
        with np.errstate(over="ignore"):
            np.exp(E, out=E)
            n2 = np.einsum("tiz,tiz->tz", E, E)
        if not (n2.min() >= self.lo and n2.max() <= self.hi):
            return False
        nx = self.Xs.shape[0]
        np.matmul(np.swapaxes(E[..., :nx], -1, -2), E[..., nx:], out=e)
        e *= self.factor
        r = np.sqrt(n2)
        np.multiply(r[:, :nx, None], r[:, None, nx:], out=b)
        b *= self.factor
        return True

    def shifted(self, W: np.ndarray, e: np.ndarray, b: np.ndarray) -> None:
        """The general path, from the maps' ``(F, log_scale)`` parts."""
        (FX, lx), (FY, ly) = self.sampler._chunk_parts(W, [self.Xs, self.Ys], self.sqs)
        np.matmul(FX, np.swapaxes(FY, -1, -2), out=e)
        L = lx[..., :, None] + ly[..., None, :]
        nx = np.log(np.sqrt(np.einsum("tij,tij->ti", FX, FX)))
        ny = np.log(np.sqrt(np.einsum("tij,tij->ti", FY, FY)))
        with np.errstate(over="ignore"):
            np.add(L, nx[..., :, None], out=b)  # (L + nx) + ny, as before
            b += ny[..., None, :]
            np.exp(b, out=b)
            np.exp(L, out=L)
            e *= L
