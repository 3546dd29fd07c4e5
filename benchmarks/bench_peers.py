"""Causal linear attention: kernelcheck's chunked form against the common peer.

The peer is the plain NumPy transcription of the approach of common PyTorch
implementations of causal linear attention: materialise every prefix state
``S_i = sum_{j <= i} phi(k_j) v_j^T`` with a cumulative sum of outer products
(an (n, D, d_v) array) and the normaliser states ``z_i`` with a cumulative sum,
then contract with ``phi(q_i)``.  It does ``O(n D d_v)`` work and holds
``O(n D d_v)`` memory.  :func:`kernelcheck.attention.chunked` does the same
work in chunks, with ``O(C (D + d_v) + D d_v)`` memory per chunk, and
:func:`kernelcheck.attention.parallel` (causal) by blocked prefix sums.

Group ``causal-linear``: n = 4096, D = 64 positive random features of
exp(q.k / sqrt d), d = d_v = 64.  Each benchmark checks that its output agrees
with the other computation within twice the a-priori rounding-error bound
``kernelcheck.attention.linear_error_bound`` (each output is within it of the
exact value), so under ``--benchmark-disable`` (n = 256) the file is a
correctness test.

Reproduce: ``python3 -m pytest benchmarks/bench_peers.py --benchmark-only``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck._src.features.random import PositiveRandomFeatures
from kernelcheck.attention import chunked, linear_error_bound, parallel

D_MODEL, D_FEATURES = 64, 64


def cumsum_causal_linear_attention(phi_q: np.ndarray, phi_k: np.ndarray, V: np.ndarray):
    """The peer: prefix states by cumulative sums of outer products.

    ``S = cumsum_j phi(k_j) v_j^T`` (n, D, d_v), ``z = cumsum_j phi(k_j)`` (n, D),
    ``a_i = phi(q_i)^T S_i / phi(q_i) . z_i``.
    """
    S = np.cumsum(phi_k[:, :, None] * V[:, None, :], axis=0)
    z = np.cumsum(phi_k, axis=0)
    num = (phi_q[:, None, :] @ S)[:, 0, :]  # n batched (1, D) @ (D, d_v) products, as bmm
    den = np.sum(phi_q * z, axis=1)
    return num / den[:, None]


def _inputs(n: int):
    rng = np.random.default_rng(n)
    Q, K, V = rng.standard_normal((3, n, D_MODEL))
    phi = PositiveRandomFeatures(D_MODEL, D_FEATURES, seed=1, scale=1.0 / np.sqrt(D_MODEL))
    return phi(Q), phi(K), V


def _check(out: np.ndarray, ref: np.ndarray, phi_q, phi_k, V) -> None:
    bound = 2.0 * linear_error_bound(phi_q, phi_k, V, causal=True)
    diff = np.abs(out - ref)
    assert (diff <= bound).all(), f"outputs differ by {diff.max():.3g}, beyond the bound"


@pytest.mark.benchmark(group="causal-linear")
@pytest.mark.parametrize("chunk_size", [64, 256])
def test_causal_linear_kernelcheck_chunked(benchmark, size_for, chunk_size):
    phi_q, phi_k, V = _inputs(size_for(4096, 256))
    out = benchmark(chunked, phi_q, phi_k, V, chunk_size=chunk_size)
    _check(out, cumsum_causal_linear_attention(phi_q, phi_k, V), phi_q, phi_k, V)


@pytest.mark.benchmark(group="causal-linear")
def test_causal_linear_kernelcheck_parallel_prefix(benchmark, size_for):
    phi_q, phi_k, V = _inputs(size_for(4096, 256))
    out = benchmark(parallel, phi_q, phi_k, V, causal=True)
    _check(out, cumsum_causal_linear_attention(phi_q, phi_k, V), phi_q, phi_k, V)


@pytest.mark.benchmark(group="causal-linear")
def test_causal_linear_cumsum_peer(benchmark, size_for):
    phi_q, phi_k, V = _inputs(size_for(4096, 256))
    out = benchmark(cumsum_causal_linear_attention, phi_q, phi_k, V)
    _check(out, chunked(phi_q, phi_k, V), phi_q, phi_k, V)


# ---------------------------------------------------------------------------
# Figure for docs/performance.md: python3 benchmarks/bench_peers.py [OUT_DIR]
# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    """Measure chunked, causal parallel and the cumulative-sum peer over n; write the figure.

    n = 1024 .. 16384, d = d_v = 64, D = 64, one BLAS thread, CPU time, all three in
    the same run; the cost model of each is
    ``kernelcheck.attention.cost_model`` (the peer does the prefix-sum work of
    the causal parallel form).
    """
    import sys
    from pathlib import Path

    from threadpoolctl import threadpool_limits

    from kernelcheck.attention import cost_model
    from kernelcheck.scaling import geometric_sizes, measure, plot_measurements

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "docs/img")
    sizes = geometric_sizes(1024, 16384)
    cache = {}

    def make(n):
        if n not in cache:
            cache.clear()
            cache[n] = _inputs(n)
        return cache[n]

    def flops(form, causal=True, chunk=64):
        return lambda n: float(
            cost_model(form, n, D_MODEL, D_FEATURES, D_MODEL, chunk, causal=causal).flops
        )

    common = dict(make_input=make, repeats=5, statistic="min", clock="cpu", warmup=2)
    with threadpool_limits(1):
        runs = [
            measure(
                lambda a, b, c: chunked(a, b, c, chunk_size=64),
                sizes,
                cost=flops("chunked"),
                label="kernelcheck chunked (C = 64)",
                **common,
            ),
            measure(
                lambda a, b, c: parallel(a, b, c, causal=True),
                sizes,
                cost=flops("parallel"),
                label="kernelcheck parallel, causal",
                **common,
            ),
            measure(
                cumsum_causal_linear_attention,
                sizes,
                cost=flops("parallel"),
                label="cumsum-of-outer-products peer",
                **common,
            ),
        ]
    path = plot_measurements(
        runs,
        out / "causal-linear.png",
        title=f"causal linear attention, d = d_v = {D_MODEL}, D = {D_FEATURES}",
    )
    for m in runs:
        print(m.to_markdown())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
