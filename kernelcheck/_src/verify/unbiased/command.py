"""The ``kernelcheck unbiased`` command as a function (claims C13, C17, C18).

:func:`run_unbiased_cli` is the adapter ``kernelcheck.cli`` calls: it builds a
sampler of one of the :data:`~kernelcheck._src.features.random.ESTIMATORS`,
runs :func:`~kernelcheck._src.verify.unbiased.api.unbiased` on the default point
sets and writes the report files.
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.core.validate import as_int, check_choice
from kernelcheck._src.features.random import ESTIMATORS
from kernelcheck._src.kernels.leaves import Exponential
from kernelcheck._src.verify.unbiased.api import UnbiasedReport, unbiased
from kernelcheck._src.verify.unbiased.writer import default_points, write_report

__all__ = ["run_unbiased_cli"]


def run_unbiased_cli(
    *,
    estimator: str = "positive",
    dim: int = 4,
    num_features: int = 16,
    orthogonal: bool = False,
    scale: float = 1.0,
    points: int = 4,
    max_norm: float = 0.5,
    trials: int = 20000,
    seed: int = 0,
    alpha: float = 0.01,
    out=None,
    executor=None,
    sweep=(4, 8, 16, 32, 64),
    plots: bool = True,
    progress: bool | None = None,
    shards: int | None = None,
) -> UnbiasedReport:
    """The ``kernelcheck unbiased`` command as a function with defaults.

    Builds the sampler ``ESTIMATORS[estimator].sampler(dim, num_features,
    orthogonal=..., scale=...)``, two point sets ``X`` and ``Y`` from
    :func:`default_points` (drawn one after the other from the stream of
    ``seed`` itself, which the trials, seeded by its children, never use), runs
    :func:`unbiased` against ``Exponential(scale)`` and, if ``out`` is given,
    writes the report with :func:`write_report`.  ``executor`` and ``shards``
    are passed to :func:`unbiased` (they never change the report).

    Examples
    --------
    >>> rep = run_unbiased_cli(trials=2000, sweep=None, points=2)
    >>> rep.verdict in ("pass", "inconclusive")
    True
    """
    check_choice(estimator, "estimator", tuple(ESTIMATORS))
    sampler = ESTIMATORS[estimator].sampler(dim, num_features, orthogonal=orthogonal, scale=scale)
    seed = as_int(seed, "seed", minimum=0)
    rng = np.random.default_rng(seed)
    X = default_points(points, dim, seed=rng, max_norm=max_norm)
    Y = default_points(points, dim, seed=rng, max_norm=max_norm)
    report = unbiased(
        sampler,
        Exponential(scale),
        X,
        Y,
        trials=trials,
        seed=seed,
        alpha=alpha,
        executor=executor,
        sweep=sweep,
        progress=progress,
        shards=shards,
    )
    if out is not None:
        write_report(report, out, plots=plots)
    return report
