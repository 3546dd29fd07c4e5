"""Benchmarks of the attention forms, each next to its floor or peer (claims C2, C3, C14).

Groups (``benchmark.group``), each measured in the same run:

* ``parallel-vs-gemm`` (n = 8192, D = 256, d_v = 64): bidirectional and
  causal :func:`~kernelcheck.attention.parallel` against their GEMM floor,
  the two matrix products ``phi_q @ (phi_k^T @ V)`` alone.  Targets: within
  1.15x bidirectional, 1.5x causal.
* ``causal-after-blas`` (same sizes): causal ``parallel`` after another
  causal call, right after the floor and 0.3 s after it (OpenBLAS's threads
  spin after a threaded product), each over the floor's minimum.
* ``causal-one-thread`` (same sizes): the floor, the causal forms' bare
  products (no check, no normaliser) and causal ``chunked``, each with BLAS at
  one thread: the bare products bound the forms from below (for information).
* ``chunked-vs-parallel`` (same sizes): causal
  :func:`~kernelcheck.attention.chunked` (default chunk size) against
  bidirectional ``parallel``.  Target: within 1.5x.
* ``causal-16k`` (n = 16384, d = d_v = 64, D = 256): causal
  :func:`~kernelcheck.attention.softmax` against causal ``chunked``.
  Target: chunked at least 20x faster (the point of C3).
* ``recurrent-per-token`` (D = 256, d_v = 64; n = 1024, 4096, 16384):
  :func:`~kernelcheck.attention.recurrent`; the time per token is reported
  for information, the constant cost per token is asserted from the cost
  model (C3, C11).
* ``memory-65536`` (n = 65536, D = 256, d_v = 64): causal ``chunked`` and
  causal ``parallel``, timed, with their peak allocation beyond the inputs
  (``tracemalloc``, one traced call outside the timed ones) in
  ``extra_info``: asserted to be the output and its normalisers plus a few
  blocks, the same at n / 4 (a deterministic memory claim, not a time).
* ``gated-16k`` (n = 16384, D = d_v = 64): :func:`~kernelcheck.attention.gated_chunked`
  (per-token gates, unnormalised) against plain ``chunked`` (unnormalised).
  Target: within 1.5x.
* ``channel-gated-8k`` (n = 8192, D = d_v = 64):
  :func:`~kernelcheck.attention.channel_gated_chunked` in float64, GLA's key
  gates alone and with RWKV-6's bonus, against flash-linear-attention's
  ``naive_chunk_rwkv6`` and ``naive_chunk_simple_gla`` (fla-core 0.6 has no
  naive chunked GLA; both cast their inputs to float32, so they run float32
  arithmetic on float64 tensors).  Target: kernelcheck at least as fast.
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


@pytest.mark.benchmark(group="parallel-vs-gemm")
def test_parallel_normaliser_products(benchmark, size_for):
    """The floor's products with the normalisers, no check, no division (for information).

    ``[V^T phi_k; z^T] phi_q^T`` with ``z = phi_k^T 1`` (a GEMV): the products
    bidirectional ``parallel`` makes, so its ratio to the floor is what the
    normalisers alone cost on this BLAS; the rest of the form's is its check
    and division.
    """
    pq, pk, V = _features(size_for(8192, 512), 0)

    def products():
        T = np.empty((V.shape[1] + 1, pk.shape[1]))
        T[:-1] = V.T @ pk
        T[-1] = np.ones(pk.shape[0]) @ pk
        return T @ pq.T

    Et = benchmark.pedantic(products, **_rounds(benchmark, True))
    # independent: numerators and normalisers of the untransposed products
    ref = np.hstack([pq @ (pk.T @ V), (pq @ pk.sum(axis=0))[:, None]])
    tol = 2 * att.linear_error_bound(
        pq, pk, np.hstack([V, np.ones((V.shape[0], 1))]), normalize=False
    )
    assert (np.abs(Et.T - ref) <= tol).all()


@pytest.mark.benchmark(group="parallel-vs-gemm")
def test_parallel_causal(benchmark, size_for):
    pq, pk, V = _features(size_for(8192, 512), 0)
    kw = {"causal": True}
    out = benchmark.pedantic(att.parallel, (pq, pk, V), kw, **_rounds(benchmark, True))
    G = np.tril(pq @ pk.T)  # independent: the masked Gram matrix
    ref = (G @ V) / G.sum(axis=1)[:, None]
    assert (np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V, causal=True)).all()


@pytest.mark.benchmark(group="causal-after-blas")
def test_causal_after_blas(benchmark, size_for):
    """Causal ``parallel`` after another causal call, right after the floor, 0.3 s after it.

    OpenBLAS's threads spin for a while after a threaded product and share the
    cores with the causal forms' worker threads; the extra columns
    (benchmarks/causal_after_blas.py, minima over 15 rounds of its own) give the
    three situations next to the floor's minimum from the same rounds.
    """
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # the script beside this file, not a package
        sys.path.insert(0, here)
    from causal_after_blas import measure

    pq, pk, V = _features(size_for(8192, 512), 0)
    kw = {"causal": True}
    out = benchmark.pedantic(att.parallel, (pq, pk, V), kw, **_rounds(benchmark, True))
    G = np.tril(pq @ pk.T)
    ref = (G @ V) / G.sum(axis=1)[:, None]
    assert (np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V, causal=True)).all()

    def situations() -> dict:
        times = measure(pq, pk, V, rounds=1 if benchmark.disabled else 15)
        floor = min(times["floor"])
        return {
            f"{name} (x floor)": round(min(t) / floor, 2)
            for name, t in times.items()
            if name != "floor"
        } | {"floor_ms": round(1e3 * floor, 2)}

    if hasattr(benchmark, "derived"):  # benchmarks/report.py: measured after its rounds
        benchmark.derived(situations)
    else:
        assert all(v > 0 for v in situations().values())


# ----- causal on one thread: the bare products bound the forms from below ------------

_ONE_THREAD: list = []


def _one_blas_thread():
    """A context with BLAS at one thread (threadpoolctl's controller, made once)."""
    from threadpoolctl import ThreadpoolController

    if not _ONE_THREAD:
        _ONE_THREAD.append(ThreadpoolController())
    return _ONE_THREAD[0].limit(limits=1, user_api="blas")


@pytest.mark.benchmark(group="causal-one-thread")
@pytest.mark.parametrize("member", ["floor", "bare products", "chunked"])
def test_causal_one_thread(benchmark, size_for, member):
    """The causal products on one BLAS thread, against the GEMM floor on one thread.

    ``bare products`` is
    :func:`~kernelcheck._src.attention.common.blocking.chunked_products` at the
    default chunk size: the unnormalised causal rows ``tril(phi_q phi_k^T) V``
    and the running sum of states, with no check, no normaliser and no
    division.  ``chunked`` and causal ``parallel`` run these products and
    more, so on one thread its ratio to the floor bounds theirs from below;
    on two threads they scale no better than the floor's two GEMMs.  For
    information: no target.
    """
    from kernelcheck._src.attention.common.blocking import auto_chunk_size, chunked_products

    pq, pk, V = _features(size_for(8192, 400), 1)
    C = auto_chunk_size(pq.shape[-1])
    calls = {
        "floor": lambda: pq @ (pk.T @ V),
        "bare products": lambda: chunked_products(pq, pk, V, C)[0],
        "chunked": lambda: att.chunked(pq, pk, V),
    }

    def one_thread():
        with _one_blas_thread():
            return calls[member]()

    out = benchmark.pedantic(one_thread, **_rounds(benchmark, True))
    if member == "floor":
        assert out.shape == V.shape
        return
    # independent: the last row sees every key, a middle row the keys up to it
    normalize = member == "chunked"
    bound = att.linear_error_bound(pq, pk, V, causal=True, normalize=normalize)
    for i in (pq.shape[0] // 2, pq.shape[0] - 1):
        w = pk[: i + 1] @ pq[i]
        ref = (w @ V[: i + 1]) / (w.sum() if normalize else 1.0)
        assert (np.abs(out[i] - ref) <= 2 * bound[i]).all()


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


# ----- recurrent: cost per token constant in n (C3, C11) ---------------------------


@pytest.mark.benchmark(group="recurrent-per-token")
@pytest.mark.parametrize("n", [1024, 4096, 16384])
def test_recurrent_per_token(benchmark, size_for, n):
    n = size_for(n, n // 64)
    pq, pk, V = _features(n, 7)
    out = benchmark.pedantic(att.recurrent, (pq, pk, V), **_rounds(benchmark, False))
    ref = att.chunked(pq, pk, V)
    assert (np.abs(out - ref) <= 2 * att.linear_error_bound(pq, pk, V, causal=True)).all()
    # the deterministic claim: the same work per token at every n
    per_token = att.cost_model("recurrent", n, D_KEY, D_FEAT, D_V).flops_per_token()
    assert per_token == 4 * D_FEAT * (D_V + 1) + D_V
    benchmark.extra_info["tokens"] = n


# ----- peak memory at n = 65536 -------------------------------------------------------


def _peak_beyond_inputs(fn, *args, **kwargs) -> tuple[int, np.ndarray]:
    """Peak bytes ``fn`` allocates (tracemalloc; the inputs exist before) and its result."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


MEMORY_FORMS = {
    "chunked": lambda pq, pk, V: att.chunked(pq, pk, V),
    "parallel causal": lambda pq, pk, V: att.parallel(pq, pk, V, causal=True),
}


@pytest.mark.benchmark(group="memory-65536")
@pytest.mark.parametrize("form", list(MEMORY_FORMS))
def test_peak_memory_65536(benchmark, size_for, form):
    """Peak memory beyond the inputs: the output (n d_v) and its normalisers (n) plus
    a few cache-sized blocks, whatever n is: asserted at n and n / 4."""
    from kernelcheck._src.attention.common.blocking import CACHE_BYTES

    fn = MEMORY_FORMS[form]
    n = size_for(65536, 2048)
    beyond = {}
    for size in (n // 4, n):
        pq, pk, V = _features(size, 8)
        peak, out = _peak_beyond_inputs(fn, pq, pk, V)
        beyond[size] = peak - out.nbytes - 8 * size  # the output and its normalisers
    # the per-worker groups and the reused [V, 1] and row buffers: a few blocks
    blocks = 8 * CACHE_BYTES
    assert all(0 <= b <= blocks for b in beyond.values()), beyond
    benchmark.extra_info.update(
        n=n,
        inputs_MiB=round((pq.nbytes + pk.nbytes + V.nbytes) / 2**20, 1),
        output_MiB=round(out.nbytes / 2**20, 1),
        beyond_output_MiB=round(beyond[n] / 2**20, 2),
        beyond_output_at_n_over_4_MiB=round(beyond[n // 4] / 2**20, 2),
    )
    del out
    benchmark.pedantic(fn, (pq, pk, V), **_rounds(benchmark, False))


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

    from kernelcheck._src.attention.common.blocking import BLOCK_ELEMENTS

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


# ----- per-channel gated chunked vs flash-linear-attention's naive chunked forms (C21) ---

D_CHANNEL = 64


def _channel(n: int, seed: int):
    """GLA-sized heads: queries, keys and values of 64, key gates in (0.9, 1), a bonus."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n, D_CHANNEL)) / 8.0
    V = rng.standard_normal((n, D_CHANNEL))
    logs = np.log(rng.uniform(0.9, 1.0, (n, D_CHANNEL)))
    return q, k, V, logs, rng.standard_normal(D_CHANNEL) / 8.0


def _fla_chunked(family: str, filename: str):
    pytest.importorskip("torch")
    pytest.importorskip("einops")
    from tests.fla_naive import load

    return load(family, filename)


def _check_rows(out, q, k, V, a, u, rows=200):
    """The first rows against the recurrence, within the float32 bound (fla computes in
    float32) plus the float64 reference's own."""
    args = (q[:rows], k[:rows], V[:rows], a[:rows], None, u)
    ref = att.channel_gated_recurrent(*args)
    tol = att.channel_gated_error_bound(*args, dtype="float32") + att.channel_gated_error_bound(
        *args
    )
    assert (np.abs(out[:rows] - ref) <= tol).all()


@pytest.mark.benchmark(group="channel-gated-8k")
def test_channel_gated_chunked_gla_8k(benchmark, size_for):
    """GLA: key gates per channel, float64."""
    q, k, V, logs, _ = _channel(size_for(8192, 256), 8)
    a = np.exp(logs)
    out = benchmark.pedantic(att.channel_gated_chunked, (q, k, V, a), **_rounds(benchmark, True))
    _check_rows(out, q, k, V, a, None)


@pytest.mark.benchmark(group="channel-gated-8k")
def test_channel_gated_chunked_rwkv6_8k(benchmark, size_for):
    """RWKV-6: key gates per channel and the bonus, float64."""
    q, k, V, logs, u = _channel(size_for(8192, 256), 8)
    a = np.exp(logs)
    out = benchmark.pedantic(
        att.channel_gated_chunked, (q, k, V, a, None, u), **_rounds(benchmark, True)
    )
    _check_rows(out, q, k, V, a, u)


@pytest.mark.benchmark(group="channel-gated-8k")
def test_fla_naive_chunk_rwkv6_8k_peer(benchmark, size_for):
    """fla's naive_chunk_rwkv6 (chunks of 32; float64 tensors in, float32 arithmetic inside)."""
    import torch

    fla = _fla_chunked("rwkv6", "chunk_naive.py")
    q, k, V, logs, u = _channel(size_for(8192, 256), 8)
    args = [torch.tensor(x[None, None]) for x in (q, k, V, logs)] + [torch.tensor(u[None])]
    out = benchmark.pedantic(fla.naive_chunk_rwkv6, args, **_rounds(benchmark, True))
    _check_rows(out[0, 0].double().numpy(), q, k, V, np.exp(logs), u)


@pytest.mark.benchmark(group="channel-gated-8k")
def test_fla_naive_chunk_simple_gla_8k_peer(benchmark, size_for):
    """fla's naive_chunk_simple_gla (one gate per token and head; chunks of 64; float32 inside)."""
    import torch

    fla = _fla_chunked("simple_gla", "naive.py")
    q, k, V, logs, _ = _channel(size_for(8192, 256), 8)
    g = logs[:, 0]
    args = [torch.tensor(x[None, :, None]) for x in (q, k, V, g)]
    out, _ = benchmark.pedantic(
        fla.naive_chunk_simple_gla, args, {"scale": 1.0}, **_rounds(benchmark, True)
    )
    a = np.repeat(np.exp(g)[:, None], D_CHANNEL, axis=1)
    _check_rows(out[0, :, 0].double().numpy(), q, k, V, a, None)


def test_channel_gated_recurrent_cost_per_token_constant_in_n():
    """C3, C11, C21 (deterministic): the recurrent form's flops per token and state, every n."""
    costs = [att.cost_model("channel_gated_recurrent", n, D_KEY, 64, 64) for n in (1, 10**3, 10**6)]
    assert {c.flops_per_token() for c in costs} == {6 * 64 * 64 + 3 * 64 + 2 * 64}
    assert {c.state_size for c in costs} == {64 * 64}


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
