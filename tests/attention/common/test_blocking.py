"""Blocking and worker threads of the linear-type forms (``attention/common/blocking.py``).

Tiny cache and block budgets force every multi-block and multi-group path;
forcing the parallel-work threshold down runs the groups of chunks on worker
threads.  Each path is compared with the simple one (bit for bit where it
performs the same operations in the same order, within twice the a-priori
bound otherwise); the shared worker pool is checked for what it promises
(every thread runs, a failure stops all of them without hanging, a forked
child gets its own threads, a call does not wait for workers another call
holds, BLAS is limited inside and restored after); the default chunk size, the
column blocks of the bidirectional product, a masked score that overflows and
the finiteness check of a block's columns.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking
from kernelcheck._src.attention.common import blocking as _att
from kernelcheck._src.attention.common import decays as _dec
from kernelcheck._src.core.rounding import gamma
from kernelcheck.attention import FAMILIES
from kernelcheck.kernels import Exponential
from tests.attention.formulas import brute_linear

RNG = np.random.default_rng(7)


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_chunked_groups_carry_state(monkeypatch):
    """With a tiny cache budget every chunk is its own group: the reused buffers
    ([V, 1] rows, the group's states, scores and products, the normalised rows) are
    refilled block after block, and the result is the same bit for bit (the group
    boundaries change no sum).  Gated, the chunk-local way is the same bit for bit
    too; the group-scaled way measures its decays from each group's first token, so
    other groups give other roundings, each within the error bound."""
    rng = _rng(10)
    pq, pk = rng.random((2, 23, 4))
    V = rng.normal(size=(23, 2))
    g = np.linspace(0.5, 1, 23)
    ref = att.chunked(pq, pk, V, chunk_size=4)
    bidi = att.parallel(pq, pk, V)
    gated = att.gated_chunked(pq, pk, V, g, chunk_size=4, normalize=True)
    with monkeypatch.context() as m:
        m.setattr(_dec.GroupScales, "of", classmethod(lambda cls, *args: None))
        local = att.gated_chunked(pq, pk, V, g, chunk_size=4, normalize=True)
        m.setattr(_att, "CACHE_BYTES", 1)
        assert np.array_equal(att.gated_chunked(pq, pk, V, g, chunk_size=4, normalize=True), local)
    monkeypatch.setattr(_att, "CACHE_BYTES", 1)
    small = att.chunked(pq, pk, V, chunk_size=4)
    assert np.array_equal(small, ref)
    exact = att.gated_recurrent(pq, pk, V, g, normalize=True)
    gbound = 2 * att.gated_error_bound(pq, pk, V, g, normalize=True)
    for out in (gated, att.gated_chunked(pq, pk, V, g, chunk_size=4, normalize=True), local):
        assert np.all(np.abs(out - exact) <= gbound)
    assert np.array_equal(att.parallel(pq, pk, V), bidi)  # whole products: no blocks
    prefix = att.parallel(pq, pk, V, causal=True)  # blocks of its own size
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(small - ref) <= tol).all() and (np.abs(prefix - ref) <= tol).all()


def test_chunked_worker_threads_agree_with_inline(monkeypatch):
    """The threaded split of chunks (forced on for small input) changes nothing beyond rounding."""
    rng = _rng(19)
    pq, pk = rng.random((2, 2, 50, 6))
    V = rng.normal(size=(2, 50, 3))
    inline = att.chunked(pq, pk, V, chunk_size=4)
    monkeypatch.setattr(_att, "_PARALLEL_WORK", 0)
    threaded = att.chunked(pq, pk, V, chunk_size=4)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(threaded - inline) <= tol).all()
    ref, _ = brute_linear(pq, pk, V, True)
    assert (np.abs(threaded - ref) <= tol).all()


# ---------------------------------------------------------------------------
# Blocked and threaded paths agree with the simple ones
# ---------------------------------------------------------------------------


def test_chunked_threaded_path_matches_recurrence(monkeypatch):
    """Above the parallel-work threshold the groups of chunks run on worker threads
    (each thread takes the next group); with many small groups the result is the
    inline one bit for bit (each chunk's products and its state's sum are the same
    calls in the same order) and matches the prefix sums within the bound."""
    n, D, dv = 600, 8, 3
    pq = RNG.random((2, n, D)) + 0.05
    pk = RNG.random((2, n, D)) + 0.05
    V = RNG.normal(size=(2, n, dv))
    monkeypatch.setattr(_att, "CACHE_BYTES", 2000)  # a few chunks a group: ~40 groups
    inline = att.chunked(pq, pk, V, chunk_size=7)
    gates = np.linspace(0.9, 1.0, n)
    gated_inline = att.gated_chunked(pq, pk, V, gates, chunk_size=7, normalize=True)
    monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)  # force the worker path at this size
    sizes = []
    real = _att._run_everywhere

    def spy(fn, workers):
        sizes.append(workers.size)
        return real(fn, workers)

    monkeypatch.setattr(_att, "_run_everywhere", spy)
    out = att.chunked(pq, pk, V, chunk_size=7)
    gated = att.gated_chunked(pq, pk, V, gates, chunk_size=7, normalize=True)
    assert sizes and all(s == sizes[0] for s in sizes)
    ref = att.parallel(pq, pk, V, causal=True)
    bound = att.linear_error_bound(pq, pk, V, causal=True)
    assert np.all(np.abs(out - ref) <= 2 * bound)
    if sizes[0] > 1:  # threads really ran: the same calls, the same sums
        assert np.array_equal(out, inline)
        assert np.array_equal(gated, gated_inline)


def test_run_everywhere_runs_on_every_thread_and_raises_after_all_stopped():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    seen = []
    arrived = threading.Barrier(3, timeout=30)

    def meet():  # returns only once all three threads run it
        arrived.wait()
        seen.append(threading.get_ident())

    with ThreadPoolExecutor(max_workers=2) as pool:
        _att._run_everywhere(meet, _att._Workers(pool, 3))
    assert len(set(seen)) == 3 and threading.get_ident() in seen
    seen.clear()
    _att._run_everywhere(lambda: seen.append(1), _att._Workers(None, 1))
    assert seen == [1]
    done = []
    started = threading.Event()

    def fail_on_workers():
        if threading.current_thread() is threading.main_thread():
            started.wait(30)  # the worker has started: its failure must be waited for
            done.append("main")  # the caller's share finishes normally
            return
        started.set()
        raise RuntimeError("worker failed")

    with ThreadPoolExecutor(max_workers=1) as pool:
        with pytest.raises(RuntimeError, match="worker failed"):
            _att._run_everywhere(fail_on_workers, _att._Workers(pool, 2))
    assert done == ["main"]


def _blas_threads() -> int:
    controller = _att._blas_controller()
    return 1 if controller is None else max(lib.num_threads for lib in controller.lib_controllers)


def test_a_call_does_not_wait_for_workers_another_call_holds(monkeypatch):
    """The worker pool is shared and kept: a call whose worker task has not started
    when its own share is done cancels it, so a worker held elsewhere (here: blocked
    on an event) neither stalls the call nor changes its result; the same worker
    threads serve the next call."""
    import threading

    monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)
    monkeypatch.setattr(_att, "CACHE_BYTES", 2000)
    if _blas_threads() < 2:
        pytest.skip("one BLAS thread: the causal forms run inline")
    pq, pk = RNG.random((2, 300, 6)) + 0.05
    V = RNG.normal(size=(300, 2))
    inline = att.chunked(pq, pk, V, chunk_size=5)
    pool = _att._shared_pool(1)
    release = threading.Event()
    held = [pool.submit(release.wait, 20) for _ in range(pool._max_workers)]
    try:
        out = att.chunked(pq, pk, V, chunk_size=5)  # would wait 20 s without the cancel
        assert not release.is_set() and not any(f.done() for f in held)
    finally:
        release.set()
    assert np.array_equal(out, inline)
    workers = set()
    real = _att._GroupJob.work

    def spy(self):
        workers.add(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(_att._GroupJob, "work", spy)
    for _ in range(3):
        att.chunked(pq, pk, V, chunk_size=5)
    assert _att._shared_pool(1) is pool
    assert len({w for w in workers if w.startswith("kernelcheck-chunks")}) <= pool._max_workers


_FORK_CHILD = """
import os, threading, numpy as np
from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking
blocking._PARALLEL_WORK = 1
blocking.CACHE_BYTES = 2000
names = set()
real = blocking._GroupJob.work
def spy(self):
    names.add(threading.current_thread().name)
    return real(self)
blocking._GroupJob.work = spy
rng = np.random.default_rng(0)
pq, pk = rng.random((2, 3000, 6)) + 0.05
V = rng.normal(size=(3000, 2))
att.chunked(pq, pk, V, chunk_size=5)  # the parent's pool is started
pid = os.fork()
if pid == 0:
    names.clear()
    for _ in range(20):
        att.chunked(pq, pk, V, chunk_size=5)
    os._exit(0 if any(n.startswith("kernelcheck-chunks") for n in names) else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_worker_threads():
    """The parent's worker threads do not exist in a forked child: without a fresh
    pool there, every worker task would stay queued (and be cancelled), leaving the
    child on one thread.  Run in a fresh interpreter (forking this test process,
    which has imported JAX, warns of deadlocks)."""
    import subprocess
    import sys

    if _blas_threads() < 2:
        pytest.skip("one BLAS thread: the causal forms run inline")
    run = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0", run.stderr


def test_a_failing_group_stops_every_thread_without_hanging(monkeypatch):
    """A group that raises (here: the sink, on the third group) aborts the state chain:
    threads waiting for its state wake up and stop, and the error reaches the caller."""
    monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)
    monkeypatch.setattr(_att, "CACHE_BYTES", 1)  # one chunk a group
    from kernelcheck._src.attention.common.types import RawRows

    class Failing(RawRows):
        def take(self, r0, r1, h):
            if r0 == 8:
                raise MemoryError("planted")
            super().take(r0, r1, h)

    A = RNG.random((40, 3))
    sink = Failing((40, 2), A.dtype)
    with pytest.raises(MemoryError, match="planted"):
        _att.causal_products(A, A, _att.ValueRows(RNG.random((40, 2)), False), 4, sink)


def test_chunk_workers_limit_blas_inside_and_restore_after():
    controller = _att._blas_controller()
    if controller is None:
        pytest.skip("threadpoolctl cannot inspect the BLAS library here")
    before = [lib.num_threads for lib in controller.lib_controllers]
    with _att._chunk_workers(True) as workers:
        inside = [lib.num_threads for lib in _att._blas_controller().lib_controllers]
        if max(before) >= 2:
            assert workers.pool is not None and workers.size == max(before)
            assert inside == [1] * len(inside)
        else:
            assert workers.pool is None and workers.size == 1
    with _att._chunk_workers(False) as workers:
        assert workers.pool is None and workers.size == 1
    after = [lib.num_threads for lib in controller.lib_controllers]
    assert after == before


def test_blocked_paths_match_unblocked(monkeypatch):
    """Tiny block sizes force every multi-block loop; results equal the one-block ones.

    Blocked and one-block results are both within the form's a-priori bound
    of the exact output, so they differ by at most twice that bound, entry by
    entry (an entry near zero has no relative accuracy to promise).  The
    kernelized bound is a sum of non-negative terms, whose blocked and
    unblocked evaluations differ by at most gamma_(2n) relatively.  The data
    come from the test's own seed, so the test does not depend on what ran
    before it.
    """
    rng = np.random.default_rng(331)
    pq = rng.random((2, 9, 3)) + 0.05
    pk = rng.random((2, 9, 3)) + 0.05
    Q, K = rng.normal(size=(2, 2, 9, 3))
    V = rng.normal(size=(2, 9, 2))
    kernel = Exponential(0.5)

    def forms():
        return {
            "softmax": att.softmax(Q, K, V),
            "softmax-causal": att.softmax(Q, K, V, causal=True),
            "kernelized-causal": att.kernelized(Q, K, V, kernel, causal=True),
            "parallel-causal": att.parallel(pq, pk, V, causal=True),
            "chunked": att.chunked(pq, pk, V, chunk_size=2),
            "keb": att.kernelized_error_bound(Q, K, V, kernel, causal=True),
        }

    bounds = {
        "softmax": att.softmax_error_bound(Q, K, V),
        "softmax-causal": att.softmax_error_bound(Q, K, V, causal=True),
        "kernelized-causal": att.kernelized_error_bound(Q, K, V, kernel, causal=True),
        "parallel-causal": att.linear_error_bound(pq, pk, V, causal=True),
        "chunked": att.linear_error_bound(pq, pk, V, causal=True),
    }
    expected = forms()
    monkeypatch.setattr(_att, "BLOCK_ELEMENTS", 20)
    monkeypatch.setattr(_att, "CACHE_BYTES", 100)
    got = forms()
    for key, bound in bounds.items():
        assert (np.abs(got[key] - expected[key]) <= 2 * bound).all(), key
    keb = expected["keb"]
    assert (np.abs(got["keb"] - keb) <= gamma(2 * Q.shape[-2]) * keb).all()


@pytest.mark.parametrize("D, C", [(3, 32), (1024, 32), (1025, 64)])
def test_chunked_default_chunk_is_32_or_64_for_wide_features(D, C):
    """The default chunk: 32 tokens, 64 when D > 1024 (BLAS-sized products);
    causal parallel forms its blocks with the same size."""
    pq = RNG.random((200, D)) + 0.1
    pk = RNG.random((200, D)) + 0.1
    V = RNG.normal(size=(200, 2))
    ref = att.chunked(pq, pk, V, chunk_size=C)
    assert np.array_equal(att.chunked(pq, pk, V), ref)
    assert np.array_equal(att.parallel(pq, pk, V, causal=True), ref)
    other = att.chunked(pq, pk, V, chunk_size=96 - C)
    assert not np.array_equal(other, ref)  # the chunk size is visible in the rounding
    assert att.cost_model("chunked", 200, 3, D, 2).chunk_size == C


def test_blas_controller_is_created_once_and_sees_the_blas(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    has_blas = any(info["user_api"] == "blas" for info in threadpoolctl.threadpool_info())
    monkeypatch.setattr(_att, "_CONTROLLER", [])
    first = _att._blas_controller()
    assert len(_att._CONTROLLER) == 1
    assert _att._blas_controller() is first
    if has_blas:
        assert first is not None and first.lib_controllers
        assert all(lib.user_api == "blas" for lib in first.lib_controllers)
    else:
        assert first is None


@pytest.mark.parametrize("cache_bytes", [600, 1 << 20])
def test_bidirectional_blocks_divide_in_the_transposed_product(monkeypatch, cache_bytes):
    """Bidirectional ``parallel`` computes ``[V^T phi_k; z^T] phi_q^T`` (numerators over
    their normaliser, a token a column) and divides each block of its columns in place:
    with blocks of one column, of a few columns and of all of them, over a batch, the
    output is the transposed view of that product (its matrices' columns contiguous, the
    normalisers of ``on_bad_normalizer='report'`` in the same buffer), the same bit for
    bit (the same products and the same divisions), and within the a-priori bound of the
    quotients computed apart from it."""
    pq = RNG.random((2, 3, 50, 7)) + 0.05
    pk = RNG.random((2, 3, 50, 7)) + 0.05
    V = RNG.normal(size=(2, 3, 50, 4))
    whole = att.parallel(pq, pk, V)
    monkeypatch.setattr(_att, "CACHE_BYTES", cache_bytes)  # 600: 2 columns of 6 x 5 rows a block
    out = att.parallel(pq, pk, V)
    monkeypatch.setattr(_att, "CACHE_BYTES", 1)  # one column a block
    single = att.parallel(pq, pk, V)
    report = att.parallel(pq, pk, V, on_bad_normalizer="report")
    assert out.shape == V.shape and np.swapaxes(out, -1, -2).strides[-1] == out.itemsize
    assert np.may_share_memory(report.out, report.normalizer)
    raw = att.parallel(pq, pk, V, normalize=False)  # unnormalised: the same layout
    assert np.swapaxes(raw, -1, -2).flags.c_contiguous
    # a block of columns spans every batch entry: the most columns within the cache
    # budget, or one
    for budget, batch, rows, size in [(1, 6, 5, 8), (1 << 21, 6, 65, 8), (1 << 21, 1, 65, 4)]:
        monkeypatch.setattr(_att, "CACHE_BYTES", budget)
        step, col = _att.column_block(batch, rows, size), batch * rows * size
        assert step * col <= budget < (step + 1) * col or (step == 1 and col > budget)
    assert np.array_equal(out, whole) and np.array_equal(single, whole)
    ref = (pq @ (np.swapaxes(pk, -1, -2) @ V)) / (pq @ pk.sum(axis=-2)[..., None])
    assert np.all(np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V))
    pk9, V9 = pk[..., :9, :], V[..., :9, :]  # fewer keys than queries
    few = att.parallel(pq, pk9, V9)
    ref = (pq @ (np.swapaxes(pk9, -1, -2) @ V9)) / (pq @ pk9.sum(axis=-2)[..., None])
    assert few.shape == (2, 3, 50, 4)
    assert np.all(np.abs(few - ref) <= 2 * att.linear_error_bound(pq, pk9, V9))


# ---------------------------------------------------------------------------
# Masked scores never reach a row; the gated form's group-scaled way and its fallback
# ---------------------------------------------------------------------------


#: The forms on feature matrices of every family (their scores are products of features).
FEATURE_FORMS = [
    pytest.param((fam, form), id=form.name)
    for fam in FAMILIES
    for form in fam.forms
    if form.inputs == "features"
]


@pytest.mark.parametrize("family_form", FEATURE_FORMS)
def test_a_score_overflowing_above_the_diagonal_changes_no_row(family_form):
    """``a_0 . b_1 = 1e400`` overflows, but row 0 sees only key 0 (score 1) and row 1
    sees ``a_1 . b_0 = 1e-400`` (0) and ``a_1 . b_1 = 1``: each row is its family's
    definition evaluated exactly (for plain and gated attention the rows are 1 and
    2).  A masked score multiplied by 0 would be NaN (inf * 0) and fail valid input
    with an overflow error."""
    fam, form = family_form
    a = np.array([[1e200], [1e-200]])
    b = np.array([[1e-200], [1e200]])
    V = np.array([[1.0], [2.0]])
    args = (a, b, V) + tuple(fam.spec.example_arguments(np.random.default_rng(0), 2, 1, 1, 1)[3:])
    norms = (False, True) if "normalize" in form.options else (None,)
    for normalize in norms:
        kw = {} if normalize is None else {"normalize": normalize}
        out = form.call(*args, causal=True, **kw)
        exact = fam.spec.exact_output(args, kw, True)
        # each row is a handful of roundings: a product and a sum per score, the decays'
        # 10 u (two exp and two products), a quotient; within gamma_16 relative, where
        # the forms' a-priori bounds here are far looser (they count the whole chunk)
        rtol = gamma(16, np.float64)
        assert np.all(np.abs(out - exact) <= rtol * np.abs(exact)), (normalize, out, exact)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_finite_finds_every_non_finite_entry_and_survives_overflowing_sums(dtype):
    """Bidirectional ``parallel``'s check: column sums by GEMV, entries when a sum is not finite."""
    E = np.random.default_rng(5).standard_normal((2, 4, 6)).astype(dtype)
    assert blocking.columns_finite(E)
    for index in np.ndindex(E.shape):
        for bad in (np.nan, np.inf, -np.inf):
            F = E.copy()
            F[index] = bad
            assert not blocking.columns_finite(F), (index, bad)
    F = E.copy()
    F[1, 0, 3], F[1, 2, 3] = np.inf, -np.inf  # their sum is NaN
    assert not blocking.columns_finite(F)
    big = np.full((3, 5), np.finfo(dtype).max / 2, dtype=dtype)  # every column sum overflows
    assert blocking.columns_finite(big)
    assert blocking.columns_finite(np.empty((4, 0), dtype=dtype))
