"""Monte Carlo engine for random-feature estimators (claims C13, C16, C17, C18).

A Monte Carlo run evaluates a *trial function* ``fn(rng, n)`` that returns the
values of ``n`` independent trials as an array of shape ``(n, *shape)``
(vectorised: one batched GEMM per chunk of trials, no Python loop per trial),
optionally with a second array of the same shape whose running maximum is
kept (a rounding scale).  The engine accumulates, per entry, the count, the
mean and the central sums ``M_k = sum (x - mean)^k`` for k = 2, 3, 4.

Reproducibility and sharding (the executor interface).  The trials are cut
into seeded blocks of a fixed size ``shard_size`` (independent of the number
of workers).  Block ``k`` draws from ``numpy.random.SeedSequence(entropy,
spawn_key=root.spawn_key + (k,))`` -- the k-th child that ``root.spawn``
would give -- so each block's numbers depend only on the seed, ``shard_size``
and k.  A *shard* is one task: a run of consecutive blocks (one block per
shard by default, or the blocks split into ``shards`` groups).  Shards run on
any :class:`concurrent.futures.Executor` (threads, processes,
``distributed.Client.get_executor()``) or in-process and return their blocks'
moments unmerged; the caller merges every block *in block order* with the
exact pairwise update of Chan, Golub & LeVeque (1979) and Pebay (2008) for
M2..M4.  One worker or a hundred, one shard or a hundred, in any completion
order, therefore give bit-identical results for the same seed and shard size.

Statistics helpers: Berry-Esseen bounds (Shevtsova 2011, C = 0.4748 for
i.i.d. sums).  The closed-form moment formulas (moments of the mean of m
i.i.d. terms, central moments from raw moment ratios) live below, in
:mod:`kernelcheck._src.features.moments`.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.results import ResultMixin
from kernelcheck._src.core.seeds import as_seed_sequence, child_seed
from kernelcheck._src.core.validate import (
    as_array,
    as_bool,
    as_executor,
    as_int,
    as_probability,
    as_real,
    check_callable,
    check_finite,
    describe,
)
from kernelcheck._src.features.moments import as_moment_array
from kernelcheck.errors import (
    InvalidArgument,
    NumericalFailure,
)

__all__ = [
    "Moments",
    "run_trials",
    "shard_seed",
    "root_seed_sequence",
    "DEFAULT_SHARD_SIZE",
    "BERRY_ESSEEN_C",
    "berry_esseen_bound",
    "trials_needed",
]

#: Trials per shard unless the caller says otherwise.  Part of the meaning of
#: a seed: the same seed and shard size give the same numbers on any executor.
DEFAULT_SHARD_SIZE = 2048

#: Berry-Esseen constant for sums of i.i.d. variables: sup |F_n - Phi| <=
#: C rho / (sigma^3 sqrt(n)) with C = 0.4748 (Shevtsova, "On the absolute
#: constants in the Berry-Esseen type inequalities", 2011).
BERRY_ESSEEN_C = 0.4748

#: Most futures kept in flight on an executor at once.
_MAX_IN_FLIGHT = 64


#: Entries of one block of trials in :func:`_central_sums` (512 KiB of float64):
#: the block and its powers stay in cache between the passes over them.
_BLOCK_ELEMENTS = 1 << 16


def _central_sums(x: np.ndarray):
    """Mean and central sums ``M_k = sum_t (x_t - mean)^k`` (k = 2, 3, 4) of the rows of ``x``.

    Two passes over blocks of rows, each block's deviations and powers formed
    in two block-sized buffers (no trial-sized temporary, and a block stays in
    cache across its three powers):

    1. the mean, as ``shift + sum_t (x_t - shift) / N`` with the first trial
       as the shift: the sum runs over deviations, so its rounding error
       scales with the spread, not the size (exact for a constant estimate);
    2. the sums of ``d^2, d^3, d^4`` for ``d = x - mean``, the powers formed
       in place (the same expressions, term by term).

    Each column is summed block by block (each block's sum, then the blocks'
    sums in order): the order of the terms depends only on the shape, never
    on the run.  A NaN or Inf entry makes its column's sum, hence the mean,
    NaN or Inf (IEEE: no sum with a NaN or an infinite term is finite), which
    is what :meth:`Moments.from_samples` checks.
    """
    n, cols = x.shape
    rows = max(1, min(n, _BLOCK_ELEMENTS // max(cols, 1)))
    shift = x[0].copy()
    d = np.empty((rows, cols))
    p = np.empty((rows, cols))
    total = np.zeros(cols)
    for a in range(0, n, rows):
        blk = d[: min(rows, n - a)]
        np.subtract(x[a : a + rows], shift, out=blk)
        total += blk.sum(axis=0)
    mean = shift + total / n
    m2, m3, m4 = np.zeros(cols), np.zeros(cols), np.zeros(cols)
    for a in range(0, n, rows):
        k = min(rows, n - a)
        blk, pw = d[:k], p[:k]
        np.subtract(x[a : a + rows], mean, out=blk)
        np.multiply(blk, blk, out=pw)
        m2 += pw.sum(axis=0)
        pw *= blk
        m3 += pw.sum(axis=0)
        pw *= blk
        m4 += pw.sum(axis=0)
    return mean, m2, m3, m4


def _require_finite_moments(mean, m2, m3, m4, what: str) -> None:
    """Raise :class:`NumericalFailure` when a central sum left the float64 range.

    ``m4 = sum (x - mean)^4`` overflows once deviations reach about
    ``(1.8e308 / N)^(1/4)`` (~1e75 for N = 2048), long before the values
    themselves do; a moment that is ``inf`` (or NaN, from ``inf - inf``) is
    no statistic, so no verdict is built on it.
    """
    if all(np.isfinite(a).all() for a in (mean, m2, m3, m4)):
        return
    raise NumericalFailure(
        f"the central moments of {what} exceed the float64 range (the fourth needs "
        "|x - mean|^4 summed over the trials to stay below 1.8e308); scale the "
        "estimator down, e.g. estimate k(x, y) / c for a known c"
    )


@dataclass(frozen=True)
class Moments(ResultMixin):
    """Running moments of Monte Carlo trials, entrywise over an array shape.

    Attributes
    ----------
    count : int
        Number of trials N.
    mean : numpy.ndarray
        Sample mean.
    m2, m3, m4 : numpy.ndarray
        Central sums ``sum_t (x_t - mean)^k``.
    maximum : numpy.ndarray or None
        Running maximum of the trial function's auxiliary array, if it has one.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(10.0)
    >>> a = Moments.from_samples(x[:3]).merge(Moments.from_samples(x[3:]))
    >>> bool(np.isclose(a.variance(), x.var(ddof=1)))
    True
    """

    count: int
    mean: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m4: np.ndarray
    maximum: np.ndarray | None = None

    def __post_init__(self) -> None:
        # built by hand, a Moments must still be moments: N >= 1 trials, finite
        # real sums of one shape, the even ones >= 0 (a negative M2 would give a
        # negative variance and a NaN standard error, never an error)
        as_int(self.count, "count", minimum=1)
        shape = None
        for name in ("mean", "m2", "m3", "m4", "maximum"):
            value = getattr(self, name)
            if value is None and name == "maximum":
                continue
            arr = np.asarray(value)
            if arr.dtype.kind not in "biuf" or not np.isfinite(arr).all():
                raise InvalidArgument(
                    f"`{name}` must be a finite real array, got {describe(value)}"
                )
            if shape is not None and arr.shape != shape:
                raise InvalidArgument(
                    f"`{name}` must have the shape {shape} of `mean`, got {describe(value)}"
                )
            if name in ("m2", "m4") and (arr < 0).any():
                raise InvalidArgument(
                    f"`{name}` is a sum of even powers and must be >= 0, got {describe(value)}"
                )
            shape = arr.shape if shape is None else shape

    @classmethod
    def from_samples(cls, values, aux=None) -> Moments:
        """Moments of the trials in ``values`` (axis 0 is the trial axis).

        ``values`` must be finite and real with at least one trial; NaN or Inf
        raises :class:`InvalidArgument` (moments of NaN are no statistics).

        Parameters
        ----------
        values : array_like, shape (N, ...)
            The trials' values, axis 0 the trial axis.
        aux : array_like or None, default None
            A companion array of the same shape whose maximum over trials is kept.
        """
        # finite=False: a NaN or Inf entry always reaches the mean (below), which
        # is checked instead of every entry; check_finite then names the entry
        x = as_array(values, "values", min_ndim=1, dtype=np.float64, finite=False)
        n = x.shape[0]
        with np.errstate(over="ignore", invalid="ignore"):
            mean, m2, m3, m4 = _central_sums(x.reshape(n, -1))
        if not np.isfinite(mean).all():
            check_finite(x, "values")
        # [()]: one-dimensional trials give NumPy scalars, as NumPy's reductions do
        mean, m2, m3, m4 = (a.reshape(x.shape[1:])[()] for a in (mean, m2, m3, m4))
        _require_finite_moments(mean, m2, m3, m4, "`values`")
        mx = None
        if aux is not None:
            a = as_array(aux, "aux", dtype=np.float64)
            if a.shape != x.shape:
                raise InvalidArgument(
                    f"`aux` must have the shape {x.shape} of `values`, got {describe(a)}"
                )
            mx = a.max(axis=0)
        return cls(n, mean, m2, m3, m4, mx)

    def merge(self, other: Moments) -> Moments:
        """Exact pairwise merge (Chan et al. 1979; Pebay 2008), ``self`` first.

        Parameters
        ----------
        other : Moments
            The moments of the trials that follow ``self``'s.
        """
        if not isinstance(other, Moments):
            raise InvalidArgument(f"`other` must be a Moments, got {describe(other)}")
        na, nb = float(self.count), float(other.count)
        n = na + nb
        with np.errstate(over="ignore", invalid="ignore"):
            return self._merge(other, na, nb, n)

    def _merge(self, other: Moments, na: float, nb: float, n: float) -> Moments:
        delta = other.mean - self.mean
        d_n = delta / n
        mean = self.mean + d_n * nb
        m2 = self.m2 + other.m2 + delta * d_n * na * nb
        m3 = (
            self.m3
            + other.m3
            + delta * d_n * d_n * na * nb * (na - nb)
            + 3.0 * d_n * (na * other.m2 - nb * self.m2)
        )
        m4 = (
            self.m4
            + other.m4
            + delta * d_n**3 * na * nb * (na * na - na * nb + nb * nb)
            + 6.0 * d_n * d_n * (na * na * other.m2 + nb * nb * self.m2)
            + 4.0 * d_n * (na * other.m3 - nb * self.m3)
        )
        if self.maximum is None or other.maximum is None:
            mx = self.maximum if other.maximum is None else other.maximum
        else:
            mx = np.maximum(self.maximum, other.maximum)
        _require_finite_moments(mean, m2, m3, m4, "the merged trials")
        return Moments(self.count + other.count, mean, m2, m3, m4, mx)

    def variance(self, ddof: int = 1) -> np.ndarray:
        """Sample variance ``M2 / (N - ddof)``; ``0 <= ddof < N``.

        Parameters
        ----------
        ddof : int, default 1
            Delta degrees of freedom.
        """
        ddof = as_int(ddof, "ddof", minimum=0)
        if ddof >= self.count:
            raise InvalidArgument(
                f"`ddof` must be less than the number of trials ({self.count}), got {ddof}"
            )
        return self.m2 / (self.count - ddof)

    def std_error(self) -> np.ndarray:
        """Standard error of the mean, ``sqrt(variance / N)``."""
        return np.sqrt(self.variance() / self.count)

    def skewness(self) -> np.ndarray:
        """Sample skewness ``sqrt(N) M3 / M2^1.5`` (NaN where M2 = 0).

        Evaluated as ``sqrt(N) (M3 / M2) / sqrt(M2)``: ``|M3 / M2| <= max |x - mean|``,
        so no intermediate overflows while the moments are finite.
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            return math.sqrt(self.count) * (self.m3 / self.m2) / np.sqrt(self.m2)

    def kurtosis(self) -> np.ndarray:
        """Sample kurtosis ``N M4 / M2^2`` (3 for a normal; NaN where M2 = 0).

        Evaluated as ``N (M4 / M2) / M2``: ``M4 / M2 <= max (x - mean)^2``, so
        no intermediate overflows while the moments are finite.
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.count * (self.m4 / self.m2) / self.m2

    def confidence_interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation interval ``mean -/+ z_(1-alpha/2) SE``.

        Parameters
        ----------
        alpha : float, default 0.05
            One minus the confidence level (two-sided).
        """
        alpha = as_probability(alpha, "alpha")
        h = float(ndtri(1.0 - alpha / 2.0)) * self.std_error()
        return self.mean - h, self.mean + h


def root_seed_sequence(seed: Any) -> np.random.SeedSequence:
    """The root :class:`numpy.random.SeedSequence` of a run.

    An int or a SeedSequence is used as is; a Generator gives up 128 bits of
    its stream as entropy (deterministic, and it advances the Generator).
    See :func:`kernelcheck._src.core.seeds.as_seed_sequence`.

    Parameters
    ----------
    seed : int, SeedSequence or Generator
        The run's seed.
    """
    return as_seed_sequence(seed, "seed")


def shard_seed(root: np.random.SeedSequence, k: int) -> np.random.SeedSequence:
    """The seed of shard ``k``: ``child_seed(root, k)``, the k-th child of ``root.spawn``.

    Parameters
    ----------
    root : numpy.random.SeedSequence
        The run's root seed.
    k : int
        The shard's index, ``>= 0``.
    """
    return child_seed(root, as_int(k, "k", minimum=0))


def _run_shard(fn: Callable, seed: np.random.SeedSequence, count: int) -> Moments:
    out = call_user(fn, "the trial function `fn`", np.random.default_rng(seed), count)
    aux = None
    if isinstance(out, tuple):
        out, aux = out
    out = np.asarray(out)
    if out.ndim < 1 or out.shape[0] != count:
        raise InvalidArgument(
            f"the trial function must return an array with {count} rows (one per trial), "
            f"got {describe(out)}"
        )
    try:
        return Moments.from_samples(out, aux)
    except InvalidArgument as exc:
        raise InvalidArgument(f"the trial function `fn` returned bad values: {exc}") from None


def _run_blocks(fn: Callable, seeds: list, counts: list) -> list[Moments]:
    """One shard: the moments of consecutive blocks, unmerged (merged in block order later)."""
    return [_run_shard(fn, s, c) for s, c in zip(seeds, counts, strict=True)]


def _shard_bounds(blocks: int, shards: int | None) -> list[tuple[int, int]]:
    """Blocks ``[a, b)`` of each shard: one block each, or ``shards`` near-equal runs."""
    if shards is None or shards >= blocks:
        return [(k, k + 1) for k in range(blocks)]
    q, r = divmod(blocks, shards)
    bounds, a = [], 0
    for i in range(shards):
        b = a + q + (1 if i < r else 0)
        bounds.append((a, b))
        a = b
    return bounds


def _progress_bar(enabled, total: int, desc: str):
    if enabled is None:
        enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
    if not as_bool(enabled, "progress"):
        return None
    from tqdm.auto import tqdm

    # delay: short runs never draw a bar
    return tqdm(total=total, desc=desc, unit="trial", delay=1.0, file=sys.stderr, leave=False)


def run_trials(
    fn: Callable,
    trials: int,
    *,
    seed: Any,
    shard_size: int = DEFAULT_SHARD_SIZE,
    executor=None,
    shards: int | None = None,
    progress: bool | None = None,
    desc: str = "trials",
) -> Moments:
    """Run ``trials`` Monte Carlo trials in seeded blocks and merge their moments.

    Parameters
    ----------
    fn : callable
        ``fn(rng, n) -> values`` of shape ``(n, *shape)``, or ``(values, aux)``
        with ``aux`` of the same shape (its maximum over trials is kept).  Must
        use only ``rng`` for randomness.  With a process-based executor it must
        be picklable (a module-level function or an instance of a module-level
        class).
    trials : int
        Number of trials N >= 2.
    seed : int, SeedSequence or Generator
        Root seed; block k uses its k-th spawned child.
    shard_size : int, default 2048
        Trials per seeded block (the last block may be shorter).  The numbers
        depend on it, never on the executor, the number of workers or ``shards``.
    executor : concurrent.futures.Executor or None, default None
        Where shards run (any object with ``submit``); in-process if None.
    shards : int or None, default None
        Number of tasks the blocks are grouped into on ``executor`` (runs of
        consecutive blocks; fewer, larger tasks cut the engine's per-task
        overhead).  Default: one task per block.  Ignored in-process.  Does
        not change the result.
    progress : bool or None, default None
        A tqdm bar on stderr; default: only when stderr is a terminal (and
        only for runs longer than a second).
    desc : str, default "trials"
        The bar's label.

    Returns
    -------
    Moments
        Entrywise count, mean, central sums M2..M4 (and the aux maximum).

    Examples
    --------
    >>> import numpy as np
    >>> f = lambda rng, n: rng.standard_normal((n, 2))
    >>> a = run_trials(f, 5000, seed=3, shard_size=1000)
    >>> b = run_trials(f, 5000, seed=3, shard_size=1000)
    >>> bool(np.array_equal(a.mean, b.mean))
    True
    """
    check_callable(fn, "fn")
    trials = as_int(trials, "trials", minimum=2)
    shard_size = as_int(shard_size, "shard_size", minimum=1)
    if shards is not None:
        shards = as_int(shards, "shards", minimum=1)
    executor = as_executor(executor)
    check_size(
        -(-trials // shard_size),
        f"the schedule of {trials} trials in shards of {shard_size}",
        itemsize=8,
    )
    root = root_seed_sequence(seed)
    counts = [shard_size] * (trials // shard_size)
    if trials % shard_size:
        counts.append(trials % shard_size)
    bar = _progress_bar(progress, trials, desc)
    total: Moments | None = None
    try:
        if executor is None:
            for k, c in enumerate(counts):
                part = _run_shard(fn, shard_seed(root, k), c)
                total = part if total is None else total.merge(part)
                if bar is not None:
                    bar.update(c)
        else:
            bounds = _shard_bounds(len(counts), shards)
            pending: deque = deque()
            s_next = 0
            try:
                while s_next < len(bounds) or pending:
                    while s_next < len(bounds) and len(pending) < _MAX_IN_FLIGHT:
                        a, b = bounds[s_next]
                        pending.append(
                            (
                                sum(counts[a:b]),
                                executor.submit(
                                    _run_blocks,
                                    fn,
                                    [shard_seed(root, k) for k in range(a, b)],
                                    counts[a:b],
                                ),
                            )
                        )
                        s_next += 1
                    c, fut = pending.popleft()
                    # shard order, then block order: the merge never depends on timing
                    # or on how the blocks were grouped
                    for part in fut.result():
                        total = part if total is None else total.merge(part)
                    if bar is not None:
                        bar.update(c)
            finally:
                for _, fut in pending:
                    fut.cancel()
    finally:
        if bar is not None:
            bar.close()
    assert total is not None
    return total


def berry_esseen_bound(std_ratio, n: int) -> np.ndarray:
    """Uniform Berry-Esseen bound ``C rho / (sigma^3 sqrt(n))`` on ``sup |F_n - Phi|``.

    ``std_ratio`` is ``rho / sigma^3`` (``rho = E|X - mu|^3``), or an upper bound
    on it such as ``sqrt(kurtosis)`` (Cauchy-Schwarz: ``E|Y|^3 <= sqrt(E Y^2 E Y^4)``):
    a number or array ``>= 0``; ``inf`` means "no finite bound known" and gives
    the (true, uninformative) bound ``inf``.  NaN (a ratio of a zero variance,
    which has no normal approximation to bound) and negative values are refused.

    Parameters
    ----------
    std_ratio : float or array_like
        ``rho / sigma^3`` or an upper bound of it, ``>= 0`` (``inf``: unknown).
    n : int
        The number of trials averaged.

    Examples
    --------
    >>> round(float(berry_esseen_bound(1.0, 10000)), 6)
    0.004748
    """
    n = as_int(n, "n", minimum=1)
    root = math.sqrt(n) if n < 2**1000 else math.exp(0.5 * math.log(n))  # float(n) overflows
    return BERRY_ESSEEN_C * _std_ratio(std_ratio) / root


def _std_ratio(value) -> np.ndarray:
    """``rho / sigma^3``: >= 0, or ``inf`` where unknown; NaN and negative values are refused."""
    r = as_moment_array(value, "std_ratio")
    bad = ~(r >= 0)
    if bad.any():
        first = r[tuple(int(i) for i in np.argwhere(bad)[0])] if r.ndim else r[()]
        raise InvalidArgument(
            f"`std_ratio` must be >= 0 (rho / sigma^3, or inf when unknown), got {float(first)!r}"
        )
    return r


def trials_needed(std_ratio, tolerance: float) -> np.ndarray:
    """Smallest N with ``berry_esseen_bound(std_ratio, N) <= tolerance`` (inf if unknown).

    ``std_ratio`` as for :func:`berry_esseen_bound` (``inf``: unknown, so the
    answer is ``inf``); ``tolerance`` a finite number > 0.  A count beyond the
    float64 range is ``inf`` too.

    Parameters
    ----------
    std_ratio : float or array_like
        As for :func:`berry_esseen_bound` (``inf``: unknown).
    tolerance : float
        The largest accepted Berry-Esseen bound, finite and ``> 0``.

    Examples
    --------
    >>> int(trials_needed(1.0, 0.01))
    2255
    """
    r = _std_ratio(std_ratio)
    tolerance = as_real(tolerance, "tolerance", positive=True)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ceil((BERRY_ESSEEN_C * r / tolerance) ** 2)
    return np.where(np.isfinite(out), out, np.inf)
