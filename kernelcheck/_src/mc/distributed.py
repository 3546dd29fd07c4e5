"""Run kernelcheck's sharded work on a Dask cluster (claims C5, C6, C13, C16-C18).

Every function of kernelcheck that splits its work -- the Monte Carlo engine
:func:`kernelcheck.stats.run_trials`, :func:`kernelcheck.verify.unbiased`, the
counterexample search of :func:`kernelcheck.verify.kernel` -- takes
``executor=``, any :class:`concurrent.futures.Executor`.  :func:`dask_executor`
supplies one backed by ``distributed.Client(...).get_executor()``: on an
existing cluster (``scheduler="tcp://host:port"``) or on a
``distributed.LocalCluster`` of ``workers`` processes started for the
duration of a ``with`` block.

Why the result does not depend on the cluster.  The random stream is fixed
by the seed alone: block ``k`` of ``shard_size`` trials draws from the k-th
:meth:`numpy.random.SeedSequence.spawn` child of the root seed, and restart
``i`` of a counterexample search from the i-th child.  A task (a *shard*)
is a run of consecutive blocks, or one restart; it returns its blocks'
moments unmerged, and the caller merges them in block order with the exact
pairwise update of Chan, Golub & LeVeque (1979) and Pebay (2008) for
``M2..M4`` -- sums of central moments, never averages of averages.  So the
number of workers, the number of shards, the order in which tasks complete
and tasks re-run after a lost worker (Dask recomputes them from the same
seed) cannot change a single bit, provided every worker runs the same
NumPy/BLAS build on the same instruction set (``exp`` and GEMM kernels are
chosen per CPU; a mixed cluster agrees to rounding, not bit for bit).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator
from concurrent.futures import Executor
from typing import Any, NamedTuple

from kernelcheck._src.core.validate import as_int, as_real, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["dask_executor", "suggested_shards"]

#: Extra that installs the engine: ``pip install "kernelcheck-attention[distributed]"``.
INSTALL_HINT = 'pip install "kernelcheck-attention[distributed]"'

#: Dask setting whose default (65536) :func:`dask_executor` unsets for local workers.
_TRIM_KEY = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"

#: Clients behind the executors :func:`dask_executor` has handed out.
_CLIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise InvalidArgument(
            "`dask_executor` needs Dask's `distributed` package, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        ) from exc
    return distributed


class _DaskOptions(NamedTuple):
    scheduler: str | None
    workers: int | None
    threads_per_worker: int
    retries: int
    timeout: float


def _dask_executor_iv(scheduler, workers, threads_per_worker, retries, timeout) -> _DaskOptions:
    threads_per_worker = as_int(threads_per_worker, "threads_per_worker", minimum=1)
    retries = as_int(retries, "retries", minimum=0)
    timeout = as_real(timeout, "timeout", positive=True)
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler.strip():
            raise InvalidArgument(
                "`scheduler` must be a scheduler address such as 'tcp://10.0.0.5:8786', "
                f"got {describe(scheduler)}"
            )
        if workers is not None:
            raise InvalidArgument(
                f"`workers` = {workers!r} starts a local cluster, but `scheduler` = "
                f"{scheduler!r} was given too (its own workers are used); give one of them"
            )
    elif workers is None:
        workers = max(1, (os.cpu_count() or 1) // threads_per_worker)
    else:
        workers = as_int(workers, "workers", minimum=1)
    return _DaskOptions(scheduler, workers, threads_per_worker, retries, timeout)


@contextlib.contextmanager
def dask_executor(
    scheduler: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    *,
    retries: int = 2,
    timeout: float = 30.0,
) -> Iterator[Executor]:
    """A :class:`concurrent.futures.Executor` on a Dask cluster, as a context manager.

    Pass the executor to any ``executor=`` argument of kernelcheck
    (:func:`kernelcheck.verify.unbiased` for C13, C16-C18,
    :func:`kernelcheck.verify.kernel` for C5, C6,
    :func:`kernelcheck.stats.run_trials`).  The results equal the
    single-process results for the same seed, bit for bit: the random stream
    is fixed per block of trials (or per search restart) by
    :meth:`numpy.random.SeedSequence.spawn`, and the moments of the blocks
    are merged in block order, whatever the number of workers, the number of
    shards or the order in which tasks finish (see the module notes).

    Parameters
    ----------
    scheduler : str or None, default None
        Address of a running scheduler, e.g. ``"tcp://10.0.0.5:8786"``.  None
        starts a ``distributed.LocalCluster`` of worker processes on this
        machine for the duration of the block.
    workers : int or None, default None
        Number of local worker processes (only without ``scheduler``);
        default ``os.cpu_count() // threads_per_worker``.
    threads_per_worker : int, default 1
        Threads per local worker (default 1: kernelcheck's tasks are
        NumPy-bound, and processes avoid contention on the GIL).
    retries : int, default 2
        Times Dask re-runs a task that raised (keyword-only, default 2).  A
        task lost with its worker is recomputed regardless (Dask's
        ``allowed-failures``); either way it is recomputed from the same seed.
    timeout : float, default 30.0
        Seconds to wait for the scheduler (keyword-only).

    Yields
    ------
    concurrent.futures.Executor
        ``client.get_executor(pure=False, retries=retries)``; shut down, with
        its client (and the local cluster, if one was started), when the
        block exits.

    Raises
    ------
    InvalidArgument
        When ``distributed`` is not installed (the extra
        ``kernelcheck-attention[distributed]`` installs it), or for bad arguments.

    Notes
    -----
    Local workers are started processes (``spawn``): a script that calls
    ``dask_executor()`` must do so under ``if __name__ == "__main__":``.  They
    start without the variable ``MALLOC_TRIM_THRESHOLD_`` that Dask's nanny
    sets by default: setting it also freezes glibc's mmap threshold, and each
    large NumPy temporary then costs a fresh mmap (about 1.5 times the CPU
    time per trial in ``benchmarks/distributed_speedup.py``).  For the workers
    of a remote cluster, set the Dask option
    ``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_: null``.
    Everything shipped to the workers (sampler, kernel, trial function) must
    pickle; Dask uses cloudpickle, so lambdas do.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.kernels import Exponential
    >>> from kernelcheck.features import PositiveRandomFeatures
    >>> from kernelcheck.verify import unbiased
    >>> X = np.array([[0.2, 0.1], [-0.1, 0.3]])
    >>> s = PositiveRandomFeatures.sampler(2, 16)
    >>> with dask_executor(workers=2) as ex:                  # doctest: +SKIP
    ...     a = unbiased(s, Exponential(), X, trials=100_000, seed=0, executor=ex)
    >>> b = unbiased(s, Exponential(), X, trials=100_000, seed=0)  # doctest: +SKIP
    >>> a.to_json() == b.to_json()                            # doctest: +SKIP
    True
    """
    scheduler, workers, threads_per_worker, retries, timeout = _dask_executor_iv(
        scheduler, workers, threads_per_worker, retries, timeout
    )
    distributed = _import_distributed()
    cluster: Any = None
    client: Any = None
    executor: Any = None
    try:
        if scheduler is None:
            import dask

            # the nanny's default MALLOC_TRIM_THRESHOLD_ also fixes glibc's mmap
            # threshold, so every large NumPy temporary is a fresh mmap: about
            # 1.5x the CPU time per trial here; None leaves the variable unset
            with dask.config.set({_TRIM_KEY: None}):
                cluster = distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=threads_per_worker,
                    processes=True,
                    dashboard_address=None,
                    # no dashboard; its HTTP server (health routes) still starts, on
                    # 8787 unless told: any free port, so that a second cluster (or
                    # another program on 8787) costs no "Port 8787 is already in use"
                    scheduler_kwargs={"dashboard_address": ":0"},
                )
            client = distributed.Client(cluster, timeout=timeout)
        else:
            client = distributed.Client(scheduler, timeout=timeout)
        executor = client.get_executor(pure=False, retries=retries)
        _CLIENTS[executor] = client
        yield executor
    finally:
        if executor is not None:
            _CLIENTS.pop(executor, None)
            executor.shutdown(wait=False)
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def suggested_shards(executor: Any, per_thread: int = 4) -> int | None:
    """Number of shards for ``run_trials`` / ``unbiased`` on ``executor`` (C13, C16-C18).

    ``per_thread`` tasks per worker thread of the Dask cluster behind an
    executor from :func:`dask_executor` (counted now): enough tasks to keep
    every thread busy and to rebalance after a lost worker, few enough that
    the engine's per-task cost (milliseconds) is negligible.  None for any
    other executor (the engine's default, one task per block).  The number
    of shards never changes a result.

    Parameters
    ----------
    executor : concurrent.futures.Executor or None
    per_thread : int, default 4
        Tasks per worker thread, >= 1.

    Returns
    -------
    int or None

    Examples
    --------
    >>> suggested_shards(None) is None
    True
    >>> with dask_executor(workers=2) as ex:                  # doctest: +SKIP
    ...     suggested_shards(ex)
    8
    """
    per_thread = as_int(per_thread, "per_thread", minimum=1)
    try:
        client = _CLIENTS.get(executor)
    except TypeError:  # not weak-referenceable: not one of ours
        client = None
    if client is None:
        return None
    threads = sum(client.nthreads().values())
    return max(1, per_thread * threads)
