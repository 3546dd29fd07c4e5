"""Monte Carlo engine for random-feature estimators (claims C13, C16, C17, C18).

Trials are vectorised (one batched GEMM per chunk of trials), cut into
fixed-size shards seeded from ``numpy.random.SeedSequence`` children, run on
any :class:`concurrent.futures.Executor`, and merged exactly in shard order:
the same seed and shard size give the same numbers on any executor.

Examples
--------
>>> import numpy as np
>>> from kernelcheck.stats import run_trials
>>> m = run_trials(lambda rng, n: rng.standard_normal((n, 3)), 10_000, seed=0)
>>> m.count, m.mean.shape
(10000, (3,))
"""

from kernelcheck._src.features.moments import central_from_raw_ratios, central_moments_of_mean
from kernelcheck._src.mc.engine import (
    BERRY_ESSEEN_C,
    DEFAULT_SHARD_SIZE,
    Moments,
    berry_esseen_bound,
    root_seed_sequence,
    run_trials,
    shard_seed,
    trials_needed,
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
    "central_moments_of_mean",
    "central_from_raw_ratios",
]
