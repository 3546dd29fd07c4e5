"""Run kernelcheck's sharded work on a Dask cluster (claims C5, C6, C13, C16-C18).

:func:`dask_executor` yields a :class:`concurrent.futures.Executor` backed by
``distributed.Client(...).get_executor()``, for the ``executor=`` argument of
:func:`kernelcheck.verify.unbiased`, :func:`kernelcheck.verify.kernel` and
:func:`kernelcheck.stats.run_trials`.  Results equal the single-process results
for the same seed, bit for bit, on any number of workers or shards;
:func:`suggested_shards` picks a number of shards (tasks) for a cluster.  Needs the
extra ``kernelcheck-attention[distributed]``.  See ``docs/distributed.md``.

Examples
--------
>>> import numpy as np
>>> from kernelcheck.distributed import dask_executor
>>> from kernelcheck.stats import run_trials
>>> f = lambda rng, n: rng.standard_normal((n, 2))
>>> with dask_executor(workers=2) as ex:                     # doctest: +SKIP
...     a = run_trials(f, 100_000, seed=1, executor=ex, shards=8)
>>> b = run_trials(f, 100_000, seed=1)
>>> np.array_equal(a.m2, b.m2)                               # doctest: +SKIP
True
"""

from kernelcheck._src.mc.distributed import dask_executor, suggested_shards

__all__ = ["dask_executor", "suggested_shards"]
