"""kernelcheck on a real Dask cluster (claims C5, C6, C13, C17).

A ``distributed.LocalCluster`` of two worker processes (one thread each,
behind nannies) is started inside the module.  An unbiasedness report (C13,
C17) and a counterexample search (C5, C6) run on it through
:func:`kernelcheck.distributed.dask_executor` and must equal the
single-process results for the same seed, byte for byte (``to_json`` /
``to_dict``): two independent computations of the same report.  The same
holds when one worker process is killed (SIGKILL) while the run is in
flight: the scheduler loses the worker, the nanny starts a new one, Dask
recomputes the lost tasks from the same seeds.  Skipped when ``distributed``
is not installed; the argument checks run regardless.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from concurrent.futures import Executor

import mpmath
import numpy as np
import pytest

import kernelcheck as kc
from kernelcheck.distributed import dask_executor, suggested_shards
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import PositiveRandomFeatures
from kernelcheck.kernels import Exponential
from kernelcheck.verify import kernel as verify_kernel
from kernelcheck.verify import unbiased

D = 4
_rng = np.random.default_rng(20240917)
X = 0.3 * _rng.standard_normal((3, D))
Y = 0.3 * _rng.standard_normal((2, D))


#: exp(-||x - y||^4) is not positive semi-definite (its Fourier transform
#: changes sign): the search must find a counterexample.
def _quartic(A, B):
    return np.exp(-(((A - B) ** 2).sum(-1) ** 2))


def _quartic_mp(x, y):
    # mpmath is imported inside: the test module is not importable on the
    # workers, so cloudpickle sends these functions by value, and mpmath >= 1.4
    # exposes its top-level module as an object that does not pickle.

    return mpmath.exp(-(mpmath.fsum((a - b) ** 2 for a, b in zip(x, y, strict=True)) ** 2))


NON_KERNEL = kc.kernel_from_function(
    _quartic, vectorized=True, mp_function=_quartic_mp, name="exp(-||x - y||^4)"
)


def _report(executor=None, shards=None, trials=60_000):
    return unbiased(
        PositiveRandomFeatures.sampler(D, 8),
        Exponential(),
        X,
        Y,
        trials=trials,
        seed=11,
        shard_size=1024,
        executor=executor,
        shards=shards,
        sweep=(4, 16),
    )


@functools.cache
def _serial_json(trials: int) -> str:
    """The single-process report, computed once per size."""
    return _report(trials=trials).to_json()


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},  # no fixed port 8787
        ) as lc,
        distributed.Client(lc) as observer,
    ):
        yield lc, observer


# ---------------------------------------------------------------------------
# Equality with the single-process run
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shards", [None, 3])
def test_unbiased_report_on_the_cluster_equals_the_single_process_report(cluster, shards):
    lc, _ = cluster
    with dask_executor(scheduler=lc.scheduler_address) as ex:
        remote = _report(ex, shards)
    assert remote.to_json() == _serial_json(60_000)
    assert remote.trials == 60_000 and len(remote.sweep) == 2


SEARCHES = [
    # Linear(): a true kernel whose Grams are rank-deficient, so the search sees
    # rounding-level negative eigenvalues (~1e-16) and runs the confirmation
    # ladder: the witness and value agree only if every bit agrees
    pytest.param(kc.Linear(), 2, 8, "no_counterexample", id="Linear"),
    pytest.param(NON_KERNEL, 1, 8, "violation", id="non-kernel"),
    pytest.param(kc.Gaussian(1.0), 2, 8, "no_counterexample", id="Gaussian"),
]


@pytest.mark.parametrize(("k", "dim", "budget", "verdict"), SEARCHES)
def test_counterexample_search_on_the_cluster_equals_the_single_process_search(
    cluster, k, dim, budget, verdict
):
    lc, _ = cluster
    serial = verify_kernel(k, dim=dim, budget=budget, seed=5)
    with dask_executor(scheduler=lc.scheduler_address) as ex:
        remote = verify_kernel(k, dim=dim, budget=budget, seed=5, executor=ex)
    assert serial.verdict == verdict
    assert remote.to_dict() == serial.to_dict()


# ---------------------------------------------------------------------------
# A worker killed mid-run
# ---------------------------------------------------------------------------


class _KillOnSubmit(Executor):
    """Forwards to ``inner``; at submission number ``at`` kills a busy worker.

    The caller is blocked inside ``submit`` while the kill happens, so the run
    is in flight by construction: earlier tasks are queued or running on the
    cluster and later ones not yet submitted.
    """

    def __init__(self, inner, observer, at):
        self.inner, self.observer, self.at = inner, observer, at
        self.submitted = 0
        self.killed: tuple[str, int] | None = None

    def submit(self, fn, /, *args, **kwargs):
        fut = self.inner.submit(fn, *args, **kwargs)
        self.submitted += 1
        if self.submitted == self.at:
            self.killed = self._kill_a_busy_worker()
        return fut

    def _kill_a_busy_worker(self):
        pids = self.observer.run(os.getpid)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            busy = [w for w, keys in self.observer.processing().items() if keys and w in pids]
            if busy:
                addr = sorted(busy)[0]
                os.kill(pids[addr], signal.SIGKILL)
                return addr, pids[addr]
            time.sleep(0.005)
        raise AssertionError("no worker received a task within 30 s")


def _gone(observer, addr, pid) -> bool:
    """The killed process is dead and the scheduler dropped its worker."""
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    return not alive and addr not in observer.scheduler_info()["workers"]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of a worker process")
@pytest.mark.parametrize("workload", ["unbiased", "search"])
def test_result_unchanged_when_a_worker_is_killed_mid_run(cluster, workload):
    lc, observer = cluster
    observer.wait_for_workers(2, timeout=60)
    if workload == "unbiased":
        serial = _serial_json(60_000)
    else:
        serial = verify_kernel(kc.Linear(), dim=2, budget=8, seed=9).to_dict()
    with dask_executor(scheduler=lc.scheduler_address) as ex:
        killer = _KillOnSubmit(ex, observer, at=6)
        if workload == "unbiased":
            remote = _report(killer).to_json()
        else:
            remote = verify_kernel(kc.Linear(), dim=2, budget=8, seed=9, executor=killer).to_dict()
    assert killer.killed is not None
    addr, pid = killer.killed
    deadline = time.monotonic() + 30.0
    while not _gone(observer, addr, pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(observer, addr, pid), "the killed worker is still registered"
    assert remote == serial
    observer.wait_for_workers(2, timeout=60)  # the nanny's replacement, for later tests


# ---------------------------------------------------------------------------
# The local-cluster path and the argument checks
# ---------------------------------------------------------------------------


def test_local_cluster_path_gives_the_single_process_report():
    distributed = pytest.importorskip("distributed")
    with dask_executor(workers=1) as ex:
        remote = _report(ex, shards=8, trials=20_000)
        assert suggested_shards(ex) == 4  # 4 tasks per thread, 1 worker x 1 thread
        env = distributed.default_client().run(os.environ.get, "MALLOC_TRIM_THRESHOLD_")
    assert remote.to_json() == _serial_json(20_000)
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        assert set(env.values()) == {None}
    assert suggested_shards(ex) is None  # closed: no client behind it any more
    assert suggested_shards(None) is None


def test_a_local_cluster_takes_any_free_port_for_its_http_server():
    """The scheduler's HTTP server starts even without a dashboard, on port 8787 unless
    told otherwise; with 8787 taken (here by a listening socket) a fixed port would cost
    a "Port 8787 is already in use" warning, and the executor's cluster must not."""
    import socket
    import warnings

    pytest.importorskip("distributed")
    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:  # something else holds 8787 already: the situation under test
        pass
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Port 8787 is already in use")
            with dask_executor(workers=1) as ex:
                assert ex.submit(abs, -3).result() == 3
    finally:
        holder.close()


BAD_CALLS = [
    (dict(scheduler=8786), "`scheduler`"),
    (dict(scheduler="  "), "`scheduler`"),
    (dict(scheduler="tcp://127.0.0.1:8786", workers=2), "`workers`"),
    (dict(workers=0), "`workers`"),
    (dict(workers=1.5), "`workers`"),
    (dict(threads_per_worker=0), "`threads_per_worker`"),
    (dict(retries=-1), "`retries`"),
    (dict(timeout=float("nan")), "`timeout`"),
]


@pytest.mark.parametrize(
    ("kwargs", "name"), BAD_CALLS, ids=[c[1] + str(i) for i, c in enumerate(BAD_CALLS)]
)
def test_bad_arguments_are_refused_before_any_cluster_starts(kwargs, name):
    with pytest.raises(InvalidArgument, match=name):
        with dask_executor(**kwargs):
            pass  # pragma: no cover


def test_missing_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import raises ImportError
    with pytest.raises(InvalidArgument, match=r"kernelcheck-attention\[distributed\]"):
        with dask_executor(workers=1):
            pass  # pragma: no cover
