"""Benchmarks of the attention forms, each next to its floor or peer (claims C2, C3, C14).

Groups (``benchmark.group``), each measured in the same run:

* ``parallel-vs-gemm`` (n = 8192, D = 256, d_v = 64): bidirectional
  :func:`~kernelcheck.attention.parallel` against its GEMM floor, the two
  matrix products ``phi_q @ (phi_k^T @ V)`` alone.  Target: within 1.5x.
* ``chunked-vs-parallel`` (same sizes): causal
  :func:`~kernelcheck.attention.chunked` (default chunk size) against
  bidirectional ``parallel``.  Target: within 3x.
* ``causal-16k`` (n = 16384, d = d_v = 64, D = 256): causal
  :func:`~kernelcheck.attention.softmax` against causal ``chunked``.
  Target: chunked at least 10x faster.
* ``gated-16k`` (n = 16384, D = d_v = 64): :func:`~kernelcheck.attention.gated_chunked`
  (per-token gates, unnormalised) against plain ``chunked`` (unnormalised).
  Target: within 1.5x.
* the peak memory of :func:`~kernelcheck.attention.gated_parallel` (tracemalloc)
  at two sizes: a block of query rows of the decay mask at a time, never n x n
  (asserted: it is a deterministic memory claim, not a time).

Features are positive (``phi`` entries in [0, 1), as for positive random
features), so every normaliser is positive.  Every benchmark also checks its
result against an independent computation within the a-priori error bound of
:func:`~kernelcheck.attention.linear_error_bound` or
:func:`~kernelcheck.attention.softmax_error_bound`, so under
``--benchmark-disable`` (small n, one run) the file is a correctness test.
The deterministic cost claim (state size independent of n) is asserted here
too; times are only measured.

Reproduce: ``python3 -m pytest benchmarks/bench_attention.py --benchmark-only``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import attention as att

D_FEAT = 256
D_V = 64
D_KEY = 64


def _features(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.random((n, D_FEAT)), rng.random((n, D_FEAT)), rng.standard_normal((n, D_V))


def _rounds(benchmark, fast: bool) -> dict:
    """pedantic() settings: enough rounds for a stable minimum, one under --benchmark-disable."""
    if benchmark.disabled:
        return {"rounds": 1, "iterations": 1}
    return {"rounds": 15 if fast else 3, "iterations": 1, "warmup_rounds": 1}


# ----- parallel vs its GEMM floor ---------------------------------------------


@pytest.mark.benchmark(group="parallel-vs-gemm")
def test_parallel_bidirectional(benchmark, size_for):
    pq, pk, V = _features(size_for(8192, 512), 0)
    out = benchmark.pedantic(att.parallel, (pq, pk, V), **_rounds(benchmark, True))
    # independent: the normaliser as its own matrix-vector product
    ref = (pq @ (pk.T @ V)) / (pq @ pk.sum(axis=0))[:, None]
    assert (np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V)).all()


@pytest.mark.benchmark(group="parallel-vs-gemm")
def test_parallel_gemm_floor(benchmark, size_for):
    pq, pk, V = _features(size_for(8192, 512), 0)

    def floor():
        return pq @ (pk.T @ V)

    num = benchmark.pedantic(floor, **_rounds(benchmark, True))
    assert num.shape == V.shape


# ----- chunked causal vs parallel bidirectional --------------------------------


@pytest.mark.benchmark(group="chunked-vs-parallel")
def test_chunked_causal(benchmark, size_for):
    pq, pk, V = _features(size_for(8192, 400), 1)
    out = benchmark.pedantic(att.chunked, (pq, pk, V), **_rounds(benchmark, True))
    ref = att.parallel(pq, pk, V, causal=True)  # prefix sums: another summation order
    assert (np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V, causal=True)).all()


@pytest.mark.benchmark(group="chunked-vs-parallel")
def test_parallel_bidirectional_peer(benchmark, size_for):
    pq, pk, V = _features(size_for(8192, 400), 1)
    out = benchmark.pedantic(att.parallel, (pq, pk, V), **_rounds(benchmark, True))
    assert out.shape == V.shape


# ----- causal softmax vs chunked at n = 16384 ------------------------------------


@pytest.mark.benchmark(group="causal-16k")
def test_softmax_causal_16k(benchmark, size_for):
    n = size_for(16384, 600)
    rng = np.random.default_rng(2)
    Q, K, V = rng.standard_normal((3, n, D_KEY))
    out = benchmark.pedantic(att.softmax, (Q, K, V), {"causal": True}, **_rounds(benchmark, False))
    # independent check of a few rows: the direct formula on the prefix j <= i
    rows = [0, 1, n // 2, n - 1]
    bound = att.softmax_error_bound(Q, K, V, causal=True)
    for i in rows:
        s = K[: i + 1] @ Q[i] / math.sqrt(D_KEY)
        w = np.exp(s - s.max())
        ref = (w @ V[: i + 1]) / w.sum()
        assert (np.abs(out[i] - ref) <= 2 * bound[i]).all()


@pytest.mark.benchmark(group="causal-16k")
def test_chunked_causal_16k(benchmark, size_for):
    pq, pk, V = _features(size_for(16384, 600), 3)
    out = benchmark.pedantic(att.chunked, (pq, pk, V), **_rounds(benchmark, True))
    last = (pq[-1] @ (pk.T @ V)) / (pq[-1] @ pk.sum(axis=0))  # the last row sees every key
    bound = att.linear_error_bound(pq, pk, V, causal=True)[-1]
    assert (np.abs(out[-1] - last) <= 2 * bound).all()


# ----- gated chunked vs plain chunked (C20) ----------------------------------------

D_GATED = 64


def _gated(n: int, seed: int):
    rng = np.random.default_rng(seed)
    pq, pk = rng.random((2, n, D_GATED))
    return pq, pk, rng.standard_normal((n, D_V)), rng.uniform(0.9, 1.0, size=n)


@pytest.mark.benchmark(group="gated-16k")
def test_gated_chunked_16k(benchmark, size_for):
    pq, pk, V, g = _gated(size_for(16384, 300), 5)
    out = benchmark.pedantic(att.gated_chunked, (pq, pk, V, g), **_rounds(benchmark, True))
    ref = att.gated_recurrent(pq[:200], pk[:200], V[:200], g[:200])  # another order
    bound = att.gated_error_bound(pq[:200], pk[:200], V[:200], g[:200])
    assert (np.abs(out[:200] - ref) <= 2 * bound).all()


@pytest.mark.benchmark(group="gated-16k")
def test_plain_chunked_16k_peer(benchmark, size_for):
    pq, pk, V, _ = _gated(size_for(16384, 300), 5)
    out = benchmark.pedantic(
        att.chunked, (pq, pk, V), {"normalize": False}, **_rounds(benchmark, True)
    )
    assert out.shape == V.shape


def test_gated_parallel_forms_one_block_of_the_mask_at_a_time():
    """C20 (deterministic memory claim): the peak allocation of gated_parallel beyond its
    inputs and output is bounded by the block budget, the same at n = 4096 as at 8192,
    far below the n x n mask (134 MB at n = 4096)."""
    import tracemalloc

    from kernelcheck._src.attention.blocking import BLOCK_ELEMENTS

    peaks = {}
    for n in (4096, 8192):
        pq, pk, V, g = _gated(n, 6)
        pq, pk, V, g = pq[:, :8], pk[:, :8], V[:, :4], g  # small D and d_v: the mask dominates
        tracemalloc.start()
        out = att.gated_parallel(pq, pk, V, g)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        peaks[n] = peak - out.nbytes
    # a few block-sized temporaries (scores, exponents, mask) of 8 bytes per entry
    budget = 6 * BLOCK_ELEMENTS * 8
    assert all(p <= budget for p in peaks.values()), peaks
    assert peaks[8192] < 8192 * 8192 * 8 / 4


# ----- deterministic cost claim --------------------------------------------------


def test_recurrent_state_memory_constant_in_n():
    """C11 (deterministic): the state after n tokens has the same bytes for every n."""
    rng = np.random.default_rng(4)
    sizes = set()
    for n in (1, 64, 512):
        pq, pk = rng.random((2, n, 16))
        _, state = att.recurrent(pq, pk, rng.standard_normal((n, 8)), return_state=True)
        sizes.add(state.nbytes)
    assert sizes == {8 * 16 * (8 + 1)}
    assert att.cost_model("recurrent", 10**6, D_KEY, D_FEAT, D_V).state_size == D_FEAT * (D_V + 1)
