"""Unit tests of the attention forms (claims C1, C10, C11, C12, C14).

Reference computations here are independent of the code under test: a
brute-force Gram matrix ``phi(Q) phi(K)^T`` (masked with ``np.tril`` when
causal) divided row by row, running means on structured inputs, and the
recurrence run step by step.  The blocked and threaded paths are compared
with the simple ones; result objects' derived quantities and one-line
verdicts are read back; bad normalisers are raised or reported, never
patched.  The error bounds themselves are tested in ``test_bounds.py``, the
cost model in ``test_cost.py``.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

import kernelcheck
from kernelcheck import attention as att
from kernelcheck._src.attention.common import blocking as _att
from kernelcheck._src.attention.common import decays as _dec
from kernelcheck._src.core.rounding import gamma, unit_roundoff
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure
from kernelcheck.kernels import Exponential, Linear, Polynomial, exp

#: The linear recurrence's init / step pair (claims C11, C14).
LINEAR = att.linear_recurrence()


def _rng(seed=0):
    return np.random.default_rng(seed)


def _brute_linear(pq, pk, V, causal):
    """Direct formula: G = phi_q phi_k^T, masked, then (G V) / (G 1)."""
    G = np.einsum("...id,...jd->...ij", pq, pk)
    if causal:
        G = np.tril(G)
    return (G @ V) / G.sum(axis=-1)[..., None], G.sum(axis=-1)


RNG = np.random.default_rng(7)
U = unit_roundoff(np.float64)


# ---------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_matches_direct_formula(causal):
    rng = _rng(1)
    Q, K, V = rng.normal(size=(3, 11, 5))
    S = Q @ K.T / math.sqrt(5)
    if causal:
        S = np.where(np.tril(np.ones((11, 11), bool)), S, -np.inf)
    W = np.exp(S)  # logits are small here: the unshifted formula is exact enough
    ref = (W / W.sum(axis=1, keepdims=True)) @ V
    out = att.softmax(Q, K, V, causal=causal)
    assert np.abs(out - ref).max() <= 2 * att.softmax_error_bound(Q, K, V, causal=causal).max()


def test_softmax_causal_first_row_is_first_value():
    rng = _rng(3)
    Q, K, V = rng.normal(size=(3, 4, 2))
    assert np.array_equal(att.softmax(Q, K, V, causal=True)[0], V[0])


def test_softmax_blocks_agree_with_one_block(monkeypatch):
    """Row blocking changes nothing: compare a tiny block budget with the default."""
    rng = _rng(4)
    Q, K, V = rng.normal(size=(3, 2, 13, 4))
    whole = att.softmax(Q, K, V, causal=True)
    monkeypatch.setattr(_att, "BLOCK_ELEMENTS", 30)
    blocked = att.softmax(Q, K, V, causal=True)
    assert np.abs(whole - blocked).max() <= 2 * att.softmax_error_bound(Q, K, V, causal=True).max()


def test_softmax_equals_kernelized_exponential():
    """C10: exp(q.k / sqrt d) is the kernel Exponential(1/sqrt(d))."""
    rng = _rng(5)
    Q, K, V = rng.normal(size=(3, 2, 9, 4))
    for causal in (False, True):
        a = att.softmax(Q, K, V, causal=causal)
        k = Exponential(0.5)
        b = att.kernelized(Q, K, V, k, causal=causal)
        tol = att.softmax_error_bound(Q, K, V, causal=causal) + att.kernelized_error_bound(
            Q, K, V, k, causal=causal
        )
        assert (np.abs(a - b) <= tol).all()


def test_softmax_float32_stays_float32():
    rng = _rng(6)
    Q, K, V = rng.normal(size=(3, 5, 3)).astype(np.float32)
    out = att.softmax(Q, K, V)
    assert out.dtype == np.float32
    ref = att.softmax(Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64))
    assert (np.abs(out - ref) <= att.softmax_error_bound(Q, K, V) + 1e-300).all()


def test_mixed_precision_is_float64():
    rng = _rng(7)
    Q, K, V = rng.normal(size=(3, 5, 3))
    assert att.softmax(Q.astype(np.float32), K, V).dtype == np.float64


def test_softmax_overflowing_logits_raise():
    Q = np.full((2, 2), 1e200)
    with pytest.raises(NumericalFailure, match="overflow"):
        att.softmax(Q, Q, np.ones((2, 1)), scale=1.0)


def test_softmax_value_overflow_message():
    with pytest.raises(
        NumericalFailure,
        match=r"^`softmax` attention overflowed: a weighted sum "
        r"of values is beyond the floating-point range \(float64, max \|V\| = "
        r"1e\+308\); scale the values down$",
    ):
        att.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))


# ---------------------------------------------------------------------------
# Kernelized and linear forms against the brute-force formula
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_parallel_matches_brute_force(causal, batch):
    rng = _rng(8)
    pq, pk = rng.random((2,) + batch + (10, 6))
    V = rng.normal(size=batch + (10, 3))
    ref, _ = _brute_linear(pq, pk, V, causal)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=causal)
    assert (np.abs(att.parallel(pq, pk, V, causal=causal) - ref) <= tol).all()


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 10, 11, 64])
def test_chunked_matches_brute_force(chunk_size):
    rng = _rng(9)
    pq, pk = rng.random((2, 2, 10, 5))
    V = rng.normal(size=(2, 10, 4))
    ref, _ = _brute_linear(pq, pk, V, True)
    tol = 2 * att.linear_error_bound(pq, pk, V, causal=True)
    assert (np.abs(att.chunked(pq, pk, V, chunk_size=chunk_size) - ref) <= tol).all()


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
    ref, _ = _brute_linear(pq, pk, V, True)
    assert (np.abs(threaded - ref) <= tol).all()


def test_kernelized_matches_feature_form():
    rng = _rng(11)
    Q, K, V = rng.normal(size=(3, 8, 3)) * 0.5
    k = Polynomial(2, c=1.0)
    phi = k.features()
    for causal in (False, True):
        a = att.kernelized(Q, K, V, k, causal=causal)
        ref, _ = _brute_linear(phi(Q), phi(K), V, causal)
        tol = att.kernelized_error_bound(Q, K, V, k, causal=causal) + att.linear_error_bound(
            phi(Q), phi(K), V, causal=causal, extra_ops=2 * phi.ops
        )
        assert (np.abs(a - ref) <= tol).all()


def test_kernelized_rejects_wrong_gram_shape():
    with pytest.raises(InvalidArgument, match="Gram block"):
        att.kernelized(
            np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 1)), lambda X, Y: np.ones((2, 2))
        )


def test_causal_masks_are_exact_on_a_structured_example():
    """Keys j > i must not contribute: make them huge and check the outputs are unaffected."""
    n = 6
    V = np.arange(n, dtype=float)[:, None]
    Q = K = np.zeros((n, 2))
    # all logits 0: causal softmax is the running mean of V (exact reference)
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    assert np.allclose(att.softmax(Q, K, V, causal=True), expected, rtol=8 * U)
    assert np.allclose(att.kernelized(Q, K, V, Exponential(), causal=True), expected, rtol=8 * U)
    ones = np.ones((n, 1))
    for out in (
        att.parallel(ones, ones, V, causal=True),
        att.recurrent(ones, ones, V),
        att.chunked(ones, ones, V, chunk_size=4),
        att.chunked(ones, ones, V, chunk_size=1),
        att.chunked(ones, ones, V, chunk_size=100),
    ):
        assert np.allclose(out, expected, rtol=8 * U)
    # bidirectional: every row is the mean
    assert np.allclose(att.parallel(ones, ones, V), V.mean(), rtol=8 * U)
    assert np.allclose(att.softmax(Q, K, V), V.mean(), rtol=8 * U)


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


# ---------------------------------------------------------------------------
# Recurrence and state
# ---------------------------------------------------------------------------


def test_step_is_pure_and_matches_recurrent():
    rng = _rng(13)
    pq, pk = rng.random((2, 7, 3))
    V = rng.normal(size=(7, 2))
    state = LINEAR.init(3, 2)
    before = (state.S.copy(), state.z.copy())
    ys = []
    s = state
    for t in range(7):
        s, y = LINEAR.step(s, pq[t], pk[t], V[t])
        ys.append(y)
    assert np.array_equal(state.S, before[0]) and np.array_equal(state.z, before[1])
    out, final = att.recurrent(pq, pk, V, return_state=True)
    assert np.array_equal(np.array(ys), out)  # the same operations in the same order
    assert np.array_equal(final.S, s.S) and np.array_equal(final.z, s.z)
    # and the state is the running sums (C11): S = phi_k^T V, z = sum phi_k
    assert (
        np.abs(final.S - pk.T @ V).max() <= 2 * 7 * np.finfo(float).eps * (pk.T @ np.abs(V)).max()
    )


def test_step_broadcasts_over_batch():
    rng = _rng(14)
    pq, pk = rng.random((2, 4, 5, 3))
    V = rng.normal(size=(4, 5, 2))
    s = LINEAR.init(3, 2)  # no batch shape: broadcasts
    ys = []
    for t in range(5):
        s, y = LINEAR.step(s, pq[:, t], pk[:, t], V[:, t])
        ys.append(y)
    assert s.S.shape == (4, 3, 2)
    ref = att.recurrent(pq, pk, V)
    assert np.array_equal(np.stack(ys, axis=1), ref)


def test_state_size_does_not_depend_on_n():
    """C11, deterministic: the final state has D (d_v + 1) numbers for every n."""
    rng = _rng(15)
    sizes = set()
    for n in (1, 5, 40):
        pq, pk = rng.random((2, n, 6))
        _, state = att.recurrent(pq, pk, rng.normal(size=(n, 3)), return_state=True)
        sizes.add((state.S.shape, state.z.shape, state.size, state.nbytes))
    assert sizes == {((6, 3), (6,), 6 * 4, 6 * 4 * 8)}


def test_state_size_and_bytes():
    s = LINEAR.init(5, 3, batch_shape=(2, 4))
    assert s.S.shape == (2, 4, 5, 3) and s.z.shape == (2, 4, 5)
    assert s.size == 2 * 4 * 5 * (3 + 1)
    assert s.nbytes == 8 * s.size
    s32 = LINEAR.init(5, 3, dtype=np.float32)
    assert s32.S.dtype == s32.z.dtype == np.float32
    assert s32.nbytes == 4 * s32.size


def test_step_report_and_recurrent_state():
    s = LINEAR.init(2, 1)
    s, y = LINEAR.step(s, [1.0, 0.0], [1.0, 0.0], [3.0], on_bad_normalizer="report")
    assert y.ok and np.array_equal(y.out, [3.0]) and np.array_equal(y.normalizer, 1.0)
    s, y = LINEAR.step(s, [0.0, 1.0], [1.0, 0.0], [5.0], on_bad_normalizer="report")
    assert not y.ok  # phi(q) . z = 0
    pq = np.abs(RNG.normal(size=(6, 3)))
    pk = np.abs(RNG.normal(size=(6, 3)))
    V = RNG.normal(size=(6, 2))
    out, state = att.recurrent(pq, pk, V, return_state=True)
    assert np.allclose(state.S, pk.T @ V) and np.allclose(state.z, pk.sum(axis=0))
    assert state.size == LINEAR.init(3, 2).size
    assert np.array_equal(out, att.recurrent(pq, pk, V))
    rep = att.recurrent(pq, pk, V, on_bad_normalizer="report")
    assert rep.ok and np.array_equal(rep.out, out)


def test_recurrent_state_carries_the_batch_shape():
    pq = RNG.random((3, 2, 5, 4)) + 0.1
    pk = RNG.random((3, 2, 5, 4)) + 0.1
    V = RNG.normal(size=(3, 2, 5, 2))
    out, state = att.recurrent(pq, pk, V, return_state=True)
    assert state.S.shape == (3, 2, 4, 2) and state.z.shape == (3, 2, 4)
    assert np.allclose(state.S, np.swapaxes(pk, -1, -2) @ V)
    assert out.dtype == np.float64
    out32 = att.recurrent(*(x.astype(np.float32) for x in (pq, pk, V)))
    assert out32.dtype == np.float32
    # one step with a batched state: same as the first token of the sequence
    s, y = LINEAR.step(
        LINEAR.init(4, 2, batch_shape=(3, 2)),
        pq[..., 0, :],
        pk[..., 0, :],
        V[..., 0, :],
    )
    assert np.allclose(y, out[..., 0, :])
    assert s.S.shape == (3, 2, 4, 2)


_D, _DV = 4, 2


_GOOD = {
    "S": np.zeros((3, _D, _DV)),
    "z": np.zeros((3, _D)),
    "phi_q": np.ones((3, _D)),
    "phi_k": np.ones((3, _D)),
    "v": np.ones((3, _DV)),
}


@pytest.mark.parametrize("odd", ["S", "z", "phi_q", "phi_k", "v"])
def test_step_batch_mismatch_in_any_one_argument_is_refused(odd):
    args = dict(_GOOD)
    bad = args[odd]
    args[odd] = np.concatenate([bad, bad[:1]])[None].repeat(2, axis=0)  # batch (2, 4)
    state = att.State(args["S"], args["z"])
    shapes = (
        args["S"].shape[:-2],
        args["phi_q"].shape[:-1],
        args["phi_k"].shape[:-1],
        args["v"].shape[:-1],
    )
    message = (
        r"^the leading \(batch/head\) dimensions of `state`, `phi_q`, `phi_k` and `v` do not "
        r"broadcast: " + re.escape(", ".join(str(s) for s in shapes)) + "$"
    )
    with pytest.raises(InvalidArgument, match=message):
        LINEAR.step(state, args["phi_q"], args["phi_k"], args["v"])


@pytest.mark.parametrize("wide", ["S", "z", "phi_q", "phi_k", "v", None])
def test_step_result_dtype_is_float64_if_any_argument_is(wide):
    args = {k: v.astype(np.float32) for k, v in _GOOD.items()}
    if wide is not None:
        args[wide] = args[wide].astype(np.float64)
    new, y = LINEAR.step(att.State(args["S"], args["z"]), args["phi_q"], args["phi_k"], args["v"])
    expected = np.float32 if wide is None else np.float64
    assert y.dtype == new.S.dtype == new.z.dtype == expected


def test_recurrent_float32_equals_float32_steps_bitwise():
    pq = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    pk = (RNG.random((9, 3)) + 0.1).astype(np.float32)
    V = RNG.normal(size=(9, 2)).astype(np.float32)
    state = LINEAR.init(3, 2, dtype=np.float32)
    ys = []
    for t in range(9):
        state, y = LINEAR.step(state, pq[t], pk[t], V[t])
        ys.append(y)
    out, final = att.recurrent(pq, pk, V, return_state=True)
    assert out.dtype == np.float32 and final.S.dtype == np.float32
    assert np.array_equal(out, np.array(ys))
    assert np.array_equal(final.S, state.S) and np.array_equal(final.z, state.z)


# ---------------------------------------------------------------------------
# Bad normalisers (C12): raised or reported, never patched
# ---------------------------------------------------------------------------


def _signed_features():
    rng = _rng(16)
    pq = rng.normal(size=(12, 3))
    pk = rng.normal(size=(12, 3))
    return pq, pk, rng.normal(size=(12, 2))


@pytest.mark.parametrize(
    "form",
    [
        lambda pq, pk, V, **kw: att.parallel(pq, pk, V, **kw),
        lambda pq, pk, V, **kw: att.parallel(pq, pk, V, causal=True, **kw),
        lambda pq, pk, V, **kw: att.recurrent(pq, pk, V, **kw),
        lambda pq, pk, V, **kw: att.chunked(pq, pk, V, chunk_size=5, **kw),
    ],
    ids=["parallel", "parallel-causal", "recurrent", "chunked"],
)
def test_bad_normalisers_raise_then_report(form):
    pq, pk, V = _signed_features()
    with pytest.raises(BadNormalizer) as info:
        form(pq, pk, V)
    res = form(pq, pk, V, on_bad_normalizer="report")
    assert isinstance(res, att.AttentionOutput)
    assert not res.ok
    assert np.array_equal(info.value.positions, res.bad_positions)
    assert (res.bad_values <= 0).all()
    # positions are exactly the non-positive normalisers
    assert np.array_equal(np.argwhere(res.normalizer <= 0), res.bad_positions)
    assert "<= 0" in str(res)


def test_report_mode_output_is_raw_quotient():
    """out * normaliser reproduces phi_q phi_k^T V: nothing was added to the normaliser."""
    pq, pk, V = _signed_features()
    res = att.parallel(pq, pk, V, on_bad_normalizer="report")
    absG = np.abs(pq) @ np.abs(pk).T
    g = gamma(2 * 12 + 2 * 3 + 4)
    assert (np.abs(res.normalizer - (pq @ pk.T).sum(axis=1)) <= 2 * g * absG.sum(axis=1)).all()
    num = res.out * res.normalizer[:, None]
    assert (np.abs(num - (pq @ pk.T) @ V) <= 2 * g * (absG @ np.abs(V))).all()


def test_report_mode_with_good_normalisers():
    rng = _rng(17)
    pq, pk = rng.random((2, 4, 3))
    res = att.parallel(pq, pk, np.ones((4, 1)), on_bad_normalizer="report")
    assert res.ok and res.bad_positions.shape == (0, 1)
    assert "all 4 normalisers > 0" in str(res)
    assert res.to_dict()["bad_positions"] == []


def test_kernelized_linear_kernel_bad_normaliser():
    Q = np.array([[1.0], [-1.0]])
    with pytest.raises(BadNormalizer, match="C12"):
        att.kernelized(Q, Q, np.ones((2, 1)), Linear())


def test_overflowing_features_raise():
    pq = np.full((3, 2), 1e200)
    with pytest.raises(NumericalFailure):
        att.parallel(pq, pq, np.ones((3, 1)))


def test_attention_output_report_fields_and_text():
    phi = np.array([[1.0], [-1.0], [2.0]])
    V = np.array([[1.0], [2.0], [3.0]])
    res = att.parallel(phi, phi, V, causal=True, on_bad_normalizer="report")
    # normalisers are phi_i * sum_{j <= i} phi_j: 1, -1 * 0 = -0, 2 * 2 = 4
    assert np.array_equal(res.normalizer, [1.0, 0.0, 4.0])
    assert res.bad_positions.tolist() == [[1]]
    assert not res.ok
    assert np.array_equal(res.bad_values, [0.0])
    assert str(res) == (
        "attention output of shape (3, 1); 1 of 3 normalisers <= 0 (first at (1,): 0)"
    )
    good = att.parallel(np.abs(phi), np.abs(phi), V, on_bad_normalizer="report")
    assert good.ok and good.bad_positions.shape == (0, 1)
    assert str(good) == "attention output of shape (3, 1); all 3 normalisers > 0"
    assert np.array_equal(good.out, att.parallel(np.abs(phi), np.abs(phi), V))
    with pytest.raises(BadNormalizer) as info:
        att.parallel(phi, phi, V, causal=True)
    assert info.value.positions.tolist() == [[1]]
    assert str(info.value).startswith(
        "1 of 3 attention normalisers are <= 0 in `parallel` (first at position (1,): 0); "
        "the features are not positive (odd Taylor order or trigonometric features, claim "
        "C12). kernelcheck never adds an eps: pass on_bad_normalizer='report' to get the "
        "raw output with the bad positions"
    )


def test_linear_kernel_normalisers_reported_by_kernelized():
    Q = np.array([[1.0], [-1.0]])
    res = att.kernelized(Q, Q, np.ones((2, 1)), Linear(), on_bad_normalizer="report")
    # normalisers: q_i (k_1 + k_2) = 0 for both rows
    assert res.bad_positions.tolist() == [[0], [1]]
    assert np.array_equal(res.normalizer, [0.0, 0.0])


@pytest.mark.parametrize("form", ["kernelized", "step", "recurrent", "chunked", "parallel"])
def test_bad_normalizer_messages_name_the_form(form):
    phi = np.array([[1.0], [-1.0]])
    V = np.ones((2, 1))
    calls = {
        "kernelized": lambda: att.kernelized(phi, phi, V, Linear()),
        "step": lambda: LINEAR.step(LINEAR.init(1, 1), [-1.0], [1.0], [1.0]),
        "recurrent": lambda: att.recurrent(phi, phi, V),
        "chunked": lambda: att.chunked(phi, phi, V),
        "parallel": lambda: att.parallel(phi, phi, V),
    }
    with pytest.raises(BadNormalizer, match=rf"normalisers are <= 0 in `{form}` \(first at"):
        calls[form]()


# ---------------------------------------------------------------------------
# Clean failures carry the form's name and leak no NumPy warning
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["parallel", "parallel-causal", "recurrent", "chunked", "step"])
def test_overflow_raises_numerical_failure_without_runtime_warnings(form):
    import warnings

    big = np.full((3, 2), 1e200)
    V = np.ones((3, 1))
    calls = {
        "parallel": lambda: att.parallel(big, big, V),
        "parallel-causal": lambda: att.parallel(big, big, V, causal=True),
        "recurrent": lambda: att.recurrent(big, big, V),
        "chunked": lambda: att.chunked(big, big, V, chunk_size=2),
        "step": lambda: LINEAR.step(LINEAR.init(2, 1), big[0], big[0], V[0]),
    }
    name = form.split("-")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning escaping would raise here
        with pytest.raises(
            NumericalFailure,
            match=rf"^`{name}` attention overflowed: a numerator "
            r"or normaliser is not finite \(float64\); scale the features or "
            r"inputs down$",
        ):
            calls[form]()


def test_softmax_and_kernelized_failures_without_runtime_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            NumericalFailure,
            match=r"^`softmax` logits overflowed: scale \* q \. k "
            r"is beyond the floating-point range \(float64\); scale the inputs down$",
        ):
            att.softmax(np.full((2, 2), 1e200), np.full((2, 2), 1e200), np.ones((2, 1)))
        with pytest.raises(NumericalFailure, match=r"^`softmax` attention overflowed"):
            att.softmax(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308))
        with pytest.raises(NumericalFailure, match=r"^`kernelized` attention overflowed"):
            att.kernelized(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 1), 1e308), Exponential())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


_Q = np.ones((4, 3))
_V = np.ones((4, 2))
_NAN = np.where(np.eye(4, 3) > 0, np.nan, 1.0)
_INF = np.where(np.eye(4, 3) > 0, np.inf, 1.0)


BAD_CALLS = [
    ("softmax n mismatch Q/K", lambda: att.softmax(_Q, np.ones((5, 3)), _V), "number of tokens"),
    ("softmax n mismatch K/V", lambda: att.softmax(_Q, _Q, np.ones((5, 2))), "number of tokens"),
    ("softmax d mismatch", lambda: att.softmax(_Q, np.ones((4, 2)), _V), "last dimension"),
    (
        "softmax batch mismatch",
        lambda: att.softmax(np.ones((2, 4, 3)), np.ones((3, 4, 3)), np.ones((2, 4, 2))),
        "leading",
    ),
    ("softmax rank 1", lambda: att.softmax(np.ones(3), _Q, _V), "at least 2 dimensions"),
    ("softmax NaN", lambda: att.softmax(_NAN, _Q, _V), "`Q` must be finite"),
    (
        "softmax Inf in V",
        lambda: att.softmax(_Q, _Q, np.full((4, 2), np.inf)),
        "`V` must be finite",
    ),
    (
        "softmax empty",
        lambda: att.softmax(np.ones((0, 3)), np.ones((0, 3)), np.ones((0, 2))),
        "must not be empty",
    ),
    ("softmax complex", lambda: att.softmax(_Q + 0j, _Q, _V), "must be real"),
    ("softmax scale", lambda: att.softmax(_Q, _Q, _V, scale=-1.0), "`scale`"),
    ("softmax scale nan", lambda: att.softmax(_Q, _Q, _V, scale=float("nan")), "`scale`"),
    ("softmax causal", lambda: att.softmax(_Q, _Q, _V, causal="yes"), "`causal`"),
    ("kernelized kernel", lambda: att.kernelized(_Q, _Q, _V, 3), "`kernel` must be callable"),
    (
        "kernelized action",
        lambda: att.kernelized(_Q, _Q, _V, Linear(), on_bad_normalizer="eps"),
        "`on_bad_normalizer`",
    ),
    ("parallel D mismatch", lambda: att.parallel(_Q, np.ones((4, 2)), _V), "last dimension D"),
    ("parallel n mismatch", lambda: att.parallel(_Q, _Q, np.ones((3, 2))), "number of tokens"),
    ("parallel Inf", lambda: att.parallel(_INF, _Q, _V), "`phi_q` must be finite"),
    ("parallel rank", lambda: att.parallel(_Q, _Q, np.ones(4)), "`V` must have shape"),
    (
        "parallel action",
        lambda: att.parallel(_Q, _Q, _V, on_bad_normalizer=None),
        "`on_bad_normalizer`",
    ),
    ("recurrent NaN", lambda: att.recurrent(_Q, _NAN, _V), "`phi_k` must be finite"),
    ("recurrent n mismatch", lambda: att.recurrent(_Q, _Q, np.ones((5, 2))), "number of tokens"),
    (
        "chunked chunk_size 0",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=0),
        "`chunk_size` must be >= 1",
    ),
    (
        "chunked chunk_size -3",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=-3),
        "`chunk_size` must be >= 1",
    ),
    (
        "chunked chunk_size float",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=2.0),
        "`chunk_size` must be an integer",
    ),
    (
        "chunked chunk_size bool",
        lambda: att.chunked(_Q, _Q, _V, chunk_size=True),
        "`chunk_size` must be an integer",
    ),
    ("chunked d mismatch", lambda: att.chunked(_Q, np.ones((4, 5)), _V), "last dimension D"),
    ("init D", lambda: LINEAR.init(0, 2), "`D` must be >= 1"),
    ("init dtype", lambda: LINEAR.init(2, 2, dtype=np.int64), "`dtype`"),
    ("init batch", lambda: LINEAR.init(2, 2, batch_shape=[3]), "`batch_shape`"),
    (
        "step state",
        lambda: LINEAR.step((np.zeros((2, 2)), np.zeros(2)), [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]),
        "`state` must be a State",
    ),
    (
        "step phi_q dim",
        lambda: LINEAR.step(LINEAR.init(2, 2), [1.0], [1.0, 1.0], [1.0, 1.0]),
        "`phi_q` must have last dimension D = 2",
    ),
    (
        "step v dim",
        lambda: LINEAR.step(LINEAR.init(2, 2), [1.0, 1.0], [1.0, 1.0], [1.0]),
        "`v` must have last dimension d_v = 2",
    ),
    (
        "step NaN",
        lambda: LINEAR.step(LINEAR.init(2, 1), [np.nan, 1.0], [1.0, 1.0], [1.0]),
        "`phi_q` must be finite",
    ),
    (
        "step batch",
        lambda: LINEAR.step(
            LINEAR.init(2, 1, batch_shape=(3,)),
            np.ones((4, 2)),
            np.ones((4, 2)),
            np.ones((4, 1)),
        ),
        "broadcast",
    ),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises(call, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# ---------------------------------------------------------------------------
# Public surface and the documentation's example
# ---------------------------------------------------------------------------


def test_every_public_name_is_documented():
    for name in att.__all__:
        obj = getattr(att, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    assert kernelcheck.attention is att


def test_facade_exports_the_implementation():
    from kernelcheck._src.attention import registry
    from kernelcheck._src.attention.families.softmax import forms

    assert att.softmax is forms.softmax
    assert att.FORMS is registry.FORMS
    for name in att.__all__:
        obj = getattr(att, name)
        where = getattr(obj, "__module__", type(obj).__module__)
        assert where.startswith("kernelcheck._src.attention."), (name, where)


def test_taylor_features_example():
    """The doc example of docs/attention.md: Taylor attention approaches softmax."""
    rng = _rng(18)
    Q, K, V = rng.normal(size=(3, 6, 4)) * 0.4
    s = 4**-0.25
    errs = []
    for M in (1, 2, 4, 8):
        phi = exp(Linear(), order=M).features()
        errs.append(np.abs(att.parallel(phi(Q * s), phi(K * s), V) - att.softmax(Q, K, V)).max())
    assert errs == sorted(errs, reverse=True)


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
# The division by the normalisers: a true division wherever they are
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sq, sk", [(1e-160, 1e-160), (1e154, 5e153)])
def test_forms_divide_normalisers_at_the_ends_of_the_range(sq, sk):
    """Normalisers below the smallest normal number (features ~1e-160: products ~1e-320)
    have no finite reciprocal, normalisers near the top of the range (~5e307) a subnormal
    one: every form divides, and the quotient is the weighted mean it must be."""
    n = 3
    pq, pk = np.full((n, 1), sq), np.full((n, 1), sk)
    V = np.array([[0.25], [0.5], [1.0]])
    expected = np.cumsum(V, axis=0) / np.arange(1, n + 1)[:, None]
    for out in (
        att.parallel(pq, pk, V, causal=True),
        att.chunked(pq, pk, V, chunk_size=2),
        att.recurrent(pq, pk, V),
    ):
        assert np.allclose(out, expected, rtol=8 * U, atol=0)
    bidi = att.parallel(pq[:1], pk[:1], V[:1])
    assert np.allclose(bidi, V[:1], rtol=8 * U, atol=0)


# ---------------------------------------------------------------------------
# The gated chunked form's decay mask: a product of decays, or exp of differences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gate", [0.5, 4.5e-5, 1e-30])
def test_gated_chunked_mask_both_ways_within_the_bound(gate, monkeypatch):
    """Groups decaying by e^-50 (gates 0.5) are scaled once per group; chunks decaying by
    e^-330 in groups of e^-700 (gates 4.5e-5) form the mask as exp(lc_i) exp(-lc_j);
    chunks decaying by e^-2200 (gates 1e-30: the factors would underflow and overflow,
    0 * inf) exponentiate the differences.  All stay within the bound of the recurrence,
    and forcing the differences everywhere changes the result only within it."""
    from kernelcheck._src.attention.common.decays import Decays, GroupScales, factor_range

    rng = _rng(41)
    n = 70
    pq, pk = rng.random((2, n, 4)) + 0.05
    V = rng.normal(size=(n, 3))
    g = np.full(n, gate) * rng.uniform(0.9, 1.0, n)
    plan = [(0, 2, 32), (64, 1, 6)]  # the plan of n = 70 in chunks of 32 (one group here)
    assert _att.group_chunks(1, 32, 4, 4, True, 2) >= 2
    scaled = GroupScales.of(np.log(g), plan, np.dtype(np.float64)) is not None
    assert scaled == (gate == 0.5)
    dec = Decays(np.log(g), 32)
    assert (dec.full.growth is None) == (32 * -np.log(gate) > factor_range(np.float64))
    out = att.gated_chunked(pq, pk, V, g, chunk_size=32)
    ref = att.gated_recurrent(pq, pk, V, g)
    bound = 2 * att.gated_error_bound(pq, pk, V, g)
    assert np.all(np.abs(out - ref) <= bound)
    monkeypatch.setattr(_dec, "factor_range", lambda dtype: -1.0)  # never the product
    assert np.all(np.abs(att.gated_chunked(pq, pk, V, g, chunk_size=32) - ref) <= bound)


# ---------------------------------------------------------------------------
# Masked scores never reach a row; the gated form's group-scaled way and its fallback
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["chunked", "parallel", "gated_chunked", "gated_parallel"])
@pytest.mark.parametrize("normalize", [False, True])
def test_a_score_overflowing_above_the_diagonal_changes_no_row(form, normalize):
    """``a_0 . b_1 = 1e400`` overflows, but row 0 sees only key 0 (score 1) and row 1
    sees ``a_1 . b_0 = 1e-400`` (0) and ``a_1 . b_1 = 1``: the rows are 1 and 2, as the
    recurrence computes them.  A masked score multiplied by 0 was NaN (inf * 0) and
    failed valid input with an overflow error."""
    a = np.array([[1e200], [1e-200]])
    b = np.array([[1e-200], [1e200]])
    V = np.array([[1.0], [2.0]])
    g = np.array([0.9, 0.9])
    run = {
        "chunked": lambda: att.chunked(a, b, V, normalize=normalize),
        "parallel": lambda: att.parallel(a, b, V, causal=True, normalize=normalize),
        "gated_chunked": lambda: att.gated_chunked(a, b, V, g, normalize=normalize),
        "gated_parallel": lambda: att.gated_parallel(a, b, V, g, normalize=normalize),
    }[form]
    # each row is a handful of roundings: a product and a sum per score, the decays'
    # 10 u (two exp and two products), a quotient; within gamma_16 relative, where
    # the forms' a-priori bounds here are far looser (they count the whole chunk)
    rtol = gamma(16, np.float64)
    if "gated" in form:
        ref = att.gated_recurrent(a, b, V, g, normalize=normalize)
    else:
        ref = att.recurrent(a, b, V, normalize=normalize)
    for out in (ref, run()):
        assert np.all(np.abs(out - [[1.0], [2.0]]) <= rtol * np.array([[1.0], [2.0]]))


def _scaled_results(monkeypatch) -> list:
    """Record what each group's group-scaled way returned (False: computed again)."""
    seen: list = []
    real = _att._GroupJob.scaled

    def spy(self, *args):
        ok = real(self, *args)
        seen.append(ok)
        return ok

    monkeypatch.setattr(_att._GroupJob, "scaled", spy)
    return seen


def _gated_case(seed: int, qscale: float, kscale: float, n: int = 200):
    rng = _rng(seed)
    pq = qscale * (rng.random((n, 4)) + 0.5)
    pk = kscale * (rng.random((n, 4)) + 0.5)
    V = rng.normal(size=(n, 3))
    g = rng.uniform(0.5, 0.6, n)  # groups decaying by e^-40 and more: growth up to e^40
    return pq, pk, V, g


@pytest.mark.parametrize(
    "qscale, kscale, falls_back",
    [
        (1.0, 1.0, False),  # the usual case: every group scaled
        (1e-300, 1e250, True),  # a_i exp(LC_i) underflows: its error would grow by e^40
        (1e-10, 1e300, True),  # b_j exp(-LC_j) overflows: the scaled state is not finite
    ],
)
@pytest.mark.parametrize("threads", [False, True])
def test_gated_chunked_scaled_groups_and_their_fallback_within_the_bound(
    qscale, kscale, falls_back, threads, monkeypatch
):
    """Every group is scaled unless a scaled query underflows or the scaled state
    overflows; those groups are computed again the chunk-local way.  Either way the
    result is within the error bound of the recurrence, normalised or not (the rows
    are about 1e-50 and 1e292 in the two extreme cases: each is a valid input), and
    on worker threads (many small groups) it is the inline result bit for bit."""
    pq, pk, V, g = _gated_case(77, qscale, kscale, n=192)
    if threads:  # groups of 6 chunks of 8 tokens (1760 or 1920 bytes a chunk), 4 groups:
        # each still decays by about e^-27, enough for the extreme cases to fall back
        monkeypatch.setattr(_att, "CACHE_BYTES", 11520)
        inline = {nz: att.gated_chunked(pq, pk, V, g, chunk_size=8, normalize=nz)
                  for nz in (False, True)}  # fmt: skip
        monkeypatch.setattr(_att, "_PARALLEL_WORK", 1)
    seen = _scaled_results(monkeypatch)
    for normalize in (False, True):
        seen.clear()
        out = att.gated_chunked(pq, pk, V, g, chunk_size=8, normalize=normalize)
        ways = list(seen)  # the bound below runs the products too
        ref = att.gated_recurrent(pq, pk, V, g, normalize=normalize)
        bound = 2 * att.gated_error_bound(pq, pk, V, g, normalize=normalize)
        # scaled despite the underflow, the rows were 1e20 bounds off (normalisers 0)
        assert np.all(np.isfinite(out)) and np.all(np.abs(out - ref) <= bound)
        assert ways and (False in ways) == falls_back and (True in ways) != falls_back
        if threads:
            assert len(ways) > 2 and np.array_equal(out, inline[normalize])


def test_group_scales_are_each_groups_own_cumulative_log_gates():
    """The factors restart at every group of the plan (equal groups first, then a
    shorter one and the last partial chunk), batched; None in float32 and beyond the
    range, where the chunk-local way is used."""
    from kernelcheck._src.attention.common.decays import GroupScales, factor_range

    plan = [(0, 3, 4), (12, 3, 4), (24, 2, 4), (32, 1, 3)]  # n = 35 in chunks of 4
    lg = -_rng(5).uniform(0.0, 1.0, (2, 35))
    sc = GroupScales.of(lg, plan, np.dtype(np.float64))
    for r0, k, c in plan:
        lc = np.cumsum(lg[..., r0 : r0 + k * c], axis=-1)
        up, down, last = sc.group(r0, r0 + k * c, k, c)
        assert np.array_equal(up, np.exp(lc).reshape(2, k, c))
        assert np.array_equal(down, np.exp(-lc).reshape(2, k, c))
        assert np.array_equal(last, np.exp(lc[..., -1]))
    assert GroupScales.of(lg, plan, np.dtype(np.float32)) is None
    deep = lg * (factor_range(np.float64) / 5.0)  # a group of 12 tokens beyond the range
    assert GroupScales.of(deep, plan, np.dtype(np.float64)) is None
